"""The edge daemon end to end (simulated ADC, real Mosquitto) and its parts.

Clock of each run is stated in the test: `virtual` = samples as fast as the loop takes them
(lossless back-pressure), `real` = paced by the monotonic clock at the bundle's rate.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from edge.daemon.app import run_daemon
from edge.daemon.config import config_from_dict
from edge.daemon.health import LatencyStats
from edge.daemon.faults import FaultTracker
from edge.daemon.sim_signal import calibrate
from edge.daemon.mqtt import decode_estimates
from edge.daemon.notify import Notifier, ProgressWatchdog
from edge.daemon.recorder import read_recording, read_recording_full
from edge.daemon.ring import Ring
from edge.flags import FLAG_GAP
from helpers import chain_bundle

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bundle_path(tmp_path_factory):
    # window 3 -> estimator delay 2 samples; channels: displacement and acceleration
    b = chain_bundle(window=3, kinds=("displacement", "acceleration"))
    p = tmp_path_factory.mktemp("bundle") / "chain.npz"
    b.save(p)
    return p


@pytest.fixture(scope="module")
def bundle1_path(tmp_path_factory):
    # one displacement channel, window 3 (delay 2): the ADS1256 reads it in continuous mode
    b = chain_bundle(window=3, kinds=("displacement",))
    p = tmp_path_factory.mktemp("bundle1") / "chain1.npz"
    b.save(p)
    return p


def _cfg(tmp_path, bundle_path, port, dev, **sections):
    d = {"device": {"id": dev}, "bundle": {"path": str(bundle_path)},
         "channels": [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0, "unit": "m"},
                      {"name": "y1", "pin": "AIN1", "sensitivity": 0.01}],
         "mqtt": {"host": "127.0.0.1", "port": port, "reconnect_min_s": 0.1, "commands": ["*"],
                  "reconnect_max_s": 0.5, "health_interval_s": 0.5},
         "recorder": {"dir": str(tmp_path / "rec"), "fsync_interval_s": 0.2},
         "realtime": {"gc": "freeze"},
         "simulate": {"clock": "virtual", "duration_s": 2.0, "seed": 3, "level": "signal"}}
    for k, v in sections.items():
        d[k] = dict(d.get(k, {}), **v) if isinstance(v, dict) else v
    return config_from_dict(d)


def _replay(rec_dir, bundle_path, tmp_path):
    """Estimates of `vsense-edge replay` over the recording (forces then outputs per row,
    rows describing samples delay..); falls back to the same Estimator over read_recording
    when edge.replay is not installed."""
    try:
        import edge.replay  # noqa: F401
    except ImportError:
        from edge.estimator import Estimator

        t, Y, _ = read_recording(rec_dir)
        est = Estimator(str(bundle_path))
        F, Z, fl = est.run(Y)
        return np.hstack([F, Z])[est.delay:]
    from edge.cli import main

    out = tmp_path / "replay.csv"
    assert main(["replay", str(rec_dir), "--bundle", str(bundle_path), "-o", str(out)]) == 0
    data = np.genfromtxt(out, delimiter=",", names=True)
    return np.column_stack([data[n] for n in data.dtype.names[1:-1]])


def _collect(sub, topic):
    parts = [decode_estimates(p) for p, _ in sub.get(topic)]
    if not parts:
        return np.zeros(0, np.int64), np.zeros((0, 3))
    return (np.concatenate([p["seq"] for p in parts]),
            np.concatenate([p["v"] for p in parts]))


# ------------------------------------------------------------------------ end to end
def test_end_to_end_every_estimate_once_in_order_equal_to_replay(tmp_path, bundle1_path,
                                                                  mosquitto, subscriber):
    """10 s at 1,000 samples/s through the byte-level ADS1256 simulator and the real driver
    (continuous mode), virtual clock, QoS 1, JSON batches of 50."""
    cfg = _cfg(tmp_path, bundle1_path, mosquitto.port, "e2e",
               channels=[{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0, "unit": "m"}],
               adc={"drate": 1000.0, "mode": "continuous"},
               simulate={"duration_s": 10.0, "noise": 0.01, "level": "adc"})
    bundle_path = bundle1_path
    sub = subscriber(["vsense/e2e/estimates", "vsense/e2e/status", "vsense/e2e/meta"], "s-e2e")
    assert run_daemon(cfg, simulate=True, install_signals=False) == 0
    n_expected = 10_000 - 2  # the last `delay` = 2 samples have no estimate yet at stop
    assert sub.wait(lambda: sum(json.loads(p)["n"] for p, _ in
                                sub.get("vsense/e2e/estimates")) >= n_expected, 20)
    seq, V = _collect(sub, "vsense/e2e/estimates")
    np.testing.assert_array_equal(seq, np.arange(n_expected))  # each once, in order
    ref = _replay(tmp_path / "rec", bundle_path, tmp_path)
    assert ref.shape == V.shape
    # reference: an independent Estimator run over the recorded samples
    np.testing.assert_allclose(V, ref, rtol=0, atol=1e-12 * np.abs(ref).max())
    meta = json.loads(sub.get("vsense/e2e/meta")[-1][0])
    assert meta["delay_samples"] == 2 and meta["delay_s"] == pytest.approx(2e-3, abs=1e-15)
    assert meta["columns"] == ["F", "u_mid", "a_mid"]
    raw = read_recording_full(tmp_path / "rec")
    np.testing.assert_array_equal(raw.seq, np.arange(10_000))
    # virtual ADC clock: DRDY every 1 ms (1,000 SPS), to the simulator's ns rounding
    assert np.abs(np.diff(raw.t_ns) - 1_000_000).max() <= 1_000
    states = [json.loads(p)["state"] for p, _ in sub.get("vsense/e2e/status")]
    assert states[-1] == "stopped" and "running" in states


def test_broker_outage_recorder_complete_and_publishing_resumes(tmp_path, bundle_path,
                                                                mosquitto, subscriber):
    """Real clock, 4 s at 1,000 samples/s; the broker is down from t=1 s to t=2 s."""
    cfg = _cfg(tmp_path, bundle_path, mosquitto.port, "outage",
               simulate={"clock": "real", "duration_s": 4.0})
    sub = subscriber(["vsense/outage/estimates"], "s-outage")
    codes = []
    th = threading.Thread(target=lambda: codes.append(
        run_daemon(cfg, simulate=True, install_signals=False)))
    th.start()
    def recorded() -> int:  # raw samples on disk so far (fsync every 0.2 s)
        try:
            return int(read_recording_full(tmp_path / "rec").seq.max()) + 1
        except Exception:  # no file yet, or a chunk being written
            return 0

    def wait_for(pred, what, timeout=30.0):  # poll a condition, fail naming it on timeout
        deadline = time.monotonic() + timeout
        while not pred():
            assert time.monotonic() < deadline and th.is_alive(), f"{what} within {timeout} s"
            time.sleep(0.02)

    try:
        # the broker goes down once estimates flow, for about 1,000 samples of the run
        assert sub.wait(lambda: len(_collect(sub, "vsense/outage/estimates")[0]) > 0, 20)
        mosquitto.stop()
        down_at = recorded()
        wait_for(lambda: recorded() >= down_at + 1000, "1,000 samples recorded while down")
    finally:
        mosquitto.start()
    th.join(30)
    assert codes == [0]
    raw = read_recording_full(tmp_path / "rec")
    np.testing.assert_array_equal(raw.seq, np.arange(4000))  # nothing lost on disk
    est = read_recording_full(tmp_path / "rec", "estimates")
    np.testing.assert_array_equal(est.seq, np.arange(3998))
    assert sub.wait(lambda: len(_collect(sub, "vsense/outage/estimates")[0]) and
                    _collect(sub, "vsense/outage/estimates")[0].max() == 3997, 20)
    seq, V = _collect(sub, "vsense/outage/estimates")
    assert (seq > 2500).sum() > 1000  # publishing resumed after the restart
    useq, first = np.unique(seq, return_index=True)
    # what arrived equals the record (QoS 1 may repeat a message across the reconnection)
    np.testing.assert_array_equal(V[first], est.values[useq])


# ------------------------------------------------------------------ failure handling
def test_bad_config_exits_2_naming_the_key(tmp_path, capsys):
    from edge.cli import main

    p = tmp_path / "edge.toml"
    p.write_text('[device]\nid = "x"\n[[channels]]\nname = "y0"\npin = "AIN0"\n'
                 "[mqtt]\nqos = 7\n")
    assert main(["run", "-c", str(p), "--simulate"]) == 2
    assert "[mqtt] qos: must be one of 0, 1, 2; got 7" in capsys.readouterr().err


def test_corrupt_bundle_exits_3_and_channel_mismatch_exits_2(tmp_path, bundle_path):
    bad = tmp_path / "bad.npz"
    data = bytearray(bundle_path.read_bytes())
    data[len(data) // 2:len(data) // 2 + 64] = b"\0" * 64
    bad.write_bytes(bytes(data))
    cfg = _cfg(tmp_path, bad, 1, "b", mqtt={"enabled": False})
    assert run_daemon(cfg, simulate=True, install_signals=False) == 3
    cfg = _cfg(tmp_path, tmp_path / "missing.npz", 1, "b", mqtt={"enabled": False})
    assert run_daemon(cfg, simulate=True, install_signals=False) == 3
    cfg = _cfg(tmp_path, bundle_path, 1, "b", mqtt={"enabled": False},
               channels=[{"name": "y1", "pin": "AIN0"}, {"name": "y0", "pin": "AIN1"}])
    assert run_daemon(cfg, simulate=True, install_signals=False) == 2


def test_dead_drdy_exits_4_with_stopped_status(tmp_path, bundle_path, mosquitto, subscriber):
    cfg = _cfg(tmp_path, bundle_path, mosquitto.port, "drdy",
               simulate={"faults": ["drdy_dead:at=0.5"], "duration_s": 0.0},
               adc={"drdy_timeout_ms": 50.0})
    sub = subscriber(["vsense/drdy/status"], "s-drdy")
    assert run_daemon(cfg, simulate=True, install_signals=False) == 4
    assert sub.wait(lambda: sub.get("vsense/drdy/status") and
                    json.loads(sub.get("vsense/drdy/status")[-1][0])["state"] == "stopped")
    st = json.loads(sub.get("vsense/drdy/status")[-1][0])
    assert st["exit_code"] == 4 and "DRDY" in st["error"]
    assert len(read_recording(tmp_path / "rec")[0]) == 500  # everything before the failure


def test_sensor_fault_status_and_reset_on_recovery(tmp_path, bundle_path, mosquitto,
                                                   subscriber):
    """Virtual clock; channel y1 NaN for 100 samples from t=1 s (limit 50)."""
    cfg = _cfg(tmp_path, bundle_path, mosquitto.port, "fault",
               simulate={"faults": ["nan:ch=1:at=1.0:n=100", "saturate:ch=0:at=1.5:n=3"]},
               faults={"bad_sample_limit": 50})
    sub = subscriber(["vsense/fault/status", "vsense/fault/estimates"], "s-fault")
    assert run_daemon(cfg, simulate=True, install_signals=False) == 0
    assert sub.wait(lambda: json.loads(sub.get("vsense/fault/status")[-1][0])["state"]
                    == "stopped")
    st = [json.loads(p) for p, _ in sub.get("vsense/fault/status")]
    names = [s["state"] for s in st]
    i = names.index("sensor_fault")
    assert st[i]["faulty_channels"] == ["y1"] and "running" in names[i + 1:]
    raw = read_recording_full(tmp_path / "rec")
    assert (raw.flags[1000:1100] & 1).all() and not (raw.flags[:1000] & 5).any()
    assert (raw.flags[1500:1503] & 4).all()
    est = read_recording_full(tmp_path / "rec", "estimates")
    # estimates of samples using held values carry bit0, saturated ones bit2
    assert (est.flags[1000:1098] & 1).all() and (est.flags[1500:1503] & 4).all()
    # the reset right before sample 1100 restarts the window: rows describing 1098, 1099
    # (delay 2) are warm-up NaN (bit1), then estimates continue
    assert (est.flags[1098:1100] & 2).all() and np.isnan(est.values[1098:1100]).all()
    assert np.isfinite(est.values[1100:1400]).all()
    np.testing.assert_array_equal(est.seq, np.arange(1998))


def test_commands_pause_resume_and_malformed(tmp_path, bundle_path, mosquitto, subscriber):
    """Real clock, 3 s."""
    cfg = _cfg(tmp_path, bundle_path, mosquitto.port, "cmd",
               simulate={"clock": "real", "duration_s": 3.0})
    sub = subscriber(["vsense/cmd/status", "vsense/cmd/cmd/reply"], "s-cmd")
    codes = []
    th = threading.Thread(target=lambda: codes.append(
        run_daemon(cfg, simulate=True, install_signals=False)))
    th.start()
    assert sub.wait(lambda: any(json.loads(p)["state"] == "running"
                                for p, _ in sub.get("vsense/cmd/status")), 20)
    sub.publish("vsense/cmd/cmd", b'{"cmd": "pause", "id": 1}')
    sub.publish("vsense/cmd/cmd", b'{"cmd": "pause", "id": 2}')
    sub.publish("vsense/cmd/cmd", b'{"cmd": "fly", "id": 3}')
    sub.publish("vsense/cmd/cmd", b'{"cmd": "resume", "id": 4}')
    sub.publish("vsense/cmd/cmd", b'{"cmd": "health", "id": 5}')
    assert sub.wait(lambda: len(sub.get("vsense/cmd/cmd/reply")) == 5, 10)
    th.join(20)
    assert codes == [0]
    r = {j["id"]: j for j in (json.loads(p) for p, _ in sub.get("vsense/cmd/cmd/reply"))}
    assert r[1]["ok"] and not r[2]["ok"] and r[2]["reason"] == "already paused"
    assert not r[3]["ok"] and "unknown command 'fly'" in r[3]["reason"]
    assert r[4]["ok"] and r[5]["ok"] and r[5]["health"]["lost_samples"] == 0
    states = [json.loads(p)["state"] for p, _ in sub.get("vsense/cmd/status")]
    assert "paused" in states and states.index("paused") < len(states) - 1
    raw = read_recording_full(tmp_path / "rec")
    np.testing.assert_array_equal(raw.seq, np.arange(3000))  # raw recording went on


def test_sigterm_clean_stop_with_sd_notify(tmp_path, bundle_path):
    """Real clock, runs until SIGTERM; READY/WATCHDOG/STOPPING over a local NOTIFY_SOCKET."""
    sock_path = str(tmp_path / "notify.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(sock_path)
    s.settimeout(300)  # hang guard (the start-up takes minutes under arm64 emulation)
    cfgp = tmp_path / "edge.toml"
    cfgp.write_text(f'[device]\nid = "sig"\n[bundle]\npath = "{bundle_path}"\n'
                    '[[channels]]\nname = "y0"\npin = "AIN0"\n'
                    '[[channels]]\nname = "y1"\npin = "AIN1"\n'
                    f'[mqtt]\nenabled = false\n[recorder]\ndir = "{tmp_path / "rec"}"\n'
                    '[simulate]\nclock = "real"\nlevel = "signal"\n')
    env = dict(os.environ, NOTIFY_SOCKET=sock_path, WATCHDOG_USEC="400000")
    p = subprocess.Popen([sys.executable, "-m", "edge.cli", "run", "-c", str(cfgp),
                          "--simulate"], env=env, cwd=ROOT, stderr=subprocess.PIPE)
    try:
        msgs = []
        while not any(m.startswith("READY=1") for m in msgs):
            msgs.append(s.recv(4096).decode())
        while sum(m == "WATCHDOG=1" for m in msgs) < 2:
            msgs.append(s.recv(4096).decode())
        p.send_signal(signal.SIGTERM)
        assert p.wait(300) == 0  # hang guard
        s.settimeout(1)
        try:
            while True:
                msgs.append(s.recv(4096).decode())
        except socket.timeout:
            pass
    finally:
        if p.poll() is None:
            p.kill()
        s.close()
    assert "STOPPING=1" in msgs
    n = len(read_recording(tmp_path / "rec")[0])
    assert n > 100  # the record was flushed on the way out


# ------------------------------------------------------------------------------ parts
def test_ring_wraps_counts_overruns_and_flags_gaps():
    r = Ring(8, 1)
    for k in range(3):  # write 5, read 5, three times: wraps around
        v, t, f = r.write_span(5)
        n = len(v)
        v[:, 0] = np.arange(n) + 10 * k
        f[:] = 0
        r.commit(n)
        while r.available():
            i, m = r.read_span(8)
            r.release(m)
    assert r.head == r.tail and r.lost == 0
    while r.available() < r.capacity:  # fill (spans stop at the wrap-around point)
        v, t, f = r.write_span(8)
        f[:] = 0
        r.commit(len(v))
    assert r.available() == 8
    full_head = r.head
    v, t, f = r.write_span(4)  # full: scratch buffer, samples lost
    r.commit(4)
    assert (r.lost, r.overruns) == (4, 1)
    while r.available():
        i, m = r.read_span(8)
        r.release(m)
    v, t, f = r.write_span(2)
    f[:] = 0
    r.commit(2)
    i, m = r.read_span(8)
    assert r.flags[i] & FLAG_GAP and not r.flags[i + 1] & FLAG_GAP
    assert r.seq[i] == full_head + 4  # ADC numbering includes the 4 lost samples


def test_calibrate_against_hand_values():
    V = np.array([[0.5, 2.5], [np.nan, 4.9], [-5.0, 2.6]])
    Y = np.empty_like(V)
    fl = np.zeros(3, np.uint8)
    bad = calibrate(V, np.array([0.1, 2.0]), np.array([0.0, 2.5]), np.array([4.9, 4.9]), Y, fl)
    # (0.5 - 0)/0.1 = 5, (2.5 - 2.5)/2 = 0, (2.6 - 2.5)/2 = 0.05 (hand arithmetic)
    np.testing.assert_allclose(Y[0], [5.0, 0.0], rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(Y[2, 1], 0.05, rtol=1e-12)
    assert fl.tolist() == [0, 1 | 4, 4]
    assert np.isnan(Y[1]).all() and np.isnan(Y[2, 0])  # saturated -> NaN, as the driver
    assert bad.tolist() == [[False, False], [True, True], [True, False]]


def test_fault_tracker_events():
    ft = FaultTracker(2, limit=3)
    bad = np.zeros((10, 2), bool)
    bad[2:6, 1] = True  # 4 consecutive: fault at the 3rd (index 4), recovered at 6
    bad[0:2, 0] = True  # 2 only: no fault
    assert ft.update(bad) == [(4, 1, "fault"), (6, 1, "recovered")]
    b2 = np.zeros((4, 2), bool)
    b2[1:, 0] = True
    assert ft.update(b2) == [(3, 0, "fault")]
    assert ft.update(np.zeros((2, 2), bool)) == [(0, 0, "recovered")]


def test_latency_percentiles_match_numpy():
    rng = np.random.default_rng(11)
    x = rng.integers(1_000, 90_000, 5000).astype(np.int64)
    st = LatencyStats(window=2000)
    for k in range(0, 5000, 300):
        st.add(x[k:k + 300])
    s = st.summary()
    # reference: np.percentile over the last 2000 values (the window)
    p = np.percentile(x[-2000:], [50, 99, 99.9]) / 1e3
    assert s["p50"] == pytest.approx(p[0], abs=0.01) and s["p999"] == pytest.approx(p[2],
                                                                                 abs=0.01)
    assert s["max"] == pytest.approx(x.max() / 1e3, abs=0.01) and s["n"] == 5000
    for m in (1, 2, 3, 999, 1001):  # short windows: every interpolation corner
        st = LatencyStats(window=2000)
        st.add(x[:m])
        s = st.summary()
        p = np.percentile(x[:m], [50, 99, 99.9]) / 1e3  # reference: numpy, linear method
        assert [s["p50"], s["p99"], s["p999"]] == pytest.approx(p, abs=0.006), m


def test_notifier_over_a_local_socket_and_watchdog_needs_progress(tmp_path):
    path = str(tmp_path / "n.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(path)
    s.settimeout(2)
    n = Notifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"})
    assert n.enabled and n.watchdog_s == 2.0
    assert n.ready("running")
    assert s.recv(100) == b"READY=1\nSTATUS=running"
    wd = ProgressWatchdog(n)
    assert wd.tick(10) and not wd.tick(10) and wd.tick(11)  # no progress, no ping
    assert s.recv(100) == b"WATCHDOG=1" and s.recv(100) == b"WATCHDOG=1"
    assert not Notifier({}).ready()  # outside systemd: a no-op
    s.close()


def test_realtime_settings_fail_gracefully():
    from edge.daemon import realtime

    assert realtime.set_fifo(0) is False
    assert isinstance(realtime.set_fifo(1), bool)  # works or logs a warning
    assert realtime.set_affinity([]) is False
    assert realtime.set_affinity([10_000]) is False  # no such CPU: warning, no exception
    if realtime.set_fifo(1):  # undo for the rest of the session
        os.sched_setscheduler(threading.get_native_id(), os.SCHED_OTHER, os.sched_param(0))


def test_install_script_dry_run_prints_the_actions():
    out = subprocess.run(["bash", str(ROOT / "deploy" / "install.sh"), "--dry-run",
                          "--with-mosquitto"], capture_output=True, text=True,
                         timeout=300)  # hang guard; apt-cache under arm64 emulation is slow
    assert out.returncode == 0, out.stderr
    for action in ("useradd --system", "usermod -a -G spi,gpio vsense",
                   "/etc/systemd/system/vsense-edge.service", "mosquitto",
                   "venv --system-site-packages", "python3-spidev"):
        assert action in out.stdout
    unit = (ROOT / "systemd" / "vsense-edge.service").read_text()
    for line in ("Type=notify", "WatchdogSec=", "Restart=on-failure", "User=vsense",
                 "SupplementaryGroups=spi gpio", "LimitRTPRIO=", "LimitMEMLOCK=",
                 "NUMBA_CACHE_DIR=/var/cache/vsense", "CacheDirectory=vsense"):
        assert line in unit
    for forbidden in ("PrivateDevices=yes", "RestrictRealtime=yes",
                      "MemoryDenyWriteExecute=yes"):
        assert forbidden not in unit


def test_install_script_pi5_uses_lgpio_never_rpi_gpio():
    # A Pi 5 (RP1) needs rpi-lgpio for the RPi.GPIO API; python3-rpi.gpio would shadow it
    # (same module name), so the dry run for a Pi 5 must never install it (issue 14).
    out = subprocess.run(["bash", str(ROOT / "deploy" / "install.sh"), "--dry-run",
                          "--board", "Raspberry Pi 5 Model B Rev 1.0"],
                         capture_output=True, text=True, timeout=300)  # hang guard
    assert out.returncode == 0, out.stderr
    assert "Raspberry Pi 5" in out.stdout and "lgpio" in out.stdout
    assert "python3-rpi.gpio" not in out.stdout and "RPi.GPIO>=" not in out.stdout


@pytest.mark.parametrize("kernel, lgpio", [("6.6.20+rpt-rpi-v8", True),
                                            ("6.1.21-v8+", False)])
def test_install_script_pi4_takes_lgpio_on_linux_6_6(kernel, lgpio):
    # Linux 6.6+ numbers the SoC's GPIOs from 512 in sysfs, where RPi.GPIO 0.7's edge
    # detection (the driver's DRDY wait) fails: a Pi 4 there gets rpi-lgpio too. On this
    # machine neither GPIO package is an apt candidate (x86), so the dry run shows the pip
    # fallback: rpi-lgpio wheels on 6.6+, RPi.GPIO built from source before. Where Debian
    # packages python3-rpi.gpio but not rpi-lgpio (arm64 Debian) 6.6+ takes it with a warning.
    env = dict(os.environ, VSENSE_KERNEL_RELEASE=kernel)
    out = subprocess.run(["bash", str(ROOT / "deploy" / "install.sh"), "--dry-run",
                          "--board", "Raspberry Pi 4 Model B Rev 1.5"], env=env,
                         capture_output=True, text=True, timeout=300)  # hang guard
    assert out.returncode == 0, out.stderr
    warned = "numbers the GPIOs from 512" in out.stdout
    assert ("rpi-lgpio" in out.stdout or warned) is lgpio
    if not lgpio:
        assert "python3-rpi.gpio" in out.stdout or "RPi.GPIO>=0.7" in out.stdout


# ---------------------------------------------------------- the sample path
def test_ring_stage_is_invisible_until_publish_and_full_ring_counts_lost():
    r = Ring(4, 1)
    v, t, f = r.write_span(1)
    f[:] = 0
    assert r.stage(1) and r.available() == 0  # staged: numbered but not visible yet
    assert r.seq[0] == 0 and r.stamp_ns[0] > 0
    r.publish(1)
    assert r.available() == 1
    for _ in range(3):
        v, t, f = r.write_span(1)
        f[:] = 0
        r.commit(1)
    v, t, f = r.write_span(1)  # full: scratch views, stage() counts them lost
    assert not r.stage(1) and (r.lost, r.available()) == (1, 4)
    assert not r.stage(0)


class _ArrayVolts:
    def __init__(self, v):
        self.v, self.k = v, 0

    def volts(self, n):
        out = self.v[self.k:self.k + n]
        self.k += out.shape[0]
        return out


def test_signal_read_one_sample_equals_block_calibrate():
    """One-sample reads of SignalAcquisition (after the first: the compiled short path,
    edge.daemon.sim_signal._deliver) against block reads, its NumPy twin (slice stores of
    edge.daemon.sim_signal.calibrate's output): bit-identical values, identical flags and
    times, NaN/inf/saturated inputs and injected faults included."""
    from edge.daemon.sim_signal import SignalAcquisition

    rng = np.random.default_rng(5)
    V = rng.normal(0.0, 1.0, (64, 2))
    V[3, 0], V[7, 1], V[9, 0], V[11, 1] = np.nan, np.inf, -np.inf, 4.95  # bad inputs
    kw = dict(rate=1000.0, clock="virtual", faults=[("nan", 1, 0.020, 3),
                                                    ("saturate", 0, 0.030, 2)],
              full_scale=5.0, sensitivity=np.array([0.1, -2.0]), offset=np.array([0.01, 0.0]),
              saturation=np.array([4.9, 4.9]))
    a1, a2 = SignalAcquisition(_ArrayVolts(V), **kw), SignalAcquisition(_ArrayVolts(V), **kw)
    Y1, Y2 = np.empty((64, 2)), np.empty((64, 2))
    t1, t2 = np.empty(64, np.int64), np.empty(64, np.int64)
    f1, f2 = np.empty(64, np.uint8), np.empty(64, np.uint8)
    for k in range(64):
        assert a1.read(Y1[k:k + 1], t1[k:k + 1], f1[k:k + 1]) == 1
    for k in range(0, 64, 16):
        assert a2.read(Y2[k:k + 16], t2[k:k + 16], f2[k:k + 16]) == 16
    np.testing.assert_array_equal(Y1, Y2)  # NaN positions equal too
    np.testing.assert_array_equal(f1, f2)
    np.testing.assert_array_equal(t1, t2)
    # the inputs exercised every flag: non-finite (1), saturated (4), both (inf: 1|4)
    assert {int(x) for x in f1} >= {0, 1, 4, 5}


def _run_signal(tmp_path, bundle_path, tag, block=1):
    cfg = _cfg(tmp_path / tag, bundle_path, 1883, tag, mqtt={"enabled": False},
               bundle={"path": str(bundle_path), "block": block},
               faults={"bad_sample_limit": 5},
               simulate={"duration_s": 1.5, "faults": ["nan:ch=1:at=0.5:n=8"]})
    assert run_daemon(cfg, simulate=True, install_signals=False) == 0
    return (read_recording_full(tmp_path / tag / "rec"),
            read_recording_full(tmp_path / tag / "rec", "estimates"))


def test_per_sample_estimation_equals_blocks(tmp_path, bundle_path):
    """Per-sample estimation (the compiled per-sample call, the general path around the
    injected fault and the recovery reset) against blocks of 7 (general path only): same
    raw record, same estimates."""
    raw_a, est_a = _run_signal(tmp_path, bundle_path, "acq")
    raw_l, est_l = _run_signal(tmp_path, bundle_path, "blk", block=7)
    np.testing.assert_array_equal(raw_a.seq, np.arange(1500))
    np.testing.assert_array_equal(raw_a.values, raw_l.values)
    np.testing.assert_array_equal(raw_a.flags, raw_l.flags)
    assert (raw_a.flags & 1).sum() == 8  # the 8 NaN samples are flagged bit0
    np.testing.assert_array_equal(est_a.seq, est_l.seq)
    np.testing.assert_array_equal(est_a.flags, est_l.flags)
    # reference: the same kernel on blocks of 7 (independent bookkeeping path); blocks and
    # single samples run the same recursion, so only rounding may differ
    np.testing.assert_allclose(est_a.values, est_l.values, rtol=0,
                               atol=1e-12 * np.nanmax(np.abs(est_l.values)))
    assert np.isnan(est_a.values).any()  # the reset after recovery produced warm-up rows


def test_latency_from_drdy_is_at_least_the_ring_latency(tmp_path, bundle_path):
    """Real clock: per sample, DRDY -> estimate >= ring entry -> estimate >= 0 (the sample
    enters the ring after its DRDY); health names the reference point."""
    from edge.daemon.app import build_daemon

    cfg = _cfg(tmp_path, bundle_path, 1883, "lat", mqtt={"enabled": False},
               simulate={"clock": "real", "duration_s": 0.5})
    d = build_daemon(cfg, simulate=True)
    assert d.run() == 0
    n = d.latency.n
    assert n == d.latency_ring.n == 500
    drdy, ring = d.latency.buf[:n], d.latency_ring.buf[:n]
    assert (ring > 0).all() and (drdy >= ring).all()
    h = d.health()
    assert h["latency_from"] == "drdy"
    assert h["latency_us"]["p50"] >= h["latency_ring_us"]["p50"]


def test_compiler_page_release():
    from edge.daemon import realtime

    assert realtime.release_library_pages("no-such-library.so") == 0
    from edge.estimator import Estimator  # numba: libllvmlite.so is mapped

    b = chain_bundle(window=3, kinds=("displacement",))
    Y = np.sin(np.arange(200) * 0.05)[:, None] * 1e-4
    ref = Estimator(b).run(Y)[0]
    # what is advised: exactly the library's clean read-only mappings (from /proc/self/smaps;
    # how many there are depends on the process's history: once 0 in a fresh edge-tier venv)
    assert any("libllvmlite.so" in line for line in open("/proc/self/maps"))
    clean = sum(b_ - a_ for a_, b_ in realtime._clean_ranges("libllvmlite.so",
                                                             "/proc/self/smaps"))
    assert realtime.release_library_pages("libllvmlite.so") == clean
    # the compiled kernel does not need those pages: a new estimator (cached kernel)
    # gives the identical result afterwards
    np.testing.assert_array_equal(Estimator(b).run(Y)[0], ref)


def test_daemon_is_the_controller_commands_use(tmp_path, bundle_path):
    """Commands act through edge.daemon.control.Controller only: the daemon implements it,
    and pause/resume/reset change its parts as the commands promise (resume and reset
    reset the estimator: health estimator_resets counts both)."""
    from edge.daemon.app import build_daemon
    from edge.daemon.commands import CommandError, CommandRegistry, register_builtin_commands
    from edge.daemon.control import Controller

    cfg = _cfg(tmp_path, bundle_path, 1883, "ctl", mqtt={"enabled": False})
    d = build_daemon(cfg, simulate=True)
    try:
        assert isinstance(d, Controller)
        reg = CommandRegistry()
        register_builtin_commands(reg)
        run = {n: reg.commands[n].handler for n in reg.commands}
        run["pause"](d, {})
        assert d.paused and d.publish_status()["state"] == "paused"
        with pytest.raises(CommandError, match="already paused"):
            run["pause"](d, {})
        run["resume"](d, {})
        assert not d.paused and d.state == "running" and d.health()["estimator_resets"] == 1
        run["reset_state"](d, {})
        assert d.health()["estimator_resets"] == 2
        assert run["status"](d, {})["status"]["state"] == "running"
    finally:
        d.abort()
