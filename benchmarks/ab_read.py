"""The daemon's per-sample read paths side by side, alternating within one daemon run.

Used by ``benchmarks/daemon.py --only ab``. At the adc level (default configuration, 1,000
samples/s, no instrumentation wrapper) a benchmark thread switches every ``period`` seconds
between three ways of reading and finishing a sample: ``wire`` (the driver's ``read_one``,
then one compiled call from its bytes, ``fastpath._sample_wire``), ``one-row``
(``Acquisition.read`` -> ``read_one`` -> ``decode._post_one``, then ``fastpath._sample``:
``Daemon._wire_read = None``) and ``general`` (the read before both: ``read_continuous`` into
the code buffer, ``decode._post_packed``, then ``_sample``: also ``Acquisition._one =
None``), and adds the acquisition thread's CPU (``/proc/self/task/<tid>/schedstat``) and the
samples processed to the phase that just ended. Both phases meet the same machine load, simulator and wake-ups,
so their difference is the driver's alone (the absolute figures hold the simulator).
"""

from __future__ import annotations

import threading

import numpy as np


PHASES = ("wire", "one-row", "general")


def _cpu_ns(tid: int) -> int:
    with open(f"/proc/self/task/{tid}/schedstat") as f:
        return int(f.read().split()[0])


class Toggler:
    """Alternates the read path of daemon ``d`` (adc level) every ``period`` s from
    ``skip_s`` after its first sample until its acquisition thread ends."""

    def __init__(self, d, period: float = 0.1, skip_s: float = 0.5):
        self.d, self.period, self.skip_s = d, period, skip_s
        self.ns = {p: 0 for p in PHASES}
        self.n = {p: 0 for p in PHASES}
        self._t = threading.Thread(target=self._run, name="bench-ab", daemon=True)

    def start(self) -> None:
        self._t.start()

    def _set(self, phase: str) -> None:
        d = self.d
        acq = d.acq.acq  # LimitedAcquisition -> Acquisition
        if phase == "general":
            d._wire_read = None
            acq._one = None
            return
        acq.bind()
        if phase == "wire":
            d._bind_wire()
        else:
            d._wire_read = None

    def _run(self) -> None:
        d = self.d
        d.first_sample.wait()
        if d.stop_event.wait(self.skip_s):
            return
        th = d._acq_thread
        tid = th.native_id
        phase = PHASES[0]
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
            phase = PHASES[(PHASES.index(phase) + 1) % len(PHASES)]
            self._set(phase)
            c0, n0 = c1, n1

    def result(self) -> dict:
        self._t.join()
        return {k: self.ns[k] / 1e3 / max(self.n[k], 1) for k in self.ns}


def section_ab(run_once, loadavg, tmp, port, sec, repeat) -> list[str]:
    """``repeat`` runs at 1,000 samples/s, adc level, default configuration; prints each and
    returns markdown rows (medians, min-max)."""
    print(f"\n## 6. Per-sample read paths alternating every 0.1 s in one run (acquisition "
          f"thread CPU per sample)   load {loadavg()}")
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
        print(f"  run {r_i + 1}: " + ", ".join(f"{p} {x[p]:.1f}" for p in PHASES)
              + " us/sample (" + " / ".join(str(tg["t"].n[p]) for p in PHASES)
              + f" samples), lost {r['lost']}   load {loadavg()}", flush=True)

    def cell(f):
        v = [f(x) for x in res]
        return f"{np.median(v):.1f} ({min(v):.1f}-{max(v):.1f})"

    return ["| acquisition thread [us/sample], adc level, 1 kHz, default config | "
            + " | ".join(PHASES) + " | general - one-row | one-row - wire |",
            "| --- |" + " --- |" * (len(PHASES) + 2),
            f"| median (min-max) of {repeat} runs | "
            + " | ".join(cell(lambda x, p=p: x[p]) for p in PHASES) + " | "
            + cell(lambda x: x["general"] - x["one-row"]) + " | "
            + cell(lambda x: x["one-row"] - x["wire"]) + " |"]
