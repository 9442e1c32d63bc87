"""3-D solid elements, mesh reading and rigid spiders (offline/fem/solid.py, mesh.py, mpc.py)."""

from __future__ import annotations

import math
from itertools import product

import numpy as np
import pytest

sp = pytest.importorskip("scipy.sparse")
spla = pytest.importorskip("scipy.sparse.linalg")

from offline.fem import mpc, solid  # noqa: E402
from offline.fem.mesh import MeshError, read_mesh  # noqa: E402
from offline.model import ModelFileError  # noqa: E402
from offline.model.elements import parse_solid, spider_from_dict  # noqa: E402
from offline.model.selection import select_nodes  # noqa: E402
from offline.geometry.box import box_mesh  # noqa: E402

STEEL = dict(E=210e9, nu=0.3, rho=7850.0)


class Mat:
    def __init__(self, E, nu, rho):
        self.E, self.nu, self.rho = E, nu, rho


def model_of(mesh, **mat):
    m = {**STEEL, **mat}
    return solid.solid_model(mesh.points, mesh.node_ids, mesh.cells, m["E"], m["nu"], m["rho"],
                             groups=mesh.groups)


def gmsh_box(path, size, h, order, hex_=False):
    """A gmsh mesh of a box with physical groups x0 (face x = 0) and 'body'."""
    gmsh = pytest.importorskip("gmsh")
    gmsh.initialize(interruptible=False)
    try:
        gmsh.option.setNumber("General.Terminal", 0)
        gmsh.model.add("box")
        b = gmsh.model.occ.addBox(0, 0, 0, *size)
        gmsh.model.occ.synchronize()
        gmsh.model.addPhysicalGroup(3, [b], name="body")
        x0 = gmsh.model.getEntitiesInBoundingBox(-1e-6, -1, -1, 1e-6, 9, 9, 2)
        gmsh.model.addPhysicalGroup(2, [t for _, t in x0], name="x0")
        if hex_:
            for _, c in gmsh.model.getEntities(1):
                gmsh.model.mesh.setTransfiniteCurve(c, 3)
            for _, s in gmsh.model.getEntities(2):
                gmsh.model.mesh.setTransfiniteSurface(s)
                gmsh.model.mesh.setRecombine(2, s)
            gmsh.model.mesh.setTransfiniteVolume(b)
            gmsh.option.setNumber("Mesh.SecondOrderIncomplete", 1 if order == 20 else 0)
        else:
            gmsh.option.setNumber("Mesh.MeshSizeMax", h)
        gmsh.model.mesh.generate(3)
        gmsh.model.mesh.setOrder(1 if order == 1 else 2)
        gmsh.write(str(path))
    finally:
        gmsh.finalize()
    return path


# ----------------------------------------------------------------------------- element library
@pytest.mark.parametrize("name", list(solid.ELEMENT_TYPES))
def test_shape_functions_interpolate_nodes(name):
    et = solid.ELEMENT_TYPES[name]
    N, dN = solid.shape_functions(name, et.nodes)
    # Kronecker property N_a(xi_b) = delta_ab (definition of nodal shape functions)
    np.testing.assert_allclose(N, np.eye(et.n_nodes), atol=1e-12)
    rng = np.random.default_rng(1)
    xi = rng.uniform(0, 0.3, (7, 3)) if et.shape == "tet" else rng.uniform(-1, 1, (7, 3))
    N, dN = solid.shape_functions(name, xi)
    # partition of unity and linear completeness: sum N_a = 1, sum N_a xi_a = xi (exact identities)
    np.testing.assert_allclose(N.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(N @ et.nodes, xi, atol=1e-12)
    np.testing.assert_allclose(np.einsum("qak,aj->qjk", dN, et.nodes),
                               np.broadcast_to(np.eye(3), (7, 3, 3)), atol=1e-12)


def _dN_finite_difference(name, xi, h=1e-6):
    cols = []
    for k in range(3):
        e = np.zeros(3)
        e[k] = h
        cols.append((solid.shape_functions(name, xi + e)[0]
                     - solid.shape_functions(name, xi - e)[0]) / (2 * h))
    return np.stack(cols, axis=-1)


@pytest.mark.parametrize("name", list(solid.ELEMENT_TYPES))
def test_shape_function_derivatives_match_finite_differences(name):
    xi = np.array([[0.21, 0.13, 0.3]])
    _, dN = solid.shape_functions(name, xi)
    # reference: central differences of N (error O(h^2) ~ 1e-12, round-off ~ 1e-10)
    np.testing.assert_allclose(dN, _dN_finite_difference(name, xi), atol=1e-8)


@pytest.mark.parametrize("shape,degree", [(s, d) for s in ("tet", "hex") for d in range(6)])
def test_quadrature_exact_for_monomials(shape, degree):
    pts, w = solid.quadrature(shape, degree)
    for i, j, k in product(range(degree + 1), repeat=3):
        if shape == "tet":
            if i + j + k > degree:
                continue
            # unit tetrahedron: int x^i y^j z^k = i! j! k! / (i + j + k + 3)!  (Dirichlet integral)
            exact = (math.factorial(i) * math.factorial(j) * math.factorial(k)
                     / math.factorial(i + j + k + 3))
        else:
            # [-1, 1]^3: prod 2 / (p + 1) for even p, 0 for odd p
            exact = np.prod([0.0 if p % 2 else 2.0 / (p + 1) for p in (i, j, k)])
        got = np.sum(w * pts[:, 0] ** i * pts[:, 1] ** j * pts[:, 2] ** k)
        assert got == pytest.approx(exact, abs=1e-14)


def test_element_matrices_reject_bad_input():
    et = solid.element_type("hex8")
    X = (et.nodes[None] + 1.0) / 2.0
    with pytest.raises(ValueError, match="NaN"):
        solid.element_matrices("hex8", np.where(np.arange(8)[None, :, None] == 3, np.nan, X),
                               **STEEL)
    with pytest.raises(ValueError, match="Jacobian"):
        solid.element_matrices("hex8", X * [-1.0, 1.0, 1.0], **STEEL)  # mirrored
    with pytest.raises(ValueError, match="Poisson"):
        solid.element_matrices("hex8", X, E=1.0, nu=0.5, rho=1.0)
    with pytest.raises(ValueError, match="unsupported solid cell type 'wedge'"):
        solid.element_type("wedge")


# ----------------------------------------------------------------------------- node order
@pytest.mark.parametrize("order,hex_", [(2, False), (20, True), (27, True)])
def test_gmsh_node_order_matches_reference_nodes(tmp_path, order, hex_):
    """Straight-sided gmsh elements: mapping the reference nodes through the corner (linear)
    map must give the file's node positions, i.e. our node order is meshio's."""
    path = gmsh_box(tmp_path / "b.msh", (1.0, 0.7, 0.4), 0.5, order, hex_)
    mesh = read_mesh(path)
    (ctype, conn), = mesh.cells
    assert ctype == {2: "tetra10", 20: "hexahedron20", 27: "hexahedron27"}[order]
    et = solid.element_type(ctype)
    lin = "tetra" if et.shape == "tet" else "hexahedron"
    ref = et.nodes if et.shape == "hex" else et.nodes
    N1, _ = solid.shape_functions(lin, ref)  # (nn, n_corners)
    X = mesh.points[conn]
    # reference: gmsh's own node coordinates (independent generator)
    np.testing.assert_allclose(np.einsum("ac,ecj->eaj", N1, X[:, :et.n_linear]), X, atol=1e-12)
    assert sorted(mesh.groups) == ["body", "x0"]
    np.testing.assert_allclose(mesh.points[np.searchsorted(mesh.node_ids, mesh.groups["x0"]), 0],
                               0.0, atol=1e-12)


# ----------------------------------------------------------------------------- patch test
def _patch(mesh, rng):
    model = model_of(mesh)
    pts = mesh.points
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    on_bnd = np.any((np.abs(pts - lo) < 1e-9) | (np.abs(pts - hi) < 1e-9), axis=1)
    A = rng.normal(size=(3, 3)) * 1e-3
    c = rng.normal(size=3) * 1e-3
    u_exact = (pts @ A.T + c).ravel()  # node-major ux, uy, uz
    b = np.repeat(on_bnd, 3)
    K = model.K.tocsr()
    Kii = K[~b][:, ~b]
    Kib = K[~b][:, b]
    u_i = spla.spsolve(Kii.tocsc(), -Kib @ u_exact[b])
    return u_i, u_exact[~b], int((~on_bnd).sum())


@pytest.mark.parametrize("kind", ["hex8", "hex20", "hex27"])
def test_patch_test_hexahedra(kind):
    rng = np.random.default_rng(7)
    mesh = box_mesh((1.0, 1.0, 1.0), (3, 3, 3), kind)
    pts = mesh.points
    inner = np.all((pts > 1e-9) & (pts < 1 - 1e-9), axis=1)
    # distort interior nodes (elements stay valid: shifts < 1/12 of the 1/3 element size)
    mesh.points = pts + inner[:, None] * rng.uniform(-0.025, 0.025, pts.shape)
    u_i, u_ref, n_inner = _patch(mesh, rng)
    assert n_inner > 0
    # reference: the imposed linear field (isoparametric elements reproduce it exactly)
    np.testing.assert_allclose(u_i, u_ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("order", [1, 2])
def test_patch_test_tetrahedra(tmp_path, order):
    mesh = read_mesh(gmsh_box(tmp_path / "t.msh", (1.0, 1.0, 1.0), 0.3, order))
    u_i, u_ref, n_inner = _patch(mesh, np.random.default_rng(3))
    assert n_inner > 0
    # reference: the imposed linear field
    np.testing.assert_allclose(u_i, u_ref, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- global model
@pytest.mark.parametrize("kind", ["hex8", "hex20", "hex27"])
def test_rigid_modes_and_total_mass(kind):
    mesh = box_mesh((0.3, 0.2, 0.1), (3, 2, 2), kind, origin=(0.1, -0.2, 0.05))
    model = model_of(mesh)
    R = mpc.rigid_body_modes(model)
    Kn = abs(model.K).max()
    # rigid-body motion stores no strain energy: K R = 0 (round-off relative to max |K_ij|)
    assert abs(model.K @ R).max() <= 1e-11 * Kn * 0.3
    # consistent mass: total mass rho V = 7850 * 0.3 * 0.2 * 0.1 = 47.1 kg (analytic volume)
    MR = R.T @ (model.M @ R)
    np.testing.assert_allclose(np.diag(MR)[:3], 7850 * 0.006, rtol=1e-12)
    # first mass moment about the origin: m * centroid (0.25, -0.1, 0.1) (analytic)
    np.testing.assert_allclose(MR[1, 5], 47.1 * 0.25, rtol=1e-12)
    assert model.K.shape == (3 * mesh.points.shape[0],) * 2
    # uniform strain eps = sym(A): strain energy 1/2 u^T K u = V (lambda tr(eps)^2 / 2 + mu
    # eps:eps) (closed form of isotropic elasticity; integrated exactly by the elements)
    A = np.random.default_rng(2).normal(size=(3, 3)) * 1e-3
    u = (model.coords @ A.T).ravel()
    eps = 0.5 * (A + A.T)
    lam, mu = 210e9 * 0.3 / (1.3 * 0.4), 210e9 / 2.6
    energy = 0.006 * (0.5 * lam * np.trace(eps) ** 2 + mu * np.sum(eps * eps))
    assert 0.5 * u @ (model.K @ u) == pytest.approx(energy, rel=1e-12)
    assert (abs(model.K - model.K.T)).max() == 0.0 and (abs(model.M - model.M.T)).max() == 0.0


def _euler_bernoulli_f1(E, rho, L, h):
    # f1 = (beta1 L)^2 / (2 pi L^2) sqrt(E I / (rho A)), beta1 L = 1.875104 (root of
    # cos(x) cosh(x) = -1), square section h x h: I / A = h^2 / 12
    return 1.875104 ** 2 / (2 * math.pi * L ** 2) * math.sqrt(E * h ** 2 / 12 / rho)


def _first_frequency(model, clamp_nodes):
    fixed = np.isin(model.dof_node, clamp_nodes)
    mc = model.constrain(fixed)
    lam = spla.eigsh(mc.K.tocsc(), k=2, M=mc.M.tocsc(), sigma=0.0, which="LM")[0]
    return np.sqrt(np.sort(lam)) / (2 * math.pi)


@pytest.mark.parametrize("kind", ["hex20", "hex27"])
def test_cantilever_hexahedra_euler_bernoulli(kind):
    L, h = 1.0, 0.05
    mesh = box_mesh((L, h, h), (20, 2, 2), kind)
    model = model_of(mesh)
    f = _first_frequency(model, mesh.groups["x0"])
    fa = _euler_bernoulli_f1(210e9, 7850.0, L, h)
    # reference: Euler-Bernoulli root 1.875104; 3 % (slender bar L/h = 20)
    assert f[0] == pytest.approx(fa, rel=0.03)
    # square section: the two bending modes coincide (symmetry), to solver round-off
    assert f[1] == pytest.approx(f[0], rel=1e-8)


def test_cantilever_tet10_from_msh_file_via_builder(tmp_path):
    L, h = 1.0, 0.05
    gmsh_box(tmp_path / "bar.msh", (L, h, h), 0.025, 2)
    model = solid.build_solid(parse_solid({"mesh": "bar.msh", "material": "steel"},
                                          {"steel": Mat(**STEEL)}, tmp_path, "bar.toml: [solid]"))
    assert model.name == "bar"
    f = _first_frequency(model, model.groups["x0"])
    # reference: Euler-Bernoulli root 1.875104; 3 %
    assert f[0] == pytest.approx(_euler_bernoulli_f1(210e9, 7850.0, L, h), rel=0.03)


def test_builder_errors_name_the_problem(tmp_path):
    mats = {"steel": Mat(**STEEL)}
    w = "m.toml: [solid]"
    with pytest.raises(MeshError, match=r"m.toml: \[solid\].mesh: .*nope.msh: mesh file not found"):
        solid.build_solid(parse_solid({"mesh": "nope.msh", "material": "steel"}, mats, tmp_path, w))
    with pytest.raises(ModelFileError, match=r"\.material: unknown material 'alu'"):
        solid.build_solid(parse_solid({"mesh": "x.msh", "material": "alu"}, mats, tmp_path, w))
    with pytest.raises(ModelFileError, match="meshh: unknown key"):
        solid.build_solid(parse_solid({"meshh": "x.msh", "material": "steel"}, mats, tmp_path, w))
    bad = tmp_path / "bad.msh"
    bad.write_text("this is not a mesh\n")
    with pytest.raises(MeshError, match="bad.msh: cannot read the mesh"):
        solid.build_solid(parse_solid({"mesh": "bad.msh", "material": "steel"}, mats, tmp_path, w))
    meshio = pytest.importorskip("meshio")
    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1], [0, 1, 1.0]])
    meshio.write(str(tmp_path / "w.vtu"), meshio.Mesh(pts, [("wedge", [[0, 1, 2, 3, 4, 5]])]))
    with pytest.raises(MeshError, match="w.vtu: cell type 'wedge' is not supported"):
        solid.build_solid(parse_solid({"mesh": "w.vtu", "material": "steel"}, mats, tmp_path, w))
    meshio.write(str(tmp_path / "tri.vtu"), meshio.Mesh(pts, [("triangle", [[0, 1, 2]])]))
    with pytest.raises(MeshError, match="tri.vtu: no volume cells"):
        solid.build_solid(parse_solid({"mesh": "tri.vtu", "material": "steel"}, mats, tmp_path, w))


# ----------------------------------------------------------------------------- spiders
def _block_with_spider(center=None):
    mesh = box_mesh((0.4, 0.1, 0.1), (4, 2, 2), "hex8")
    model = model_of(mesh)
    spider = spider_from_dict(
        {"name": "tip", "select": {"group": "x1"}, **({"center": center} if center else {})},
        model, "s[0]")
    return model, spider


@pytest.mark.parametrize("center", [None, [0.5, 0.02, 0.07]])
def test_spider_moves_slaves_rigidly(center):
    model, spider = _block_with_spider(center)
    ext, T, keep = mpc.spider_transform(model, [spider])
    master = int(ext.groups["tip"][0])
    assert master == int(model.node_ids.max()) + 1
    rng = np.random.default_rng(11)
    u_ind = rng.normal(size=keep.size)
    u_m, theta = rng.normal(size=3), rng.normal(size=3) * 1e-2
    for k in range(3):
        u_ind[np.flatnonzero(ext.dof_node[keep] == master)[k]] = u_m[k]
        u_ind[np.flatnonzero(ext.dof_node[keep] == master)[3 + k]] = theta[k]
    u = T @ u_ind
    xm = ext.coords[-1]
    expect_center = np.array(center) if center else model.coords[
        np.isin(model.node_ids, spider.slaves)].mean(axis=0)
    np.testing.assert_allclose(xm, expect_center, atol=1e-15)
    rows = np.flatnonzero(np.isin(model.node_ids, spider.slaves))
    u_s = u[:model.n_dofs].reshape(-1, 3)[rows]
    # reference: rigid motion u_m + theta x (x_s - x_m) evaluated independently with np.cross
    np.testing.assert_allclose(u_s, u_m + np.cross(theta, model.coords[rows] - xm), atol=1e-12)
    # non-slave DOFs pass through unchanged
    free = ~np.isin(model.dof_node, spider.slaves)
    np.testing.assert_array_equal(u[:model.n_dofs][free], u_ind[:free.sum()])


def test_spider_model_keeps_six_rigid_modes_and_mass():
    model, spider = _block_with_spider()
    red = mpc.add_spiders(model, [spider])
    assert red.n_dofs == model.n_dofs - 3 * spider.slaves.size + 6
    assert list(red.dof_kind[-6:]) == [0, 1, 2, 3, 4, 5]
    R = mpc.rigid_body_modes(red, center=(0.1, 0.2, 0.3))
    # rigid motion of body + spider stores no energy (round-off relative to max |K_ij|)
    assert abs(red.K @ R).max() <= 1e-11 * abs(red.K).max()
    # total mass unchanged by the constraint: rho V = 7850 * 0.004 = 31.4 kg (analytic)
    np.testing.assert_allclose(np.diag(R.T @ (red.M @ R))[:3], 31.4, rtol=1e-12)
    # free-free spectrum: exactly six zero eigenvalues (dense solve of the small model)
    sl = pytest.importorskip("scipy.linalg")
    lam = sl.eigh(red.K.toarray(), red.M.toarray(), eigvals_only=True)
    assert np.sum(np.abs(lam) < 1e-6 * lam.max()) == 6


def test_spider_errors_name_the_problem():
    model, spider = _block_with_spider()
    with pytest.raises(ValueError, match="already a slave of spider 'tip'"):
        mpc.spider_transform(model, [spider, mpc.Spider("tip2", spider.slaves[:4])])
    line = model.node_ids[(np.abs(model.coords[:, 1]) < 1e-12) & (np.abs(model.coords[:, 2])
                                                                     < 1e-12)]
    with pytest.raises(ValueError, match="'edge'.*all on one line"):
        mpc.spider_transform(model, [mpc.Spider("edge", line)])
    with pytest.raises(ValueError, match="spider name.s. x1 already name node groups"):
        mpc.spider_transform(model, [mpc.Spider("x1", spider.slaves)])
    with pytest.raises(ModelFileError, match=r"s\[0\].select.group: unknown group 'hole'"):
        spider_from_dict({"name": "a", "select": {"group": "hole"}}, model, "s[0]")
    with pytest.raises(ValueError, match=r"s\[0\].select: selects no nodes"):
        spider_from_dict({"name": "a", "select": {"box": [[5, 5, 5], [6, 6, 6]]}}, model,
                             "s[0]")
    with pytest.raises(ModelFileError, match=r"s\[0\].select.cylinder.radius: missing"):
        spider_from_dict({"name": "a", "select": {"cylinder": {"point": [0, 0, 0],
                                                                   "axis": [0, 0, 1]}}},
                             model, "s[0]")


def test_select_cylinder_box_and_intersection():
    rng = np.random.default_rng(5)
    phi = rng.uniform(0, 2 * np.pi, 40)
    s = rng.uniform(-1, 1, 40)
    axis = np.array([1.0, 1.0, 0.0]) / np.sqrt(2)
    e1 = np.array([0.0, 0.0, 1.0])
    e2 = np.cross(axis, e1)
    p0 = np.array([0.2, -0.1, 0.4])
    ring = p0 + s[:, None] * axis + 0.05 * (np.cos(phi)[:, None] * e1 + np.sin(phi)[:, None] * e2)
    other = p0 + rng.uniform(-1, 1, (30, 3)) * 0.02  # well inside the cylinder
    coords = np.vstack([ring, other])
    ids = np.arange(100, 170)
    sel = select_nodes(coords, ids, {}, {"cylinder": {"point": p0.tolist(),
                                                          "axis": [2.0, 2.0, 0.0],
                                                          "radius": 0.05}})
    # reference: the points were constructed on the cylinder
    np.testing.assert_array_equal(sel, ids[:40])
    sel = select_nodes(coords, ids, {"g": ids[:10]},
                           {"group": "g", "cylinder": {"point": p0.tolist(),
                                                       "axis": axis.tolist(), "radius": 0.05,
                                                       "range": [0.0, 1.0]}})
    np.testing.assert_array_equal(sel, ids[:10][s[:10] >= 0])


def test_builder_with_spiders(tmp_path):
    """A tet4 box from a .msh file, with a spider on the x0 face given in the [solid] table."""
    gmsh_box(tmp_path / "b.msh", (0.3, 0.1, 0.1), 0.05, 1)
    section = {"mesh": "b.msh", "material": "steel",
               "spiders": [{"name": "root", "select": {"group": "x0"}, "center": [0, 0.05, 0.05]}]}
    model = solid.build_solid(parse_solid(section, {"steel": Mat(**STEEL)}, tmp_path, "w"))
    root = int(model.groups["root"][0])
    assert [model.dof_index(root, d) for d in ("ux", "rz")] == [model.n_dofs - 6,
                                                                   model.n_dofs - 1]
    np.testing.assert_allclose(model.coords[model.node_row(root)], [0, 0.05, 0.05])
    mc = model.constrain(model.dof_node == root)
    f = _first_frequency(mc, [])
    assert f[0] > 0  # clamping the spider master removes all rigid modes


# ----------------------------------------------------------------------------- housing generator
def test_housing_generator_groups_and_spiders():
    pytest.importorskip("gmsh")
    from offline.geometry import housing

    mesh, info = housing.housing_mesh(h=0.06, target_dofs=None, order=1)
    names = housing.hole_names()
    assert {f"hole_{n}" for k in names for n in names[k]} <= set(mesh.groups)
    model = model_of(mesh)
    spiders = [spider_from_dict(d, model, f"s[{i}]")
               for i, d in enumerate(housing.spider_tables())]
    red = mpc.add_spiders(model, spiders)
    bolts = [int(red.groups[n][0]) for n in names["bolt"]]
    masters = [int(red.groups[n][0]) for n in names["bearing"] + names["cover"]]
    clamped = red.constrain(np.isin(red.dof_node, bolts))
    assert np.isin(clamped.dof_node, masters).sum() == 48
    # bearing master at the seat centre: x = +-0.095, z = 0.14, y mid-wall (generator params)
    xb = red.coords[red.node_row(int(red.groups["bearing1_front"][0]))]
    np.testing.assert_allclose(xb, [-0.095, -0.14, 0.14], atol=1e-3)
    lam = spla.eigsh(clamped.K.tocsc(), k=1, M=clamped.M.tocsc(), sigma=0.0)[0]
    assert lam[0] > (2 * np.pi * 10) ** 2  # clamped housing: stiff, first mode well above 10 Hz


# ----------------------------------------------------------------------------- model file
def test_model_file_solid_with_spiders_end_to_end(tmp_path):
    """type = "solid" through the model-file loader: a clamped root spider equals a clamped
    face, and the tip spider master is usable as a reduction master."""
    meshio = pytest.importorskip("meshio")
    modelfile = pytest.importorskip("offline.model")
    L, h = 1.0, 0.05
    mesh = box_mesh((L, h, h), (20, 2, 2), "hex20")
    meshio.write(str(tmp_path / "bar.vtu"), meshio.Mesh(mesh.points, [("hexahedron20",
                                                                       mesh.cells[0][1])]))
    (tmp_path / "bar.toml").write_text(f"""
type = "solid"
[materials.steel]
E = 210e9
nu = 0.3
rho = 7850.0
[solid]
mesh = "bar.vtu"
material = "steel"
[[solid.spiders]]
name = "root"
select = {{ box = [[0, 0, 0], [0, {h}, {h}]], tol = 1e-9 }}
[[solid.spiders]]
name = "tip"
select = {{ box = [[{L}, 0, 0], [{L}, {h}, {h}]], tol = 1e-9 }}
[[boundary]]
select = {{ group = "root" }}
""")
    model = modelfile.build_fe_model(modelfile.load_model_file(tmp_path / "bar.toml"),
                                     progress=False)
    tip = int(model.groups["tip"][0])
    assert model.dof_index(tip, "rz") == model.n_dofs - 1
    f = np.sqrt(np.sort(spla.eigsh(model.K.tocsc(), k=1, M=model.M.tocsc(), sigma=0.0)[0]))
    f /= 2 * np.pi
    # reference: the same bar clamped face-wise without spiders (a held rigid face is a
    # clamped face; equal up to ARPACK convergence, ~1e-9 observed)
    f_face = _first_frequency(model_of(mesh), mesh.groups["x0"])
    assert f[0] == pytest.approx(f_face[0], rel=1e-7)


def test_geometry_files_are_meshed_by_gmsh(tmp_path):
    """.geo and .step inputs: meshed with gmsh (tet10 by default), physical groups kept."""
    gmsh = pytest.importorskip("gmsh")
    (tmp_path / "b.geo").write_text(
        'SetFactory("OpenCASCADE");\nBox(1) = {0, 0, 0, 0.3, 0.1, 0.05};\n'
        'Physical Volume("body") = {1};\nPhysical Surface("x0") = {1};\n')
    mesh = read_mesh(tmp_path / "b.geo", mesh_size=0.05)
    assert [c for c, _ in mesh.cells] == ["tetra10"]
    assert set(mesh.groups) == {"body", "x0"}
    # OCC box surface 1 is the face x = 0 (gmsh's OpenCASCADE numbering)
    rows = np.searchsorted(mesh.node_ids, mesh.groups["x0"])
    np.testing.assert_allclose(mesh.points[rows, 0], 0.0, atol=1e-12)
    gmsh.initialize(interruptible=False)
    try:
        gmsh.option.setNumber("General.Terminal", 0)
        gmsh.model.occ.addBox(0, 0, 0, 300.0, 100.0, 50.0)  # in mm
        gmsh.model.occ.synchronize()
        gmsh.write(str(tmp_path / "b.step"))
    finally:
        gmsh.finalize()
    mesh = read_mesh(tmp_path / "b.step", scale=1e-3, mesh_size=0.05, order=1)
    assert [c for c, _ in mesh.cells] == ["tetra"]
    # the model's volume from the mm geometry scaled to m: 0.3 x 0.1 x 0.05 = 1.5e-3 m^3
    model = model_of(mesh, rho=1.0)
    R = mpc.rigid_body_modes(model)
    assert (R[:, 0] @ (model.M @ R[:, 0])) == pytest.approx(1.5e-3, rel=1e-12)
    msh = gmsh_box(tmp_path / "m.msh", (1.0, 1.0, 1.0), 0.5, 1)
    with pytest.raises(MeshError, match="mesh_size/order apply only to geometry files"):
        read_mesh(msh, mesh_size=0.1)
