"""``build --record`` on a model whose sensor is a strain gauge. The records' transfer
functions (offline/load/learn.py ``whittle_of_records``, the unit check of
offline/load/units.py and the observability count) took the gauge's kind index (3) for a
derivative order, so a gauge was read as the second derivative of its strain: a girder
written from the docs had its record refused as "9.41e-06 times the response the model
predicts" (exit 2). A gauge reads the displacements (``edge.kinds.KIND_ORDER``)."""

import dataclasses
import tomllib
from pathlib import Path

import numpy as np
import pytest

from edge.csvio import read_table
from offline.cli import main as offline_main
from offline.limit.model import model_limit, noise_std
from offline.limit.transfer import modal_model
from offline.load import declared_load_model
from offline.load.observability import blind_loads_warning
from offline.load.zoo import STRIP, ZOO, record
from offline.model import (build_fe_model, load_model_file, resolve_dofs, sensor_probe,
                           spec_from_dict)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GAUGE = """[[sensors]]
name = "eps_g"
kind = "strain"
unit = "microstrain"
at = [0.5, 0.0, 0.005]             # top fibre at mid-length (a reduction master node)
noise = 0.01
"""


@pytest.mark.slow
def test_a_gauge_record_is_learned_at_its_level(tmp_path, capsys):
    text = (EXAMPLES / "strain_beam.toml").read_text()
    start = text.index("[[sensors]]")
    end = text.index("[[forces]]")
    model = tmp_path / "gauge_beam.toml"
    model.write_text(text[:start] + GAUGE + "\n" + text[end:])
    # the declared load (10 N RMS, 2-100 Hz) on the full model, through the ADS1256
    assert offline_main(["simulate", str(model), "--rms", "10", "--band", "2", "100",
                         "--duration", "8", "--warmup", "1", "--noise", "0.01", "--seed",
                         "4", "-o", str(tmp_path / "rec"), "--quiet"]) == 0
    capsys.readouterr()
    rc = offline_main(["build", str(model), "-o", str(tmp_path / "b.npz"), "--record",
                       str(tmp_path / "rec_measurement.csv"), "--quiet", "--no-maps"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "column 'eps_g'" not in err  # no level warning: the record is the declared load
    # the learned noise std against the simulated one: 1 % of the record's std (simulate
    # --noise 0.01); the fit's noise of a 1000 SPS gauge, 8 s (5.6 s fitted): within 30 %
    # (a w^2 transfer put the structure's response where the noise floor is read)
    t, Y, names = read_table(tmp_path / "rec_measurement.csv")
    sim_noise = 0.01 * np.std(np.asarray(Y, float)[:, names.index("eps_g")]) / np.sqrt(
        1.0 + 0.01 ** 2)
    line = next(ln for ln in out.splitlines() if "noise eps_g:" in ln)
    learned = float(line.split("->")[1].split()[0])
    assert abs(learned / sim_noise - 1.0) < 0.3, (line, sim_noise)


def test_the_blind_loads_count_reads_a_gauge(tmp_path):
    """Two forces seen by one gauge: one combination of two loads at every frequency, both
    named (a single channel cannot see more than one; docs/load.md). The count raised
    ``ValueError: tuple.index(x): x not in tuple`` on a gauge before."""
    text = (EXAMPLES / "strain_beam.toml").read_text()
    start, end = text.index("[[sensors]]"), text.index("[[outputs]]")
    forces = ('[[forces]]\nname = "F07"\nselect = { at = [0.7, 0.0, 0.0] }\ndof = "uz"\n\n'
              '[[forces]]\nname = "F10"\nselect = { at = [1.0, 0.0, 0.0] }\ndof = "uz"\n\n')
    path = tmp_path / "two_forces.toml"
    path.write_text(text[:start] + GAUGE + "\n" + forces + text[end:])
    spec = load_model_file(path)
    model = build_fe_model(spec, progress=False)
    cd = [sensor_probe(model, s, s.name) for s in spec.sensors]
    fd = [resolve_dofs(model, f.select, f.dof, f.name)[0] for f in spec.forces]
    mm = modal_model(model, fd, cd)
    dt = 1.0 / spec.estimator.rate
    w = blind_loads_warning(mm, declared_load_model(spec, spec.estimator.rate),
                            [s.kind for s in spec.sensors], noise_std(spec, mm, dt), dt,
                            [f.name for f in spec.forces])
    assert w is not None and "see 1 independent combination(s) of the 2 loads" in w, w
    assert "F07" in w and "F10" in w


def test_the_zoo_record_reads_a_gauge_as_strain():
    """offline/load/zoo.py ``record`` (the load benchmarks' records) took a gauge's kind index
    for a derivative order too. Its gauge column against the stationary std of the gauge's
    strain under the same load model, from the transfer functions (offline/limit/model.py
    ``noise_std`` at level 1)."""
    gauge = ('[[sensors]]\nname = "eps30"\nkind = "strain"\nunit = "microstrain"\n'
             'at = [0.030, 0.0, 0.0006]\nnoise = 0.01\n')
    text = STRIP[:STRIP.index("[[sensors]]")] + gauge + STRIP[STRIP.index("[[forces]]"):]
    spec = spec_from_dict(tomllib.loads(text), "gauge_strip.toml")
    model = build_fe_model(spec, progress=False)
    lm = ZOO["rolloff-2"]
    Y, _, _ = record(spec, model, lm, 10.0, 3, noise=0.0, engine="modal")
    cd = [sensor_probe(model, s, s.name) for s in spec.sensors]
    fd = [resolve_dofs(model, f.select, f.dof, f.name)[0] for f in spec.forces]
    sd = noise_std(spec, modal_model(model, fd, cd), 1.0 / spec.estimator.rate, loads=lm,
                   noise=1.0)[0]
    # a 10 s record's RMS spread about the stationary std: the first mode (34 Hz, 1 %)
    # dominates, B T = pi zeta f T = 10.7, RMS spread 1 / (2 sqrt(B T)) = 15 %; 3 sigma
    # (read as the acceleration of the strain, it was 1.7e5 times larger)
    assert abs(np.std(Y[:, 0]) / sd - 1.0) < 0.45, (np.std(Y[:, 0]), sd)


def test_a_rounded_row_rate_is_refused_naming_the_exact_one(tmp_path, capsys):
    """docs/modelfile.md's table prints 1,014.33 rows/s for three channels cycled at 7500 SPS
    (3043 / 3); written so, the rate matched no data rate (to 1e-6) and a file without
    [acquisition] was built for point samples without a word. Through the CLI: refused
    (exit 2) naming the key and the exact rate; the exact rate is read."""
    text = (EXAMPLES / "strain_beam.toml").read_text()
    sensors = "".join(GAUGE.replace('"eps_g"', f'"eps_g{i}"').replace(
        "at = [0.5,", f"at = [0.{i + 3},") for i in range(3))
    start, end = text.index("[[sensors]]"), text.index("[[forces]]")
    for rate, rc in (("1014.33", 2), ("1014.3333333333334", 0)):
        model = tmp_path / f"three_{rc}.toml"
        model.write_text((text[:start] + sensors + "\n" + text[end:]).replace(
            "rate = 1000.0", f"rate = {rate}"))
        assert offline_main(["inspect", str(model), "--modes", "1"]) == rc
        err = capsys.readouterr().err
        if rc:
            assert f"{model.name}: [estimator].rate = 1014.33 is 3.3e-06" in err, err
            assert "write rate = 1014.3333333333334" in err


def test_the_limit_states_a_load_models_absolute_noise():
    """``limit --bundle`` of a bundle built with ``--record`` computes under the learned
    absolute noise, but its header printed the model file's relative levels ("noise 2 %")."""
    spec = spec_from_dict(tomllib.loads(STRIP), "strip.toml")
    lm = dataclasses.replace(ZOO["rolloff-2"], noise_std=np.array([3.5e-6]))
    lim = model_limit(spec, loads=lm, delays=(0.02,), exact=False, memory=500,
                      n_grid=4096)
    text = lim.format()
    assert "noise std 3.5e-06 (the load model's, in the channels' units)" in text, text
    assert lim.noise_std[0] == 3.5e-6              # the std the limit was computed with
    # the model file's own relative noise (1 %) without a load model's noise
    assert "; noise 1 %" in model_limit(spec, delays=(0.02,), exact=False,
                                        memory=500, n_grid=4096).format()
