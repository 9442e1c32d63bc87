"""Daemon benchmark: sustained rate, loop latency, CPU and memory with the simulated ADC.

    /work/venv/bin/python benchmarks/daemon.py [--quick] [--repeat 3]
        [--python /tmp/edge-venv/bin/python] [--only floor,rate,latency,memory,costs]

Runs the real daemon (ring, estimator, recorder to a temp dir, MQTT QoS 0 to a private
Mosquitto when /usr/sbin/mosquitto exists). Bundle: 8-DOF chain, window 3, one displacement
channel, dt = 1/rate. Every figure is run ``--repeat`` times (variants interleaved, so they
see the same machine load) and reported as the median with the range; the load average is
printed with each section.

0. **Machine floor**: wake-up delay of a Python thread sleeping to a 1 ms deadline, normal
   and SCHED_FIFO: no daemon can have a lower latency tail than this on the machine.
1. **Highest sustained rate with no lost sample** (block 64, read_max 64, estimation in the
   loop thread), rates stepped up for a few seconds each, at three levels:
   ``signal`` (values injected after the driver, real clock), ``adc`` (byte-level ADS1256
   simulator read by the real driver in continuous mode, at the converter's data rates,
   real clock) and ``adc`` with the virtual clock (no pacing: the rate the whole chain
   reaches, reported as samples per wall-clock second).
2. **Latency at 1,000 samples/s**, block 1, read_max 1: from the sample's DRDY time to its
   estimate being ready, and from the sample entering the ring to the same point (see
   docs/daemon.md "Latency"), for the variants in :data:`VARIANTS` side by side.
3. **CPU at 1,000 samples/s** of the whole process during the latency runs.
4. **Resident memory** of ``vsense-edge run --simulate`` (adc level, real clock, MQTT and
   recorder on) in a subprocess of each interpreter given (this one and ``--python``):
   the environment is reported (base-only = scipy not importable; numba imports scipy when
   it is installed), steady state from 1 s after the daemon's READY=1, with the releases
   after start-up switched on one by one; by mapping and by start-up stage: see
   ``benchmarks/daemon_memory.py``.
5. **CPU per sample by stage**, simulator apart: see ``benchmarks/daemon_costs.py``; then
   the bare wake-up floor at 1 kHz beside it (``benchmarks/wake_floor.py``).
6. **The per-sample read paths at adc level side by side** (``--only ab``, not in the
   default set): the driver's bytes into one compiled call, the one-row read, the read
   before both, alternating within each run: see ``benchmarks/ab_read.py``.
"""

from __future__ import annotations

import argparse
import logging
import os
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

import ab_read  # noqa: E402
import daemon_costs as costs  # noqa: E402
import daemon_memory as memory  # noqa: E402
import wake_floor  # noqa: E402
from edge.daemon import app, realtime  # noqa: E402
from edge.daemon.config import config_from_dict  # noqa: E402

#: latency variants: name -> ([loop] estimate_in, [realtime] switch_interval_us,
#: sched_fifo_priority of the acquisition thread, sched_fifo_others, timer_slack_ns)
VARIANTS = {
    "loop thread (before)": ("loop", 5000.0, 0, False, 0),
    "acq thread": ("acquisition", 5000.0, 0, False, 0),
    "acq thread, slack 1 us": ("acquisition", 5000.0, 0, False, 1000),
    "acq thread, slack 1 us, switch 100 us": ("acquisition", 100.0, 0, False, 1000),
    "acq thread, FIFO 50": ("acquisition", 5000.0, 50, False, 1000),
    "acq thread, FIFO 50, switch 100 us": ("acquisition", 100.0, 50, False, 1000),
    "acq thread, FIFO 50 + others 49, switch 100 us": ("acquisition", 100.0, 50, True, 1000),
}


class ArrayVolts:
    """Precomputed channel voltages (n, nch), delivered in chunks."""

    def __init__(self, v):
        self.v, self.k = v, 0

    def volts(self, n):
        idx = (self.k + np.arange(n)) % self.v.shape[0]
        self.k += n
        return self.v[idx]


def loadavg() -> str:
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


def _bundle(tmp: Path, rate: float) -> Path:
    from helpers import chain_bundle

    p = tmp / f"chain_{int(rate)}.npz"
    if not p.exists():
        chain_bundle(window=3, kinds=("displacement",), dt=1.0 / rate).save(p)
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


def _cfg_dict(tmp: Path, rate: float, seconds: float, port, *, level="signal",
              clock="real", block=1, read_max=1, estimate_in="auto", switch_us=5000.0,
              fifo=0, others=False, slack=1000, gc="freeze", max_lead_us=2000.0,
              release=True, tag="", fmt="json"):
    rec = tmp / f"rec_{int(rate)}_{block}_{tag}"
    return {
        "device": {"id": f"bench{int(rate)}"},
        "bundle": {"path": str(_bundle(tmp, rate)), "block": block},
        "channels": [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0, "unit": "m"}],
        "adc": {"drate": rate if level == "adc" else 30000.0, "mode": "continuous"},
        "mqtt": {"enabled": port is not None, "host": "127.0.0.1", "port": port or 1883,
                 "health_interval_s": 1.0, "qos": 0, "batch": max(50, int(rate / 20)),
                 "format": fmt},
        "recorder": {"dir": str(rec)},
        "loop": {"read_max": read_max, "ring_s": 2.0, "estimate_in": estimate_in},
        "realtime": {"gc": gc, "switch_interval_us": switch_us,
                     "sched_fifo_priority": fifo, "sched_fifo_others": others,
                     "timer_slack_ns": slack, "release_compiler_memory": release},
        "simulate": {"clock": clock, "duration_s": seconds, "level": level,
                     "max_lead_us": max_lead_us}}


def run_once(tmp: Path, rate: float, seconds: float, port, instrument=False, **kw) -> dict:
    """One in-process daemon run; returns counts, latencies (us), CPU (% of a core);
    ``instrument``: per-stage CPU (:mod:`daemon_costs`) in ``stages``."""
    read_path = kw.pop("read_path", "wire")
    hook = kw.pop("hook", None)  # called with the built daemon before it runs
    d_cfg = _cfg_dict(tmp, rate, seconds, port, **kw)
    cfg = config_from_dict(d_cfg)
    old_switch = sys.getswitchinterval()
    realtime.set_switch_interval(cfg["realtime"]["switch_interval_us"])
    try:
        d = app.build_daemon(cfg, simulate=True)
        # precomputed source: time the daemon (and the driver), not the structure model,
        # whose next chunk of 1,024 samples would otherwise be computed on the acquisition
        # thread once a second at 1,000 samples/s
        if kw.get("level", "signal") == "signal":
            d.acq.src = ArrayVolts(d.acq.src.volts(int(rate * 2)))
        else:  # LimitedAcquisition -> Acquisition -> ADS1256 -> FakeSpiDev -> chip
            inp = d.acq.acq.adc.spi.chip.source  # edge.daemon.simulate.InputSource
            inp.src = ArrayVolts(inp.src.volts(int(rate * 2)))
        if d.pub is not None:
            d.pub.start()
        win = None
        if instrument:  # per-stage CPU over the steady state (daemon_costs)
            acc = (costs.instrument(d, kw.get("level", "signal")) if instrument != "totals"
                   else costs.Accounting())  # no wrapper: the threads' totals only
            win = costs.Window(d, acc, costs.ThreadCpu(), cold=kw.get("block", 1) == 1)
            win.tcpu.start()
            win.start()
        if read_path in ("one-row", "general"):  # the reads before (comparisons): no call
            d._wire_read = None                  # from the driver's bytes (_sample_wire),
        if read_path == "general":               # and not the one-row read either
            d.acq.acq._one = None
        if hook is not None:
            hook(d)
        t0, p0 = time.monotonic(), time.process_time()
        code = d.run()
        wall = time.monotonic() - t0
        total_cpu = (time.process_time() - p0) / wall * 100
        window = win.finish() if win is not None else None
    finally:
        costs.restore(kw.get("level", "signal"))
        sys.setswitchinterval(old_switch)
        shutil.rmtree(d_cfg["recorder"]["dir"], ignore_errors=True)
    return {"code": code, "rate": rate, "samples": d.processed, "wall": wall,
            "window": window,
            "expected": int(round(rate * seconds)), "lost": d.ring.lost,
            "overruns": d.ring.overruns, "drdy": d.latency.summary(),
            "drdy_known": d._t_off is not None, "ring": d.latency_ring.summary(),
            "cpu_total": total_cpu,
            "pub_drops": d.pub.stats["drops_samples"] if d.pub else None,
            "inline": d.inline}


def _med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def _fmt_range(xs, fmt="{:.0f}"):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "n/a"
    m = statistics.median(xs)
    return f"{fmt.format(m)} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"


# ----------------------------------------------------------------------------- sections
def section_floor(seconds, repeat):
    """What the machine allows: wake-up delay of a Python thread sleeping to a 1 ms deadline
    (nothing else in the process), normal scheduling and SCHED_FIFO 50, timer slack 1 us."""
    print(f"\n## 0. Machine floor: wake-up delay of a sleeping thread, 1 ms period   "
          f"load {loadavg()}")
    res = {}
    for r_i in range(repeat):
        for fifo in (0, 50):
            n = int(seconds * 1000)
            out = np.zeros(n, np.int64)

            def th():
                realtime.set_fifo(fifo)
                realtime.set_timer_slack(1000)
                t0 = time.monotonic_ns()
                for k in range(n):
                    due = t0 + (k + 1) * 1_000_000
                    dl = due - time.monotonic_ns()
                    if dl > 0:
                        time.sleep(dl * 1e-9)
                    out[k] = time.monotonic_ns() - due

            t = threading.Thread(target=th)
            t.start()
            t.join()
            p = np.percentile(out / 1e3, [50, 99, 99.9])
            res.setdefault(fifo, []).append((*p, out.max() / 1e3))
            print(f"  run {r_i + 1} {'SCHED_FIFO 50' if fifo else 'normal       '}: "
                  f"p50/p99/p99.9/max {p[0]:.0f}/{p[1]:.0f}/{p[2]:.0f}/{out.max() / 1e3:.0f} us"
                  f"   load {loadavg()}", flush=True)
    return res


def section_rate(tmp, port, sec, repeat):
    print(f"\n## 1. Highest sustained rate, no lost sample (block 64)   load {loadavg()}")
    sweeps = {
        "signal, real clock": ("signal", "real",
                               (5000.0, 10000.0, 20000.0, 30000.0, 50000.0, 80000.0)),
        "adc, real clock": ("adc", "real", (2000.0, 3750.0, 7500.0, 15000.0, 30000.0)),
    }
    rows = []
    for name, (level, clock, rates) in sweeps.items():
        best = []
        for r_i in range(repeat):
            ok_rate = None
            for rate in rates:
                r = run_once(tmp, rate, sec, port, level=level, clock=clock, block=64,
                             read_max=64, estimate_in="loop", tag=f"rate{r_i}")
                ok = r["code"] == 0 and r["lost"] == 0 and r["samples"] == r["expected"]
                print(f"  {name}, run {r_i + 1}: {rate:7.0f}/s: {r['samples']}/{r['expected']}"
                      f" samples, lost {r['lost']}, CPU {r['cpu_total']:.0f} % -> "
                      f"{'ok' if ok else 'LOSS'}", flush=True)
                if not ok:
                    break
                ok_rate = rate
            best.append(ok_rate)
        rows.append((name, best, rates[-1]))
    # virtual clock: how fast the driver + simulator + daemon chain runs
    thr = []
    for r_i in range(repeat):
        r = run_once(tmp, 30000.0, sec, port, level="adc", clock="virtual", block=64,
                     read_max=64, estimate_in="loop", tag=f"virt{r_i}")
        thr.append(r["samples"] / r["wall"])
        print(f"  adc, virtual clock, run {r_i + 1}: {r['samples']} samples in "
              f"{r['wall']:.2f} s = {thr[-1]:,.0f} samples/s, lost {r['lost']}", flush=True)
    return rows, thr


def section_latency(tmp, port, sec, repeat, levels):
    print(f"\n## 2./3. Latency and CPU at 1,000 samples/s, block 1   load {loadavg()}")
    res = {(lv, v): [] for lv in levels for v in VARIANTS}
    for r_i in range(repeat):
        for lv in levels:
            for v, (where, sw, fifo, others, slack) in VARIANTS.items():
                r = run_once(tmp, 1000.0, sec, port, level=lv, estimate_in=where,
                             switch_us=sw, fifo=fifo, others=others, slack=slack,
                             max_lead_us=0.0, tag=f"lat{r_i}")
                res[(lv, v)].append(r)
                L, R = r["drdy"], r["ring"]
                print(f"  run {r_i + 1} {lv:6s} {v:42s}: DRDY p50/p99/p99.9/max "
                      f"{L['p50']}/{L['p99']}/{L['p999']}/{L['max']} us, ring "
                      f"{R['p50']}/{R['p99']}/{R['p999']}/{R['max']} us, CPU "
                      f"{r['cpu_total']:.1f} %, lost {r['lost']}   load {loadavg()}",
                      flush=True)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="shorter runs")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    ap.add_argument("--python", action="append", default=[],
                    help="also measure memory with this interpreter (e.g. a base-only venv "
                         "/tmp/edge-venv/bin/python); repeatable")
    ap.add_argument("--only", default="floor,rate,latency,memory,costs",
                    help="comma list of sections: floor, rate, latency, memory, costs, ab")
    ap.add_argument("--configs", default="",
                    help="costs: only the configurations whose label contains one of these "
                         "comma-separated strings (e.g. '1 kHz')")
    ap.add_argument("--levels", default="signal,adc", help="latency levels: signal, adc")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    only = set(args.only.split(","))
    sec = 2.0 if args.quick else 4.0
    tmp = Path(tempfile.mkdtemp(prefix="vsense-bench-"))
    broker, port = _broker(tmp)
    summary = []
    try:
        print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}, {os.cpu_count()} CPUs, load {loadavg()}"
              f", broker: {'mosquitto on port %d' % port if port else 'none (MQTT off)'}, "
              f"this interpreter: {sys.executable}: {memory.env_of(sys.executable)}", flush=True)
        if "floor" in only:
            fl = section_floor(sec, args.repeat)
            for fifo, rs in fl.items():
                summary.append(
                    f"| machine floor: thread wake-up delay p50 / p99 / p99.9 / max, "
                    f"{'SCHED_FIFO 50' if fifo else 'normal scheduling'} | - | "
                    + " / ".join(_fmt_range([r[j] for r in rs]) for j in range(4)) + " us |")
        if "rate" in only:
            rows, thr = section_rate(tmp, port, sec, args.repeat)
            for name, best, top in rows:
                b = [x for x in best if x is not None]
                summary.append(f"| highest sustained rate, no lost sample ({name}) | "
                               f">= 20,000 /s | {_fmt_range(b, '{:,.0f}')} /s"
                               f"{' (top of the sweep)' if b and min(b) == top else ''} |")
            summary.append(f"| rate the adc chain reaches with the virtual clock | - | "
                           f"{_fmt_range(thr, '{:,.0f}')} /s |")
        if "latency" in only:
            levels = args.levels.split(",")
            res = section_latency(tmp, port, 1.5 * sec + 1, args.repeat, levels)
            for (lv, v), rs in res.items():
                def col(key, q):
                    return _fmt_range([r[key][q] for r in rs])

                summary.append(
                    f"| latency DRDY->estimate p50 / p99 / p99.9 / max, {lv}, {v} | "
                    f"p99.9 < 100 us | {col('drdy', 'p50')} / {col('drdy', 'p99')} / "
                    f"{col('drdy', 'p999')} / {col('drdy', 'max')} us |")
                summary.append(
                    f"| latency ring->estimate p50 / p99 / p99.9 / max, {lv}, {v} | - | "
                    f"{col('ring', 'p50')} / {col('ring', 'p99')} / "
                    f"{col('ring', 'p999')} / {col('ring', 'max')} us |")
                summary.append(f"| CPU at 1,000 /s, {lv}, {v} | < 10 % of a core | "
                               f"{_fmt_range([r['cpu_total'] for r in rs], '{:.1f}')} % |")
        if "memory" in only:
            summary += memory.section_memory(_cfg_dict, loadavg, tmp, port,
                                             [sys.executable] + args.python, args.repeat,
                                             6.0 if args.quick else 10.0)
        if "costs" in only:
            sel = tuple(c for c in costs.CONFIGS if not args.configs
                        or any(w in c[0] for w in args.configs.split(",")))
            rows, res = costs.section_costs(run_once, loadavg, tmp, port, sec + 1, args.repeat,
                                            sel)
            rows += wake_floor.beside_costs(res, sel, sec, args.repeat, loadavg)
        if "ab" in only:
            ab_rows = ab_read.section_ab(run_once, loadavg, tmp, port, 4 * sec + 1,
                                         args.repeat)
        print(f"\n# summary: median (min-max) of {args.repeat} runs; load {loadavg()}")
        print("| figure | goal | measured |")
        print("| --- | --- | --- |")
        print("\n".join(summary))
        if "costs" in only:
            print("\n" + "\n".join(rows))
        if "ab" in only:
            print("\n" + "\n".join(ab_rows))
    finally:
        if broker is not None:
            broker.terminate()
            broker.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
