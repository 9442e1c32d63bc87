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


def grid_nis_drop(grid, nis_table) -> float:
    """The lowest mean NIS per channel, relative to a tracked level's own ``r(a, a)``, that a
    load half a grid step (geometric) below level ``a`` gives under the gains of ``a``, over
    the levels with one below (1 for a single level). A tracker settles on the nearer level,
    so a right model under such a load reads this far below 1: the model check's lower
    threshold is widened by it while the level is tracked. ``r(a, b)`` is affine in ``g_b^2``
    (:func:`offline.smoother.levels.expected_nis`), so the value between two grid levels is
    exact: ``g^2 = g_(a-1) g_a`` halfway in log. Load-dominated innovations give
    ``g_(a-1) / g_a`` (0.56 on the quarter-decade grid), noise-dominated ones about 1."""
    g2 = np.asarray(grid, dtype=float) ** 2
    r = np.asarray(nis_table, dtype=float)
    drop = 1.0
    for a in range(1, g2.size):
        lo, hi = r[a, a - 1], r[a, a]
        mid = lo + (math.sqrt(g2[a] * g2[a - 1]) - g2[a - 1]) / (g2[a] - g2[a - 1]) * (hi - lo)
        if hi > 0 and mid > 0:
            drop = min(drop, mid / hi)
    return float(drop)


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
                 hysteresis: float | None = None, innov=None):
        self.grid = np.asarray(grid, dtype=float)
        self.log_table = np.log(np.asarray(nis_table, dtype=float))
        self.level = int(start)
        self.every = int(every)
        if hysteresis is None:
            hysteresis = max(0.05, 4.0 * sampling_spread(every, n_channels))
        self.hysteresis = float(hysteresis)
        self.since = 0
        self.switches = 0
        # two statistics (kf_innov_level): the load-to-noise ratio and the noise scale
        self.innov = None if innov is None else np.asarray(innov, dtype=float)
        self.rho_spread = 1.0 / math.sqrt(max(1, self.every * int(n_channels)))
        self.noise_scale = 1.0   # nu: the sensors' noise variance over the designed one
        self.load_power = 1.0    # g^2: the load's power over the designed one
        self.avg_weight = 0.2    # per window: the statistics' average over ~5 windows
        self._avg = np.full(2, np.nan)   # averaged (r, c) since the last switch
        self.last_lag1 = float("nan")
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

    def load_level(self) -> float:
        """The load's RMS over the designed one: the grid level, or with two statistics
        ``sqrt(g^2)`` (the level's gains then set the load-to-noise ratio)."""
        if self.innov is None:
            return float(self.grid[self.level])
        return math.sqrt(self.load_power)

    def restart(self, level: int) -> None:
        """Back to ``level`` with the designed noise (an estimator reset)."""
        self.level = int(level)
        self.since = 0
        self.noise_scale = self.load_power = 1.0
        self._avg[:] = np.nan

    def decide(self, ratio: float, lag1: float = float("nan")) -> int:
        """The level for a measured mean NIS ratio and mean lag-1 product per channel (and
        remember them); with ``innov`` (two statistics) also :attr:`noise_scale`."""
        self.last_ratio = ratio
        self.last_lag1 = lag1
        if not ratio > 0 or not math.isfinite(ratio):
            return self.level
        if self.innov is not None and math.isfinite(lag1):
            return self._decide_two(ratio, lag1)
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

    def _decide_two(self, r: float, c: float) -> int:
        """Two statistics: the load-to-noise ratio from the innovations' lag-1 correlation,
        the noise scale from their mean NIS (:mod:`offline.smoother.levels`). Under the gains
        of level ``a`` with a load ``g^2 Q`` and a noise ``nu R``::

            r = g^2 tq + nu tr,   c = g^2 cq + nu cr,   rho = c / r
            rho(s2) = (s2 cq + cr) / (s2 tq + tr),   s2 = g^2 / nu     (0 at the right level)

        so ``rho`` gives the ratio ``s2`` alone and ``r`` then the noise scale ``nu``. The
        gains of grid level ``b`` are optimal for ``g_b^2 = s2`` at any ``nu``. The level is
        kept while ``|rho|`` of the last window is within 4 sampling spreads (``1 /
        sqrt(every nch)`` for white innovations); a move goes to the ratio nearest the
        current one that the window's ``rho`` allows (2 spreads towards 0): where the noise
        dominates, ``rho`` hardly changes with ``s2`` and the nearer, higher level states the
        wider std. While the level is kept, ``(g^2, nu)`` come from the statistics averaged
        over the windows since the last switch (exponentially, ``avg_weight`` per window)."""
        a = self.level
        rho = c / r
        sd = self.rho_spread
        if abs(rho) > 4.0 * sd:
            s2 = self._ratio(a, rho - math.copysign(2.0 * sd, rho))
            b = int(np.argmin(np.abs(np.log(self.grid) - 0.5 * math.log(s2))))
            self._estimate(a, r, s2)
            self._avg[:] = np.nan
            if b != a:
                self.level = b
                self.switches += 1
            return self.level
        w = self.avg_weight
        if math.isnan(self._avg[0]):
            self._avg[0], self._avg[1] = r, c
        else:
            self._avg[0] += w * (r - self._avg[0])
            self._avg[1] += w * (c - self._avg[1])
        self._estimate(a, self._avg[0], self._ratio(a, self._avg[1] / self._avg[0]))
        return a

    def _ratio(self, a: int, rho: float) -> float:
        """``s2`` of a correlation ``rho`` under the gains of level ``a``, within the grid."""
        tq, tr, cq, cr = self.innov[a]
        den = rho * tq - cq
        # s2 = (cr - rho tr) / (rho tq - cq)
        s2 = (cr - rho * tr) / den if den != 0.0 else float("inf")
        if not s2 > 0.0:      # beyond the ratio's range: the end it points to
            s2 = self.grid[0] ** 2 if rho < 0 else self.grid[-1] ** 2
        return min(max(s2, self.grid[0] ** 2), self.grid[-1] ** 2)

    def _estimate(self, a: int, r: float, s2: float) -> None:
        """``noise_scale`` and ``load_power`` from a mean NIS ``r`` under the gains of ``a``
        and a ratio ``s2``: ``nu = r / (s2 tq + tr)``, ``g^2 = s2 nu``."""
        tq, tr = self.innov[a, 0], self.innov[a, 1]
        nu = r / (s2 * tq + tr)
        if math.isfinite(nu) and nu > 0:
            self.noise_scale = min(max(nu, 1e-6), 1e6)
            self.load_power = s2 * self.noise_scale
