"""edge.admissible: auto_update applies a model update only when the bundle's calibration
checks (inadequacy test, nonlinearity measure, convergence) allow it (issue 17)."""

from __future__ import annotations

import math

import pytest

from edge.admissible import MAX_NONLINEARITY, allow, refusal

GOOD = {"names": ["E", "k_root"], "nonlinearity": {"E": 0.002, "k_root": 0.04},
        "converged": True, "inadequacy": {"passed": True, "p_min": 0.57, "alpha": 0.05},
        "model_inadequate": False}


def test_no_calibration_or_passed_checks_allow():
    assert refusal(None) is None and refusal({}) is None
    assert refusal(GOOD) is None
    res = {"values": [1.0]}
    assert allow(res, {"calibration": GOOD}) and "update_rejected" not in res
    assert allow(res, {}) and allow(res, None)


@pytest.mark.parametrize("change, words", [
    ({"model_inadequate": True}, "failed the inadequacy test"),
    ({"inadequacy": {"passed": False, "p_min": 3.3e-5, "alpha": 0.05}}, "p_min 3.3e-05"),
    ({"nonlinearity": {"E": 0.002, "k_root": 0.51}}, "'k_root' is 0.51 > 0.5"),
    ({"nonlinearity": {"E": math.nan}}, "'E' is nan"),
    ({"nonlinearity": {"E": "big"}}, "'E' is 'big'"),
    ({"converged": False}, "did not converge"),
    ({"nonlinearity": [0.1]}, "not a table"),
    ({"inadequacy": "failed"}, "not a table"),
])
def test_each_failed_check_refuses_with_its_reason(change, words):
    why = refusal({**GOOD, **change})
    assert why is not None and words in why
    res = {"values": [1.0]}
    assert not allow(res, {"calibration": {**GOOD, **change}})
    assert res["update_rejected"].startswith("auto_update refused: ") and words in res["update_rejected"]


def test_reasons_are_all_named_and_threshold_is_inclusive():
    bad = {**GOOD, "model_inadequate": True, "converged": False}
    why = refusal(bad)
    assert "inadequacy" in why and "converge" in why and why.count("; ") == 1
    # L exactly at the threshold is allowed (<=), above it refused
    assert refusal({**GOOD, "nonlinearity": {"E": MAX_NONLINEARITY}}) is None
    assert refusal({**GOOD, "nonlinearity": {"E": 0.3}}, max_nonlinearity=0.2) is not None
    assert "expected a table" in refusal(["not", "a", "dict"])
