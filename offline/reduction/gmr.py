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
