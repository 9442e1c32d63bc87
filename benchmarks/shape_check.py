"""The model check's load-shape pair on loads of another shape than declared, without a
record, through the public command line.

The footbridge a new user wrote from the docs (``benchmarks/load_user/footbridge.toml``: a
10 m girder, two accelerometers through the ADS1256 cycled at 418.5 rows/s, one force declared
random 1-80 Hz at 200 N). Loads (each a 12 s history at 4 kHz, the first 2 s the record's
warm-up, so the structure is moving when the record starts): the user's pedestrian load
(2.5-30 Hz second-order skirts plus a source resonance at 8 Hz, 40 N), and loads drawn from the
declared band's own rational model at 40 N with its shape changed: as declared, pink and blue
tilts, a resonance (gain 6, 3 % damping) at 3, 8, 20 or 50 Hz, a band of 2.5-30 Hz.
``vsense-offline simulate --load csv`` (full model, noise as declared), ``vsense-edge replay``
with the declared bundle; per load: the pair's ratio (lower half's innovation power over the
upper's) in its last window, the share of the rows after the window first filled that carry
the model-check flag for the pair's reason, and for the force after 2 s the stated std over the
RMS error and the 1-sigma coverage.

    python benchmarks/shape_check.py [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.bundle import Bundle  # noqa: E402
from edge.csvio import read_table  # noqa: E402
from edge.estimator import Estimator  # noqa: E402
from edge.estimator.band_pairs import SHAPE_REASON  # noqa: E402
from offline.forcing.force_model import ForceModel  # noqa: E402
from offline.load.model import LoadModel  # noqa: E402

FILE = ROOT / "benchmarks" / "load_user" / "footbridge.toml"
FS, T, RMS = 4000.0, 12.0, 40.0
SHAPES = {
    "declared shape": {},
    "pink (tilt 1)": {"tilt": 1.0},
    "blue (tilt -1)": {"tilt": -1.0},
    **{f"resonance {f} Hz": {"peaks": ((float(f), 0.03, 6.0),)} for f in (3, 8, 20, 50)},
    "band 2.5-30 Hz": {"band": (2.5, 30.0)},
}


def cli(*args) -> str:
    p = subprocess.run([str(Path(sys.executable).parent / args[0]), *map(str, args[1:])],
                       capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"{args[0]} {args[1]} failed:\n{p.stderr[-2000:]}")
    return p.stderr


def pedestrian(seed: int) -> np.ndarray:
    """The user's load: a 2.5-30 Hz floor (second-order skirts) plus a resonance at 8 Hz."""
    signal = __import__("scipy.signal", fromlist=["signal"])
    rng = np.random.default_rng(seed)
    n = int(round(T * FS)) + 1
    sos = signal.butter(2, [2.5, 30.0], btype="band", fs=FS, output="sos")
    floor = signal.sosfilt(sos, rng.standard_normal(n + 20000))[20000:]
    w0 = 2 * np.pi * 8.0
    b, a = signal.bilinear([w0 ** 2], [1, 2 * 0.03 * w0, w0 ** 2], FS)
    res = signal.lfilter(b, a, rng.standard_normal(n + 20000))[20000:]
    f = floor / floor.std() + 0.8 * res / res.std()
    return f * RMS / f.std()


def one_load(work: Path, bundle: Path, label: str, f: np.ndarray, seed: int) -> dict:
    t = np.arange(f.size) / FS
    csv = work / f"load{seed}.csv"
    np.savetxt(csv, np.column_stack([t, f]), delimiter=",", header="time,F_40", comments="")
    cli("vsense-offline", "simulate", FILE, "--load", "csv", "--csv", csv, "--warmup", 2,
        "--duration", T - 2, "--seed", seed, "-o", work / f"r{seed}", "--quiet")
    err = cli("vsense-edge", "replay", work / f"r{seed}_measurement.csv", "--bundle", bundle,
              "-o", work / f"e{seed}.csv")
    te, E, ec = read_table(work / f"e{seed}.csv")
    tt, Tr, tc = read_table(work / f"r{seed}_truth.csv")
    # the pair's ratio and verdict per second, from the estimator itself
    b = Bundle.load(bundle)
    _, Y, _ = read_table(work / f"r{seed}_measurement.csv")
    est, step, ratios, flagged = Estimator(b), int(round(b.rate)), [], []
    n = Y.shape[0]
    F, Z = np.empty((n, len(b.forces))), np.empty((n, len(b.outputs)))
    fl = np.zeros(n, np.uint8)
    for k in range(0, n, step):
        s = slice(k, min(k + step, n))
        est.process(np.ascontiguousarray(Y[s]), F[s], Z[s], fl[s])
        mc = est.model_check()
        if mc["bands"] and mc["bands"][-1]["ratio"] is not None:
            ratios.append(mc["bands"][-1]["ratio"])
            flagged.append(any(r.startswith(SHAPE_REASON) for r in mc["reasons"]))
    late = te >= 2.0
    e = E[late, ec.index("F_40")] - np.interp(te[late], tt, Tr[:, tc.index("F_40")])
    s = E[late, ec.index("F_40_std")]
    return {"load": label, "ratio_last": ratios[-1] if ratios else None,
            "windows_flagged": f"{sum(flagged)}/{len(flagged)}",
            "replay_names_it": SHAPE_REASON in err,
            "std_over_error": float(np.sqrt(np.mean(s ** 2) / np.mean(e ** 2))),
            "coverage": float(np.mean(np.abs(e) <= s))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        bundle = work / "declared.npz"
        cli("vsense-offline", "build", FILE, "-o", bundle, "--quiet")
        lo, mid, hi = Bundle.load(bundle).meta["estimator"]["check_shape_hz"]
        print(f"load-shape pair {lo:.3g}-{mid:.3g} Hz against {mid:.3g}-{hi:.3g} Hz")
        t = np.arange(int(round(T * FS)) + 1) / FS
        rows = [one_load(work, bundle, "pedestrian (the user's)", pedestrian(101), 1)]
        for k, (label, change) in enumerate(SHAPES.items()):
            fm = ForceModel(**{"band": (1.0, 80.0), "rms": RMS, **change})
            rows.append(one_load(work, bundle, label, LoadModel([fm]).sample(t, 200 + k)[:, 0],
                                 10 + k))
    print(f"{'load':26s} {'ratio':>6s} {'flagged':>8s} {'named':>6s} {'std/err':>8s} "
          f"{'cov.':>6s}")
    for r in rows:
        print(f"{r['load']:26s} {r['ratio_last']:6.2f} {r['windows_flagged']:>8s} "
              f"{str(r['replay_names_it']):>6s} {r['std_over_error']:8.2f} "
              f"{100 * r['coverage']:5.0f}%")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
