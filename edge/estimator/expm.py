"""Matrix exponential in plain NumPy (the edge has no scipy).

Scaling and squaring with the [13/13] Pade approximant, Higham, "The scaling and squaring
method for the matrix exponential revisited", SIAM J. Matrix Anal. Appl. 26 (2005), Alg. 2.3
(the variant with theta_13 only; accurate to roundoff for the small matrices used here).
"""

from __future__ import annotations

import numpy as np

# Pade [13/13] coefficients b_0..b_13 (Higham 2005, Table 2.3 source)
_B13 = np.array([64764752532480000.0, 32382376266240000.0, 7771770303897600.0,
                 1187353796428800.0, 129060195264000.0, 10559470521600.0, 670442572800.0,
                 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0])
_THETA13 = 5.371920351148152


def expm(A: np.ndarray) -> np.ndarray:
    """``exp(A)`` of a square matrix, shape (m, m): :func:`expm_stack` of a stack of one."""
    A = np.asarray(A, dtype=float)
    return expm_stack(A[None])[0]


def foh_matrices(Ac: np.ndarray, Bc: np.ndarray, dt: float):
    """Exact discretisation of ``x' = Ac x + Bc p(t)`` with ``p`` linear between samples.

    Returns ``(Phi, G0, G1)`` with ``x_{k+1} = Phi x_k + G0 p_k + G1 p_{k+1}``.

    The augmented system ``z = [x, p, p']``, ``z' = [[Ac, Bc, 0], [0, 0, I], [0, 0, 0]] z``
    is exact for a ramp input, so ``exp(Maug dt)`` gives ``x_{k+1} = E11 x + E12 p_k +
    E13 (p_{k+1} - p_k) / dt``.
    """
    n, m = Bc.shape
    Maug = np.zeros((n + 2 * m, n + 2 * m))
    Maug[:n, :n] = Ac
    Maug[:n, n:n + m] = Bc
    Maug[n:n + m, n + m:] = np.eye(m)
    E = expm(Maug * dt)
    Phi = E[:n, :n]
    Ga = E[:n, n:n + m]
    Gb = E[:n, n + m:] / dt
    return Phi, Ga - Gb, Gb


def expm_stack(A: np.ndarray) -> np.ndarray:
    """``exp(A_i)`` of each matrix of a stack, shape (k, m, m): :func:`expm`'s algorithm
    (Pade [13/13], scaling and squaring) with each matrix's own scaling ``s_i``."""
    A = np.asarray(A, dtype=float)
    m = A.shape[-1]
    nrm = np.max(np.sum(np.abs(A), axis=-2), axis=-1) if m else np.zeros(A.shape[0])
    # s_i = ceil(log2(|A_i|_1 / theta_13)) where the norm exceeds theta_13, else 0
    big = nrm > _THETA13
    s = np.zeros(A.shape[0], dtype=int)
    s[big] = np.ceil(np.log2(nrm[big] / _THETA13)).astype(int)
    A = A / (2.0 ** s)[:, None, None]
    b = _B13
    I = np.eye(m)
    A2 = A @ A
    A4 = A2 @ A2
    A6 = A4 @ A2
    U = A @ (A6 @ (b[13] * A6 + b[11] * A4 + b[9] * A2) + b[7] * A6 + b[5] * A4
             + b[3] * A2 + b[1] * I)
    V = A6 @ (b[12] * A6 + b[10] * A4 + b[8] * A2) + b[6] * A6 + b[4] * A4 + b[2] * A2 \
        + b[0] * I
    R = np.linalg.solve(V - U, V + U)
    for j in range(int(s.max()) if s.size else 0):
        sel = s > j  # R_i <- R_i^2, s_i times
        R[sel] = R[sel] @ R[sel]
    return R
