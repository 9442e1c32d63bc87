"""Strain and stress at a point as a linear functional of the nodal DOFs (one row).

A virtual strain output is ``eps = s @ u`` with ``s`` (N,) over the constrained model's DOFs,
built from the element that holds the point (the element data ``FEModel.elements``):

* **beam** (3-D frame, :mod:`offline.fem.beam`): axial strain of the fibre at the point,
  ``eps = du/dx - y dtheta_z/dx - z dtheta_y/dx`` (Euler-Bernoulli: ``eps = u' - y v'' -
  z w''``) with ``(y, z)`` the point's offset from the member axis in the local section axes
  and ``theta`` interpolated by the element's own shape functions (Hermite cubic for
  Euler-Bernoulli, the interdependent interpolation for Timoshenko): curvature linear along
  the element, exact for end loads;
* **plate** (Mindlin MITC3, :mod:`offline.fem.plate`): surface strain at ``z = +-t/2`` from
  the element's bending curvatures, ``eps = -z kappa`` (``u = -z bx``, ``v = -z by``),
  along an in-plane direction ``n``: ``eps_nn = n^T eps n``; constant per triangle (linear
  rotations), averaged over the triangles that share the point when it lies on an edge or
  a node.

* **solid** (:mod:`offline.fem.solid`): the normal strain along ``direction`` from the
  B-matrix of the element holding the point, ``eps_nn = sum_a (n . grad N_a)(n . u_a)``.

Stress: ``sigma = E eps`` (beam, uniaxial), ``sigma_nn = lam tr(eps) + 2 mu eps_nn`` (solid) and plane stress ``sigma_nn = n^T D eps n`` with
``D = E / (1 - nu^2) [[1, nu, 0], [nu, 1, 0], [0, 0, (1 - nu)/2]]`` (plate).
A row reads the displacements, so the same row gives the strain rate from ``v`` and so on;
the reduction carries it as ``s @ T`` (:meth:`offline.reduced.ReducedModel.output_rows`).
"""

from __future__ import annotations

import numpy as np

from edge import DOF_NAMES
from offline._deps import need
from offline.fem.plate import _TN, _geometry
from offline.fem.solid import element_type, lame, shape_functions

#: surface -> sign of the fibre ``z = sign t / 2`` (plate normal +z: ``top``)
SURFACES = {"top": 1.0, "bottom": -1.0}
#: output unit -> factor from SI (strain is dimensionless, stress in Pa)
UNITS = {"strain": {"strain": 1.0, "microstrain": 1e6},
         "stress": {"Pa": 1.0, "kPa": 1e-3, "MPa": 1e-6}}


class Probe(int):
    """An output that is a row over the model's DOFs rather than one DOF.

    The integer value is a free DOF the row reads most (for tables and node metadata);
    ``idx``, ``coef``: the row's nonzeros (``row[idx] = coef``).
    """

    def __new__(cls, dof: int, idx, coef):
        obj = super().__new__(cls, int(dof))
        obj.idx = np.asarray(idx, np.int64)
        obj.coef = np.asarray(coef, float)
        return obj


def probe_matrix(probes, n_dofs: int):
    """Sparse (len(probes), n_dofs) rows: a unit row for a DOF index, ``coef`` for a
    :class:`Probe`."""
    sp = need("scipy.sparse")
    rows, cols, vals = [], [], []
    for i, p in enumerate(probes):
        if isinstance(p, Probe):
            rows += [i] * p.idx.size
            cols += p.idx.tolist()
            vals += p.coef.tolist()
        else:
            rows.append(i)
            cols.append(int(p))
            vals.append(1.0)
    return sp.csr_matrix((vals, (rows, cols)), shape=(len(probes), n_dofs))


# ------------------------------------------------------------------------------- beam
def _dtheta_dx(xi, phi, L):
    """``d theta / dx`` per unit (w1, t1, w2, t2), theta = dw/dx interpolated as in
    :func:`offline.fem.beam._shape_functions`; shape (4,). For phi = 0 this is
    ``d2 Nw / dx2 = [12 xi - 6, L (6 xi - 4), 6 - 12 xi, L (6 xi - 2)] / L^2``."""
    mu = 1.0 / (1.0 + phi)
    return np.array([6 * mu / L * (2 * xi - 1), mu * (6 * xi - (4 + phi)),
                     -6 * mu / L * (2 * xi - 1), mu * (6 * xi - (2 - phi))]) / L


def beam_row(el: dict, point, stress: bool = False, where: str = "at"):
    """``(node ids (k,), DOF kinds (k,), coefficients (k,))`` of the axial strain (stress) of
    the fibre at ``point`` (module docstring); averaged over the elements of one straight
    member whose axis segment is nearest (a point at a node between two)."""
    p = np.asarray(point, float)
    X1, R, L = el["X1"], el["R"], el["L"]
    d = p[None, :] - X1
    s = np.einsum("ej,ej->e", d, R[:, 0])
    xi = s / L
    o = d - s[:, None] * R[:, 0]
    r = np.linalg.norm(o, axis=1)
    tol = 1e-9 * max(1.0, float(L.max()))
    inside = (xi >= -1e-9) & (xi <= 1 + 1e-9)
    if not inside.any():
        raise ValueError(f"{where}: {p.tolist()} is beyond the ends of every member")
    r_in = np.where(inside, r, np.inf)
    pick = np.flatnonzero(r_in <= r_in.min() + tol)
    ex0 = R[pick[0], 0]
    if np.any(np.abs(R[pick, 0] @ ex0) < 1 - 1e-9):
        raise ValueError(f"{where}: {p.tolist()} is at a joint of members in different "
                         "directions; move the point into one member")
    e0 = pick[0]
    depth = np.sqrt(12.0 * max(el["Iy"][e0], el["Iz"][e0]) / el["A"][e0])
    if r[e0] > depth * (1 + 1e-9):
        raise ValueError(f"{where}: {p.tolist()} is {r[e0]:.3g} m from the nearest member "
                         f"axis, beyond its section (depth ~{depth:.3g} m); give the gauge's "
                         "position on the member's surface")
    timo = el["theory"] == "timoshenko"
    S = np.array([1.0, -1.0, 1.0, -1.0])  # (w, -ry): ry = -dw/dx
    nodes, kinds, coef = [], [], []
    for e in pick:
        Le, E, G, A = el["L"][e], el["E"][e], el["G"][e], el["A"][e]
        # phi = 12 E I / (k G A L^2)   (0 for Euler-Bernoulli)
        phy = 12 * E * el["Iz"][e] / (el["ky"][e] * G * A * Le**2) if timo else 0.0
        phz = 12 * E * el["Iy"][e] / (el["kz"][e] * G * A * Le**2) if timo else 0.0
        y, z = float(o[e] @ R[e, 1]), float(o[e] @ R[e, 2])
        x = float(np.clip(xi[e], 0.0, 1.0))
        B = np.zeros(12)  # local (u, v, w, rx, ry, rz) of node 1, then node 2
        # eps = du/dx - y dtheta_z/dx - z dtheta_y/dx
        B[0], B[6] = -1.0 / Le, 1.0 / Le
        B[[1, 5, 7, 11]] += -y * _dtheta_dx(x, phy, Le)
        B[[2, 4, 8, 10]] += -z * _dtheta_dx(x, phz, Le) * S
        g = np.concatenate([B[3 * b:3 * b + 3] @ R[e] for b in range(4)])  # q_loc = T q
        g *= (E if stress else 1.0) / len(pick)
        nodes += [el["nodes"][e, 0]] * 6 + [el["nodes"][e, 1]] * 6
        kinds += list(range(6)) * 2
        coef += g.tolist()
    return np.array(nodes), np.array(kinds), np.array(coef)


# ------------------------------------------------------------------------------ plate
def plate_row(el: dict, point, surface: str, direction, stress: bool = False,
              where: str = "at"):
    """``(node ids, DOF kinds, coefficients)`` of the surface strain (stress) along the
    in-plane ``direction`` at ``point`` (module docstring)."""
    p = np.asarray(point, float)
    n = np.asarray(direction, float)
    n = n / np.linalg.norm(n)
    if abs(n[2]) > 1e-9:
        raise ValueError(f"{where}: direction {np.round(n, 6).tolist()} is not in the plate's "
                         "plane (its z component must be 0)")
    xy = el["xy"]
    area, grad = _geometry(xy)
    # lam_i(p) = 1/3 + grad lam_i . (p - centroid)
    lam = 1.0 / 3.0 + np.einsum("eij,ej->ei", grad, p[None, :2] - xy.mean(axis=1))
    inside = np.flatnonzero(lam.min(axis=1) >= -1e-9)
    if inside.size == 0:
        raise ValueError(f"{where}: {p.tolist()} is outside the plate")
    if abs(p[2] - el["z"]) > float(el["t"][inside].max()):
        raise ValueError(f"{where}: z = {p[2]:g} m is off the plate's plane z = {el['z']:g} m "
                         "(give the point on the mid-surface and the side with surface)")
    a_e = np.array([n[0] ** 2, n[1] ** 2, n[0] * n[1]])        # eps_nn from (exx, eyy, gxy)
    b_e = np.array([n[0] ** 2, n[1] ** 2, 2 * n[0] * n[1]])    # sigma_nn from (sxx, syy, sxy)
    Tq = np.kron(np.eye(3), _TN)  # (w, bx, by) = Tn (uz, rx, ry) per node
    w = area[inside] / area[inside].sum()
    nodes, kinds, coef = [], [], []
    for e, we in zip(inside, w):
        # kappa = Bb q:  (dbx/dx, dby/dy, dbx/dy + dby/dx),  q = (w, bx, by) per node
        Bb = np.zeros((3, 9))
        Bb[0, 1::3] = grad[e, :, 0]
        Bb[1, 2::3] = grad[e, :, 1]
        Bb[2, 1::3] = grad[e, :, 1]
        Bb[2, 2::3] = grad[e, :, 0]
        zf = SURFACES[surface] * 0.5 * el["t"][e]
        eps = -zf * Bb @ Tq  # (exx, eyy, gxy) at z = zf, over (uz, rx, ry) per node
        if stress:
            E, nu = el["E"][e], el["nu"][e]
            D = E / (1 - nu**2) * np.array([[1, nu, 0], [nu, 1, 0], [0, 0, (1 - nu) / 2]])
            g = b_e @ D @ eps
        else:
            g = a_e @ eps
        nodes += np.repeat(el["nodes"][e], 3).tolist()
        kinds += [2, 3, 4] * 3
        coef += (we * g).tolist()
    return np.array(nodes), np.array(kinds), np.array(coef)


# ------------------------------------------------------------------------------ solid
def _reference_point(name, X, p):
    """Reference coordinates of ``p`` in the element of type ``name`` with nodes ``X``
    (Newton on ``x(xi) = N(xi) X``) and whether it lies inside; ``(xi, inside)``."""
    et = element_type(name)
    xi = et.nodes.mean(axis=0)
    for _ in range(20):
        N, dN = shape_functions(name, xi[None])
        r = p - N[0] @ X
        J = dN[0].T @ X  # J[k, j] = dx_j / dxi_k
        step = np.linalg.solve(J.T, r)
        xi = xi + step
        if np.linalg.norm(step) < 1e-12:
            break
    tol = 1e-9
    if et.shape == "tet":
        inside = bool(xi.min() >= -tol and xi.sum() <= 1 + tol)
    else:
        lo, hi = et.nodes.min(axis=0), et.nodes.max(axis=0)
        inside = bool(np.all(xi >= lo - tol) and np.all(xi <= hi + tol))
    return xi, inside


def solid_row(el: dict, point, direction, stress: bool = False, where: str = "at"):
    """``(node ids, DOF kinds, coefficients)`` of the normal strain (stress) along
    ``direction`` at ``point`` from the B-matrix of the element holding it:
    ``eps_nn = sum_a (n . grad N_a)(n . u_a)``; ``sigma_nn = lam tr(eps) + 2 mu eps_nn``
    (isotropic); a point on a face or an edge takes the mean of its elements."""
    p = np.asarray(point, float)
    n = np.asarray(direction, float)
    n = n / np.linalg.norm(n)
    hits = []
    for name, conn in el["cells"]:
        # candidates: the elements whose bounding box (enlarged by 1e-9) holds the point
        X, ids = el["coords"][conn], el["ids"][conn]
        lo, hi = X.min(axis=1), X.max(axis=1)
        span = float(np.max(hi - lo)) if X.size else 0.0
        cand = np.flatnonzero(np.all((p >= lo - 1e-9 * span) & (p <= hi + 1e-9 * span), axis=1))
        for e in cand:
            xi, inside = _reference_point(name, X[e], p)
            if inside:
                hits.append((name, ids[e], X[e], xi))
    if not hits:
        raise ValueError(f"{where}: {p.tolist()} is outside the solid's elements")
    lam, mu = lame(el["E"], el["nu"])
    nodes, kinds, coef = [], [], []
    for name, ids, X, xi in hits:
        _, dN = shape_functions(name, xi[None])
        G = np.linalg.solve(dN[0].T @ X, dN[0].T).T  # grad N_a = J^-1 dN_a/dxi, (nn, 3)
        g = (G @ n)[:, None] * n[None, :]               # d eps_nn / d u_ai
        if stress:
            g = lam * G + 2 * mu * g
        nodes += np.repeat(ids, 3).tolist()
        kinds += [0, 1, 2] * len(ids)
        coef += (g.ravel() / len(hits)).tolist()
    return np.array(nodes), np.array(kinds), np.array(coef)


# ------------------------------------------------------------------------------ model
def field_probe(model, kind: str, point, surface=None, direction=None, scale: float = 1.0,
                where: str = "at") -> Probe:
    """The :class:`Probe` of a strain/stress output of ``model`` (constrained FEModel).

    DOFs the boundary holds drop out of the row (they are zero).
    """
    el = model.elements
    if el is None:
        raise ValueError(f"{where}: strain/stress at a point needs a beam, plate or solid "
                         "model (this one has no element data: imported matrices, or a solid "
                         "with rigid spiders); give the recovery row instead: row = [[node, "
                         "\"dof\", coefficient], ...]")
    stress = kind == "stress"
    if el["type"] == "beam":
        if direction is not None or surface is not None:
            raise ValueError(f"{where}: a beam's strain is along its axis at the point's "
                             "fibre; remove direction/surface")
        nodes, kinds, coef = beam_row(el, point, stress, where)
    elif el["type"] == "solid":
        if direction is None or surface is not None:
            raise ValueError(f"{where}: a solid's strain needs direction = [x, y, z] (the "
                             "point itself is the gauge's position; remove surface)")
        nodes, kinds, coef = solid_row(el, point, direction, stress, where)
    else:
        if surface not in SURFACES or direction is None:
            raise ValueError(f"{where}: a plate's strain needs surface = \"top\" or "
                             "\"bottom\" and an in-plane direction = [x, y, 0]")
        nodes, kinds, coef = plate_row(el, point, surface, direction, stress, where)
    key = _dof_index(model)
    acc: dict = {}
    for nd, k, c in zip(nodes, kinds, coef):
        _add(acc, key.get((int(nd), int(k))), c, scale)
    return _probe(acc, f"{where}: the strain there reads only held DOFs (always 0)")


def _dof_index(model) -> dict:
    """(node id, kind) -> index among the constrained model's DOFs (held DOFs: absent)."""
    return {(int(a), int(b)): i for i, (a, b) in enumerate(zip(model.dof_node, model.dof_kind))}


def _add(acc: dict, i, c: float, scale: float) -> None:
    """``acc[i] += c scale`` for a free DOF ``i`` (None: held) and a non-zero ``c``."""
    if i is not None and c != 0.0:
        acc[i] = acc.get(i, 0.0) + float(c) * scale


def _probe(acc: dict, empty: str) -> Probe:
    """The :class:`Probe` of the coefficients ``acc`` (DOF index -> coefficient), its DOF the
    largest coefficient's; ``ValueError(empty)`` when no free DOF is read."""
    if not acc:
        raise ValueError(empty)
    idx = np.array(sorted(acc))
    val = np.array([acc[i] for i in idx])
    return Probe(int(idx[np.argmax(np.abs(val))]), idx, val)


def user_probe(model, row, scale: float = 1.0, where: str = "row") -> Probe:
    """The :class:`Probe` of a recovery row given by the user, ``((node, dof name, coefficient
    [1/m or 1/rad]), ...)``: ``eps = sum_i c_i u_i`` (SI strain; ``scale`` to the unit).

    Every (node, dof) must be a DOF of the model's table; a DOF the boundary holds drops out
    (it is zero). ``ValueError`` naming ``where[i]`` for a node or DOF not in the model.
    """
    key = _dof_index(model)
    nodes = set(int(n) for n in np.asarray(model.node_ids).tolist())
    acc: dict = {}
    for i, (node, dof, c) in enumerate(row):
        if not np.isfinite(c):
            raise ValueError(f"{where}[{i}][2] (coefficient): {c!r} is not finite")
        if int(node) not in nodes:
            raise ValueError(f"{where}[{i}][0] (node): node {node} is not in the model")
        _add(acc, key.get((int(node), DOF_NAMES.index(dof))), c, scale)
    return _probe(acc, f"{where}: the row reads only held (or absent) DOFs: always 0")


__all__ = ["Probe", "user_probe", "probe_matrix", "beam_row", "plate_row", "solid_row", "field_probe",
           "SURFACES", "UNITS"]
