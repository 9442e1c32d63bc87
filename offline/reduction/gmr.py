"""GMR+: the Craig-Bampton basis corrected by the residual flexibility (paper 004 eq. 4).

    T = T_0 + T_r,
    T_r = [[0, 0], [F_rs (M_sm + M_ss Y), 0]] M0^-1 K0,     M0 = T_0^T M T_0,  K0 = T_0^T K T_0

The left factor of ``T_r`` is ``N x (Nm + Nd)`` with only its first ``Nm`` (master) columns
non-zero, so only the first ``Nm`` *rows* of the ``n x n`` operator ``M0^-1 K0`` enter:

    T_r[s, :] = F_rs (M_sm + M_ss Y) (M0^-1 K0)[:Nm, :],    T_r[m, :] = 0.

This is the enhanced Craig-Bampton correction (reference 34 of the paper): the residual slave
modes respond quasi-statically to the inertia load of the master motion, whose acceleration is
estimated from the reduced CB model, ``u''_hat ~ -M0^-1 K0 u_hat``.
"""

from __future__ import annotations

import numpy as np

from offline._deps import need

from .flexibility import Flexibility
from .partition import Partition


def gmr_correction(part: Partition, Y: np.ndarray, flex: Flexibility, M0: np.ndarray,
                   K0: np.ndarray) -> np.ndarray:
    """Slave rows of the residual-flexibility correction ``T_r`` (eq. 4b).

    Parameters
    ----------
    part, Y : Partition, ndarray (Ns, Nm)
        As in :func:`~offline.reduction.craig_bampton.craig_bampton_basis`.
    flex : Flexibility
        Residual flexibility ``F_rs`` of the slave set (dominant modes = those of ``T_0``).
    M0, K0 : ndarray, shape (n, n)
        Craig-Bampton reduced mass and stiffness, ``n = Nm + Nd``.

    Returns
    -------
    Tr_s : ndarray, shape (Ns, n)
        ``T_r[s, :]`` (``T_r[m, :]`` is zero).
    """
    sla = need("scipy.linalg")
    nm = part.m.size
    n = M0.shape[0]
    if M0.shape != (n, n) or K0.shape != (n, n) or n < nm:
        raise ValueError(f"M0 {M0.shape} and K0 {K0.shape} must be square of size >= {nm}")
    # A = M_sm + M_ss Y            (Ns x Nm)
    A = part.M_sm.toarray() + part.M_ss @ Y
    # B = F_rs A                   (Ns x Nm; eq. 4c applied to vectors)
    B = flex.residual(A)
    # D = M0^-1 K0                 (n x n; M0 symmetric positive definite)
    D = sla.cho_solve(sla.cho_factor(M0), K0)
    # T_r[s, :] = B D[:Nm, :]       (eq. 4b)
    return B @ D[:nm, :]


def residual_vectors(part: Partition, Y: np.ndarray, flex: Flexibility,
                     rtol: float = 1e-16) -> tuple[np.ndarray, np.ndarray]:
    """Slave rows of the ``"cb+r"`` basis's own residual coordinates and their stiffness.

    GMR+ folds ``R = F_rs (M_sm + M_ss Y)`` (eq. 4b's left factor) into the Craig-Bampton
    coordinates through the free-vibration estimate ``u'' ~ -M0^-1 K0 u``; under a force the
    masters' static shapes ``[I; Y]`` are then no longer in the basis, and a static load at a
    master is answered with an error (2.5 % of the strain 20 mm below the portal frame's
    joint in benchmarks/strain_cases.py, 12 modes). ``"cb+r"`` keeps ``T_0`` and appends
    ``R`` as coordinates of their own, so its span holds both the Craig-Bampton and the GMR+
    bases: statically exact at the masters and at least as accurate as either.

    ``R`` is made M-orthonormal (``V Lambda^-1/2`` of ``R^T M_ss R = V Lambda V^T``); the
    directions with ``Lambda < rtol`` times the largest of ``S^T M_ss S``, ``S = K_ss^-1 (M_sm
    + M_ss Y)`` the static response (1e-8 of it in norm: round-off, e.g. with every slave
    mode kept, where ``F_rs = 0``), are dropped. Its range is that
    of ``F_rs``, M-orthogonal to ``Psi_d``, and ``K [I; Y]`` vanishes on the slaves, so the
    reduced stiffness is block-diagonal: ``K_hat = diag(K_0, R^T K_ss R)``.

    Returns
    -------
    R_s : ndarray, shape (Ns, Nr)    slave rows of the residual coordinates (``Nr <= Nm``)
    K_rr : ndarray, shape (Nr, Nr)   ``R_s^T K_ss R_s``, exactly symmetric
    """
    # R = F_rs (M_sm + M_ss Y)                                         (eq. 4b, 4c)
    A = part.M_sm.toarray() + part.M_ss @ Y
    R = flex.residual(A)
    S = flex.static(A)
    G = R.T @ (part.M_ss @ R)
    lam, V = np.linalg.eigh(0.5 * (G + G.T))
    ref = float(np.linalg.eigvalsh(S.T @ (part.M_ss @ S)).max(initial=0.0))
    keep = lam > rtol * max(ref, np.finfo(float).tiny)
    # R <- R V Lambda^-1/2: M-orthonormal
    R = R @ (V[:, keep] / np.sqrt(lam[keep]))
    K_rr = R.T @ (part.K_ss @ R)
    return R, 0.5 * (K_rr + K_rr.T)
