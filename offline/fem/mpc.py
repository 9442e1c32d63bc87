"""Rigid spiders (RBE2-like multipoint constraints).

A spider ties a set of slave nodes (e.g. the surface of a bolt hole) rigidly to one new master
node with six DOFs ``(ux, uy, uz, rx, ry, rz)`` at its centre (the slave centroid unless
given). For a slave at ``x_s`` and the master at ``x_m``, with ``r = x_s - x_m``:

    u_s = u_m + theta_m x r          (small rotations)
    theta_s = theta_m                (only for slaves that carry rotations: beams, plates)

The slave DOFs are eliminated with a sparse transformation ``u = T u_indep`` whose columns are
all non-slave DOFs plus the six master DOFs of each spider (``FEModel.constrain(zeros, T,
keep)``). New master node ids are numbered above the model's largest node id in spider order;
each is also the node group named after its spider.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from offline._deps import need
from offline.fem.femodel import FEModel

if TYPE_CHECKING:  # the typed spec comes from offline.model.elements (which imports this)
    from offline.model.elements import SpiderSpec


@dataclass(frozen=True)
class Spider:
    """One rigid spider.

    Attributes
    ----------
    name : str
        Name; becomes the node group of the master node.
    slaves : ndarray of int64, shape (ns,)
        Slave node ids.
    center : ndarray, shape (3,) or None
        Master node position [m]; None means the centroid of the slaves.
    """

    name: str
    slaves: np.ndarray
    center: np.ndarray | None = None


# ------------------------------------------------------------------------------- spiders
def spider_of(sd: SpiderSpec, model: FEModel) -> Spider:
    """The :class:`Spider` of a parsed ``[[solid.spiders]]`` entry on ``model``'s nodes
    (``sd.select`` resolved with the one selection grammar, :mod:`offline.model.selection`)."""
    ids = sd.select.nodes_in(model.coords, model.node_ids, model.groups, allow_empty=True)
    if ids.size == 0:
        raise ValueError(f"{sd.where}.select: selects no nodes (spider {sd.name!r})")
    center = None if sd.center is None else np.asarray(sd.center, float)
    return Spider(name=sd.name, slaves=np.unique(ids), center=center)


# --------------------------------------------------------------------------- transformation
def _rows(kind: np.ndarray, r: np.ndarray):
    """Coefficients of the master DOFs (6 per slave DOF) in ``u_s = u_m + theta x r``.

    Returns an array (n, 6): slave DOF of kind ``kind`` (0..5) at offset ``r`` (n, 3).
    """
    R = np.zeros((kind.size, 6))
    rx, ry, rz = r[:, 0], r[:, 1], r[:, 2]
    for k in range(6):
        R[kind == k, k] = 1.0
    # theta x r = (ty rz - tz ry, tz rx - tx rz, tx ry - ty rx)
    m = kind == 0
    R[m, 4], R[m, 5] = rz[m], -ry[m]
    m = kind == 1
    R[m, 3], R[m, 5] = -rz[m], rx[m]
    m = kind == 2
    R[m, 3], R[m, 4] = ry[m], -rx[m]
    return R


def rigid_body_modes(model: FEModel, center=(0.0, 0.0, 0.0)) -> np.ndarray:
    """Six rigid-body displacement fields of a model's DOFs.

    Returns
    -------
    ndarray, shape (N, 6)
        Column j is the DOF vector of a unit translation (j < 3) or a unit small rotation
        (j >= 3) about ``center``.
    """
    order = np.argsort(model.node_ids)
    rows = order[np.searchsorted(model.node_ids[order], model.dof_node)]
    r = model.coords[rows] - np.asarray(center, dtype=float)
    return _rows(model.dof_kind.astype(np.int64), r)


def spider_transform(model: FEModel, spiders: list[Spider], where: str = "spiders"):
    """Model extended by the master nodes, and the transformation eliminating the slaves.

    Parameters
    ----------
    model : FEModel
        N DOFs.
    spiders : list of Spider
        Slave sets must be disjoint.
    where : str
        Key path for error messages.

    Returns
    -------
    ext : FEModel
        N + 6 s DOFs: the model plus the master nodes (zero mass and stiffness rows), master
        groups added.
    T : scipy.sparse.csr_matrix, shape (N + 6 s, N_indep)
        ``u_ext = T u_indep``.
    keep : ndarray of int64, shape (N_indep,)
        Indices into ``ext``'s DOFs of the independent DOFs (the columns of ``T``).
    """
    sp = need("scipy.sparse")
    _check_names(model, spiders, where)
    order = np.argsort(model.node_ids)
    sorted_ids = model.node_ids[order]
    owner: dict[int, str] = {}
    N = model.n_dofs
    ns = len(spiders)
    first = int(model.node_ids.max()) + 1
    master_ids = np.arange(first, first + ns, dtype=np.int64)
    centers = np.zeros((ns, 3))
    slave_dof = np.zeros(N, dtype=bool)
    per_spider = []
    for k, s in enumerate(spiders):
        centers[k], dofs, R = _spider_rows(model, s, f"{where}[{k}] ({s.name!r})", order,
                                           sorted_ids, owner)
        slave_dof[dofs] = True
        per_spider.append((dofs, R))
    ext = _extended(sp, model, spiders, centers, master_ids)
    # transformation ------------------------------------------------------------
    n_ext = N + 6 * ns
    is_slave = np.concatenate([slave_dof, np.zeros(6 * ns, dtype=bool)])
    keep = np.flatnonzero(~is_slave)
    col = np.full(n_ext, -1, dtype=np.int64)
    col[keep] = np.arange(keep.size)
    ri, ci, vi = [keep], [np.arange(keep.size)], [np.ones(keep.size)]
    for k, (dofs, R) in enumerate(per_spider):
        mcols = col[N + 6 * k + np.arange(6)]
        nz = R != 0.0
        ri.append(np.broadcast_to(dofs[:, None], R.shape)[nz])
        ci.append(np.broadcast_to(mcols[None, :], R.shape)[nz])
        vi.append(R[nz])
    T = sp.csr_matrix((np.concatenate(vi), (np.concatenate(ri), np.concatenate(ci))),
                      shape=(n_ext, keep.size))
    return ext, T, keep


def _check_names(model: FEModel, spiders, where: str) -> None:
    """ValueError for no spiders, a duplicate spider name, or one that names a node group."""
    if not spiders:
        raise ValueError(f"{where}: no spiders given")
    names = [s.name for s in spiders]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"{where}: duplicate spider name(s) {', '.join(dup)}")
    clash = sorted(set(names) & set(model.groups))
    if clash:
        raise ValueError(f"{where}: spider name(s) {', '.join(clash)} already name node groups "
                          f"of the mesh; choose other names")


def _spider_rows(model: FEModel, s: Spider, w: str, order, sorted_ids, owner: dict):
    """One spider's master node position, its slave DOFs and the rows ``R`` of
    ``u_slave = R u_master``; ``owner`` (node -> spider name) is updated. ValueError (``w``:
    where) for missing or shared slave nodes, or slaves that do not determine the master."""
    ids = np.unique(np.asarray(s.slaves, dtype=np.int64))
    if ids.size == 0:
        raise ValueError(f"{w}: no slave nodes")
    pos = np.searchsorted(sorted_ids, ids)
    pos = np.minimum(pos, sorted_ids.size - 1)
    missing = ids[sorted_ids[pos] != ids]
    if missing.size:
        raise ValueError(f"{w}: slave node(s) {missing[:5].tolist()} do not exist")
    for i in ids.tolist():
        if i in owner:
            raise ValueError(f"{w}: node {i} is already a slave of spider {owner[i]!r}; "
                              f"slave sets must be disjoint")
        owner[i] = s.name
    xs = model.coords[order[pos]]
    center = xs.mean(axis=0) if s.center is None else np.asarray(s.center, float)
    dofs = np.flatnonzero(np.isin(model.dof_node, ids))
    if dofs.size == 0:
        raise ValueError(f"{w}: the slave nodes carry no free DOFs")
    rows_of = order[np.searchsorted(sorted_ids, model.dof_node[dofs])]
    r = model.coords[rows_of] - center
    R = _rows(model.dof_kind[dofs].astype(np.int64), r)
    # the master DOFs are determined iff R has full column rank 6 (scale-free check)
    L = max(float(np.sqrt((r ** 2).sum(axis=1).mean())), 1e-300)
    Rn = R * np.r_[1.0, 1.0, 1.0, L, L, L] ** -1
    ev = np.linalg.eigvalsh(Rn.T @ Rn)
    if ev[0] <= 1e-10 * ev[-1]:
        raise ValueError(f"{w}: its {ids.size} slave node(s) do not determine all six "
                          f"master DOFs (fewer than 3 nodes, or all on one line)")
    return center, dofs, R


def _extended(sp, model: FEModel, spiders, centers, master_ids) -> FEModel:
    """The model plus the master nodes (zero mass and stiffness rows), a node group each."""
    ns = len(spiders)
    Z = sp.csr_matrix((6 * ns, 6 * ns))
    pad = lambda A: None if A is None else sp.block_diag((A, Z), format="csr")  # noqa: E731
    groups = dict(model.groups)
    for k, s in enumerate(spiders):
        groups[s.name] = master_ids[k:k + 1].copy()
    return FEModel(
        coords=np.vstack([model.coords, centers]),
        node_ids=np.concatenate([model.node_ids, master_ids]),
        dof_node=np.concatenate([model.dof_node, np.repeat(master_ids, 6)]),
        dof_kind=np.concatenate([model.dof_kind, np.tile(np.arange(6, dtype=np.int8), ns)]
                                ).astype(np.int8),
        M=pad(model.M), K=pad(model.K), C=pad(model.C), rayleigh=model.rayleigh,
        groups=groups, name=model.name)


def add_spiders(model: FEModel, spiders: list[Spider], where: str = "spiders") -> FEModel:
    """Model with the spiders' slave DOFs eliminated and their master nodes added.

    Returns
    -------
    FEModel
        DOFs: the non-slave DOFs of ``model`` (order kept) followed by six DOFs per master
        node, in spider order. ``groups[spider.name]`` holds the master node id.
    """
    ext, T, keep = spider_transform(model, spiders, where)
    red = ext.constrain(np.zeros(keep.size, dtype=bool), T, keep)
    # A <- (A + A^T) / 2   (T^T A T is symmetric only up to round-off)
    sym = lambda A: None if A is None else ((A + A.T) * 0.5).tocsr()  # noqa: E731
    red.M, red.K, red.C = sym(red.M), sym(red.K), sym(red.C)
    return red
