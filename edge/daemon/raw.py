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
    """Decimate and batch raw rows for ``publisher`` (an :class:`edge.daemon.mqtt.Publisher`)."""

    def __init__(self, publisher, nch: int, decimation: int, topic: str):
        if decimation < 1:
            raise ValueError(f"[mqtt] raw_decimation: {decimation}: expected >= 1")
        self.pub = publisher
        self.k = int(decimation)
        self.topic = topic
        self.cap = max(1, publisher.batch // self.k)
        self._s = np.zeros(self.cap, np.int64)
        self._t = np.zeros(self.cap, np.int64)
        self._v = np.zeros((self.cap, nch))
        self._f = np.zeros(self.cap, np.uint8)
        self._n = 0
        self._start = 0.0
        self.published = 0

    def add(self, seq: np.ndarray, t_ns: np.ndarray, values: np.ndarray,
            flags: np.ndarray) -> None:
        """Rows ``seq (n,)`` (increasing), ``t_ns (n,)``, ``values (n, nch)``, ``flags (n,)``;
        keeps those with ``seq % k == 0``."""
        n = seq.shape[0]
        if n == 0:
            return
        # first row index with seq % k == 0, then every k-th (seq is consecutive in a span)
        j = int((-int(seq[0])) % self.k)
        while j < n:
            if self._n and int(seq[j]) != int(self._s[self._n - 1]) + self.k:
                self.flush()  # a gap: the batch layout needs evenly spaced rows
            if self._n == 0:
                self._start = time.monotonic()
            i = self._n
            self._s[i] = seq[j]
            self._t[i] = t_ns[j]
            self._v[i] = values[j]
            self._f[i] = flags[j]
            self._n += 1
            if self._n == self.cap:
                self.flush()
            j += self.k

    def poll(self) -> None:
        if self._n and time.monotonic() - self._start >= self.pub.max_delay:
            self.flush()

    def flush(self) -> None:
        n = self._n
        if n == 0:
            return
        # rows are k samples apart: the message's seq counts raw rows (sample seq / k), so
        # that its rows are consecutive as the estimates layout says
        payload = encode_estimates(int(self._s[0]) // self.k, self._t[:n], self._v[:n], self._f[:n],
                                   self.pub.fmt)
        self._n = 0
        self.pub.send(self.topic, payload)
        self.published += n
