"""The finite element model: nodes, a DOF table and sparse M, K (optionally C).

Every model type (beam, plate, solid, imported matrices) produces an :class:`FEModel`.
Element builders produce the *unconstrained* model; :func:`FEModel.constrain` removes fixed
DOFs and applies multipoint constraints, giving the model that reduction works on.

DOF kinds are indices into :data:`edge.DOF_NAMES` = (ux, uy, uz, rx, ry, rz). Units are SI
throughout (m, kg, s, N, rad).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edge import DOF_NAMES
from offline._deps import need


def dof_code(name: str) -> int:
    """Index of a DOF name in :data:`edge.DOF_NAMES` (raises ValueError naming the bad DOF)."""
    try:
        return DOF_NAMES.index(name)
    except ValueError:
        raise ValueError(f"unknown DOF {name!r}; expected one of {', '.join(DOF_NAMES)}") from None


@dataclass
class FEModel:
    """A linear structural model ``M u'' + C u' + K u = f``.

    Attributes
    ----------
    coords : ndarray, shape (n_nodes, 3)
        Node coordinates [m].
    node_ids : ndarray of int64, shape (n_nodes,)
        User-visible node ids (mesh ids), unique.
    dof_node : ndarray of int64, shape (N,)
        Node id of each DOF.
    dof_kind : ndarray of int8, shape (N,)
        DOF kind of each DOF, index into ``edge.DOF_NAMES``.
    M, K : scipy.sparse.csr_matrix, shape (N, N)
        Mass [kg, kg m^2] and stiffness [N/m, N m/rad] matrices, symmetric.
    C : scipy.sparse.csr_matrix or None, shape (N, N)
        Explicit viscous damping [N s/m] (imported matrices); None otherwise.
    rayleigh : tuple (a, b) or None
        Rayleigh damping ``C = a M + b K`` [1/s, s].
    groups : dict of str -> ndarray of int64
        Named node sets (physical groups, generator edges such as ``"x0"``), as node ids.
    name : str
        Model name (from the model file).
    elements : dict or None
        What a strain output needs of the elements (``offline.fem.strain``): ``type`` and
        per-element geometry, section and material, nodes as ids; kept by :meth:`constrain`
        without multipoint constraints (a tied DOF is no longer a DOF of its node).
    """

    coords: np.ndarray
    node_ids: np.ndarray
    dof_node: np.ndarray
    dof_kind: np.ndarray
    M: object
    K: object
    C: object | None = None
    rayleigh: tuple[float, float] | None = None
    groups: dict = field(default_factory=dict)
    name: str = "model"
    elements: dict | None = None

    # ------------------------------------------------------------------ lookups
    @property
    def n_dofs(self) -> int:
        return int(self.dof_node.shape[0])

    def node_row(self, node_id: int) -> int:
        """Row of ``coords`` for a node id."""
        idx = np.flatnonzero(self.node_ids == node_id)
        if idx.size == 0:
            raise KeyError(f"node {node_id} does not exist in model {self.name!r}")
        return int(idx[0])

    def node_at(self, xyz, tol: float | None = None) -> int:
        """Id of the node nearest to ``xyz`` [m]; raises if farther than ``tol``."""
        xyz = np.asarray(xyz, dtype=float).reshape(3)
        d = np.linalg.norm(self.coords - xyz, axis=1)
        i = int(np.argmin(d))
        if tol is not None and d[i] > tol:
            raise ValueError(
                f"no node within {tol:g} m of {xyz.tolist()} (nearest is node "
                f"{int(self.node_ids[i])} at {d[i]:.3g} m)"
            )
        return int(self.node_ids[i])

    def dof_index(self, node_id: int, dof: str | int) -> int:
        """Index of (node, dof) among the model's DOFs; KeyError if absent (e.g. constrained)."""
        kind = dof_code(dof) if isinstance(dof, str) else int(dof)
        idx = np.flatnonzero((self.dof_node == node_id) & (self.dof_kind == kind))
        if idx.size == 0:
            raise KeyError(
                f"DOF {DOF_NAMES[kind]} of node {node_id} is not a free DOF of model "
                f"{self.name!r} (constrained, or not carried by its elements)"
            )
        return int(idx[0])

    def dof_table(self) -> list[tuple[int, str]]:
        """List of (node id, dof name) per DOF."""
        return [(int(n), DOF_NAMES[int(k)]) for n, k in zip(self.dof_node, self.dof_kind)]

    # ------------------------------------------------------------ constraints
    def constrain(self, fixed: np.ndarray, T: object | None = None, keep: np.ndarray | None = None
                  ) -> "FEModel":
        """Model with fixed DOFs removed and optional multipoint constraints applied.

        Parameters
        ----------
        fixed : ndarray of bool, shape (N,)
            DOFs held at zero.
        T : scipy.sparse matrix, shape (N, N_indep), optional
            Multipoint-constraint transformation ``u = T u_indep`` (rigid spiders); applied
            before ``fixed``, which is then given over the independent DOFs ``keep``.
        keep : ndarray of int, shape (N_indep,), optional
            Indices (into the current DOFs) of the independent DOFs that ``T`` keeps.
        """
        sp = need("scipy.sparse")
        M, K, C = self.M, self.K, self.C
        dof_node, dof_kind = self.dof_node, self.dof_kind
        if T is not None:
            T = sp.csr_matrix(T)
            M = (T.T @ M @ T).tocsr()
            K = (T.T @ K @ T).tocsr()
            C = None if C is None else (T.T @ C @ T).tocsr()
            dof_node, dof_kind = dof_node[keep], dof_kind[keep]
        fixed = np.asarray(fixed, dtype=bool)
        if fixed.shape != dof_node.shape:
            raise ValueError(f"fixed mask has shape {fixed.shape}, model has {dof_node.size} DOFs")
        free = np.flatnonzero(~fixed)
        sel = lambda A: None if A is None else sp.csr_matrix(A)[free][:, free].tocsr()  # noqa: E731
        return FEModel(
            coords=self.coords, node_ids=self.node_ids,
            dof_node=dof_node[free], dof_kind=dof_kind[free],
            M=sel(M), K=sel(K), C=sel(C), rayleigh=self.rayleigh,
            groups=self.groups, name=self.name,
            elements=self.elements if T is None else None,
        )

    def damping_matrix(self):
        """Sparse C: explicit C plus Rayleigh ``a M + b K`` (zero matrix if neither is given)."""
        sp = need("scipy.sparse")
        C = sp.csr_matrix(self.M.shape) if self.C is None else self.C.copy()
        if self.rayleigh is not None:
            a, b = self.rayleigh
            # C = a M + b K   (Rayleigh, paper eq. 7)
            C = C + a * self.M + b * self.K
        return C.tocsr()
