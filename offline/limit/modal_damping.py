"""The modal damping of a full model, ``Ct = Phi^T C Phi``: one value per mode, or the whole
matrix where the damping couples the modes.

Rayleigh damping (``C = a M + b K``) leaves ``Ct`` diagonal, and each mode is one second-order
system ``q_i'' + c_i q_i' + lam_i q_i = p_i``. A damping matrix of another form (discrete
dashpots, an imported ``C.mtx``) couples them::

    q'' + Ct q' + diag(lam) q = Phi_in^T f                                  (1)

Keeping only ``diag(Ct)`` there changes the response (a 10-DOF chain with one dashpot to
ground: 5-7 % of the signal's std, tests/test_modal_damping.py), so the truth engines and the
accuracy limit keep the whole ``Ct`` whenever its off-diagonal part is not round-off.
"""

from __future__ import annotations

import numpy as np

from edge.estimator.expm import foh_matrices

#: off-diagonal entries of Ct up to this fraction of its largest entry are round-off
COUPLING_RTOL = 1e-9


def modal_damping(Phi: np.ndarray, C) -> tuple[np.ndarray, np.ndarray | None]:
    """``(c, Ct)``: ``c = diag(Phi^T C Phi)`` (m,) and the whole ``Ct`` (m, m) where the
    damping couples the modes (else None). The one rule for the full model's truth and
    limit and for the smoother's design (:func:`offline.smoother.gains.modal_dynamics`)."""
    Ct = np.asarray(Phi.T @ C @ Phi)
    Ct = 0.5 * (Ct + Ct.T)
    c = np.diag(Ct).copy()
    scale = max(float(np.max(np.abs(Ct), initial=0.0)), 1e-300)
    off = np.abs(Ct - np.diag(c))
    return c, (Ct if float(np.max(off, initial=0.0)) > COUPLING_RTOL * scale else None)


def coupled_steps(lam: np.ndarray, Ct: np.ndarray, dt: float) -> tuple:
    """``(Ad, G0, G1)`` of (1) in ``x = [q; q']``, exact for a load linear between steps:
    ``x_{k+1} = Ad x_k + G0 p_k + G1 p_{k+1}`` (:func:`edge.estimator.expm.foh_matrices`)."""
    m = lam.size
    # x' = [[0, I], [-diag(lam), -Ct]] x + [0; I] p
    Ac = np.block([[np.zeros((m, m)), np.eye(m)], [-np.diag(lam), -Ct]])
    Bc = np.vstack([np.zeros((m, m)), np.eye(m)])
    return foh_matrices(Ac, Bc, dt)


def run_coupled(lam: np.ndarray, Ct: np.ndarray, P: np.ndarray, dt: float,
                decim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(Q, Qd, Qdd)`` of (1) from rest under the modal load ``P`` (nt, m) on a fine grid
    of step ``dt``, at every ``decim``-th step: ``((nt - 1) // decim + 1, m)`` each."""
    m, nt = lam.size, P.shape[0]
    Ad, G0, G1 = coupled_steps(lam, Ct, dt)
    U = P[:-1] @ G0.T + P[1:] @ G1.T  # the load's part of each step (nt - 1, 2m)
    X = np.zeros(((nt - 1) // decim + 1, 2 * m))
    x = np.zeros(2 * m)
    for k in range(nt - 1):
        x = Ad @ x + U[k]
        if (k + 1) % decim == 0:
            X[(k + 1) // decim] = x
    Q, Qd = X[:, :m], X[:, m:]
    # q'' = p - Ct q' - diag(lam) q   (Ct symmetric)
    return Q, Qd, P[::decim] - Qd @ Ct - lam * Q


#: largest condition number of the complex modes' eigenvector matrix used as a basis
EIG_COND_MAX = 1e8


def coupled_receptance(lam: np.ndarray, Ct: np.ndarray, w: np.ndarray, Phi_out: np.ndarray,
                       Phi_in: np.ndarray) -> np.ndarray:
    """``Phi_out (diag(lam) - w^2 I + i w Ct)^-1 Phi_in^T`` (nfreq, nprobe, nin) at the
    angular frequencies ``w``; at ``w = 0`` ``1 / lam`` per mode, 0 for a rigid mode (the
    forces carry no power at DC), as the diagonal path.

    By the complex modes of (1), ``A = V diag(mu) V^-1`` with ``A = [[0, I], [-diag(lam),
    -Ct]]``: ``q(w) = [I 0] V diag(1 / (i w - mu)) V^-1 [0; I] p(w)``, one sum over 2m
    modes per frequency as the diagonal path; by one solve per frequency where ``V`` is
    ill-conditioned (a rigid mode: a defective eigenvalue at 0)."""
    m = lam.size
    if np.all(lam > 0.0):
        Ac = np.block([[np.zeros((m, m)), np.eye(m)], [-np.diag(lam), -Ct]])
        mu, V = np.linalg.eig(Ac)
        if np.linalg.cond(V) < EIG_COND_MAX:
            left = Phi_out @ V[:m]                         # (nprobe, 2m)
            right = np.linalg.solve(V, np.vstack([np.zeros((m, m)), np.eye(m)])) @ Phi_in.T
            with np.errstate(divide="ignore", invalid="ignore"):
                den = 1.0 / (1j * w[:, None] - mu[None, :])
            return np.einsum("pj,kj,ji->kpi", left, den, right)
    return _solved_receptance(lam, Ct, w, Phi_out, Phi_in)


def _solved_receptance(lam, Ct, w, Phi_out, Phi_in, chunk: int = 256) -> np.ndarray:
    """:func:`coupled_receptance` by one linear solve per frequency."""
    m = lam.size
    out = np.zeros((w.size, Phi_out.shape[0], Phi_in.shape[0]), dtype=complex)
    B = Phi_in.T.astype(complex)
    for s in range(0, w.size, chunk):
        ww = w[s:s + chunk]
        D = (np.diag(lam)[None] - (ww ** 2)[:, None, None] * np.eye(m)[None]
             + 1j * ww[:, None, None] * Ct[None])
        still = ww == 0.0
        D[still] = np.eye(m)  # replaced below
        X = np.linalg.solve(D, np.broadcast_to(B, (ww.size,) + B.shape))
        if np.any(still):
            with np.errstate(divide="ignore"):
                inv = np.where(lam > 0.0, 1.0 / lam, 0.0)
            X[still] = inv[:, None] * B
        out[s:s + chunk] = np.einsum("pm,kmi->kpi", Phi_out, X)
    return out
