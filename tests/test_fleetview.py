"""`vsense-edge monitor --fleet` (edge.monitor.fleet): the pure collector and renderer, and the
command against the session's Mosquitto with simulated devices on the daemon's publisher."""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from edge.cli import main
from edge.daemon.mqtt import encode_estimates
from edge.monitor.fleet import FleetView, render_fleet

ROOT = Path(__file__).resolve().parents[1]


def _batch(seq0, n, fmt):
    return encode_estimates(seq0, np.arange(seq0, seq0 + n) * 1_000_000, np.zeros((n, 2)),
                            np.zeros(n, np.uint8), fmt)


@pytest.mark.parametrize("fmt", ["json", "binary"])
def test_fleet_view_counts_dedups_and_marks_stale(fmt):
    v = FleetView("vsense")
    v.feed("vsense/a/status", b'{"state": "running", "bundle": "b1"}', now=0.0)
    v.feed("vsense/a/meta", b'{"bundle_id": "b1"}', now=0.0)
    # 20 batches of 50 every 0.05 s = 1,000 samples/s exactly (constructed arrivals)
    for k in range(20):
        v.feed("vsense/a/estimates", _batch(50 * k, 50, fmt), now=0.05 * k)
    v.feed("vsense/a/estimates", _batch(900, 50, fmt), now=0.96)        # redelivered
    v.feed("vsense/a/health", json.dumps({"latency_us": {"p99": 412.0}, "lost_samples": 3,
                                          "publish": {"drops_samples": 0},
                                          "cpu_percent": 7.25}).encode(), now=0.97)
    v.feed("vsense/b/status", b'{"state": "offline"}', now=0.0)
    v.feed("vsense/c/status", b'{"state": "running"}', now=0.0)
    for bad in (b"\xff", b"[]", b"{"):
        v.feed("vsense/c/status", bad, now=0.0)
    v.feed("vsense/c/estimates", b"VSE1", now=0.0)                       # truncated binary
    v.feed("other/x/status", b'{"state": "running"}', now=0.0)           # other root: ignored
    a = v.devices["a"]
    assert a["samples"] == 1000 and a["max_seq"] == 999
    # rate: 19 batches after the first over 0.95 s, then the duplicate adds nothing
    assert v.rate(a, 0.96) == pytest.approx(950 / 0.96, rel=1e-12)
    assert v.devices["c"]["bad"] == 4 and "x" not in v.devices
    text = render_fleet(v, "h:1", now=20.0, stale_s=15.0)
    lines = text.splitlines()
    assert "3 devices" in lines[0]
    rows = {ln.split()[0]: ln for ln in lines[2:]}
    assert "running (stale)" in rows["a"] and "412" in rows["a"] and "7.2" in rows["a"]
    assert rows["b"].split()[1] == "offline"   # a device that said offline is not stale
    assert "4 bad payloads" in rows["c"]


def _fleet_module():
    spec = importlib.util.spec_from_file_location("fleet", ROOT / "benchmarks" / "fleet.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


@pytest.mark.mqtt
def test_monitor_fleet_once_lists_every_device(mosquitto, capsys):
    fm = _fleet_module()
    fl = fm.Fleet(3, mosquitto.host, mosquitto.port, "binary", 50, prefix="fv")
    gone = fm.Fleet(1, mosquitto.host, mosquitto.port, "json", 50, prefix="fvgone")
    gone.start()
    gone.stop(final_state=None)   # connection dropped: the broker publishes the last will
    fl.start()
    th = threading.Thread(target=fl.run, args=(6.0,), daemon=True)
    th.start()
    try:
        code = main(["monitor", "--broker", f"{mosquitto.host}:{mosquitto.port}", "--fleet",
                     "--once", "--timeout", "10"])
    finally:
        fl.stop_event.set()
        th.join(10)
        fl.stop()
    out = capsys.readouterr().out
    assert code == 0, out
    rows = {ln.split()[0]: ln.split() for ln in out.splitlines()[2:] if ln.strip()}
    for i in range(3):
        r = rows[f"fv{i:03d}"]
        assert r[1] == "running" and r[2] == "chain-fleet" and int(r[4].replace(",", "")) > 0
    assert rows["fvgone000"][1] == "offline"


def test_monitor_needs_device_or_fleet(capsys):
    assert main(["monitor", "--broker", "localhost:1"]) == 2
    assert "--fleet" in capsys.readouterr().err


@pytest.mark.mqtt
def test_fleet_benchmark_names_a_crashed_device_process(capsys):
    """benchmarks/fleet.py: a device process that dies (here: a payload format the daemon's
    config rejects) is reported with its exit code and the end of its stderr, not as an
    IndexError from its missing result line."""
    from conftest import _mosquitto_binary

    if _mosquitto_binary() != "/usr/sbin/mosquitto":
        pytest.skip("benchmarks/fleet.py starts /usr/sbin/mosquitto")
    spec = importlib.util.spec_from_file_location("fleet_bench", ROOT / "benchmarks" / "fleet.py")
    fleet = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fleet)
    assert fleet.main(["--devices", "1", "--formats", "xml", "--duration", "0.5",
                       "--procs", "1"]) == 1
    err = capsys.readouterr().err
    assert "1 devices, xml, batch 50: device process 0 (devices 0..0) exited with code 1 " \
           "without a result; its stderr ends with:" in err, err
    assert "[mqtt] format: must be one of json, binary; got 'xml'" in err
    assert "IndexError" not in err
