"""Sensor faults: consecutive bad samples per channel, fault and recovery events.

A sample of a channel is *bad* when it is non-finite (the driver returns NaN for a saturated
or railed value, flags bit2). After ``[faults] bad_sample_limit`` consecutive bad samples the
channel is in fault (status ``sensor_fault``); its next good sample is a recovery, and the
daemon resets the estimator right before it.
"""

from __future__ import annotations

import numpy as np


class FaultTracker:
    """Consecutive-bad-sample counters per channel; reports fault and recovery events."""

    def __init__(self, nch: int, limit: int):
        self.count = np.zeros(nch, np.int64)
        self.fault = np.zeros(nch, bool)
        self.limit = int(limit)
        self.quiet = True  # no channel has a bad-sample count (the per-sample fast path)

    def update(self, bad: np.ndarray) -> list[tuple[int, int, str]]:
        """Feed ``bad (n, nch)``; return events ``(sample index, channel, "fault" |
        "recovered")`` in sample order. A recovery at index i means: reset before sample i."""
        events: list[tuple[int, int, str]] = []
        if not bad.any() and not self.count.any():
            return events
        n, nch = bad.shape
        for c in range(nch):
            col = bad[:, c]
            if not col.any() and self.count[c] == 0:
                continue
            cnt, flt = int(self.count[c]), bool(self.fault[c])
            for i in range(n):
                if col[i]:
                    cnt += 1
                    if not flt and cnt >= self.limit:
                        flt = True
                        events.append((i, c, "fault"))
                else:
                    if flt:
                        events.append((i, c, "recovered"))
                        flt = False
                    cnt = 0
            self.count[c], self.fault[c] = cnt, flt
        self.quiet = not self.count.any()
        events.sort()
        return events
