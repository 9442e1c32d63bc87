"""Three-dimensional linear isotropic solid elements: tet4, tet10, hex8, hex20, hex27.

Three DOFs per node ``(ux, uy, uz)``. Isoparametric elements, node order of meshio (= VTK):

* ``tetra`` (tet4) and ``tetra10``: reference tetrahedron with corners (0,0,0), (1,0,0),
  (0,1,0), (0,0,1); mid-edge nodes on edges (0,1), (1,2), (2,0), (0,3), (1,3), (2,3).
* ``hexahedron`` (hex8), ``hexahedron20`` (serendipity), ``hexahedron27`` (Lagrange):
  reference cube [-1, 1]^3; mid-edge nodes on edges (0,1), (1,2), (2,3), (3,0), (4,5), (5,6),
  (6,7), (7,4), (0,4), (1,5), (2,6), (3,7); hex27 adds the face centres
  xi-, xi+, eta-, eta+, zeta-, zeta+ and the body centre.

Shape functions are built once per element type from the element's polynomial space (a list
of monomials) and its reference nodes: ``N(xi) = p(xi)^T V^-1`` with the Vandermonde matrix
``V_ij = p_j(xi_i)``, so ``N_a(xi_b) = delta_ab`` by construction (checked in the tests).

Element matrices are integrated for all elements of a type at once (numpy batched matmul):

    K_e[a i, b j] = sum_q w_q |J_q| ( lambda dN_a/dx_i dN_b/dx_j + mu dN_a/dx_j dN_b/dx_i
                                      + mu delta_ij grad N_a . grad N_b )
    M_e[a i, b j] = sum_q w_q |J_q| rho N_a N_b delta_ij          (consistent mass)

Quadrature: Gauss-Legendre tensor rules on hexahedra; collapsed (Stroud conical product,
Gauss-Jacobi) rules on tetrahedra, exact for the polynomial degree of each integrand on
straight-sided elements.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from typing import TYPE_CHECKING

import numpy as np

from offline._deps import need
from offline._deps import progress as _progress
from offline.fem.assembly import assemble, dof_table, node_dofs
from offline.fem.femodel import FEModel
from offline.fem.mesh import read_mesh
from offline.fem.mpc import add_spiders, spider_of

if TYPE_CHECKING:  # the typed spec comes from offline.model.elements (which imports this)
    from offline.model.elements import SolidSpec


# --------------------------------------------------------------------------- element library
_HEX_CORNERS = [(-1, -1, -1), (1, -1, -1), (1, 1, -1), (-1, 1, -1),
                (-1, -1, 1), (1, -1, 1), (1, 1, 1), (-1, 1, 1)]
_HEX_EDGES = [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4),
              (0, 4), (1, 5), (2, 6), (3, 7)]
_HEX_FACES = [(-1, 0, 0), (1, 0, 0), (0, -1, 0), (0, 1, 0), (0, 0, -1), (0, 0, 1)]
_TET_CORNERS = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
_TET_EDGES = [(0, 1), (1, 2), (2, 0), (0, 3), (1, 3), (2, 3)]


def _mid(corners, edges):
    c = np.asarray(corners, dtype=float)
    return [tuple(0.5 * (c[a] + c[b])) for a, b in edges]


def _monomials(kind: str) -> list[tuple[int, int, int]]:
    """Exponents (i, j, k) of x^i y^j z^k spanning the element's polynomial space."""
    if kind == "P1":
        return [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]
    if kind == "P2":
        return [e for e in product(range(3), repeat=3) if sum(e) <= 2]
    if kind == "Q1":
        return list(product(range(2), repeat=3))
    if kind == "Q2":
        return list(product(range(3), repeat=3))
    if kind == "S2":  # serendipity: Q2 monomials with at most one squared variable
        return [e for e in product(range(3), repeat=3) if sum(p == 2 for p in e) <= 1]
    raise ValueError(kind)


@dataclass(frozen=True)
class ElementType:
    """Reference data of one element type.

    Attributes
    ----------
    name : str
        meshio cell type name (``"tetra10"``, ``"hexahedron20"``, ...).
    nodes : ndarray, shape (nn, 3)
        Reference coordinates of the element nodes in meshio order.
    space : str
        Polynomial space, one of P1, P2 (tetrahedra), Q1, S2, Q2 (hexahedra).
    shape : str
        ``"tet"`` or ``"hex"``.
    n_linear : int
        Number of corner nodes (4 or 8).
    """

    name: str
    nodes: np.ndarray
    space: str
    shape: str
    n_linear: int
    degree: int  # polynomial degree per coordinate of the shape functions

    @property
    def n_nodes(self) -> int:
        return int(self.nodes.shape[0])


def _make_types() -> dict[str, ElementType]:
    hc, tc = list(_HEX_CORNERS), list(_TET_CORNERS)
    hex20 = hc + _mid(hc, _HEX_EDGES)
    hex27 = hex20 + _HEX_FACES + [(0, 0, 0)]
    tet10 = tc + _mid(tc, _TET_EDGES)
    mk = lambda name, pts, sp, sh, d: ElementType(  # noqa: E731
        name, np.asarray(pts, dtype=float), sp, sh, 4 if sh == "tet" else 8, d)
    types = [mk("tetra", tc, "P1", "tet", 1), mk("tetra10", tet10, "P2", "tet", 2),
             mk("hexahedron", hc, "Q1", "hex", 1), mk("hexahedron20", hex20, "S2", "hex", 2),
             mk("hexahedron27", hex27, "Q2", "hex", 2)]
    return {t.name: t for t in types}


#: Supported volume cell types (meshio names).
ELEMENT_TYPES: dict[str, ElementType] = _make_types()
#: Short aliases accepted by :func:`element_type`.
ALIASES = {"tet4": "tetra", "tet10": "tetra10", "hex8": "hexahedron", "hex20": "hexahedron20",
           "hex27": "hexahedron27"}


def element_type(name: str) -> ElementType:
    """Element type by meshio name or alias (tet4, tet10, hex8, hex20, hex27)."""
    key = ALIASES.get(name, name)
    if key not in ELEMENT_TYPES:
        raise ValueError(
            f"unsupported solid cell type {name!r}; supported: "
            f"{', '.join(list(ELEMENT_TYPES) + list(ALIASES))}")
    return ELEMENT_TYPES[key]


@lru_cache(maxsize=None)
def _coefficients(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Monomial exponents E (nm, 3) and C = V^-1 (nm, nn) so that N(x) = p(x) @ C."""
    et = ELEMENT_TYPES[name]
    E = np.asarray(_monomials(et.space), dtype=int)
    if E.shape[0] != et.n_nodes:
        raise AssertionError(f"{name}: {E.shape[0]} monomials for {et.n_nodes} nodes")
    # V_ij = p_j(xi_i)
    V = np.prod(et.nodes[:, None, :] ** E[None, :, :], axis=2)
    return E, np.linalg.inv(V)


def shape_functions(name: str, xi) -> tuple[np.ndarray, np.ndarray]:
    """Shape functions and their reference derivatives.

    Parameters
    ----------
    name : str
        Element type (meshio name or alias).
    xi : array_like, shape (nq, 3)
        Reference coordinates.

    Returns
    -------
    N : ndarray, shape (nq, nn)
    dN : ndarray, shape (nq, nn, 3)
        ``dN[q, a, k] = dN_a / dxi_k`` at point q.
    """
    et = element_type(name)
    E, C = _coefficients(et.name)
    xi = np.atleast_2d(np.asarray(xi, dtype=float))
    P = np.prod(xi[:, None, :] ** E[None, :, :], axis=2)  # (nq, nm)
    dP = np.empty(P.shape + (3,))
    for k in range(3):
        Ek = E.copy()
        fac = Ek[:, k].astype(float)
        Ek[:, k] = np.maximum(Ek[:, k] - 1, 0)
        # d/dxi_k xi_k^e = e xi_k^(e-1)
        dP[:, :, k] = fac * np.prod(xi[:, None, :] ** Ek[None, :, :], axis=2)
    return P @ C, np.einsum("qmk,ma->qak", dP, C)


@lru_cache(maxsize=None)
def quadrature(shape: str, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature points (nq, 3) and weights (nq,) exact for polynomials of ``degree``.

    Hexahedra: Gauss-Legendre tensor rule on [-1, 1]^3 (exact per coordinate). Tetrahedra:
    Stroud conical product on the unit tetrahedron, ``z = c, y = b (1 - c), x = a (1 - b)
    (1 - c)`` with Gauss-Jacobi weights ``(1 - c)^2`` and ``(1 - b)``, exact for total degree.
    """
    n = max(1, (degree + 2) // 2)  # n-point Gauss rules are exact to degree 2n - 1
    if shape == "hex":
        g, w = np.polynomial.legendre.leggauss(n)
        pts = np.array(list(product(g, g, g)))
        wts = np.array([a * b * c for a, b, c in product(w, w, w)])
        return pts, wts
    sps = need("scipy.special")
    ga, wa = np.polynomial.legendre.leggauss(n)
    gb, wb = sps.roots_jacobi(n, 1.0, 0.0)
    gc, wc = sps.roots_jacobi(n, 2.0, 0.0)
    # map [-1, 1] -> [0, 1]: weight (1 - t)^alpha on [-1,1] becomes 2^(alpha+1) (1 - s)^alpha ds
    a, wa = 0.5 * (ga + 1.0), wa / 2.0
    b, wb = 0.5 * (gb + 1.0), wb / 4.0
    c, wc = 0.5 * (gc + 1.0), wc / 8.0
    pts, wts = [], []
    for (ai, wai), (bi, wbi), (ci, wci) in product(zip(a, wa), zip(b, wb), zip(c, wc)):
        pts.append((ai * (1 - bi) * (1 - ci), bi * (1 - ci), ci))
        wts.append(wai * wbi * wci)
    return np.asarray(pts), np.asarray(wts)


def lame(E: float, nu: float) -> tuple[float, float]:
    """Lame constants (lambda, mu) [Pa] of an isotropic material."""
    # lambda = E nu / ((1 + nu)(1 - 2 nu)),  mu = E / (2 (1 + nu))
    lam = E * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
    mu = E / (2.0 * (1.0 + nu))
    return lam, mu


def _check_material(E, nu, rho):
    if not (np.isfinite(E) and E > 0):
        raise ValueError(f"material: Young's modulus E must be finite and > 0, got {E!r}")
    if not (np.isfinite(nu) and -1.0 < nu < 0.5):
        raise ValueError(f"material: Poisson ratio nu must lie in (-1, 0.5), got {nu!r}")
    if not (np.isfinite(rho) and rho >= 0):
        raise ValueError(f"material: density rho must be finite and >= 0, got {rho!r}")


def element_matrices(name: str, X, E: float, nu: float, rho: float, chunk: int = 4096,
                     bar=None) -> tuple[np.ndarray, np.ndarray]:
    """Stiffness and consistent mass of many elements of one type.

    Parameters
    ----------
    name : str
        Element type (meshio name or alias).
    X : ndarray, shape (ne, nn, 3)
        Node coordinates of each element [m].
    E, nu, rho : float
        Young's modulus [Pa], Poisson ratio [-], density [kg/m^3].
    chunk : int
        Elements integrated per batch (bounds the temporary memory).
    bar : progress bar, optional
        ``bar.update(m)`` is called after each batch of ``m`` elements.

    Returns
    -------
    Ke, Me : ndarray, shape (ne, 3 nn, 3 nn)
        DOF order ``[ux_0, uy_0, uz_0, ux_1, ...]``; [N/m] and [kg].
    """
    et = element_type(name)
    _check_material(E, nu, rho)
    X = np.asarray(X, dtype=float)
    if X.ndim != 3 or X.shape[1:] != (et.n_nodes, 3):
        raise ValueError(f"{et.name}: element coordinates must have shape (ne, "
                              f"{et.n_nodes}, 3), got {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{et.name}: element coordinates contain NaN or inf")
    ne, nn = X.shape[0], et.n_nodes
    nd = 3 * nn
    lam, mu = lame(E, nu)
    # Integrand degrees on straight-sided elements: tetrahedra (total degree) K 2(p-1),
    # M 2p; hexahedra (per coordinate) K and M 2p.
    qk = quadrature(et.shape, 2 * et.degree - (2 if et.shape == "tet" else 0))
    qm = quadrature(et.shape, 2 * et.degree)
    Nk, dNk = shape_functions(et.name, qk[0])
    Nm, dNm = shape_functions(et.name, qm[0])
    Ke = np.empty((ne, nd, nd))
    Me = np.empty((ne, nd, nd))
    I3 = np.eye(3)
    for s in range(0, ne, chunk):
        Xc = X[s:s + chunk]
        m = Xc.shape[0]
        # stiffness ------------------------------------------------------------
        # J[e,q,k,j] = dx_j / dxi_k = sum_a dN_a/dxi_k x_aj
        J = np.einsum("qak,eaj->eqkj", dNk, Xc)
        detJ = np.linalg.det(J)
        if np.any(detJ <= 0):
            bad = s + int(np.flatnonzero((detJ <= 0).any(axis=1))[0])
            raise ValueError(f"{et.name} element {bad} (0-based within its block) has a "
                                  f"non-positive Jacobian determinant (inverted or degenerate)")
        # grad N = J^-1 dN/dxi:  G[e,q,a,j] = sum_k Jinv[e,q,j,k] dN[q,a,k]
        G = np.einsum("eqjk,qak->eqaj", np.linalg.inv(J), dNk)
        wd = detJ * qk[1]  # (m, nq)
        Gf = G.reshape(m, -1, nn * 3)                     # (m, nq, a i)
        Gw = Gf * wd[:, :, None]
        # K1[a i, b j] = sum_q w |J| dN_a/dx_i dN_b/dx_j
        K1 = np.matmul(Gw.transpose(0, 2, 1), Gf).reshape(m, nn, 3, nn, 3)
        # K3[a, b] = sum_q w |J| grad N_a . grad N_b
        K3 = np.einsum("eqak,eqbk->eab", Gw.reshape(G.shape), G)
        # K = lambda K1 + mu K1^T(i<->j) + mu delta_ij K3
        Kc = lam * K1 + mu * K1.transpose(0, 1, 4, 3, 2)
        Kc += mu * K3[:, :, None, :, None] * I3[None, None, :, None, :]
        Ke[s:s + m] = Kc.reshape(m, nd, nd)
        # mass -----------------------------------------------------------------
        Jm = np.einsum("qak,eaj->eqkj", dNm, Xc)
        wdm = np.linalg.det(Jm) * qm[1]
        # Ms[a, b] = rho sum_q w |J| N_a N_b
        Ms = rho * np.einsum("eq,qa,qb->eab", wdm, Nm, Nm, optimize=True)
        Me[s:s + m] = (Ms[:, :, None, :, None] * I3[None, None, :, None, :]).reshape(m, nd, nd)
        if bar is not None:
            bar.update(m)
    return Ke, Me


# --------------------------------------------------------------------------- global model
def solid_model(coords, node_ids, cells, E: float, nu: float, rho: float,
                groups: dict | None = None, name: str = "solid", progress: bool = False
                ) -> FEModel:
    """Unconstrained solid FE model from a volume mesh.

    Parameters
    ----------
    coords : ndarray, shape (n_nodes, 3)
        Node coordinates [m].
    node_ids : ndarray of int, shape (n_nodes,)
        Node ids (unique).
    cells : list of (str, ndarray (ne, nn))
        Volume cell blocks: meshio type name and connectivity as *rows* of ``coords``.
    E, nu, rho : float
        Isotropic material [Pa, -, kg/m^3].
    groups : dict of str -> node ids, optional
    name : str
    progress : bool
        Show a progress bar over the elements.

    Returns
    -------
    FEModel
        DOFs ``(ux, uy, uz)`` of every node, node-major. Nodes not used by any cell are an
        error (they would make K singular); drop them first (``offline.fem.mesh`` does).
    """
    coords = np.asarray(coords, dtype=float)
    node_ids = np.asarray(node_ids, dtype=np.int64)
    n = coords.shape[0]
    if coords.ndim != 2 or coords.shape[1] != 3:
        raise ValueError(f"coords: expected shape (n_nodes, 3), got {coords.shape}")
    if node_ids.shape != (n,) or np.unique(node_ids).size != n:
        raise ValueError("node_ids: expected one unique id per node")
    if not cells:
        raise ValueError("mesh has no volume cells (tetrahedra or hexahedra)")
    used = np.zeros(n, dtype=bool)
    Ks, Ms, Ds = [], [], []
    bar = _progress(total=int(sum(np.shape(c)[0] for _, c in cells)), desc="solid elements",
                    enable=progress)
    for ctype, conn in cells:
        conn = np.asarray(conn, dtype=np.int64)
        et = element_type(ctype)
        if conn.ndim != 2 or conn.shape[1] != et.n_nodes:
            raise ValueError(f"{et.name}: connectivity must have shape (ne, {et.n_nodes})"
                                  f", got {conn.shape}")
        if conn.size and (conn.min() < 0 or conn.max() >= n):
            raise ValueError(f"{et.name}: connectivity refers to node rows outside "
                                  f"[0, {n})")
        used[conn.ravel()] = True
        Ke, Me = element_matrices(et.name, coords[conn], E, nu, rho, bar=bar)
        Ks.append(Ke)
        Ms.append(Me)
        Ds.append((node_dofs(conn, 3), coords[conn].mean(axis=1)))
    bar.close()
    if not used.all():
        raise ValueError(f"{int((~used).sum())} nodes are not connected to any volume "
                              f"cell (e.g. node {int(node_ids[~used][0])})")
    N = 3 * n
    K = M = None
    for Ke, Me, (D, cen) in zip(Ks, Ms, Ds):  # blocks of different element types
        Kb, Mb = assemble(N, D, Ke, Me, centroids=cen)
        K = Kb if K is None else K + Kb
        M = Mb if M is None else M + Mb
    dof_node, dof_kind = dof_table(node_ids, (0, 1, 2))
    # what a strain output needs (offline.fem.strain): cells as node ids, coordinates, material
    elements = {"type": "solid", "E": float(E), "nu": float(nu), "coords": coords,
                "ids": node_ids, "cells": [(element_type(t).name, np.asarray(c, np.int64))
                                           for t, c in cells]}
    return FEModel(coords=coords, node_ids=node_ids, dof_node=dof_node, dof_kind=dof_kind,
                   M=M.tocsr(), K=K.tocsr(), groups=dict(groups or {}), name=name,
                   elements=elements)


# --------------------------------------------------------------------------- builder
def build_solid(spec: SolidSpec, progress: bool = False) -> FEModel:
    """Unconstrained solid model of a ``[solid]`` table
    (:func:`offline.model.elements.parse_solid`): the mesh file's volume cells, with the
    ``[[solid.spiders]]`` already eliminated (their masters appended, docs/solid.md)."""
    msh = read_mesh(spec.mesh, scale=spec.scale, mesh_size=spec.mesh_size, order=spec.order,
                    where=f"{spec.where}.mesh", progress=progress)
    mat = spec.material
    model = solid_model(msh.points, msh.node_ids, msh.cells, mat.E, mat.nu, mat.rho,
                        groups=msh.groups, name=spec.mesh.stem, progress=progress)
    spiders = [spider_of(sd, model) for sd in spec.spiders]
    if spiders:
        model = add_spiders(model, spiders, where=f"{spec.where}.spiders")
    return model
