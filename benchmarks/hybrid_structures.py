"""The hybrid twin on structures other than the benchmark strip: a clamped cantilever as a
``type = "beam"`` model, the same cantilever as imported matrices (Matrix Market files and a
DOF table, docs/solid.md) and a simply supported plate, each with a cubic spring ``-k3 u^3``
at one point.

    python benchmarks/hybrid_structures.py [--duration 4] [--train-duration 6] [--seeds 2]
        [--only beam]

Per structure: ``k3`` such that the spring's tangent stiffness ``3 k3 u^2`` at the high
level's linear RMS displacement ``u`` there is 0.1 of the structure's static stiffness at that
point (the benchmark strip's spring, docs/hybrid.md, is 0.064 by the same measure: enough to
detune the lightly damped resonances at the high level, nearly linear at the low one). Truth: the FULL FE model with the spring, Runge-Kutta 4 on a
10x finer grid (:func:`offline.hybrid.truth.cubic_record`), never the estimator's model or
step; 1 % noise.
Training (``vsense-offline build --hybrid``, here :func:`offline.build.build`): two force-
and-response records of 6 s, at 0.15 N (seed 1) and 0.6 N RMS (seed 2), 5-150 Hz; the last 25 %
of each is the validation data (docs/hybrid.md). Scoring at 0.6 N on other seeds (101, ...), force unknown: normalised RMS error (full band)
and 1-sigma coverage of the force and an unmeasured output for the linear smoother, the hybrid
twin and the linear smoother on the linear twin (the same structure without the spring, the
same force and seed). Diagnostic rows: the same hybrid bundle (built with the defaults
``[hybrid] margin = 0.25``, ``outside = "saturate"``: beyond the envelope each network input
is held at its bound) with the correction off beyond its envelope (``outside = "off"``,
:func:`guard_off`), with its envelope narrowed to ``margin = 0.05`` (:func:`widened`), both,
and with the exact law ``-k3 s^3`` in place of the network (``benchmarks/hybrid.py``'s
``exact_law``, no envelope).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from hybrid import exact_law  # noqa: E402  (benchmarks/hybrid.py)

LOW, HIGH = 0.15, 0.6                    # force RMS [N] of the records (5-150 Hz)
TRAIN_S = 6.0                            # training records' length [s]
#: the estimators scored (NRMSE full band / 1-sigma coverage per column)
LABELS = ("linear", "hybrid", "hybrid, outside off", "hybrid, margin 0.05",
          "hybrid, margin 0.05, off", "hybrid, exact law", "linear twin")
#: tangent stiffness of the spring at the high level's linear RMS displacement, over the
#: structure's static stiffness at that point (0.064 for the strip of benchmarks/hybrid.py)
STIFFENING = 0.1

# the records (cubic_record) are point samples of the full model: converter "ideal" (the
# default when the figures of docs/benchmarks.md were measured, at 622a53c)
COMMON = """[estimator]
rate = 1000.0
method = "smoother"
lag = 20
[acquisition]
converter = "ideal"
[design_load]
load = { type = "random", band = [5.0, 150.0], rms = 0.6 }
duration = 2.0
[hybrid]
select = { at = AT }
dofs = ["uz"]
inputs = ["displacement"]
hidden = 32
restarts = 2
epochs = 200
patience = 40
"""

#: a clamped aluminium cantilever 300 x 20 x 2 mm, 150 Euler-Bernoulli elements, GMR+ with 30
#: modes (up to 52 kHz: the smoother's squared Van Loan step was 1.1e-8 off the exponential
#: there, and the hybrid refused it); force and displacement sensor at 200 mm, accelerometer
#: at the tip, unmeasured displacements at 100 mm and the tip; the spring at the tip
BEAM = """name = "cantilever-cubic"
type = "beam"
[materials.aluminium]
E = 69e9
nu = 0.33
rho = 2700.0
[beam.sections.bar]
material = "aluminium"
rectangle = { b = 0.02, h = 0.002 }
[[beam.members]]
name = "span"
section = "bar"
line = { start = [0.0, 0.0, 0.0], end = [0.3, 0.0, 0.0], n = 150 }
orientation = [0.0, 0.0, 1.0]
[[boundary]]
select = { at = [0.0, 0.0, 0.0] }
[[boundary]]
select = { box = [[0.001, -0.01, -0.01], [0.4, 0.01, 0.01]] }
dofs = ["ux", "uy", "rx", "rz"]
[damping]
ratios = [[18.0, 0.01], [600.0, 0.01]]
"""
BEAM_SIGNALS = """[reduction]
method = "gmr+"
modes = 30
[[reduction.masters]]
select = { at = [0.3, 0.0, 0.0] }
dofs = ["uz"]
[[sensors]]
name = "d200"
select = { at = [0.2, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
noise = 0.01
[[sensors]]
name = "a300"
select = { at = [0.3, 0.0, 0.0] }
dof = "uz"
kind = "acceleration"
noise = 0.01
[[forces]]
name = "F200"
select = { at = [0.2, 0.0, 0.0] }
dof = "uz"
model = { kind = "bandpass", order = 8 }
[[outputs]]
name = "d100"
select = { at = [0.1, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
[[outputs]]
name = "d300"
select = { at = [0.3, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
""" + COMMON.replace("AT", "[0.3, 0.0, 0.0]")

#: a simply supported aluminium plate 500 x 400 x 3 mm, 10 x 8 plate elements, GMR+ with 20
#: modes; the spring, a displacement sensor and the reduction's master at (0.3, 0.2), the
#: force at (0.2, 0.25), an accelerometer at (0.15, 0.1), unmeasured displacement at (0.4, 0.1)
PLATE = """name = "plate-cubic"
type = "plate"
[materials.aluminium]
E = 69e9
nu = 0.33
rho = 2700.0
[plate]
material = "aluminium"
thickness = 3e-3
[plate.rectangle]
length = 0.5
width = 0.4
nx = 10
ny = 8
[[boundary]]
select = { group = "x0" }
dofs = ["uz", "rx"]
[[boundary]]
select = { group = "x1" }
dofs = ["uz", "rx"]
[[boundary]]
select = { group = "y0" }
dofs = ["uz", "ry"]
[[boundary]]
select = { group = "y1" }
dofs = ["uz", "ry"]
[damping]
ratios = [[70.0, 0.01], [600.0, 0.01]]
[reduction]
method = "gmr+"
modes = 20
[[reduction.masters]]
select = { at = [0.3, 0.2, 0.0] }
dofs = ["uz"]
[[sensors]]
name = "d_s"
select = { at = [0.3, 0.2, 0.0] }
dof = "uz"
kind = "displacement"
noise = 0.01
[[sensors]]
name = "a_q"
select = { at = [0.15, 0.1, 0.0] }
dof = "uz"
kind = "acceleration"
noise = 0.01
[[forces]]
name = "F"
select = { at = [0.2, 0.25, 0.0] }
dof = "uz"
model = { kind = "bandpass", order = 8 }
[[outputs]]
name = "d_o"
select = { at = [0.4, 0.1, 0.0] }
dof = "uz"
kind = "displacement"
""" + COMMON.replace("AT", "[0.3, 0.2, 0.0]")

#: structure -> (spring point, the displacement column there, the unmeasured output scored)
SPRING = {"beam": ([0.3, 0.0, 0.0], "d300", "d100"),
          "matrices": ([0.3, 0.0, 0.0], "d300", "d100"),
          "plate": ([0.3, 0.2, 0.0], "d_s", "d_o")}


def write_models(tmp: Path, hybrid_edit=None) -> dict:
    """The three model files in ``tmp`` (``hybrid_edit``: a function applied to each file's
    text, e.g. shorter training in the tests). The imported matrices are the beam model's
    constrained FE matrices with its Rayleigh damping matrix, written in the documented
    format (:func:`offline.fem.matrices.write_matrices`)."""
    from offline.fem.matrices import write_matrices
    from offline.model import build_fe_model, load_model_file

    edit = hybrid_edit or (lambda s: s)
    paths = {"beam": tmp / "beam.toml", "plate": tmp / "plate.toml",
             "matrices": tmp / "matrices.toml"}
    paths["beam"].write_text(edit(BEAM + BEAM_SIGNALS))
    paths["plate"].write_text(edit(PLATE))
    fe = build_fe_model(load_model_file(paths["beam"]), progress=False)
    fe.C = fe.damping_matrix()
    files = write_matrices(fe, tmp / "cantilever")
    table = "\n".join(f'{k} = "cantilever/{Path(v).name}"' for k, v in files.items())
    paths["matrices"].write_text(edit(f'name = "cantilever-matrices"\ntype = "matrices"\n'
                                      f"[matrices]\n{table}\n" + BEAM_SIGNALS))
    return paths


def spring_k3(path, at, column, rms: float = HIGH, duration: float = 2.0) -> float:
    """``k3`` [N/m^3] with ``3 k3 u^2 = STIFFENING k_s``: ``u`` the linear RMS displacement at
    ``at`` (the sensor or output ``column``) under ``rms``, ``k_s = 1 / (K^-1)_ss`` the static
    stiffness there (full model)."""
    from offline._deps import need
    from offline.hybrid.truth import cubic_record
    from offline.model import build_fe_model, load_model_file, resolve_dofs

    spec = load_model_file(path)
    model = build_fe_model(spec, progress=False)
    s = resolve_dofs(model, {"at": at}, "uz", "spring")[0]
    e = np.zeros(model.K.shape[0])
    e[s] = 1.0
    sp = need("scipy.sparse")
    flex = need("scipy.sparse.linalg").spsolve(sp.csc_matrix(model.K), e)[s]
    _, _, Y, Z = cubic_record(path, ({"at": at}, "uz"), 0.0, rms, 0, duration, noise=0.0)
    cols = [o.name for o in spec.sensors + spec.outputs]
    u = np.std(np.column_stack([Y, Z])[:, cols.index(column)])
    return float(STIFFENING / flex / (3.0 * u ** 2))


def nrms(e, t):
    return float(np.sqrt(np.mean((e - t) ** 2)) / np.std(t))


def estimate(bundle, Y):
    """Force and outputs estimated from ``Y`` (force unknown), aligned with the samples, and
    the stated std."""
    from edge.estimator import Estimator

    from edge.flags import FLAG_ENVELOPE

    est = Estimator(bundle)
    nt = Y.shape[0]
    F, Z = np.zeros((nt, est.n_forces)), np.zeros((nt, est.n_outputs))
    fl = np.zeros(nt, np.uint8)
    for i in range(0, nt, 10):
        j = min(nt, i + 10)
        est.process(np.ascontiguousarray(Y[i:j]), F[i:j], Z[i:j], fl[i:j])
    d = est.delay
    Q = np.full((nt, F.shape[1] + Z.shape[1]), np.nan)
    Q[:nt - d] = np.hstack([F, Z])[d:]
    return Q, est.std.copy(), float(np.mean(fl & FLAG_ENVELOPE > 0))


def score(Q, std, T, skip):
    ok = np.all(np.isfinite(Q), axis=1)
    ok[:skip] = False
    return [{"nrmse": nrms(Q[ok, c], T[ok, c]),
             "cover": float(np.mean(np.abs(Q[ok, c] - T[ok, c]) <= std[c]))}
            for c in range(T.shape[1])]


def widened(bundle, margin: float):
    """``bundle`` with its trained envelope widened by ``margin`` of the inputs' range on
    each side instead of the build's ``[hybrid] margin`` (``meta["hybrid"]["margin"]``): the
    margin enters only the envelope (offline/hybrid/train.py), so this is the bundle
    ``margin = ...`` builds."""
    lo, hi = bundle.kf["hy_lo"], bundle.kf["hy_hi"]
    m0 = float(bundle.meta["hybrid"]["margin"])
    w0 = (hi - lo) / (1.0 + 2 * m0)               # the training records' range
    lo0, hi0 = lo + m0 * w0, hi - m0 * w0
    kf = dict(bundle.kf)
    kf.update(hy_lo=lo0 - margin * w0, hy_hi=hi0 + margin * w0)
    return bundle.replace(kf=kf)


def guard_off(bundle):
    """``bundle`` with ``kf_hy_guard = 0``: no correction outside the trained envelope, the
    bundle ``[hybrid] outside = "off"`` builds (the guard enters only that field)."""
    kf = dict(bundle.kf)
    kf.update(hy_guard=np.array(0, dtype=np.int64))
    return bundle.replace(kf=kf)


def run_structure(name, path, duration, seeds, tmp, train_s=TRAIN_S):
    from edge.bundle import Bundle
    from offline.build import build
    from offline.hybrid.demo import write_record
    from offline.hybrid.truth import cubic_record
    from offline.model import load_model_file

    at, column, out_name = SPRING[name]
    spec = load_model_file(path)
    k3 = spring_k3(path, at, column)
    spring = ({"at": at}, "uz")
    t0 = time.perf_counter()
    recs = []
    for lab, rms, seed in (("low", LOW, 1), ("high", HIGH, 2)):
        t, F, Y, _ = cubic_record(path, spring, k3, rms, seed, train_s)
        recs.append(str(write_record(tmp / f"{name}_{lab}.csv", t, F, Y, spec)))
    t_rec = time.perf_counter() - t0
    t0 = time.perf_counter()
    lin = build(path, progress=False, limit=False).bundle
    hyb = build(path, progress=False, limit=False, hybrid=recs).bundle
    hyb.save(tmp / f"{name}_hybrid.npz")
    hyb = Bundle.load(tmp / f"{name}_hybrid.npz")
    t_build = time.perf_counter() - t0
    names = [f.name for f in lin.forces] + [o.name for o in lin.outputs]
    cols = [0, names.index(out_name)]
    skip = int(round(0.5 / lin.dt))
    narrow, exact = widened(hyb, 0.05), exact_law(hyb, k3)
    rows = {k: [] for k in LABELS}
    for k in range(seeds):
        seed = 101 + k
        _, F, Y, Z = cubic_record(path, spring, k3, HIGH, seed, duration)
        _, _, Yl, Zl = cubic_record(path, spring, 0.0, HIGH, seed, duration)
        for lab, b, Yin, T in (("linear", lin, Y, np.hstack([F, Z])),
                               ("hybrid", hyb, Y, np.hstack([F, Z])),
                               ("hybrid, outside off", guard_off(hyb), Y, np.hstack([F, Z])),
                               ("hybrid, margin 0.05", narrow, Y, np.hstack([F, Z])),
                               ("hybrid, margin 0.05, off", guard_off(narrow), Y,
                                np.hstack([F, Z])),
                               ("hybrid, exact law", exact, Y, np.hstack([F, Z])),
                               ("linear twin", lin, Yl, np.hstack([F, Zl]))):
            Q, std, flagged = estimate(b, Yin)
            rows[lab].append(score(Q[:, cols], std[cols], T[:, cols], skip))
            rows[lab][-1][0]["flagged"] = flagged
    res = {"k3": k3, "records_s": t_rec, "builds_s": t_build, "names": [names[c] for c in cols],
           "hybrid_meta": {k: v for k, v in hyb.meta["hybrid"].items() if k != "envelope"}}
    for lab, r in rows.items():
        res[lab] = [{key: float(np.mean([x[i][key] for x in r])) for key in ("nrmse", "cover")}
                    for i in range(len(cols))]
        res[lab][0]["flagged"] = float(np.mean([x[0]["flagged"] for x in r]))
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=4.0, help="record length [s]")
    ap.add_argument("--train-duration", type=float, default=TRAIN_S,
                    help="training records' length [s]")
    ap.add_argument("--seeds", type=int, default=2, help="scoring records (high level)")
    ap.add_argument("--only", choices=sorted(SPRING), action="append", default=None)
    ap.add_argument("--json", default=None, help="write the figures as JSON")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="vsense-hybrid-structures-"))
    paths = write_models(tmp)
    out = {}
    for name in args.only or ("beam", "matrices", "plate"):
        t0 = time.perf_counter()
        r = run_structure(name, paths[name], args.duration, args.seeds, tmp,
                          train_s=args.train_duration)
        out[name] = r
        m = r["hybrid_meta"]
        print(f"\n{name}: k3 {r['k3']:.3g} N/m^3; records {r['records_s']:.0f} s, builds "
              f"{r['builds_s']:.0f} s, total {time.perf_counter() - t0:.0f} s; validation loss "
              f"{m['loss_best_val'] / m['loss_linear_val']:.3f} of the linear model's "
              f"({m['epochs']} iterations, best {m['best_epoch']})")
        for lab in LABELS:
            print(f"  {lab:20s} " + "  ".join(
                f"{n} {r[lab][i]['nrmse']:.4f} / {100 * r[lab][i]['cover']:.0f} %"
                for i, n in enumerate(r["names"]))
                + f"  (flagged outside the envelope {100 * r[lab][0]['flagged']:.1f} %)")
        for i, n in enumerate(r["names"]):
            tw = r["linear twin"][i]["nrmse"]
            print(f"  {n}: linear / hybrid " + ", ".join(
                f"{r['linear'][i]['nrmse'] / r[h][i]['nrmse']:.2f}x" for h in LABELS[1:-1])
                + "; over the linear twin " + ", ".join(
                f"{r[h][i]['nrmse'] / tw:.2f}x" for h in LABELS[1:-1])
                + f" ({', '.join(LABELS[1:-1])})")
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
