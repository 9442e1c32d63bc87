"""Issue 17: after calibration from a force-and-response record, the operational force and
displacement estimates are as good as with the true model (FDE and NRMSE within 1.1x) for the
three model errors of the issue (truth: a different full model, exact modal engine, noise)."""

from __future__ import annotations

import pytest

from calib_truth import SCENARIOS, fde_scenario


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_calibrated_estimates_within_1p1_of_the_true_model(name, tmp_path):
    r = fde_scenario(name, tmp_path)
    # issue 17 "Must show": within 1.1x of the true model; measured (docs/calibration.md,
    # calibrated / true): E 0.98 / 0.98 / 1.00 / 1.00, clamp 0.98 / 0.97 / 0.98 / 0.98,
    # root zone 1.10 / 1.04 / 1.00 / 1.01 (force FDE, force NRMSE, d60 FDE, d60 NRMSE)
    for key in ("force_fde", "force_nrmse", "d60_fde", "d60_nrmse"):
        assert r["calibrated"][key] <= 1.1 * r["true"][key], (key, r)
