"""``vsense-offline simulate``: record times as ``k / rate`` without float noise, and how a
``--load csv`` history lines up with ``--warmup`` (issue 37, item 6), through the CLI."""

import csv
from pathlib import Path

import numpy as np
import pytest

from offline.cli import main

BEAM = Path(__file__).resolve().parents[1] / "examples" / "my_beam.toml"  # 1,000 samples/s


def _column(path, name) -> tuple[list, np.ndarray]:
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    i = rows[0].index(name)
    return [r[0] for r in rows[1:]], np.array([float(r[i]) for r in rows[1:]])


def test_times_are_k_over_rate_and_csv_load_starts_with_the_warmup(tmp_path, capsys):
    # a force history: 0 N until 0.3 s, 10 N from 0.3 s on (a step at a known CSV time)
    f = tmp_path / "forces.csv"
    tt = np.arange(0, 1.0001, 0.0005)
    np.savetxt(f, np.column_stack([tt, np.where(tt >= 0.3, 10.0, 0.0)]), delimiter=",",
               header="time,F07", comments="", fmt="%.10g")
    out = tmp_path / "run"
    assert main(["simulate", str(BEAM), "--load", "csv", "--csv", str(f), "--duration", "0.5",
                 "--warmup", "0.2", "--seed", "3", "-o", str(out), "--quiet"]) == 0
    times, F = _column(f"{out}_truth.csv", "F07")
    # the times as written: the shortest text of k / 1000 (no 0.0009999999999998899)
    assert times[:4] == ["0.0", "0.001", "0.002", "0.003"]
    assert all(float(x) == k / 1000.0 for k, x in enumerate(times))  # exact, by definition
    # the CSV's time 0 is the start of the 0.2 s warm-up: its step at 0.3 s comes at record
    # time 0.1 s (sample 100); exact samples of a step, no tolerance needed beyond float
    assert np.all(F[:100] == 0.0) and F[100] == pytest.approx(10.0, abs=1e-12)
    assert np.all(F[100:] == pytest.approx(10.0, abs=1e-12))
    mt, _ = _column(f"{out}_measurement.csv", "d_tip")
    assert mt == times


def test_modelfile_doc_lists_the_adc_row_rates():
    """docs/modelfile.md, where `[estimator] rate` is documented, tabulates the ADS1256's
    row rates per channel count: the same numbers as edge.hw.ads1256_spec.row_rates
    (printed to 6 significant digits: relative tolerance 1e-5)."""
    from edge.hw.ads1256_spec import row_rates

    doc = (Path(__file__).resolve().parents[1] / "docs" / "modelfile.md").read_text()
    assert "`[estimator] rate` on the device's ADC" in doc
    for n in (1, 2, 3, 4, 8):
        line = next(ln for ln in doc.splitlines() if ln.startswith(f"| {n} | ")
                    and "," in ln)
        vals = [float(x.replace(",", "")) for x in line.split("|")[2].split(", ")]
        ref = [v for d, v in row_rates(n).items() if d >= 100]
        assert vals == pytest.approx(ref, rel=1e-5), n
