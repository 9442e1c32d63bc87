"""The daemon's [[fatigue]] hotspots end to end: simulated ADC, real Mosquitto (the session's
broker), virtual clock. Reference: a fresh counter (edge/fatigue) fed the estimates the
daemon published, in one block; the count does not depend on the cut, so the published
summary equals it exactly."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from edge.daemon.app import run_daemon
from edge.daemon.config import ConfigError, config_from_dict
from edge.daemon.mqtt import decode_estimates
from edge.fatigue import HistogramBins, Hotspot, RainflowCounter, curve
from tests.helpers import chain_bundle

pytestmark = pytest.mark.mqtt
FAT = {"output": "u_mid", "curve": "DNV-D-air", "scale": 1e9, "range_max": 1e-6,
       "mean_lo": -1e-6, "mean_hi": 1e-6, "bins": 16, "save_every_s": 0.2,
       "publish_every_s": 0.2}


@pytest.fixture(scope="module")
def bundle_path(tmp_path_factory):
    b = chain_bundle(window=3, kinds=("displacement", "acceleration"))
    p = tmp_path_factory.mktemp("fatbundle") / "chain.npz"
    b.save(p)
    return p


def _cfg(tmp_path, bundle_path, port, duration, fatigue, clock="virtual", commands=(),
         dev="fat"):
    return config_from_dict({
        "device": {"id": dev}, "bundle": {"path": str(bundle_path)},
        "channels": [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0, "unit": "m"},
                     {"name": "y1", "pin": "AIN1", "sensitivity": 0.01}],
        "mqtt": {"host": "127.0.0.1", "port": port, "reconnect_min_s": 0.1,
                 "reconnect_max_s": 0.5, "health_interval_s": 0.5,
                 "commands": list(commands)},
        "recorder": {"enabled": False}, "realtime": {"gc": "freeze"},
        "simulate": {"clock": clock, "duration_s": duration, "seed": 3,
                     "level": "signal"},
        "fatigue": fatigue})


def _estimates(sub, n_before=0):
    parts = [decode_estimates(p) for p, _ in sub.get("vsense/fat/estimates")[n_before:]]
    return np.concatenate([p["v"] for p in parts])


def test_daemon_counts_publishes_saves_and_resumes(tmp_path, bundle_path, mosquitto,
                                                   subscriber):
    state = tmp_path / "u_mid.state"
    fat = [dict(FAT, state_file=str(state))]
    sub = subscriber(["vsense/fat/estimates", "vsense/fat/fatigue/u_mid"], "s-fat")
    assert run_daemon(_cfg(tmp_path, bundle_path, mosquitto.port, 2.0, fat), simulate=True,
                      install_signals=False) == 0
    n1 = 2000 - 2  # the last `delay` samples have no estimate at stop
    assert sub.wait(lambda: sum(len(decode_estimates(p)["seq"]) for p, _ in
                                sub.get("vsense/fat/estimates")) >= n1, 20)
    assert sub.wait(lambda: any(json.loads(p)["samples"] == n1
                                for p, _ in sub.get("vsense/fat/fatigue/u_mid")), 20)
    V1 = _estimates(sub)
    col = 1  # columns F, u_mid, a_mid
    ref = RainflowCounter([Hotspot("u_mid", curve("DNV-D-air"), 1e9,
                                   HistogramBins(1e-6, -1e-6, 1e-6))], n_range=16, n_mean=16)
    ref.update(np.ascontiguousarray(V1[:, col]))
    last = json.loads(sub.get("vsense/fat/fatigue/u_mid")[-1][0])
    want = ref.summary()
    for k in ("cycles", "damage", "damage_with_residue", "samples", "gaps", "residue"):
        assert last[k] == want[k], k          # same kernel, same samples: exactly equal
    assert last["damage"] > 0 and last["cycles"] > 10 and state.exists()
    np.testing.assert_array_equal(last["histogram"]["counts"], ref.hist[0])
    # a restart resumes from the saved state: run 2 adds its samples to run 1's count
    k1 = len(sub.get("vsense/fat/estimates"))
    assert run_daemon(_cfg(tmp_path, bundle_path, mosquitto.port, 1.0, fat), simulate=True,
                      install_signals=False) == 0
    n2 = 1000 - 2
    assert sub.wait(lambda: any(json.loads(p)["samples"] == n1 + n2
                                for p, _ in sub.get("vsense/fat/fatigue/u_mid")), 20)
    assert sub.wait(lambda: sum(len(decode_estimates(p)["seq"]) for p, _ in
                                sub.get("vsense/fat/estimates")[k1:]) >= n2, 20)
    ref.update(np.ascontiguousarray(_estimates(sub, k1)[:, col]))
    last = json.loads(sub.get("vsense/fat/fatigue/u_mid")[-1][0])
    assert last["samples"] == n1 + n2 and last["damage"] == ref.summary()["damage"]


def test_bad_fatigue_config_is_named(tmp_path, bundle_path):
    with pytest.raises(ConfigError, match=r"\[\[fatigue\]\] #0 curve"):
        _cfg(tmp_path, bundle_path, 1883, 1.0, [dict(FAT, curve="EN-72")])
    with pytest.raises(ConfigError, match="mean_hi"):
        _cfg(tmp_path, bundle_path, 1883, 1.0, [dict(FAT, mean_hi=-2e-6)])
    cfg = _cfg(tmp_path, bundle_path, 1883, 1.0, [dict(FAT, output="nope")])
    assert run_daemon(cfg, simulate=True, install_signals=False) == 2   # EXIT_CONFIG


def test_reset_and_export_commands(tmp_path, bundle_path, mosquitto, subscriber):
    """Real clock, 3 s: export returns the last published summary, reset zeroes the count
    before the next block (and saves the zeroed state), an unknown hotspot is refused by
    name; both commands are listed in [mqtt] commands (the existing allow-list)."""
    state = tmp_path / "c.state"
    cfg = _cfg(tmp_path, bundle_path, mosquitto.port, 3.0, [dict(FAT, state_file=str(state))],
               clock="real", commands=("fatigue_reset", "fatigue_export"), dev="fatc")
    topic = "vsense/fatc/fatigue/u_mid"
    sub = subscriber([topic, "vsense/fatc/cmd/reply", "vsense/fatc/status"], "s-fat-cmd")
    codes = []
    th = threading.Thread(target=lambda: codes.append(
        run_daemon(cfg, simulate=True, install_signals=False)))
    th.start()
    try:
        # running (the daemon listens on cmd) and counting
        assert sub.wait(lambda: any(json.loads(p)["state"] == "running"
                                    for p, _ in sub.get("vsense/fatc/status")), 20)
        assert sub.wait(lambda: any(json.loads(p)["samples"] > 200 for p, _ in sub.get(topic)),
                        20)
        sub.publish("vsense/fatc/cmd", json.dumps({"cmd": "fatigue_export", "id": 1}))
        assert sub.wait(lambda: len(sub.get("vsense/fatc/cmd/reply")) >= 1, 20)
        rep = json.loads(sub.get("vsense/fatc/cmd/reply")[0][0])
        assert rep["ok"] and rep["fatigue"]["u_mid"]["samples"] > 200
        sub.publish("vsense/fatc/cmd", json.dumps({"cmd": "fatigue_reset", "id": 2,
                                                  "args": {"output": "u_mid"}}))
        assert sub.wait(lambda: len(sub.get("vsense/fatc/cmd/reply")) >= 2, 20)
        assert json.loads(sub.get("vsense/fatc/cmd/reply")[1][0])["ok"]
        sub.publish("vsense/fatc/cmd", json.dumps({"cmd": "fatigue_reset", "id": 3,
                                                  "args": {"output": "nope"}}))
        assert sub.wait(lambda: len(sub.get("vsense/fatc/cmd/reply")) >= 3, 20)
        bad = json.loads(sub.get("vsense/fatc/cmd/reply")[2][0])
        assert not bad["ok"] and "nope" in bad["reason"]
    finally:
        th.join(30)
    assert codes == [0]
    c = RainflowCounter([Hotspot("u_mid", curve("DNV-D-air"), 1e9,
                                 HistogramBins(1e-6, -1e-6, 1e-6))], n_range=16, n_mean=16)
    from edge.fatigue.persist import restore
    assert restore(state, c) == "restored"
    # after the reset the count started again: fewer samples than the run's 3,000
    assert c.summary()["samples"] < 2998 - 200
    # the summary published at the stop (FatigueMonitor.close, after the last save) is the
    # saved state: wait for it, not for whichever periodic summary came before it
    assert sub.wait(lambda: json.loads(sub.get(topic)[-1][0])["samples"] ==
                    c.summary()["samples"], 20), (json.loads(sub.get(topic)[-1][0]),
                                                  c.summary())
    final = json.loads(sub.get(topic)[-1][0])
    assert c.summary()["damage"] == final["damage"]


def test_monitor_shows_the_fatigue_summary():
    from edge.monitor.render import render
    from edge.monitor.view import DeviceView

    view = DeviceView()
    view.feed("fatigue/root", json.dumps({"curve": "EN-71", "damage": 1.25e-3,
                                          "damage_with_residue": 1.5e-3, "cycles": 420.5,
                                          "residue": 17, "samples": 120000,
                                          "overflow": 2}).encode(), now=0.0)
    view.feed("fatigue/bad", b"not json", now=0.0)     # counted, never raised
    text = render(view, "dev1", "h:1883", now=0.0)
    assert ("fatigue   root (EN-71): D = 0.00125 (with the residue 0.0015), 420.5 cycles, "
            "residue 17, 120,000 samples, residue overflow 2") in text
    assert view.n_bad_payloads == 1 and "bad" not in view.fatigue
