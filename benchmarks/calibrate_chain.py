"""Calibration on records of the ADS1256: through the model file's chain, and as point samples.

    .venv/bin/python benchmarks/calibrate_chain.py [--seconds 4] [--records 2]

A one-laser cantilever (the strip of tests/calib_truth.py with its d110 laser only, force at
160 mm, 1,000 samples/s, so the model file's default chain is the ADS1256 in continuous mode
at 1,000 SPS). Truth: 34 elements (the calibration model has 17), E 65 GPa, k_root 14 N m/rad,
damping ratio 0.02 at its own first two modes, exact modal engine, random force 5-250 Hz, 1 % noise, records from
``offline.simulate.simulate_model`` converted by the chip (seeds 1, 2, ...). Family: E, zeta,
k_root (tests/calib_truth.py PARAMS_3). Calibrated twice on the same records: the model file
as is (the calibration compares the response through the chain) and with ``[acquisition]
converter = "ideal"`` (point samples: the calibration before it modelled the chain); and once
on point-sample records of the same seeds for reference. Printed: each parameter's posterior
mean +- std, its distance from the truth in posterior std, the residual's lag-1 correlation.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from calib_truth import PARAMS_3, model_text, own_modes_damping  # noqa: E402
from edge.csvio import write_table  # noqa: E402
from offline.cli import main as offline_main  # noqa: E402
from offline.simulate import simulate_model  # noqa: E402

TRUTH = {"E": 65e9, "zeta": 0.02, "k_root": 14.0}
IDEAL = '[acquisition]\nconverter = "ideal"\n'


def one_laser(text: str) -> str:
    """The calibration strip with its d110 laser only (one channel: continuous mode)."""
    return text[:text.index('[[sensors]]\nname = "a170"')] + text[text.index("[[forces]]"):]


def records(d: Path, chain: str, seconds: float, n: int) -> list:
    truth = one_laser(model_text(34, E=TRUTH["E"], k_root=TRUTH["k_root"], params=""))
    # the damping ratio at the truth's own first two modes (what the family can hold)
    truth = own_modes_damping(truth, TRUTH["zeta"], d / "truth.toml")
    (d / "truth.toml").write_text(truth + "[estimator]\nrate = 1000.0\n")
    return simulated_records(d, chain, seconds, n)


def simulated_records(d: Path, chain: str, seconds: float, n: int, force: bool = True) -> list:
    """Records of ``d / "truth.toml"`` by ``simulate`` through ``chain``, seeds 1..n: a random
    5-250 Hz force of 0.05 N RMS, 1 % noise; with the force's column when ``force``."""
    out = []
    for seed in range(1, n + 1):
        r = simulate_model(d / "truth.toml", duration=seconds, noise=0.01, seed=seed,
                           load={"type": "random", "band": (5.0, 250.0), "rms": 0.05},
                           chain=chain, progress=False)
        out.append(d / f"{chain}{seed}.csv")
        cols, names = (np.hstack([r.F, r.Y]), r.force_names + r.channel_names) if force \
            else (r.Y, r.channel_names)
        write_table(out[-1], r.t, cols, names)
    return out


def calibrate(d: Path, name: str, paths, acquisition: str) -> dict:
    (d / f"{name}.toml").write_text(one_laser(model_text(17, params=PARAMS_3))
                                    + "[estimator]\nrate = 1000.0\n" + acquisition)
    args = ["calibrate", str(d / f"{name}.toml"), "-o", str(d / name), "--no-kfold"]
    for p in paths:
        args += ["--data", str(p)]
    rc = offline_main(args)
    return json.loads((d / name / "posterior.json").read_text()) | {"rc": rc}


def row(label: str, post: dict) -> str:
    cells = []
    for name, true in TRUTH.items():
        i = post["names"].index(name)
        m, s = post["mean"][i], post["std"][i]
        cells.append(f"{m:.5g} +- {s:.2g} ({abs(m - true) / s:.1f} std)")
    lag = [g["lag1"] for g in post["noise_groups"].values()]
    return f"| {label} | " + " | ".join(cells) + f" | {lag[0]:+.3f} | {post['measurement']} |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--records", type=int, default=2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        chip = records(d, "ads1256", a.seconds, a.records)
        point = records(d, "ideal", a.seconds, a.records)
        lines = [row("ADS1256 records, through the chain", calibrate(d, "chain", chip, "")),
                 row("ADS1256 records, as point samples", calibrate(d, "as_point", chip, IDEAL)),
                 row("point-sample records (reference)", calibrate(d, "point", point, IDEAL))]
    print(f"\ntruth: E {TRUTH['E']:g}, zeta {TRUTH['zeta']:g}, k_root {TRUTH['k_root']:g}; "
          f"{a.records} records of {a.seconds:g} s")
    print("| records, calibration | E | zeta | k_root | residual lag-1 | measurement |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
