"""Smoother gains for a grid of load levels, for the device to follow the load's size.

A real load's level differs from the declared or learned one, and changes in operation. The
smoother's gains and stated std depend on it (Riccati equation, offline only: the edge has no
scipy), so the bundle carries them for a geometric grid of levels ``g`` (each force's RMS
times ``g``; the designed level is ``g = 1``) and the device switches between them.

What the device measures is the mean NIS ``e^T S_a^-1 e / nch`` of its innovations under the
gains of level ``a``. When the load is at level ``b``, the filter of level ``a`` is not the
optimal one, and its innovations' covariance is not ``S_b``: the one-step prediction error
``x~ = x - x^`` of the filter with gain ``K_a`` obeys::

    x~_{k+1} = Abar_a x~_k + w_k - A K_a v_k,   Abar_a = A (I - K_a H)
    P_ab = Abar_a P_ab Abar_a^T + Q_b + (A K_a) R_b (A K_a)^T      (discrete Lyapunov)
    Sigma_ab = H P_ab H^T + R_b                                    (innovation covariance)
    r(a, b) = tr(S_a^-1 Sigma_ab) / nch                            (1 when a = b)

stored as ``kf_level_nis``; the device picks the level ``b`` whose ``r(a, b)`` is nearest to
the measured ratio (:mod:`edge.estimator.smoother`, ``track_level``). The approximation
``Sigma_ab ~ S_b`` used before underestimated ``r(a, b)`` for ``b`` far from ``a`` (a low-gain
filter under a large load has far larger innovations than the optimal one), so a tracker at a
low level overshot to a high one and back every second (issue #40: a ``--record`` bundle of
``examples/my_beam.toml`` switched between 0.09x and 2.7x on stationary data).

A sensor noise declared *relative* to the signal (``[[sensors]] noise``, paper eq. 28) is tied
to the load's size: then a level scales the noise as well (``scale_noise``), the whole
operation at another size. A noise that is a property of the sensor (learned from a record,
or ``noise_std``) stays where it is. A sensor's drifting offset (``Qd``, schema 8) is a
property of the sensor in its own unit per sqrt(s) (``[[sensors]] drift``), never relative to
the signal: ``Q(g) = g^2 (Q - Qd) + Qd`` at every level. A relative noise scales ``R`` only
(``R(g) = g^2 R``); scaling the drift with it made the gains of a level below the design
believe in a drift ``g`` times the declared one, and a record at 0.03x the declared load
stated a tip displacement std 1/30 of the drift's error (coverage 16 %). The device's noise
scale (``track_innov``, an absolute noise) still counts ``Qd`` with the noise.
"""

from __future__ import annotations

import numpy as np

from edge.estimator.operator import EstimatorError
from offline.smoother.error import error_covariances, smoothed_variance
from offline.smoother.gains import design_smoother, steady_gains
from offline.smoother.model_check import SHAPE_MARGIN, band_power_parts, shape_margin

#: default grid: 10^-2 .. 10^1.5 of the designed RMS in steps of 10^0.25 (x1.78)
LEVELS = 10.0 ** np.arange(-2.0, 1.5001, 0.25)


def whitening(Sinv: np.ndarray) -> np.ndarray:
    """``Wt`` with ``Wt^T Wt = S^-1`` (``S^-1 = Lc Lc^T``, ``eps = Lc^T e``, so ``eps^T eps =
    e^T S^-1 e``): the whitening of the innovations the model check uses."""
    Lc = np.linalg.cholesky(0.5 * (Sinv + Sinv.T))
    return np.ascontiguousarray(Lc.T)


def level_arrays(bundle, force_models, lag: int, model_error: float, corr=None,
                 grid=LEVELS, scale_noise: bool = False, components=(),
                 shape_ba=None) -> dict:
    """The ``kf_level_*`` arrays (without the prefix) of the smoother at each level of
    ``grid`` (factors of the force models' RMS; must contain 1); ``scale_noise``: the
    sensors' noise std scales with the level too (a noise declared relative to the
    signal).

    The step matrix ``A`` does not depend on the level and the process noise is exactly
    ``g^2 Q`` (the forces' and the model-error noise both scale with the forces' power), so
    one discretisation serves every level; each level is one Riccati solution. A level
    whose Riccati equation has no stabilising solution (an extreme one on an ill-conditioned
    model) is left out of the grid. ``shape_ba``: the load-shape pair's two biquads; then
    ``"shape_margin"`` too (:func:`offline.smoother.model_check.shape_margin`, not a bundle
    array: the caller widens the pair's thresholds by it)."""
    grid = np.asarray(grid, dtype=float)
    if not np.any(np.isclose(grid, 1.0)):
        raise ValueError("the level grid must contain the designed level 1")
    # the designed smoother (a force it cannot see allowed: the bundle already ships it)
    d1 = design_smoother(bundle, force_models, lag, model_error, corr=corr,
                         components=components, blind_ok=True)
    keep, K, G, Sinv, Wt, std = [], [], [], [], [], []
    Qd = d1.Qd if d1.Qd is not None else np.zeros_like(d1.Q)
    Ql = d1.Q - Qd                      # the load's share (the offsets' drift: the noise's)
    for g in grid:
        # Q(g) = g^2 Ql + Qd (the drift: the sensor's own); R(g) = nu R, nu = g^2 for a
        # relative noise, else 1
        nu = g ** 2 if scale_noise else 1.0
        try:
            _, k, si, gg, sd, _, _ = steady_gains(d1.A, d1.H, g ** 2 * Ql + Qd,
                                                  nu * d1.R, d1.Cq, lag, walk=d1.walk)
        except EstimatorError:
            if np.isclose(g, 1.0):
                raise
            continue
        keep.append(g)
        K.append(k)
        G.append(gg)
        Sinv.append(si)
        Wt.append(whitening(si))
        std.append(sd)
    covs = error_covariances(d1.A, d1.H, Ql, d1.R, K, Qd)  # once for both tables
    stats = innovation_stats(d1.A, d1.H, Ql, d1.R, K, Sinv, covs)
    # a relative noise: the drift's share of the NIS stays at every level (td, the part of tr
    # from Qd: tr with Qd minus tr without)
    td = None
    if scale_noise and np.any(Qd):
        td = stats[:, 1] - innovation_stats(d1.A, d1.H, Ql, d1.R, K, Sinv)[:, 1]
    tv = None if scale_noise else smoothed_variance(d1.A, d1.H, Ql, d1.R, K, G, d1.Cq, covs,
                                                        Qd)
    # a level whose error dynamics are not stable enough for its Lyapunov solutions (an
    # extreme level on a free-free structure seen by accelerometers: the rigid-body motion
    # barely decays) gives negative or non-finite variances: it is left out like a level
    # with no stabilising Riccati solution
    good = [a for a in range(len(keep)) if np.isclose(keep[a], 1.0) or (
        np.all(np.isfinite(stats[a])) and stats[a, 0] >= 0 and stats[a, 1] > 0
        and (tv is None or (np.all(np.isfinite(tv[a])) and np.all(tv[a] >= 0))))]
    keep, K, G, Sinv, Wt, std = ([x[a] for a in good] for x in (keep, K, G, Sinv, Wt, std))
    stats = stats[good]
    nis = expected_nis(stats, keep, scale_noise, None if td is None else td[good])
    margin = {}
    if shape_ba is not None and not scale_noise:  # a relative noise scales both halves alike
        cg = [covs[a] for a in good]
        parts = [band_power_parts(cg, d1.H, d1.R, Sinv, ba) for ba in shape_ba]
        margin = {"shape_margin": SHAPE_MARGIN if any(p is None for p in parts)
                  else shape_margin(keep, *parts)}
    elif shape_ba is not None:
        margin = {"shape_margin": 1.0}
    return {**margin, "level_grid": np.array(keep), "level_K": np.array(K),
            "level_G": np.array(G),
            "level_Sinv": np.array(Sinv), "level_Wt": np.array(Wt),
            "level_std": np.array(std), "level_nis": nis,
            **({} if scale_noise else {"track_innov": stats, "track_var": tv[good]})}


def innovation_stats(A, H, Q, R, K, Sinv, covs=None) -> np.ndarray:
    """``(nl, 4)``: for the filter of each level ``a`` (gain ``K[a]``, ``Sinv[a]``), the mean
    NIS per channel and the mean lag-1 product ``e_{k+1}^T S_a^-1 e_k`` per channel of its
    innovations, each split into its part per unit load power (``Q``) and per unit sensor
    noise (``R``): ``[tq, tr, cq, cr]`` (module docstring). Under a load ``g^2 Q`` and a noise
    ``nu R``::

        r = g^2 tq + nu tr                   (mean NIS per channel)
        c = g^2 cq + nu cr                   (mean lag-1 product per channel)

    ``P_ab`` is linear in ``(Q_b, R_b)``, so two Lyapunov solutions per level serve every
    ``(g, nu)``: ``X_a`` (the response to ``Q``) and ``Y_a`` (to ``(A K_a) R (A K_a)^T``),
    :func:`offline.smoother.error.error_covariances` (``covs`` when the caller has them)."""
    covs = error_covariances(A, H, Q, R, K) if covs is None else covs
    nch = H.shape[0]
    out = np.zeros((len(K), 4))
    for a in range(len(K)):
        AK, Abar, X, Y = covs[a]
        Si = Sinv[a]
        # E[e e^T] = H P H^T + R
        tq = np.trace(Si @ H @ X @ H.T)
        tr = np.trace(Si @ (H @ Y @ H.T + R))
        # E[e_{k+1} e_k^T] = H Abar P H^T - H A K R
        cq = np.trace(Si @ H @ Abar @ X @ H.T)
        cr = np.trace(Si @ (H @ Abar @ Y @ H.T - H @ AK @ R))
        out[a] = np.array([tq, tr, cq, cr]) / nch
    return out


def expected_nis(stats: np.ndarray, grid, scale_noise: bool = False,
                 drift=None) -> np.ndarray:
    """``r(a, b)`` from :func:`innovation_stats`: the mean NIS per channel expected under the
    gains of level ``a`` when the load is at level ``b`` (process noise ``g_b^2 Q``; sensor
    noise ``g_b^2 R`` with ``scale_noise``, else ``R``)::

        r(a, b) = g_b^2 tq_a + c_b (tr_a - td_a) + td_a,   c_b = g_b^2 (scale_noise) or 1

    ``drift``: ``td_a`` (nl,), the drifting offsets' share of ``tr_a`` (the same at every
    level: a property of the sensor); None: none."""
    grid = np.asarray(grid, dtype=float)
    c = grid ** 2 if scale_noise else np.ones_like(grid)
    td = np.zeros(stats.shape[0]) if drift is None else np.asarray(drift, dtype=float)
    return (np.outer(stats[:, 0], grid ** 2) + np.outer(stats[:, 1] - td, c)
            + td[:, None])
