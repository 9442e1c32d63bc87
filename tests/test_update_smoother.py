"""Issue 26 item 2: `update_model` on a Kalman-smoother bundle.

Before the fix every in-bounds `update_model` on a smoother bundle logged a traceback and
replied `TypeError: SmootherEstimator.swap() got an unexpected keyword argument 'bundle'`.
The smoother's gains (Riccati solution, fixed-lag gains, whitening, model-check thresholds)
follow from the model and are computed offline (scipy); the device cannot recompute them, so
the command is refused with a reply that says why and what to do, and the estimator keeps
running the bundle's model. The Tikhonov estimator's update is tested in
tests/test_calibration_edge.py and tests/test_model_update.py.
"""

from __future__ import annotations

import json
import logging
import threading

import numpy as np
import pytest

from edge import inverse as EI
from edge.bundle import Bundle, IdentifiedForce, SensorChannel
from edge.daemon.app import build_daemon
from edge.daemon.mqtt import decode_estimates
from edge.daemon.config import config_from_dict
from edge.estimator import Estimator
from edge.estimator.operator import EstimatorError, derive_operator
from offline.calibration.setup import from_model_file
from offline.smoother import ForceModel, attach_smoother, design_smoother
from test_calibration_edge import POST
from test_inverse import BEAM_TOML

REASON = "not available with the Kalman smoother estimator"


@pytest.fixture(scope="module")
def smoother_bundle(tmp_path_factory):
    """The strip of test_calibration_edge with its parametric model, run by the smoother."""
    d = tmp_path_factory.mktemp("upd_smoother")
    path = d / "strip.toml"
    path.write_text(BEAM_TOML)
    parts = from_model_file(path, progress=False).pm.parts
    M, C, K = EI.matrices(parts, parts.theta0)
    arrays, pmeta = parts.to_extras()
    b = Bundle(M=M, C=C, K=K, dt=1e-3,
               channels=[SensorChannel("d110", dof=0, weight=1e8)],  # noise 0.1 mm
               forces=[IdentifiedForce("F", dof=0)], alpha=1e-6, window=1,
               extras=arrays, meta={"inverse": {"maps": {}, "parts": pmeta}})
    fm = [ForceModel("bandpass", (5.0, 80.0), 1.0, 2)]
    sb = attach_smoother(b, design_smoother(b, fm, lag=5), fm, 0.0)
    assert sb.method == "smoother"
    out = d / "strip_smoother.npz"
    sb.save(out)
    return out


def test_swap_on_the_smoother_is_refused_with_the_reason(smoother_bundle):
    est = Estimator(Bundle.load(smoother_bundle))
    nb = est.bundle.replace(K=1.05 * est.bundle.K)
    with pytest.raises(EstimatorError, match=REASON):
        est.swap(derive_operator(nb.replace(kf={}, meta={})), bundle=nb)
    assert est.update_refused() and REASON in est.update_refused()


def test_auto_update_with_a_smoother_bundle_is_a_config_error(smoother_bundle, tmp_path):
    from edge.daemon.app import StartupError, preflight

    cfg = config_from_dict({
        "device": {"id": "au"}, "bundle": {"path": str(smoother_bundle)},
        "channels": [{"name": "d110", "pin": "AIN0"}], "mqtt": {"enabled": False},
        "recorder": {"enabled": False}, "inverse": {"auto_update": True},
        "simulate": {"level": "signal", "clock": "virtual"}})
    with pytest.raises(StartupError, match=r"\[inverse\] auto_update: .*" + REASON) as e:
        preflight(cfg, simulate=True)
    assert e.value.code == 2


def test_update_model_on_a_smoother_bundle_replies_why_over_mqtt(
        smoother_bundle, tmp_path, mosquitto, subscriber, caplog):
    dev = "updsm"
    cfg = config_from_dict({
        "device": {"id": dev}, "bundle": {"path": str(smoother_bundle)},
        "channels": [{"name": "d110", "pin": "AIN0", "sensitivity": 1000.0, "unit": "m"}],
        "mqtt": {"host": "127.0.0.1", "port": mosquitto.port, "health_interval_s": 0.5,
                 "commands": ["update_model"]},
        "recorder": {"enabled": False},
        "simulate": {"clock": "real", "duration_s": 0.0, "seed": 5, "level": "signal",
                     "amplitude": 0.05}})
    t = f"vsense/{dev}"
    sub = subscriber([f"{t}/status", f"{t}/cmd/reply", f"{t}/estimates", f"{t}/meta"],
                     "s-updsm")
    d = build_daemon(cfg, simulate=True)
    d.pub.start()
    codes = []
    th = threading.Thread(target=lambda: codes.append(d.run()))
    caplog.set_level(logging.ERROR)
    th.start()
    try:
        assert sub.wait(lambda: any(json.loads(p)["state"] == "running"
                                    for p, _ in sub.get(f"{t}/status")), 30)
        sub.publish(f"{t}/cmd", b'{"cmd": "update_model", "id": 1, '
                                b'"args": {"params": {"E": 65e9, "zeta": 0.012}}}')
        sub.publish(f"{t}/cmd", json.dumps({"cmd": "update_model", "id": 2,
                                            "args": {"calibration": POST}}).encode())
        assert sub.wait(lambda: len(sub.get(f"{t}/cmd/reply")) == 2, 15)
        n = len(sub.get(f"{t}/estimates"))
        assert sub.wait(lambda: len(sub.get(f"{t}/estimates")) > n + 2, 15)  # still running
    finally:
        d.stop()
        th.join(30)
    assert codes == [0]
    replies = {r["id"]: r for r in (json.loads(p) for p, _ in sub.get(f"{t}/cmd/reply"))}
    for i in (1, 2):
        assert replies[i]["ok"] is False and REASON in replies[i]["reason"], replies[i]
        assert "TypeError" not in replies[i]["reason"]
    assert not [r for r in caplog.records if "command update_model failed" in r.message]
    # the running model is the bundle's: no model id was published
    assert not any("model_id" in json.loads(p) for p, _ in sub.get(f"{t}/meta"))
    # the estimates are the smoother's, finite after its warm-up (reference: the bundle)
    last = decode_estimates(sub.get(f"{t}/estimates")[-1][0])
    assert np.all(np.isfinite(last["v"])) and not np.any(last["flags"])
