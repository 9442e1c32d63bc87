"""Preallocated single-producer/single-consumer ring buffer of timestamped samples.

The acquisition thread writes ADC samples straight into the ring's arrays (no allocation per
sample); the estimation thread reads contiguous spans. The producer never waits: when the ring
is full, the samples read from the ADC go to a scratch buffer and are counted as lost
(``lost``, ``overruns``), and the next sample that does enter the ring carries
:data:`FLAG_GAP` so the consumer knows the stream is discontinuous.

Indices are absolute sample counts (``head`` = samples written, ``tail`` = samples consumed,
``seq`` of a slot = its ADC sample number, lost samples included), so sequence numbers stay
meaningful across gaps.

The arrays and the counters are fields of an :class:`edge.daemon.arena.Arena` (the daemon's;
a ring of its own otherwise), so the compiled per-sample call
(:func:`edge.daemon.fastpath._sample`) can stage, publish and advance ``head`` itself.
Ordering: the producer writes a slot completely before it advances ``head``, and the
consumer reads ``head`` before the slots; both threads run Python (or compiled code that
keeps the GIL) while doing so, and the GIL's hand-over between them orders these memory
accesses. The consumer polls (the I/O thread's tick); nothing waits on the ring.
"""

from __future__ import annotations

import time

import numpy as np

from edge.daemon.arena import (ADC, FLAGS, GAP_PENDING, HEAD, LOST, OVERRUNS, RSTATE, SEQ,
                               STAMP, T_NS, TAIL, VALUES, Arena)
from edge.flags import FLAG_GAP  # samples were lost immediately before this one


class Ring:
    """SPSC ring of ``capacity`` samples of ``nch`` channels.

    Arrays (all preallocated): ``values (capacity, nch) float64`` [channel units],
    ``t_ns (capacity,) int64`` [sample time, ns], ``flags (capacity,) uint8``,
    ``seq (capacity,) int64`` [ADC sample number], ``stamp_ns (capacity,) int64``
    [``time.monotonic_ns()`` when the sample entered the ring, for latency].
    """

    def __init__(self, capacity: int, nch: int, arena=None):
        if capacity < 2:
            raise ValueError(f"ring capacity must be >= 2, got {capacity}")
        if nch < 1:
            raise ValueError(f"ring nch must be >= 1, got {nch}")
        self.capacity = int(capacity)
        self.nch = int(nch)
        if arena is None:  # standalone: an arena of its own (no estimate fields used)
            arena = Arena(capacity, nch, 0, 0, 1, 0, 1)
        self.values = arena.view(VALUES)
        self.t_ns = arena.view(T_NS)
        self.flags = arena.view(FLAGS)
        self.seq = arena.view(SEQ)
        self.stamp_ns = arena.view(STAMP)
        # head, tail, adc_count, gap pending, lost, overruns (edge.daemon.arena): one int64
        # array, so the compiled per-sample call (edge.daemon.fastpath._sample) can advance it
        self._st = arena.view(RSTATE)
        self._scratch = (np.zeros((capacity, nch)), np.zeros(capacity, np.int64),
                         np.zeros(capacity, np.uint8))
        self.scratch = False  # the last write_span gave the scratch buffers (ring full)
        self.closed = False
        # one-sample views ``(values, t_ns, flags)`` of every slot, made once: the
        # per-sample write creates no array view (3 views per slot, about 0.3 kB)
        self.slots = [(self.values[i:i + 1], self.t_ns[i:i + 1], self.flags[i:i + 1])
                      for i in range(capacity)]

    # head = samples written (only the producer changes it), tail = samples consumed (only
    # the consumer changes it); adc_count = samples delivered by the ADC, lost ones included;
    # overruns = write attempts that found the ring full
    head = property(lambda self: int(self._st[HEAD]))
    tail = property(lambda self: int(self._st[TAIL]))
    adc_count = property(lambda self: int(self._st[ADC]))
    lost = property(lambda self: int(self._st[LOST]))
    overruns = property(lambda self: int(self._st[OVERRUNS]))

    # -- producer -----------------------------------------------------------------------
    def write_span(self, nmax: int):
        """Views to fill: ``(values, t_ns, flags)`` of up to ``nmax`` contiguous free slots.

        When the ring is full, the views are scratch buffers (the samples will be counted
        lost by :meth:`commit`). Call :meth:`commit` with the number actually written.
        """
        st = self._st
        head = st.item(HEAD)
        free = self.capacity - (head - st.item(TAIL))
        if free <= 0:
            self.scratch = True
            n = min(nmax, self.capacity)
            v, t, f = self._scratch
            return v[:n], t[:n], f[:n]
        self.scratch = False
        i = head % self.capacity
        if nmax == 1:
            return self.slots[i]
        n = min(nmax, free, self.capacity - i)
        return self.values[i:i + n], self.t_ns[i:i + n], self.flags[i:i + n]

    def commit(self, n: int) -> None:
        """Publish ``n`` samples written into the last :meth:`write_span` views."""
        if self.stage(n):
            self.publish(n)

    def stage(self, n: int) -> bool:
        """Number ``n`` samples written into the last :meth:`write_span` views (``seq``,
        ``stamp_ns``, gap flag) without making them visible to the consumer yet, so the
        producer can still work on them in place (estimation in the acquisition thread).

        Returns False when there is nothing to publish: ``n <= 0``, or the views were the
        scratch buffers of a full ring (the samples are then counted lost here).
        """
        if n <= 0:
            return False
        st = self._st
        if self.scratch:
            st[LOST] += n
            st[OVERRUNS] += 1
            st[ADC] += n
            st[GAP_PENDING] = 1
            return False
        i = st.item(HEAD) % self.capacity
        adc = st.item(ADC)
        self.seq[i:i + n] = np.arange(adc, adc + n)
        self.stamp_ns[i:i + n] = time.monotonic_ns()
        if st[GAP_PENDING]:
            self.flags[i] |= FLAG_GAP
            st[GAP_PENDING] = 0
        st[ADC] = adc + n
        return True

    def publish(self, n: int) -> None:
        """Make ``n`` staged samples visible to the consumer (after :meth:`stage`)."""
        self._st[HEAD] += n  # the slot contents are complete before head moves

    def close(self) -> None:
        """No more samples (after the last :meth:`publish`)."""
        self.closed = True

    # -- consumer -----------------------------------------------------------------------
    def available(self) -> int:
        st = self._st
        return st.item(HEAD) - st.item(TAIL)

    def read_span(self, nmax: int) -> tuple[int, int]:
        """``(start slot, n)`` of up to ``nmax`` contiguous readable samples."""
        t = self._st.item(TAIL)
        i = t % self.capacity
        n = min(nmax, self._st.item(HEAD) - t, self.capacity - i)
        return i, n

    def release(self, n: int) -> None:
        """Mark ``n`` samples consumed (their slots may be overwritten)."""
        self._st[TAIL] += n
