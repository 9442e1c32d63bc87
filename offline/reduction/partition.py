"""Master/slave partition of ``M`` and ``K`` (paper 004 eq. 2-3).

``u = [u_m; u_s]`` with ``u_m`` the master DOFs in the caller's order and ``u_s`` all other
DOFs in model order. Blocks are taken by sparse slicing; nothing ``N x N`` is ever dense.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offline._deps import need


@dataclass
class Partition:
    """Master/slave blocks of a model.

    Attributes
    ----------
    m : ndarray of int64, shape (Nm,)
        Master DOF indices (caller's order).
    s : ndarray of int64, shape (Ns,)
        Slave DOF indices (ascending).
    K_ss, M_ss : scipy.sparse.csc_matrix, shape (Ns, Ns)
        Slave blocks [N/m, kg].
    K_sm, M_sm : scipy.sparse.csc_matrix, shape (Ns, Nm)
        Slave-master coupling blocks.
    K_mm, M_mm : scipy.sparse.csc_matrix, shape (Nm, Nm)
        Master blocks.
    """

    m: np.ndarray
    s: np.ndarray
    K_ss: object
    M_ss: object
    K_sm: object
    M_sm: object
    K_mm: object
    M_mm: object

    @property
    def n(self) -> int:
        """Number of DOFs of the full model, N."""
        return int(self.m.size + self.s.size)


def check_masters(masters, n_dofs: int) -> np.ndarray:
    """Validate master DOF indices: 1-D integers in ``[0, n_dofs)``, unique, at least one slave.

    Raises
    ------
    ValueError
        Naming ``masters`` and the offending entries.
    """
    a = np.asarray(masters)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"masters: expected a non-empty 1-D array of DOF indices, got shape "
                         f"{a.shape}")
    if not np.issubdtype(a.dtype, np.integer):
        whole = np.issubdtype(a.dtype, np.floating) and np.all(np.isfinite(a))
        if whole and np.all(a == np.round(a)):
            a = a.astype(np.int64)
        else:
            raise ValueError(f"masters: expected integer DOF indices, got dtype {a.dtype}")
    a = a.astype(np.int64)
    bad = a[(a < 0) | (a >= n_dofs)]
    if bad.size:
        raise ValueError(f"masters: indices {bad[:5].tolist()} outside [0, {n_dofs})")
    uniq, counts = np.unique(a, return_counts=True)
    if np.any(counts > 1):
        raise ValueError(f"masters: repeated DOF indices {uniq[counts > 1][:5].tolist()}")
    if a.size >= n_dofs:
        raise ValueError(f"masters: all {n_dofs} DOFs are masters; nothing to reduce")
    return a


def partition(K, M, masters) -> Partition:
    """Split ``K`` and ``M`` into master/slave blocks (eq. 3).

    Parameters
    ----------
    K, M : scipy.sparse matrix, shape (N, N)
        Stiffness and mass of the (constrained) model.
    masters : array of int, shape (Nm,)
        Master DOF indices; order kept.
    """
    sp = need("scipy.sparse")
    n = K.shape[0]
    if K.shape != (n, n) or M.shape != (n, n):
        raise ValueError(f"K and M must be square and equal in shape; got {K.shape}, {M.shape}")
    m = check_masters(masters, n)
    is_m = np.zeros(n, dtype=bool)
    is_m[m] = True
    s = np.flatnonzero(~is_m).astype(np.int64)
    K = sp.csr_matrix(K)
    M = sp.csr_matrix(M)
    Ks, Ms = K[s], M[s]
    Km, Mm = K[m], M[m]
    return Partition(
        m=m, s=s,
        K_ss=Ks[:, s].tocsc(), M_ss=Ms[:, s].tocsc(),
        K_sm=Ks[:, m].tocsc(), M_sm=Ms[:, m].tocsc(),
        K_mm=Km[:, m].tocsc(), M_mm=Mm[:, m].tocsc(),
    )


def embed(part: Partition, T_m: np.ndarray, T_s: np.ndarray) -> np.ndarray:
    """Assemble a basis in model DOF order from its master and slave rows.

    Parameters
    ----------
    T_m : ndarray, shape (Nm, n)
        Rows of the master DOFs.
    T_s : ndarray, shape (Ns, n)
        Rows of the slave DOFs.

    Returns
    -------
    ndarray, shape (N, n)
        ``T`` with ``T[m] = T_m`` and ``T[s] = T_s``.
    """
    T = np.empty((part.n, T_m.shape[1]), dtype=np.float64)
    T[part.m] = T_m
    T[part.s] = T_s
    return T
