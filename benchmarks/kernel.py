"""Time per step of the compiled estimator kernel next to the NumPy reference (Table 1).

    python benchmarks/kernel.py [--steps 200000] [--ref-steps 2000]

Bundles: the paper's cantilever (71 reduced DOFs, 1 displacement channel, 1 force), a
4-channel ~100-DOF variant of it, and a scaling sweep over model size, channel count and
fixed-lag window; the Kalman fixed-lag smoother on the cantilever (band-pass force model of
the default order 16 and of order 4, lag 20 = 20 ms and others) next to its NumPy twin and
the Tikhonov kernel at the same delay (``--smoother-only``: just that), and the smoother
built for the ADS1256's conversions (DRATE 1000, continuous: 2 chain states per channel)
next to the same smoother for point samples, and with the sensor's own dynamics (a high-pass
and a drifting offset: 2 states; the ADS1256 with a laser's 1 ms average and drifting offset:
1 + 3 states) (``--chain-only``: just that); ``--bundle PATH``: a built bundle (the demo's:
``OUT/bundle.npz`` of ``python -m offline.demo``) through ``Estimator.process`` as the device
runs it, the kernel alone on its packed state, and for a smoother with a chain check the
check's evaluation (just that). All run in this
process, one after the other; figures are medians of 5 repetitions (block mode: the whole
record in one call), the smoother table the minimum of ``--repeat`` such medians.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

from edge.bundle import SensorChannel
from edge.estimator import Estimator
from edge.estimator.reference import ReferenceEstimator

ROOT = Path(__file__).resolve().parents[1]


def time_kernel(bundle, steps, window=None, single=False, reps=5):
    rng = np.random.default_rng(0)
    est = Estimator(bundle, window=window, check_stability=False)
    Y = 1e-5 * rng.standard_normal((steps, est.n_channels))
    F = np.empty((steps, est.n_forces))
    Z = np.empty((steps, est.n_outputs))
    fl = np.empty(steps, dtype=np.uint8)
    times = []
    for _ in range(reps):
        est.reset()
        if single:
            n = min(steps, 20000)
            t0 = time.perf_counter()
            for i in range(n):
                est.process(Y[i:i + 1], F[i:i + 1], Z[i:i + 1], fl[i:i + 1])
            times.append((time.perf_counter() - t0) / n)
        else:
            t0 = time.perf_counter()
            est.process(Y, F, Z, fl)
            times.append((time.perf_counter() - t0) / steps)
    return float(np.median(times))


def time_reference(bundle, steps, window=None):
    rng = np.random.default_rng(0)
    ref = ReferenceEstimator(bundle, window=window)
    Y = 1e-5 * rng.standard_normal((steps, len(bundle.channels)))
    t0 = time.perf_counter()
    ref.run(Y)
    return (time.perf_counter() - t0) / steps


def cantilever_bundle(n_modes=50):
    from offline.build import build

    res = build(ROOT / "examples" / "paper_cantilever.toml", alpha=1.0, progress=False,
                n_modes=n_modes)
    return res.bundle


def four_channel(b):
    """4 channels at master DOFs of the cantilever: uz at 110, 60 mm, rx at 110, ry at 60."""
    names = {0: "uz110", 1: "rx110", 2: "ry110"}
    dofs = [0, 1, 2, 9] if b.n > 9 else [0, 1, 2, 3]
    chans = [SensorChannel(f"c{i}_{names.get(d, d)}", dof=d, kind="displacement", weight=1e10)
             for i, d in enumerate(dofs)]
    return b.replace(channels=chans, alpha=1e3)  # heavily regularised: stable for timing


def smoother_bundle(b, lag, kinds=None, order=None, chain=None):
    from offline.smoother import ForceModel, attach_smoother, design_smoother
    from offline.forcing.force_model import DEFAULT_ORDER

    if kinds:
        b = b.replace(channels=[SensorChannel(f"c{i}", dof=b.channels[0].dof, kind=k,
                                        weight={"displacement": 1e10, "velocity": 1e6,
                                                "acceleration": 1e2}[k])
                                for i, k in enumerate(kinds)])
    fm = [ForceModel("bandpass", (5.0, 160.0), 1.0, order or DEFAULT_ORDER)]
    if chain is not None:
        b = b.replace(chain=chain)
    return attach_smoother(b, design_smoother(b, fm, lag=lag), fm, 0.0)


def time_smoother_reference(bundle, steps):
    from edge.estimator.smoother_reference import ReferenceSmoother

    rng = np.random.default_rng(0)
    ref = ReferenceSmoother(bundle)
    Y = 1e-5 * rng.standard_normal((steps, len(bundle.channels)))
    t0 = time.perf_counter()
    ref.run(Y)
    return (time.perf_counter() - t0) / steps


def smoother_table(b71, args):
    """Smoother kernel at the default force-model order (and order 4), its NumPy twin and
    the Tikhonov kernel at the same delay, alternated in one run; each figure the minimum
    over ``--repeat`` medians (the machine is shared: the minimum is the least disturbed)."""
    from offline.forcing.force_model import DEFAULT_ORDER

    def best(fn):
        return min(fn() for _ in range(args.repeat))

    print(f"\nKalman fixed-lag smoother (cantilever 71 DOF, 1 displacement channel), load "
          f"average {os.getloadavg()[0]:.1f} at the start:")
    print(f"{'order':>6}{'force states':>13}{'lag':>5}{'kernel [us/step]':>18}"
          f"{'reference [us/step]':>22}{'ratio':>8}{'single-call [us]':>18}"
          f"{'Tikhonov L=lag+1':>18}{'S/T':>6}")
    rows = [(DEFAULT_ORDER, lag) for lag in (0, 5, 20, 50)] + [(4, 20)]
    for order, lag in rows:
        sb = smoother_bundle(b71, lag, order=order)
        k = best(lambda: time_kernel(sb, args.steps))
        t = best(lambda: time_kernel(b71, args.steps, window=lag + 1))  # same delay, same run
        r = time_smoother_reference(sb, args.ref_steps)
        s = time_kernel(sb, args.steps, single=True, reps=1)
        print(f"{order:>6}{2 * order:>13}{lag:>5}{k * 1e6:>18.3f}{r * 1e6:>22.1f}"
              f"{r / k:>8.0f}{s * 1e6:>18.2f}{t * 1e6:>18.3f}{k / t:>6.2f}", flush=True)
    sb = smoother_bundle(b71, 20, kinds=("displacement", "acceleration"))
    print(f"  2 channels (displacement + acceleration), order {DEFAULT_ORDER}, lag 20: "
          f"{best(lambda: time_kernel(sb, args.steps)) * 1e6:.3f} us/step; load average "
          f"{os.getloadavg()[0]:.1f} at the end")


def chain_table(b71, args):
    """The smoother with and without the ADS1256 chain (lag 20; the default force-model order
    and order 16), alternated in one run, each figure the minimum over ``--repeat`` medians
    of 5."""
    from edge.acquisition import Chain
    from offline.forcing.force_model import DEFAULT_ORDER

    print(f"\nmeasurement chain (cantilever {b71.n} DOF, 1 displacement channel, lag 20), load "
          f"average {os.getloadavg()[0]:.1f} at the start:")
    print(f"{'order':>6}{'chain':>34}{'states':>8}{'kernel [us/step]':>18}"
          f"{'single-call [us]':>18}")
    chain = Chain("ads1256", b71.rate, "continuous")
    # the sensor's own dynamics (schema 8): a laser's 1 ms average and drifting offset
    laser = Chain("ads1256", b71.rate, "continuous", average=(1e-3,), drift=(1e-7,))
    hp = Chain(highpass=(0.5,), drift=(1e-7,))
    for order in (DEFAULT_ORDER, 16):
        pair = [("ideal (point samples)", smoother_bundle(b71, 20, order=order)),
                (f"ads1256 {b71.rate:g} SPS continuous",
                 smoother_bundle(b71, 20, order=order, chain=chain)),
                ("ideal + high-pass + drift", smoother_bundle(b71, 20, order=order, chain=hp)),
                ("ads1256 + 1 ms average + drift",
                 smoother_bundle(b71, 20, order=order, chain=laser))]
        t = [[] for _ in pair]
        for _ in range(args.repeat):
            for i, (_, b) in enumerate(pair):
                t[i].append(time_kernel(b, args.steps))
        for i, (name, b) in enumerate(pair):
            s = time_kernel(b, args.steps, single=True, reps=1)
            print(f"{order:>6}{name:>34}{b.kf['A'].shape[0]:>8}{min(t[i]) * 1e6:>18.3f}"
                  f"{s * 1e6:>18.2f}", flush=True)
    print(f"  load average {os.getloadavg()[0]:.1f} at the end")


def bundle_rows(path, steps, reps=5):
    """A built bundle: its dimensions, ``Estimator.process`` in one block (the level tracker's
    decisions and the chain check's evaluations amortised), the smoother's kernel alone on
    the same packed state (``_smooth_packed``), the chain check's evaluation; medians of
    ``reps`` alternated in this process, with their spread, in wall time and in this
    thread's CPU time (on a shared machine the wall time includes waiting for a core)."""
    from edge.bundle import Bundle
    from edge.estimator.smoother_pack import _smooth_packed

    b = Bundle.load(path)
    est = Estimator(b, check_stability=False)
    rng = np.random.default_rng(0)
    Y = 1e-5 * rng.standard_normal((steps, est.n_channels))
    F, Z = np.empty((steps, est.n_forces)), np.empty((steps, est.n_outputs))
    fl = np.empty(steps, dtype=np.uint8)
    op = getattr(est, "op", None)
    print(f"{path}: method {b.method}, {b.n} DOF, channels {len(b.channels)}, load average "
          f"{os.getloadavg()[0]:.1f} at the start")
    if op is None or not hasattr(op, "Af"):
        print(f"  Estimator.process {time_kernel(b, steps, reps=reps) * 1e6:.3f} us/step")
        return
    print(f"  states {op.n_state} = modal {op.Am.shape[1] * 2 or op.Ad.shape[0]} + force model "
          f"{op.Af.shape[0]} + chain {op.Ak.shape[0]}; lag {op.lag}; coupling rank "
          f"{op.Cl.shape[0]}; load levels {len(est._levels)}; chain {b.chain}")
    cc = est.chain_check

    def process():
        est.reset()
        t0, c0 = time.perf_counter(), time.thread_time()
        est.process(Y, F, Z, fl)
        return (time.perf_counter() - t0) / steps, (time.thread_time() - c0) / steps

    def kernel():
        est.reset()
        Q = np.empty((steps, op.Cq.shape[0]))
        t0, c0 = time.perf_counter(), time.thread_time()
        _smooth_packed(Y, Q, fl, *est.pack.args)
        return (time.perf_counter() - t0) / steps, (time.thread_time() - c0) / steps

    def check():
        t0, c0 = time.perf_counter(), time.thread_time()
        cc.bundle_filter.loglik(cc.ring, 0, cc.skip) - cc.alt.loglik(cc.ring, 0, cc.skip)
        return time.perf_counter() - t0, time.thread_time() - c0

    fns = {"Estimator.process [us/step]": (process, 1e6),
           "kernel alone [us/step]": (kernel, 1e6)}
    if cc is not None:
        fns["chain check, one evaluation [ms]"] = (check, 1e3)
    t = {k: [] for k in fns}
    for _ in range(reps + 1):  # the first: compilation and caches, not counted
        for k, (fn, _) in fns.items():
            t[k].append(fn())
    print(f"  {'':<34}{'wall: median (min-max)':>30}{'thread CPU: median (min-max)':>32}")
    for k, (fn, scale) in fns.items():
        w, c = (np.array(t[k][1:])[:, i] * scale for i in (0, 1))
        print(f"  {k:<34}{np.median(w):>11.3f} ({w.min():.3f}-{w.max():.3f})"
              f"{np.median(c):>13.3f} ({c.min():.3f}-{c.max():.3f})")
    if cc is not None:
        e = np.median(np.array(t["chain check, one evaluation [ms]"][1:]), axis=0)
        print(f"  chain check: every {cc.every} rows, {cc.n} rows of ring: {e[0] * 1e6 / cc.every:.3f}"
              f" us per row amortised (wall), {e[1] * 1e6 / cc.every:.3f} (thread CPU)")
    print(f"  load average {os.getloadavg()[0]:.1f} at the end")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200_000)
    ap.add_argument("--ref-steps", type=int, default=2000)
    ap.add_argument("--smoother-only", action="store_true")
    ap.add_argument("--chain-only", action="store_true")
    ap.add_argument("--bundle", default=None,
                    help="a built bundle (e.g. the demo's OUT/bundle.npz): just its rows")
    ap.add_argument("--repeat", type=int, default=3,
                    help="smoother table: minimum over this many medians of 5 (default 3)")
    args = ap.parse_args(argv)
    if args.bundle:
        bundle_rows(args.bundle, args.steps)
        return
    b71 = cantilever_bundle(50)
    if args.chain_only:
        chain_table(b71, args)
        return
    if args.smoother_only:
        smoother_table(b71, args)
        chain_table(b71, args)
        return
    b100 = four_channel(cantilever_bundle(79))
    print(f"cantilever bundle: n={b71.n}; 4-channel bundle: n={b100.n}, nch=4\n")
    print(f"{'bundle':<28}{'kernel [us/step]':>18}{'reference [us/step]':>22}{'ratio':>8}"
          f"{'single-call [us]':>18}")
    for name, b in (("cantilever 71 DOF, L=1", b71), ("4 ch, 100 DOF, L=1", b100)):
        k = time_kernel(b, args.steps)
        r = time_reference(b, args.ref_steps)
        s = time_kernel(b, args.steps, single=True, reps=1)
        print(f"{name:<28}{k * 1e6:>18.3f}{r * 1e6:>22.1f}{r / k:>8.0f}{s * 1e6:>18.2f}")
    smoother_table(b71, args)
    chain_table(b71, args)
    print("\nfixed-lag windows (cantilever 71 DOF; Newmark and exact FOH):")
    print(f"{'L':>4}{'newmark [us/step]':>20}{'foh [us/step]':>16}")
    for L in (1, 5, 10, 20):
        kn = time_kernel(b71, args.steps, window=L)
        kf = time_kernel(b71.replace(discretization="foh"), args.steps, window=L)
        print(f"{L:>4}{kn * 1e6:>20.3f}{kf * 1e6:>16.3f}")
    print("\nscaling with model size (1 channel, L=1) and channel count (71 DOF):")
    for modes in (10, 30, 79, 179):
        b = cantilever_bundle(modes)
        print(f"  n={b.n:>4}: {time_kernel(b, args.steps // 2) * 1e6:8.3f} us/step")
    for nch in (1, 2, 4, 8):
        chans = [SensorChannel(f"c{i}", dof=i, kind="displacement", weight=1e10) for i in range(nch)]
        b = b71.replace(channels=chans)
        print(f"  nch={nch}: {time_kernel(b, args.steps // 2) * 1e6:8.3f} us/step")


if __name__ == "__main__":
    main()
