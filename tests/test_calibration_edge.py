"""Edge side of calibration: update_model with a calibration posterior (issue 17)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from edge import inverse as EI
from edge.bundle import Bundle, IdentifiedForce, SensorChannel
from edge.estimator import Estimator
from offline.calibration.setup import from_model_file
from test_inverse import BEAM_TOML

POST = {"names": ["E", "zeta", "k_root", "m_tip"], "kinds": ["modulus", "damping_ratio", "spring", "mass"],
        "mean": [66e9, 0.012, 7.0, 0.001], "std": [1e8, 1e-4, 0.05, 1e-5],
        "free_energy": 1234.5, "converged": True,
        "nonlinearity": {"E": 0.05, "zeta": 0.001, "k_root": 0.07, "m_tip": 0.01},
        "inadequacy": {"passed": True, "p_min": 0.4, "alpha": 0.05}}


class _Sink:
    """Collects what the hook publishes (topic, JSON)."""

    def __init__(self):
        self.topics = SimpleNamespace(params="params", meta="meta")
        self.sent = []

    def send(self, topic, payload):
        self.sent.append((topic, json.loads(payload)))


@pytest.fixture()
def daemon(tmp_path):
    path = tmp_path / "strip.toml"
    path.write_text(BEAM_TOML)
    parts = from_model_file(path).pm.parts
    M, C, K = EI.matrices(parts, parts.theta0)
    arrays, pmeta = parts.to_extras()
    b = Bundle(M=M, C=C, K=K, dt=1e-3, channels=[SensorChannel("d110", dof=0)],
               forces=[IdentifiedForce("F", dof=0)], alpha=1e-6, window=10,
               extras=arrays, meta={"inverse": {"maps": {}, "parts": pmeta}})
    d = SimpleNamespace(est=Estimator(b), pub=_Sink())
    EI.InverseHook.attach(d, EI.InversePort.of(d.est, d.pub))
    return d


def test_update_model_applies_a_calibration_and_publishes_std_and_F(daemon):
    out = EI._cmd_update_model(daemon, {"calibration": POST})
    assert out["model_id"]
    params = [p for t, p in daemon.pub.sent if t == "params"][-1]
    assert params["source"] == "calibration" and params["free_energy"] == 1234.5
    assert params["std"]["E"] == 1e8 and params["values"][0] == 66e9
    meta = [p for t, p in daemon.pub.sent if t == "meta"][-1]
    assert meta["params"]["k_root"] == 7.0
    # the estimator now runs K̂(θ) of the posterior medians (edge.inverse.matrices, 1e-12)
    M, C, K = EI.matrices(daemon.inverse.rt.parts, np.array(POST["mean"]))
    np.testing.assert_allclose(daemon.est.bundle.K, K, rtol=1e-12)


@pytest.mark.parametrize("change, reason", [
    ({"inadequacy": {"passed": False, "p_min": 0.01}}, "failed the inadequacy test"),
    ({"nonlinearity": {"E": 0.9}}, "nonlinearity measure of 'E' is 0.9 > 0.5"),
    ({"converged": False}, "did not converge"),
])
def test_untrustworthy_calibration_is_refused_unless_forced(daemon, change, reason):
    from edge.daemon.mqtt import CommandError
    bad = {**POST, **change}
    with pytest.raises(CommandError, match=reason):
        EI._cmd_update_model(daemon, {"calibration": bad})
    assert EI._cmd_update_model(daemon, {"calibration": bad, "force": True})["model_id"]


def test_offsets_are_not_model_parameters():
    post = {**POST, "names": POST["names"] + ["offset_d110"], "kinds": POST["kinds"] + ["offset"],
            "mean": POST["mean"] + [1e-6], "std": POST["std"] + [1e-7]}
    params, info = EI.calibration_params(post)
    assert "offset_d110" not in params and set(info["std"]) == set(params)
    with pytest.raises(EI.RejectedUpdate, match="needs 'names', 'mean' and 'std'"):
        EI.calibration_params({"names": ["E"]})
