"""Operational calibration (force unknown) on records of the ADS1256: through the chain, as point
samples, and on point-sample records.

    .venv/bin/python benchmarks/calibrate_operational.py --chain [--layout laser|cycle]
        [--seconds 6] [--draws 4] [--drift 0]

The strip of tests/calib_truth.py (17 elements, family E, zeta, k_root: PARAMS_3). Truth: 34
elements, E 65 GPa, k_root 14 N m/rad, damping ratio 0.02 at its own first two modes, exact
modal engine, random force 5-250 Hz unknown to the calibration, 1 % noise; records written by
``offline.simulate.simulate_model`` (the model file's chain: converted by the chip) with the
force column dropped, one record per draw (seeds 1, 2, ...). ``laser``: the d110 laser alone
at 1,000 samples/s (the ADS1256 in continuous mode at 1,000 SPS); ``cycle``: d110 and the
a170 accelerometer at 1,082.5 rows/s (the multiplexer cycling at 3,750 SPS: the channels
converted 0.46 ms apart). ``--drift``: d110 declares a drifting offset [m / sqrt(s)].

Per draw, ``vsense-offline calibrate --operational`` three times: (a) the chip's records, the
model file as is (through the chain); (b) the same records with ``[acquisition] converter =
"ideal"`` (point samples: the likelihood before it modelled the chain); (c) point-sample
records of the same seeds with ``converter = "ideal"`` (reference). Printed per route and
parameter: the mean over draws of |mean - truth| / std, the share of draws with the truth
within 2 std, and the mean std relative to (c)'s. Output-only (``--output-only 2``'s
identifier, :func:`offline.calibration.modal.identify_modes`, 8,192-sample Welch segments
where the record holds them): each draw's natural frequencies and damping ratios from the
chip's records against those from the point samples of the same seed (the same force and
noise: the difference is the chain's).
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import numpy as np

from calib_truth import PARAMS_3, model_text, own_modes_damping
from calibrate_chain import simulated_records
from edge.csvio import read_table
from offline.cli import main as offline_main

TRUTH = {"E": 65e9, "zeta": 0.02, "k_root": 14.0}
IDEAL = '[acquisition]\nconverter = "ideal"\n'
RATES = {"laser": 1000.0, "cycle": 1082.5}
ROUTES = {"a": "ADS1256 records, through the chain", "b": "ADS1256 records, as point samples",
          "c": "point-sample records (reference)"}


def layout(text: str, which: str, drift: float) -> str:
    """The strip with its d110 laser only (``laser``) or both sensors (``cycle``); d110
    declaring ``drift``."""
    if which == "laser":
        text = text[:text.index('[[sensors]]\nname = "a170"')] + text[text.index("[[forces]]"):]
    if drift > 0:
        text = re.sub(r'(name = "d110"\n)', rf"\1drift = {drift!r}\n", text, count=1)
    return text + f"[estimator]\nrate = {RATES[which]!r}\n"


def records(d: Path, which: str, chain: str, seconds: float, draws: int, drift: float):
    truth = model_text(34, E=TRUTH["E"], k_root=TRUTH["k_root"], params="")
    truth = layout(own_modes_damping(truth, TRUTH["zeta"], d / "truth.toml"), which, drift)
    (d / "truth.toml").write_text(truth)
    return simulated_records(d, chain, seconds, draws, force=False)  # operational: no force


def calibrate(d: Path, name: str, path, which: str, drift: float, acquisition: str) -> dict:
    (d / f"{name}.toml").write_text(layout(model_text(17, params=PARAMS_3), which, drift)
                                    + acquisition)
    rc = offline_main(["calibrate", str(d / f"{name}.toml"), "-o", str(d / name), "--data",
                       str(path), "--operational", "--quiet"])
    return json.loads((d / name / "posterior.json").read_text()) | {"rc": rc}


def modal_shift(chip: Path, point: Path) -> tuple:
    """``(df / f, dzeta / zeta)`` (2,) each: the output-only identifier's two modes from the
    chip's record relative to those from the point samples of the same seed."""
    from offline.calibration.modal import identify_modes
    got = []
    for p in (chip, point):
        t, Y, _ = read_table(p)
        dt = float(t[1] - t[0])
        try:
            f, z, _ = identify_modes(Y, dt, 2, (1.0, None), nperseg=min(8192, Y.shape[0] // 2))
        except ValueError as exc:          # fewer plausible modes: said, not scored
            print(f"  {p.name}: {exc}")
            f = z = np.full(2, np.nan)
        got.append((f, z))
    (fa, za), (fc, zc) = got
    return fa / fc - 1.0, za / zc - 1.0


def run(which: str, seconds: float, draws: int, drift: float) -> dict:
    """{route: [(mean (p,), std (p,))] per draw} and the measurement each route named."""
    out, named = {k: [] for k in ROUTES}, {}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        chip = records(d, which, "model", seconds, draws, drift)
        point = records(d, which, "ideal", seconds, draws, drift)
        for i in range(draws):
            df, dz = modal_shift(chip[i], point[i])
            out.setdefault("modal", []).append((df, dz))
            print(f"  draw {i + 1} output-only, chip vs point samples: frequencies "
                  f"{np.round(df, 6).tolist()} (relative), damping {np.round(dz, 4).tolist()}")
            for k, path, acq in (("a", chip[i], ""), ("b", chip[i], IDEAL), ("c", point[i], IDEAL)):
                post = calibrate(d, f"{k}{i}", path, which, drift, acq)
                idx = [post["names"].index(n) for n in TRUTH]
                out[k].append((np.array(post["mean"])[idx], np.array(post["std"])[idx]))
                named[k] = post.get("measurement", "(not recorded)")
                print(f"  draw {i + 1} ({k}): " + ", ".join(
                    f"{n} {post['mean'][j]:.5g} +- {post['std'][j]:.2g}"
                    for n, j in zip(TRUTH, idx)), flush=True)
    return out, named


def chain_main(a) -> int:
    drift = a.drift or 0.0
    out, named = run(a.layout, a.seconds, a.draws, drift)
    df = np.array([x for x, _ in out["modal"]])
    dz = np.array([x for _, x in out["modal"]])
    print(f"output-only, chip's records vs point samples (mean over draws, max abs): modes 1, 2 "
          f"frequency {np.round(df.mean(0), 6).tolist()} ({np.abs(df).max():.2g}), damping "
          f"{np.round(np.nanmean(dz, 0), 4).tolist()} ({np.nanmax(np.abs(dz)):.2g}; nan: not "
          "resolved)")
    truth = np.array(list(TRUTH.values()))
    ref = np.mean([s for _, s in out["c"]], axis=0)
    print(f"\n{a.layout}: {a.draws} draws of {a.seconds:g} s, drift {drift:g}; truth "
          + ", ".join(f"{n} {v:g}" for n, v in TRUTH.items()))
    print("| route | measurement | " + " | ".join(
        f"{n}: mean abs z / within 2 std / std vs (c)" for n in TRUTH) + " |")
    print("| --- | --- |" + " --- |" * len(TRUTH))
    for k, label in ROUTES.items():
        m = np.array([x for x, _ in out[k]])
        s = np.array([x for _, x in out[k]])
        z = np.abs(m - truth) / s
        cells = [f"{z[:, j].mean():.2f} / {np.mean(z[:, j] < 2):.0%} / "
                 f"{s[:, j].mean() / ref[j]:.2f}" for j in range(truth.size)]
        print(f"| ({k}) {label} | {named[k]} | " + " | ".join(cells) + " |")
    return 0
