"""Issue 12 regressions in the running daemon (simulated ADC, real Mosquitto on loopback):
a hostile command cannot stop publishing, commands are restricted, a stalled or full disk
degrades (never stalls) the device, shutdown is bounded, connection failures are loud."""

import errno
import json
import logging
import threading

import numpy as np
import pytest

from edge.daemon.app import build_daemon, run_daemon
from edge.daemon.config import config_from_dict
from edge.daemon.mqtt import CommandError, CommandRegistry, Publisher, decode_estimates
from edge.daemon.recorder import Recorder, read_file, read_recording_full
from conftest import free_port
from helpers import chain_bundle


@pytest.fixture(scope="module")
def bundle_path(tmp_path_factory):
    b = chain_bundle(window=3, kinds=("displacement", "acceleration"))
    p = tmp_path_factory.mktemp("bundle") / "chain.npz"
    b.save(p)
    return p


def _cfg(tmp_path, bundle_path, port, dev, **sections):
    d = {"device": {"id": dev}, "bundle": {"path": str(bundle_path)},
         "channels": [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0, "unit": "m"},
                      {"name": "y1", "pin": "AIN1", "sensitivity": 0.01}],
         "mqtt": {"host": "127.0.0.1", "port": port, "reconnect_min_s": 0.1, "commands": ["*"],
                  "reconnect_max_s": 0.5, "health_interval_s": 0.2},
         "recorder": {"dir": str(tmp_path / "rec"), "fsync_interval_s": 0.2},
         "simulate": {"clock": "real", "duration_s": 0.0, "seed": 3, "level": "signal"}}
    for k, v in sections.items():
        d[k] = dict(d.get(k, {}), **v) if isinstance(v, dict) else v
    return config_from_dict(d)


def _seqs(sub, topic):
    parts = [decode_estimates(p)["seq"] for p, _ in sub.get(topic)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


class _Running:
    """A daemon built from a config and run on a thread until :meth:`stop`."""

    def __init__(self, cfg):
        self.d = build_daemon(cfg, simulate=True)
        self.d.pub.start()
        self.code = []
        self.th = threading.Thread(target=lambda: self.code.append(self.d.run()))
        self.th.start()

    def stop(self, timeout=30.0):
        self.d.stop()
        self.th.join(timeout)
        return self.code


NESTED = b'{"cmd": "status", "args": {"x": ' + b"[" * 3000 + b"]" * 3000 + b"}}"


# ------------------------------------------------------------------- item 1 and item 2
def test_nested_json_cannot_kill_publishing_and_commands_are_allow_listed(
        tmp_path, bundle_path, mosquitto, subscriber):
    """Issue 12 item 1: a ~6 KB nested payload raised RecursionError on paho's network
    thread, which ended; no more estimates or replies. Item 2: `pause` from anyone."""
    cfg = _cfg(tmp_path, bundle_path, mosquitto.port, "nest",
               mqtt={"commands": ["status", "health"]})
    sub = subscriber(["vsense/nest/estimates", "vsense/nest/cmd/reply",
                      "vsense/nest/status"], "s-nest")
    run = _Running(cfg)
    try:
        assert sub.wait(lambda: len(_seqs(sub, "vsense/nest/estimates")) > 200, 20)
        sub.publish("vsense/nest/cmd", NESTED)
        sub.publish("vsense/nest/cmd", b"[" * 20000)  # unterminated
        sub.publish("vsense/nest/cmd", b'{"cmd": "pause", "id": 2}')
        sub.publish("vsense/nest/cmd", b'{"cmd": "status", "id": 3}')
        assert sub.wait(lambda: len(sub.get("vsense/nest/cmd/reply")) == 4, 10)
        n_then = _seqs(sub, "vsense/nest/estimates").max()
        # estimates keep coming after the hostile messages (1 s at 1 kHz later)
        assert sub.wait(lambda: _seqs(sub, "vsense/nest/estimates").max() > n_then + 1000, 20)
        assert run.d.pub.threads_problem() is None
        assert run.d.pub.stats["cmd_errors"] == 0
    finally:
        assert run.stop() == [0]
    r = [json.loads(p) for p, _ in sub.get("vsense/nest/cmd/reply")]
    assert "nested deeper" in r[0]["reason"] and not r[0]["ok"]
    assert not r[1]["ok"]  # the 20 KB one: too large
    assert r[2]["id"] == 2 and not r[2]["ok"] and "not allowed" in r[2]["reason"]
    assert r[3]["id"] == 3 and r[3]["ok"] and r[3]["status"]["state"] == "running"
    states = [json.loads(p)["state"] for p, _ in sub.get("vsense/nest/status")]
    assert "paused" not in states


def test_parse_never_raises_anything_but_command_error():
    reg = CommandRegistry(allowed=["status"])
    reg.register("status", lambda d, a: None)
    reg.register("pause", lambda d, a: None)
    for payload in (NESTED, b"[" * 100_000, b'{"cmd": "status", "id": [1]}',
                    b'{"cmd": "status", "args": {"a": NaN}}', b"\x80\x81",
                    b'{"cmd": "pause"}', b'{"id": 1e999, "cmd": 1}'):
        with pytest.raises(CommandError):
            reg.parse(payload)
    with pytest.raises(CommandError, match="not allowed on this device"):
        reg.parse(b'{"cmd": "pause", "id": "a"}')


def test_dead_network_thread_is_reported_and_stops_the_watchdog(tmp_path, bundle_path):
    """The watchdog covers the MQTT threads: a dead one is a problem the supervisor sees
    (no WATCHDOG=1 ping, status degraded with the reason)."""
    cfg = _cfg(tmp_path, bundle_path, free_port(), "wd")
    d = build_daemon(cfg, simulate=True)
    try:
        assert d.pub.threads_problem() is None
        dead = threading.Thread(target=lambda: None)
        dead.start()
        dead.join()
        d.pub._net = dead  # paho's network thread (loop_start), ended
        assert d.pub.threads_problem() == "MQTT network thread ended"
        d.status.state = "running"
        d.status.check_degraded()
        assert d.state == "degraded" and d.degraded_reason == "MQTT network thread ended"
        assert d.health()["degraded"] == "MQTT network thread ended"
    finally:
        d.pub._net = None
        d.abort()


# ---------------------------------------------------------------------------- item 3
class _StalledDisk:
    """Makes every recorder write block until :meth:`release` (a hung file system)."""

    def __init__(self, monkeypatch):
        self.gate = threading.Event()
        self.entered = threading.Event()
        orig = Recorder._write_once

        def stalled(rec, kind, data):
            self.entered.set()
            self.gate.wait(60)
            return orig(rec, kind, data)

        monkeypatch.setattr(Recorder, "_write_once", stalled)

    def release(self):
        self.gate.set()


def test_stalled_disk_degrades_but_estimation_mqtt_and_shutdown_go_on(
        tmp_path, bundle_path, mosquitto, subscriber, monkeypatch):
    """Issue 12 item 3: the recorder's full queue blocked the thread feeding recorder and
    MQTT (17,962 samples lost, status `running`), and close() hung: SIGKILL after 35 s."""
    disk = _StalledDisk(monkeypatch)
    cfg = _cfg(tmp_path, bundle_path, mosquitto.port, "stall",
               recorder={"queue_s": 1.0, "close_timeout_s": 0.5})
    sub = subscriber(["vsense/stall/estimates", "vsense/stall/status",
                      "vsense/stall/health"], "s-stall")
    run = _Running(cfg)
    stopped = False
    try:
        assert disk.entered.wait(20)
        # the 1 s queue fills, then chunks are dropped: status says so, with the reason
        assert sub.wait(lambda: any(json.loads(p)["state"] == "degraded"
                                    for p, _ in sub.get("vsense/stall/status")), 20)
        n_then = _seqs(sub, "vsense/stall/estimates").max()
        assert sub.wait(lambda: _seqs(sub, "vsense/stall/estimates").max() > n_then + 1000, 20)
        code = run.stop(timeout=20)  # bounded although the writer is still stuck
        stopped = True
        assert code == [0]
    finally:
        disk.release()
        if not stopped:
            run.stop()
    st = [json.loads(p) for p, _ in sub.get("vsense/stall/status")]
    deg = next(s for s in st if s["state"] == "degraded")
    assert "recorder queue full" in deg["reason"]
    h = [json.loads(p) for p, _ in sub.get("vsense/stall/health")]
    assert max(x["recorder"]["dropped_samples"] for x in h) > 0
    assert all(x["lost_samples"] == 0 for x in h)  # the acquisition never waited
    seq = np.unique(_seqs(sub, "vsense/stall/estimates"))
    np.testing.assert_array_equal(seq, np.arange(seq.size))  # nothing lost over MQTT


class _QuotaFile:
    """A file on a 'disk' of ``quota`` bytes shared by the directory: writes past it are
    short, then fail with ENOSPC, like a full file system."""

    def __init__(self, path, quota, mode="wb"):
        self.f = open(path, mode, buffering=0)
        self.dir, self.quota = path.parent, quota

    def _free(self):
        used = sum(p.stat().st_size for p in self.dir.glob("*.vsr"))
        return self.quota[0] - used

    def write(self, data):
        free = self._free()
        if free <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.f.write(data[:free])

    def __getattr__(self, name):
        return getattr(self.f, name)


def _quota(monkeypatch, quota):
    import builtins

    import edge.daemon.recorder as R

    def fake_open(path, mode="r", buffering=-1, *a, **k):
        if str(path).endswith(".vsr") and ("w" in mode or "x" in mode):
            return _QuotaFile(path, quota, mode)
        return builtins.open(path, mode, buffering, *a, **k)

    monkeypatch.setattr(R, "open", fake_open, raising=False)


def _data(n, nch=3, seed=0):
    rng = np.random.default_rng(seed)
    seq = np.arange(n, dtype=np.int64)
    return seq, seq * 1_000_000, rng.standard_normal((n, nch)), np.zeros(n, np.uint8)


def test_full_disk_reclaims_earlier_runs_never_this_one(tmp_path, monkeypatch):
    """ENOSPC: the closed files of an earlier run are deleted and the write retried; this
    run's files are never deleted (issue 26 item 1: the writer deleted the file it was
    writing, 67 % of a run lost silently); once nothing of an earlier run is left, new
    chunks are dropped and counted. Files stay whole records (a short write is cut back)."""
    seq, t, v, f = _data(20_000)
    old = Recorder(tmp_path, ["a", "b", "c"], ["m"] * 3, rate=1000.0, device="earlier")
    old.append_raw(seq[:3000], t[:3000], v[:3000], f[:3000])
    old.close()
    quota = [300_000]  # bytes: the disk fills at ~7,000 records of 41 bytes
    _quota(monkeypatch, quota)
    r = Recorder(tmp_path, ["a", "b", "c"], ["m"] * 3, rate=1000.0, rotate_mb=0.05,
                 max_disk_mb=10.0, chunk=100, retry_s=0.0, device="this")
    for i in range(0, 20_000, 100):
        r.append_raw(seq[i:i + 100], t[i:i + 100], v[i:i + 100], f[i:i + 100])
        assert r.idle.wait(10)  # a disk that keeps up (the daemon's loop never waits)
    r.close()
    assert r.stats["write_errors"] > 0
    assert r.stats["files_deleted"] == 1  # the earlier run's one file, nothing of this run
    mine = [read_file(p) for p in sorted(tmp_path.glob("*.vsr"))]
    assert all(m.header["device"] == "this" for m in mine)
    got = np.concatenate([m.seq for m in mine])
    # every row is either on the disk or counted as dropped (reference: the 20,000 appended)
    assert got.size + r.stats["dropped_raw"] == 20_000 and r.stats["dropped_raw"] > 0
    assert r.stats["raw_samples"] == got.size
    # the oldest data of this run is kept whole: the head up to the first drop is contiguous
    np.testing.assert_array_equal(got[:6000], np.arange(6000))
    np.testing.assert_array_equal(np.concatenate([m.values for m in mine]), v[got])
    assert all(m.truncated_bytes == 0 for m in mine)
    assert "No space left" in r.problem and "this run's files are kept" in r.problem


def test_unwritable_disk_drops_counts_and_recovers(tmp_path, monkeypatch):
    quota = [0]  # nothing can be written, nothing to reclaim
    _quota(monkeypatch, quota)
    seq, t, v, f = _data(3000)
    r = Recorder(tmp_path, ["a", "b", "c"], ["m"] * 3, rate=1000.0, chunk=100, retry_s=0.0)
    r.append_raw(seq[:1000], t[:1000], v[:1000], f[:1000])
    r.flush()
    assert r.idle.wait(10)  # the writer has taken every queued chunk
    assert r.stats["dropped_samples"] == 1000 and r.stats["dropped_raw"] == 1000
    assert "No space left" in r.degraded_reason()
    quota[0] = 10**9  # space freed: writing resumes
    r.append_raw(seq[1000:], t[1000:], v[1000:], f[1000:])
    r.close()
    rec = read_recording_full(tmp_path)
    np.testing.assert_array_equal(rec.seq, np.arange(1000, 3000))
    assert rec.truncated_bytes == 0


def test_max_disk_mb_is_honoured_with_one_long_file(tmp_path):
    """The cap held only at rotation, and the open file could not be deleted: with the
    default rotate_mb = 64 a 2 MB cap was never enforced. Files now rotate at cap / 4."""
    seq, t, v, f = _data(60_000)  # 41 bytes a record: 2.46 MB
    r = Recorder(tmp_path, ["a", "b", "c"], ["m"] * 3, rate=1000.0, max_disk_mb=0.5,
                 chunk=256)
    for i in range(0, 60_000, 1000):
        r.append_raw(seq[i:i + 1000], t[i:i + 1000], v[i:i + 1000], f[i:i + 1000])
    r.close()
    total = sum(p.stat().st_size for p in tmp_path.glob("*.vsr"))
    assert total <= 0.5e6 and r.stats["files_deleted"] > 0


# ------------------------------------------------------------- loud connectivity (item 5)
def test_unreachable_broker_is_logged_with_host_port_and_require_broker_fails_fast(
        tmp_path, bundle_path, caplog):
    port = free_port()  # nothing listens there
    cfg = _cfg(tmp_path, bundle_path, port, "loud",
               mqtt={"require_broker": True, "connect_timeout_s": 1.5})
    with caplog.at_level(logging.INFO, logger="vsense"):
        code = run_daemon(cfg, simulate=True, install_signals=False)
    assert code == 7
    text = caplog.text
    assert f"cannot connect to 127.0.0.1:{port}: connection refused" in text
    assert f"broker 127.0.0.1:{port} not reachable within 1.5 s" in text


def test_unknown_host_is_named(tmp_path, bundle_path, caplog):
    cfg = config_from_dict({"device": {"id": "h"}, "channels": [{"name": "y0", "pin": "AIN0"}],
                            "mqtt": {"host": "no-such-host.invalid", "reconnect_min_s": 5.0}})
    pub = Publisher(cfg["mqtt"], "h", CommandRegistry(), ncol=1)
    with caplog.at_level(logging.INFO, logger="vsense"):
        pub.start()
        assert pub.failed_event.wait(20)
        pub.stop(timeout=0.1)
    assert "cannot connect to no-such-host.invalid:1883: host name not resolved" in caplog.text


def test_a_run_that_never_reached_the_broker_says_so_at_the_end(tmp_path, bundle_path, caplog):
    """It used to run, exit 0 and say nothing: a user believed the data went out."""
    port = free_port()
    cfg = _cfg(tmp_path, bundle_path, port, "quiet",
               simulate={"clock": "virtual", "duration_s": 0.5})
    with caplog.at_level(logging.INFO, logger="vsense"):
        assert run_daemon(cfg, simulate=True, install_signals=False) == 0
    # the cause follows ("connection refused", or "no answer" if stopped before an attempt)
    assert f"estimates were not sent to 127.0.0.1:{port} (never connected: " in caplog.text


def test_unsent_estimates_are_counted():
    """health.publish.unsent_samples: produced but not handed to the broker (queue + open
    batch); reference: the rows appended, nothing connected."""
    cfg = config_from_dict({"device": {"id": "u"}, "channels": [{"name": "y0", "pin": "AIN0"}],
                            "mqtt": {"port": free_port(), "batch": 50}})
    pub = Publisher(cfg["mqtt"], "u", CommandRegistry(), ncol=2)
    seq = np.arange(120, dtype=np.int64)
    pub.add_estimates(seq, seq * 1000, np.zeros((120, 2)), np.zeros(120, np.uint8))
    assert pub.queue_depth() == 2 and pub.unsent_samples() == 120
    pub.stop(timeout=0.1)


def test_row_rate_measures_the_delivered_rate_against_the_bundle():
    """edge.daemon.health.RowRate: rate = samples / sample time over each window; a problem
    only beyond the tolerance (reference: the closed form n / (t1 - t0))."""
    from edge.daemon.health import RowRate

    rr = RowRate(1000.0, 0.005, window_s=1.0)
    rr.update(0, 0)
    rr.update(500, 500_000_000)                    # half a window: no rate yet
    assert rr.rate is None and rr.problem() is None
    rr.update(1000, 1_004_000_000)                 # 1000 samples in 1.004 s
    assert rr.rate == pytest.approx(1000 / 1.004, rel=1e-12)
    assert rr.deviation == pytest.approx(1 / 1.004 - 1, rel=1e-12)
    assert rr.problem() is None                    # -0.40 % is within 0.5 %
    rr.update(2000, 2_014_100_000)                 # next window: 1000 in 1.0101 s (-1.0 %)
    p = rr.problem()
    assert p is not None and "below the bundle's 1000/s" in p and "rate_tolerance (0.5 %)" in p
    rr.update(3000, 3_029_100_000)                 # -1.5 %: the same problem, the same text
    assert rr.deviation == pytest.approx(1 / 1.015 - 1, rel=1e-9) and rr.problem() == p
    assert RowRate(1000.0, 0.0, 1.0).problem() is None  # tolerance 0: no check
    rr.update(5, 2_100_000_000)                    # sequence restarted: new window
    assert rr._ref == (5, 2_100_000_000)


def test_samples_at_another_rate_than_the_bundle_make_the_device_degraded(tmp_path,
                                                                          bundle_path):
    """A converter delivering rows 2 % slower than the bundle's 1/dt (DRDY times spaced
    1.02 dt) is reported: health gives the measured rate, the status is degraded with it."""
    cfg = _cfg(tmp_path, bundle_path, free_port(), "rate", mqtt={"enabled": False},
               simulate={"duration_s": 2.0})
    d = build_daemon(cfg, simulate=True)
    d.acq.dt_ns = int(round(d.acq.dt_ns * 1.02))  # every DRDY time 2 % later
    assert d.run() == 0
    h = d.health()
    # closed form: rows 1.02 dt apart -> rate / (1 / dt) - 1 = 1 / 1.02 - 1 = -0.0196
    assert h["rate_deviation"] == pytest.approx(1 / 1.02 - 1, abs=1e-4)
    assert h["rate_hz"] == pytest.approx(d.rate / 1.02, rel=1e-4)
    assert "below the bundle's 1000/s" in d.degraded_reason
    assert h["degraded"] == d.degraded_reason


def test_retained_status_is_published_only_when_the_problem_changes():
    """Issue 26 item 6: the degraded reason carried the live rate, so the retained status
    was republished every health interval (589 retained messages in 10 minutes). Through
    edge.daemon.status.Status.check_degraded with the real RowRate: a rate that keeps
    drifting below the bundle's gives one `degraded` status, a rate back in tolerance one
    `running`, a rate above the bundle's one new `degraded`."""
    from edge.daemon.health import RowRate
    from edge.daemon.status import Status

    class _Pub:
        topics = type("T", (), {"status": "status"})()

        def __init__(self):
            self.sent = []

        def set_retained(self, topic, payload):
            self.sent.append(payload)

    class _Dev(Status):
        def __init__(self):
            self.pub, self.notifier, self.rec = _Pub(), None, None
            self.state, self.degraded_reason = "running", None
            self.rr = RowRate(1000.0, 0.005, window_s=1.0)

        def _problems(self):
            return self.rr.problem()

        def status_payload(self, **extra):
            return dict(state=self.state, **extra)

    d = _Dev()
    t, seq = 0, 0
    d.rr.update(seq, t)
    for rate in (990.0, 985.0, 980.0, 975.0, 1000.0, 1000.0, 1020.0, 1025.0):
        seq += 1000
        t += int(round(1e9 * 1000 / rate))
        d.rr.update(seq, t)
        d.check_degraded()
    states = [(p["state"], "below" in p.get("reason", ""), "above" in p.get("reason", ""))
              for p in d.pub.sent]
    assert states == [("degraded", True, False), ("running", False, False),
                      ("degraded", False, True)]


def test_latency_is_never_measured_from_drdy_times_that_lead_the_wall_clock(
        tmp_path, bundle_path):
    """Issue 26 item 6: the simulated converter's time may lead the wall clock (by up to
    2 ms), so its DRDY times lie in the future and health gave a negative p50 'from drdy'.
    Reference: an estimate is made after its sample entered the ring, so every latency is
    > 0, taken from the ring."""
    cfg = _cfg(tmp_path, bundle_path, free_port(), "lead", mqtt={"enabled": False},
               channels=[{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0, "unit": "m"}],
               simulate={"level": "adc", "duration_s": 0.4})
    b = chain_bundle(window=3, kinds=("displacement",))
    b.save(tmp_path / "one.npz")
    cfg["bundle"]["path"] = str(tmp_path / "one.npz")
    d = build_daemon(cfg, simulate=True)
    assert d.run() == 0
    h = d.health()
    assert h["latency_from"] == "ring"
    lat = d.latency_ring  # what health reports
    n = lat.n
    assert n > 100 and (lat.buf[:n] > 0).all() and h["latency_us"]["p50"] > 0


def test_a_config_without_commands_accepts_none(tmp_path, bundle_path, caplog):
    """Issue 26 item 4: `[mqtt] commands` defaulted to ["*"], so any configuration that did
    not set it accepted `pause` and `update_model` from anyone on the broker. Now a config
    without the key still loads and runs, as a read-only device (said at the start); a
    listed command is accepted."""
    raw = {"device": {"id": "ro"}, "bundle": {"path": str(bundle_path)},
           "channels": [{"name": "y0", "pin": "AIN0"}, {"name": "y1", "pin": "AIN1"}],
           "mqtt": {"host": "127.0.0.1", "port": free_port()},
           "recorder": {"enabled": False},
           "simulate": {"clock": "virtual", "duration_s": 0.1, "level": "signal"}}
    cfg = config_from_dict(raw)
    assert cfg["mqtt"]["commands"] == []
    with caplog.at_level(logging.INFO, logger="vsense"):
        d = build_daemon(cfg, simulate=True)
    try:
        assert any("none accepted, a read-only device" in r.getMessage()
                   for r in caplog.records)
        for cmd in ("pause", "status", "update_model", "identify"):
            with pytest.raises(CommandError, match=r"not allowed on this device \(\[mqtt\] "
                                                   r"commands\)"):
                d.registry.parse(json.dumps({"cmd": cmd}).encode())
    finally:
        d.abort()
    raw["mqtt"]["commands"] = ["status"]
    d = build_daemon(config_from_dict(raw), simulate=True)
    try:
        assert d.registry.parse(b'{"cmd": "status"}')[0].name == "status"
        with pytest.raises(CommandError, match="not allowed"):
            d.registry.parse(b'{"cmd": "pause"}')
    finally:
        d.abort()
