"""Tikhonov fixed-lag vs the Kalman fixed-lag smoother on the paper cantilever, against truth
from the full FE model (exact modal engine, 10x finer steps): not the estimators' reduced
model or discretisation.

    python benchmarks/smoother_accuracy.py [--duration 20] [--lag 20] [--acc] [--quick]

For random 5-80 and 5-160 Hz loads (1 N RMS) at 0.1, 1 and 3 % sensor noise: normalised RMS
error (RMS(estimate - truth) / std(truth), full band) and FDE (0-200 Hz) of the force at
110 mm and the displacement at 60 mm, the smoother's 1-sigma coverage, and the ratio to the
Wiener (MMSE, non-causal) limit that issue 11 quotes for the displacement-sensor case. Both
estimators get the true noise level (channel weight 1 / sigma^2); Tikhonov L = lag + 1 (the
same delay) with the automatic alpha (``auto``: discrepancy principle, L-curve for
acceleration channels) chosen on the first 2 s of the record; the smoother's force model is
a Butterworth band-pass (default order 16, ``--order``) on the load band (``--rw``: a random walk instead).
``--acc``: the acceleration-sensor model file (examples/paper_cantilever_acc.toml); the
displacement drift is then shown as the 0-2 Hz part of the 60 mm displacement error.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# issue 11: Wiener limit, force / 60 mm displacement NRMS (displacement sensor at 110 mm)
LIMIT = {((5, 80), 0.001): (0.058, 0.0015), ((5, 80), 0.01): (0.170, 0.0051),
         ((5, 80), 0.03): (0.276, 0.0119), ((5, 160), 0.001): (0.208, 0.0053),
         ((5, 160), 0.01): (0.431, 0.0158), ((5, 160), 0.03): (0.603, 0.0292)}


def nrms(e, t):
    return float(np.sqrt(np.mean((e - t) ** 2)) / np.std(t))


def lowpass_rms(x, dt, f_hi=2.0):
    X = np.fft.rfft(x - np.mean(x))
    X[np.fft.rfftfreq(len(x), dt) > f_hi] = 0.0
    return float(np.std(np.fft.irfft(X, len(x))))


def main(argv=None):
    from edge.bundle import SensorChannel
    from edge.estimator import Estimator
    from offline.build import build
    from offline.metrics import fde
    from offline.regularization import choose_alpha
    from offline.simulate import simulate_model
    from offline.smoother import ForceModel, attach_smoother, design_smoother

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--lag", type=int, default=20)
    ap.add_argument("--acc", action="store_true")
    ap.add_argument("--rw", action="store_true", help="random-walk force model")
    ap.add_argument("--order", type=int, default=16)
    ap.add_argument("--quick", action="store_true", help="1 %% noise only")
    args = ap.parse_args(argv)
    model = ROOT / "examples" / ("paper_cantilever_acc.toml" if args.acc
                                 else "paper_cantilever.toml")
    t0 = time.perf_counter()
    res = build(model, alpha=1.0, window=1, progress=False)
    b0 = res.bundle
    print(f"{model.name}: {b0.n} reduced DOFs, lag {args.lag} ({args.lag * b0.dt * 1e3:g} ms), "
          f"force model {'random walk' if args.rw else f'band-pass order {args.order}'}; "
          f"built in {time.perf_counter() - t0:.1f} s")
    levels = (0.01,) if args.quick else (0.001, 0.01, 0.03)
    L = args.lag
    print(f"{'load':>8} {'noise':>6} | {'Tikhonov F':>10} {'d60':>7} {'FDE':>6} | "
          f"{'smoother F':>10} {'d60':>7} {'FDE':>6} {'cov F':>6} {'cov d':>6} | "
          f"{'x limit F':>9} {'d60':>5}" + (" | d60 0-2 Hz err T/S" if args.acc else ""))
    for band in ((5, 80), (5, 160)):
        for lvl in levels:
            s = simulate_model(model, {"type": "random", "band": list(band), "rms": 1.0},
                               args.duration, noise=lvl, seed=7, build_result=res,
                               progress=False)
            sig = lvl * np.std(s.Y_clean, axis=0)
            chans = [SensorChannel(**{**c.__dict__, "weight": 1.0 / sig[i] ** 2})
                     for i, c in enumerate(b0.channels)]
            b = b0.replace(channels=chans)
            fm = [ForceModel("randomwalk" if args.rw else "bandpass", band, 1.0, args.order)]
            sb = attach_smoother(b, design_smoother(b, fm, lag=L), fm, 0.0)
            ncal = int(2.0 / b.dt)
            ch = choose_alpha(b, s.Y[:ncal], window=L + 1, method="auto",
                              progress=False)
            rows = {}
            for name, est in (("T", Estimator(b, alpha=ch.alpha, window=L + 1)),
                              ("S", Estimator(sb))):
                F, Z, _ = est.run(s.Y)
                d = est.delay
                n = len(F) - d
                sk = 1000
                Fe, Ze = F[d:][sk:, 0], Z[d:][sk:, 0]
                Ft, Zt = s.F[:n][sk:, 0], s.Z[:n][sk:, 0]
                r = [nrms(Fe, Ft), nrms(Ze, Zt), fde(Fe, Ft, b.dt, band=(0, 200)).value]
                if est.std is not None:
                    r += [float(np.mean(np.abs(Fe - Ft) <= est.std[0])),
                          float(np.mean(np.abs(Ze - Zt) <= est.std[1]))]
                r.append(lowpass_rms(Ze - Zt, b.dt) / np.std(Zt))
                rows[name] = r
            T, S = rows["T"], rows["S"]
            lim = LIMIT.get((band, lvl))
            xl = (f"{S[0] / lim[0]:>9.2f} {S[1] / lim[1]:>5.2f}" if lim and not args.acc
                  else f"{'':>9} {'':>5}")
            print(f"{band[0]:>3}-{band[1]:<4} {100 * lvl:>5g}% | {T[0]:>10.3f} {T[1]:>7.4f} "
                  f"{T[2]:>6.3f} | {S[0]:>10.3f} {S[1]:>7.4f} {S[2]:>6.3f} {S[3]:>6.3f} "
                  f"{S[4]:>6.3f} | {xl}"
                  + (f" | {T[-1]:.4f} / {S[-1]:.4f}" if args.acc else ""), flush=True)
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
