"""Euler-Bernoulli cantilever with a rotational root spring and a tip mass (scipy.sparse).

A small parametric system of our own, used to develop and test the inverse maps independently
of the FE loader: DOFs per node ``(w, phi)`` (deflection [m], rotation [rad]); node 0 at the
root has ``w = 0`` and its rotation restrained by a spring ``k_root`` [N m/rad]; a point mass
``m_tip`` [kg] sits at the free end. Hermite cubic elements, consistent mass.
"""

from __future__ import annotations

import numpy as np

from offline._deps import need


def element_matrices(E: float, I: float, rho_A: float, le: float):
    """Hermite beam element stiffness [N/m...] and consistent mass (4x4), DOFs (w1, phi1, w2, phi2)."""
    # k_e = E I / l³ [[12, 6l, -12, 6l], [6l, 4l², -6l, 2l²], ...]   (Euler-Bernoulli)
    k = E * I / le ** 3 * np.array([
        [12, 6 * le, -12, 6 * le],
        [6 * le, 4 * le ** 2, -6 * le, 2 * le ** 2],
        [-12, -6 * le, 12, -6 * le],
        [6 * le, 2 * le ** 2, -6 * le, 4 * le ** 2]])
    # m_e = ρ A l / 420 [[156, 22l, 54, -13l], ...]   (consistent mass)
    m = rho_A * le / 420.0 * np.array([
        [156, 22 * le, 54, -13 * le],
        [22 * le, 4 * le ** 2, 13 * le, -3 * le ** 2],
        [54, 13 * le, 156, -22 * le],
        [-13 * le, -3 * le ** 2, -22 * le, 4 * le ** 2]])
    return k, m


def cantilever(E: float, k_root: float, m_tip: float, length: float = 0.170, width: float = 0.013,
               thickness: float = 0.0012, rho: float = 2700.0, n_el: int = 17):
    """Sparse (M, K) of the cantilever, free DOFs ``[phi_0, w_1, phi_1, ..., w_ne, phi_ne]``.

    Returns
    -------
    M, K : scipy.sparse.csr_matrix, shape (2 n_el + 1, 2 n_el + 1)
    x : ndarray, shape (n_el + 1,)   node positions [m]
    """
    sp = need("scipy.sparse")
    if n_el < 1:
        raise ValueError(f"n_el must be >= 1, got {n_el}")
    le = length / n_el
    I = width * thickness ** 3 / 12.0
    ke, me = element_matrices(E, I, rho * width * thickness, le)
    nd = 2 * (n_el + 1)
    rows, cols, kv, mv = [], [], [], []
    for e in range(n_el):
        d = np.arange(2 * e, 2 * e + 4)
        rows.append(np.repeat(d, 4)); cols.append(np.tile(d, 4))
        kv.append(ke.ravel()); mv.append(me.ravel())
    r, c = np.concatenate(rows), np.concatenate(cols)
    K = sp.coo_matrix((np.concatenate(kv), (r, c)), shape=(nd, nd)).tolil()
    M = sp.coo_matrix((np.concatenate(mv), (r, c)), shape=(nd, nd)).tolil()
    K[1, 1] += k_root           # rotational root spring [N m/rad]
    M[nd - 2, nd - 2] += m_tip  # tip point mass on w_ne [kg]
    free = np.arange(1, nd)     # w_0 = 0
    return M.tocsr()[free][:, free], K.tocsr()[free][:, free], np.linspace(0, length, n_el + 1)


def dof_w(node: int) -> int:
    """Index of the deflection DOF of ``node`` (>= 1) among the free DOFs of :func:`cantilever`."""
    return 2 * node - 1
