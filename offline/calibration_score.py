"""The score of an estimator on the honest calibration runs (:mod:`offline.calibration_runs`):
what the automatic choice (:mod:`offline.estimator_choice`) and the accuracy ratio
(:mod:`offline.limit.ratio`) minimise and report.

Per force and output the normalised RMS error ``nrmse = RMS(estimate - truth) / std(truth)``
(time domain, full band, warm-up left out), ``std(truth)`` the truth's stationary std under
the runs' load (``CalRun.scale``, :mod:`offline.limit.truth_std`), as the limit's; with the
MMSE limits as ``reference``, a run's score is the geometric mean over targets of ``nrmse /
limit``, averaged over the runs.
"""

from __future__ import annotations

import numpy as np

from edge.estimator import Estimator, EstimatorError


def nrmse(est: np.ndarray, truth: np.ndarray, delay: int, start: int = 0,
          scale=None) -> np.ndarray:
    """``RMS(estimate - truth) / std(truth)`` per column over truth samples ``start..``;
    estimate row j describes sample ``j - delay``; non-finite (warm-up) rows are left out.
    ``scale`` (ncol,): divide by it instead of the run's own std (e.g. the stationary one)."""
    e = est[delay + start:]
    t = truth[start: truth.shape[0] - delay]
    ok = np.all(np.isfinite(e), axis=1)
    if not ok.any():  # a blown-up candidate: no finite row (no numpy empty-slice warning)
        return np.full(e.shape[1], np.nan)
    sd = np.std(t[ok], axis=0) if scale is None else np.asarray(scale, dtype=float)
    return np.sqrt(np.mean((e[ok] - t[ok]) ** 2, axis=0)) / np.where(sd > 0, sd, np.nan)


def evaluate(bundle, runs, alpha: float, window: int, check_stability=False,
             reference=None) -> dict | None:
    """Errors of the Tikhonov estimator (alpha, window) on the runs; None if refused or
    non-finite. The closed-loop stability (an eigenvalue problem) is checked by
    :func:`select` on the chosen setting only, unless ``check_stability``.

    ``score``: with ``reference`` (nf + nout,) (the non-causal MMSE limits) the geometric
    mean over forces and outputs of ``nrmse / limit`` (how many times the limit, each target
    counted alike whatever its difficulty), averaged over the runs; else the mean nrmse.
    """
    try:
        est = Estimator(bundle, alpha=float(alpha), window=int(window),
                        check_stability=check_stability)
    except EstimatorError:
        return None
    r = score_estimator(est, runs, reference)
    if r is not None:
        r.update({"alpha": float(alpha), "window": int(window)})
    return r


def score_estimator(est, runs, reference=None, scale=None) -> dict | None:
    """Run any estimator (``run``, ``reset``, ``delay``) on the runs and score it (see
    :func:`evaluate`); None when an estimate is not finite. ``scale`` (nf + nout,): the
    errors' normaliser, default each run's own (``CalRun.scale``, the truth's stationary std:
    :mod:`offline.limit.truth_std`), else the run's std of the truth (:func:`nrmse`)."""
    per = []
    for r in runs:
        est.reset()
        Fe, Ze, _ = est.run(r.Y)
        nf = r.F.shape[1]
        sc = getattr(r, "scale", None) if scale is None else scale
        sf, sz = (None, None) if sc is None else (sc[:nf], sc[nf:])
        with np.errstate(over="ignore", invalid="ignore"):
            per.append(np.concatenate([nrmse(Fe, r.F, est.delay, r.start, sf),
                                       nrmse(Ze, r.Z, est.delay, r.start, sz)]))
    per = np.array(per)  # (nruns, nf + nout)
    if not np.all(np.isfinite(per)):
        return None
    if reference is not None:
        # score = mean_runs exp(mean_targets log(nrmse / limit))
        run_score = np.exp(np.mean(np.log(per / np.asarray(reference)[None, :]), axis=1))
    else:
        run_score = per.mean(axis=1)
    return {"delay": int(est.delay), "window": int(est.delay) + 1,
            "score": float(np.mean(run_score)), "nrmse": per.mean(axis=0).tolist(),
            "spread": per.std(axis=0).tolist(), "per_run_score": run_score.tolist()}
