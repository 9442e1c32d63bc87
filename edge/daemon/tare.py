"""The tare of strain-gauge channels at start (``[[channels]] tare_samples``,
docs/strain-gauges.md): each channel's offset is the mean of its first samples with the
structure at rest (zero strain)."""

from __future__ import annotations

import numpy as np


class TareAcquisition:
    """Wrap an acquisition: each channel with ``n[c] > 0`` has the mean of its first ``n[c]``
    finite samples subtracted (the structure at rest: zero strain). During those samples the
    running mean is subtracted (the first sample reads 0), afterwards the frozen mean; the
    offsets are in ``offset`` (physical units) and ``done`` says when all are frozen."""

    def __init__(self, acq, n):
        self.acq = acq
        self.n = np.asarray(n, dtype=np.int64)
        self.count = np.zeros(self.n.size, dtype=np.int64)
        self.total = np.zeros(self.n.size)
        self.offset = np.zeros(self.n.size)

    def __getattr__(self, name):  # the wrapped acquisition's other attributes
        return getattr(self.acq, name)

    @property
    def done(self) -> bool:
        return bool(np.all(self.count >= self.n))

    def read(self, values, t_ns, flags) -> int:
        k = self.acq.read(values, t_ns, flags)
        if not self.done:
            tare_rows(values[:k], self.n, self.count, self.total, self.offset)
        else:
            values[:k] -= self.offset
        return k


def tare_rows(Y, n, count, total, offset) -> None:
    """In place: per channel, while ``count < n`` add each finite sample to ``total`` and set
    ``offset = total / count`` (the running mean), then subtract ``offset`` from the sample."""
    for r in range(Y.shape[0]):
        for c in range(Y.shape[1]):
            y = Y[r, c]
            if count[c] < n[c] and np.isfinite(y):
                count[c] += 1
                total[c] += y
                offset[c] = total[c] / count[c]
            Y[r, c] = y - offset[c]


__all__ = ["TareAcquisition", "tare_rows"]
