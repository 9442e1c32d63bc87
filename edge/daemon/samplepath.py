"""The daemon's per-sample path: flags, faults, estimation, alignment, latency.

A :class:`SamplePath` object owned by :class:`edge.daemon.loop.Daemon`; it runs on the
acquisition thread and holds every per-sample state: the arena (:mod:`edge.daemon.arena`,
named views of three arrays), the counters, the two latency windows, the fault tracker, the
pause flag and the inverse maps' hook. A clean sample in the plain running state (Tikhonov
estimator, no channel counting bad samples, not paused, no identification window armed, no
command waiting) takes one compiled call instead (:func:`edge.daemon.fastpath._sample`;
for the Kalman smoother :func:`~edge.daemon.fastpath._sample_smooth`, between the samples
where its Python side decides: the level tracker's window end, the start-up, the chain
check, a gap; bound by :meth:`SamplePath.refresh_fast`); everything else comes here
(:meth:`SamplePath.process`): blocks, non-finite or saturated channels (flags bit0/bit2,
fault counting, status ``sensor_fault``), gaps and recoveries (estimator reset before the
sample), pause, identification windows of the inverse maps, the smoother's decisions.
Alignment is the same compiled :func:`edge.daemon.fastpath._align` on both.

Bad samples: a sample of a channel is *bad* when it is non-finite (flags bit0) or
``|volts| >= saturation`` or at an ADC rail (bit2; the driver returns NaN for it). The
estimator gets NaN there and holds the channel's last finite value (kernel behaviour).
After ``[faults] bad_sample_limit`` consecutive bad samples the channel is in fault: status
``sensor_fault`` (with the channel names). When it delivers a good sample again the
estimator state is reset right before that sample and the status returns to ``running``.
Lost samples (flags bit3, ring overrun) also reset the estimator before the next sample.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import numpy as np

from edge.daemon import arena
from edge.daemon.fastpath import CLOCK_OK, _align, _done, fast_call
from edge.daemon.faults import FaultTracker
from edge.daemon.health import LatencyStats
from edge.flags import FLAG_GAP, FLAG_HELD

log = logging.getLogger("vsense.loop")


def _counter(k: int, doc: str):
    """A property over the arena's counter ``k`` (:data:`edge.daemon.arena.COUNT`)."""
    def get(self):
        return int(self.count[k])

    def put(self, v):
        self.count[k] = v
    return property(get, put, doc=doc)


class SamplePath:
    """Estimation of ring samples (see the module docstring).

    Parameters
    ----------
    est : edge.estimator.Estimator (or the smoother)
    ring : edge.daemon.ring.Ring, on ``state``
    state : edge.daemon.arena.Arena
        The per-sample state (ring, estimator rows, alignment history, rows by slot, latency
        windows, counters).
    names : list of str
        Channel names (log lines).
    bad_sample_limit : int
        ``[faults] bad_sample_limit``.
    identify_map : str or None
        ``[inverse] map`` of a scheduled identification.
    pub : edge.daemon.mqtt.Publisher or None
        Its ``cmd_flag`` says a command is waiting.
    """

    processed = _counter(arena.PROCESSED, "samples through the loop (watchdog progress)")
    estimates = _counter(arena.ESTIMATES, "estimate rows attached to samples")
    resets = _counter(arena.RESETS, "estimator resets (gaps, sensor recoveries)")

    def __init__(self, est, ring, state, names, bad_sample_limit: int,
                 identify_map: str | None = None, pub=None):
        self.est, self.ring, self.state, self.pub = est, ring, state, pub
        self.names = names
        self.block = state.block
        self.delay = est.delay
        self.identify_map = identify_map
        self.count = state.count  # processed, estimates, DRDY offset (+ known), resets
        self.faults = FaultTracker(len(names), bad_sample_limit)
        # DRDY -> estimate ready; ring entry -> ready
        w = state.latency_window
        self.latency = LatencyStats(w, state.lat_d, state.lat_ds)
        self.latency_ring = LatencyStats(w, state.lat_r, state.lat_rs)
        self.t_off: int | None = None  # DRDY clock -> time.monotonic_ns offset [ns]
        self.t_off_known = False
        self.paused = False
        self.bad_samples = 0
        self.inverse = None  # edge.inverse.InverseHook when the bundle carries maps
        self.identify_due = False  # set by the supervisor ([inverse] identify_every_s)
        self.scheduled_identifications = 0
        # set by the daemon: run the waiting commands; a channel's fault state changed
        self.run_commands: Callable[[], None] = lambda: None
        self.on_faults: Callable[[], None] = lambda: None
        self._sample_op = None  # estimator operator that ``args`` were taken from
        self.args: tuple | None = None  # (edge.daemon.fastpath._sample arguments)
        self.call = None  # the compiled per-sample call (fastpath._sample or _sample_smooth)
        self.fast_ok = False  # see refresh_fast
        self.warm_up()

    def set_clock_offset(self, t_off: int | None) -> None:
        """The DRDY clock's offset to ``time.monotonic_ns`` [ns] (None: unknown, latency
        from the ring entry only); once, at the first sample."""
        self.t_off, self.t_off_known = t_off, True
        if t_off is not None:
            self.count[arena.T_OFF] = t_off
            self.count[arena.T_OFF_KNOWN] = 1

    def refresh_fast(self) -> None:
        """Whether the next clean sample may take the compiled per-sample call
        (:func:`edge.daemon.fastpath._sample`, or :func:`~edge.daemon.fastpath.
        _sample_smooth`, which also returns -2 where the smoother's Python side is due):
        the Tikhonov estimator or the Kalman smoother, the DRDY clock offset known, running (not paused), no channel counting bad samples, no
        identification window armed. Called on the acquisition thread after anything that
        can change one of these (the general path, commands); the two flags other threads
        set (a command queued, a scheduled identification due) are read per sample. Takes
        the call's arguments again when the estimator's operator was swapped."""
        est = self.est
        op = getattr(est, "op", None)
        if op is not self._sample_op:
            self.call, pa = fast_call(est)
            self.args = None if pa is None or not CLOCK_OK else (*self.state.args, *pa)
            self._sample_op = op
        inv = self.inverse
        self.fast_ok = (self.args is not None and self.t_off_known
                        and not self.paused and self.faults.quiet
                        and (inv is None or inv.pending is None))

    def warm_up(self) -> None:
        """Compile (or load from numba's cache) the compiled calls before the first sample:
        the per-sample call on a non-finite sample returns at once and changes nothing, the
        alignment on zero rows."""
        self.refresh_fast()
        if self.args is not None:
            v = self.ring.values
            keep = v[0, 0]
            v[0, 0] = np.nan
            self.call(*self.args)
            v[0, 0] = keep
        s, r = self.state, self.ring
        _done(*s.args, 0, 0, 0)
        _align(s.F[:0], s.Z[:0], s.ef[:0], r.seq[:0], r.t_ns[:0], r.flags[:0], 0, s.hseq,
               s.ht, s.hf, s.hcount, s.sV, s.sseq, s.st, s.sf, s.sok, self.delay)

    def estimate_staged(self, n: int) -> None:
        """Estimate ``n`` staged (not yet published) ring samples, in blocks of at most
        ``[bundle] block``; accepted commands run first, between two samples."""
        i = self.ring.head % self.ring.capacity
        pub = self.pub
        if pub is not None and pub.cmd_flag:
            self.run_commands()
        b = self.block
        if n <= b:
            self.process(i, n)
            return
        for a in range(0, n, b):
            self.process(i + a, min(b, n - a))

    def _arm_scheduled(self) -> None:
        self.identify_due = False
        inv = self.inverse
        if inv is None or inv.pending is not None:
            return
        try:
            inv.start(self.identify_map)
            self.scheduled_identifications += 1
        except (KeyError, ValueError) as e:
            log.warning("scheduled identification not armed: %s", e)

    def process(self, i: int, n: int) -> None:
        """Flag, estimate and time ring slots ``i .. i+n-1`` (one contiguous span, ``n <=
        block``); the estimate rows go to the arena's rows by slot (``sV``...)."""
        ring = self.ring
        inv = self.inverse
        if self.identify_due:  # scheduled identification: arm on the estimating thread
            self._arm_scheduled()
        if inv is not None and inv.pending is not None:  # an armed identification window
            inv.push(ring.values[i:i + n], int(ring.seq[i]))
        Y = ring.values[i:i + n]  # physical units (the acquisition calibrated them)
        seq = ring.seq[i:i + n]
        t_ns = ring.t_ns[i:i + n]
        fl = ring.flags[i:i + n]  # bit0 is added in place: the raw record carries it
        bad = ~np.isfinite(Y)
        anybad = bad.any()
        if anybad:
            fl |= np.where(bad.any(axis=1), FLAG_HELD, 0).astype(np.uint8)
        if not self.paused:
            cuts = []
            if anybad:
                self.bad_samples += int(bad.any(axis=1).sum())
            events = self.faults.update(bad)
            if events:
                self._fault_events(events, seq)
                cuts += [k for k, _, what in events if what == "recovered"]
            cuts += np.nonzero(fl & FLAG_GAP)[0].tolist()
            if cuts:
                a = 0
                for c in sorted(set(cuts)):
                    if c > a:
                        self._estimate(Y[a:c], seq[a:c], t_ns[a:c], fl[a:c], i + a)
                    self.reset()
                    a = c
                self._estimate(Y[a:], seq[a:], t_ns[a:], fl[a:], i + a)
            else:
                self._estimate(Y, seq, t_ns, fl, i)
        else:
            self.faults.update(bad)
        _done(*self.state.args, i, n, time.monotonic_ns())  # latencies, processed

    def _estimate(self, Yk, seq, t_ns, fl, slot: int) -> None:
        """Run the estimator on one gap-free segment (ring slots ``slot ..``); estimate
        row ``j`` of the segment goes to slot ``slot + j`` (the sample whose arrival
        completed it), describing the sample ``delay`` fed samples earlier."""
        n = Yk.shape[0]
        s = self.state
        F, Z, ef = s.F[:n], s.Z[:n], s.ef[:n]
        self.est.process(Yk, F, Z, ef)
        self.estimates += _align(F, Z, ef, seq, t_ns, fl, slot, s.hseq, s.ht, s.hf, s.hcount,
                                 s.sV, s.sseq, s.st, s.sf, s.sok, self.delay)

    def reset(self) -> None:
        """Reset the estimator; samples still waiting for their delayed estimate get NaN
        warm-up rows from the kernel, so every fed sample is still described once."""
        self.est.reset()
        self.resets += 1
        # after reset the kernel's window restarts: rows describe stream position - delay
        # of the new stream; the pending history entries are described by its warm-up rows.
        # Positions before the pending entries are forgotten.

    def _fault_events(self, events, seq) -> None:
        for k, c, what in events:
            log.warning("channel %s: %s at seq %d", self.names[c],
                        "sensor fault" if what == "fault" else "recovered", int(seq[k]))
        if events and not self.paused:
            self.on_faults()
