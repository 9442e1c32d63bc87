"""Mindlin-Reissner plate: MITC3 triangle (shear-locking free) with consistent mass.

Plate in the x-y plane, three DOFs per node ``(uz, rx, ry)``. Internally the element works with
``(w, bx, by)`` where the in-plane displacements are ``u = -z bx``, ``v = -z by`` so that in the
Kirchhoff limit ``bx = dw/dx``, ``by = dw/dy``; hence ``bx = -ry`` and ``by = rx`` (right-hand
rotations about x and y).

Energies (t thickness, D = E t^3 / (12 (1 - nu^2)), G = E / (2 (1 + nu)), k shear factor):

* bending ``1/2 int kappa^T Db kappa dA``, ``kappa = (dbx/dx, dby/dy, dbx/dy + dby/dx)``,
  ``Db = D [[1, nu, 0], [nu, 1, 0], [0, 0, (1 - nu)/2]]``; linear rotations give constant kappa;
* transverse shear ``1/2 int gamma~^T (k G t) gamma~ dA`` with the MITC3 assumed strain
  (Lee & Bathe 2004, Computers & Structures 82, 945-962): the tangential shear strain of each
  edge is tied to its edge-midpoint value. Equivalently ``gamma~ = sum_e g_e phi_e`` with
  ``g_e = (w_j - w_i) - (b_i + b_j)/2 . (x_j - x_i)`` the edge circulation of
  ``gamma = grad w - b`` and ``phi_e = lam_i grad lam_j - lam_j grad lam_i`` the Whitney edge
  functions (rotated Raviart-Thomas space). Integrated with the 3-point edge-midpoint rule
  (exact for the quadratic integrand).

Consistent mass: linear interpolation of ``w, bx, by`` with inertia ``rho t`` (translation) and
``rho t^3 / 12`` (rotary), i.e. ``rho h A / 12 [[2,1,1],[1,2,1],[1,1,2]]`` per field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from offline._deps import progress as _progress
from offline.fem.assembly import assemble, dof_table, node_dofs
from offline.fem.femodel import FEModel
if TYPE_CHECKING:  # the typed spec comes from offline.model.elements (which imports this)
    from offline.model.elements import PlateSpec

#: Formulations of the plate element.
FORMULATIONS = ("mitc3",)
#: Triangulation patterns of :func:`rectangle_mesh`.
PATTERNS = ("right", "left", "alternate")

#: DOF kinds carried by plate nodes: uz, rx, ry (indices into edge.DOF_NAMES).
PLATE_KINDS = (2, 3, 4)

_EDGES = ((0, 1), (1, 2), (2, 0))
# node transformation (w, bx, by) = Tn (uz, rx, ry):  bx = -ry, by = rx
_TN = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])


def _geometry(xy):
    """Areas and gradients of barycentric coordinates.

    Parameters
    ----------
    xy : ndarray, shape (ne, 3, 2)

    Returns
    -------
    area : ndarray (ne,)  [m^2], positive for counter-clockwise nodes
    grad : ndarray (ne, 3, 2)  [1/m], grad lam_i
    """
    x, y = xy[..., 0], xy[..., 1]
    # b_i = y_j - y_k, c_i = x_k - x_j  (i, j, k cyclic); grad lam_i = (b_i, c_i) / (2 A)
    b = np.stack([y[:, 1] - y[:, 2], y[:, 2] - y[:, 0], y[:, 0] - y[:, 1]], axis=1)
    c = np.stack([x[:, 2] - x[:, 1], x[:, 0] - x[:, 2], x[:, 1] - x[:, 0]], axis=1)
    area2 = (x[:, 1] - x[:, 0]) * (y[:, 2] - y[:, 0]) - (x[:, 2] - x[:, 0]) * (y[:, 1] - y[:, 0])
    with np.errstate(divide="ignore", invalid="ignore"):  # degenerate: caller raises
        grad = np.stack([b, c], axis=-1) / area2[:, None, None]
    return 0.5 * area2, grad


def mitc3_matrices(xy, E, nu, rho, t, shear_factor=5.0 / 6.0):
    """Element stiffness and consistent mass of MITC3 plate triangles.

    Parameters
    ----------
    xy : ndarray, shape (ne, 3, 2)
        Node coordinates in the plate plane [m], counter-clockwise.
    E, nu, rho, t : float or ndarray (ne,)
        Young's modulus [Pa], Poisson's ratio, density [kg/m^3], thickness [m].
    shear_factor : float
        Transverse shear correction factor (5/6).

    Returns
    -------
    Ke, Me : ndarray, shape (ne, 9, 9)
        DOF order ``(uz, rx, ry)`` of node 1, 2, 3; units N/m, N, N m/rad and kg, kg m, kg m^2.
    """
    xy = np.asarray(xy, float)
    ne = xy.shape[0]
    E, nu, rho, t = (np.broadcast_to(np.asarray(v, float), (ne,)) for v in (E, nu, rho, t))
    area, grad = _geometry(xy)
    if np.any(~(area > 0)):
        bad = int(np.flatnonzero(~(area > 0))[0])
        raise ValueError(f"triangle {bad} has zero or negative area (nodes clockwise or "
                              f"collinear)")

    # D = E t^3 / (12 (1 - nu^2));  Db = D [[1, nu, 0], [nu, 1, 0], [0, 0, (1-nu)/2]]
    D = E * t**3 / (12.0 * (1.0 - nu**2))
    Db = np.zeros((ne, 3, 3))
    Db[:, 0, 0] = Db[:, 1, 1] = D
    Db[:, 0, 1] = Db[:, 1, 0] = D * nu
    Db[:, 2, 2] = D * (1.0 - nu) / 2.0
    # kappa = Bb q,  q = (w, bx, by) per node
    Bb = np.zeros((ne, 3, 9))
    Bb[:, 0, 1::3] = grad[..., 0]
    Bb[:, 1, 2::3] = grad[..., 1]
    Bb[:, 2, 1::3] = grad[..., 1]
    Bb[:, 2, 2::3] = grad[..., 0]
    # Kb = A Bb^T Db Bb
    K = area[:, None, None] * np.einsum("eki,ekl,elj->eij", Bb, Db, Bb)

    # edge circulations g = Gm q:  g_e = (w_j - w_i) - (b_i + b_j)/2 . (x_j - x_i)
    Gm = np.zeros((ne, 3, 9))
    for e, (i, j) in enumerate(_EDGES):
        d = xy[:, j] - xy[:, i]
        Gm[:, e, 3 * i] = -1.0
        Gm[:, e, 3 * j] = 1.0
        for n in (i, j):
            Gm[:, e, 3 * n + 1] = -0.5 * d[:, 0]
            Gm[:, e, 3 * n + 2] = -0.5 * d[:, 1]
    # Ds = k G t,  G = E / (2 (1 + nu))
    Ds = shear_factor * E / (2.0 * (1.0 + nu)) * t
    # 3-point edge-midpoint rule: lam = (1/2, 1/2, 0) and permutations, weights A/3
    for lam in ((0.5, 0.5, 0.0), (0.0, 0.5, 0.5), (0.5, 0.0, 0.5)):
        # Phi[:, :, e] = lam_i grad lam_j - lam_j grad lam_i   (Whitney edge function)
        Phi = np.stack([lam[i] * grad[:, j] - lam[j] * grad[:, i] for i, j in _EDGES], axis=-1)
        # gamma~ = Bs q,  Bs = Phi Gm
        Bs = Phi @ Gm
        # Ks += (A/3) Bs^T Ds Bs
        K += (area / 3.0 * Ds)[:, None, None] * np.einsum("eki,ekj->eij", Bs, Bs)

    # consistent mass:  M = rho h A / 12 [[2,1,1],[1,2,1],[1,1,2]] per field
    P = (np.ones((3, 3)) + np.eye(3)) / 12.0
    M = np.zeros((ne, 9, 9))
    for f, h in enumerate((rho * t, rho * t**3 / 12.0)):
        for comp in ((0,) if f == 0 else (1, 2)):
            M[:, comp::3, comp::3] = (h * area)[:, None, None] * P

    # to (uz, rx, ry): K = T^T K T with T = blockdiag(Tn, Tn, Tn)
    T = np.kron(np.eye(3), _TN)
    K = T.T @ K @ T
    M = T.T @ M @ T
    return K, M


# ----------------------------------------------------------------------------- meshes
def rectangle_mesh(length, width, nx, ny, origin=(0.0, 0.0), pattern="alternate", z=0.0):
    """Structured triangle mesh of a rectangle.

    Parameters
    ----------
    length, width : float
        Extent along x and y [m].
    nx, ny : int
        Divisions along x and y; ``(nx + 1) (ny + 1)`` nodes, ``2 nx ny`` triangles.
    origin : (float, float)
        Corner with the smallest x and y [m].
    pattern : {"right", "left", "alternate"}
        Diagonal direction of each cell (``alternate`` flips it like a chessboard).
    z : float
        Plane height [m].

    Returns
    -------
    coords : ndarray (n_nodes, 3)
    node_ids : ndarray of int64 (n_nodes,), 1-based, x fastest
    tris : ndarray of int64 (2 nx ny, 3), node rows, counter-clockwise
    groups : dict with "x0", "x1", "y0", "y1" (edge node ids) and "all"
    """
    if pattern not in PATTERNS:
        raise ValueError(f"pattern: expected one of {PATTERNS}, got {pattern!r}")
    x = origin[0] + np.linspace(0.0, length, nx + 1)
    y = origin[1] + np.linspace(0.0, width, ny + 1)
    X, Y = np.meshgrid(x, y)  # (ny+1, nx+1), x fastest when raveled
    coords = np.column_stack([X.ravel(), Y.ravel(), np.full(X.size, float(z))])
    rid = np.arange(X.size).reshape(ny + 1, nx + 1)
    a, b = rid[:-1, :-1].ravel(), rid[:-1, 1:].ravel()   # bottom-left, bottom-right
    c, d = rid[1:, 1:].ravel(), rid[1:, :-1].ravel()     # top-right, top-left
    right = np.ones(a.size, bool)
    if pattern == "left":
        right[:] = False
    elif pattern == "alternate":
        i, j = np.meshgrid(np.arange(nx), np.arange(ny))
        right = ((i + j) % 2 == 0).ravel()
    t1 = np.where(right[:, None], np.column_stack([a, b, c]), np.column_stack([a, b, d]))
    t2 = np.where(right[:, None], np.column_stack([a, c, d]), np.column_stack([b, c, d]))
    tris = np.empty((2 * a.size, 3), np.int64)
    tris[0::2], tris[1::2] = t1, t2
    ids = np.arange(1, X.size + 1, dtype=np.int64)
    groups = {
        "x0": ids[rid[:, 0]], "x1": ids[rid[:, -1]],
        "y0": ids[rid[0, :]], "y1": ids[rid[-1, :]], "all": ids.copy(),
    }
    return coords, ids, tris, groups


def plate_model(coords, node_ids, tris, E, nu, rho, t, shear_factor=5.0 / 6.0, groups=None,
                name="plate") -> FEModel:
    """Unconstrained :class:`FEModel` of a flat plate in a plane ``z = const``.

    Parameters
    ----------
    coords : ndarray (n_nodes, 3) [m]
    node_ids : ndarray of int (n_nodes,)
    tris : ndarray of int (ne, 3)
        Triangles as node rows; clockwise triangles are reoriented.
    E, nu, rho, t : float or ndarray (ne,)
    """
    coords = np.asarray(coords, float)
    tris = np.array(tris, dtype=np.int64)
    xy = coords[tris][..., :2]
    area, _ = _geometry(xy)
    flip = area < 0
    tris[flip] = tris[flip][:, [0, 2, 1]]
    Ke, Me = mitc3_matrices(coords[tris][..., :2], E, nu, rho, t, shear_factor)
    K, M = assemble(coords.shape[0] * 3, node_dofs(tris, 3), Ke, Me,
                    centroids=coords[tris].mean(axis=1))
    dof_node, dof_kind = dof_table(node_ids, PLATE_KINDS)
    model = FEModel(coords=coords, node_ids=np.asarray(node_ids, np.int64), dof_node=dof_node,
                    dof_kind=dof_kind, M=M, K=K, groups=dict(groups or {}), name=name)
    model.n_elements = int(tris.shape[0])  # informational (inspect); not kept by constrain()
    ne = tris.shape[0]
    bc = lambda v: np.broadcast_to(np.asarray(v, float), (ne,)).copy()  # noqa: E731
    # what a strain output needs (offline.fem.strain): counter-clockwise triangles, material
    model.elements = {"type": "plate", "nodes": np.asarray(node_ids, np.int64)[tris],
                      "xy": coords[tris][..., :2], "z": float(coords[:, 2].mean()),
                      "E": bc(E), "nu": bc(nu), "t": bc(t)}
    return model


# ----------------------------------------------------------------- model-file builder
def build_plate(spec: PlateSpec, progress: bool = False) -> FEModel:
    """Unconstrained plate model of a ``[plate]`` table
    (:func:`offline.model.elements.parse_plate`): a generated rectangle (node groups x0, x1,
    y0, y1, all) or the explicit nodes and triangles (group all)."""
    if spec.rectangle is not None:
        length, width, nx, ny, origin, pattern = spec.rectangle
        coords, ids, tris, groups = rectangle_mesh(length, width, nx, ny, origin, pattern)
    else:
        ids = np.array([n for n, _ in spec.nodes], np.int64)
        coords = np.array([xyz for _, xyz in spec.nodes], float)
        row_of = {int(n): k for k, n in enumerate(ids)}
        tris = np.array([[row_of[n] for n in tr] for tr in spec.triangles], np.int64)
        groups = {"all": ids.copy()}
    mat = spec.material
    with _progress(total=1, desc="plate elements", enable=progress) as bar:
        model = plate_model(coords, ids, tris, mat.E, mat.nu, mat.rho, spec.thickness,
                            spec.shear_factor, groups, "plate")
        bar.update(1)
    return model


__all__ = ["mitc3_matrices", "rectangle_mesh", "plate_model", "build_plate", "FORMULATIONS",
           "PATTERNS", "PLATE_KINDS"]
