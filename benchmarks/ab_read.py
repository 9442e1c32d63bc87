"""The driver's one-row read beside the read before it, alternating within one daemon run.

Used by ``benchmarks/daemon.py --only ab``. At the adc level (default configuration, 1,000
samples/s, no instrumentation wrapper) a benchmark thread switches the acquisition between
its one-row path (``Acquisition.read`` -> ``ADS1256.read_one`` -> ``decode._post_one``) and
the general path it replaced (``read_continuous`` into the code buffer, then
``decode._post_packed``: ``Acquisition._one = None``) every ``period`` seconds, and adds the
acquisition thread's CPU (``/proc/self/task/<tid>/schedstat``) and the samples processed to
the phase that just ended. Both phases meet the same machine load, simulator and wake-ups,
so their difference is the driver's alone (the absolute figures hold the simulator).
"""

from __future__ import annotations

import threading

import numpy as np


def _cpu_ns(tid: int) -> int:
    with open(f"/proc/self/task/{tid}/schedstat") as f:
        return int(f.read().split()[0])


class Toggler:
    """Alternates the read path of daemon ``d`` (adc level) every ``period`` s from
    ``skip_s`` after its first sample until its acquisition thread ends."""

    def __init__(self, d, period: float = 0.1, skip_s: float = 0.5):
        self.d, self.period, self.skip_s = d, period, skip_s
        self.ns = {"one-row": 0, "general": 0}
        self.n = {"one-row": 0, "general": 0}
        self._t = threading.Thread(target=self._run, name="bench-ab", daemon=True)

    def start(self) -> None:
        self._t.start()

    def _set(self, phase: str) -> None:
        acq = self.d.acq.acq  # LimitedAcquisition -> Acquisition
        if phase == "one-row":
            acq.bind()
        else:
            acq._one = None

    def _run(self) -> None:
        d = self.d
        d.first_sample.wait()
        if d.stop_event.wait(self.skip_s):
            return
        th = d._acq_thread
        tid = th.native_id
        phase = "one-row"
        self._set(phase)
        c0, n0 = _cpu_ns(tid), d.processed
        while th.is_alive():
            th.join(self.period)
            try:
                c1 = _cpu_ns(tid)
            except OSError:  # the thread ended
                break
            n1 = d.processed
            self.ns[phase] += c1 - c0
            self.n[phase] += n1 - n0
            phase = "general" if phase == "one-row" else "one-row"
            self._set(phase)
            c0, n0 = c1, n1

    def result(self) -> dict:
        self._t.join()
        return {k: self.ns[k] / 1e3 / max(self.n[k], 1) for k in self.ns}


def section_ab(run_once, loadavg, tmp, port, sec, repeat) -> list[str]:
    """``repeat`` runs at 1,000 samples/s, adc level, default configuration; prints each and
    returns markdown rows (medians, min-max)."""
    print(f"\n## 6. One-row read vs the read before it, alternating every 0.1 s in one run "
          f"(acquisition thread CPU per sample)   load {loadavg()}")
    res = []
    for r_i in range(repeat):
        tg = {}

        def hook(d, tg=tg):
            tg["t"] = Toggler(d)
            tg["t"].start()

        r = run_once(tmp, 1000.0, sec, port, level="adc", block=1, read_max=1,
                     estimate_in="auto", tag=f"ab{r_i}", hook=hook)
        x = tg["t"].result()
        res.append(x)
        print(f"  run {r_i + 1}: one-row {x['one-row']:.1f} us/sample, general "
              f"{x['general']:.1f} us/sample, difference {x['general'] - x['one-row']:.1f} us"
              f" ({tg['t'].n['one-row']} / {tg['t'].n['general']} samples), lost {r['lost']}"
              f"   load {loadavg()}", flush=True)

    def cell(f):
        v = [f(x) for x in res]
        return f"{np.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"

    return ["| acquisition thread [us/sample], adc level, 1 kHz, default config | one-row read "
            "| general read (before) | difference |", "| --- | --- | --- | --- |",
            f"| median (min-max) of {repeat} runs | {cell(lambda x: x['one-row'])} | "
            f"{cell(lambda x: x['general'])} | "
            f"{cell(lambda x: x['general'] - x['one-row'])} |"]
