"""Per-sample CPU cost of the daemon by stage, with the simulator's own cost measured apart.

Used by ``benchmarks/daemon.py --only costs``. One in-process daemon run per configuration;
chosen functions are wrapped so that the CPU time of the calling thread
(``time.thread_time_ns``) spent in them is added to a stage, exclusively (a wrapped call
inside another one is taken out of the outer stage). Each thread's whole CPU time comes
from ``/proc/self/task/<tid>/schedstat`` (ns) sampled until the thread ends. The wrappers
add a few tenths of a us per wrapped call (two clock reads), measured in the same run
and taken out of "glue" and of the daemon total.

Stages (us of CPU per sample):

* ``DRDY wait``: the blocking wait for the next conversion and the wake-up (signal level:
  the simulator's pacing sleep, the analogue of ``wait_for_edge``; adc level: the driver's
  ``wait_for_edge`` on the simulated GPIO);
* ``SPI transfer + decode``: ``Acquisition.read`` with the driver's ``read_continuous``
  (bytes to codes) and the compiled post-processing (codes to units, saturation, gap and
  bit-error flags);
* ``step + ring + latency (one compiled call)``: the default configuration's clean
  sample, :func:`edge.daemon.fastpath._sample` (stage into the ring, check, kernel,
  alignment, the two latency stores, counters, publish);
* ``estimate step``: the general path (``_process``: flags, faults, resets, the compiled
  block step); ``ring``: the ring's producer/consumer calls outside the compiled call;
* ``latency``: the latency stores outside the compiled call; ``publish``: rows to the batch, JSON or
  binary encoding (loop thread) plus the MQTT sender and paho threads; ``recording``: rows
  to the recorder's chunks plus its writer thread; ``health``: the supervisor thread;
* ``glue``: the rest of the acquisition and loop threads (Python between the stages);
* ``simulator``: the simulated ADS1256 (SPI bytes, DRDY level) and the simulated run's
  duration limit (``LimitedAcquisition.read``), or the signal-level source, excluded from
  the daemon's total.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

#: the stage of the compiled per-sample call (edge.daemon.fastpath._sample)
FUSED = "step + ring + latency (one compiled call)"
#: module functions wrapped by instrument(), restored by restore(): (module, name, original)
_MODULE_WRAPS: list = []

STAGES = ("DRDY wait", "SPI transfer + decode", "estimate step", "ring", "latency",
          FUSED, "publish", "recording", "health", "glue")


class Accounting:
    """Exclusive per-stage thread CPU time [ns] of wrapped calls."""

    def __init__(self):
        self.ns: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        self._tl = threading.local()

    def wrap(self, obj, name: str, stage: str) -> None:
        fn = getattr(obj, name)
        acc, tl, clock = self.ns, self._tl, time.thread_time_ns
        calls = self.calls
        acc.setdefault(stage, 0)
        calls.setdefault(stage, 0)

        def wrapped(*a, **k):
            stack = tl.__dict__.setdefault("stack", [])
            stack.append(0)  # time spent in wrapped callees
            t0 = clock()
            try:
                return fn(*a, **k)
            finally:
                dt = clock() - t0
                inner = stack.pop()
                acc[stage] += dt - inner
                calls[stage] += 1
                if stack:
                    stack[-1] += dt

        setattr(obj, name, wrapped)

    def overhead_ns(self, n: int = 20000) -> float:
        """CPU ns a wrapper adds per call (wrapped minus plain no-op call, this thread)."""
        class Obj:
            def f(self):
                return None

        o, clock = Obj(), time.thread_time_ns
        plain = o.f
        t0 = clock()
        for _ in range(n):
            plain()
        t1 = clock()
        probe = Accounting()
        probe.wrap(o, "f", "probe")
        w = o.f
        t2 = clock()
        for _ in range(n):
            w()
        t3 = clock()
        return max(0.0, ((t3 - t2) - (t1 - t0)) / n)


class ThreadCpu:
    """Samples ``/proc/self/task/*/schedstat`` (CPU ns per thread) every ``period`` s and
    keeps the last value of each thread, also of threads that ended meanwhile."""

    def __init__(self, period: float = 0.05):
        self.last: dict[int, int] = {}
        self.first: dict[int, int] = {}
        self.names: dict[int, str] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, name="bench-cpu-sampler", daemon=True)
        self.period = period

    def sample(self) -> None:
        names = {t.native_id: t.name for t in threading.enumerate()}
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/schedstat") as f:
                    ns = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
            t = int(tid)
            self.first.setdefault(t, ns)
            self.last[t] = ns
            if t in names:
                self.names[t] = names[t]

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()

    def start(self) -> None:
        self.sample()
        self._t.start()

    def stop(self) -> None:
        self._stop.set()
        self._t.join()
        self.sample()

    def totals(self, base: dict[int, int] | None = None,
               end: dict[int, int] | None = None) -> dict[str, float]:
        """CPU seconds per thread name (threads of one name summed) from ``base`` (a copy of
        :attr:`last` taken earlier; default: the start) to ``end`` (default: now)."""
        out: dict[str, float] = {}
        for t, ns in (end or self.last).items():
            name = self.names.get(t, f"tid{t}")
            if name.startswith("paho-mqtt"):
                name = "paho"
            b = (base or {}).get(t, self.first.get(t, ns))
            out[name] = out.get(name, 0.0) + (ns - b) / 1e9
        return out


class Window:
    """The steady state of a run: from ``skip_s`` after the first sample to the end of the
    acquisition thread (start-up work such as the garbage-collector freeze, and the
    shutdown, are not per-sample costs)."""

    def __init__(self, d, acc: Accounting, tcpu: ThreadCpu, skip_s: float = 0.5):
        self.d, self.acc, self.tcpu, self.skip_s = d, acc, tcpu, skip_s
        self.base = None
        self._t = threading.Thread(target=self._run, name="bench-window", daemon=True)

    def start(self) -> None:
        self._t.start()

    def _run(self) -> None:
        d = self.d
        d.first_sample.wait()
        if d.stop_event.wait(self.skip_s):
            return
        self.tcpu.sample()
        self.base = dict(self.tcpu.last)
        self.acc_ns = dict(self.acc.ns)
        self.calls0 = sum(self.acc.calls.values())
        self.n0, self.t0, self.p0 = d.processed, time.monotonic(), time.process_time()
        acq = d._acq_thread
        while acq.is_alive():
            acq.join(0.02)
        self.tcpu.sample()
        self.end = dict(self.tcpu.last)
        self.acc_end = dict(self.acc.ns)
        self.calls1 = sum(self.acc.calls.values())
        self.n1, self.t1, self.p1 = d.processed, time.monotonic(), time.process_time()

    def finish(self) -> dict:
        """Per-sample stages (:func:`breakdown`), process CPU and simulator CPU [% of a
        core] over the window; call after the run."""
        self._t.join()
        if self.base is None:
            raise RuntimeError("the run ended within skip_s of its first sample: no window")
        n, wall = self.n1 - self.n0, self.t1 - self.t0
        proc = (self.p1 - self.p0) / wall * 100
        self.tcpu.stop()
        threads = self.tcpu.totals(self.base, self.end)
        acc = Accounting()
        acc.ns = {k: v - self.acc_ns.get(k, 0) for k, v in self.acc_end.items()}
        calls = self.calls1 - self.calls0
        st = breakdown(acc, threads, max(n, 1))
        # the wrappers' own cost lands in "glue" (the calling threads): take it out
        wrap_us = calls * self.acc.overhead_ns() / 1e3 / max(n, 1)
        st["glue"] -= wrap_us
        st["daemon"] -= wrap_us
        st["wrappers"] = wrap_us
        own = (threads.get("bench-cpu-sampler", 0.0)) / wall * 100
        sim = st["simulator"] * n / 1e6 / wall * 100
        wrap = st["wrappers"] * n / 1e6 / wall * 100
        return {"stages": st, "cpu_process": proc - own, "cpu_sim": sim, "cpu_wrap": wrap,
                "cpu_daemon": proc - own - sim - wrap, "samples": n, "wall": wall,
                "threads_us": {k: v * 1e6 / max(n, 1) for k, v in threads.items()}}


def instrument(d, level: str) -> Accounting:
    """Wrap the daemon ``d``'s stage functions (see the module docstring)."""
    from edge.daemon import samplepath, sim_signal

    acc = Accounting()
    ring = d.ring
    for name in ("write_span", "stage", "publish", "read_span", "release"):
        acc.wrap(ring, name, "ring")
    _MODULE_WRAPS.append((samplepath, "_step", samplepath._step))
    acc.wrap(samplepath, "_step", "estimate step")
    if d._sample_fn is not None:  # the compiled per-sample call's entry point
        acc.wrap(d, "_sample_fn", FUSED)
    acc.wrap(d, "_process", "estimate step")
    for name in ("add_one", "add"):
        acc.wrap(d.latency, name, "latency")
        acc.wrap(d.latency_ring, name, "latency")
    if d.pub is not None:
        for name in ("add_estimates", "flush_batch", "poll"):
            acc.wrap(d.pub, name, "publish")
    if d.rec is not None:
        for name in ("append_raw", "append_estimates", "poll"):
            acc.wrap(d.rec, name, "recording")
    if level == "signal":
        # the source delivering values after the driver: all simulator, except its pacing
        # sleep (the DRDY wait)
        acc.wrap(d.acq, "read", "simulator")

        class _Time:
            def __getattr__(self, k):
                return getattr(time, k)

        shim = _Time()
        shim.sleep = time.sleep
        acc.wrap(shim, "sleep", "DRDY wait")
        sim_signal.time = shim
    else:
        a = d.acq.acq  # LimitedAcquisition -> Acquisition -> ADS1256 -> simulated ports
        adc = a.adc
        acc.wrap(d.acq, "read", "simulator")  # the simulated run's duration limit
        for obj, name in ((a, "read"), (a, "_post_c"), (adc, "read_continuous")):
            acc.wrap(obj, name, "SPI transfer + decode")
        acc.wrap(adc.gpio, "wait_for_edge", "DRDY wait")
        # the simulated chip behind the ports: SPI bytes and the DRDY level
        for name in ("readbytes", "xfer2", "writebytes"):
            acc.wrap(adc.spi, name, "simulator")
        acc.wrap(adc.gpio, "input", "simulator")
        acc.wrap(adc.gpio.chip, "next_drdy_fall_ns", "simulator")
    return acc


def restore(level: str) -> None:
    from edge.daemon import sim_signal

    if level == "signal":
        sim_signal.time = time
    while _MODULE_WRAPS:  # else the next run's wrappers would wrap these
        mod, name, fn = _MODULE_WRAPS.pop()
        setattr(mod, name, fn)


def breakdown(acc: Accounting, threads: dict[str, float], samples: int) -> dict[str, float]:
    """us per sample by stage; adds ``glue``, ``simulator``, ``threads`` totals."""
    us = {k: v / 1e3 / samples for k, v in acc.ns.items()}
    per = {k: v * 1e6 / samples for k, v in threads.items()}
    out = {s: us.get(s, 0.0) for s in STAGES}
    out["publish"] += per.get("vsense-mqtt", 0.0) + per.get("paho", 0.0)
    out["recording"] += per.get("vsense-recorder", 0.0)
    out["health"] += per.get("vsense-sup", 0.0)
    wrapped = sum(us.values())
    loop_threads = per.get("vsense-acq", 0.0) + per.get("MainThread", 0.0)
    out["glue"] = loop_threads - wrapped
    out["simulator"] = us.get("simulator", 0.0)
    out["daemon"] = sum(out[s] for s in STAGES)
    return out


#: (label, level, rate [/s], [bundle] block = [loop] read_max, [loop] estimate_in[, other
#: run_once keywords])
CONFIGS = (
    ("1 kHz signal, default config", "signal", 1000.0, 1, "auto"),
    ("1 kHz signal, binary payloads", "signal", 1000.0, 1, "auto", {"fmt": "binary"}),
    ("1 kHz adc, default config", "adc", 1000.0, 1, "auto"),
    ("10 kHz signal, block 64", "signal", 10000.0, 64, "acquisition"),
    ("7.5 kHz adc, block 64", "adc", 7500.0, 64, "acquisition"),
)


def dispatch_probe(n: int = 2000) -> list[str]:
    """The cost of one call of a compiled function by its number of array arguments, through
    numba's dispatcher and through the compiled entry point (:func:`edge.compiled.direct`),
    in a tight loop and right after a 1 ms sleep (the per-sample situation at 1 kHz), next
    to an empty Python function: thread CPU [us] per call, interleaved, medians."""
    from numba import njit

    from edge.compiled import direct

    fns = {}
    for k in (1, 6, 35):
        names = ", ".join(f"a{j}" for j in range(k))
        ns: dict = {}
        exec(f"def f({names}):\n    a0[0] += 1.0\n    return 0\n", ns)  # noqa: S102
        fns[k] = njit(ns["f"])
    kinds = (np.zeros(4), np.zeros(4, np.int64), np.zeros(4, np.uint8), np.zeros((2, 2)))
    args = {k: tuple(kinds[j % 4] if j else kinds[0] for j in range(k)) for k in fns}

    def empty(*a):
        return 0

    calls = {"empty Python function (6 args)": (empty, args[6])}
    for k, f in fns.items():
        f(*args[k])
        calls[f"{k} arrays, dispatcher"] = (f, args[k])
        calls[f"{k} arrays, entry point"] = (direct(f, args[k]), args[k])
    clock = time.thread_time_ns
    tight, slept = {}, {m: [] for m in calls}
    for name, (f, a) in calls.items():
        t0 = clock()
        for _ in range(n):
            f(*a)
        tight[name] = (clock() - t0) / n / 1e3
    for _ in range(n):
        for name, (f, a) in calls.items():
            time.sleep(0.001)
            t0 = clock()
            f(*a)
            slept[name].append(clock() - t0)
    rows = ["| call | tight loop [us] | after a 1 ms sleep [us] |", "| --- | --- | --- |"]
    for name in calls:
        rows.append(f"| {name} | {tight[name]:.2f} | "
                    f"{float(np.median(slept[name])) / 1e3:.2f} |")
    return rows


def section_costs(run_once, loadavg, tmp, port, sec, repeat, configs=CONFIGS):
    """Instrumented runs of :data:`CONFIGS`; prints one table row per stage and config
    (median of ``repeat`` runs) and returns the summary rows."""
    print(f"\n## 5. Per-sample CPU by stage [us/sample], simulator apart   load {loadavg()}")
    print(f"\nCompiled-call cost by array arguments (thread CPU per call, medians; the "
          f"empty Python call is the clock's own floor)   load {loadavg()}")
    print("\n".join(dispatch_probe()), flush=True)
    res = {c[0]: [] for c in configs}
    for r_i in range(repeat):
        for label, level, rate, block, where, *kw in configs:
            r = run_once(tmp, rate, sec, port, instrument=True, level=level, block=block,
                         read_max=block, estimate_in=where, tag=f"cost{r_i}", **(kw or [{}])[0])
            w = r["window"]
            st = r["stages"] = w["stages"]
            # % of a core at the nominal rate: CPU per sample x rate (the simulated ADC can
            # fall behind real time on a loaded machine, which would dilute a wall-clock %)
            r["cpu_daemon"] = st["daemon"] * rate / 1e4
            res[label].append(r)
            print(f"  run {r_i + 1} {label}: {r['samples']}/{r['expected']} samples, lost "
                  f"{r['lost']}; steady window {w['samples']} samples in {w['wall']:.1f} s "
                  f"({w['samples'] / w['wall']:,.0f} /s): process CPU {w['cpu_process']:.1f}"
                  f" % - simulator {w['cpu_sim']:.1f} % - instrumentation {w['cpu_wrap']:.1f}"
                  f" % = daemon {w['cpu_daemon']:.1f} % of a core; daemon per sample x rate ="
                  f" {r['cpu_daemon']:.1f} %; stages "
                  + ", ".join(f"{k} {st[k]:.1f}" for k in STAGES)
                  + f" us/sample   load {loadavg()}", flush=True)
    rows = ["| stage [us/sample] | " + " | ".join(c[0] for c in configs) + " |",
            "| --- |" + " --- |" * len(configs)]

    def med(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2]

    for s in STAGES + ("daemon", "simulator", "wrappers"):
        rows.append(f"| {s} | " + " | ".join(
            f"{med([r['stages'][s] for r in res[c[0]]]):.1f}" for c in configs) + " |")
    rows.append("| daemon CPU [% of a core] at the nominal rate (us/sample x rate) | " + " | ".join(
        f"{med([r['cpu_daemon'] for r in res[c[0]]]):.1f}" for c in configs) + " |")
    rows.append("| lost samples (max over runs) | " + " | ".join(
        f"{max(r['lost'] for r in res[c[0]])}" for c in configs) + " |")
    print("\n".join(rows))
    return rows, res
