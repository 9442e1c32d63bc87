"""Strain gauges as estimator channels: the reduced basis in which a gauge reads one coordinate.

A bundle's channel measures one reduced coordinate (``channel_dof``). A strain gauge measures
``eps = s @ u ~ s @ T q`` (``s`` its recovery row, :mod:`offline.fem.strain`), a combination of
all of them. Rather than a new bundle field, the reduction is written in coordinates where the
gauge's strain *is* a coordinate: for each gauge one master coordinate ``j`` (a DOF of its row
that no sensor, force or declared master holds, :func:`gauge_master`) is replaced by the strain,

    q' = P q,   P = I except row j:  P[j, :] = g = s @ T          (one row per gauge)
    M' = P^-T M P^-1,  K' = P^-T K P^-1,  T' = T P^-1

an exact change of basis (the same physics; eigenvalues, outputs ``r T q = r T' q'`` and
every prediction unchanged). A force at a coordinate ``f != j`` keeps its unit column
(``P^-T e_f = e_f``: row ``f`` of ``P^-1`` is ``e_f``) and so does a displacement,
velocity or acceleration channel; the gauge's row becomes ``g P^-1 = e_j``. The edge then
treats the gauge as any channel of kind ``strain`` (derivative order 0, ``edge.kinds``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from offline.fem.strain import Probe, probe_matrix
from offline.model.table import ModelFileError

#: Largest condition number of ``P`` accepted (a gauge row nearly zero on its own master).
MAX_COND = 1e10


def gauge_master(p: Probe, taken: set, where: str) -> Probe:
    """The gauge's row with, as its value, the DOF of the row with the largest coefficient
    that is not in ``taken`` (the DOFs of the other signals); ``ModelFileError`` naming
    ``where`` when every DOF of the row is taken (e.g. two gauges on one element)."""
    for k in np.argsort(-np.abs(p.coef), kind="stable"):
        d = int(p.idx[k])
        if d not in taken:
            return Probe(d, p.idx, p.coef)
    raise ModelFileError(f"{where}: every DOF the gauge's strain reads is already a master of "
                         "another sensor, force or gauge; move the gauge into another element")


def gauge_transform(T: np.ndarray, masters, chan) -> np.ndarray | None:
    """``P`` (n, n) of the module docstring for the gauges in ``chan`` (None: no gauge)."""
    gauges = [d for d in chan if hasattr(d, "coef")]
    if not gauges:
        return None
    pos = {int(m): k for k, m in enumerate(masters)}
    P = np.eye(T.shape[1])
    G = np.asarray(probe_matrix(gauges, T.shape[0]) @ T, dtype=np.float64)  # g = s @ T
    for d, g in zip(gauges, G):
        P[pos[int(d)]] = g
    return P


def gauge_basis(red, chan, wheres):
    """``red`` (:class:`offline.reduction.Reduction`) in the gauge basis (module docstring);
    ``red`` itself when there is no gauge. ``ModelFileError`` naming the gauge when its row
    hardly reads its own master (``cond(P) > MAX_COND``)."""
    T = np.asarray(red.T, dtype=np.float64)
    P = gauge_transform(T, red.masters, chan)
    if P is None:
        return red
    c = np.linalg.cond(P)
    if not np.isfinite(c) or c > MAX_COND:
        names = [w for w, d in zip(wheres, chan) if hasattr(d, "coef")]
        raise ModelFileError(f"{names[0]}: the gauge's strain is (nearly) independent of its "
                             f"master DOF in the reduced model (cond {c:.3g}); move the gauge")
    Pi = np.linalg.inv(P)
    M = Pi.T @ red.M @ Pi
    K = Pi.T @ red.K @ Pi
    return dataclasses.replace(red, M=0.5 * (M + M.T), K=0.5 * (K + K.T), T=T @ Pi)


__all__ = ["gauge_master", "gauge_transform", "gauge_basis", "MAX_COND"]
