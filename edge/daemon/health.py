"""Loop health: latency percentiles, counters, the sample rate delivered, CPU temperature,
CPU use and memory."""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

import numpy as np

from edge.daemon.arena import LAT_ITEMS, LAT_MAX, LAT_N


class LatencyStats:
    """Sliding window of the last ``window`` per-sample latencies [ns].

    The daemon keeps two (``time.monotonic_ns`` throughout): from the sample's DRDY time
    (the driver's ``t_ns``: the clock time DRDY was seen low, mapped to the monotonic
    clock) to its estimate being ready, and from the sample entering the ring to the same
    point. "Ready" = the estimator has returned and the row sits in the daemon's output
    buffer (see docs/daemon.md, "Latency").
    """

    def __init__(self, window: int = 100_000, buf=None, state=None):
        # buf (window,) int64 and state [recorded so far, max] int64: given by the daemon
        # (fields of edge.daemon.arena.Arena, written by the compiled per-sample call too)
        self.buf = np.zeros(int(window), np.int64) if buf is None else buf
        self._st = np.zeros(len(LAT_ITEMS), np.int64) if state is None else state

    n = property(lambda self: int(self._st[LAT_N]), doc="latencies recorded so far")
    max_ns = property(lambda self: int(self._st[LAT_MAX]), doc="largest latency recorded [ns]")

    def add(self, lat_ns: np.ndarray) -> None:
        """Record latencies ``lat_ns (k,) int64`` [ns]."""
        k = lat_ns.shape[0]
        if k == 0:
            return
        w = self.buf.shape[0]
        n = self.n
        if k >= w:
            self.buf[:] = lat_ns[-w:]
        else:
            i = n % w
            j = min(k, w - i)
            self.buf[i:i + j] = lat_ns[:j]
            if j < k:
                self.buf[:k - j] = lat_ns[j:]
        m = int(lat_ns.max())
        if m > self.max_ns:
            self._st[LAT_MAX] = m
        self._st[LAT_N] = n + k

    def summary(self) -> dict:
        """``{"p50","p99","p999","max"}`` in microseconds (window percentiles, max ever).

        Percentiles as ``np.percentile`` (linear interpolation between order statistics),
        but from one ``ndarray.partition`` of a copy: the partition runs without the GIL, so
        a health message does not stall the acquisition thread for the ~2 ms that
        ``np.percentile`` holds it over a 100,000-sample window.
        """
        m = min(self.n, self.buf.shape[0])
        if m == 0:
            return {"p50": None, "p99": None, "p999": None, "max": None, "n": 0}
        x = self.buf[:m].copy()
        qs = (0.50, 0.99, 0.999)
        # virtual index r = q (m - 1); value = x[lo] + (x[lo+1] - x[lo]) (r - lo)
        idx = [(q * (m - 1), int(q * (m - 1))) for q in qs]
        x.partition(sorted({k for _, lo in idx for k in (lo, min(lo + 1, m - 1))}))
        p = [float(x[lo]) + (float(x[min(lo + 1, m - 1)]) - float(x[lo])) * (r - lo)
             for r, lo in idx]
        return {"p50": round(p[0] / 1e3, 2), "p99": round(p[1] / 1e3, 2),
                "p999": round(p[2] / 1e3, 2), "max": round(self.max_ns / 1e3, 2), "n": self.n}


def cpu_temperature_c(root: str = "/sys/class/thermal") -> float | None:
    """Temperature of ``thermal_zone0`` [deg C], or None where the file does not exist."""
    try:
        return int(Path(root, "thermal_zone0", "temp").read_text().strip()) / 1000.0
    except (OSError, ValueError):
        return None


def rss_mb() -> float:
    """Resident set size of this process [MB] (current, from /proc; peak as fallback)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 1e6
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


class CpuMeter:
    """Process CPU use since the previous call, in percent of one core."""

    def __init__(self):
        self._t = time.monotonic()
        self._c = time.process_time()

    def percent(self) -> float:
        t, c = time.monotonic(), time.process_time()
        dt = t - self._t
        pct = 100.0 * (c - self._c) / dt if dt > 0 else 0.0
        self._t, self._c = t, c
        return round(pct, 2)


#: A loss keeps the device ``degraded`` this long after the last one [s] (the recorder's
#: ``problem_hold_s`` too): the status changes when losses start and stop, not per loss.
LOSS_HOLD_S = 5.0


class LossWatch:
    """Whether a monotonic loss counter grew within the last ``hold_s`` seconds.

    Parameters
    ----------
    hold_s : float
        [s] (:data:`LOSS_HOLD_S`).
    """

    def __init__(self, hold_s: float = LOSS_HOLD_S):
        self.hold_s = float(hold_s)
        self.seen = 0
        self.t_last = -float("inf")  # monotonic time the counter was last seen to grow [s]

    def update(self, count: int, now: float) -> bool:
        """Newest ``count`` at monotonic time ``now`` [s]; True while the last increase is
        at most ``hold_s`` old."""
        if count > self.seen:
            self.seen, self.t_last = count, now
        return now - self.t_last <= self.hold_s


class RowRate:
    """The rate at which the ADC really delivers samples, against the bundle's 1/dt.

    The estimator's discrete model assumes one sample every ``dt``. A converter whose rows
    come at another rate (multiplexer cycling slowed by the driver's response time,
    conversions missed, a wrong clock) makes every estimate wrong without any sample being
    bad. :meth:`update` takes the newest sample's sequence number and DRDY time; every
    ``window_s`` of sample time it computes

        rate = (seq - seq_ref) / (t - t_ref)          [samples/s, sample clock]

    Parameters
    ----------
    nominal : float
        The bundle's rate 1/dt [samples/s].
    tolerance : float
        Largest accepted ``|rate / nominal - 1|``; 0 = no check (the rate is still reported).
    window_s : float
        Length of one measurement window [s] of sample time.
    """

    def __init__(self, nominal: float, tolerance: float, window_s: float = 5.0):
        self.nominal = float(nominal)
        self.tolerance = float(tolerance)
        self.window_ns = int(window_s * 1e9)
        self.rate: float | None = None
        self._ref: tuple[int, int] | None = None

    def update(self, seq: int, t_ns: int) -> None:
        """Newest sample: its sequence number and DRDY time [ns]; a new window's rate when
        this one is complete (a sequence number going backwards restarts the window)."""
        ref = self._ref
        if ref is None or seq < ref[0] or t_ns < ref[1]:
            self._ref = (seq, t_ns)
            return
        if t_ns - ref[1] >= self.window_ns and seq > ref[0]:
            self.rate = (seq - ref[0]) * 1e9 / (t_ns - ref[1])
            self._ref = (seq, t_ns)

    @property
    def deviation(self) -> float | None:
        """``rate / nominal - 1`` of the last complete window, or None before the first."""
        return None if self.rate is None else self.rate / self.nominal - 1.0

    def problem(self) -> str | None:
        """Why the estimates cannot be trusted (the rate is off by more than the tolerance),
        or None. The text names the direction, not the live rate (that is in health:
        ``rate_hz``), so that the retained status changes only when the problem does."""
        dev = self.deviation
        if dev is None or self.tolerance <= 0 or abs(dev) <= self.tolerance:
            return None
        return (f"samples arrive {'below' if dev < 0 else 'above'} the bundle's "
                f"{self.nominal:.6g}/s by more than [faults] rate_tolerance "
                f"({self.tolerance * 100:g} %): the estimator's time step is wrong (measured "
                f"rate: health rate_hz)")


def drdy_offset_ns(acq, virtual: bool) -> int | None:
    """Offset [ns] that maps an acquisition's ``t_ns`` (DRDY times) to
    ``time.monotonic_ns``, or None when there is none (virtual clock).

    * ``host_offset_ns`` attribute (:class:`edge.daemon.sim_signal.SignalAcquisition`,
      :class:`edge.daemon.sim_signal.LimitedAcquisition`): used as given;
    * the ADS1256 driver: its clock's ``origin_ns`` (0 for the real clock, whose
      ``monotonic_ns`` is ``time.monotonic_ns``); None for the simulator's clock when its
      time may lead the wall clock (``max_lead_ns > 0``: its DRDY times lie up to that lead
      in the future; latency is then taken from the ring), else the time it counts from.
    """
    if virtual:
        return None
    off = getattr(acq, "host_offset_ns", None)
    if off is not None:
        return int(off)
    clock = getattr(getattr(acq, "adc", None), "clock", None)
    if clock is None:
        return None
    if getattr(clock, "virtual", False) or getattr(clock, "max_lead_ns", 0) > 0:
        return None  # the simulator's time may run ahead of the wall clock
    if hasattr(clock, "origin_ns"):
        return int(clock.origin_ns)
    return int(getattr(clock, "_origin", 0))  # edge.hw.sim_ports.SimClock; RealClock: 0
