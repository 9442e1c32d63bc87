"""Inverse maps on the paper's cantilever: accuracy (paper 000 eq. 18-21, Table-5 layout),
timings (data, training, edge inference, operator update), extrapolation (Sect. 4.3.2).

    /work/venv/bin/python benchmarks/inverse_maps.py                 # root-spring variant, MLP + GP
    /work/venv/bin/python benchmarks/inverse_maps.py --paper         # also the clamped paper model (E, zeta)
    /work/venv/bin/python benchmarks/inverse_maps.py --table         # all feature types (Table 5)
    /work/venv/bin/python benchmarks/inverse_maps.py --crb           # Cramer-Rao bounds of the design
    /work/venv/bin/python benchmarks/inverse_maps.py --extrapolation # Sect. 4.3.2 zones

Targets (team brief): mu_|eps| <= 1 % for E and <= 3 % for the damping ratio on 1,000 test
samples with 1,000 training samples; inference <= 0.2 ms per estimate; training data plus
training < 2 min; operator update < 50 ms.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# one BLAS thread, as on the Pi: multithreaded eigh/solve on a shared 2-core machine is slower
# and its timings meaningless (the operator update took 60-800 ms with default threading)
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge import features as F  # noqa: E402
from edge import inverse as EI  # noqa: E402
from offline.inverse import dataset, evaluate, export, parametric as P, sampling  # noqa: E402
from offline.inverse.fromfile import from_model_file  # noqa: E402
from offline.inverse.gp import train_gp  # noqa: E402
from offline.inverse.mlp import train_mlp  # noqa: E402

CACHE = Path(os.environ.get("VSENSE_CACHE", "~/.cache/vsense")).expanduser() / "inverse"
PAPER_EXTRA = {
    "parameters": [
        {"name": "E", "kind": "modulus", "material": "aluminium", "bounds": [60e9, 78e9]},
        {"name": "zeta", "kind": "damping_ratio", "bounds": [0.005, 0.03], "modes": [1, 2]}],
    "experiment": {"excitation": {"type": "pulse", "amplitude": 1.0, "width": 0.002, "at": "F110"},
                   "initial": "rest", "duration": 0.5, "rate": 1000.0, "channels": ["d110"],
                   "noise": 0.01},
    "inverse": {"samples": 1000, "test_samples": 1000, "validation_samples": 500,
                "features": {"kind": "fft_ri_bins+time_extrema", "n_extrema": 12}, "map": "mlp",
                "seed": 0, "hidden": [128, 128], "max_epochs": 1500},
}


def crb(pm, ex, th):
    """Cramer-Rao bound (relative std, %) of each parameter for white noise sigma per sample."""
    sig = dataset.noise_sigma(pm, ex)
    y0 = P.simulate(pm, th[None], ex.excitation, ex.n, ex.rate, ex.substeps)[0]
    J = []
    for j in range(th.size):
        d = th.copy()
        h = 1e-4 * abs(th[j])
        d[j] += h
        yj = P.simulate(pm, d[None], ex.excitation, ex.n, ex.rate, ex.substeps)[0]
        # dy/dlog(theta_j), scaled by 1/sigma per channel
        J.append(((yj - y0) / h * th[j] / sig).ravel())
    J = np.array(J).T
    return 100 * np.sqrt(np.diag(np.linalg.inv(J.T @ J)))


def run(path, args, extra=None, label=""):
    out = {}
    t0 = time.perf_counter()
    su = from_model_file(path, progress=False, extra=extra)
    pm, ex, st = su.pm, su.experiment, su.settings
    out["setup_s"] = time.perf_counter() - t0
    names = list(pm.names)
    print(f"\n=== {label or su.name}: parameters {names}, box {pm.bounds.tolist()}")
    print(f"reduced model {pm.parts.n} DOFs, parametric setup {out['setup_s']:.1f} s")
    if args.crb:
        import itertools
        rows = [pm.bounds.mean(1)] + [np.array(c) for c in itertools.product(*pm.bounds)]
        b = np.array([crb(pm, ex, th) for th in rows])
        print("Cramer-Rao bound, relative std %: centre", np.round(b[0], 3).tolist(),
              " worst corner", np.round(b[1:].max(0), 3).tolist())
    seed = st.seed
    Xtr = sampling.latin_hypercube(st.samples, pm.bounds, seed)
    Xva = sampling.uniform(st.validation_samples, pm.bounds, seed + 1)
    Xte = sampling.uniform(st.test_samples, pm.bounds, seed + 2)
    sigma = dataset.noise_sigma(pm, ex)
    t0 = time.perf_counter()
    cache = None if args.no_cache else CACHE
    Ytr, Yva, Yte = (dataset.generate(pm, ex, X, seed=s, sigma=sigma, cache_dir=cache, n_jobs=args.jobs,
                                      desc=d, progress=True)
                     for X, s, d in ((Xtr, seed + 10, "train"), (Xva, seed + 11, "validation"),
                                     (Xte, seed + 12, "test")))
    out["data_s"] = time.perf_counter() - t0
    bands = P.frequency_bands(pm, ex.rate / 2)
    bins = F.bins_of_interest(bands, ex.n, ex.rate, st.margin_bins)
    print(f"data: {len(Xtr)}+{len(Xva)}+{len(Xte)} windows of {ex.n} samples in {out['data_s']:.1f} s "
          f"(cached runs are faster; --no-cache to time a cold run); resonance bands "
          f"{np.round(bands, 1).tolist()} Hz -> {bins.size} bins of interest")
    kinds = ([st.features.kind] if not args.table else
             ["time_samples", "time_samples_sparse", "time_extrema", "fft_mp", "fft_ri",
              "fft_mp_bins", "fft_ri_bins", st.features.kind])
    kinds = list(dict.fromkeys(kinds))
    rows, nfs, res = {}, {}, {}
    for kind in kinds:
        cfg = F.FeatureConfig(kind=kind, bins=tuple(int(b) for b in bins), n_samples=bins.size,
                              n_extrema=st.features.n_extrema, prominence=st.features.prominence)
        Ftr, Fva, Fte = (F.extract_batch(kind, Y, ex.rate, cfg) for Y in (Ytr, Yva, Yte))
        if not np.isfinite(Ftr).all():
            print(f"{kind}: skipped, some windows have fewer than {cfg.n_extrema} extrema")
            continue
        for mp in args.maps:
            t0 = time.perf_counter()
            if mp == "mlp":
                tm = train_mlp(Ftr, Xtr, Fva, Xva, hidden=tuple(args.hidden or st.hidden),
                               max_epochs=args.epochs or st.max_epochs, patience=st.patience,
                               seed=seed, batch_size=st.batch_size, learning_rate=st.learning_rate,
                               progress=True)
            else:
                tm = train_gp(Ftr, Xtr, Fva, Xva, seed=seed)
            t_train = time.perf_counter() - t0
            key = f"{kind} [{mp}]"
            rows[key] = evaluate.metrics(tm.predict(Fte), Xte)
            nfs[key] = Ftr.shape[1]
            res[key] = dict(tm=tm, cfg=cfg, Ftr=Ftr, Fte=Fte, t_train=t_train)
            print(f"{key}: n_psi {Ftr.shape[1]}, trained in {t_train:.1f} s"
                  + (f" ({tm.history['epochs']} epochs)" if mp == "mlp" else ""))
    print()
    print(evaluate.table(rows, names, nfs, title=f"Relative errors on {len(Xte)} test samples "
                                                 f"({len(Xtr)} LHS training samples), noise {ex.noise:g} of peak"))
    # ---- edge: ONNX session, check set, per-estimate time (features + inference)
    key = f"{st.features.kind} [{args.maps[0]}]"
    r = res[key]
    arrays, meta = export.artifact(r["tm"], args.maps[0], r["Fte"], names, pm.bounds, r["cfg"],
                                   ex.to_dict(), ex.n, len(ex.channels), r["Ftr"], sigma)
    pa, pmeta = pm.parts.to_extras()
    rt = EI.InverseRuntime({**arrays, **pa}, {"inverse": {"maps": {args.maps[0]: meta}, "parts": pmeta}})
    m = rt.get()
    for w in Yte[:20]:
        m.identify(w)  # warm-up
    ts = []
    est = []
    for w in Yte:
        t0 = time.perf_counter()
        res_ = m.identify(w)
        ts.append(time.perf_counter() - t0)
        est.append(res_["values"])
    ts = np.array(ts) * 1e3
    edge_m = evaluate.metrics(np.array(est), Xte)
    t_inf = []
    psi = r["Fte"][0]
    for _ in range(2000):
        t0 = time.perf_counter()
        m.infer(psi)
        t_inf.append(time.perf_counter() - t0)
    out["infer_ms"] = float(np.median(t_inf) * 1e3)
    out["identify_ms"] = float(np.median(ts))
    # ---- operator update: parts -> M, C, K -> derive_operator
    from edge.bundle import Bundle, IdentifiedForce, SensorChannel
    from edge.estimator import Estimator
    Mn, Cn, Kn = EI.matrices(pm.parts, pm.parts.theta0)
    b = Bundle(M=Mn, C=Cn, K=Kn, dt=1 / ex.rate, channels=[SensorChannel(ex.channels[0], dof=0)],
               forces=[IdentifiedForce("F110", dof=int(np.argmax(pm.force)))], alpha=1e-10)
    est_ = Estimator(b)
    tu = []
    for th in Xte[:10]:
        t0 = time.perf_counter()
        op, nb, _ = EI.update_model(pm.parts, b, th)
        est_.swap(op)
        tu.append(time.perf_counter() - t0)
    out["update_ms"] = float(np.median(tu) * 1e3)
    zj = names.index("zeta") if "zeta" in names else 1
    eE = 100 * rows[key]["mu_abs"][0]
    ez = 100 * rows[key]["mu_abs"][zj]
    print(f"\nedge (onnxruntime, map '{key}'): same accuracy through ONNX: mu_|eps| "
          f"{np.round(100 * edge_m['mu_abs'], 3).tolist()} %")
    print(f"{'figure':<44}{'target':>12}{'measured':>14}")
    for lab, tgt, val in (("mu_|eps| E [%]", "<= 1", f"{eE:.3f}"),
                          ("mu_|eps| zeta [%]", "<= 3", f"{ez:.3f}"),
                          ("inference per estimate (ORT run) [ms]", "<= 0.2", f"{out['infer_ms']:.4f}"),
                          ("features + inference per window [ms]", "", f"{out['identify_ms']:.4f}"),
                          ("training data + training [s]", "< 120", f"{out['data_s'] + r['t_train']:.1f}"),
                          ("operator update (M,C,K + derive + swap) [ms]", "< 50", f"{out['update_ms']:.2f}")):
        print(f"{lab:<44}{tgt:>12}{val:>14}")
    if args.extrapolation:
        extrapolation(pm, ex, st, Xtr, Ytr, Xva, Yva, sigma, r["cfg"], names, zj, args)
    return out


def extrapolation(pm, ex, st, Xtr, Ytr, Xva, Yva, sigma, cfg, names, zj, args):
    """Sect. 4.3.2: drop the central 20 % band of the damping ratio from training, test in the
    box widened by 50 % on both sides for it; report mu_|eps| and flagged fraction per zone."""
    keep = evaluate.extrapolation_split(Xtr, pm.bounds, [zj])
    keep_v = evaluate.extrapolation_split(Xva, pm.bounds, [zj])
    box = evaluate.extrapolation_test_box(pm.bounds, [zj])
    box[zj, 0] = max(box[zj, 0], 0.001)
    Xt = sampling.uniform(st.test_samples, box, st.seed + 3)
    Yt = dataset.generate(pm, ex, Xt, seed=st.seed + 13, sigma=sigma, cache_dir=CACHE, desc="extrapolation")
    Ftr, Fva, Ft = (F.extract_batch(cfg.kind, Y, ex.rate, cfg) for Y in (Ytr[keep], Yva[keep_v], Yt))
    tm = train_mlp(Ftr, Xtr[keep], Fva, Xva[keep_v], hidden=tuple(args.hidden or st.hidden),
                   max_epochs=args.epochs or st.max_epochs,
                   patience=st.patience, seed=st.seed, batch_size=st.batch_size,
                   learning_rate=st.learning_rate)
    ok = np.isfinite(Ft).all(axis=1)
    if not ok.all():
        print(f"extrapolation: {int((~ok).sum())} test windows give non-finite features (too few "
              "extrema) and are left out")
    Ft, Xt = Ft[ok], Xt[ok]
    p = tm.predict(Ft)
    fl = []
    lo, hi = Ftr.min(0), Ftr.max(0)
    for pi, psi in zip(p, Ft):
        fl.append(EI.range_flags(pi, pm.bounds, psi, lo, hi, std=tm.sigma_val)["out_of_range"])
    lab = evaluate.zones(Xt, pm.bounds, [zj])
    print(f"\nExtrapolation (Sect. 4.3.2): {int(keep.sum())} training samples after removing the "
          f"central 20 % band of {names[zj]}; test box {names[zj]} in {np.round(box[zj], 4).tolist()}")
    print(evaluate.zone_report(p, Xt, lab, names, fl))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=str(ROOT / "examples" / "cantilever_params.toml"))
    ap.add_argument("--paper", action="store_true", help="also the clamped paper cantilever (E, zeta)")
    ap.add_argument("--table", action="store_true", help="all feature types (Table 5 layout)")
    ap.add_argument("--crb", action="store_true")
    ap.add_argument("--extrapolation", action="store_true")
    ap.add_argument("--maps", nargs="+", default=["mlp", "gp"], choices=["mlp", "gp"])
    ap.add_argument("--hidden", nargs="+", type=int, default=None, help="default: [inverse].hidden")
    ap.add_argument("--epochs", type=int, default=None, help="default: [inverse].max_epochs")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--no-cache", action="store_true")
    args = ap.parse_args(argv)
    run(args.model, args, label="cantilever with root spring (E, zeta, k_root)")
    if args.paper:
        run(ROOT / "examples" / "paper_cantilever.toml", args, extra=PAPER_EXTRA,
            label="paper cantilever, clamped (E, zeta)")


if __name__ == "__main__":
    main()
