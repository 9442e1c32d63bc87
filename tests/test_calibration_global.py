"""The global answer (offline/calibration/starts.py), a reduction that sees the parameters
(offline/calibration/sensitivity.py) and the refusal to call a non-converged fit an answer."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from calib_truth import (E_ONLY, damage_model_text, damage_params, damage_truth, model_text,
                         truth_record)
from offline.calibration import sensitivity as sv
from offline.calibration.calibrate import calibrate, settings_from_raw
from offline.calibration.setup import from_model_file
from offline.calibration.starts import starting_points
from offline.model import ModelFileError

ALL_UZ = ('[[reduction.masters]]\nselect = { box = [[0.001, -0.01, -0.01], [0.2, 0.01, 0.01]] }\n'
          'dofs = ["uz"]\n')


def zones_text(nel: int) -> str:
    """Five 34 mm damage zones, five displacement sensors, Craig-Bampton with 4 modes and only
    the root rotation and the sensor/force DOFs as masters (no uz master everywhere)."""
    return damage_model_text(nel, damage_params(5), modes=4).replace(ALL_UZ, "")


@pytest.fixture(scope="module")
def zone1(tmp_path_factory):
    d = tmp_path_factory.mktemp("zone1")
    # truth: twice the mesh, the exact modal integrator, 40 % damage in zone 1 (34-68 mm)
    truth = damage_model_text(40) + damage_truth(5, zone=1, omega=0.4)
    truth_record(d / "r.csv", truth, duration=2.0, seed=3, band=(5.0, 450.0), rms=0.05)
    (d / "m.toml").write_text(zones_text(20))
    return d


def test_starting_points_cover_each_parameter_and_prior_draws():
    pts = starting_points(np.zeros(3), np.array([1.0, 2.0, 0.5]), ["E", "w0", "offset_d"],
                          ["modulus", "damage", "offset"], draws=2, seed=0)
    labels = [lab for lab, _ in pts]
    # prior mean; E on both sides; the damage zone on the + side only; no offset start
    assert labels[:4] == ["prior mean", "E +1.5 sd", "E -1.5 sd", "w0 +1.5 sd"]
    assert len(pts) == 6 and labels[4:] == ["prior draw 1", "prior draw 2"]
    np.testing.assert_allclose(pts[3][1], [0.0, 3.0, 0.0], atol=0)
    # seeded: the same draws every time
    again = starting_points(np.zeros(3), np.array([1.0, 2.0, 0.5]), ["E", "w0", "offset_d"],
                            ["modulus", "damage", "offset"], draws=2, seed=0)
    np.testing.assert_array_equal(pts[5][1], again[5][1])


def test_damage_is_found_in_its_zone_where_the_prior_mean_start_fails(zone1):
    su = from_model_file(zone1 / "m.toml")
    st = settings_from_raw(su.spec.raw, su.parameters, su.where)
    res = calibrate(su, [zone1 / "r.csv"], st)
    w = res.theta
    # measured: w = [-0.003, 0.402, 0.004, -0.015, 0.010], std [0.001, 0.001, 0.012, 0.022,
    # 0.065]; truth 0.4 in zone 1 (the reference: the truth file's [[damage]])
    assert res.vb.converged
    assert int(np.argmax(w)) == 1 and abs(w[1] - 0.4) < 0.02
    assert np.all(np.abs(np.delete(w, 1)) < 0.03)
    # the single start at the prior mean (all zones intact) stays there: measured w1 = 0.02
    one = calibrate(su, [zone1 / "r.csv"], dataclasses.replace(st, multistart=False))
    assert one.theta[1] < 0.1


def test_reduction_adds_the_zone_boundaries_as_masters(zone1):
    su = from_model_file(zone1 / "m.toml")
    # the nominal CB basis with 4 modes misses the softened mode shapes of zones 1 and 4
    # (eigenvalue changes off by 10 % and 13 % at ω = 0.5): their boundary nodes are added
    nodes = sorted({m["node"] for m in su.added_masters})
    assert nodes and {m["dof"] for m in su.added_masters} <= {"uz", "ry"}
    assert all(s["error"] < sv.TOL for s in su.sensitivity)
    # independent reference: the full FE model's first eigenvalue with zone 1 at ω = 0.5 against
    # the parametric reduced model's (within 0.5 %: the reduction's error after the fix)
    import tomllib

    from offline.inverse.parametric import natural_frequencies
    from offline.model import build_fe_model, spec_from_dict
    from offline.reduction.eigen import modes
    text = damage_model_text(20) + damage_truth(5, zone=1, omega=0.5)
    fe = build_fe_model(spec_from_dict(tomllib.loads(text), zone1 / "x.toml"), progress=False)
    f_full = np.sqrt(np.sort(modes(fe.K, fe.M, 2).lam)[:2]) / (2 * np.pi)
    th = np.zeros(5)
    th[1] = 0.5
    f_red = natural_frequencies(su.pm, th)[0, :2]
    np.testing.assert_allclose(f_red, f_full, rtol=5e-3)


def test_a_gmr_basis_blind_to_the_root_spring_is_fixed(tmp_path):
    # GMR+ with 4 modes and no master at the root: k_root = 3 N m/rad (nominal 10) moves the
    # reduced eigenvalues 23 % less than the full model's; the root rotation becomes a master
    # and the calibration switches to Craig-Bampton (GMR+'s residual flexibility is nominal)
    text = model_text(17).replace('method = "cb"\nmodes = 4\n', 'method = "gmr+"\nmodes = 4\n')
    text = text.replace('select = { at = [0.0, 0.0, 0.0] }\ndofs = ["ry"]',
                        'select = { at = [0.1, 0.0, 0.0] }\ndofs = ["uz"]')
    path = tmp_path / "m.toml"
    path.write_text(text)
    su = from_model_file(path)
    assert su.added_masters == [{"node": 1, "dof": "ry"}]
    assert su.reduction_method == "cb"
    assert all(s["error"] < sv.TOL for s in su.sensitivity)


def test_a_parameter_the_reduction_cannot_see_is_refused_by_name(tmp_path, monkeypatch):
    path = tmp_path / "m.toml"
    path.write_text(model_text(17))
    # a tolerance no basis meets stands in for a parameter that cannot be fixed
    monkeypatch.setattr(sv, "TOL", 1e-12)
    with pytest.raises(ValueError, match=r"does not see \[\[parameters\]\] 'E'.*'k_root'"):
        from_model_file(path)


def test_a_fit_that_does_not_converge_is_an_error_exit(tmp_path, capsys):
    from offline.calibration.cli import main
    from offline.calibration.outcome import EXIT_NOT_CONVERGED
    truth = model_text(nel=34, E=0.93 * 69e9, ratios=(0.015, 0.015), params="")
    truth_record(tmp_path / "r.csv", truth, duration=0.5, seed=2)
    path = tmp_path / "m.toml"
    # two VB iterations from the prior mean cannot converge (measured: 40 iterations needed)
    path.write_text(model_text(17) + "[bayes]\nmax_iter = 2\nmultistart = false\n")
    rc = main([str(path), "--data", str(tmp_path / "r.csv"), "-o", str(tmp_path / "out"),
               "--quiet", "--no-kfold", "--bundle", str(tmp_path / "b.npz")])
    assert rc == EXIT_NOT_CONVERGED
    err = capsys.readouterr().err
    assert "did not converge" in err and "max_iter" in err
    assert json.loads((tmp_path / "out" / "posterior.json").read_text())["converged"] is False
    assert not (tmp_path / "out" / "calibrated.toml").exists()
    assert not (tmp_path / "b.npz").exists()


def test_bad_screen_settings_are_named(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(model_text(17) + "[bayes]\ndraws = -1\n")
    # the model file's schema refuses it when the file is read (offline/model/schema_update.py)
    with pytest.raises(ModelFileError, match=r"m\.toml: \[bayes\]\.draws: expected an integer "
                       r">= 0, got -1"):
        from_model_file(path)
    path.write_text(model_text(17))
    su = from_model_file(path)
    raw = {**su.spec.raw, "bayes": {"draws": -1}}  # the calibration's parser: the same error
    with pytest.raises(ModelFileError, match=r"m\.toml: \[bayes\]\.draws: expected an integer"):
        settings_from_raw(raw, su.parameters, su.where)


def test_modulus_and_zone_damage_are_a_product_with_exact_derivatives(tmp_path):
    import tomllib

    from offline.calibration.bilinear import BilinearParts, matrices
    from offline.calibration.forward import TimeModel
    from offline.model import build_fe_model, spec_from_dict
    path = tmp_path / "m.toml"
    path.write_text(damage_model_text(20, E_ONLY + damage_params(5), modes=4))
    su = from_model_file(path)
    parts = su.pm.parts
    # E_z = (1 - w_z) E: one product per zone, nothing between zones
    assert isinstance(parts, BilinearParts)
    assert sorted((q.i, q.j) for q in parts.pairs) == [(0, z) for z in range(1, 6)]
    # independent reference: the FE model file with E and the zone written out, projected on
    # the calibration's basis (relative 1e-9: round-off)
    th = np.array([62e9, 0.0, 0.0, 0.35, 0.0, 0.1])
    raw = tomllib.loads(damage_model_text(20, modes=4).replace("E = 69000000000.0", "E = 62e9")
                        + damage_truth(5, zone=2, omega=0.35)
                        + damage_truth(5, zone=4, omega=0.1).replace('"truth"', '"t4"'))
    fe = build_fe_model(spec_from_dict(raw, path), progress=False)
    T = su.reduction.T
    M, K, dM, dK = matrices(parts, th)
    K_ref = T.T @ (fe.K @ T)
    np.testing.assert_allclose(K, K_ref, rtol=0, atol=1e-9 * np.abs(K_ref).max())
    # dK/dθ against central differences of the same matrices (bilinear: exact to round-off)
    for j, h in ((0, 1e8), (3, 1e-3)):
        e = np.zeros(6)
        e[j] = h
        fd = (matrices(parts, th + e)[1] - matrices(parts, th - e)[1]) / (2 * h)
        np.testing.assert_allclose(dK[j], fd, rtol=0, atol=1e-7 * np.abs(dK[j]).max())
    # the time model's Jacobian uses them: central differences of its response (rtol 1e-4)
    F = np.random.default_rng(0).normal(size=(200, 1))
    tm = TimeModel(parts, su.B, su.out_rows, su.out_kind, 1e-3, 4, interpolation="linear")
    _, dY = tm.run(th, F)
    h = 1e-4 * th[0]
    e = np.zeros(6)
    e[0] = h
    fd = (tm.run(th + e, F, jac=False)[0] - tm.run(th - e, F, jac=False)[0]) / (2 * h)
    np.testing.assert_allclose(dY[0], fd, rtol=0, atol=1e-4 * np.abs(fd).max())
