"""Smoother gains for a grid of load levels, for the device to follow the load's size.

A real load's level differs from the declared or learned one, and changes in operation. The
smoother's gains and stated std depend on it (Riccati equation, offline only: the edge has no
scipy), so the bundle carries them for a geometric grid of levels ``g`` (each force's RMS
times ``g``; the designed level is ``g = 1``) and the device switches between them.

What the device measures is the mean NIS ``e^T S_a^-1 e / nch`` of its innovations under the
gains of level ``a``. When the load is at level ``b`` the innovations' covariance is about
``S_b`` (the innovations of a near-optimal filter), so the expected ratio is::

    r(a, b) = tr(S_a^-1 S_b) / nch            (1 when a = b)

stored as ``kf_level_nis``; the device picks the level ``b`` whose ``r(a, b)`` is nearest to
the measured ratio (:mod:`edge.estimator.smoother`, ``track_level``).

A sensor noise declared *relative* to the signal (``[[sensors]] noise``, paper eq. 28) is tied
to the load's size: then a level scales the noise as well (``scale_noise``), the whole
operation at another size. A noise that is a property of the sensor (learned from a record,
or ``noise_std``) stays where it is.
"""

from __future__ import annotations

import numpy as np

from edge.estimator.operator import EstimatorError
from offline.smoother.gains import design_smoother, steady_gains

#: default grid: 10^-2 .. 10^1.5 of the designed RMS in steps of 10^0.25 (x1.78)
LEVELS = 10.0 ** np.arange(-2.0, 1.5001, 0.25)


def whitening(Sinv: np.ndarray) -> np.ndarray:
    """``Wt`` with ``Wt^T Wt = S^-1`` (``S^-1 = Lc Lc^T``, ``eps = Lc^T e``, so ``eps^T eps =
    e^T S^-1 e``): the whitening of the innovations the model check uses."""
    Lc = np.linalg.cholesky(0.5 * (Sinv + Sinv.T))
    return np.ascontiguousarray(Lc.T)


def level_arrays(bundle, force_models, lag: int, model_error: float, corr=None,
                 grid=LEVELS, scale_noise: bool = False, components=()) -> dict:
    """The ``kf_level_*`` arrays (without the prefix) of the smoother at each level of
    ``grid`` (factors of the force models' RMS; must contain 1); ``scale_noise``: the
    sensors' noise std scales with the level too (a noise declared relative to the
    signal).

    The step matrix ``A`` does not depend on the level and the process noise is exactly
    ``g^2 Q`` (the forces' and the model-error noise both scale with the forces' power), so
    one discretisation serves every level; each level is one Riccati solution. A level
    whose Riccati equation has no stabilising solution (an extreme one on an ill-conditioned
    model) is left out of the grid."""
    grid = np.asarray(grid, dtype=float)
    if not np.any(np.isclose(grid, 1.0)):
        raise ValueError("the level grid must contain the designed level 1")
    d1 = design_smoother(bundle, force_models, lag, model_error, corr=corr,
                         components=components)
    keep, K, G, Sinv, Wt, std, S = [], [], [], [], [], [], []
    for g in grid:
        # Q(g) = g^2 Q(1); R(g) = g^2 R(1) for a relative noise, else R(1)
        R = d1.R * (g ** 2 if scale_noise else 1.0)
        try:
            _, k, si, gg, sd, _, _ = steady_gains(d1.A, d1.H, g ** 2 * d1.Q, R, d1.Cq, lag)
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
        S.append(np.linalg.inv(si))
    nch = S[0].shape[0]
    # r(a, b) = tr(S_a^-1 S_b) / nch
    nis = np.array([[np.trace(Sinv[a] @ S[b]) / nch for b in range(len(keep))]
                    for a in range(len(keep))])
    return {"level_grid": np.array(keep), "level_K": np.array(K), "level_G": np.array(G),
            "level_Sinv": np.array(Sinv), "level_Wt": np.array(Wt),
            "level_std": np.array(std), "level_nis": nis}
