"""The error of the steady-state fixed-lag smoother with given gains, exactly: under another
load and noise than its design (the level tracker's stated std) and from its first sample
(the start-up std).

With ``x~`` the one-step prediction error of the filter (gain ``K``), ``e_j = H x~_j + v_j``
and ``x~_{j+1} = Abar x~_j + w_j - A K v_j`` (``Abar = A (I - K H)``), the smoothed error of
sample ``m`` (output row ``m + L``) is::

    eps_m = Cq x~_m - sum_{j=0..L} G_j e_{m+j}
          = T_x x~_m + sum_i T_w,i w_{m+i} + sum_i T_v,i v_{m+i}
    M_L = 0,  M_i = G_{i+1} H + M_{i+1} Abar         (sum_{j>i} G_j H Abar^(j-1-i))
    T_x = Cq - G_0 H - M_0 Abar,  T_w,i = -M_i,  T_v,i = -G_i + M_i A K

so ``var(eps_m) = diag(T_x P_m T_x^T) + sum_i diag(T_w,i Q T_w,i^T + T_v,i R T_v,i^T)``,
with ``P_m = cov(x~_m)``. In steady state ``P_m = P`` (a Lyapunov solution of the gains'
error dynamics; the Riccati solution for the design's own load and noise). At the start
(and after a reset) the estimator's state is 0 while the structure already moves with its
stationary covariance ``X = A X A^T + Q``: ``P_0 = X``, and ``D_m = P_m - P`` decays as
``D_{m+1} = Abar D_m Abar^T``, so the start-up excess of row ``m`` is
``diag((T_x Abar^m) D_0 (T_x Abar^m)^T)``.
"""

from __future__ import annotations

import numpy as np

from offline._deps import need


def lag_terms(A, H, K, G, Cq):
    """``(T_x, [T_w,i], [T_v,i], Abar)`` of the module docstring for one set of gains."""
    AK = A @ K
    Abar = A - AK @ H
    L = G.shape[0] - 1
    M = np.zeros((Cq.shape[0], A.shape[0]))
    Tw, Tv = [None] * (L + 1), [None] * (L + 1)
    for i in range(L, -1, -1):
        if i < L:
            # M_i = G_{i+1} H + M_{i+1} Abar
            M = G[i + 1] @ H + M @ Abar
        Tw[i] = -M
        # T_v,i = -G_i + M_i A K
        Tv[i] = -G[i] + M @ AK
    Tx = Cq - G[0] @ H - M @ Abar
    return Tx, Tw, Tv, Abar


def error_covariances(A, H, Q, R, K, Qn=None) -> list:
    """Per set of gains ``K[a]``: ``(A K_a, Abar_a, X_a, Y_a)``, the prediction error's
    stationary covariance per unit load power (``X = Abar X Abar^T + Q``) and per unit sensor
    noise (``Y = Abar Y Abar^T + (A K) R (A K)^T``): ``P = g^2 X + nu Y`` under a load
    ``g^2 Q`` and a noise ``nu R``. Shared by :func:`smoothed_variance` and
    :func:`offline.smoother.levels.innovation_stats` (two Lyapunov solutions per level).
    ``Qn``: process noise counted with the sensor noise (drifting offsets): ``Y = Abar Y
    Abar^T + (A K) R (A K)^T + Qn``."""
    out = []
    for Ka in K:
        AK = A @ Ka
        # Abar_a = A (I - K_a H)
        Abar = A - AK @ H
        Rn = AK @ R @ AK.T if Qn is None else AK @ R @ AK.T + Qn
        out.append((AK, Abar, lyapunov_doubling(Abar, Q), lyapunov_doubling(Abar, Rn)))
    return out


def lyapunov_doubling(A, Q, max_iter: int = 64, rtol: float = 1e-13) -> np.ndarray:
    """``X = A X A^T + Q`` by doubling (Smith): ``X = sum_k A^k Q A^kT`` in ``log2`` steps,
    ``X_{i+1} = X_i + A_i X_i A_i^T``, ``A_{i+1} = A_i^2``. A sum of positive semi-definite
    terms, so ``X`` stays PSD where the Schur/bilinear solver loses it: error dynamics with
    an eigenvalue within 1e-5 of the unit circle (a free-free structure seen by
    accelerometers, a slow force-model state) made variances of the level tables negative.
    Not convergent (spectral radius >= 1): ``inf``."""
    X = 0.5 * (Q + Q.T)
    Ak = np.array(A, dtype=float)
    for _ in range(max_iter):
        dX = Ak @ X @ Ak.T
        X = X + dX
        Ak = Ak @ Ak
        if np.max(np.abs(dX)) <= rtol * max(np.max(np.abs(X)), 1e-300):
            return 0.5 * (X + X.T)
        if not np.all(np.isfinite(X)):
            break
    return np.full_like(X, np.inf)


def _diag(T, P):
    """``diag(T P T^T)``."""
    return np.einsum("ij,jk,ik->i", T, P, T)


def smoothed_variance(A, H, Q, R, K, G, Cq, covs=None, Qn=None) -> np.ndarray:
    """``(nl, 2, nq)``: the steady error variance of each force and output smoothed with the
    gains of each level ``a`` (``K[a]``, ``G[a]``), per unit load power (``Q``, row 0) and
    per unit sensor noise (``R``, row 1): under a load ``g^2 Q`` and a noise ``nu R`` the
    variance is ``g^2 v_q + nu v_r``, exact for any level's gains (at the level's own
    design: its Riccati ``std^2``). ``covs``: :func:`error_covariances` of ``K`` when the
    caller has them; ``Qn``: process noise counted with the sensor noise (as there)."""
    covs = error_covariances(A, H, Q, R, K, Qn) if covs is None else covs
    out = np.zeros((len(K), 2, Cq.shape[0]))
    for a in range(len(K)):
        Tx, Tw, Tv, _ = lag_terms(A, H, K[a], G[a], Cq)
        _, _, X, Y = covs[a]
        out[a, 0] = _diag(Tx, X) + sum(_diag(T, Q) for T in Tw)
        out[a, 1] = _diag(Tx, Y) + sum(_diag(T, R) for T in Tv)
        if Qn is not None:
            out[a, 1] += sum(_diag(T, Qn) for T in Tw)
    # diagonals of T X T^T with X PSD: >= 0 but for round-off
    return np.clip(out, 0.0, None)


def startup_variance(A, H, Q, K, G, Cq, P, std, tol: float = 0.01,
                     max_samples: int = 30000, walk=None) -> np.ndarray:
    """``(N, nq)``: the excess error variance of each force and output of row ``m`` over its
    steady value ``std^2``, from the first sample (module docstring), until every excess is
    below ``tol`` of its steady variance (at most ``max_samples`` rows; a structure whose
    error decays slower than that keeps the last row's excess as its remaining bias).
    ``walk``: random-walk states (drifting offsets), which have no stationary covariance:
    assumed known at the start to their steady error (the rest's ``X`` with them at 0)."""
    linalg = need("scipy.linalg")
    Tx, _, _, Abar = lag_terms(A, H, K, G, Cq)
    keep = np.ones(A.shape[0], bool)
    if walk is not None and len(walk):
        keep[np.asarray(walk)] = False
    # X = A X A^T + Q: the structure's stationary covariance (the state at the start)
    X = linalg.solve_discrete_lyapunov(A[np.ix_(keep, keep)], Q[np.ix_(keep, keep)])
    D0 = np.zeros_like(P)
    D0[np.ix_(keep, keep)] = 0.5 * (X + X.T) - P[np.ix_(keep, keep)]
    floor = np.maximum(np.asarray(std, dtype=float) ** 2, 1e-300)
    rows = []
    T = Tx.copy()
    for _ in range(max_samples):
        ex = np.clip(_diag(T, D0), 0.0, None)
        rows.append(ex)
        if np.all(ex <= tol * floor):
            break
        # T_x Abar^(m+1)
        T = T @ Abar
    return np.array(rows)
