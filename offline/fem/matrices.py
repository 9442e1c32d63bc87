"""Models from exported matrices: Matrix Market files plus a DOF table (``type = "matrices"``).

Files (paths relative to the model file)::

    M.mtx, K.mtx [, C.mtx]   Matrix Market (coordinate or array, real, general or symmetric)
    dofs.csv                 header ``index,node,dof,x,y,z``; one row per matrix row/column

``index`` is the 0-based row/column of the matrices (rows may come in any order but must
cover ``0..N-1`` once); ``node`` an integer node id; ``dof`` one of ux, uy, uz, rx, ry, rz;
``x, y, z`` the node position [m] (equal for all DOFs of a node). Units are SI: convert
matrices exported in mm/tonne/s before use. Models exported from Abaqus (``*MATRIX GENERATE``),
ANSYS (``HBMAT``/APDL Math) or Nastran (``DMIGPCH``/OP4) need converting to Matrix Market and
the DOF table once (e.g. with scipy.io); the reader then checks everything it loads.

:func:`write_matrices` writes any :class:`~offline.fem.femodel.FEModel` in this format
(round trip: reading gives back bit-identical matrices).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from edge import DOF_NAMES
from offline._deps import need
from offline.fem.femodel import FEModel

if TYPE_CHECKING:  # the typed spec comes from offline.model.elements (which imports this)
    from offline.model.elements import MatricesSpec

#: Header of the DOF table.
DOF_HEADER = ("index", "node", "dof", "x", "y", "z")
#: Default relative tolerance of the symmetry check ``max|A - A^T| <= rtol max|A|``.
SYMMETRY_RTOL = 1e-8


class MatrixFileError(ValueError):
    """A matrix or DOF-table file is missing or invalid (the message names the file)."""


def read_dof_table(path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Read a DOF table CSV.

    Returns
    -------
    dof_node : ndarray of int64, shape (N,)
        Node id of matrix row ``i``.
    dof_kind : ndarray of int8, shape (N,)
        DOF kind of row ``i`` (index into ``edge.DOF_NAMES``).
    node_ids : ndarray of int64, shape (n_nodes,)
        Distinct node ids, sorted.
    coords : ndarray, shape (n_nodes, 3)
        Node positions [m].
    order : ndarray of int64, shape (N,)
        File row of each matrix index (for messages).
    """
    path = Path(path)
    if not path.is_file():
        raise MatrixFileError(f"{path}: DOF table not found")
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError) as exc:
        raise MatrixFileError(f"{path}: cannot read the DOF table ({exc})") from exc
    if not rows or tuple(c.strip() for c in rows[0]) != DOF_HEADER:
        got = ",".join(rows[0]) if rows else "an empty file"
        raise MatrixFileError(f"{path}: header must be {','.join(DOF_HEADER)}, got {got!r}")
    body = [r for r in rows[1:] if r and any(c.strip() for c in r)]
    if not body:
        raise MatrixFileError(f"{path}: no DOF rows")
    n = len(body)
    idx = np.empty(n, dtype=np.int64)
    node = np.empty(n, dtype=np.int64)
    kind = np.empty(n, dtype=np.int8)
    xyz = np.empty((n, 3))
    for i, r in enumerate(body):
        line = i + 2
        if len(r) != 6:
            raise MatrixFileError(f"{path}, line {line}: expected 6 fields, got {len(r)}")
        try:
            idx[i], node[i] = int(r[0]), int(r[1])
        except ValueError:
            raise MatrixFileError(f"{path}, line {line}: index and node must be integers, got "
                                  f"{r[0]!r}, {r[1]!r}") from None
        d = r[2].strip()
        if d not in DOF_NAMES:
            raise MatrixFileError(f"{path}, line {line}: unknown dof {d!r} (expected one of "
                                  f"{', '.join(DOF_NAMES)})")
        kind[i] = DOF_NAMES.index(d)
        try:
            xyz[i] = [float(v) for v in r[3:6]]
        except ValueError:
            raise MatrixFileError(f"{path}, line {line}: x, y, z must be numbers") from None
        if not np.all(np.isfinite(xyz[i])):
            raise MatrixFileError(f"{path}, line {line}: x, y, z must be finite")
    if idx.min() < 0 or idx.max() >= n or np.unique(idx).size != n:
        dup = np.flatnonzero(np.bincount(idx[idx >= 0]) > 1) if idx.min() >= 0 else idx[idx < 0]
        raise MatrixFileError(f"{path}: column 'index' must hold 0..{n - 1} once each "
                              f"(duplicate or out of range: {dup[:5].tolist() or idx.max()})")
    key = node * 8 + kind
    u, cnt = np.unique(key, return_counts=True)
    if np.any(cnt > 1):
        k = int(u[np.argmax(cnt > 1)])
        raise MatrixFileError(f"{path}: duplicate DOF (node {k // 8}, {DOF_NAMES[k % 8]})")
    perm = np.argsort(idx)
    node, kind, xyz = node[perm], kind[perm], xyz[perm]
    node_ids, first, inv = np.unique(node, return_index=True, return_inverse=True)
    coords = xyz[first]
    bad = np.flatnonzero(np.abs(xyz - coords[inv]).max(axis=1) > 1e-9 * max(
        1.0, float(np.abs(xyz).max())))
    if bad.size:
        raise MatrixFileError(f"{path}: node {int(node[bad[0]])} has different x, y, z in "
                              f"different rows")
    return node, kind, node_ids, coords, perm + 2


def read_matrix(path, n: int | None = None, symmetry_rtol: float = SYMMETRY_RTOL):
    """Read one square, finite, symmetric Matrix Market matrix.

    Parameters
    ----------
    path : path
    n : int, optional
        Required size (the DOF table's length).
    symmetry_rtol : float
        Accept ``max|A - A^T| <= symmetry_rtol * max|A|``. The matrix is returned as stored
        (not symmetrised), so a round trip is exact.

    Returns
    -------
    scipy.sparse.csr_matrix, shape (n, n)
    """
    sp = need("scipy.sparse")
    sio = need("scipy.io")
    path = Path(path)
    if not path.is_file():
        raise MatrixFileError(f"{path}: matrix file not found")
    try:
        A = sio.mmread(str(path))
    except Exception as exc:  # ValueError, OSError, parser errors of fast_matrix_market
        raise MatrixFileError(f"{path}: cannot read as Matrix Market ({exc})") from exc
    A = sp.csr_matrix(A, dtype=float) if sp.issparse(A) or np.ndim(A) == 2 else None
    if A is None:
        raise MatrixFileError(f"{path}: not a matrix")
    if A.shape[0] != A.shape[1]:
        raise MatrixFileError(f"{path}: matrix is not square ({A.shape[0]} x {A.shape[1]})")
    if n is not None and A.shape[0] != n:
        raise MatrixFileError(f"{path}: matrix is {A.shape[0]} x {A.shape[1]} but the DOF table "
                              f"has {n} rows")
    if not np.all(np.isfinite(A.data)):
        raise MatrixFileError(f"{path}: matrix contains NaN or inf")
    A.sum_duplicates()
    D = abs(A - A.T)
    amax = float(abs(A).max()) if A.nnz else 0.0
    asym = float(D.max()) if D.nnz else 0.0
    if asym > symmetry_rtol * amax:
        raise MatrixFileError(f"{path}: matrix is not symmetric (max|A - A^T| = {asym:.3g}, "
                              f"{asym / amax:.2g} of max|A|, tolerance {symmetry_rtol:g})")
    return A


def read_matrices(mass, stiffness, dofs, damping=None, symmetry_rtol: float = SYMMETRY_RTOL,
                  name: str = "matrices") -> FEModel:
    """FEModel from Matrix Market files and a DOF table (paths)."""
    node, kind, node_ids, coords, _ = read_dof_table(dofs)
    n = node.size
    M = read_matrix(mass, n, symmetry_rtol)
    K = read_matrix(stiffness, n, symmetry_rtol)
    C = None if damping is None else read_matrix(damping, n, symmetry_rtol)
    dM = M.diagonal()
    if np.any(dM < 0):
        i = int(np.flatnonzero(dM < 0)[0])
        raise MatrixFileError(f"{mass}: negative diagonal mass entry at index {i} (node "
                              f"{int(node[i])}, {DOF_NAMES[kind[i]]})")
    return FEModel(coords=coords, node_ids=node_ids, dof_node=node, dof_kind=kind, M=M, K=K,
                   C=C, name=name)


def build_matrices(spec: MatricesSpec, progress: bool = False) -> FEModel:
    """FEModel of a ``[matrices]`` table (:func:`offline.model.elements.parse_matrices`)."""
    try:
        return read_matrices(spec.mass, spec.stiffness, spec.dofs, spec.damping,
                             spec.symmetry_rtol, name=spec.stiffness.stem)
    except MatrixFileError as exc:
        raise MatrixFileError(f"{spec.where}: {exc}") from None


def write_matrices(model: FEModel, directory, prefix: str = "") -> dict[str, Path]:
    """Write a model as Matrix Market files and a DOF table.

    Parameters
    ----------
    model : FEModel
    directory : path
        Created if missing.
    prefix : str
        File name prefix (``<prefix>M.mtx``, ...).

    Returns
    -------
    dict
        Paths by key ``mass``, ``stiffness``, ``dofs`` (and ``damping`` if ``model.C``): the
        ``[matrices]`` table of a model file, relative to ``directory``.
    """
    sio = need("scipy.io")
    sp = need("scipy.sparse")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    out = {"mass": d / f"{prefix}M.mtx", "stiffness": d / f"{prefix}K.mtx",
           "dofs": d / f"{prefix}dofs.csv"}
    mats = {"mass": model.M, "stiffness": model.K}
    if model.C is not None:
        out["damping"] = d / f"{prefix}C.mtx"
        mats["damping"] = model.C
    for key, A in mats.items():
        # general coordinate format, shortest round-trip decimal: exact on reading
        sio.mmwrite(str(out[key]), sp.coo_matrix(A), symmetry="general",
                    comment=f"vsense {model.name}: {key}")
    order = np.argsort(model.node_ids)
    rows = order[np.searchsorted(model.node_ids[order], model.dof_node)]
    xyz = model.coords[rows]
    with open(out["dofs"], "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(DOF_HEADER)
        for i in range(model.n_dofs):
            w.writerow([i, int(model.dof_node[i]), DOF_NAMES[int(model.dof_kind[i])],
                        repr(float(xyz[i, 0])), repr(float(xyz[i, 1])), repr(float(xyz[i, 2]))])
    return out
