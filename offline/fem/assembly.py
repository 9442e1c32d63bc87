"""Sparse assembly of element matrices into global mass and stiffness matrices.

Shared by the element files (``beam.py``, ``plate.py``, ``solid.py``). The API is small and
stable:

* :func:`assemble` – element arrays ``(ne, nd, nd)`` plus their global DOF numbers
  ``(ne, nd)`` -> symmetric CSR ``K`` and ``M``.
* :func:`assemble_one` – the same for a single matrix family.
* :func:`node_dofs` – global DOF numbers of element nodes for a node-major DOF layout.
* :func:`dof_table` – ``dof_node``/``dof_kind`` arrays of an :class:`~offline.fem.femodel.FEModel`
  for a node-major layout.

Global DOF numbering is node-major: DOF ``k`` of node row ``i`` is ``i * n_per_node + k``.
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager

import numpy as np

from offline._deps import need


def _check(n_dofs: int, elem_dofs: np.ndarray, A: np.ndarray, name: str) -> tuple:
    elem_dofs = np.asarray(elem_dofs)
    A = np.asarray(A, dtype=float)
    if elem_dofs.ndim != 2 or not np.issubdtype(elem_dofs.dtype, np.integer):
        raise ValueError(f"elem_dofs: expected an integer array (ne, nd), got "
                         f"{elem_dofs.dtype} {elem_dofs.shape}")
    ne, nd = elem_dofs.shape
    if A.shape != (ne, nd, nd):
        raise ValueError(f"{name}: expected shape {(ne, nd, nd)}, got {A.shape}")
    if ne and (elem_dofs.min() < 0 or elem_dofs.max() >= n_dofs):
        raise ValueError(f"elem_dofs: DOF numbers must lie in [0, {n_dofs}), got "
                         f"[{elem_dofs.min()}, {elem_dofs.max()}]")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name}: element matrices contain NaN or inf")
    return elem_dofs.astype(np.int64), A


def assemble_one(n_dofs: int, elem_dofs, Ae):
    """Assemble one family of element matrices.

    Parameters
    ----------
    n_dofs : int
        Number of global DOFs N.
    elem_dofs : ndarray of int, shape (ne, nd)
        Global DOF number of each element DOF.
    Ae : ndarray, shape (ne, nd, nd)
        Element matrices.

    Returns
    -------
    scipy.sparse.csr_matrix, shape (N, N)
        ``A = sum_e L_e^T A_e L_e`` with duplicate entries summed.
    """
    sp = need("scipy.sparse")
    elem_dofs, Ae = _check(n_dofs, elem_dofs, Ae, "Ae")
    nd = elem_dofs.shape[1]
    rows = np.repeat(elem_dofs, nd, axis=1).ravel()
    cols = np.tile(elem_dofs, (1, nd)).ravel()
    A = sp.coo_matrix((Ae.ravel(), (rows, cols)), shape=(n_dofs, n_dofs)).tocsr()
    A.sum_duplicates()
    return A


_ZONES: contextvars.ContextVar = contextvars.ContextVar("stiffness_zones", default=None)


@contextmanager
def stiffness_zones(boxes, factors):
    """Scale the stiffness of every element whose centroid lies in ``boxes[z]`` by
    ``factors[z]`` (products where boxes overlap) in the :func:`assemble` calls made inside
    the ``with`` block (damage zones, paper 003 eq. 23: E_z = (1 - ω_z) E).

    Parameters
    ----------
    boxes : sequence of ((x0, y0, z0), (x1, y1, z1)) [m]
    factors : sequence of float
    """
    b = np.asarray(boxes, dtype=float).reshape(-1, 2, 3)
    tok = _ZONES.set((b, np.asarray(factors, dtype=float).reshape(-1)))
    try:
        yield
    finally:
        _ZONES.reset(tok)


def zone_factors(centroids) -> np.ndarray | None:
    """Stiffness factor of each element (ne,) under the active :func:`stiffness_zones`."""
    z = _ZONES.get()
    if z is None:
        return None
    boxes, fac = z
    c = np.asarray(centroids, dtype=float)
    lo, hi = np.minimum(boxes[:, 0], boxes[:, 1]), np.maximum(boxes[:, 0], boxes[:, 1])
    inside = np.all((c[:, None, :] >= lo[None] - 1e-12) & (c[:, None, :] <= hi[None] + 1e-12), axis=2)
    return np.prod(np.where(inside, fac[None, :], 1.0), axis=1)


def assemble(n_dofs: int, elem_dofs, Ke, Me, centroids=None):
    """Assemble element stiffness and mass matrices (``n_dofs``, ``elem_dofs`` as in
    :func:`assemble_one`).

    Parameters
    ----------
    Ke, Me : ndarray, shape (ne, nd, nd)
        Element stiffness [N/m, N m/rad] and mass [kg, kg m^2] matrices.
    centroids : ndarray, shape (ne, 3), optional
        Element centroids [m]; needed inside :func:`stiffness_zones` (the element files pass
        them), where each ``Ke`` is scaled by its zone factor.

    Returns
    -------
    K, M : scipy.sparse.csr_matrix, shape (N, N)
        Global stiffness and mass, symmetrised as ``(A + A^T) / 2`` to remove round-off
        asymmetry.
    """
    if _ZONES.get() is not None:
        if centroids is None:
            raise ValueError("stiffness zones (damage) need the element centroids: this element "
                             "type does not support [[damage]] regions")
        Ke = np.asarray(Ke, dtype=float) * zone_factors(centroids)[:, None, None]
    K = assemble_one(n_dofs, elem_dofs, Ke)
    M = assemble_one(n_dofs, elem_dofs, Me)
    # A <- (A + A^T) / 2   (exact symmetry for eigsh / Cholesky)
    K = ((K + K.T) * 0.5).tocsr()
    M = ((M + M.T) * 0.5).tocsr()
    return K, M


def node_dofs(conn, n_per_node: int) -> np.ndarray:
    """Global DOF numbers of element nodes for a node-major layout.

    Parameters
    ----------
    conn : ndarray of int, shape (ne, nn)
        Element connectivity as node *rows* (0-based indices into ``coords``).
    n_per_node : int
        DOFs per node.

    Returns
    -------
    ndarray of int64, shape (ne, nn * n_per_node)
        ``[n0*d, n0*d+1, ..., n1*d, ...]`` per element.
    """
    conn = np.asarray(conn, dtype=np.int64)
    k = np.arange(n_per_node, dtype=np.int64)
    return (conn[:, :, None] * n_per_node + k).reshape(conn.shape[0], -1)


def dof_table(node_ids, kinds) -> tuple[np.ndarray, np.ndarray]:
    """``dof_node`` and ``dof_kind`` arrays for a node-major layout.

    Parameters
    ----------
    node_ids : ndarray of int, shape (n_nodes,)
        Node ids in row order.
    kinds : sequence of int
        DOF kinds carried by every node (indices into ``edge.DOF_NAMES``), e.g. ``(2, 3, 4)``
        for plates.

    Returns
    -------
    dof_node : ndarray of int64, shape (n_nodes * len(kinds),)
    dof_kind : ndarray of int8, shape (n_nodes * len(kinds),)
    """
    node_ids = np.asarray(node_ids, dtype=np.int64)
    kinds = np.asarray(kinds, dtype=np.int8)
    return np.repeat(node_ids, kinds.size), np.tile(kinds, node_ids.size)
