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
from pathlib import Path

import numpy as np

from edge import DOF_NAMES
from offline._deps import progress as _progress
from offline.fem.assembly import assemble, dof_table, node_dofs
from offline.fem.femodel import FEModel

#: Theories accepted by the builder.
THEORIES = ("euler-bernoulli", "timoshenko")

# 4-point Gauss-Legendre rule on [0, 1]: exact for polynomials up to degree 7.
_GX, _GW = np.polynomial.legendre.leggauss(4)
_GX = 0.5 * (_GX + 1.0)
_GW = 0.5 * _GW


#: Upper bound on the elements of one member (a model file asking for more is a mistake
#: or an attack on the workstation's memory).
MAX_ELEMENTS = 1_000_000


class BeamInputError(ValueError):
    """A beam section or member is invalid (the message names the key)."""


# --------------------------------------------------------------------------- sections
@dataclass(frozen=True)
class Section:
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


def rectangle(b: float, h: float, nu: float = 0.3) -> Section:
    """Solid rectangle, width ``b`` along local y and height ``h`` along local z [m].

    Torsion constant from the series approximation (Roark, Table 10.7, case 4):
    ``J = a c^3 [1/3 - 0.21 (c/a) (1 - c^4 / (12 a^4))]``, ``a >= c`` the long/short sides.
    Shear factor of Cowper (1966): ``k = 10 (1 + nu) / (12 + 11 nu)``.
    """
    if not (b > 0 and h > 0):
        raise BeamInputError(f"rectangle: b and h must be positive, got b={b}, h={h}")
    a, c = max(b, h), min(b, h)
    # J = a c^3 [1/3 - 0.21 (c/a)(1 - c^4/(12 a^4))]
    J = a * c**3 * (1.0 / 3.0 - 0.21 * (c / a) * (1.0 - c**4 / (12.0 * a**4)))
    # k = 10 (1 + nu) / (12 + 11 nu)   (Cowper)
    k = 10.0 * (1.0 + nu) / (12.0 + 11.0 * nu)
    return Section(A=b * h, Iy=b * h**3 / 12.0, Iz=h * b**3 / 12.0, J=J, ky=k, kz=k)


def tube(d: float, t: float | None = None, nu: float = 0.3) -> Section:
    """Circular tube of outer diameter ``d`` and wall ``t`` [m] (``t=None``: solid circle).

    ``I = pi (ro^4 - ri^4) / 4``, ``J = 2 I``; shear factor of Cowper (1966) for a hollow circle,
    ``k = 6 (1+nu)(1+m^2)^2 / ((7+6nu)(1+m^2)^2 + (20+12nu) m^2)``, ``m = ri/ro``.
    """
    ro = 0.5 * d
    ri = 0.0 if t is None else ro - t
    if not (d > 0 and 0.0 <= ri < ro):
        raise BeamInputError(f"tube: need d > 0 and 0 < t <= d/2, got d={d}, t={t}")
    m2 = (ri / ro) ** 2
    I = np.pi * (ro**4 - ri**4) / 4.0  # noqa: E741
    # k = 6 (1+nu)(1+m^2)^2 / ((7+6 nu)(1+m^2)^2 + (20+12 nu) m^2)   (Cowper)
    k = 6 * (1 + nu) * (1 + m2) ** 2 / ((7 + 6 * nu) * (1 + m2) ** 2 + (20 + 12 * nu) * m2)
    return Section(A=np.pi * (ro**2 - ri**2), Iy=I, Iz=I, J=2.0 * I, ky=k, kz=k)


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
        raise BeamInputError(f"element {bad} has zero length (coincident end nodes)")
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
        raise BeamInputError(f"element {bad}: orientation vector is parallel to the member axis")
    ey = ey / n[:, None]
    ez = np.cross(ex, ey)
    return np.stack([ex, ey, ez], axis=1), L


def element_matrices(X1, X2, E, G, rho, sec: Section | list, theory="euler-bernoulli",
                     orientation=None):
    """Global element stiffness and consistent mass of 3-D frame elements.

    Parameters
    ----------
    X1, X2 : ndarray, shape (ne, 3)
        Coordinates of the end nodes [m].
    E, G, rho : float or ndarray (ne,)
        Young's and shear moduli [Pa], density [kg/m^3].
    sec : Section or list of Section (ne)
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
        raise BeamInputError(f"theory: expected one of {THEORIES}, got {theory!r}")
    X1 = np.atleast_2d(np.asarray(X1, float))
    X2 = np.atleast_2d(np.asarray(X2, float))
    ne = X1.shape[0]
    R, L = local_axes(X1, X2, orientation)
    secs = [sec] * ne if isinstance(sec, Section) else list(sec)
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
    sections : Section or list of Section (ne)
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
    return model


# ----------------------------------------------------------------- model-file builder
_SECTION_KEYS = {"material", "A", "Iy", "Iz", "J", "shear_factor", "rectangle", "tube"}
_MEMBER_KEYS = {"name", "section", "line", "elements", "orientation"}
_BEAM_KEYS = {"theory", "nodes", "sections", "members"}


def _num(v, where, positive=True):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise BeamInputError(f"{where}: expected a number, got {type(v).__name__} {v!r}")
    v = float(v)
    if not np.isfinite(v) or (positive and v <= 0):
        raise BeamInputError(f"{where}: expected a positive finite number, got {v!r}")
    return v


def _point(v, where):
    if not (isinstance(v, list) and len(v) == 3):
        raise BeamInputError(f"{where}: expected a point [x, y, z]")
    return np.array([_num(c, f"{where}[{i}]", positive=False) for i, c in enumerate(v)])


def _unknown(d, allowed, where):
    bad = sorted(set(d) - set(allowed))
    if bad:
        raise BeamInputError(f"{where}.{bad[0]}: unknown key (allowed: {', '.join(sorted(allowed))})")


def section_from_dict(d: dict, material, where: str) -> Section:
    """Section from a ``[beam.sections.<name>]`` table (A/Iy/Iz/J, ``rectangle``, ``tube``)."""
    if not isinstance(d, dict):
        raise BeamInputError(f"{where}: expected a table")
    _unknown(d, _SECTION_KEYS, where)
    nu = material.nu
    forms = [k for k in ("rectangle", "tube", "A") if k in d]
    if len(forms) != 1:
        raise BeamInputError(f"{where}: give exactly one of A (with Iy, Iz, J), rectangle, tube")
    if "rectangle" in d:
        r = d["rectangle"]
        if not isinstance(r, dict):
            raise BeamInputError(f"{where}.rectangle: expected a table {{b = .., h = ..}}")
        _unknown(r, {"b", "h"}, f"{where}.rectangle")
        for k in ("b", "h"):
            if k not in r:
                raise BeamInputError(f"{where}.rectangle.{k}: missing")
        sec = rectangle(_num(r["b"], f"{where}.rectangle.b"), _num(r["h"], f"{where}.rectangle.h"), nu)
    elif "tube" in d:
        r = d["tube"]
        if not isinstance(r, dict):
            raise BeamInputError(f"{where}.tube: expected a table {{d = .., t = ..}}")
        _unknown(r, {"d", "t"}, f"{where}.tube")
        if "d" not in r:
            raise BeamInputError(f"{where}.tube.d: missing")
        dd = _num(r["d"], f"{where}.tube.d")
        t = _num(r["t"], f"{where}.tube.t") if "t" in r else None
        if t is not None and t > dd / 2:
            raise BeamInputError(f"{where}.tube.t: wall {t} exceeds d/2 = {dd / 2}")
        sec = tube(dd, t, nu)
    else:
        vals = {}
        for k in ("A", "Iy", "Iz", "J"):
            if k not in d:
                raise BeamInputError(f"{where}.{k}: missing (needed with A)")
            vals[k] = _num(d[k], f"{where}.{k}")
        sec = Section(**vals)
    if "shear_factor" in d:
        sf = d["shear_factor"]
        if isinstance(sf, list):
            if len(sf) != 2:
                raise BeamInputError(f"{where}.shear_factor: expected k or [ky, kz]")
            ky, kz = (_num(s, f"{where}.shear_factor[{i}]") for i, s in enumerate(sf))
        else:
            ky = kz = _num(sf, f"{where}.shear_factor")
        sec = Section(sec.A, sec.Iy, sec.Iz, sec.J, ky, kz)
    return sec


def build_beam(section: dict, materials: dict, base_dir: Path, where: str,
               progress: bool = False) -> FEModel:
    """Builder for ``type = "beam"`` (signature of docs/ARCHITECTURE.md).

    Schema (see docs/modelfile.md)::

        [beam]
        theory = "timoshenko"                   # or "euler-bernoulli" (default)
        nodes = [[1, 0.0, 0.0, 0.0], ...]       # optional explicit nodes [id, x, y, z]
        [beam.sections.main]
        material = "steel"
        rectangle = { b = 0.02, h = 0.01 }      # or tube = {d, t} or A, Iy, Iz, J
        [[beam.members]]
        name = "span"                           # optional: becomes a node group
        section = "main"
        line = { start = [0,0,0], end = [1,0,0], n = 20 }   # or elements = [[1, 2], ...]
        orientation = [0, 0, 1]                 # optional, vector in the local x-z plane
    """
    _unknown(section, _BEAM_KEYS, where)
    theory = section.get("theory", "euler-bernoulli")
    if theory not in THEORIES:
        raise BeamInputError(f"{where}.theory: expected one of {', '.join(THEORIES)}, got {theory!r}")

    # sections
    secs_raw = section.get("sections")
    if not isinstance(secs_raw, dict) or not secs_raw:
        raise BeamInputError(f"{where}.sections: expected at least one [beam.sections.<name>] table")
    secs, mats = {}, {}
    for sname, sd in secs_raw.items():
        w = f"{where}.sections.{sname}"
        if not isinstance(sd, dict):
            raise BeamInputError(f"{w}: expected a table")
        mname = sd.get("material")
        if not isinstance(mname, str):
            raise BeamInputError(f"{w}.material: missing or not a string")
        if mname not in materials:
            raise BeamInputError(f"{w}.material: unknown material {mname!r} (defined: "
                                 f"{', '.join(sorted(materials)) or 'none'})")
        mats[sname] = materials[mname]
        secs[sname] = section_from_dict(sd, materials[mname], w)

    # explicit nodes
    ids, xyz = [], []
    for i, row in enumerate(section.get("nodes", [])):
        w = f"{where}.nodes[{i}]"
        if not (isinstance(row, list) and len(row) == 4 and isinstance(row[0], int)
                and not isinstance(row[0], bool)):
            raise BeamInputError(f"{w}: expected [id, x, y, z] with an integer id")
        ids.append(row[0])
        xyz.append(_point(row[1:], w))
    if len(set(ids)) != len(ids):
        raise BeamInputError(f"{where}.nodes: duplicate node ids")
    coords = list(xyz)
    node_ids = list(ids)
    id_row = {n: r for r, n in enumerate(node_ids)}
    scale = max([1.0] + [float(np.abs(p).max()) for p in coords])

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

    members = section.get("members")
    if not isinstance(members, list) or not members:
        raise BeamInputError(f"{where}.members: expected at least one [[beam.members]] entry")
    conn, esec, eori, groups = [], [], [], {}
    for j, m in enumerate(members):
        w = f"{where}.members[{j}]"
        if not isinstance(m, dict):
            raise BeamInputError(f"{w}: expected a table")
        _unknown(m, _MEMBER_KEYS, w)
        sname = m.get("section")
        if not isinstance(sname, str) or sname not in secs:
            raise BeamInputError(f"{w}.section: unknown section {sname!r} (defined: "
                                 f"{', '.join(sorted(secs))})")
        ori = _point(m["orientation"], f"{w}.orientation") if "orientation" in m else None
        rows = []
        if ("line" in m) == ("elements" in m):
            raise BeamInputError(f"{w}: give exactly one of line or elements")
        if "line" in m:
            ln = m["line"]
            if not isinstance(ln, dict):
                raise BeamInputError(f"{w}.line: expected {{start, end, n}}")
            _unknown(ln, {"start", "end", "n"}, f"{w}.line")
            for k in ("start", "end", "n"):
                if k not in ln:
                    raise BeamInputError(f"{w}.line.{k}: missing")
            a, b = _point(ln["start"], f"{w}.line.start"), _point(ln["end"], f"{w}.line.end")
            n = ln["n"]
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise BeamInputError(f"{w}.line.n: expected an integer >= 1, got {n!r}")
            if n > MAX_ELEMENTS:
                raise BeamInputError(f"{w}.line.n: {n} elements; at most {MAX_ELEMENTS:,} "
                                     "(a reduced model needs far fewer)")
            scale = max(scale, float(np.abs(a).max()), float(np.abs(b).max()))
            pts = [node_for(a + (b - a) * k / n) for k in range(n + 1)]
            elems = [(pts[k], pts[k + 1]) for k in range(n)]
            rows = pts
        else:
            el = m["elements"]
            if not isinstance(el, list) or not el:
                raise BeamInputError(f"{w}.elements: expected a list of [node, node] pairs")
            elems = []
            for k, e in enumerate(el):
                if not (isinstance(e, list) and len(e) == 2):
                    raise BeamInputError(f"{w}.elements[{k}]: expected [node, node]")
                for nid in e:
                    if nid not in id_row:
                        raise BeamInputError(f"{w}.elements[{k}]: node {nid!r} is not in {where}.nodes")
                elems.append((id_row[e[0]], id_row[e[1]]))
                rows += [id_row[e[0]], id_row[e[1]]]
        for e in elems:
            if e[0] == e[1]:
                raise BeamInputError(f"{w}: element with identical end nodes")
        conn += elems
        esec += [secs[sname]] * len(elems)
        eori += [ori] * len(elems)
        if "name" in m:
            if not isinstance(m["name"], str):
                raise BeamInputError(f"{w}.name: expected a string")
            groups[m["name"]] = np.unique(np.asarray(node_ids, np.int64)[rows])

    coords = np.asarray(coords, float)
    conn = np.asarray(conn, np.int64)
    ne = conn.shape[0]
    # per-element materials and orientation (default orientation resolved per element)
    mat_e = []
    for m in members:
        cnt = m["line"]["n"] if "line" in m else len(m["elements"])
        mat_e += [mats[m["section"]]] * cnt
    E = np.array([mt.E for mt in mat_e])
    nu = np.array([mt.nu for mt in mat_e])
    rho = np.array([mt.rho for mt in mat_e])
    # G = E / (2 (1 + nu))
    G = E / (2.0 * (1.0 + nu))
    R0, _ = local_axes(coords[conn[:, 0]], coords[conn[:, 1]], None)
    ori = np.array([R0[e, 2] if eori[e] is None else eori[e] for e in range(ne)])
    bar = _progress(total=1, desc="beam elements", enable=progress)
    model = beam_model(coords, np.asarray(node_ids, np.int64), conn, E, G, rho, esec, theory,
                       ori, groups, name="beam")
    bar.update(1)
    bar.close()
    return model


__all__ = ["Section", "rectangle", "tube", "element_matrices", "local_axes", "beam_model",
           "build_beam", "section_from_dict", "BeamInputError", "THEORIES", "DOF_NAMES"]
