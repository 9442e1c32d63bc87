"""The hybrid twin against the linear Kalman smoother on a structure that is not linear: the
paper's aluminium strip with a hardening (cubic) spring at the tip (offline/hybrid/demo.py).

    python benchmarks/hybrid.py [--duration 4] [--train-duration 12] [--seeds 3]
        [--plot docs/img/hybrid.png] [--rate 1082.5]

Truth: the FULL FE model with the cubic spring, Runge-Kutta 4 on a 10x finer grid
(offline/hybrid/truth.py) -- not the estimators' reduced model or discretisation; 1 % noise.
Training: force-and-response records at two levels (low, high) and a validation record
between them, seeds 1-3, ``--train-duration`` long (default: as the scoring records). ``--rate 1082.5``: the ADS1256 cycling the two channels at 3,750
SPS (the model file's default chain; at the default 1,000 rows/s no data rate gives the rate
and the file falls back to point samples), the records its conversions of the truth (on a
32x finer grid), the bundles modelling them (offline/hybrid/conversion.py). Scoring: independent seeds (101, ...), force unknown, at both levels:
normalised RMS error (RMS(estimate - truth) / std(truth), full band) and FDE (band 0-200 Hz)
of the force and the unmeasured displacements, for the linear smoother and the hybrid; the
linear smoother on the linear twin (the same structure without the spring, the same force) as
the reference the issue names; the hybrid estimator with the exact cubic law in place of the
network (ONNX of ``-k3 s^3``, the upper bound of the network: what the estimator's structure
allows); 1-sigma coverage of the stated std; the per-sample cost of both estimators in one run
(blocks of 10 samples, as the daemon's ring delivers them).
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

LOW, HIGH, VAL = 0.0007, 0.007, 0.003     # force RMS [N] of the levels (5-150 Hz)


def nrms(e, t):
    return float(np.sqrt(np.mean((e - t) ** 2)) / np.std(t))


def run(est, Y, block=10):
    """Estimates aligned with the input samples: (Q (nt, nq), std (nq,), flags, seconds)."""
    nt = Y.shape[0]
    F, Z = np.zeros((nt, est.n_forces)), np.zeros((nt, est.n_outputs))
    fl = np.zeros(nt, np.uint8)
    t0 = time.perf_counter()
    for i in range(0, nt, block):
        j = min(nt, i + block)
        est.process(Y[i:j], F[i:j], Z[i:j], fl[i:j])
    sec = time.perf_counter() - t0
    d = est.delay
    Q = np.full((nt, F.shape[1] + Z.shape[1]), np.nan)
    Q[:nt - d] = np.hstack([F, Z])[d:]
    fa = np.zeros(nt, np.uint8)
    fa[:nt - d] = fl[d:]
    return Q, est.std.copy(), fa, sec


def score(Q, std, T, dt, skip):
    """Per column: NRMSE, FDE (0-200 Hz), 1-sigma coverage over the scored samples."""
    from offline.metrics import fde

    ok = np.all(np.isfinite(Q), axis=1)
    ok[:skip] = False
    out = []
    for c in range(T.shape[1]):
        e, t = Q[ok, c], T[ok, c]
        out.append({"nrmse": nrms(e, t), "fde": float(fde(e, t, dt, band=(0, 200)).value),
                    "cover": float(np.mean(np.abs(e - t) <= std[c]))})
    return out


def exact_law(bundle, k3: float):
    """``bundle`` with the exact spring law ``g = -k3 s^3`` as its network (ONNX by jax2onnx,
    as the trained one) and no envelope: the hybrid estimator's upper bound."""
    from offline._deps import need

    jax, jnp, j2o = need("jax"), need("jax.numpy"), need("jax2onnx")
    jax.config.update("jax_enable_x64", True)
    model = j2o.to_onnx(lambda s: -k3 * s ** 3,
                        [jax.ShapeDtypeStruct((1, 1), jnp.float64)], model_name="exact_law",
                        enable_double_precision=True, input_names=["s"], output_names=["g"])
    kf = dict(bundle.kf)
    kf.update(hy_onnx=np.frombuffer(model.SerializeToString(), np.uint8).copy(),
              hy_lo=np.full(1, -1.0), hy_hi=np.full(1, 1.0))   # +-1 m: no envelope
    return bundle.replace(kf=kf)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=4.0, help="scoring records' length [s]")
    ap.add_argument("--train-duration", type=float, default=None,
                    help="training records' length [s] (default: --duration)")
    ap.add_argument("--seeds", type=int, default=3, help="scoring records per level")
    ap.add_argument("--plot", default=None, help="PNG of a stretch of the high-level record")
    ap.add_argument("--json", default=None, help="write the figures as JSON")
    ap.add_argument("--rate", type=float, default=1000.0,
                    help="rows/s (1082.5: through the ADS1256, two channels cycled)")
    args = ap.parse_args(argv)

    from edge.bundle import Bundle
    from edge.estimator import Estimator
    from edge.flags import FLAG_ENVELOPE
    from offline.build import build
    from offline.hybrid import demo
    from offline.model import load_model_file

    tmp = Path(tempfile.mkdtemp(prefix="vsense-hybrid-"))
    path = tmp / "strip.toml"
    path.write_text(demo.model_text(HIGH).replace("rate = 1000.0", f"rate = {args.rate!r}"))
    spec = load_model_file(path)
    print(f"chain: {spec.chain().converter} at {args.rate:g} rows/s")
    t0 = time.perf_counter()
    recs = []
    for name, rms, seed in (("low", LOW, 1), ("high", HIGH, 2), ("val", VAL, 3)):
        t, F, Y, _ = demo.records(path, rms, seed, args.train_duration or args.duration)
        recs.append(str(demo.write_record(tmp / f"{name}.csv", t, F, Y, spec)))
    print(f"training records: {time.perf_counter() - t0:.1f} s (truth: full model, RK4)")
    t0 = time.perf_counter()
    lin = build(path, progress=False, limit=True).bundle   # with the MMSE accuracy limit
    res = build(path, progress=False, limit=False, hybrid=recs)
    hyb = res.bundle
    hyb.save(tmp / "hybrid.npz")
    hyb = Bundle.load(tmp / "hybrid.npz")
    print(f"builds: {time.perf_counter() - t0:.1f} s; " + res.summary().splitlines()[-2].strip())
    exact = exact_law(hyb, demo.K3)
    names = [f.name for f in lin.forces] + [o.name for o in lin.outputs]
    # the accuracy limit of the LINEAR model (offline/limit: MMSE, declared load and noise) at
    # the smoother's delay (lag samples): the reference of any linear-model estimate
    # (the build's, meta["accuracy"]: at the lag's own delay, also where it is not on the
    # limit's grid of delays, as at 1,082.5 rows/s)
    rows_acc = {r["name"]: r for r in lin.meta["accuracy"]["rows"]}
    limit = np.array([rows_acc[n]["limit"] for n in names])
    print("accuracy limit of the linear model at a delay of "
          f"{rows_acc[names[0]]['limit_delay_ms']:g} ms: "
          + ", ".join(f"{n} {v:.4f}" for n, v in zip(names, limit)))
    dt = lin.dt
    skip = int(round(0.5 / dt))
    table = {}
    cost = {"linear": [], "hybrid": []}
    plot = None
    for level, rms in (("low", LOW), ("high", HIGH)):
        for k in range(args.seeds):
            seed = 101 + k + (0 if level == "low" else 50)
            t, F, Y, Z = demo.records(path, rms, seed, args.duration)
            T = np.hstack([F, Z])
            _, _, Yl, Zl = demo.records(path, rms, seed, args.duration, k3=0.0)
            rows = {}
            for lab, b, Yin, Tt in (("linear", lin, Y, T), ("hybrid", hyb, Y, T),
                                    ("hybrid, exact law", exact, Y, T),
                                    ("linear, linear twin", lin, Yl, np.hstack([F, Zl]))):
                est = Estimator(b)
                Q, std, fl, sec = run(est, Yin)
                if lab in cost:
                    cost[lab].append(sec / Yin.shape[0])
                rows[lab] = score(Q, std, Tt, dt, skip)
                if lab == "hybrid":
                    rows[lab][0]["envelope"] = float(np.mean(fl[skip:] & FLAG_ENVELOPE > 0))
                if level == "high" and k == 0 and lab in cost:
                    plot = plot or {"t": t, "T": T}
                    plot[lab] = Q
            table.setdefault(level, []).append(rows)
    # mean over the seeds
    out = {"levels": {"low": LOW, "high": HIGH}, "names": names, "limit": limit.tolist()}
    for level, runs in table.items():
        print(f"\n{level} level ({(LOW if level == 'low' else HIGH) * 1e3:g} mN RMS), "
              f"{len(runs)} scoring records, NRMSE full band / FDE 0-200 Hz / 1-sigma coverage")
        out[level] = {}
        for lab in runs[0]:
            m = {n: {key: float(np.mean([r[lab][i][key] for r in runs]))
                     for key in ("nrmse", "fde", "cover")} for i, n in enumerate(names)}
            out[level][lab] = m
            print(f"  {lab:22s} " + "  ".join(
                f"{n} {v['nrmse']:.4f} ({v['nrmse'] / lm:.2f}x limit) / {v['fde']:.4f} / "
                f"{100 * v['cover']:.0f} %" for (n, v), lm in zip(m.items(), limit)))
        for n in names:
            r = out[level]["linear"][n]["nrmse"] / out[level]["hybrid"][n]["nrmse"]
            tw = out[level]["hybrid"][n]["nrmse"] / out[level]["linear, linear twin"][n]["nrmse"]
            ex = out[level]["hybrid"][n]["nrmse"] / out[level]["hybrid, exact law"][n]["nrmse"]
            print(f"  {n}: linear / hybrid NRMSE {r:.2f}x; hybrid / linear-on-linear-twin "
                  f"{tw:.2f}x; hybrid / exact law {ex:.2f}x")
        env = np.mean([r["hybrid"][0]["envelope"] for r in runs])
        print(f"  estimates flagged outside the envelope: {100 * env:.2f} %")
        out[level]["envelope_fraction"] = float(env)
    cl, ch = 1e6 * np.median(cost["linear"]), 1e6 * np.median(cost["hybrid"])
    print(f"\nper-sample cost (blocks of 10, median of {len(cost['linear'])} records): linear "
          f"smoother {cl:.1f} us, hybrid {ch:.1f} us ({ch / cl:.1f}x)")
    out["cost_us"] = {"linear": cl, "hybrid": ch}
    out["hybrid_meta"] = {k: v for k, v in hyb.meta["hybrid"].items() if k != "envelope"}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    if args.plot and plot:
        _plot(plot, names, dt, args.plot)
    return 0


def _plot(p, names, dt, path):
    from offline._deps import need

    need("matplotlib").use("Agg")
    plt = need("matplotlib.pyplot")
    t = p["t"]
    sl = slice(int(1.0 / dt), int(1.6 / dt))
    fig, axes = plt.subplots(3, 1, figsize=(8, 7.2), sharex=True)
    ax = axes[0]
    ax.plot(t[sl], 1e3 * p["T"][sl, 0], "k-", lw=1.6, label="truth (full nonlinear model)")
    ax.plot(t[sl], 1e3 * p["linear"][sl, 0], "C0-", lw=1.0, label="linear smoother")
    ax.plot(t[sl], 1e3 * p["hybrid"][sl, 0], "C3--", lw=1.0, label="hybrid twin")
    ax.set_ylabel(f"{names[0]} [mN]")
    for ax, c, scale, unit in ((axes[1], 0, 1e3, "mN"), (axes[2], 1, 1e6, "um")):
        for lab, col in (("linear", "C0"), ("hybrid", "C3")):
            ax.plot(t[sl], scale * (p[lab][sl, c] - p["T"][sl, c]), col, lw=1.0,
                    label=f"{lab}: estimate - truth")
        ax.set_ylabel(f"{names[c]} error [{unit}]")
        ax.legend(fontsize=8, loc="upper right")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper right")
    axes[0].set_title("strip with a cubic spring at the tip, high level, force unknown")
    axes[2].set_xlabel("time [s]")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
