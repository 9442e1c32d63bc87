"""The model's own error in the stated std: a per-target factor measured on the build's
calibration runs (the FULL model, integrated exactly, converted as the chain converts).

The smoother's std is the error of an estimator whose model is the structure: the reduced
model, its discretisation and the chain model exactly as designed. The structure is the full
FE model, so the real error is larger by what the reduction, the discretisation and the
chain model miss (measured on the plate of ``benchmarks/load_user``: 1.04-1.12x on its
calibration runs with a learned load, 1.15-1.37x on a test record). The calibration runs
already compare the estimator with the full model's truth (:mod:`offline.calibration_runs`),
so the build measures, per force and output ``i``, over every run after its warm-up::

    s_i = max(1, sqrt( sum_k e_ik^2 / sum_k std_ik^2 ))       e = estimate - truth

with ``std_ik`` the std the estimator stated for that row (level tracking and all), and
ships it as ``kf_std_scale``: the device states ``s_i std_i``. It is never below 1: a model
mismatch only adds error to the MMSE error the std states, and a ratio below 1 on the runs
comes from their load (the declaration's band-limited noise) differing from the smoother's
rational model of it, or from their sampling spread, not from the structure.
"""

from __future__ import annotations

import numpy as np

from edge.estimator import Estimator
from edge.flags import FLAG_WARMUP

#: the largest factor shipped: a larger one says the model is wrong, not its std
STD_SCALE_MAX = 3.0


def measured_std_ratio(bundle, runs) -> np.ndarray:
    """``(nq,)``: RMS error over RMS stated std of each force and output of the smoother
    ``bundle`` on the calibration ``runs`` (finite rows after each run's ``start`` and after
    the start-up); 1 where no row is left or a std is 0."""
    kf = {k: v for k, v in bundle.kf.items() if k != "std_scale"}  # the design's own std
    est = Estimator(bundle.replace(kf=kf))
    nq = len(bundle.forces) + len(bundle.outputs)
    e2, s2 = np.zeros(nq), np.zeros(nq)
    for r in runs:
        est.reset()
        Fe, Ze, flags, S = est.run_std(r.Y)
        d = est.delay
        # estimate row j describes sample j - delay
        E = np.hstack([Fe, Ze])[d + r.start:]
        S = S[d + r.start:]
        T = np.hstack([r.F, r.Z])[r.start: r.F.shape[0] - d]
        # the steady rows: the start-up's std assumes a structure already moving, and the
        # runs start at rest (FLAG_WARMUP stays set until the std is within 10 % of steady)
        ok = np.all(np.isfinite(E), axis=1) & (flags[d + r.start:] & FLAG_WARMUP == 0)
        e2 += np.sum((E[ok] - T[ok]) ** 2, axis=0)
        s2 += np.sum(S[ok] ** 2, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.sqrt(e2 / s2)
    # a target stated exactly (std 0, e.g. a clamped displacement): no factor
    return np.where(np.isfinite(ratio), ratio, 1.0)


def with_std_scale(bundle, runs):
    """A copy of the smoother ``bundle`` whose stated std includes the model's own error
    (module docstring): ``kf_std_scale`` and ``meta["estimator"]["std_scale"]`` (with the
    measured ratios, ``std_ratio_runs``)."""
    ratio = measured_std_ratio(bundle, runs)
    scale = np.clip(ratio, 1.0, STD_SCALE_MAX)
    kf = dict(bundle.kf)
    kf["std_scale"] = scale
    meta = dict(bundle.meta)
    meta["estimator"] = {**meta["estimator"], "std_scale": scale.tolist(),
                         "std_ratio_runs": ratio.tolist()}
    return bundle.replace(kf=kf, meta=meta)


def scale_note(e: dict) -> str:
    """The stated std's factor (``meta["estimator"]["std_scale"]``) for the build summary."""
    sc = e.get("std_scale")
    if not sc or max(sc) <= 1.0:
        return ""
    return (f" (stated x {min(sc):.3g}-{max(sc):.3g}: the model's own error on the "
            f"full-model calibration runs)")
