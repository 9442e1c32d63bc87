"""Model-inadequacy test (paper 001 Sect. 4): k-fold by record flags an E-only model with a
rigid clamp when the truth's clamp is compliant (a rotational spring), and does not flag the
truth's own family (E, damping ratio, root spring) although mesh, reduction and damping form
still differ from the truth (a coloured model error: see noise.spectral_weight)."""

from __future__ import annotations

import numpy as np
import pytest

from calib_truth import model_text, truth_record
from offline.calibration.calibrate import settings_from_raw
from offline.calibration.checks import kfold_inadequacy
from offline.calibration.data import read_record
from offline.calibration.setup import from_model_file

E_ONLY = """
[[parameters]]
name = "E"
kind = "modulus"
material = "aluminium"
bounds = [40e9, 85e9]
"""


def _disp(t):
    return t.replace('name = "a170"', 'name = "d170"').replace('kind = "acceleration"',
                                                           'kind = "displacement"')


def _records(d, seed):
    truth = _disp(model_text(nel=34, E=66e9, k_root=6.0, ratios=(0.015, 0.015), params=""))
    # three records with different force spectra (k-fold by record, never by time)
    for i, band in enumerate([(5.0, 60.0), (5.0, 250.0), (25.0, 250.0)]):
        truth_record(d / f"r{i}.csv", truth, duration=1.0, seed=seed + i, band=band)
    return d


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return _records(tmp_path_factory.mktemp("inad"), 1)


def _kfold(text, d, tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(text)
    su = from_model_file(path)
    st = settings_from_raw(su.spec.raw, su.parameters, su.where)
    recs = [read_record(d / f"r{i}.csv", su.forces, su.sensors, st.prep) for i in range(3)]
    return su, st, recs, kfold_inadequacy(su, recs, st, alpha=0.05)


@pytest.mark.parametrize("seed", [1, 11, 21])
def test_the_truths_family_is_not_flagged(seed, tmp_path_factory, tmp_path):
    d = _records(tmp_path_factory.mktemp(f"good{seed}"), seed)
    *_, out = _kfold(_disp(model_text()), d, tmp_path)
    # at the paper's per-fold level of 5 % (3 folds: a false-alarm rate up to 1 - 0.95³ = 14 %
    # by construction); measured over seeds 1, 11, ..., 81 (docs/calibration.md): p_min 0.012
    # (seed 41, the one false alarm of nine) to 0.81; seeds 1/11/21: 0.57 / 0.18 / 0.43.
    # Before the spectral likelihood weights (AR(1) N_eff) seed 1 gave p_min = 0.0034
    assert out["passed"] and out["p_min"] >= 0.05
    assert all(f["dof"] == 3 for f in out["folds"])


def test_e_only_with_rigid_clamp_is_flagged(records, tmp_path):
    rigid = _disp(model_text(params=E_ONLY))
    rigid = rigid.replace('dofs = ["ux", "uy", "uz", "rx", "rz"]',
                          'dofs = ["ux", "uy", "uz", "rx", "ry", "rz"]', 1)
    rigid = rigid.replace('[[spring]]\nname = "root"\nselect = { at = [0.0, 0.0, 0.0] }\n'
                          'dof = "ry"\nk = 10.0\n', '')
    rigid = rigid.replace('select = { at = [0.0, 0.0, 0.0] }\ndofs = ["ry"]',
                          'select = { at = [0.17, 0.0, 0.0] }\ndofs = ["ry"]')
    su, st, recs, out = _kfold(rigid, records, tmp_path)
    # E absorbs the clamp compliance differently per spectrum: record 1 alone reads 56.7 GPa,
    # the others 61.7-61.8 GPa (truth 66 GPa with a compliant clamp); measured p_min = 3.3e-5
    # (seeds 1, 11, ..., 81: p_min 0.0071 (seed 41) .. 6e-33, flagged every time)
    assert not out["passed"] and out["p_min"] < 0.01
    assert [f["validation"] for f in out["folds"]] == ["r0.csv", "r1.csv", "r2.csv"]
    assert all(f["dof"] == 1 and np.isfinite(f["T"]) for f in out["folds"])
    with pytest.raises(ValueError, match="at least two records"):
        kfold_inadequacy(su, recs[:1], st)
