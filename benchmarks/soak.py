"""Soak test of the edge daemon (issue 12; not in CI): hours at 1 kHz with broker restarts
and a full disk.

    sudo .venv/bin/python benchmarks/soak.py [--duration-s 3600] [--restart-every-s 300]
        [--fill-at-s 1200 ...] [--fill-hold-s 60] [--tmpfs-mb 64] [--level signal|adc]
        [--fifo 50] [--out soak.json]

(the hour of docs/deploy.md "Soak": ``--tmpfs-mb 400 --level adc --fifo 50``)

What runs:

* a private Mosquitto on a free loopback port with persistence on (so the subscriber's
  queued QoS 1 messages survive a restart), restarted (SIGTERM, start again) every
  ``--restart-every-s``;
* ``vsense-edge run --simulate`` as a subprocess: 8-DOF chain bundle (window 3, one
  displacement channel) at 1,000 samples/s, real clock, MQTT QoS 1, binary estimates,
  recorder on a **tmpfs of ``--tmpfs-mb``** mounted for the run (needs root; without root the
  recorder directory is a plain temporary directory and the disk fill is skipped, said in
  the report), ``max_disk_mb`` = 3/4 of the tmpfs;
* at each ``--fill-at-s`` (one or more times) a filler file takes all free space of the
  tmpfs for ``--fill-hold-s`` (the recorder never deletes this run's files: it drops and
  counts new data, status ``degraded``, while the disk is full), then it is deleted;
* ``--level adc``: the byte-level ADS1256 simulator behind the real driver (real clock):
  conversions the acquisition thread reads too late are overwritten by the chip and counted
  by the driver (``missed_conversions``); the simulator's own count is in the daemon's log;
* a QoS 1 subscriber with a persistent session collects every estimate and health message.
  It reconnects after 0.02-0.2 s, before the daemon (``--daemon-reconnect-min-s``, 0.5 s):
  Mosquitto does not queue messages for a persistent session restored after a restart until
  its client has reconnected (eclipse-mosquitto/mosquitto#769), so a slower subscriber would
  miss the daemon's first batches although the broker acknowledged them.

Reported (stdout and ``--out`` JSON): samples lost at the ring (acquisition) and dropped by
the recorder (daemon health counters), estimates missing over MQTT (sequence numbers never
received, between the first and the last one received), publisher drops, the time from each
broker start to the next estimate received (reconnect), resident memory of the daemon
(health ``rss_mb``) at warm-up and its drift afterwards, CPU, and the load average.

Accounting (``accounting`` in the report): the daemon's run summary (its last log line)
against the simulator's count of overwritten conversions (``--level adc``); the raw records
on the tmpfs against the ADC's sample numbers (every ``seq`` not recorded must be a sample
lost at the ring or dropped by the recorder, ``raw_uncounted``); the estimates received over
MQTT against the daemon's count. Status (``status_vs_losses``): the intervals between two
health messages in which a loss counter grew, against the ``degraded`` periods (device
timestamps): losses while the status said ``running`` (``lost_while_running``), ``degraded``
periods with no loss within the hold (``degraded_without_loss``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    def __init__(self, d: Path, port: int):
        self.port = port
        self.conf = d / "mosquitto.conf"
        (d / "db").mkdir(exist_ok=True)
        self.conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n"
                             f"persistence true\npersistence_location {d / 'db'}/\n"
                             "autosave_interval 30\nmax_queued_messages 1000000\n"
                             "max_inflight_messages 100\nlog_dest none\n")
        self.proc = None

    def start(self) -> float:
        binary = "/usr/sbin/mosquitto" if os.access("/usr/sbin/mosquitto", os.X_OK) else "mosquitto"
        self.proc = subprocess.Popen([binary, "-c", str(self.conf)])
        t0 = time.monotonic()
        while time.monotonic() - t0 < 10:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return time.monotonic()
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("mosquitto did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


class Collector:
    """QoS 1 subscriber with a persistent session: estimate sequence numbers, health."""

    def __init__(self, port: int, device: str):
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        from edge.daemon.mqtt import decode_estimates

        self.decode = decode_estimates
        self.lock = threading.Lock()
        self.seq_chunks: list[np.ndarray] = []
        self.arrivals: list[tuple[float, int]] = []  # (monotonic, first seq) per message
        self.health: list[dict] = []
        self.states: list[tuple[float, str, str]] = []
        self.state_ts: list[tuple[float, str]] = []  # (device time, state)
        self.dev = device
        c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="soak-collector",
                        clean_session=False)
        c.reconnect_delay_set(0.02, 0.2)
        c.on_connect = lambda cl, u, f, rc, p: cl.subscribe(f"vsense/{device}/#", qos=1)
        c.on_message = self._msg
        c.connect_async("127.0.0.1", port, 10)
        c.loop_start()
        self.client = c

    def _msg(self, client, userdata, msg):
        now = time.monotonic()
        sub = msg.topic.rsplit("/", 1)[-1]
        with self.lock:
            if sub == "estimates":
                s = self.decode(msg.payload)["seq"]
                self.seq_chunks.append(s)
                self.arrivals.append((now, int(s[0])))
            elif sub == "health":
                self.health.append(json.loads(msg.payload))
            elif sub == "status":
                j = json.loads(msg.payload)
                self.states.append((now, j.get("state", ""), j.get("reason", "")))
                self.state_ts.append((float(j.get("t", 0.0)), j.get("state", "")))

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def _mount_tmpfs(d: Path, mb: int) -> bool:
    if os.geteuid() != 0:
        return False
    d.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mb}m", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"# tmpfs not mounted ({r.stderr.strip()}); recorder on the normal disk")
    return r.returncode == 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration-s", type=float, default=3600.0)
    ap.add_argument("--restart-every-s", type=float, default=300.0)
    ap.add_argument("--fill-at-s", type=float, nargs="+", default=None,
                    help="when to fill the disk [s] (one or more; default: duration / 3 and "
                         "2 duration / 3)")
    ap.add_argument("--fill-hold-s", type=float, default=60.0)
    ap.add_argument("--tmpfs-mb", type=int, default=64)
    ap.add_argument("--level", choices=("signal", "adc"), default="signal")
    ap.add_argument("--warmup-s", type=float, default=300.0)
    ap.add_argument("--fifo", type=int, default=0,
                    help="[realtime] sched_fifo_priority of the daemon's acquisition thread "
                         "(0: none; the systemd unit allows it)")
    ap.add_argument("--daemon-reconnect-min-s", type=float, default=0.5,
                    help="[mqtt] reconnect_min_s of the daemon (the collector reconnects "
                         "after 0.02-0.2 s: see the module docstring)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    fill_at = sorted([a.duration_s / 3, 2 * a.duration_s / 3] if a.fill_at_s is None
                     else a.fill_at_s)

    from helpers import chain_bundle

    work = Path(tempfile.mkdtemp(prefix="vsense-soak-"))
    recdir = work / "rec"
    tmpfs = _mount_tmpfs(recdir, a.tmpfs_mb)
    recdir.mkdir(exist_ok=True)
    bundle = work / "chain.npz"
    chain_bundle(window=3, kinds=("displacement",)).save(bundle)
    port = _free_port()
    broker = Broker(work, port)
    dev = "soak"
    cap_mb = 0.75 * a.tmpfs_mb
    (work / "edge.toml").write_text(f"""
[device]
id = "{dev}"
[bundle]
path = "{bundle}"
[adc]
drate = 1000.0
mode = "continuous"
[[channels]]
name = "y0"
pin = "AIN0"
sensitivity = 1000.0
unit = "m"
[mqtt]
host = "127.0.0.1"
port = {port}
qos = 1
format = "binary"
reconnect_min_s = {a.daemon_reconnect_min_s}
reconnect_max_s = {max(1.0, a.daemon_reconnect_min_s)}
health_interval_s = 5.0
queue_messages = 100000
[recorder]
dir = "{recdir}"
rotate_mb = 4.0
max_disk_mb = {cap_mb}
[realtime]
sched_fifo_priority = {a.fifo}
[simulate]
level = "{a.level}"
clock = "real"
load = "random"
noise = 0.01
""")
    t_broker = [broker.start()]
    col = Collector(port, dev)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(work / "numba"))
    log = open(work / "daemon.log", "wb")
    daemon = subprocess.Popen([sys.executable, "-m", "edge.cli", "run", "--simulate", "-c",
                               str(work / "edge.toml")], stdout=log, stderr=subprocess.STDOUT,
                              env=env, cwd=str(ROOT))
    print(f"# soak: {a.duration_s:g} s at 1 kHz ({a.level} level, SCHED_FIFO {a.fifo}), "
          f"broker restart every "
          f"{a.restart_every_s:g} s, disk fill at {fill_at} s for {a.fill_hold_s:g} s "
          f"({'tmpfs ' + str(a.tmpfs_mb) + ' MB' if tmpfs else 'NO tmpfs: fill skipped'}); "
          f"work dir {work}; load {os.getloadavg()[0]:.2f}", flush=True)
    t0 = time.monotonic()
    next_restart = t0 + a.restart_every_s
    filled = None
    fills = list(fill_at)
    loads = []
    try:
        while time.monotonic() - t0 < a.duration_s:
            time.sleep(1.0)
            now = time.monotonic()
            loads.append(os.getloadavg()[0])
            if daemon.poll() is not None:
                print(f"# daemon exited early with {daemon.returncode}")
                break
            if now >= next_restart:
                broker.stop()
                t_broker.append(broker.start())
                next_restart = now + a.restart_every_s
                print(f"[{now - t0:7.0f} s] broker restarted", flush=True)
            if tmpfs and filled is None and fills and now - t0 >= fills[0]:
                fills.pop(0)
                st = os.statvfs(recdir)
                free = st.f_bavail * st.f_frsize
                filled = (recdir / "zz-filler.bin", now)
                with open(filled[0], "wb") as f:
                    try:
                        f.write(b"\0" * free)
                    except OSError:
                        pass
                print(f"[{now - t0:7.0f} s] disk filled ({free / 1e6:.1f} MB filler)",
                      flush=True)
            if filled is not None and now - filled[1] >= a.fill_hold_s:
                filled[0].unlink()
                filled = None
                print(f"[{now - t0:7.0f} s] filler removed", flush=True)
            if int(now - t0) % 60 == 0:
                with col.lock:
                    h = col.health[-1] if col.health else {}
                print(f"[{now - t0:7.0f} s] samples {h.get('samples')} rss "
                      f"{h.get('rss_mb')} MB, rec dropped "
                      f"{h.get('recorder', {}).get('dropped_samples')}, load "
                      f"{loads[-1]:.2f}", flush=True)
    finally:
        daemon.send_signal(signal.SIGTERM)
        t_stop = time.monotonic()
        try:
            daemon.wait(60)
        except subprocess.TimeoutExpired:
            daemon.kill()
        stop_s = time.monotonic() - t_stop
        time.sleep(3.0)  # the last messages
        col.close()
        broker.stop()
    res = _report(col, t_broker[1:], a, stop_s, daemon.returncode, tmpfs, loads, fill_at)
    log.close()
    res["accounting"] = _accounting(work / "daemon.log", recdir, res)
    res["status_vs_losses"] = _status_vs_losses(col)
    if tmpfs:
        subprocess.run(["umount", str(recdir)])
    print(json.dumps(res, indent=1))
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _report(col, restarts, a, stop_s, code, tmpfs, loads, fill_at) -> dict:
    with col.lock:
        seq = np.unique(np.concatenate(col.seq_chunks)) if col.seq_chunks else np.zeros(0, int)
        arrivals = list(col.arrivals)
        health = list(col.health)
        states = list(col.states)
    missing = int(seq[-1] - seq[0] + 1 - seq.size) if seq.size else None
    gaps = []
    if seq.size > 1:
        br = np.nonzero(np.diff(seq) > 1)[0]
        gaps = [[int(seq[i] + 1), int(seq[i + 1] - 1)] for i in br[:20]]
    reconnect = []
    for tb in restarts:
        after = [t for t, _ in arrivals if t >= tb]
        if after:
            reconnect.append(round(after[0] - tb, 3))
    last = health[-1] if health else {}
    warm = [h for h in health if h.get("uptime_s", 0) >= a.warmup_s]
    rss = [h["rss_mb"] for h in warm]
    deg = sorted({(s, r) for _, s, r in states if s == "degraded"})
    return {
        "duration_s": a.duration_s, "level": a.level, "exit_code": code,
        "shutdown_s": round(stop_s, 2),
        "samples": last.get("samples"), "ring_lost_samples": last.get("lost_samples"),
        "recorder_dropped_samples": last.get("recorder", {}).get("dropped_samples"),
        "recorder_write_errors": last.get("recorder", {}).get("write_errors"),
        "recorder_files_deleted": last.get("recorder", {}).get("files_deleted"),
        "mqtt_estimates_received": int(seq.size), "mqtt_missing": missing,
        "mqtt_missing_ranges": gaps, "mqtt_first_seq": int(seq[0]) if seq.size else None,
        "publisher_drops_samples": last.get("publish", {}).get("drops_samples"),
        "broker_restarts": len(restarts), "reconnect_s": reconnect,
        "reconnect_s_max": max(reconnect) if reconnect else None,
        "rss_mb_after_warmup": rss[0] if rss else None,
        "rss_mb_drift": round(max(rss) - min(rss), 2) if rss else None,
        "rss_mb_end": rss[-1] if rss else None,
        "cpu_percent_median": float(np.median([h["cpu_percent"] for h in warm])) if warm else None,
        "latency_us_p99_last": last.get("latency_us", {}).get("p99"),
        "missed_conversions": last.get("missed_conversions"),
        "recorder_dropped_raw_final": last.get("recorder", {}).get("dropped_raw", 0),
        "disk_fill": ({"tmpfs_mb": a.tmpfs_mb, "at_s": fill_at, "hold_s": a.fill_hold_s}
                      if tmpfs else None),
        "degraded_states": [list(x) for x in deg],
        "load_avg_median": round(float(np.median(loads)), 2) if loads else None,
        "load_avg_max": round(float(max(loads)), 2) if loads else None,
    }


_SUMMARY = re.compile(
    r"run summary: (?P<samples>\d+) samples, (?P<estimates>\d+) estimates, "
    r"(?P<missed>\d+) missed conversions, (?P<lost>\d+) lost, .*?"
    r"(?:; MQTT (?P<published>\d+) messages published, (?P<drops>\d+) samples dropped, "
    r"(?P<unsent>\d+) unsent)?(?:; recorder (?P<files>\d+) files, \d+ bytes, "
    r"(?P<rec_dropped>\d+) samples dropped)?$")
_SIM = re.compile(r"simulated ADS1256: (?P<lost>\d+) conversions lost while streaming.*?the "
                  r"driver counted (?P<counted>\d+) missed")


def _accounting(log_path: Path, recdir: Path, res: dict) -> dict:
    """The run summary and the simulator's count from the daemon's log; the raw records
    against the sample numbers (see the module docstring)."""
    from edge.daemon.vsr import RecordingError, read_recording_full

    text = log_path.read_text(errors="replace")
    out: dict = {}
    m = None
    for line in text.splitlines():
        mm = _SUMMARY.search(line)
        if mm:
            m = mm
        ms = _SIM.search(line)
        if ms:
            out["simulator"] = {k: int(v) for k, v in ms.groupdict().items()}
    if m is None:
        out["summary"] = None
        return out
    summ = {k: (int(v) if v is not None else None) for k, v in m.groupdict().items()}
    out["summary"] = summ
    sim = out.get("simulator")
    if sim:
        out["missed_conversions_minus_simulator"] = summ["missed"] - sim["lost"]
    try:
        rec = read_recording_full(recdir, "raw")
        seq = np.unique(rec.seq)
        adc_samples = summ["samples"] + summ["lost"]  # seq counts ring losses too
        not_recorded = adc_samples - seq.size
        out["raw_recorded"] = int(seq.size)
        out["raw_not_recorded"] = int(not_recorded)
        out["raw_uncounted"] = int(not_recorded - summ["lost"] - res.get(
            "recorder_dropped_raw_final", 0))
    except RecordingError as e:
        out["raw_error"] = str(e)
    out["mqtt_estimates_received_minus_made"] = res["mqtt_estimates_received"] - \
        summ["estimates"]
    return out


def _status_vs_losses(col, hold_s: float = 5.0) -> dict:
    """Loss intervals (between health messages, device time) against degraded periods."""
    with col.lock:
        health = sorted(col.health, key=lambda h: h.get("t", 0))
        states = sorted(col.state_ts, key=lambda x: x[0])

    def lost(h):
        return (h.get("missed_conversions", 0), h.get("lost_samples", 0),
                h.get("publish", {}).get("drops_samples", 0),
                h.get("recorder", {}).get("dropped_samples", 0))

    losses = []
    for h0, h1 in zip(health, health[1:]):
        if lost(h1) != lost(h0):
            losses.append((h0["t"], h1["t"], [b - a for a, b in zip(lost(h0), lost(h1))]))
    periods, start = [], None
    for t, st in states:
        if st == "degraded" and start is None:
            start = t
        elif st != "degraded" and start is not None:
            periods.append((start, t))
            start = None
    if start is not None:
        periods.append((start, float("inf")))

    def overlaps(a0, a1, b0, b1):
        return a0 <= b1 and b0 <= a1

    running = [lo for lo in losses if not any(overlaps(lo[0], lo[1], p0, p1)
                                              for p0, p1 in periods)]
    # a degraded period must start after a loss (one supervisor tick) and end within the
    # hold after the last one (plus one health interval of uncertainty on when it happened)
    no_loss = [p for p in periods if not any(overlaps(lo[0] - 1.0, lo[1] + hold_s + 1.0,
                                                      p[0], p[1]) for lo in losses)]
    return {"loss_intervals": len(losses), "degraded_periods": len(periods),
            "lost_while_running": [[round(a, 3), round(b, 3), d] for a, b, d in running],
            "degraded_without_loss": [[round(a, 3), round(b, 3)] for a, b in no_loss],
            "degraded_s": round(sum(min(b, 1e18) - a for a, b in periods
                                    if b != float("inf")), 1)}


if __name__ == "__main__":
    sys.exit(main())
