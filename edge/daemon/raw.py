"""Optional ``raw`` topic: the measured channels, decimated, for live displays.

``[mqtt] raw_decimation = k > 0`` publishes every k-th raw sample (``seq % k == 0``; physical
units, saturated = NaN, no anti-alias filter: it is for looking at, the recorder keeps every
sample) on ``<base>/<device>/raw`` in the layouts of ``estimates`` (JSON or ``VSE1``, columns =
``meta.channels``; ``seq`` counts raw rows: sample seq = raw seq x k), through the publisher's queue (drop-oldest, as estimates). Rows per
message: ``max(1, batch // k)``, so raw messages go out about as often as estimates.
Buffers are preallocated; the loop thread calls :meth:`add` with the rows it hands over.
"""

from __future__ import annotations

import time

import numpy as np

from edge.daemon.payloads import encode_estimates


class RawPublisher:
    """Decimate and batch raw rows for ``publisher`` (an :class:`edge.daemon.mqtt.Publisher`):
    per hand-over a few array operations and one compiled call
    (:func:`edge.daemon.encode._batch_take`), not Python per row."""

    def __init__(self, publisher, nch: int, decimation: int, topic: str):
        if decimation < 1:
            raise ValueError(f"[mqtt] raw_decimation: {decimation}: expected >= 1")
        from edge.daemon.encode import _batch_take, payload_capacity, std_rows  # numba

        self.pub = publisher
        self.k = int(decimation)
        self.topic = topic
        self.cap = max(1, publisher.batch // self.k)
        self._t = np.zeros(self.cap, np.int64)
        self._v = np.zeros((self.cap, nch))
        self._f = np.zeros(self.cap, np.uint8)
        self._st = np.zeros(3, np.int64)  # rows in the batch, its first raw seq, rows sent
        self._binary = publisher.fmt == "binary"
        self._topic_b = np.frombuffer(topic.encode(), np.uint8).copy()
        self._o0 = 7 + self._topic_b.shape[0]
        self._out = np.zeros(self._o0 + payload_capacity(self.cap, nch, False, self._binary),
                             np.uint8)
        self._S, self._sc = std_rows(None, nch), np.zeros(0)
        self._take = _batch_take
        self._start = 0.0
        self.published = 0

    def add(self, seq: np.ndarray, t_ns: np.ndarray, values: np.ndarray,
            flags: np.ndarray) -> None:
        """Rows ``seq (n,)`` (consecutive), ``t_ns (n,)``, ``values (n, nch)``, ``flags
        (n,)``; keeps those with ``seq % k == 0``."""
        n = seq.shape[0]
        if n == 0:
            return
        # first row index with seq % k == 0, then every k-th (seq is consecutive in a span);
        # the message's seq counts raw rows (sample seq / k): consecutive as the layout says
        j = int((-int(seq[0])) % self.k)
        if j >= n:
            return
        sl = slice(j, n, self.k)
        rs = np.ascontiguousarray(seq[sl]) // self.k
        t = np.ascontiguousarray(t_ns[sl])
        v = np.ascontiguousarray(values[sl], dtype=np.float64)
        f = np.ascontiguousarray(flags[sl])
        i, st = 0, self._st
        while i < rs.shape[0]:
            if st[0] == 0:
                self._start = time.monotonic()
            i, m, _ = self._take(i, rs, t, v, f, self._t, self._v, self._f, st, self._out,
                                 self._o0, self._topic_b, self._binary, self._S, False,
                                 self._sc)
            if m:
                self.pub.send(self.topic, self._out[self._o0:self._o0 + m].tobytes())
                self.published += int(st[2])

    def poll(self) -> None:
        if self._st[0] and time.monotonic() - self._start >= self.pub.max_delay:
            self.flush()

    def flush(self) -> None:
        n = int(self._st[0])
        if n == 0:
            return
        payload = encode_estimates(int(self._st[1]), self._t[:n], self._v[:n], self._f[:n],
                                   self.pub.fmt)
        self._st[0] = 0
        self.pub.send(self.topic, payload)
        self.published += n
