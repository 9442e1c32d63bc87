"""The smoother's uncertainty and model check on the way out: MQTT payloads (JSON and binary),
replay CSV, the daemon's meta/estimates/health over a real Mosquitto, the monitor."""

import json

import numpy as np
import pytest

from edge.daemon.mqtt import encode_estimates, decode_estimates
from edge.estimator import Estimator
from edge.flags import FLAG_MODEL_SUSPECT
from edge.monitor import DeviceView, render
from offline.smoother import ForceModel, attach_smoother, design_smoother
from tests.helpers import chain_bundle


@pytest.fixture(scope="module")
def smoother_path(tmp_path_factory):
    b = chain_bundle(n=6, kinds=("displacement", "acceleration"))
    fm = [ForceModel("bandpass", (5.0, 80.0), 1.0, 2)]
    sb = attach_smoother(b, design_smoother(b, fm, lag=3), fm, 0.0, nis_window_s=0.5,
                         bands=[(20, 22), (22, 24)])
    p = tmp_path_factory.mktemp("smoother") / "chain_kf.npz"
    sb.save(p)
    return p


@pytest.mark.parametrize("fmt", ["json", "binary"])
def test_estimates_payload_with_std_round_trips(fmt):
    t = np.arange(4, dtype=np.int64) * 1_000_000
    v = np.array([[np.nan, np.nan], [1.5, -2.0], [0.1, 3.0], [1e-9, 7.0]])
    std = np.array([0.25, 1e-3])
    fl = np.array([2, 0, 32, 0], np.uint8)
    d = decode_estimates(encode_estimates(5, t, v, fl, fmt, std=std))
    np.testing.assert_array_equal(d["v"], v)
    assert d["s"].shape == v.shape
    np.testing.assert_array_equal(d["s"][1:], np.broadcast_to(std, (3, 2)))
    assert np.all(np.isnan(d["s"][0]))  # no value, no std
    if fmt == "json":
        raw = json.loads(encode_estimates(5, t, v, fl, fmt, std=std))
        assert raw["s"][0] == [None, None] and raw["s"][1] == [0.25, 1e-3]
    # without std: the old payloads (binary version 1, no "s")
    old = encode_estimates(5, t, v, fl, fmt)
    assert "s" not in decode_estimates(old)
    if fmt == "binary":
        assert old[4:6] == b"\x01\x00"


def test_replay_csv_has_std_columns_and_model_flag(smoother_path, tmp_path):
    from edge.csvio import read_table, write_table
    from edge.replay import replay

    rng = np.random.default_rng(8)
    nt = 2000
    t = np.arange(nt) * 1e-3
    Y = np.column_stack([1e-4 * np.sin(2 * np.pi * 21 * t), 0.3 * np.sin(2 * np.pi * 21 * t)])
    Y += 1e-6 * rng.standard_normal(Y.shape)
    inp = tmp_path / "m.csv"
    write_table(inp, t, Y, ["y0", "y1"])
    out = tmp_path / "e.csv"
    assert replay(inp, smoother_path, out) == 0
    te, data, names = read_table(out)
    assert names == ["F", "u_mid", "a_mid", "F_std", "u_mid_std", "a_mid_std", "flags"]
    est = Estimator(str(smoother_path))
    steady = est.std.copy() if est._startup is None else None
    # each row with the std it was stated with: a sample-by-sample reference reading the
    # estimator's std before each sample (wider in the start-up: kf_startup_var)
    ref = Estimator(str(smoother_path))
    S = []
    for k in range(nt):
        S.append(ref.std.copy())
        ref.run(Y[k:k + 1])
    np.testing.assert_allclose(data[:, 3:6], np.array(S)[3:], rtol=1e-15)
    assert steady is None and np.all(data[:, 3:6] >= ref._base_std * (1 - 1e-12))
    F, Z, fl = est.run(Y)
    np.testing.assert_array_equal(data[:, 0], F[3:, 0])
    # a 21 Hz line is not the model's band-limited random force: the check band pair sees it
    flags = data[:, -1].astype(int)
    np.testing.assert_array_equal(flags, fl[3:])
    assert np.any(flags & FLAG_MODEL_SUSPECT)


def test_daemon_publishes_std_and_model_check(smoother_path, tmp_path, mosquitto, subscriber):
    from edge.daemon.app import run_daemon
    from edge.daemon.config import config_from_dict

    cfg = config_from_dict({
        "device": {"id": "kf"}, "bundle": {"path": str(smoother_path)},
        "channels": [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0, "unit": "m"},
                     {"name": "y1", "pin": "AIN1", "sensitivity": 0.01}],
        "mqtt": {"host": "127.0.0.1", "port": mosquitto.port, "health_interval_s": 0.2},
        # real clock: health every 0.2 s over 3 s (a virtual-clock run can finish before the
        # first health message; 1.5 s left too few on a loaded machine)
        "simulate": {"clock": "real", "duration_s": 3.0, "seed": 3, "level": "signal"}})
    sub = subscriber(["vsense/kf/estimates", "vsense/kf/meta", "vsense/kf/health"], "s-kf")
    assert run_daemon(cfg, simulate=True, install_signals=False) == 0
    assert sub.wait(lambda: sub.get("vsense/kf/meta") and sub.get("vsense/kf/estimates")
                    and any("model_check" in json.loads(p)
                            for p, _ in sub.get("vsense/kf/health")), 20)
    meta = json.loads(sub.get("vsense/kf/meta")[-1][0])
    assert meta["std_columns"] == ["F_std", "u_mid_std", "a_mid_std"]
    assert meta["estimator"] == "smoother" and meta["delay_samples"] == 3
    est = Estimator(str(smoother_path))
    steady = est._base_std
    # at least the steady std, and wider at the start (kf_startup_var: the estimator starts at
    # 0 on a moving structure), narrowing as the data arrive
    first = None
    for p, _ in sub.get("vsense/kf/estimates"):
        d = json.loads(p)
        assert len(d["s"]) == len(d["v"]) and all(len(r) == 3 for r in d["s"])
        for v, s in zip(d["v"], d["s"]):
            if v[0] is not None:
                assert np.all(np.array(s) >= steady * (1 - 1e-12))
                first = s if first is None else first
                last = s
    assert np.all(np.array(last) <= np.array(first) * (1 + 1e-12))
    checks = [json.loads(p)["model_check"] for p, _ in sub.get("vsense/kf/health")]
    mc = checks[-1]
    assert mc["dof"] == 1000 and mc["window_s"] == pytest.approx(0.5)
    assert isinstance(mc["suspect"], bool)
    # health messages after the 0.5 s window has filled carry the statistic and its p-value
    # (an estimator reset after lost samples on a loaded machine restarts the window)
    for c in checks:
        assert (c["nis"] is None) == (c["p_value"] is None)
        if c["nis"] is not None:
            assert c["nis"] > 0 and 0.0 <= c["p_value"] <= 1.0
    # the monitor shows value ± std and the model check
    view = DeviceView()
    view.feed("meta", sub.get("vsense/kf/meta")[-1][0])
    view.feed("estimates", sub.get("vsense/kf/estimates")[-1][0])
    view.feed("health", json.dumps({"model_check": mc}).encode())
    text = render(view, "kf", "test")
    assert "±" in text and "NIS/dof" in text
