"""Matrix Market import/export (offline/fem/matrices.py)."""

from __future__ import annotations

import numpy as np
import pytest

sp = pytest.importorskip("scipy.sparse")
sio = pytest.importorskip("scipy.io")

from offline.fem import matrices, mpc, solid  # noqa: E402
from offline.fem.matrices import MatrixFileError, build_matrices, write_matrices  # noqa: E402
from offline.model import ModelFileError  # noqa: E402
from offline.model.elements import parse_matrices  # noqa: E402
from offline.geometry.box import box_mesh  # noqa: E402

W = "m.toml: [matrices]"


@pytest.fixture(scope="module")
def model():
    """A small solid with a spider (mixed 3- and 6-DOF nodes) and an explicit C."""
    mesh = box_mesh((0.2, 0.05, 0.05), (4, 1, 1), "hex20", origin=(0.01, 0.0, -0.3))
    m = solid.solid_model(mesh.points, mesh.node_ids, mesh.cells, 70e9, 0.33, 2700.0,
                          groups=mesh.groups)
    m = mpc.add_spiders(m, [mpc.Spider("tip", mesh.groups["x1"])])
    m.C = (1e-3 * m.K + 0.5 * m.M).tocsr()
    m.name = "bar"
    return m


def _section(paths, **kw):
    return {k: str(v.name) for k, v in paths.items()} | kw


def test_round_trip_is_exact(model, tmp_path):
    paths = write_matrices(model, tmp_path)
    got = build_matrices(parse_matrices(_section(paths), tmp_path, W))
    # reference: the written model itself (bit-identical: shortest round-trip decimals)
    for a, b in ((got.M, model.M), (got.K, model.K), (got.C, model.C)):
        assert a.shape == b.shape
        assert abs(a - b).max() == 0.0
    np.testing.assert_array_equal(got.dof_node, model.dof_node)
    np.testing.assert_array_equal(got.dof_kind, model.dof_kind)
    rows = [model.node_row(int(n)) for n in got.node_ids]
    np.testing.assert_array_equal(got.coords, model.coords[rows])
    assert got.name == "K"


def test_shuffled_dof_table_and_symmetric_storage(model, tmp_path):
    """Rows of dofs.csv in any order; 'symmetric' Matrix Market files (lower triangle)."""
    paths = write_matrices(model, tmp_path)
    lines = paths["dofs"].read_text().splitlines()
    rng = np.random.default_rng(4)
    body = [lines[1 + i] for i in rng.permutation(len(lines) - 1)]
    paths["dofs"].write_text("\n".join([lines[0]] + body) + "\n")
    sio.mmwrite(str(paths["stiffness"]), sp.coo_matrix(sp.tril(model.K)), symmetry="symmetric")
    got = build_matrices(parse_matrices(_section(paths), tmp_path, W))
    # reference: the original model (file order must not matter)
    np.testing.assert_array_equal(got.dof_node, model.dof_node)
    assert abs(got.K - model.K).max() == 0.0


def test_round_trip_with_spider_masters_reduces_identically(model, tmp_path):
    paths = write_matrices(model, tmp_path, prefix="x_")
    got = build_matrices(parse_matrices(_section(paths), tmp_path, W))
    tip = int(model.groups["tip"][0])
    assert got.dof_index(tip, "rz") == model.dof_index(tip, "rz")


def _expect(tmp_path, paths, match, **kw):
    with pytest.raises(MatrixFileError, match=match):
        build_matrices(parse_matrices(_section(paths, **kw), tmp_path, W))


def test_bad_files_name_file_and_problem(model, tmp_path):
    paths = write_matrices(model, tmp_path)
    n = model.n_dofs
    k = paths["stiffness"]
    good_k = k.read_text()
    # missing
    _expect(tmp_path, paths | {"stiffness": tmp_path / "nope.mtx"},
            r"m.toml: \[matrices\]: .*nope.mtx: matrix file not found")
    _expect(tmp_path, paths | {"dofs": tmp_path / "nope.csv"}, r"nope.csv: DOF table not found")
    # unreadable
    k.write_text("hello world\n1 2 3\n")
    _expect(tmp_path, paths, r"K.mtx: cannot read as Matrix Market")
    # non-square
    sio.mmwrite(str(k), sp.random(n, n - 1, density=0.01, random_state=1))
    _expect(tmp_path, paths, rf"K.mtx: matrix is not square \({n} x {n - 1}\)")
    # size mismatch with the DOF table
    sio.mmwrite(str(k), sp.identity(n + 3, format="coo"))
    _expect(tmp_path, paths, rf"K.mtx: matrix is {n + 3} x {n + 3} but the DOF table has {n} rows")
    # non-symmetric beyond tolerance
    A = model.K.tolil()
    A[0, 5] += 1e-3 * abs(model.K).max()
    sio.mmwrite(str(k), sp.coo_matrix(A.tocsr()))
    _expect(tmp_path, paths, r"K.mtx: matrix is not symmetric")
    # ... but a relative asymmetry below symmetry_rtol is accepted and symmetrised
    got = build_matrices(parse_matrices(_section(paths, symmetry_rtol=1e-2), tmp_path, W))
    assert got.K[0, 5] == A[0, 5]  # stored as given (no silent change of the user's data)
    # NaN
    B = model.K.tocoo()
    B.data[3] = np.nan
    sio.mmwrite(str(k), B)
    _expect(tmp_path, paths, r"K.mtx: matrix contains NaN or inf")
    k.write_text(good_k)
    build_matrices(parse_matrices(_section(paths), tmp_path, W))  # the restored set reads again


def test_bad_dof_tables(model, tmp_path):
    paths = write_matrices(model, tmp_path)
    d = paths["dofs"]
    lines = d.read_text().splitlines()

    def write(ls):
        d.write_text("\n".join(ls) + "\n")

    write(["idx,node,dof,x,y,z"] + lines[1:])
    _expect(tmp_path, paths, r"dofs.csv: header must be index,node,dof,x,y,z")
    f = lines[2].split(",")
    write(lines[:2] + [",".join(f[:2] + ["uw"] + f[3:])] + lines[3:])
    _expect(tmp_path, paths, r"dofs.csv, line 3: unknown dof 'uw'")
    # duplicate DOF entry: row 2 repeats row 1's node and dof under its own index
    f1 = lines[1].split(",")
    write(lines[:2] + [",".join([f[0]] + f1[1:])] + lines[3:])
    _expect(tmp_path, paths, r"dofs.csv: duplicate DOF \(node \d+, ux\)")
    # duplicate index
    write(lines[:2] + [",".join([f1[0]] + f[1:])] + lines[3:])
    _expect(tmp_path, paths, r"dofs.csv: column 'index' must hold 0\.\.\d+ once each")
    write(lines[:2] + [",".join(f[:3] + ["1e9"] + f[4:])] + lines[3:])
    _expect(tmp_path, paths, r"dofs.csv: node \d+ has different x, y, z")
    write(lines[:2] + [",".join(f[:3] + ["nan"] + f[4:])] + lines[3:])
    _expect(tmp_path, paths, r"dofs.csv, line 3: x, y, z must be finite")


def test_section_errors(tmp_path):
    with pytest.raises(ModelFileError, match=r"\[matrices\].stiffness: missing"):
        build_matrices(parse_matrices({"mass": "M.mtx", "dofs": "d.csv"}, tmp_path, W))
    with pytest.raises(ModelFileError, match=r"\[matrices\]\.stifness: unknown key"):
        parse_matrices({"mass": "M.mtx", "stifness": "K.mtx", "dofs": "d.csv"}, tmp_path, W)
    assert matrices.DOF_HEADER == ("index", "node", "dof", "x", "y", "z")
