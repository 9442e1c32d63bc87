"""The byte-level simulator's own CPU per sample, measured without wrappers on its calls.

Used by ``benchmarks/daemon_costs.py`` for the adc-level totals. The daemon at adc level
runs the real driver against the simulated ADS1256 behind fake ``spidev``/``RPi.GPIO``
ports (:mod:`edge.hw.sim_ports`); its threads' CPU therefore holds the daemon's work and the
simulator's. Wrapping every port call to time the simulator costs two reads of the thread
CPU clock per call (a system call here, 1-8 us each, the more right after a wake-up), which
the wrapped stages partly absorb. Instead the simulator is measured apart by **replay**: on
a fresh simulated chip in continuous mode at the same rate, pacing (``max_lead_us``) and
clock, a thread makes exactly the port calls the driver makes per sample, in the same order
(DRDY level; when high, the falling-edge wait; the clock; three bytes), with nothing else
between them; the same loop against **null ports** (constant answers, the same SimClock
pacing to the same DRDY times) is the baseline, the two alternating in chunks in one thread
so that both meet the same machine load. Simulator per sample = thread CPU of the first loop
minus the second. The simulator's code runs right after each wake-up in both, as
in the daemon, but in a process doing less, so its caches are warmer than in the daemon and
this figure is, if anything, low (the daemon's figure derived from it high). The pacing
(SimClock's sleeps, the one wake-up per sleep) is in both loops and therefore stays the
daemon's: it stands for the real DRDY wait.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from edge.hw.acquire import Acquisition, Channel
from edge.hw.ads1256 import ADS1256
from edge.hw.sim_ports import make_simulated_hardware


class _Volts:
    """A slow sine on AIN0 (the simulator's ``source``); precomputed, like the daemon run's."""

    def __init__(self, rate: float):
        t = np.arange(int(rate)) / rate
        self.v = np.zeros((t.size, 9))
        self.v[:, 0] = 0.5 * np.sin(2 * np.pi * 3.0 * t)
        self.rate = rate

    def volts(self, t_s: float) -> np.ndarray:
        return self.v[int(t_s * self.rate) % self.v.shape[0]]


def _slices(tid: int) -> int:
    """Times thread ``tid`` was put on a CPU (``/proc/self/task/<tid>/schedstat``)."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            return int(f.read().split()[2])
    except (OSError, ValueError, IndexError):
        return 0


class _Replay:
    """One simulated chip in continuous mode and the driver's per-sample port calls on it
    (``null``: the same calls on null ports paced by the same SimClock to the same DRDY
    times)."""

    def __init__(self, null: bool, rate: float, max_lead_us: float):
        spi, gpio, clock = make_simulated_hardware(_Volts(rate), 0, virtual_clock=False,
                                                   max_lead_us=max_lead_us)
        adc = ADS1256(spi, gpio, clock)
        acq = Acquisition(adc, [Channel("y0", "AIN0")], rate=rate, mode="continuous")
        acq.start()  # reset, configure, calibrate, RDATAC (not measured)
        self.chip, self.clock = spi.chip, clock
        self.pin, self.falling, self.slice_ms = adc.pins.drdy, gpio.FALLING, adc._slice_ms
        self.ports = (gpio.input, gpio.wait_for_edge, clock.monotonic_ns, spi.readbytes)
        self.null = null
        if null:
            self.period = int(round(1e9 / adc.drate))
            self.nxt = [0]
            zeros = [0, 0, 0]

            def ginput(p):
                return 1

            def wait_edge(p, edge, timeout=None, nxt=self.nxt, period=self.period):
                clock.sleep_until_ns(nxt[0])
                nxt[0] += period
                return p

            def readbytes(k):
                return zeros

            self.ports = (ginput, wait_edge, clock.monotonic_ns, readbytes)

    def run(self, n: int) -> None:
        if self.null:  # the next DRDY after now, as the chip's
            self.nxt[0] = self.chip.next_drdy_fall_ns(self.clock.monotonic_ns())
        ginput, wait_edge, now, readbytes = self.ports
        pin, falling, slice_ms = self.pin, self.falling, self.slice_ms
        for _ in range(n):
            if ginput(pin) != 0:
                wait_edge(pin, falling, timeout=slice_ms)
            now()
            readbytes(3)


def _alternate(rate: float, n: int, max_lead_us: float, chunks: int, out: dict) -> None:
    reps = {"sim": _Replay(False, rate, max_lead_us), "null": _Replay(True, rate, max_lead_us)}
    tid = threading.get_native_id()
    m = max(1, n // chunks)
    for k in reps:
        out[k] = out["runs_" + k] = 0
    for _ in range(chunks):  # alternating: both see the same machine load
        for k, r in reps.items():
            r.run(m // 10)  # settle into the pacing after the switch (not counted)
            s0, c0 = _slices(tid), time.thread_time_ns()
            r.run(m)
            out[k] += time.thread_time_ns() - c0
            out["runs_" + k] += _slices(tid) - s0
    for k in reps:
        out[k] /= 1e3 * m * chunks
        out["runs_" + k] /= m * chunks
    out["violations"] = sum(reps["sim"].chip.violations.values())


def replay_us(rate: float, seconds: float, max_lead_us: float, chunks: int = 8) -> dict:
    """Thread CPU per sample [us] of the replay against the simulator (``sim``) and against
    null ports (``null``), alternating in ``chunks`` chunks each in one thread; ``simulator``
    is the difference; ``wakeups_sim``/``wakeups_null``: times the thread was put on a CPU
    per sample (the SimClock paces with sleeps of up to ``max_lead_us``, not one per
    sample)."""
    out: dict = {}
    th = threading.Thread(target=_alternate, args=(rate, int(rate * seconds), max_lead_us,
                                                   chunks, out), name="bench-replay")
    th.start()
    th.join()
    if out["violations"]:
        raise RuntimeError("sim_replay: the replay broke the ADS1256 protocol")
    return {"sim": out["sim"], "null": out["null"], "simulator": out["sim"] - out["null"],
            "wakeups_sim": out["runs_sim"], "wakeups_null": out["runs_null"]}
