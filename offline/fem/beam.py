"""Three-dimensional frame (beam) elements: Euler-Bernoulli and Timoshenko.

Two-node element, six DOFs per node ``(ux, uy, uz, rx, ry, rz)``. In the local frame
(x along the member, y and z the principal axes of the section):

* axial (u): linear, ``k = EA/L``;
* torsion (rx): linear, ``k = GJ/L``, mass ``rho Ip`` with ``Ip = Iy + Iz``;
* bending in x-y (v, rz = dv/dx): stiffness ``E Iz``, shear factor ``ky``;
* bending in x-z (w, ry = -dw/dx): stiffness ``E Iy``, shear factor ``kz``.

The bending parts use the interdependent interpolation of Friedman & Kosmatka (1993, Computers
& Structures 47(3) 473-481), which is exact for a Timoshenko beam under end loads and reduces to
cubic Hermite interpolation for ``phi = 0`` (Euler-Bernoulli). The consistent mass integrates
the same shape functions (4-point Gauss, exact for these degree-6 integrands); Timoshenko
elements include rotary inertia ``rho I``, Euler-Bernoulli elements do not (classical model).

Local orientation: ``orientation`` is a vector in the local x-z plane (roughly local z); the
default is global Z, or global X for members parallel to Z. Local ``y = orientation x x``
normalised, ``z = x x y``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from edge import DOF_NAMES
from offline._deps import progress as _progress
from offline.fem.assembly import assemble, dof_table, node_dofs
from offline.fem.femodel import FEModel
if TYPE_CHECKING:  # the typed specs come from offline.model.elements (which imports this)
    from offline.model.elements import BeamSectionSpec, BeamSpec

#: Beam theories.
THEORIES = ("euler-bernoulli", "timoshenko")


# 4-point Gauss-Legendre rule on [0, 1]: exact for polynomials up to degree 7.
_GX, _GW = np.polynomial.legendre.leggauss(4)
_GX = 0.5 * (_GX + 1.0)
_GW = 0.5 * _GW


# --------------------------------------------------------------------------- sections
@dataclass(frozen=True)
class BeamSection:
    """Cross-section properties of a beam.

    Attributes
    ----------
    A : float
        Area [m^2].
    Iy, Iz : float
        Second moments of area about local y and z [m^4] (``Iy`` resists bending in x-z).
    J : float
        Torsion constant [m^4].
    ky, kz : float
        Shear correction factors for shear along local y and z [-].
    """

    A: float
    Iy: float
    Iz: float
    J: float
    ky: float = 5.0 / 6.0
    kz: float = 5.0 / 6.0

    @property
    def Ip(self) -> float:
        """Polar second moment ``Iy + Iz`` [m^4] (torsional mass moment per rho)."""
        return self.Iy + self.Iz


def rectangle(b: float, h: float, nu: float = 0.3) -> BeamSection:
    """Solid rectangle, width ``b`` along local y and height ``h`` along local z [m].

    Torsion constant from the series approximation (Roark, Table 10.7, case 4):
    ``J = a c^3 [1/3 - 0.21 (c/a) (1 - c^4 / (12 a^4))]``, ``a >= c`` the long/short sides.
    Shear factor of Cowper (1966): ``k = 10 (1 + nu) / (12 + 11 nu)``.
    """
    if not (b > 0 and h > 0):
        raise ValueError(f"rectangle: b and h must be positive, got b={b}, h={h}")
    a, c = max(b, h), min(b, h)
    # J = a c^3 [1/3 - 0.21 (c/a)(1 - c^4/(12 a^4))]
    J = a * c**3 * (1.0 / 3.0 - 0.21 * (c / a) * (1.0 - c**4 / (12.0 * a**4)))
    # k = 10 (1 + nu) / (12 + 11 nu)   (Cowper)
    k = 10.0 * (1.0 + nu) / (12.0 + 11.0 * nu)
    return BeamSection(A=b * h, Iy=b * h**3 / 12.0, Iz=h * b**3 / 12.0, J=J, ky=k, kz=k)


def tube(d: float, t: float | None = None, nu: float = 0.3) -> BeamSection:
    """Circular tube of outer diameter ``d`` and wall ``t`` [m] (``t=None``: solid circle).

    ``I = pi (ro^4 - ri^4) / 4``, ``J = 2 I``; shear factor of Cowper (1966) for a hollow circle,
    ``k = 6 (1+nu)(1+m^2)^2 / ((7+6nu)(1+m^2)^2 + (20+12nu) m^2)``, ``m = ri/ro``.
    """
    ro = 0.5 * d
    ri = 0.0 if t is None else ro - t
    if not (d > 0 and 0.0 <= ri < ro):
        raise ValueError(f"tube: need d > 0 and 0 < t <= d/2, got d={d}, t={t}")
    m2 = (ri / ro) ** 2
    I = np.pi * (ro**4 - ri**4) / 4.0  # noqa: E741
    # k = 6 (1+nu)(1+m^2)^2 / ((7+6 nu)(1+m^2)^2 + (20+12 nu) m^2)   (Cowper)
    k = 6 * (1 + nu) * (1 + m2) ** 2 / ((7 + 6 * nu) * (1 + m2) ** 2 + (20 + 12 * nu) * m2)
    return BeamSection(A=np.pi * (ro**2 - ri**2), Iy=I, Iz=I, J=2.0 * I, ky=k, kz=k)


# --------------------------------------------------------------------- element matrices
def _bending_stiffness(EI, phi, L):
    """Plane bending stiffness, DOFs (w1, t1, w2, t2) with ``t = dw/dx`` (EB limit).

    Returns shape (ne, 4, 4). Przemieniecki (1968), eq. 5.116.
    """
    c = EI / ((1.0 + phi) * L**3)
    L2 = L * L
    K = np.empty(EI.shape + (4, 4))
    # K = EI/((1+phi) L^3) [[12, 6L, -12, 6L], [6L, (4+phi)L^2, -6L, (2-phi)L^2], ...]
    K[:, 0, 0] = 12; K[:, 0, 1] = 6 * L; K[:, 0, 2] = -12; K[:, 0, 3] = 6 * L  # noqa: E702
    K[:, 1, 1] = (4 + phi) * L2; K[:, 1, 2] = -6 * L; K[:, 1, 3] = (2 - phi) * L2  # noqa: E702
    K[:, 2, 2] = 12; K[:, 2, 3] = -6 * L  # noqa: E702
    K[:, 3, 3] = (4 + phi) * L2
    iu = np.triu_indices(4, 1)
    K[:, iu[1], iu[0]] = K[:, iu[0], iu[1]]
    return K * c[:, None, None]


def _shape_functions(xi, phi, L):
    """Interdependent interpolation: ``w = Nw q``, ``theta = Nt q``, q = (w1, t1, w2, t2).

    Parameters
    ----------
    xi : float in [0, 1]
    phi, L : ndarray, shape (ne,)

    Returns
    -------
    Nw, Nt : ndarray, shape (ne, 4)
    """
    mu = 1.0 / (1.0 + phi)
    x2, x3 = xi * xi, xi**3
    Nw = np.stack([
        mu * (2 * x3 - 3 * x2 - phi * xi + 1 + phi),
        L * mu * (x3 - (2 + phi / 2) * x2 + (1 + phi / 2) * xi),
        mu * (-2 * x3 + 3 * x2 + phi * xi),
        L * mu * (x3 - (1 - phi / 2) * x2 - (phi / 2) * xi),
    ], axis=-1)
    Nt = np.stack([
        6 * mu / L * (x2 - xi),
        mu * (3 * x2 - (4 + phi) * xi + 1 + phi),
        -6 * mu / L * (x2 - xi),
        mu * (3 * x2 - (2 - phi) * xi),
    ], axis=-1)
    return Nw, Nt


def _bending_mass(rhoA, rhoI, phi, L):
    """Consistent bending mass ``int (rhoA Nw^T Nw + rhoI Nt^T Nt) dx``, shape (ne, 4, 4)."""
    M = np.zeros(rhoA.shape + (4, 4))
    for xg, wg in zip(_GX, _GW):
        Nw, Nt = _shape_functions(xg, phi, L)
        # M += w_g L (rho A Nw^T Nw + rho I Nt^T Nt)
        M += (wg * L)[:, None, None] * (
            rhoA[:, None, None] * Nw[:, :, None] * Nw[:, None, :]
            + rhoI[:, None, None] * Nt[:, :, None] * Nt[:, None, :]
        )
    return M


def local_axes(X1, X2, orientation=None):
    """Rotation matrices with rows (local x, y, z) in global coordinates.

    Parameters
    ----------
    X1, X2 : ndarray, shape (ne, 3)
        End coordinates [m].
    orientation : ndarray, shape (ne, 3) or (3,), optional
        Vector in the local x-z plane; default global Z (global X for members along Z).

    Returns
    -------
    R : ndarray, shape (ne, 3, 3)
    L : ndarray, shape (ne,)
        Lengths [m].
    """
    d = np.asarray(X2, float) - np.asarray(X1, float)
    L = np.linalg.norm(d, axis=1)
    if np.any(~(L > 0)):
        bad = int(np.flatnonzero(~(L > 0))[0])
        raise ValueError(f"element {bad} has zero length (coincident end nodes)")
    ex = d / L[:, None]
    if orientation is None:
        v = np.tile([0.0, 0.0, 1.0], (ex.shape[0], 1))
        along_z = np.abs(ex[:, 2]) > 1.0 - 1e-9
        v[along_z] = [1.0, 0.0, 0.0]
    else:
        v = np.broadcast_to(np.asarray(orientation, float), ex.shape)
    ey = np.cross(v, ex)
    n = np.linalg.norm(ey, axis=1)
    if np.any(n < 1e-9 * np.maximum(np.linalg.norm(v, axis=1), 1e-300)):
        bad = int(np.flatnonzero(n < 1e-9 * np.linalg.norm(v, axis=1))[0])
        raise ValueError(f"element {bad}: orientation vector is parallel to the member axis")
    ey = ey / n[:, None]
    ez = np.cross(ex, ey)
    return np.stack([ex, ey, ez], axis=1), L


def element_matrices(X1, X2, E, G, rho, sec: BeamSection | list, theory="euler-bernoulli",
                     orientation=None):
    """Global element stiffness and consistent mass of 3-D frame elements.

    Parameters
    ----------
    X1, X2 : ndarray, shape (ne, 3)
        Coordinates of the end nodes [m].
    E, G, rho : float or ndarray (ne,)
        Young's and shear moduli [Pa], density [kg/m^3].
    sec : BeamSection or list of BeamSection (ne)
        Cross-sections.
    theory : {"euler-bernoulli", "timoshenko"}
    orientation : ndarray (3,) or (ne, 3), optional
        See :func:`local_axes`.

    Returns
    -------
    Ke, Me : ndarray, shape (ne, 12, 12)
        DOF order per element ``(ux, uy, uz, rx, ry, rz)`` of node 1, then node 2;
        units N/m, N, N m/rad and kg, kg m, kg m^2.
    """
    if theory not in THEORIES:
        raise ValueError(f"theory: expected one of {THEORIES}, got {theory!r}")
    X1 = np.atleast_2d(np.asarray(X1, float))
    X2 = np.atleast_2d(np.asarray(X2, float))
    ne = X1.shape[0]
    R, L = local_axes(X1, X2, orientation)
    secs = [sec] * ne if isinstance(sec, BeamSection) else list(sec)
    g = lambda name: np.array([getattr(s, name) for s in secs], float)  # noqa: E731
    A, Iy, Iz, J, ky, kz = g("A"), g("Iy"), g("Iz"), g("J"), g("ky"), g("kz")
    E = np.broadcast_to(np.asarray(E, float), (ne,))
    G = np.broadcast_to(np.asarray(G, float), (ne,))
    rho = np.broadcast_to(np.asarray(rho, float), (ne,))

    timo = theory == "timoshenko"
    # phi = 12 E I / (k G A L^2)   (shear flexibility; 0 for Euler-Bernoulli)
    phi_y = 12 * E * Iz / (ky * G * A * L**2) if timo else np.zeros(ne)
    phi_z = 12 * E * Iy / (kz * G * A * L**2) if timo else np.zeros(ne)
    rot = 1.0 if timo else 0.0

    Kl = np.zeros((ne, 12, 12))
    Ml = np.zeros((ne, 12, 12))
    bar = np.array([[1.0, -1.0], [-1.0, 1.0]])
    bar_m = np.array([[2.0, 1.0], [1.0, 2.0]]) / 6.0
    ix = np.ix_(range(ne), [0, 6], [0, 6])
    # axial: K = EA/L [[1,-1],[-1,1]], M = rho A L/6 [[2,1],[1,2]]
    Kl[ix] = (E * A / L)[:, None, None] * bar
    Ml[ix] = (rho * A * L)[:, None, None] * bar_m
    it = np.ix_(range(ne), [3, 9], [3, 9])
    # torsion: K = GJ/L [[1,-1],[-1,1]], M = rho Ip L/6 [[2,1],[1,2]]
    Kl[it] = (G * J / L)[:, None, None] * bar
    Ml[it] = (rho * (Iy + Iz) * L)[:, None, None] * bar_m
    # bending in x-y: (v1, rz1, v2, rz2), rz = dv/dx
    iy = np.ix_(range(ne), [1, 5, 7, 11], [1, 5, 7, 11])
    Kl[iy] = _bending_stiffness(E * Iz, phi_y, L)
    Ml[iy] = _bending_mass(rho * A, rot * rho * Iz, phi_y, L)
    # bending in x-z: (w1, ry1, w2, ry2), ry = -dw/dx  ->  S K S with S = diag(1,-1,1,-1)
    S = np.array([1.0, -1.0, 1.0, -1.0])
    SS = S[:, None] * S[None, :]
    iz = np.ix_(range(ne), [2, 4, 8, 10], [2, 4, 8, 10])
    Kl[iz] = _bending_stiffness(E * Iy, phi_z, L) * SS
    Ml[iz] = _bending_mass(rho * A, rot * rho * Iy, phi_z, L) * SS

    # T = blockdiag(R, R, R, R);  K = T^T K_local T
    T = np.zeros((ne, 12, 12))
    for b in range(4):
        T[:, 3 * b:3 * b + 3, 3 * b:3 * b + 3] = R
    Ke = np.einsum("eji,ejk,ekl->eil", T, Kl, T)
    Me = np.einsum("eji,ejk,ekl->eil", T, Ml, T)
    return Ke, Me


# ------------------------------------------------------------------------- assembly
def beam_model(coords, node_ids, conn, E, G, rho, sections, theory="euler-bernoulli",
               orientation=None, groups=None, name="beam") -> FEModel:
    """Unconstrained :class:`FEModel` of a frame.

    Parameters
    ----------
    coords : ndarray, shape (n_nodes, 3)
        Node coordinates [m].
    node_ids : ndarray of int, shape (n_nodes,)
    conn : ndarray of int, shape (ne, 2)
        Element end nodes as *rows* of ``coords``.
    E, G, rho : float or ndarray (ne,)
    sections : BeamSection or list of BeamSection (ne)
    theory : {"euler-bernoulli", "timoshenko"}
    orientation : ndarray (3,) or (ne, 3), optional
    groups : dict of str -> node ids, optional
    """
    coords = np.asarray(coords, float)
    conn = np.asarray(conn, np.int64)
    Ke, Me = element_matrices(coords[conn[:, 0]], coords[conn[:, 1]], E, G, rho, sections,
                              theory, orientation)
    n = coords.shape[0] * 6
    K, M = assemble(n, node_dofs(conn, 6), Ke, Me, centroids=coords[conn].mean(axis=1))
    dof_node, dof_kind = dof_table(node_ids, range(6))
    model = FEModel(coords=coords, node_ids=np.asarray(node_ids, np.int64), dof_node=dof_node,
                    dof_kind=dof_kind, M=M, K=K, groups=dict(groups or {}), name=name)
    model.n_elements = int(conn.shape[0])  # informational (inspect); not kept by constrain()
    # what a strain output needs (offline.fem.strain): ends, axes, section, material, theory
    ne = conn.shape[0]
    secs = [sections] * ne if isinstance(sections, BeamSection) else list(sections)
    R, L = local_axes(coords[conn[:, 0]], coords[conn[:, 1]], orientation)
    g = lambda name: np.array([getattr(sc, name) for sc in secs], float)  # noqa: E731
    model.elements = {"type": "beam", "nodes": np.asarray(node_ids, np.int64)[conn],
                      "X1": coords[conn[:, 0]], "R": R, "L": L,
                      "E": np.broadcast_to(np.asarray(E, float), (ne,)).copy(),
                      "G": np.broadcast_to(np.asarray(G, float), (ne,)).copy(),
                      "A": g("A"), "Iy": g("Iy"), "Iz": g("Iz"), "ky": g("ky"), "kz": g("kz"),
                      "theory": theory}
    return model


# ----------------------------------------------------------------- model-file builder
def section_of(ss: BeamSectionSpec) -> BeamSection:
    """Section properties of a parsed ``[beam.sections.<name>]`` table."""
    kind, *v = ss.shape
    if kind == "rectangle":
        sec = rectangle(v[0], v[1], ss.material.nu)
    elif kind == "tube":
        sec = tube(v[0], v[1], ss.material.nu)
    else:
        sec = BeamSection(*v)
    if ss.shear_factor is not None:
        sec = BeamSection(sec.A, sec.Iy, sec.Iz, sec.J, *ss.shear_factor)
    return sec


def build_beam(spec: BeamSpec, progress: bool = False) -> FEModel:
    """Unconstrained frame model of a ``[beam]`` table (:func:`offline.model.elements.parse_beam`).

    Members given as ``line`` are divided into ``n`` elements; nodes at coincident points
    (within 1e-9 of the model size) are shared, new ones numbered above the largest id.
    A named member becomes a node group.
    """
    coords = [np.asarray(xyz, float) for _, xyz in spec.nodes]
    node_ids = [nid for nid, _ in spec.nodes]
    id_row = {n: r for r, n in enumerate(node_ids)}
    scale = max([1.0] + [float(np.abs(p).max()) for p in coords]
                + [float(np.abs(np.asarray(m.line[:2])).max()) for m in spec.members if m.line])

    def node_for(p):
        """Row of a node at p (reuse coincident nodes), creating it if needed."""
        if coords:
            d = np.linalg.norm(np.asarray(coords) - p, axis=1)
            i = int(np.argmin(d))
            if d[i] <= 1e-9 * scale:
                return i
        coords.append(p)
        node_ids.append(max(node_ids, default=0) + 1)
        return len(coords) - 1

    conn, esec, emat, eori, groups = [], [], [], [], {}
    for m in spec.members:
        if m.line is not None:
            a, b, n = np.asarray(m.line[0], float), np.asarray(m.line[1], float), m.line[2]
            rows = [node_for(a + (b - a) * k / n) for k in range(n + 1)]
            elems = [(rows[k], rows[k + 1]) for k in range(n)]
        else:
            elems = [(id_row[e[0]], id_row[e[1]]) for e in m.elements]
            rows = [r for e in elems for r in e]
        ss = spec.sections[m.section]
        conn += elems
        esec += [section_of(ss)] * len(elems)
        emat += [ss.material] * len(elems)
        eori += [m.orientation] * len(elems)
        if m.name is not None:
            groups[m.name] = np.unique(np.asarray(node_ids, np.int64)[rows])
    coords = np.asarray(coords, float)
    conn = np.asarray(conn, np.int64)
    E = np.array([mt.E for mt in emat])
    rho = np.array([mt.rho for mt in emat])
    # G = E / (2 (1 + nu))
    G = E / (2.0 * (1.0 + np.array([mt.nu for mt in emat])))
    # default orientation resolved per element (local z of the default axes)
    R0, _ = local_axes(coords[conn[:, 0]], coords[conn[:, 1]], None)
    ori = np.array([R0[e, 2] if o is None else o for e, o in enumerate(eori)])
    with _progress(total=1, desc="beam elements", enable=progress) as bar:
        model = beam_model(coords, np.asarray(node_ids, np.int64), conn, E, G, rho, esec,
                           spec.theory, ori, groups, name="beam")
        bar.update(1)
    return model


__all__ = ["BeamSection", "rectangle", "tube", "element_matrices", "local_axes", "beam_model",
           "build_beam", "section_of", "THEORIES", "DOF_NAMES"]
