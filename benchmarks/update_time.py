"""Time of the device's model update (``edge.inverse.update_model``) through the converter's
chain: the readable twin (every tap through the whole model's exponential) and the modal path
(mode by mode, the default; the closed loop's spectral radius without the history states)
side by side, on the same bundle, in one run.

    /work/venv/bin/python benchmarks/update_time.py --bundle B.npz --change k_root=4
    /work/venv/bin/python benchmarks/update_time.py                 # builds the example (cached maps)

One BLAS thread (as on the Pi). The two paths alternate update by update (the machine's load
falls on both alike); the median of ``--repeat`` updates each, their ratio, and how far the two
operators differ (largest |difference| of each array over its largest entry).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # one BLAS thread, as on the Pi

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from edge import inverse as EI  # noqa: E402
from edge.estimator import derive_operator  # noqa: E402

EXAMPLE = ROOT / "examples" / "cantilever_params.toml"
ARRAYS = ("A_data", "Acoup", "Gamma", "Kx", "Ky", "E", "S", "P", "Pinv")


def _twin(bundle):
    """The readable twins: the converter's rows tap by tap through the whole model, the
    spectral radius of the whole closed loop (the code before the modal path)."""
    return derive_operator(bundle, twin=True)


def time_updates(parts, bundle, theta: dict, repeat: int = 12):
    """``(t_twin, t_modal, diff)``: update times [ms] of both paths (``repeat`` each,
    alternating) and ``{array: max |twin - modal| / max |twin|}`` of the last operators."""
    t = {"twin": [], "modal": []}
    ops = {}
    for _ in range(int(repeat)):
        for key, derive in (("twin", _twin), ("modal", None)):
            t0 = time.perf_counter()
            ops[key], _, _ = EI.update_model(parts, bundle, theta, derive=derive)
            t[key].append((time.perf_counter() - t0) * 1e3)
    diff = {}
    for k in ARRAYS:
        a, b = getattr(ops["twin"], k), getattr(ops["modal"], k)
        diff[k] = float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-300))
    diff["spectral_radius"] = abs(ops["twin"].spectral_radius - ops["modal"].spectral_radius)
    return np.array(t["twin"]), np.array(t["modal"]), diff


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=str(EXAMPLE))
    p.add_argument("--bundle", default=None, help="bundle with maps (default: build the model)")
    p.add_argument("--change", action="append", default=None, help="NAME=VALUE (default k_root=4)")
    p.add_argument("--repeat", type=int, default=12, help="updates per path (median)")
    a = p.parse_args(argv)
    from edge.bundle import Bundle

    if a.bundle:
        bundle = Bundle.load(a.bundle)
    else:
        from offline.build import build
        bundle = build(a.model, progress=True).bundle
    parts = EI.InverseRuntime.from_bundle(bundle).parts
    theta = {}
    for item in a.change or ["k_root=4"]:
        k, _, v = item.partition("=")
        if k not in parts.names:
            p.error(f"--change: {k!r} is not a parameter of the bundle ({list(parts.names)})")
        theta[k] = float(v)
    tw, tm, diff = time_updates(parts, bundle, theta, a.repeat)
    print(f"bundle: {bundle.M.shape[0]} DOFs, window {bundle.window}, chain "
          f"{bundle.chain.converter} (markov {bundle.chain.markov}); update {theta}; "
          f"{a.repeat} updates per path, OMP/OPENBLAS threads {os.environ.get('OMP_NUM_THREADS')}")
    print(f"update_model ms (median, min-max): twin (tap by tap) {np.median(tw):.1f} "
          f"({tw.min():.1f}-{tw.max():.1f}), modal {np.median(tm):.1f} ({tm.min():.1f}-"
          f"{tm.max():.1f}); ratio {np.median(tw) / np.median(tm):.2f}")
    print("operator difference (max |twin - modal| / max |twin|; spectral radius: |difference|): "
          + ", ".join(f"{k} {v:.1e}" for k, v in diff.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
