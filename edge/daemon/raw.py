"""Optional ``raw`` topic: the measured channels, decimated, for live displays.

``[mqtt] raw_decimation = k > 0`` publishes every k-th raw sample (``seq % k == 0``; physical
units, saturated = NaN, no anti-alias filter: it is for looking at, the recorder keeps every
sample) on ``<base>/<device>/raw`` in the layouts of ``estimates`` (JSON or ``VSE1``, columns =
``meta.channels``; ``seq`` counts raw rows: sample seq = raw seq x k), through the publisher's
queue (drop-oldest, as estimates). Rows per message: ``max(1, batch // k)``, so raw messages
go out about as often as estimates. The I/O thread calls :meth:`add` with the rows it hands
over.
"""

from __future__ import annotations

import time

import numpy as np

from edge.daemon.payloads import Batch, encode_estimates


class RawPublisher:
    """Decimate and batch raw rows for ``publisher`` (an :class:`edge.daemon.mqtt.Publisher`)."""

    def __init__(self, publisher, nch: int, decimation: int, topic: str):
        if decimation < 1:
            raise ValueError(f"[mqtt] raw_decimation: {decimation}: expected >= 1")
        self.pub = publisher
        self.k = int(decimation)
        self.topic = topic
        self._batch = Batch(max(1, publisher.batch // self.k), nch)
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
        self._batch.add(seq[sl] // self.k, t_ns[sl], values[sl], flags[sl], self._emit)

    def _emit(self, seq0: int, t, V, f) -> None:
        self.pub.send(self.topic, encode_estimates(seq0, t, V, f, self.pub.fmt))
        self.published += t.shape[0]

    def poll(self) -> None:
        if self._batch.n and time.monotonic() - self._batch.start >= self.pub.max_delay:
            self.flush()

    def flush(self) -> None:
        self._batch.flush(self._emit)
