"""The model's own error in the stated std: a per-target factor measured on the build's
calibration runs (the FULL model, integrated exactly, converted as the chain converts),
shipped only as far as the runs show it with confidence.

The smoother's std is the error of an estimator whose model is the structure: the reduced
model, its discretisation and the chain model exactly as designed. The structure is the full
FE model, so the real error is larger by what the reduction, the discretisation and the
chain model miss (measured on the plate of ``benchmarks/load_user``: 1.04-1.12x on its
calibration runs with a learned load, 1.15-1.37x on a test record). The calibration runs
already compare the estimator with the full model's truth (:mod:`offline.calibration_runs`),
so the build measures, per force and output ``i``, over every run's steady rows::

    r_i^2 = sum_k e_ik^2 / sum_k std_ik^2                    e = estimate - truth

with ``std_ik`` the std the estimator stated for that row (level tracking and all).

**The runs' sampling spread.** ``r_i^2`` is a mean of squares of a correlated error, so it
scatters around the true ratio even when the std is right: three runs of 2 s measured 1.20
for a lightly damped displacement whose 10 s record showed 0.94 (a cantilever strip with one
mode), and shipping ``max(1, r_i)`` widened that right std (coverage 70 -> 79 %). For a
zero-mean Gaussian error of autocorrelation ``rho_k`` (Bartlett; Isserlis:
``Cov(e_j^2, e_l^2) = 2 Cov(e_j, e_l)^2``)::

    Var(sum_k e_k^2) = 2 sigma^4 sum_{j,l} rho_{j-l}^2 ~= 2 sigma^4 N tau,
    tau = 1 + 2 sum_{k>=1} rho_k^2,      n_eff = N / tau                       (1)

so ``r_i^2`` is distributed like ``R_i^2 chi2(n_eff) / n_eff`` (Satterthwaite: the same mean
and variance), ``R_i`` the true ratio. The sum runs over ``rho_k^2``, not ``rho_k``: the
mean of an oscillating error is well determined (its ``sum rho_k`` nearly cancels), its
mean square is not (a lightly damped error with pole radius ``r`` has ``tau ~= 1 / (1 -
r^2)``). The runs are independent, so the variance of the sum is the sum of each run's,
estimated from that run's own autocorrelation (a run whose error happens to be large then
weighs as much as it does in ``r_i``: on the README beam with a drifting laser the three runs
gave 1.02, 2.07 and 0.95 for d05, and the pooled figure rests mostly on the second)::

    S_r = sum_{k in run r} e_k^2,    n_eff = (sum_r S_r)^2 / sum_r (S_r^2 / n_eff,r)    (2)

with ``n_eff,r = n_r / tau_r`` from (1), ``rho_k`` the run's ``sum_j e_j e_j+k`` over
``S_r`` (no mean removed: the error has none), summed up to the first lag ``M >= 5 tau(M)``
(Sokal's window: beyond it the estimates' own noise, ~1/n per lag, would add up; the whole
run if no lag reaches it). The shipped factor is the one-sided lower confidence bound of
``R_i``::

    s_i = max(1, r_i sqrt(n_eff / chi2_{1-a}(n_eff)))                          (3)
        ~= max(1, r_i / (1 + z / sqrt(2 n_eff)))     (large n_eff, z = Phi^-1(1 - a))

with ``1 - a`` = :data:`CONFIDENCE` = 0.95 (``z`` = 1.645): a right std (``R_i <= 1``) is
widened in at most 5 % of builds, and then by less than the runs' ratio; an error the runs
show beyond their spread is still taken (the plate of benchmarks/load_user without a record:
1-sigma coverage 56 % without a factor, 63 % with the ratio, 61 % with the bound).
The runs' load is the smoother's own model (:func:`offline.calibration_runs.own_load_runs`):
with ``build --record`` the build's calibration runs draw from the shipped load model;
without a record the factor has runs of its own, drawn from the declaration's rational model
(its roll-off skirts and all). The declaration's calibration runs have ideal band edges and
left the model's error beyond them unmeasured (the frame of benchmarks/load_user: its a1z
sees a 261 Hz mode the reduction misses; factor 1.0-1.12 on them, 10 on the smoother's own
load; a test record under a second-order roll-off showed 5x the stated std), and a ratio
below 1 on them could be the load's (no skirts) and not the structure's.

**Narrowing, where the runs' load is the smoother's own** (``narrow``, now always: the
runs of :func:`~offline.calibration_runs.own_load_runs`). A ratio below 1 is then the structure's: the
reduced model can state more error than the full model has (the frame of
benchmarks/load_user through the ADS1256: the acceleration output a1z stated 3.56e-4, 3.0x
its stationary std, where the runs measured ``r`` = 0.234 over 2,229 effective samples and a
test record 0.23; 1-sigma coverage 100 %). Where the one-sided upper bound::

    u_i = r_i sqrt(n_eff / chi2_a(n_eff))                                      (4)

is below 1 the factor is ``u_i`` (a right std is narrowed in at most 5 % of builds, and then
by less than the runs' ratio), at least :data:`STD_SCALE_MIN`. At most :data:`STD_SCALE_MAX`. Shipped as ``kf_std_scale``: the device states
``s_i std_i``; ``meta["estimator"]`` keeps ``std_ratio_runs`` (``r_i``) and ``std_ratio_neff``.
"""

from __future__ import annotations

import numpy as np

from edge.estimator import Estimator
from edge.flags import FLAG_WARMUP
from offline._deps import need

#: the largest factor shipped, a guard against a runaway figure, not a judgement of the
#: model: the frame of benchmarks/load_user (a1z sees a mode its reduction misses) measured
#: 6.2 with an 8 s record, where the former cap of 3 stated a third of the error (coverage
#: 36 %), and 16.1 on its own load at 500 rows/s, where the cap of 10 left coverage 44 %
STD_SCALE_MAX = 100.0
#: a factor above it is named in the build's warnings: the target's estimate rests on
#: dynamics the reduced model does not have
STD_SCALE_WARN = 3.0
#: the smallest factor shipped (narrowing, (4) of the module docstring)
STD_SCALE_MIN = 0.1
#: the one-sided confidence of the lower bound (3) of the module docstring (z = 1.645)
CONFIDENCE = 0.95
#: Sokal's window: the autocorrelation is summed up to the first lag M >= SOKAL_C tau(M)
SOKAL_C = 5.0


def lag_products(e: np.ndarray, max_lag: int) -> np.ndarray:
    """``(max_lag + 1, nq)``: ``sum_j e_j e_j+k`` over one run's rows ``e`` ``(n, nq)``
    (zero outside the run), k = 0..max_lag, by FFT."""
    n = e.shape[0]
    nfft = 1 << int(np.ceil(np.log2(max(2 * n, 2))))
    f = np.fft.rfft(e, nfft, axis=0)
    c = np.fft.irfft(f.real ** 2 + f.imag ** 2, nfft, axis=0)[:max_lag + 1]
    if c.shape[0] < max_lag + 1:
        c = np.vstack([c, np.zeros((max_lag + 1 - c.shape[0], e.shape[1]))])
    return c


def effective_samples(acov: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``(nq,)`` ``n_eff = n / tau`` of (1) in the module docstring: ``acov`` ``(K + 1, nq)``
    one run's lag products (:func:`lag_products`), ``n`` its rows counted;
    ``tau = 1 + 2 sum_{k=1..M} rho_k^2`` up to Sokal's window ``M >= SOKAL_C tau(M)``
    (``M = K`` if no lag reaches it)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = acov / acov[:1]
    rho = np.nan_to_num(rho, nan=0.0)
    tau = 1.0 + 2.0 * np.cumsum(rho[1:] ** 2, axis=0)            # tau(M), M = 1..K
    out = np.empty(acov.shape[1])
    for i in range(acov.shape[1]):
        if tau.shape[0] == 0:
            out[i] = n[i]
            continue
        ok = np.nonzero(np.arange(1, tau.shape[0] + 1) >= SOKAL_C * tau[:, i])[0]
        out[i] = n[i] / tau[ok[0] if ok.size else -1, i]
    return out


def ratio_statistics(errors, stds) -> tuple:
    """``(r, n_eff)``, each ``(nq,)``: the RMS error over the RMS stated std (module
    docstring) and the effective number of independent squared errors (2) over the runs:
    ``errors`` and ``stds`` are lists of ``(n_r, nq)`` arrays, one per run, a row NaN in
    ``errors`` left out (its lag products too). ``r`` is 1 where a std is 0 or no row left."""
    nq = errors[0].shape[1]
    s2 = np.zeros(nq)
    S, V = np.zeros(nq), np.zeros(nq)      # sum of S_r, sum of S_r^2 / n_eff,r
    for e, s in zip(errors, stds):
        ok = np.isfinite(e)
        e0 = np.where(ok, e, 0.0)
        s2 += np.sum(np.where(ok, s, 0.0) ** 2, axis=0)
        if not e.shape[0]:
            continue
        Sr = np.sum(e0 ** 2, axis=0)
        n_r = effective_samples(lag_products(e0, e.shape[0] - 1), ok.sum(axis=0))
        S += Sr
        with np.errstate(invalid="ignore", divide="ignore"):
            V += np.where(Sr > 0, Sr ** 2 / n_r, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.sqrt(S / s2)
        n_eff = np.where(V > 0, S ** 2 / V, 0.0)
    # a target stated exactly (std 0, e.g. a clamped displacement): no factor
    return np.where(np.isfinite(r), r, 1.0), n_eff


def _chi2_factor(n_eff, quantile: float) -> np.ndarray:
    """``sqrt(n_eff / chi2_q(n_eff))`` (1 where ``n_eff`` is infinite; a placeholder 1 degree
    of freedom where it is not positive, which the callers replace)."""
    chi2 = need("scipy.stats").chi2
    nu = np.where(n_eff > 0, n_eff, 1.0)
    return np.where(np.isinf(nu), 1.0,
                    np.sqrt(nu / chi2.ppf(quantile, np.where(np.isinf(nu), 1.0, nu))))


def ratio_lower_bound(r, n_eff, confidence: float = CONFIDENCE) -> np.ndarray:
    """The one-sided ``confidence`` lower bound (3) of the true ratio, given the measured
    ``r`` over ``n_eff`` effective samples: ``r sqrt(n_eff / chi2_conf(n_eff))``; ``r``
    itself where ``n_eff`` is infinite, 0 where it is not positive (nothing measured)."""
    r, n_eff = np.asarray(r, dtype=float), np.asarray(n_eff, dtype=float)
    return np.where(n_eff > 0, r * _chi2_factor(n_eff, confidence), 0.0)


def ratio_upper_bound(r, n_eff, confidence: float = CONFIDENCE) -> np.ndarray:
    """The one-sided ``confidence`` upper bound (4) of the true ratio: ``r sqrt(n_eff /
    chi2_(1-conf)(n_eff))``; ``r`` where ``n_eff`` is infinite, inf where it is not positive."""
    r, n_eff = np.asarray(r, dtype=float), np.asarray(n_eff, dtype=float)
    return np.where(n_eff > 0, r * _chi2_factor(n_eff, 1.0 - confidence), np.inf)


def run_errors(bundle, runs) -> tuple:
    """``(errors, stds)``: per calibration run the smoother ``bundle``'s error (estimate -
    truth; NaN outside the steady rows) and stated std (the design's, no factor), each
    ``(rows after the run's start, nq)``."""
    kf = {k: v for k, v in bundle.kf.items() if k != "std_scale"}  # the design's own std
    est = Estimator(bundle.replace(kf=kf))
    errors, stds = [], []
    for r in runs:
        est.reset()
        Fe, Ze, flags, S = est.run_std(r.Y)
        d = est.delay
        # estimate row j describes sample j - delay
        E = np.hstack([Fe, Ze])[d + r.start:]
        T = np.hstack([r.F, r.Z])[r.start: r.F.shape[0] - d]
        # the steady rows: the start-up's std assumes a structure already moving, and the
        # runs start at rest (FLAG_WARMUP stays set until the std is within 10 % of steady)
        ok = np.all(np.isfinite(E), axis=1) & (flags[d + r.start:] & FLAG_WARMUP == 0)
        errors.append(np.where(ok[:, None], E - T, np.nan))
        stds.append(S[d + r.start:])
    return errors, stds


def measured_std_ratio(bundle, runs) -> np.ndarray:
    """``(nq,)``: RMS error over RMS stated std of each force and output of the smoother
    ``bundle`` on the calibration ``runs`` (steady rows); 1 where no row is left or a std
    is 0."""
    return ratio_statistics(*run_errors(bundle, runs))[0]


def with_std_scale(bundle, runs, narrow: bool = False):
    """A copy of the smoother ``bundle`` whose stated std includes the model's own error as
    far as the runs show it (module docstring, (3)), and with ``narrow`` (the runs drew their
    load from the smoother's own load model) leaves out what they show it overstates (4):
    ``kf_std_scale`` and ``meta["estimator"]["std_scale"]`` (with ``std_ratio_runs``,
    ``std_ratio_neff``)."""
    ratio, n_eff = ratio_statistics(*run_errors(bundle, runs))
    scale = np.clip(ratio_lower_bound(ratio, n_eff), 1.0, STD_SCALE_MAX)
    if narrow:
        up = ratio_upper_bound(ratio, n_eff)
        scale = np.where(up < 1.0, np.maximum(up, STD_SCALE_MIN), scale)
    kf = dict(bundle.kf)
    kf["std_scale"] = scale
    meta = dict(bundle.meta)
    warn = wide_warning(bundle, scale)
    if warn:
        meta["warnings"] = [*meta.get("warnings", []), warn]
    meta["estimator"] = {**meta["estimator"], "std_scale": scale.tolist(),
                         "std_ratio_runs": ratio.tolist(),
                         "std_ratio_neff": n_eff.tolist(), "std_scale_confidence": CONFIDENCE}
    return bundle.replace(kf=kf, meta=meta)


def wide_warning(bundle, scale) -> str | None:
    """The targets whose factor exceeds :data:`STD_SCALE_WARN`, in words, or None."""
    names = [f.name for f in bundle.forces] + [o.name for o in bundle.outputs]
    wide = [f"{n} {s:.3g}x" for n, s in zip(names, scale) if s > STD_SCALE_WARN]
    if not wide:
        return None
    return (f"stated std of {', '.join(wide)} the smoother's own: on full-model runs of its "
            "load model the error is that much larger, so the reduced model misses dynamics "
            "these targets see (a mode it leaves out or misplaces); add modes or masters near "
            "them ([reduction]), or read their estimates as rough")


def scale_note(e: dict) -> str:
    """The stated std's factor (``meta["estimator"]["std_scale"]``) for the build summary."""
    sc = e.get("std_scale")
    if not sc or min(sc) == max(sc) == 1.0:
        return ""
    return (f" (stated x {min(sc):.3g}-{max(sc):.3g}: the model's own error on the "
            f"full-model calibration runs)")
