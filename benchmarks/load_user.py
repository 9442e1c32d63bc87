"""A user's structures, not the zoo's: accuracy and 1-sigma coverage with and without a record,
built and replayed through the public command line.

Three model files written from the docs alone (``benchmarks/load_user/``): a clamped-clamped
steel beam with two correlated forces and a laser, a velocity sensor and two accelerometers
(the user asks for the smoother); a plate clamped on two edges, one force whose spectrum
carries a 140 Hz source resonance, three accelerometers; a two-storey frame (Timoshenko)
whose pink load is 30x below its declaration, sensors with data-sheet noise (``noise_std``);
a free-free receiver loaded at an interface of two nodes by a force and a moment at each,
translational and rotational accelerometers on both sides (``interface``: roll-offs, a source
resonance, correlated force and moment, one source mode driving all four).
The truth: the FULL model by sparse Newmark on every DOF, 10 steps per sample
(:func:`offline.load.zoo.record`), not the estimator's reduced model nor its discretisation.
Per structure a 20 s record (seed 11) for ``build --record`` and an 8 s test record (seed 23);
``vsense-offline build`` without and with ``--record``, ``vsense-edge replay`` of the test
record; per target after 1 s: the normalised RMS error (full band), its ratio to the MMSE
limit at the estimator's delay with the TRUE spectra (:func:`offline.limit.model.model_limit`)
and the share of samples within the stated 1 sigma of each row (68 % for a right model).

    python benchmarks/load_user.py [--cases ccbeam,plate,frame,interface] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.bundle import Bundle  # noqa: E402
from edge.csvio import read_table, write_table  # noqa: E402
from edge.estimator import Estimator  # noqa: E402
from offline.limit.model import model_limit  # noqa: E402
from offline.load.model import LoadModel  # noqa: E402
from offline.load.zoo import interface_load, record  # noqa: E402
from offline.model import build_fe_model, load_model_file  # noqa: E402
from offline.forcing.force_model import ForceModel  # noqa: E402

FILES = Path(__file__).resolve().parent / "load_user"
BIN = Path(sys.executable).parent


def true_load(name: str, spec):
    """``(LoadModel, relative noise or None)``: what the structure really carries."""
    if name == "ccbeam":  # declared: random 5-200 Hz, 20 N each, independent
        return LoadModel([ForceModel("bandpass", (8.0, 120.0), 12.0, 3),
                          ForceModel("bandpass", (15.0, 150.0), 6.0, 2)],
                         corr=np.array([[1.0, -0.6], [-0.6, 1.0]])), 0.02
    if name == "plate":  # declared: random 10-300 Hz, 5 N
        return LoadModel([ForceModel("bandpass", (10.0, 250.0), 3.0, 2,
                                     peaks=((140.0, 0.03, 5.0),))]), 0.05
    if name == "frame":  # declared: random 2-100 Hz, 200 N; noise: the sensors' noise_std
        return LoadModel([ForceModel("bandpass", (2.0, 100.0), 200.0 / 30, 2, tilt=1.0)],
                         noise_std=np.array([s.noise_std for s in spec.sensors])), None
    if name == "interface":  # declared: random 5-160 Hz, forces 10 N, moments 0.5 N m
        return interface_load(), 0.05
    raise SystemExit(f"unknown case {name!r} (ccbeam, plate, frame, interface)")


def cli(*args) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.perf_counter()
    p = subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True)
    return p, time.perf_counter() - t0


def score(est_csv, bundle_path, F, Z, lim, dt, skip=1.0) -> dict:
    """Per target: nrmse, ratio to the limit, 1-sigma coverage of the replay's estimates."""
    te, E, cols = read_table(est_csv)
    b = Bundle.load(bundle_path)
    names = [f.name for f in b.forces] + [o.name for o in b.outputs]
    T = np.hstack([F, Z])
    idx = np.rint(te / dt).astype(int)
    keep = te >= skip
    out = {}
    for i, n in enumerate(names):
        e = E[keep, cols.index(n)] - T[idx[keep], i]
        nr = float(np.sqrt(np.mean(e ** 2)) / np.std(T[idx[keep], i]))
        sd = cols.index(f"{n}_std") if f"{n}_std" in cols else None
        out[n] = {"nrmse": nr, "limit": float(lim[i]), "ratio": nr / float(lim[i]),
                  "coverage": None if sd is None else float(np.mean(np.abs(e) <= E[keep, sd]))}
    return out


def run_case(name: str, work: Path) -> dict:
    path = FILES / f"{name}.toml"
    spec = load_model_file(path)
    model = build_fe_model(spec, progress=False)
    lm, noise = true_load(name, spec)
    dt = 1.0 / spec.estimator.rate
    sn = [s.name for s in spec.sensors]
    Yr, _, _ = record(spec, model, lm, 20.0, 11, noise=noise)
    write_table(work / "run.csv", np.arange(Yr.shape[0]) * dt, Yr, sn)
    Y, F, Z = record(spec, model, lm, 8.0, 23, noise=noise)
    write_table(work / "test.csv", np.arange(Y.shape[0]) * dt, Y, sn)
    res = {}
    for label, extra in (("declared", []), ("record", ["--record", str(work / "run.csv")])):
        out = work / f"{label}.npz"
        p, secs = cli("vsense-offline", "build", str(path), "-o", str(out), "--quiet", *extra)
        if p.returncode:
            res[label] = {"error": p.stderr.strip()[-2000:]}
            continue
        r, _ = cli("vsense-edge", "replay", str(work / "test.csv"), "--bundle", str(out),
                   "-o", str(work / f"est_{label}.csv"))
        if r.returncode:
            res[label] = {"error": r.stderr.strip()[-2000:]}
            continue
        b = Bundle.load(out)
        delay = Estimator(b).delay * dt
        lim = np.concatenate(model_limit(spec, model, loads=lm, noise=noise,
                                         delays=(0.0, delay), exact=False)
                             .at_delay(delay + 1e-9))
        fit = next((x for x in p.stdout.splitlines() if "timings:" in x), "")
        res[label] = {"score": score(work / f"est_{label}.csv", out, F, Z, lim, dt),
                      "build_s": secs, "method": b.method, "delay_ms": 1e3 * delay,
                      "warnings": [x.strip() for x in p.stdout.splitlines() if "WARNING" in x],
                      "shipped": (b.meta.get("load_model", {}).get("info", {})
                                  .get("choice", {}).get("shipped")),
                      "timings": fit.strip()}
    return res


def fmt(name: str, res: dict) -> str:
    lines = []
    for label, r in res.items():
        if "error" in r:
            lines.append(f"{name:<7} {label:<9} FAILED: {r['error']}")
            continue
        for n, s in r["score"].items():
            cov = "-" if s["coverage"] is None else f"{100 * s['coverage']:.0f} %"
            lines.append(f"{name:<7} {label:<9} {n:<6} {s['nrmse']:>8.4f} {s['limit']:>8.4f} "
                         f"{s['ratio']:>7.2f} {cov:>8}  {r['method']}, "
                         + (f"shipped {r['shipped']}, " if r.get("shipped") else "") +
                         f"{r['delay_ms']:.0f} ms, build {r['build_s']:.0f} s")
        lines += [f"{'':<17}{w}" for w in r["warnings"]]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="ccbeam,plate,frame,interface", help="comma-separated")
    ap.add_argument("--json", default=None, help="write the figures as JSON")
    a = ap.parse_args(argv)
    print("case    bundle    target    nrmse    limit   ratio  1-sigma")
    out = {}
    for name in a.cases.split(","):
        with tempfile.TemporaryDirectory(prefix=f"load-user-{name}-") as d:
            out[name] = run_case(name, Path(d))
        print(fmt(name, out[name]), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
