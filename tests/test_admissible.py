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


def test_daemon_auto_update_refuses_a_failed_family(tmp_path_factory, tmp_path, mosquitto,
                                                    subscriber):
    """A bundle whose meta marks a failed inadequacy test: scheduled identifications are
    published with the reason and never applied (no model id), auto_update on."""
    import json

    from edge.bundle import Bundle
    from edge.daemon.app import run_daemon
    from edge.daemon.config import config_from_dict
    from offline.cli import main as cli_main
    from test_model_update import STRIP

    d = tmp_path_factory.mktemp("admissible")
    (d / "strip.toml").write_text(STRIP)
    assert cli_main(["build", str(d / "strip.toml"), "-o", str(d / "strip.npz"), "--quiet",
                     "--maps-cache", str(d / "cache")]) == 0
    b = Bundle.load(d / "strip.npz")
    bad = tmp_path / "failed.npz"
    b.replace(meta={**b.meta, "calibration": {**GOOD, "model_inadequate": True, "inadequacy":
                                              {"passed": False, "p_min": 3.3e-5, "alpha": 0.05}}}
              ).save(bad)
    sub = subscriber(["vsense/adm/params"], "s-adm")
    base = {"device": {"id": "adm"}, "bundle": {"path": str(bad)},
            "mqtt": {"host": "127.0.0.1", "port": mosquitto.port, "health_interval_s": 0.5},
            "recorder": {"dir": str(tmp_path / "rec"), "fsync_interval_s": 0.2}}
    cfg = config_from_dict({**base, "channels": [{"name": "d110", "pin": "AIN0",
                                                  "sensitivity": 1000.0, "unit": "m"}],
                            "inverse": {"identify_every_s": 1.0, "auto_update": True},
                            "simulate": {"clock": "real", "duration_s": 4.0, "seed": 5,
                                         "level": "signal", "amplitude": 0.05}})
    # the daemon runs its simulated 4 s and returns (no thread needed: nothing is sent to it)
    assert run_daemon(cfg, simulate=True, install_signals=False) == 0
    # one window completes within ~1 + 1.6 s of the 4 s run (test_model_update's schedule)
    assert sub.wait(lambda: len(sub.get("vsense/adm/params")) >= 1, 5)
    got = [json.loads(p) for p, _ in sub.get("vsense/adm/params")]
    # an in-range identification exists (without the gate it would carry a model id)
    assert any("values" in r and not r["out_of_range"] for r in got), got
    for res in got:
        assert "model_id" not in res
        if "values" in res and not res["out_of_range"]:
            assert "failed the inadequacy test (p_min 3.3e-05" in res["update_rejected"]
