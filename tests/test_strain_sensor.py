"""Strain gauges as estimator channels ([[sensors]] kind = "strain"): the model-file entry and
its errors, the user recovery row of imported matrices, the reduced basis in which the gauge
reads one coordinate (offline/gauge_basis.py), and the cantilever through the public CLI.

References: Euler-Bernoulli cantilever under a tip load F, fibre strain ``eps = -z F (L - x) /
(E I)`` (as tests/test_strain.py); a change of basis leaves the eigenvalues and every output
``r T q`` unchanged (it is the same reduced model written in other coordinates).
"""

from __future__ import annotations

import numpy as np
import pytest

from edge import DOF_NAMES
from offline.fem.strain import probe_matrix
from offline.model import ModelFileError, build_fe_model, sensor_probe
from offline.model.spec import spec_from_dict

E, B_W, H = 210e9, 0.04, 0.01
I_Y = B_W * H**3 / 12
GAUGE = {"name": "eps_root", "kind": "strain", "unit": "microstrain",
         "at": [0.025, 0.0, H / 2], "noise": 0.02}


def _beam(sensors, outputs=(), **extra):
    d = {"name": "g", "type": "beam",
         "materials": {"steel": {"E": E, "nu": 0.3, "rho": 7850.0}},
         "beam": {"sections": {"bar": {"material": "steel", "rectangle": {"b": B_W, "h": H}}},
                  "members": [{"section": "bar", "line": {"start": [0.0, 0.0, 0.0],
                                                          "end": [1.0, 0.0, 0.0], "n": 20}}]},
         "boundary": [{"select": {"at": [0.0, 0.0, 0.0]}}],
         "reduction": {"method": "gmr+", "modes": 8, "masters": [TIP]},
         "sensors": list(sensors),
         "forces": [{"name": "F", "select": {"at": [1.0, 0.0, 0.0]}, "dof": "uz"}],
         "outputs": list(outputs)}
    d.update(extra)
    return spec_from_dict(d, "g.toml")


TIP = {"select": {"at": [1.0, 0.0, 0.0]}, "dofs": ["uz", "ry"]}
ACC = {"name": "a_tip", "select": {"at": [1.0, 0.0, 0.0]}, "dof": "uz", "kind": "acceleration"}


@pytest.mark.parametrize("entry, pattern", [
    (dict(GAUGE, kind="stress"), r"\[\[sensors\]\]\[1\]\.kind: 'stress' is an output kind"),
    (dict(GAUGE, select={"at": [0.0, 0.0, 0.0]}), r"\[1\]\.select: a strain gauge is placed"),
    ({k: v for k, v in GAUGE.items() if k != "at"}, r"\[1\]\.at: give at = \[x, y, z\]"),
    (dict(GAUGE, row=[[2, "uz", 1.0]]), r"\[1\]\.at: give at .* one of the two"),
    (dict(GAUGE, unit="MPa"), r"\[1\]\.unit: expected one of .strain., .microstrain., got .MPa."),
    (dict(GAUGE, drift=-1.0), r"\[1\]\.drift: -1.0 is out of range \(must be >= 0\)"),
    (dict(GAUGE, noise_std=0.0), r"\[1\]\.noise_std: 0.0 is out of range \(must be > 0\)"),
])
def test_gauge_entry_errors_name_the_key(entry, pattern):
    with pytest.raises(ModelFileError, match=pattern):
        _beam([ACC, entry])


def test_gauge_row_is_the_element_recovery_and_its_basis_reads_it_as_one_coordinate():
    from offline.reduced import reduce_model

    spec = _beam([ACC, GAUGE])
    model = build_fe_model(spec, progress=False)
    g = sensor_probe(model, spec.sensors[1])
    # static tip load F = 1 N: the row gives the closed form (Hermite cubics exact, rtol 1e-8)
    import scipy.sparse.linalg as spla
    f = np.zeros(model.n_dofs)
    f[int(sensor_probe(model, spec.sensors[0]))] = 1.0
    u = spla.spsolve(model.K.tocsc(), f)
    eps = float((probe_matrix([g], model.n_dofs) @ u)[0])
    assert eps == pytest.approx(-H / 2 * (1 - 0.025) / (E * I_Y) * 1e6, rel=1e-8)

    # `vsense-offline inspect`'s position check reads the gauge's point, not a node DOF
    from offline.model.checks import check_positions
    assert check_positions(spec, model) == []
    off = _beam([ACC, dict(GAUGE, at=[1.5, 0.0, 0.0])])
    assert any("[[sensors]][1].at" in e and "beyond the ends" in e
               for e in check_positions(off, model))

    rm = reduce_model(spec, model, progress=False)
    d = int(rm.chan_dofs[1])  # the gauge's master DOF, a plain master of the same reduction
    plain = reduce_model(_beam([ACC], reduction={
        "method": "gmr+", "modes": 8,
        "masters": [TIP, {"select": {"nodes": [int(model.dof_node[d])]},
                          "dofs": [DOF_NAMES[int(model.dof_kind[d])]]}]}), model,
        progress=False)
    red, red0 = rm.reduction, plain.reduction
    # the same reduced model in other coordinates: equal eigenvalues (rtol 1e-9: round-off
    # of the n = 11 generalised eigenproblem)
    import scipy.linalg as sla
    w = np.sort(sla.eigh(red.K, red.M, eigvals_only=True))
    w0 = np.sort(sla.eigh(red0.K, red0.M, eigvals_only=True))
    np.testing.assert_allclose(w, w0, rtol=1e-9)
    # the gauge's channel row is a unit row at its master coordinate, the accelerometer's
    # too (both to round-off, atol 1e-9 relative to entries of order 1)
    rows = rm.channel_rows()
    j = rm.position(rm.chan_dofs[1])
    np.testing.assert_allclose(rows[1], np.eye(rm.n)[j], atol=1e-9)
    np.testing.assert_allclose(rows[0], np.eye(rm.n)[rm.position(rm.chan_dofs[0])], atol=1e-12)
    # the reduced static solution of a unit tip force on the force's coordinate: its gauge
    # coordinate is the plain reduction's strain s T0 q0 (rtol 1e-9: the same model), which
    # is within 0.3 % of the full model's (GMR+'s static error here: 0.2 %; CB and Guyan, with
    # the constraint modes, give the full model's to round-off)
    q = np.linalg.solve(red.K, np.eye(rm.n)[:, rm.position(rm.force_dofs[0])])
    q0 = np.linalg.solve(red0.K, np.eye(plain.n)[:, plain.position(plain.force_dofs[0])])
    s0 = float((probe_matrix([g], model.n_dofs) @ red0.T @ q0)[0])
    assert q[j] == pytest.approx(s0, rel=1e-9)
    assert q[j] == pytest.approx(eps, rel=3e-3)


def test_user_recovery_row_on_imported_matrices(tmp_path):
    # the beam exported as Matrix Market files and its gauge row as the user would copy it
    # from the FE program: the imported model's gauge then reads the same strain
    from offline.fem.matrices import write_matrices
    from offline.model import build_unconstrained

    spec = _beam([ACC, GAUGE])
    model = build_fe_model(spec, progress=False)
    g = sensor_probe(model, spec.sensors[1])
    row = [[int(model.dof_node[i]), DOF_NAMES[int(model.dof_kind[i])], float(c) * 1e-6]
           for i, c in zip(g.idx, g.coef)]  # SI coefficients (the unit's 1e6 out)
    paths = write_matrices(build_unconstrained(spec), tmp_path)
    mat = lambda sensors, outputs=(): spec_from_dict({  # noqa: E731
        "name": "m", "type": "matrices",
        "matrices": {k: str(v) for k, v in paths.items()},
        "boundary": [{"select": {"at": [0.0, 0.0, 0.0]}}],
        "sensors": sensors, "outputs": list(outputs),
        "forces": [{"name": "F", "select": {"at": [1.0, 0.0, 0.0]}, "dof": "uz"}]},
        tmp_path / "m.toml")
    gauge = {"name": "eps_root", "kind": "strain", "unit": "microstrain", "row": row}
    out = {"name": "eps_out", "kind": "strain", "row": row}
    spec_m = mat([ACC, gauge], [out])
    model_m = build_fe_model(spec_m, progress=False)
    gm = sensor_probe(model_m, spec_m.sensors[1])
    # same DOFs and coefficients (rtol 1e-12: the row round-trips through floats)
    np.testing.assert_array_equal(model_m.dof_node[gm.idx], model.dof_node[g.idx])
    np.testing.assert_allclose(gm.coef, g.coef, rtol=1e-12)
    from offline.model import output_probe
    om = output_probe(model_m, spec_m.outputs[0])
    np.testing.assert_allclose(om.coef, g.coef * 1e-6, rtol=1e-12)  # unit strain
    # the errors name the field
    for bad, pattern in [
        ([[2, "uz"]], r"row\[0\]: expected \[node, \"dof\", coefficient\] \(3 items\)"),
        ([[2, "uz", float("nan")]], r"row\[0\]\[2\] \(coefficient\): expected a finite"),
        ([[2, "uq", 1.0]], r"row\[0\]\[1\] \(dof\): unknown DOF 'uq'"),
        ([[2.5, "uz", 1.0]], r"row\[0\]\[0\] \(node\): expected an integer, got a number 2.5"),
        ([[2, "uz", 1.0], [2, "uz", 2.0]], r"row: a \(node, dof\) appears twice"),
        ([], r"row: empty row"),
    ]:
        with pytest.raises(ModelFileError, match=pattern):
            mat([ACC, dict(gauge, row=bad)])
    with pytest.raises(ModelFileError, match=r"row\[1\]\[0\] \(node\): node 999 is not in"):
        s = mat([ACC, dict(gauge, row=[[2, "uz", 1.0], [999, "uz", 1.0]])])
        sensor_probe(build_fe_model(s, progress=False), s.sensors[1])
    with pytest.raises(ModelFileError, match=r"\.at: strain/stress at a point needs a beam"):
        s = mat([ACC, {k: v for k, v in GAUGE.items()}])
        sensor_probe(build_fe_model(s, progress=False), s.sensors[1])


CANTILEVER = """
name = "gauge-beam"
type = "beam"
[materials.steel]
E = 210e9
nu = 0.3
rho = 7850.0
[beam.sections.bar]
material = "steel"
rectangle = { b = 0.04, h = 0.01 }
[[beam.members]]
section = "bar"
line = { start = [0.0, 0.0, 0.0], end = [1.0, 0.0, 0.0], n = 20 }
[[boundary]]
select = { at = [0.0, 0.0, 0.0] }
[damping]
ratios = [[8.0, 0.01], [300.0, 0.01]]
[reduction]
method = "gmr+"
modes = 10
[[reduction.masters]]
select = { at = [1.0, 0.0, 0.0] }
dofs = ["uz", "ry"]
[estimator]
rate = 1082.5                  # ADS1256 3750 SPS, two channels cycled (the default chain)
[[sensors]]
name = "a_tip"
select = { at = [1.0, 0.0, 0.0] }
dof = "uz"
kind = "acceleration"
noise = 0.02
[[sensors]]
name = "eps_root"
kind = "strain"
unit = "microstrain"
at = [0.025, 0.0, 0.005]
GAUGE_NOISE
drift = 0.5                    # microstrain / sqrt(s): the bridge's offset walks
[[forces]]
name = "F07"
select = { at = [0.7, 0.0, 0.0] }
dof = "uz"
[[outputs]]
name = "d_tip"
select = { at = [1.0, 0.0, 0.0] }
dof = "uz"
[design_load]
load = { type = "random", band = [0.5, 100.0], rms = 20.0 }
"""


@pytest.mark.slow
def test_cantilever_with_a_root_gauge_through_the_cli(tmp_path, capsys):
    # A model file as docs/strain-gauges.md writes it; the record simulated on the full model
    # through the ADS1256 (simulate's default chain) with the gauge's offset drifting;
    # replayed by the device's replay. "Without the gauge": the same file with the gauge's
    # noise_std 1e4 microstrain (no information; the same chain, so the same record).
    from edge.cli import main as edge_main
    from edge.csvio import read_table
    from offline.cli import main as offline_main

    res = {}
    for case, noise in (("with", "noise = 0.02"), ("without", "noise_std = 1e4")):
        m = tmp_path / f"{case}.toml"
        m.write_text(CANTILEVER.replace("GAUGE_NOISE", noise))
        if case == "with":
            assert offline_main(["simulate", str(m), "--duration", "10", "--seed", "5",
                                 "-o", str(tmp_path / "test"), "--quiet"]) == 0
        assert offline_main(["build", str(m), "-o", str(tmp_path / f"{case}.npz"),
                             "--quiet"]) == 0
        assert edge_main(["replay", "--bundle", str(tmp_path / f"{case}.npz"),
                          str(tmp_path / "test_measurement.csv"),
                          "-o", str(tmp_path / f"{case}.csv")]) == 0
        te, ye, ne = read_table(tmp_path / f"{case}.csv")
        tt, yt, nt = read_table(tmp_path / "test_truth.csv")
        k = te >= 1.0  # after the smoother's start-up
        for o in ("F07", "d_tip"):
            est, std = ye[k, ne.index(o)], ye[k, ne.index(o + "_std")]
            true = yt[np.searchsorted(tt, te[k]), nt.index(o)]
            res[case, o] = (np.sqrt(np.mean((est - true) ** 2)) / np.std(true),
                            np.mean(np.abs(est - true) <= std))
    with capsys.disabled():
        print("\n" + "\n".join(f"{c} gauge {o}: nRMSE {r:.4f}, 1-sigma coverage {v:.3f}"
                               for (c, o), (r, v) in res.items()))
    # the gauge anchors the quasi-static response: better with it than without (this 10 s
    # record with the declared 2 % noise: force 0.165 vs 0.339, tip 0.029 vs 0.082; with
    # 1 % noise, as simulate added before it read the declaration: 0.092 vs 0.252, 0.023 vs
    # 0.051; 30 s at 1 %, docs/strain-gauges.md: 0.082 vs 0.248, 0.020 vs 0.047). The drift
    # scaled with the relative noise at the tracked level (0.03x) gave the tip 0.044 vs 0.047
    # on 30 s, coverage 0.16.
    assert res["with", "F07"][0] <= 0.6 * res["without", "F07"][0], res
    assert res["with", "d_tip"][0] <= 0.7 * res["without", "d_tip"][0], res
    # the stated std covers (68 %) to within the scatter of a 10 s record and the declared
    # load's conservative roll-off (force 0.79, tip 0.84 here; 0.84, 0.84 at 1 % noise)
    assert 0.5 <= res["with", "F07"][1] <= 0.9, res
    assert 0.5 <= res["with", "d_tip"][1] <= 0.95, res


def test_place_offers_a_gauge_candidate_and_writes_it_back(tmp_path, capsys):
    # [[placement.candidates]] of kind strain (the keys of a gauge's [[sensors]] entry): the
    # root gauge anchors the quasi-static response an accelerometer misses, so it is chosen
    # over a second accelerometer at mid-span, and PLACED.toml reads back with the gauge
    from offline.cli import main as offline_main
    from offline.model import load_model_file

    text = CANTILEVER.replace("GAUGE_NOISE", "")
    i, j = text.index('[[sensors]]\nname = "eps_root"'), text.index("[[forces]]")
    text = text[:i] + text[j:] + """
[placement]
[[placement.candidates]]
name = "a_mid"
select = { at = [0.5, 0.0, 0.0] }
dof = "uz"
kind = "acceleration"
noise = 0.02
[[placement.candidates]]
name = "eps_root"
kind = "strain"
unit = "microstrain"
at = [0.025, 0.0, 0.005]
noise = 0.02
"""
    m = tmp_path / "place.toml"
    m.write_text(text)
    out = tmp_path / "PLACED.toml"
    assert offline_main(["place", str(m), "-n", "1", "-o", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    row = [ln.split() for ln in printed.splitlines() if ln.strip().startswith("1 ")][0]
    assert row[1] == "eps_root", printed
    spec = load_model_file(out)
    g = spec.sensors[-1]
    assert (g.name, g.kind, g.unit, g.at) == ("eps_root", "strain", "microstrain",
                                              (0.025, 0.0, 0.005))
    # placement models the measurement chain (offline/placement/chained.py): a gauge
    # candidate's drifting offset is read and carried into the sensor it becomes
    m.write_text(text.replace("at = [0.025, 0.0, 0.005]\n",
                              "at = [0.025, 0.0, 0.005]\ndrift = 0.5\n"))
    cand = [c for c in load_model_file(m).placement.candidates if c.name == "eps_root"][0]
    assert cand.as_sensor().drift == 0.5
