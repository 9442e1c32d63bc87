"""The load level a smoother with load levels (``kf_level_*``) runs at: chosen from the mean
normalised innovation squared per channel against its expectation under each level's gains."""

from __future__ import annotations

import math

import numpy as np


def sampling_spread(every: int, n_channels: int) -> float:
    """Standard deviation of ``log r`` for the mean of ``every * n_channels`` independent
    squared unit normals (white innovations at the right level): ``sqrt(2 / (every nch))``
    (the chi-square's variance ``2 nu`` over its mean ``nu``, to first order in the log)."""
    return math.sqrt(2.0 / max(1, int(every) * int(n_channels)))


class LevelTracker:
    """Follows the load's level from the innovations: every ``every`` samples the mean NIS
    per channel of the last ``every`` samples (``r``, 1 for a right level) is compared with
    ``kf_level_nis[a, b]``, the ratio expected under the gains of level ``a`` when the load is
    at level ``b`` (a row of expectations, increasing with ``b``). With ``h`` the
    ``hysteresis`` (by default 4 times the sampling spread of ``log r`` at the right level,
    :func:`sampling_spread`, at least 0.05), a level ``b`` *explains* ``r`` when
    ``|log r - log r(a, b)| <= h``. The rule:

    1. the current level explains ``r``: keep it (a stationary load at the designed level
       stays there: a false switch once in ~15,000 decisions for white innovations);
    2. other levels explain ``r``: the nearest of them to the current one. Moving down,
       that is the highest level consistent with the data: where the sensor noise
       dominates, a row is flat and many levels explain ``r`` about equally, and the
       highest of them states the widest std, which covers the error at the lower ones;
    3. none does, but ``r`` lies within the row's range (between two grid levels): the
       level with the nearest expectation;
    4. ``r`` lies beyond an end of the row: that end if the row is steep there (``d log r /
       d log g >= 1``: the load dominates the innovations, so a larger or smaller load
       explains them), else keep the level. A row flattens where the sensor noise
       dominates; innovations below that floor say the noise is smaller than designed, not
       that the load is (issue #40: a record with 0.66x the learned noise sent the tracker
       to the lowest level and back every second).

    No allocation: scratch arrays are reused."""

    def __init__(self, grid, nis_table, start: int, every: int, n_channels: int = 1,
                 hysteresis: float | None = None):
        self.grid = np.asarray(grid, dtype=float)
        self.log_table = np.log(np.asarray(nis_table, dtype=float))
        self.level = int(start)
        self.every = int(every)
        if hysteresis is None:
            hysteresis = max(0.05, 4.0 * sampling_spread(every, n_channels))
        self.hysteresis = float(hysteresis)
        self.since = 0
        self.switches = 0
        self.unexplained = 0  # decisions whose r no level explains (rule 4, held)
        self.last_ratio = float("nan")
        self._d = np.zeros(self.grid.size)
        # d log r(a, b) / d log g at each end of every row: steep (>= 1) or flat
        lg = np.log(self.grid)
        T = self.log_table
        if self.grid.size > 1:
            self._steep_lo = (T[:, 1] - T[:, 0]) / (lg[1] - lg[0]) >= 1.0
            self._steep_hi = (T[:, -1] - T[:, -2]) / (lg[-1] - lg[-2]) >= 1.0
        else:
            self._steep_lo = self._steep_hi = np.zeros(1, bool)

    def decide(self, ratio: float) -> int:
        """The level for a measured mean NIS ratio (and remember it)."""
        self.last_ratio = ratio
        if not ratio > 0 or not math.isfinite(ratio):
            return self.level
        a, h = self.level, self.hysteresis
        row = self.log_table[a]
        lr = math.log(ratio)
        d = self._d
        # d_b = |log r - log r(a, b)|
        np.subtract(row, lr, out=d)
        np.abs(d, out=d)
        if d[a] <= h:                                     # rule 1
            return a
        b = self._nearest_explaining(d, a, h)             # rule 2
        if b >= 0:
            pass
        elif row[0] <= lr <= row[-1]:                     # rule 3
            b = int(np.argmin(d))
        elif lr < row[0] and self._steep_lo[a]:           # rule 4
            b = 0
        elif lr > row[-1] and self._steep_hi[a]:
            b = row.size - 1
        else:
            self.unexplained += 1
            return a
        if b != a:
            self.level = b
            self.switches += 1
        return self.level

    @staticmethod
    def _nearest_explaining(d, a: int, h: float) -> int:
        """The level nearest to ``a`` (in grid steps) with ``d_b <= h``, or -1."""
        n = d.size
        for step in range(1, n):
            for b in (a - step, a + step):
                if 0 <= b < n and d[b] <= h:
                    return b
        return -1
