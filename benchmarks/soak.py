"""Soak test of the edge daemon (issue 12; not in CI): hours at 1 kHz with broker restarts
and a full disk.

    sudo .venv/bin/python benchmarks/soak.py [--duration-s 3600] [--restart-every-s 300]
        [--fill-at-s 1200] [--fill-hold-s 60] [--tmpfs-mb 64] [--level signal|adc]
        [--out soak.json]

What runs:

* a private Mosquitto on a free loopback port with persistence on (so the subscriber's
  queued QoS 1 messages survive a restart), restarted (SIGTERM, start again) every
  ``--restart-every-s``;
* ``vsense-edge run --simulate`` as a subprocess: 8-DOF chain bundle (window 3, one
  displacement channel) at 1,000 samples/s, real clock, MQTT QoS 1, binary estimates,
  recorder on a **tmpfs of ``--tmpfs-mb``** mounted for the run (needs root; without root the
  recorder directory is a plain temporary directory and the disk fill is skipped, said in
  the report), ``max_disk_mb`` = 3/4 of the tmpfs;
* at ``--fill-at-s`` a filler file takes all free space of the tmpfs for ``--fill-hold-s``
  (the recorder never deletes this run's files: it drops and counts new data, status
  ``degraded``, while the disk is full), then it is deleted;
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
"""

from __future__ import annotations

import argparse
import json
import os
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
    ap.add_argument("--fill-at-s", type=float, default=None, help="default: duration / 3")
    ap.add_argument("--fill-hold-s", type=float, default=60.0)
    ap.add_argument("--tmpfs-mb", type=int, default=64)
    ap.add_argument("--level", choices=("signal", "adc"), default="signal")
    ap.add_argument("--warmup-s", type=float, default=300.0)
    ap.add_argument("--daemon-reconnect-min-s", type=float, default=0.5,
                    help="[mqtt] reconnect_min_s of the daemon (the collector reconnects "
                         "after 0.02-0.2 s: see the module docstring)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    fill_at = a.duration_s / 3 if a.fill_at_s is None else a.fill_at_s

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
    print(f"# soak: {a.duration_s:g} s at 1 kHz ({a.level} level), broker restart every "
          f"{a.restart_every_s:g} s, disk fill at {fill_at:g} s for {a.fill_hold_s:g} s "
          f"({'tmpfs ' + str(a.tmpfs_mb) + ' MB' if tmpfs else 'NO tmpfs: fill skipped'}); "
          f"work dir {work}; load {os.getloadavg()[0]:.2f}", flush=True)
    t0 = time.monotonic()
    next_restart = t0 + a.restart_every_s
    filled = None
    fill_done = False
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
            if tmpfs and filled is None and not fill_done and now - t0 >= fill_at:
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
                filled, fill_done = None, True
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
        "disk_fill": ({"tmpfs_mb": a.tmpfs_mb, "at_s": fill_at, "hold_s": a.fill_hold_s}
                      if tmpfs else None),
        "degraded_states": [list(x) for x in deg],
        "load_avg_median": round(float(np.median(loads)), 2) if loads else None,
        "load_avg_max": round(float(max(loads)), 2) if loads else None,
    }


if __name__ == "__main__":
    sys.exit(main())
