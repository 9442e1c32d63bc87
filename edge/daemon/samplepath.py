"""The general per-sample path of the daemon: flags, faults, estimation, alignment, latency.

Mixed into :class:`edge.daemon.loop.Daemon`; runs on the acquisition thread. A clean sample
in the plain running state (Tikhonov estimator, no channel counting bad samples, not
paused, no identification window armed, no command waiting) takes one compiled call
instead (:func:`edge.daemon.fastpath._sample`, bound by :meth:`SamplePath._refresh_fast`);
everything else comes here (:meth:`SamplePath._process`): blocks, non-finite or saturated
channels (flags bit0/bit2, fault counting, status ``sensor_fault``), gaps and recoveries
(estimator reset before the sample), pause, identification windows of the inverse maps, the
smoother. Alignment is the same compiled :func:`edge.daemon.fastpath._align` on both.

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

import numpy as np

from edge.daemon.commands import run_commands
from edge.daemon.fastpath import CLOCK_OK, _align, _sample, packed_args
from edge.flags import FLAG_GAP, FLAG_HELD

log = logging.getLogger("vsense.loop")


class SamplePath:
    """Estimation of ring samples (see the module docstring); state set up by ``Daemon``."""

    def _refresh_fast(self) -> None:
        """Whether the next clean sample may take the compiled per-sample call
        (:func:`edge.daemon.fastpath._sample`): the Tikhonov estimator, the DRDY clock
        offset known, running (not paused), no channel counting bad samples, no
        identification window armed. Called on the acquisition thread after anything that
        can change one of these (the general path, commands); the two flags other threads
        set (a command queued, a scheduled identification due) are read per sample. Takes
        the call's arguments again when the estimator's operator was swapped."""
        est = self.est
        op = getattr(est, "op", None)
        if op is not self._sample_op:
            pa = packed_args(est)
            self._sample_args = None if pa is None or not CLOCK_OK else (*self.arena.args, *pa)
            self._sample_op = op
        inv = self.inverse
        self._fast_ok = (self._sample_args is not None and self._t_off_known
                         and not self.paused and self.faults.quiet
                         and (inv is None or inv.pending is None))

    def _warm_up(self) -> None:
        """Compile (or load from numba's cache) the compiled calls before the first sample:
        the per-sample call on a non-finite sample returns at once and changes nothing, the
        alignment on zero rows."""
        self._refresh_fast()
        if self._sample_args is not None:
            v = self.ring.values
            keep = v[0, 0]
            v[0, 0] = np.nan
            _sample(*self._sample_args)
            v[0, 0] = keep
        f = self.ring.flags
        _align(self._F[:0], self._Z[:0], self._ef[:0], self.ring.seq[:0], self.ring.t_ns[:0],
               f[:0], 0, self._hseq, self._ht, self._hf, self._hcount, self._sV, self._sseq,
               self._st, self._sf, self._sok, self.delay)

    def _estimate_staged(self, n: int) -> None:
        """Estimate ``n`` staged (not yet published) ring samples, in blocks of at most
        ``[bundle] block``; accepted commands run first, between two samples."""
        i = self.ring.head % self.ring.capacity
        pub = self.pub
        if pub is not None and pub.cmd_flag:
            run_commands(pub, self)
        b = self.block
        if n <= b:
            self._process(i, n)
            return
        for a in range(0, n, b):
            self._process(i + a, min(b, n - a))

    def _arm_scheduled(self) -> None:
        self._identify_due = False
        inv = self.inverse
        if inv is None or inv.pending is not None:
            return
        try:
            inv.start(self.cfg["inverse"]["map"] or None)
            self.scheduled_identifications += 1
        except (KeyError, ValueError) as e:
            log.warning("scheduled identification not armed: %s", e)

    def _process(self, i: int, n: int) -> None:
        """Flag, estimate and time ring slots ``i .. i+n-1`` (one contiguous span, ``n <=
        block``); the estimate rows go to the slot arrays (``_sV``...), see
        :meth:`_handover`."""
        ring = self.ring
        inv = self.inverse
        if self._identify_due:  # scheduled identification: arm on the estimating thread
            self._arm_scheduled()
        if inv is not None and inv.pending is not None:  # an armed identification window
            inv.push(ring.values[i:i + n], int(ring.seq[i]))
        V = ring.values[i:i + n]
        seq = ring.seq[i:i + n]
        t_ns = ring.t_ns[i:i + n]
        fl = ring.flags[i:i + n]  # bit0 is added in place: the raw record carries it
        Y = V  # physical units (the acquisition calibrated them)
        bad = ~np.isfinite(V)
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
                    self._reset_estimator()
                    a = c
                self._estimate(Y[a:], seq[a:], t_ns[a:], fl[a:], i + a)
            else:
                self._estimate(Y, seq, t_ns, fl, i)
        else:
            self.faults.update(bad)
        now = time.monotonic_ns()
        self.latency_ring.add(now - ring.stamp_ns[i:i + n])
        if self._t_off is not None:
            self.latency.add(now - (t_ns + self._t_off))
        self.processed += n

    def _estimate(self, Yk, seq, t_ns, fl, slot: int) -> None:
        """Run the estimator on one gap-free segment (ring slots ``slot ..``); estimate
        row ``j`` of the segment goes to slot ``slot + j`` (the sample whose arrival
        completed it), describing the sample ``delay`` fed samples earlier."""
        n = Yk.shape[0]
        F, Z, ef = self._F[:n], self._Z[:n], self._ef[:n]
        self.est.process(Yk, F, Z, ef)
        self.estimates += _align(F, Z, ef, seq, t_ns, fl, slot, self._hseq, self._ht,
                                 self._hf, self._hcount, self._sV, self._sseq, self._st,
                                 self._sf, self._sok, self.delay)

    def _reset_estimator(self) -> None:
        """Reset the estimator; samples still waiting for their delayed estimate get NaN
        warm-up rows from the kernel, so every fed sample is still described once."""
        self.est.reset()
        self.resets += 1
        # after reset the kernel's window restarts: rows describe stream position - delay
        # of the new stream; the pending history entries are described by its warm-up rows.
        # Positions before the pending entries are forgotten.

    def _fault_events(self, events, seq) -> None:
        changed = False
        for k, c, what in events:
            log.warning("channel %s: %s at seq %d", self.names[c],
                        "sensor fault" if what == "fault" else "recovered", int(seq[k]))
            changed = True
        if changed and not self.paused:
            self._set_state("sensor_fault" if self.faults.fault.any() else self._ok_state())
