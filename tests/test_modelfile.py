"""Tests of the model-file loader (offline/model)."""

import copy
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg as sl

from offline.model import (ModelFileError, build_fe_model, build_unconstrained, load_model_file,
                           resolve_dofs, spec_from_dict)
from offline.model.inspect import inspect_model, natural_frequencies

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
P = Path("strip.toml")

BASE = {
    "name": "strip",
    "type": "plate",
    "materials": {"al": {"E": 69e9, "nu": 0.3, "rho": 2700.0}},
    "plate": {"material": "al", "thickness": 1.2e-3,
              "rectangle": {"length": 0.17, "width": 0.013, "nx": 34, "ny": 2}},
    "boundary": [{"select": {"group": "x0"}}],
    "reduction": {"method": "gmr+", "modes": 10,
                  "masters": [{"select": {"at": [0.11, 0.0065, 0.0]}, "dofs": ["uz", "rx"]}]},
    "estimator": {"rate": 1000.0},
    "sensors": [{"name": "d110", "select": {"at": [0.11, 0.0065, 0]}, "dof": "uz"}],
    "forces": [{"name": "F", "select": {"at": [0.11, 0.0065, 0]}, "dof": "uz"}],
    "outputs": [{"name": "d60", "select": {"at": [0.06, 0.0065, 0]}, "dof": "uz"}],
    "calibration": {"load": {"type": "random", "band": [5.0, 160.0], "rms": 1.0}},
}


def edited(**paths):
    """Copy of BASE with edits given as key paths 'a.b.0.c' = value (None deletes)."""
    raw = copy.deepcopy(BASE)
    for p, v in paths.items():
        keys = [int(k) if k.isdigit() else k for k in p.split("__")]
        d = raw
        for k in keys[:-1]:
            d = d[k]
        if v is None:
            del d[keys[-1]]
        else:
            d[keys[-1]] = v
    return raw


def test_base_spec_parses_with_defaults():
    spec = spec_from_dict(copy.deepcopy(BASE), P)
    assert spec.type == "plate" and spec.materials["al"].E == 69e9
    assert spec.estimator.beta == 0.25 and spec.estimator.gamma == 0.5  # defaults (average acc.)
    assert spec.estimator.alpha == "auto" and spec.estimator.window == "auto"  # default (issue 11)
    assert spec.estimator.max_delay == 0.02 and spec.calibration.seeds == 3
    assert spec.sensors[0].kind == "displacement" and spec.sensors[0].unit == "m"
    assert spec.reduction.masters[0].dofs == ("uz", "rx")


@pytest.mark.parametrize("edit, match", [
    ({"plat": 1}, r"strip\.toml: plat: unknown top-level key"),
    ({"estimator__beta_": 0.3}, r"strip\.toml: \[estimator\]\.beta_: unknown key"),
    ({"boundary__0__dof": ["uz"]}, r"\[\[boundary\]\]\[0\]\.dof: unknown key"),
    ({"estimator__window": 1.5}, r"\[estimator\]\.window: expected an integer"),
    ({"materials__al__E": True}, r"\[materials\.al\]\.E: expected a number"),
    ({"boundary__0__dofs": ["uz", "rq"]}, r"\[\[boundary\]\]\[0\]\.dofs\[1\]: unknown DOF 'rq'"),
    ({"sensors__0__dof": "w"}, r"\[\[sensors\]\]\[0\]\.dof: unknown DOF 'w'"),
    ({"estimator__beta": 0.7}, r"\[estimator\]\.beta: 0\.7 is out of range"),
    ({"materials__al__nu": 0.5}, r"\[materials\.al\]\.nu: 0\.5 is out of range"),
    ({"sensors__0__noise": -0.1}, r"\[\[sensors\]\]\[0\]\.noise: -0\.1 is out of range"),
    ({"estimator__rate": 200.0}, r"\[calibration\]\.load: 160 Hz is above the Nyquist"),
    ({"boundary__0__select": {"box": [[0, 0, 0]]}}, r"\[\[boundary\]\]\[0\]\.select\.box: expected two points"),
    ({"boundary__0__select": {"group": "x0", "at": [0, 0, 0]}}, r"\.select: give exactly one of"),
    ({"type": "shell"}, r"strip\.toml: type: expected one of"),
    ({"beam": {}}, r"\[beam\]: section does not match type = 'plate'"),
    ({"outputs__0__name": "d110"}, r"\[\[outputs\]\]\[0\]\.name: 'd110' already used"),
    ({"outputs__0__name": "flags"}, r"\[\[outputs\]\]\[0\]\.name: 'flags' is reserved"),
    ({"sensors__0__name": "d_std"}, r"\[\[sensors\]\]\[0\]\.name: 'd_std' is reserved"),
    ({"damping": {"ratios": [[10.0, 0.01], [10.0, 0.02]]}}, r"\[damping\]\.ratios: the two frequencies"),
    ({"reduction__method": "krylov"}, r"\[reduction\]\.method: expected one of"),
    ({"calibration__load__force": "G"}, r"\[calibration\]\.load\.force: no \[\[forces\]\] entry named 'G'"),
])
def test_bad_input_names_file_and_key(edit, match):
    with pytest.raises(ModelFileError, match=match):
        spec_from_dict(edited(**edit), P)


@pytest.mark.parametrize("edit, match", [
    ({"boundary__0__select": {"box": [[1, 1, 1], [2, 2, 2]]}}, r"\[\[boundary\]\]\[0\]\.select\.box: no node inside"),
    ({"boundary__0__select": {"group": "z0"}}, r"\[\[boundary\]\]\[0\]\.select\.group: unknown group 'z0'"),
    ({"boundary__0__select": {"nodes": [9999]}}, r"\[\[boundary\]\]\[0\]\.select\.nodes: node 9999"),
    ({"boundary__0__dofs": ["ux"]}, r"\[\[boundary\]\]\[0\]\.dofs: DOF 'ux' is not carried by a plate"),
    ({"plate__thicknes": 1e-3}, r"strip\.toml: \[plate\]\.thicknes: unknown key"),
    ({"plate__thickness": "1.2mm"}, r"\[plate\]\.thickness: expected a number"),
    ({"plate__material": "steel"}, r"\[plate\]\.material: unknown material 'steel'"),
    ({"plate__rectangle__nx": 0}, r"strip\.toml: \[plate\]\.rectangle\.nx: expected an integer >= 1"),
    ({"plate__thickness": -1e-3}, r"strip\.toml: \[plate\]\.thickness: -0\.001 is out of range"),
])
def test_bad_input_found_at_build_names_file_and_key(edit, match):
    spec = spec_from_dict(edited(**edit), P)
    with pytest.raises(ModelFileError, match=match):
        build_fe_model(spec, progress=False)


def test_selection_errors_on_resolve():
    spec = spec_from_dict(copy.deepcopy(BASE), P)
    m = build_fe_model(spec, progress=False)
    with pytest.raises(ModelFileError, match=r"x\.toml: \[\[sensors\]\]\[0\]\.select\.at: no node within"):
        resolve_dofs(m, {"at": [0.1105, 0.0065, 0]}, "uz", "x.toml: [[sensors]][0].select")
    with pytest.raises(ModelFileError, match=r"DOF uz of node 1 is not a free DOF"):
        resolve_dofs(m, {"nodes": [1]}, ["uz"], "x.toml: [[forces]][0].select")
    with pytest.raises(ModelFileError, match=r"unknown DOF 'uy2'"):
        resolve_dofs(m, {"nodes": [2]}, ["uy2"], "w")


def test_missing_file_and_syntax_error(tmp_path):
    with pytest.raises(ModelFileError, match=r"nothere\.toml: model file not found"):
        load_model_file(tmp_path / "nothere.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = 'x'\ntype = plate\n")
    with pytest.raises(ModelFileError, match=r"bad\.toml: TOML syntax error"):
        load_model_file(bad)


def test_rayleigh_from_two_ratios():
    raw = edited(damping={"ratios": [[30.0, 0.01], [500.0, 0.03]]})
    a, b = spec_from_dict(raw, P).damping.coefficients()
    for f, z in ((30.0, 0.01), (500.0, 0.03)):
        w = 2 * math.pi * f
        # zeta = a / (2 w) + b w / 2 (definition of Rayleigh damping ratio)
        assert abs(a / (2 * w) + b * w / 2 - z) < 1e-12
    m = build_fe_model(spec_from_dict(raw, P), progress=False)
    assert m.rayleigh == pytest.approx((a, b), rel=1e-15)


def test_spring_and_mass_change_matrices_by_the_given_amounts():
    raw = edited(spring=[{"name": "s", "select": {"group": "x1"}, "dof": "uz", "k": 300.0}],
                 mass=[{"name": "tip", "select": {"group": "x1"}, "m": 0.006}])
    with_ = build_unconstrained(spec_from_dict(raw, P))
    without = build_unconstrained(spec_from_dict(copy.deepcopy(BASE), P))
    dK = (with_.K - without.K).toarray()
    dM = (with_.M - without.M).toarray()
    # total spring stiffness and mass equal the given k and m (split over the 3 edge nodes)
    assert dK.sum() == pytest.approx(300.0, rel=1e-12)
    assert dM.sum() == pytest.approx(0.006, rel=1e-12)
    assert np.count_nonzero(np.diag(dK)) == 3 and np.count_nonzero(dK - np.diag(np.diag(dK))) == 0
    uz = with_.dof_kind == 2
    assert np.all(np.diag(dM)[~uz] == 0)


def test_edited_young_modulus_scales_frequencies():
    # K ~ E with M fixed: f ~ sqrt(E) exactly (inverse-maps variants edit raw like this)
    base = spec_from_dict(copy.deepcopy(BASE), P)
    f0 = natural_frequencies(build_fe_model(base, progress=False), 3)
    raw = copy.deepcopy(base.raw)
    raw["materials"]["al"]["E"] = 69e9 * 1.21
    f1 = natural_frequencies(build_fe_model(spec_from_dict(raw, P), progress=False), 3)
    # tolerance: shift-invert eigsh accuracy on this model (measured 2.4e-8)
    np.testing.assert_allclose(f1 / f0, 1.1, rtol=1e-6)


def test_passthrough_sections_kept_raw():
    raw = edited(parameters=[{"name": "E", "path": "materials.al.E", "range": [60e9, 75e9]}],
                 experiment={"anything": 1}, inverse={"whatever": [1, 2]})
    spec = spec_from_dict(raw, P)
    assert spec.raw["parameters"][0]["name"] == "E" and spec.raw["inverse"]["whatever"] == [1, 2]
    assert spec.path == P


def test_paper_cantilever_example():
    spec = load_model_file(EXAMPLES / "paper_cantilever.toml")
    m = build_fe_model(spec, progress=False)
    assert m.n_dofs == 5610  # 170 x 11 free nodes x (uz, rx, ry); paper: 5,487
    masters = [i for ms in spec.reduction.masters
               for i in resolve_dofs(m, ms.select, ms.dofs, ms.where)]
    assert len(masters) == 21 and len(set(masters)) == 21  # paper eq. 34: 7 nodes x 3
    xy = [m.coords[m.node_row(m.dof_node[i])] for i in masters[::3]]
    assert m.dof_table()[masters[0]][1] == "uz"
    # the sensor (110 mm) and reference (60 mm) are exact nodes on the centre line
    for x in (0.110, 0.060):
        assert any(abs(p[0] - x) < 1e-15 and abs(p[1] - 0.0065) < 1e-15 for p in xy)
    s = resolve_dofs(m, spec.sensors[0].select, spec.sensors[0].dof, spec.sensors[0].where)
    assert s == masters[:1]
    # first bending frequency vs Euler-Bernoulli 33.908 Hz (1.875104^2 sqrt(EI/(rho A L^4))/2pi)
    f1 = natural_frequencies(m, 1)[0]
    assert f1 == pytest.approx(1.875104068711961**2 / (2 * math.pi) * math.sqrt(
        69e9 * 0.0012**2 / 12 / (2700 * 0.17**4)), rel=1e-2)


def test_portal_frame_and_plate_examples_build():
    for name in ("portal_frame.toml", "ss_plate.toml"):
        spec = load_model_file(EXAMPLES / name)
        m = build_fe_model(spec, progress=False)
        assert m.n_dofs > 0 and np.all(natural_frequencies(m, 3) > 0)
    # portal frame mass: steel members + the 150 kg machine (analytic from sections)
    spec = load_model_file(EXAMPLES / "portal_frame.toml")
    full = build_unconstrained(spec)
    r = (full.dof_kind == 0).astype(float)
    tube_A = math.pi * (0.075**2 - 0.067**2)
    ref = 7850 * (2 * 3.0 * tube_A + 4.0 * 0.10 * 0.20) + 150.0
    assert float(r @ (full.M @ r)) == pytest.approx(ref, rel=1e-12)


def test_inspect_model_reports_sizes_mass_and_frequencies():
    txt = inspect_model(EXAMPLES / "portal_frame.toml", n_modes=3)
    full = build_unconstrained(load_model_file(EXAMPLES / "portal_frame.toml"))
    assert "elements          40" in txt and "234 free" in txt
    m = build_fe_model(load_model_file(EXAMPLES / "portal_frame.toml"), progress=False)
    # independent dense solve of the same matrices
    f = np.sqrt(sl.eigh(m.K.toarray(), m.M.toarray(), eigvals_only=True)[:3]) / (2 * math.pi)
    for fi in f:
        assert f"{fi:12.4f}" in txt
    assert full.n_elements == 40


def test_strip_example_is_the_one_strip_of_the_zoo_the_hybrid_demo_and_the_tests():
    # examples/strip.toml is the only place the demo rig's strip is written
    from offline.hybrid.demo import STRIP as HYBRID_STRIP
    from offline.load.zoo import STRIP as ZOO_STRIP
    from offline.model.strip import strip_head

    spec = load_model_file(EXAMPLES / "strip.toml")
    m = build_fe_model(spec, progress=False)
    # clamped Euler-Bernoulli strip: f1 = (1.8751^2 / 2 pi) sqrt(E I / (rho A L^4)) (textbook
    # cantilever; 34 cubic elements converge f1 to far below 1 %)
    f1 = natural_frequencies(m, 1)[0]
    assert f1 == pytest.approx(1.875104068711961**2 / (2 * math.pi) * math.sqrt(
        69e9 * 0.0012**2 / 12 / (2700 * 0.17**4)), rel=1e-3)
    head = tomllib.loads(strip_head(34))
    for text in (ZOO_STRIP, HYBRID_STRIP.replace("RMS", "1.0")):
        raw = tomllib.loads(text)
        assert {k: raw[k] for k in ("materials", "beam")} == \
            {k: head[k] for k in ("materials", "beam")}
    assert tomllib.loads(strip_head(170))["beam"]["members"][0]["line"]["n"] == 170
