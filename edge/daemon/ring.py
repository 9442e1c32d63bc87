"""Preallocated single-producer/single-consumer ring buffer of timestamped samples.

The acquisition thread writes ADC samples straight into the ring's arrays (no allocation per
sample); the estimation thread reads contiguous spans. The producer never waits: when the ring
is full, the samples read from the ADC go to a scratch buffer and are counted as lost
(``lost``, ``overruns``), and the next sample that does enter the ring carries
:data:`FLAG_GAP` so the consumer knows the stream is discontinuous.

Indices are absolute sample counts (``head`` = samples written, ``tail`` = samples consumed,
``seq`` of a slot = its ADC sample number, lost samples included), so sequence numbers stay
meaningful across gaps.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from edge.flags import FLAG_GAP  # samples were lost immediately before this one


class Ring:
    """SPSC ring of ``capacity`` samples of ``nch`` channels.

    Arrays (all preallocated): ``values (capacity, nch) float64`` [channel units],
    ``t_ns (capacity,) int64`` [sample time, ns], ``flags (capacity,) uint8``,
    ``seq (capacity,) int64`` [ADC sample number], ``stamp_ns (capacity,) int64``
    [``time.monotonic_ns()`` when the sample entered the ring, for latency].
    """

    def __init__(self, capacity: int, nch: int, slot_views: bool = False):
        if capacity < 2:
            raise ValueError(f"ring capacity must be >= 2, got {capacity}")
        if nch < 1:
            raise ValueError(f"ring nch must be >= 1, got {nch}")
        self.capacity = int(capacity)
        self.nch = int(nch)
        self.values = np.zeros((capacity, nch))
        self.t_ns = np.zeros(capacity, np.int64)
        self.flags = np.zeros(capacity, np.uint8)
        self.seq = np.zeros(capacity, np.int64)
        self.stamp_ns = np.zeros(capacity, np.int64)
        self._scratch = (np.zeros((capacity, nch)), np.zeros(capacity, np.int64),
                         np.zeros(capacity, np.uint8))
        self.head = 0  # samples written (only the producer changes it)
        self.tail = 0  # samples consumed (only the consumer changes it)
        self.adc_count = 0  # samples delivered by the ADC, lost ones included
        self.lost = 0
        self.overruns = 0  # write attempts that found the ring full
        self._gap_pending = False
        self._cond = threading.Condition(threading.Lock())
        self._waiting = False
        self.closed = False
        # one-sample views of every slot, made once: the per-sample write (read_max = 1)
        # then creates no array view (3 views per slot, about 0.3 kB)
        self._slot = ([(self.values[i:i + 1], self.t_ns[i:i + 1], self.flags[i:i + 1])
                       for i in range(capacity)] if slot_views else None)

    # -- producer -----------------------------------------------------------------------
    def write_span(self, nmax: int):
        """Views to fill: ``(values, t_ns, flags)`` of up to ``nmax`` contiguous free slots.

        When the ring is full, the views are scratch buffers (the samples will be counted
        lost by :meth:`commit`). Call :meth:`commit` with the number actually written.
        """
        free = self.capacity - (self.head - self.tail)
        if free <= 0:
            self._span_scratch = True
            n = min(nmax, self.capacity)
            v, t, f = self._scratch
            return v[:n], t[:n], f[:n]
        self._span_scratch = False
        i = self.head % self.capacity
        if nmax == 1 and self._slot is not None:
            return self._slot[i]
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
        if self._span_scratch:
            self.lost += n
            self.overruns += 1
            self.adc_count += n
            self._gap_pending = True
            return False
        i = self.head % self.capacity
        if n == 1:  # the per-sample path: no temporary arrays
            self.seq[i] = self.adc_count
            self.stamp_ns[i] = time.monotonic_ns()
        else:
            self.seq[i:i + n] = np.arange(self.adc_count, self.adc_count + n)
            self.stamp_ns[i:i + n] = time.monotonic_ns()
        if self._gap_pending:
            self.flags[i] |= FLAG_GAP
            self._gap_pending = False
        self.adc_count += n
        return True

    def publish(self, n: int) -> None:
        """Make ``n`` staged samples visible to the consumer (after :meth:`stage`)."""
        self.head += n  # the slot contents are complete before head moves
        if self._waiting:
            with self._cond:
                self._cond.notify()

    def close(self) -> None:
        """No more samples: wake the consumer."""
        self.closed = True
        with self._cond:
            self._cond.notify_all()

    # -- consumer -----------------------------------------------------------------------
    def available(self) -> int:
        return self.head - self.tail

    def wait(self, timeout: float) -> int:
        """Wait until samples are available (or closed/timeout); return how many."""
        n = self.head - self.tail
        if n > 0 or self.closed:
            return n
        with self._cond:
            self._waiting = True
            try:
                n = self.head - self.tail
                if n == 0 and not self.closed:
                    self._cond.wait(timeout)
            finally:
                self._waiting = False
        return self.head - self.tail

    def read_span(self, nmax: int) -> tuple[int, int]:
        """``(start slot, n)`` of up to ``nmax`` contiguous readable samples."""
        i = self.tail % self.capacity
        n = min(nmax, self.head - self.tail, self.capacity - i)
        return i, n

    def release(self, n: int) -> None:
        """Mark ``n`` samples consumed (their slots may be overwritten)."""
        self.tail += n
