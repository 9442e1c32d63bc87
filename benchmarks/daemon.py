"""Daemon benchmark: sustained rate, loop latency, CPU and memory with the simulated ADC.

    /work/venv/bin/python benchmarks/daemon.py [--quick] [--level signal|adc]

Runs the real daemon (ring, estimator, recorder to a temp dir, MQTT to a private Mosquitto
when /usr/sbin/mosquitto exists) on the real-time clock:

1. highest sustained rate with no lost sample: rates stepped up, each for a few seconds
   (bundle: 8-DOF chain, window 3, one displacement channel, dt = 1/rate; block 64);
2. loop latency p50/p99/p99.9/max at 1,000 samples/s, per-sample (block 1, read_max 1);
3. CPU use at 1,000 samples/s of the whole process (with --level signal the source is
   precomputed, so the figure is the daemon's, not the structure simulation's);
4. resident memory.

All figures are printed side by side at the end.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from edge.daemon import app  # noqa: E402
from edge.daemon.config import config_from_dict  # noqa: E402
from edge.daemon.health import rss_mb  # noqa: E402


class ArrayVolts:
    """Precomputed channel voltages (n, nch), delivered in chunks."""

    def __init__(self, v):
        self.v, self.k = v, 0

    def volts(self, n):
        idx = (self.k + np.arange(n)) % self.v.shape[0]
        self.k += n
        return self.v[idx]


def _bundle(tmp: Path, rate: float) -> Path:
    from helpers import chain_bundle

    b = chain_bundle(window=3, kinds=("displacement",), dt=1.0 / rate)
    p = tmp / f"chain_{int(rate)}.npz"
    b.save(p)
    return p


def _broker(tmp: Path):
    exe = "/usr/sbin/mosquitto" if os.access("/usr/sbin/mosquitto", os.X_OK) else \
        shutil.which("mosquitto")
    if not exe:
        return None, None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = tmp / "m.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                    "max_queued_messages 100000\n")
    p = subprocess.Popen([exe, "-c", str(conf)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    return p, port


def _thread_cpu() -> dict:
    """CPU seconds (user+sys) per thread name of this process, from /proc."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    names = {t.native_id: t.name for t in threading.enumerate()}
    for tid in os.listdir("/proc/self/task"):
        try:
            f = open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[names.get(int(tid), f"tid{tid}")] = (int(f[11]) + int(f[12])) / tick
    return out


def run_once(tmp: Path, rate: float, seconds: float, block: int, read_max: int, port,
             level: str = "signal"):
    bp = _bundle(tmp, rate)
    rec = tmp / f"rec_{int(rate)}_{block}"
    cfg = config_from_dict({
        "device": {"id": f"bench{int(rate)}"}, "bundle": {"path": str(bp), "block": block},
        "channels": [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0, "unit": "m"}],
        "adc": {"drate": 1000.0 if level == "adc" else 30000.0, "mode": "continuous"},
        "mqtt": {"enabled": port is not None, "host": "127.0.0.1", "port": port or 1883,
                 "health_interval_s": 1.0, "qos": 0, "batch": max(50, int(rate / 20))},
        "recorder": {"dir": str(rec)},
        "loop": {"read_max": read_max, "ring_s": 2.0},
        "realtime": {"gc": "freeze"},
        "simulate": {"clock": "real", "duration_s": seconds, "level": level}})
    d = app.build_daemon(cfg, simulate=True)
    if level == "signal":  # precomputed source: measure the daemon, not the simulation
        n = int(rate * 2)
        v = d.acq.src.volts(n)
        d.acq.src = ArrayVolts(v)
    if d.pub is not None:
        d.pub.start()
    c0, t0 = _thread_cpu(), time.monotonic()
    p0 = time.process_time()
    code = d.run()
    wall = time.monotonic() - t0
    c1 = _thread_cpu()
    cpu = {k: (c1[k] - c0.get(k, 0.0)) / wall * 100 for k in c1}
    total_cpu = (time.process_time() - p0) / wall * 100
    shutil.rmtree(rec, ignore_errors=True)
    expected = int(round(rate * seconds))
    return {"code": code, "rate": rate, "samples": d.processed, "expected": expected,
            "lost": d.ring.lost, "overruns": d.ring.overruns, "latency": d.latency.summary(),
            "cpu_total": total_cpu, "cpu_threads": cpu, "estimates": d.estimates,
            "pub_drops": d.pub.stats["drops_samples"] if d.pub else None, "rss": rss_mb()}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="shorter runs")
    ap.add_argument("--level", default="signal", choices=("signal", "adc"),
                    help="latency/CPU run through the byte-level ADS1256 simulator (adc) "
                         "or at signal level")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    sec = 2.0 if args.quick else 4.0
    tmp = Path(tempfile.mkdtemp(prefix="vsense-bench-"))
    broker, port = _broker(tmp)
    try:
        print(f"# broker: {'mosquitto on port %d' % port if port else 'none (MQTT off)'}",
              flush=True)
        best = None
        for rate in (1000.0, 5000.0, 10000.0, 20000.0, 30000.0, 50000.0, 80000.0):
            r = run_once(tmp, rate, sec, 64, 64, port)
            ok = r["code"] == 0 and r["lost"] == 0 and r["samples"] == r["expected"]
            print(f"rate {rate:8.0f}/s: {r['samples']}/{r['expected']} samples, lost "
                  f"{r['lost']}, overruns {r['overruns']}, publish drops {r['pub_drops']}, "
                  f"CPU {r['cpu_total']:.0f} %  -> {'ok' if ok else 'LOSS'}", flush=True)
            if not ok:
                break
            best = rate
        lat = run_once(tmp, 1000.0, 2 * sec + 2, 1, 1, port, args.level)
        L = lat["latency"]
        print("\n| figure | goal | measured |")
        print("| --- | --- | --- |")
        print(f"| highest sustained rate, no lost sample (block 64) | >= 20,000 /s | "
              f"{best:,.0f} /s (next step failed or limit of the sweep) |")
        print(f"| latency p50 / p99 / p99.9 / max at 1,000 /s, block 1 ({args.level}) | "
              f"p99.9 < 100 us | {L['p50']} / {L['p99']} / {L['p999']} / {L['max']} us "
              f"({L['n']} samples, lost {lat['lost']}) |")
        print(f"| CPU at 1,000 /s (whole process) | < 10 % of a core | "
              f"{lat['cpu_total']:.1f} % |")
        print(f"| resident memory | < 150 MB | {lat['rss']:.0f} MB |")
    finally:
        if broker is not None:
            broker.terminate()
            broker.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
