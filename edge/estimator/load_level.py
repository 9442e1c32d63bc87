"""The load level a smoother with load levels (``kf_level_*``) runs at: chosen from the mean
normalised innovation squared per channel against its expectation under each level's gains."""

from __future__ import annotations

import math

import numpy as np


class LevelTracker:
    """Follows the load's level from the innovations: every ``every`` samples the mean NIS
    per channel of the last ``every`` samples (``r``, 1 for a right level) is compared with
    ``kf_level_nis[a, b]``, the ratio expected under the gains of level ``a`` when the load is
    at level ``b``; the level whose expectation is nearest in log (by more than
    ``hysteresis``) becomes the current one. No allocation: scratch arrays are reused."""

    def __init__(self, grid, nis_table, start: int, every: int, hysteresis: float = 0.05):
        self.grid = np.asarray(grid, dtype=float)
        self.log_table = np.log(np.asarray(nis_table, dtype=float))
        self.level = int(start)
        self.every = int(every)
        self.hysteresis = float(hysteresis)
        self.since = 0
        self.switches = 0
        self.last_ratio = float("nan")
        self._d = np.zeros(self.grid.size)

    def decide(self, ratio: float) -> int:
        """The level for a measured mean NIS ratio (and remember it)."""
        self.last_ratio = ratio
        if not ratio > 0 or not math.isfinite(ratio):
            return self.level
        d = self._d
        # d_b = |log r - log r(a, b)|
        np.subtract(self.log_table[self.level], math.log(ratio), out=d)
        np.abs(d, out=d)
        b = int(np.argmin(d))
        if b != self.level and d[b] < d[self.level] - self.hysteresis:
            self.level = b
            self.switches += 1
        return self.level
