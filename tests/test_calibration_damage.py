"""Damage zones (paper 003 eq. 23-25): [[damage]] in model files and the `damage` parameter."""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from calib_truth import damage_model_text, damage_params, damage_truth
from offline.calibration.setup import from_model_file
from offline.calibration.transforms import Transform
from offline.inverse.parametric import natural_frequencies
from offline.model import build_fe_model, spec_from_dict
from offline.model.spec import ModelFileError


def _fe(text, tmp_path):
    return build_fe_model(spec_from_dict(tomllib.loads(text), tmp_path / "m.toml"), progress=False)


def test_damage_scales_the_region_stiffness(tmp_path):
    base = damage_model_text(20)
    intact = _fe(base, tmp_path)
    dmg = _fe(base + damage_truth(zone=3, omega=0.4), tmp_path)
    dK = (intact.K - dmg.K).toarray()
    # elements of zone 3 ([0.051, 0.068] m: the 20-element mesh's 7th and 8th elements, node
    # ids 7-9) lose 40 % of their stiffness; nothing else changes (same element matrices)
    rows = np.flatnonzero(np.abs(dK).sum(axis=1))
    assert set(intact.dof_node[rows].tolist()) == {7, 8, 9}
    np.testing.assert_allclose((intact.M - dmg.M).toarray(), 0.0, atol=0)
    # the same region with E scaled by 0.6 on a section-wise model is not expressible in the
    # file; check instead that ω = 1 - factor is linear: K(ω=0.8) - K(0) = 2 (K(0.4) - K(0))
    dmg2 = _fe(base + damage_truth(zone=3, omega=0.8), tmp_path)
    np.testing.assert_allclose((intact.K - dmg2.K).toarray(), 2 * dK, rtol=0,
                               atol=1e-12 * np.abs(dK).max())


def test_parametric_damage_equals_file_damage(tmp_path):
    path = tmp_path / "zones.toml"
    path.write_text(damage_model_text(20, damage_params()))
    su = from_model_file(path)
    th = np.zeros(10)
    th[3] = 0.4
    f = natural_frequencies(su.pm, th)[0, :3]
    from offline.reduction.eigen import modes
    m = _fe(damage_model_text(20) + damage_truth(zone=3, omega=0.4), tmp_path)
    f_ref = np.sqrt(modes(m.K, m.M, 3).lam) / (2 * np.pi)
    # all interior modes kept (damage_model_text): the nominal basis is complete, so the
    # parametric model equals the damaged FE model to solver round-off
    np.testing.assert_allclose(f, f_ref, rtol=1e-8)


def test_damage_transform_is_the_papers_sigmoid():
    t = Transform("damage", eps=0.1)
    # S(0) = 0, S(+inf) -> 1, S(-inf) -> -eps   (paper 003 eq. 25)
    assert t.to_theta(0.0) == 0.0
    assert abs(t.to_theta(40.0) - 1.0) < 1e-12 and abs(t.to_theta(-40.0) + 0.1) < 1e-12
    xi = np.linspace(-3, 3, 13)
    np.testing.assert_allclose(t.to_xi(t.to_theta(xi)), xi, atol=1e-12)
    with pytest.raises(ValueError, match="-0.1 < ω < 1"):
        t.to_xi(1.0)


def test_bad_damage_entries_are_named(tmp_path):
    base = damage_model_text(20)
    with pytest.raises(ModelFileError, match=r"\[\[damage\]\]\[0\]\.omega must be a number below 1"):
        _fe(base + damage_truth(omega=1.0), tmp_path)
    with pytest.raises(ModelFileError, match=r"\[\[damage\]\]\[0\]\.region must be a table"):
        _fe(base + '[[damage]]\nregion = [0, 1]\nomega = 0.2\n', tmp_path)
    path = tmp_path / "empty.toml"
    path.write_text(damage_model_text(20, damage_params(2).replace(
        "[[0.0, -0.01, -0.01], [0.085,", "[[0.5, -0.01, -0.01], [0.6,")))
    with pytest.raises(ValueError, match="'w0' does not change the model.*no element centroid"):
        from_model_file(path)
