"""Daemon benchmark: CPU at 1 kHz beside the sleep floor, latency, losses, memory.

    python benchmarks/daemon.py [--seconds 10] [--repeat 3] [--only cpu,rate,memory]
                                [--python /tmp/edge-venv/bin/python] [--bundle my_beam.npz]

``cpu``: the real daemon in this process (ring, estimator, recorder to a temporary
directory, MQTT to a private Mosquitto), **default configuration** (QoS 1, JSON, batch 50,
block 1, recorder on), 1,000 samples/s with the real clock, at two levels: ``signal``
(values injected after the driver) and ``adc`` (the byte-level ADS1256 simulator read by the
real driver: its CPU is in the figure, it runs on the acquisition thread). Beside them, in
the same run and interleaved with them (so they see the same machine load), **the floor**:
a thread that only sleeps to the same 1 ms deadlines (``time.sleep`` of the time left), the
one wake-up per sample that the ADS1256 (no FIFO) forces on any daemon. Each figure is the
CPU time of the whole process over the wall time of the steady state (from 1 s after the
first sample to the end), in percent of one core; "above floor" is the difference in
percentage points. The source is a precomputed record (not the structure model, whose
next chunk would be computed on the acquisition thread once a second). Also printed: samples lost (ring overruns), estimates not delivered
(dropped or unsent), DRDY -> estimate latency p50/p99/p99.9.

Beside them, ``source`` and ``driver``: the signal level's simulated source and the adc
level's driver and byte-level simulator alone (a thread that only reads one sample at a time
from them), so that the daemon's own cost at each level shows as the difference. ``gaps``: conversions the driver saw missed (DRDY times more
than 1.5 periods apart: the acquisition thread woke too late, e.g. on a loaded machine
without ``--fifo``).

``rate``: samples lost at high rates with block 64 (64 samples per driver read and per
estimator call), signal and adc level, real clock, MQTT off.

``memory``: resident memory (VmRSS) of ``vsense-edge run --simulate`` (adc level, real
clock, MQTT and recorder on) in a subprocess of each interpreter given (this one and
``--python``, e.g. a venv with the base install only), sampled from 2 s after READY to
the end; steady = median, and the largest.

``--bundle``: the cpu section with a built bundle instead of the Tikhonov chain bundle (e.g.
the Kalman smoother of ``vsense-offline build examples/my_beam.toml``);
``benchmarks/daemon_ab.py --bundle`` runs it against another tree, interleaved.

Figures depend on the machine and its load: the load average is printed with each run.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import statistics
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

from edge.daemon import app  # noqa: E402
from edge.daemon.config import config_from_dict  # noqa: E402

RATE = 1000.0


def loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def _cpu_s() -> float:
    """CPU time of this process so far [s] (user + system, all threads)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class ArrayVolts:
    """Precomputed channel voltages ``v (n, nch)``, delivered in chunks, round and round:
    the benchmark times the daemon (and the simulated converter), not the structure model
    that would compute the next chunk of 1,024 samples on the acquisition thread."""

    def __init__(self, v):
        self.v, self.k = v, 0

    def volts(self, n):
        idx = (self.k + np.arange(n)) % self.v.shape[0]
        self.k += n
        return self.v[idx]


def _bundle(tmp: Path) -> Path:
    from helpers import chain_bundle

    p = tmp / "chain.npz"
    if not p.exists():
        chain_bundle(window=3, kinds=("displacement",), dt=1.0 / RATE).save(p)
    return p


def _broker(tmp: Path):
    exe = "/usr/sbin/mosquitto" if os.access("/usr/sbin/mosquitto", os.X_OK) else \
        shutil.which("mosquitto")
    if not exe:
        sys.exit("needs mosquitto (the default configuration publishes with QoS 1)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = tmp / "m.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
    p = subprocess.Popen([exe, "-c", str(conf)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            break
        except OSError:
            time.sleep(0.05)
    return p, port


FIFO = 0  # [realtime] sched_fifo_priority of the runs (--fifo)


#: a built bundle to run instead of the chain bundle (``--bundle``), or None
BUNDLE: str | None = None


def _channels() -> list:
    """``[[channels]]``: the chain bundle's one, or :data:`BUNDLE`'s channels read as in
    ``examples/my_beam_edge.toml`` (500 V per unit, 2.5 V at zero)."""
    if BUNDLE is None:
        return [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0, "unit": "m"}]
    from edge.bundle import Bundle

    return [{"name": c.name, "pin": f"AIN{k}", "pin_neg": "AINCOM", "sensitivity": 500.0,
             "offset": 2.5, "unit": "m"} for k, c in enumerate(Bundle.load(BUNDLE).channels)]


def _cfg(tmp: Path, port: int, level: str, seconds: float) -> dict:
    """The default configuration, but for the device, broker, recorder directory and the
    simulation itself (and the bundle, :data:`BUNDLE`)."""
    return {"device": {"id": f"bench-{level}"},
            "bundle": {"path": str(Path(BUNDLE).resolve() if BUNDLE else _bundle(tmp))},
            "channels": _channels(),
            "adc": {"drate": RATE},
            "mqtt": {"host": "127.0.0.1", "port": port},
            "recorder": {"dir": str(tmp / f"rec-{level}")},
            "realtime": {"sched_fifo_priority": FIFO},
            "simulate": {"level": level, "duration_s": seconds}}


def run_daemon(tmp: Path, port: int, level: str, seconds: float) -> dict:
    """One in-process daemon run: CPU over the steady state, losses, latency."""
    cfg = config_from_dict(_cfg(tmp, port, level, seconds + 1.0))
    d = app.build_daemon(cfg, simulate=True)
    if level == "signal":
        d.acq.src = ArrayVolts(d.acq.src.volts(2000))
    else:  # LimitedAcquisition -> Acquisition -> ADS1256 -> simulated SPI -> chip
        inp = d.acq.acq.adc.spi.chip.source  # edge.daemon.simulate.InputSource
        inp.src = ArrayVolts(inp.src.volts(2000))
    d.pub.start()
    assert d.pub.wait_connected(10), "broker"
    mark = {}

    def steady():  # 1 s after the first sample: the start of the measured window
        d.first_sample.wait()
        time.sleep(1.0)
        mark["t"], mark["cpu"] = time.monotonic(), _cpu_s()

    th = threading.Thread(target=steady, daemon=True)
    th.start()
    code = d.run()
    t1, c1 = time.monotonic(), _cpu_s()
    th.join()
    h = d.health()
    shutil.rmtree(tmp / f"rec-{level}", ignore_errors=True)
    lat = h["latency_us"]  # from DRDY, or from the ring (the simulated ADC: latency_from)
    gaps = int(d.acq.acq.counts["gaps"]) if level == "adc" else 0
    return {"code": code, "cpu": (c1 - mark["cpu"]) / (t1 - mark["t"]) * 100,
            "samples": d.processed, "lost": d.ring.lost, "gaps": gaps,
            "undelivered": h["publish"]["drops_samples"] + h["publish"]["unsent_samples"],
            "p50": lat["p50"], "p99": lat["p99"], "p999": lat["p999"],
            "from": h["latency_from"]}


def run_floor(seconds: float) -> dict:
    """A thread that only sleeps to 1 ms deadlines: CPU of the process meanwhile."""
    n = int(seconds * RATE)
    late = np.zeros(n, np.int64)

    def th():
        if FIFO:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO))
        t0 = time.monotonic_ns()
        for k in range(n):
            due = t0 + (k + 1) * 1_000_000
            dl = due - time.monotonic_ns()
            if dl > 0:
                time.sleep(dl * 1e-9)
            late[k] = time.monotonic_ns() - due

    t = threading.Thread(target=th)
    w0, c0 = time.monotonic(), _cpu_s()
    t.start()
    t.join()
    return {"cpu": (_cpu_s() - c0) / (time.monotonic() - w0) * 100,
            "p99_late_us": float(np.percentile(late, 99)) / 1e3}


def run_driver(tmp: Path, seconds: float, level: str = "adc") -> dict:
    """The acquisition alone: a thread that only reads one sample at a time from it (what
    the daemon does before its own work). ``adc``: the driver and the byte-level simulator;
    ``signal``: the signal-level source (values injected after the driver)."""
    cfg = config_from_dict(_cfg(tmp, 1883, level, seconds))
    acq, _ = app.make_acquisition(cfg, app.load_estimator(cfg)[0], True)
    if level == "signal":
        acq.src = ArrayVolts(acq.src.volts(2000))
    else:
        inp = acq.acq.adc.spi.chip.source
        inp.src = ArrayVolts(inp.src.volts(2000))
    v, t, f = np.zeros((1, 1)), np.zeros(1, np.int64), np.zeros(1, np.uint8)
    acq.read(v, t, f)  # started, first conversion in
    out = {}

    def th():
        if FIFO:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO))
        w0, c0 = time.monotonic(), _cpu_s()
        try:
            while True:
                acq.read(v, t, f)
        except Exception:  # noqa: BLE001 - the end of the simulation
            pass
        out["cpu"] = (_cpu_s() - c0) / (time.monotonic() - w0) * 100

    x = threading.Thread(target=th)
    x.start()
    x.join()
    acq.close()
    return out


def section_cpu(seconds: float, repeat: int) -> None:
    print(f"## CPU at {RATE:g} samples/s, default configuration (QoS 1, JSON, batch 50, "
          f"recorder on), {seconds:g} s per run, {repeat} interleaved repeats")
    tmp = Path(tempfile.mkdtemp(prefix="vsense-bench-"))
    broker, port = _broker(tmp)
    res: dict[str, list] = {"floor": [], "source": [], "signal": [], "driver": [], "adc": []}
    try:
        run_daemon(tmp, port, "signal", 1.0)  # warm: numba's cache, imports
        for r in range(repeat):
            for what in res:
                x = run_floor(seconds) if what == "floor" else \
                    run_driver(tmp, seconds, "signal") if what == "source" else \
                    run_driver(tmp, seconds) if what == "driver" else \
                    run_daemon(tmp, port, what, seconds)
                res[what].append(x)
                extra = "" if what in ("floor", "source", "driver") else (
                    f"  samples {x['samples']}  lost {x['lost']}  gaps {x['gaps']}  "
                    f"undelivered "
                    f"{x['undelivered']}  latency from {x['from']} p50/p99/p99.9 {x['p50']:.0f}/"
                    f"{x['p99']:.0f}/{x['p999']:.0f} us")
                print(f"  run {r + 1} {what:6s}: {x['cpu']:5.2f} % of a core{extra}   "
                      f"load {loadavg()}", flush=True)
    finally:
        broker.terminate()
        broker.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    floor = [x["cpu"] for x in res["floor"]]
    print("\n| | % of a core (median, range) | above the floor (pp, median of the runs) |")
    print("| --- | --- | --- |")
    print(f"| sleep-only thread (floor) | {statistics.median(floor):.2f} "
          f"({min(floor):.2f}-{max(floor):.2f}) | 0 |")
    names = {"source": "signal-level source alone (signal level's reads)",
             "driver": "driver + ADC simulator alone (adc level's reads)"}
    for what in ("source", "signal", "driver", "adc"):
        c = [x["cpu"] for x in res[what]]
        above = statistics.median([a - f for a, f in zip(c, floor)])
        print(f"| {names.get(what, f'daemon, {what} level')} | {statistics.median(c):.2f} "
              f"({min(c):.2f}-{max(c):.2f}) | {above:+.2f} |")
    for level, alone in (("signal", "source"), ("adc", "driver")):
        c = [a["cpu"] - b["cpu"] for a, b in zip(res[level], res[alone])]
        print(f"| daemon, {level} level, above its {names[alone].split(' (')[0]} | | "
              f"{statistics.median(c):+.2f} |")


def section_rate(seconds: float) -> None:
    """Highest rates without a lost sample: block 64 (64 samples per driver read and per
    estimator call), real clock, MQTT off; the bundle's dt matches each rate."""
    print(f"\n## Sustained rate, block 64, real clock, {seconds:g} s per rate")
    tmp = Path(tempfile.mkdtemp(prefix="vsense-rate-"))
    from helpers import chain_bundle

    try:
        for level, rates in (("signal", (10_000.0, 30_000.0, 80_000.0)),
                             ("adc", (3_750.0, 7_500.0, 15_000.0))):
            for rate in rates:
                p = tmp / f"chain{int(rate)}.npz"
                chain_bundle(window=3, kinds=("displacement",), dt=1.0 / rate).save(p)
                c = _cfg(tmp, 1883, level, seconds)
                c["bundle"] = {"path": str(p), "block": 64}
                c["adc"] = {"drate": rate if level == "adc" else 30000.0}
                c["mqtt"] = {"enabled": False}
                d = app.build_daemon(config_from_dict(c), simulate=True)
                t0, c0 = time.monotonic(), _cpu_s()
                d.run()
                cpu = (_cpu_s() - c0) / (time.monotonic() - t0) * 100
                gaps = int(d.acq.acq.counts["gaps"]) if level == "adc" else 0
                print(f"  {level:6s} {rate:8.0f} /s: samples {d.processed}  lost {d.ring.lost}"
                      f"  conversions missed {gaps}  CPU {cpu:.1f} %   load {loadavg()}",
                      flush=True)
                shutil.rmtree(tmp / f"rec-{level}", ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


MEM = r"""
import json, os, sys, threading, time
sys.path.insert(0, sys.argv[2])
from edge.daemon.config import config_from_dict
from edge.daemon import app
cfg = config_from_dict(json.loads(sys.argv[1]))
d = app.build_daemon(cfg, simulate=True)
d.pub.start()
rss = []
def sample():
    d.first_sample.wait()
    time.sleep(2.0)
    while not d.stop_event.is_set():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                rss.append(int(line.split()[1]) / 1024)
        time.sleep(0.5)
threading.Thread(target=sample, daemon=True).start()
d.run()
try:
    import scipy  # noqa: F401
    env = "scipy importable"
except ImportError:
    env = "base install (no scipy)"
print(json.dumps({"rss": rss, "env": env}))
"""


def section_memory(pythons: list[str], seconds: float) -> None:
    import json

    print(f"\n## Resident memory, vsense-edge run --simulate (adc level, MQTT QoS 1, "
          f"recorder), {seconds:g} s")
    tmp = Path(tempfile.mkdtemp(prefix="vsense-mem-"))
    broker, port = _broker(tmp)
    try:
        for py in pythons:
            cfg = _cfg(tmp, port, "adc", seconds)
            env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                       MALLOC_ARENA_MAX="2")
            for _ in range(2):  # 1st: fills numba's cache for this interpreter
                out = subprocess.run([py, "-c", MEM, json.dumps(cfg), str(ROOT)], env=env,
                                     capture_output=True, text=True, timeout=seconds + 300)
            if out.returncode != 0:
                print(f"  {py}: failed\n{out.stderr[-2000:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            x = r["rss"]
            print(f"  {py} ({r['env']}): steady {statistics.median(x):.1f} MB, largest "
                  f"{max(x):.1f} MB, {len(x)} readings   load {loadavg()}")
    finally:
        broker.terminate()
        broker.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", default="cpu,rate,memory")
    ap.add_argument("--fifo", type=int, default=0,
                    help="[realtime] sched_fifo_priority of the runs (0: the default)")
    ap.add_argument("--python", action="append", default=[],
                    help="another interpreter for the memory figure (repeatable)")
    ap.add_argument("--bundle", default=None,
                    help="a built bundle for the cpu section (default: the chain bundle)")
    a = ap.parse_args(argv)
    only = set(a.only.split(","))
    global FIFO, BUNDLE
    FIFO, BUNDLE = a.fifo, a.bundle
    print(f"# benchmarks/daemon.py  {time.strftime('%Y-%m-%d %H:%M')}  "
          f"{os.cpu_count()} CPUs  load {loadavg()}")
    if "cpu" in only:
        section_cpu(a.seconds, a.repeat)
    if "rate" in only:
        section_rate(3.0)
    if "memory" in only:
        section_memory([sys.executable, *a.python], max(a.seconds, 10.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
