"""Per-sample CPU cost of the daemon by stage, with the simulator's own cost measured apart.

Used by ``benchmarks/daemon.py --only costs``. One in-process daemon run per configuration;
chosen functions are wrapped so that the CPU time of the calling thread
(``time.thread_time_ns``) spent in them is added to a stage, exclusively (a wrapped call
inside another one is taken out of the outer stage). Each thread's whole CPU time comes
from ``/proc/self/task/<tid>/schedstat`` (ns) sampled until the thread ends.

The wrappers' own cost. ``thread_time_ns`` is a system call here (about 1.2 us in a tight
loop, several us right after a wake-up), so a wrapper costs far more than the calls it
times. It is measured in the same run in the daemon's condition (after each 1 ms sleep, a
row of 8 wrapped calls, beside the same row unwrapped; back to back for block reads;
:meth:`Accounting.overhead_ns`) and
split in two: the part between the wrapper's two clock reads, charged to the wrapped call's
own stage, and the rest, which lands in the caller's stage (a wrapped caller, or "glue" at
top level). Each stage loses its own calls' inner part and the outer part of the wrapped
calls it made (:attr:`Accounting.nested`). Before 2026-11-26 the whole cost was measured in
a tight loop and taken out of "glue" only, so "SPI transfer + decode" (whose calls wrap the
simulator's port calls) kept the outer part of four wrappers and "glue" went negative.

Totals without wrappers (adc level). Each adc configuration is also run with no wrapper at
all: the daemon's threads' CPU per sample (simulator included), minus the simulator measured
apart by replay (``benchmarks/sim_replay.py``: the driver's port calls alone against the
simulated chip, minus the same calls against null ports with the same pacing), is the
``daemon, no wrapper`` row: no instrumentation error, but the replayed simulator meets
warmer caches than in the daemon, so this figure is if anything high. The stage table and
this row bracket the daemon's cost. Note the adc-level pacing: the simulated clock may lead
the wall clock by ``max_lead_us`` (2 ms), so the acquisition thread sleeps and wakes about
once per two samples at 1 kHz (``wake-ups per sample`` row), where real hardware and the
signal level wake once per sample.

Stages (us of CPU per sample):

* ``DRDY wait``: the blocking wait for the next conversion and the wake-up (signal level:
  the simulator's pacing sleep, the analogue of ``wait_for_edge``; adc level: the simulated
  clock's sleep, ``SimClock.sleep_until_ns``, inside the fake GPIO's ``wait_for_edge``;
  until 2026-11-26 the fake ``wait_for_edge`` as a whole, whose edge computation in Python
  is the simulator's and now counted there, as in the replay);
* ``SPI transfer + decode``: ``Acquisition.read`` with the driver's ``read_one`` (one row,
  the default configuration) or ``read_continuous`` (bytes to codes) and the compiled
  post-processing (``_post_one`` / ``_post_packed``: codes to units, saturation, gap and
  bit-error flags);
* ``step + ring + latency (one compiled call)``: the default configuration's clean
  sample, :func:`edge.daemon.fastpath._sample` (stage into the ring, check, kernel,
  alignment, the two latency stores, counters, publish); at adc level since 2026-11-26
  :func:`edge.daemon.fastpath._sample_wire`, which also decodes and post-processes the
  driver's bytes (what ``_post_one`` in "SPI transfer + decode" did);
* ``estimate step``: the general path (``_process``: flags, faults, resets, the compiled
  block step); ``ring``: the ring's producer/consumer calls outside the compiled call;
* ``latency``: the latency stores outside the compiled call; ``publish``: rows to the batch, JSON or
  binary encoding (loop thread) plus the MQTT sender and paho threads; ``recording``: rows
  to the recorder's chunks plus its writer thread; ``health``: the supervisor thread;
* ``glue``: the rest of the acquisition and loop threads (Python between the stages);
* ``simulator``: the simulated ADS1256 (SPI bytes, DRDY level, the fake GPIO's edge wait
  around the clock's sleep) and the simulated run's
  duration limit (``LimitedAcquisition.read``), or the signal-level source, excluded from
  the daemon's total.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import sim_replay
from dispatch_probe import dispatch_probe

#: the stage of the compiled per-sample call (edge.daemon.fastpath._sample)
FUSED = "step + ring + latency (one compiled call)"
#: module functions wrapped by instrument(), restored by restore(): (module, name, original)
_MODULE_WRAPS: list = []

#: adc level: the daemon's threads in a run without wrappers, the simulator measured apart by
#: replay (benchmarks/sim_replay.py), their difference
TOTALS = ("threads, no wrapper", "simulator by replay", "daemon, no wrapper",
          "wake-ups per sample (replay, not us)")

STAGES = ("DRDY wait", "SPI transfer + decode", "estimate step", "ring", "latency",
          FUSED, "publish", "recording", "health", "glue")


class Accounting:
    """Exclusive per-stage thread CPU time [ns] of wrapped calls."""

    def __init__(self):
        self.ns: dict[str, int] = {}
        self.calls: dict[str, int] = {}
        #: wrapped calls made directly inside a wrapped call of each stage ("glue": at top
        #: level): the part of a wrapper's cost outside its own clock reads lands there
        self.nested: dict[str, int] = {"glue": 0}
        self._tl = threading.local()

    def wrap(self, obj, name: str, stage: str) -> None:
        fn = getattr(obj, name)
        acc, tl, clock = self.ns, self._tl, time.thread_time_ns
        calls, nested = self.calls, self.nested
        acc.setdefault(stage, 0)
        calls.setdefault(stage, 0)
        nested.setdefault(stage, 0)

        def wrapped(*a, **k):
            stack = tl.__dict__.setdefault("stack", [])
            nested[stack[-1][1] if stack else "glue"] += 1
            frame = [0, stage]  # time spent in wrapped callees, this call's stage
            stack.append(frame)
            t0 = clock()
            try:
                return fn(*a, **k)
            finally:
                dt = clock() - t0
                stack.pop()
                acc[stage] += dt - frame[0]
                calls[stage] += 1
                if stack:
                    stack[-1][0] += dt

        setattr(obj, name, wrapped)

    @staticmethod
    def overhead_ns(n: int = 500, k: int = 8, cold: bool = True) -> tuple[float, float]:
        """CPU ns a wrapper adds per call, measured as in the daemon at 1 kHz: after each
        1 ms sleep (``cold``; else back to back, as in block reads), ``k`` calls in a row
        (about a sample's worth of wrapped calls at adc level), wrapped and plain
        interleaved, medians. Returns ``(inside, outside)``: the
        part charged to the wrapped call's own stage (between its two clock reads) and the
        rest, which lands in the caller's stage (:attr:`nested`)."""
        class Obj:
            def f(self):
                return None

        o, clock = Obj(), time.thread_time_ns
        plain = o.f
        probe = Accounting()
        probe.wrap(o, "f", "probe")
        w = o.f
        d_plain, d_wrap, inside = [], [], []
        pause = 0.001 if cold else 0.0
        for _ in range(n):
            time.sleep(pause)
            t0 = clock()
            for _ in range(k):
                plain()
            d_plain.append(clock() - t0)
            time.sleep(pause)
            a0 = probe.ns["probe"]
            t0 = clock()
            for _ in range(k):
                w()
            d_wrap.append(clock() - t0)
            inside.append(probe.ns["probe"] - a0)
        total = max(0.0, (float(np.median(d_wrap)) - float(np.median(d_plain))) / k)
        ins = min(total, float(np.median(inside)) / k)
        return ins, total - ins


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

    def __init__(self, d, acc: Accounting, tcpu: ThreadCpu, skip_s: float = 0.5,
                 cold: bool = True):
        self.d, self.acc, self.tcpu, self.skip_s = d, acc, tcpu, skip_s
        self.cold = cold  # the wrappers' cost after a wake-up (block 1) or back to back
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
        self.ncalls0, self.nested0 = dict(self.acc.calls), dict(self.acc.nested)
        self.n0, self.t0, self.p0 = d.processed, time.monotonic(), time.process_time()
        acq = d._acq_thread
        while acq.is_alive():
            acq.join(0.02)
        self.tcpu.sample()
        self.end = dict(self.tcpu.last)
        self.acc_end = dict(self.acc.ns)
        self.ncalls1, self.nested1 = dict(self.acc.calls), dict(self.acc.nested)
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
        st = breakdown(acc, threads, max(n, 1))
        # the wrappers' own cost: the part between a wrapper's clock reads in its own stage,
        # the rest in its caller's stage (glue at top level): taken out of each
        nested = {k: v - self.nested0.get(k, 0) for k, v in self.nested1.items()}
        ncalls = {k: v - self.ncalls0.get(k, 0) for k, v in self.ncalls1.items()}
        o_in, o_out = (self.acc.overhead_ns(cold=self.cold) if any(ncalls.values())
                       else (0.0, 0.0))
        wrap_us = 0.0
        for s in set(nested) | set(ncalls):
            us = (ncalls.get(s, 0) * o_in + nested.get(s, 0) * o_out) / 1e3 / max(n, 1)
            wrap_us += us
            st[s] = st.get(s, 0.0) - us
        st["daemon"] = sum(st[s] for s in STAGES)
        st["wrappers"] = wrap_us
        st["wrapper_in_out_ns"] = (o_in, o_out)
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
        for obj, name in ((a, "read"), (a, "_post_c"), (a, "_post1"), (adc, "read_continuous"),
                          (adc, "read_one")):
            acc.wrap(obj, name, "SPI transfer + decode")
        # the blocking wait: the simulated clock's sleep (the analogue of the real edge
        # wait); the fake GPIO's edge computation around it is the simulator's
        acc.wrap(adc.gpio, "wait_for_edge", "simulator")
        acc.wrap(adc.clock, "sleep_until_ns", "DRDY wait")
        # the simulated chip behind the ports: SPI bytes and the DRDY level
        for name in ("readbytes", "xfer2", "writebytes"):
            acc.wrap(adc.spi, name, "simulator")
        acc.wrap(adc.gpio, "input", "simulator")
        acc.wrap(adc.gpio.chip, "next_drdy_fall_ns", "simulator")
        a.bind()  # the one-row read takes the wrapped calls
        if d._wire_read is not None:  # the daemon's read from the bytes (_sample_wire)
            d._bind_wire()
            acc.wrap(d, "_wire_read", "simulator")  # the simulated run's duration limit
            acc.wrap(d, "_wire_fn", FUSED)
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
    ("1 kHz adc, default config, general read (before)", "adc", 1000.0, 1, "auto",
     {"read_path": "general"}),
    ("10 kHz signal, block 64", "signal", 10000.0, 64, "acquisition"),
    ("7.5 kHz adc, block 64", "adc", 7500.0, 64, "acquisition"),
)


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
            if level == "adc":  # the totals without any wrapper, the simulator by replay
                t = run_once(tmp, rate, sec, port, instrument="totals", level=level,
                             block=block, read_max=block, estimate_in=where,
                             tag=f"tot{r_i}", **(kw or [{}])[0])
                rep = sim_replay.replay_us(rate, min(sec, 2.0), 2000.0)
                st["threads, no wrapper"] = t["window"]["stages"]["daemon"]
                st["simulator by replay"] = rep["simulator"]
                st["daemon, no wrapper"] = st["threads, no wrapper"] - rep["simulator"]
                st["wake-ups per sample (replay, not us)"] = rep["wakeups_null"]
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
                  + ", ".join(f"{k} {st[k]:.1f}" for k in STAGES + TOTALS if k in st)
                  + " us/sample; wrapper cost in/out of its stage %.0f/%.0f ns"
                  % st["wrapper_in_out_ns"] + f"   load {loadavg()}", flush=True)
    rows = ["| stage [us/sample] | " + " | ".join(c[0] for c in configs) + " |",
            "| --- |" + " --- |" * len(configs)]

    nan = float("nan")

    def med(xs):
        xs = sorted(xs)
        return xs[len(xs) // 2]

    for s in STAGES + ("daemon", "simulator", "wrappers") + TOTALS:
        rows.append(f"| {s} | " + " | ".join(
            f"{med([r['stages'].get(s, nan) for r in res[c[0]]]):.1f}" for c in configs)
            + " |")
    rows.append("| daemon CPU [% of a core] at the nominal rate (us/sample x rate) | " + " | ".join(
        f"{med([r['cpu_daemon'] for r in res[c[0]]]):.1f}" for c in configs) + " |")
    rows.append("| daemon, no wrapper [% of a core] at the nominal rate | " + " | ".join(
        f"{med([r['stages'].get('daemon, no wrapper', nan) for r in res[c[0]]]) * c[2] / 1e4:.1f}"
        for c in configs) + " |")
    rows.append("| lost samples (max over runs) | " + " | ".join(
        f"{max(r['lost'] for r in res[c[0]])}" for c in configs) + " |")
    print("\n".join(rows))
    return rows, res
