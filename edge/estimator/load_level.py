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


def start_windows(period: int, shortest: int = 32) -> tuple[int, ...]:
    """The tracker's windows after a (re)start, before it decides once a ``period``:
    ``period / 16, / 8, / 4, / 2`` (those of at least ``shortest`` samples). A load 3x its
    declaration was stated with the declared level's std until the first whole period had
    passed (2 s on the overhang beam of an acceptance test: 1-sigma coverage 44 % there, 4 %
    under a resonant load 50x its declaration); the first short window decides after a
    sixteenth of it, with a hysteresis widened by its own sampling spread."""
    return tuple(w for w in (period >> k for k in (4, 3, 2, 1)) if w >= shortest)


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


def rho_range(innov) -> tuple[np.ndarray, np.ndarray]:
    """Per level ``(lowest, highest)`` lag-1 correlation ``rho = c / r`` that any load and
    noise give under its gains (``innov`` rows ``[tq, tr, cq, cr]``, ``kf_track_innov``):
    ``rho(s2) = (s2 cq + cr) / (s2 tq + tr)`` is monotone in ``s2 >= 0``, from ``cr / tr``
    (``s2 -> 0``) to ``cq / tq`` (``s2 -> inf``)."""
    v = np.asarray(innov, dtype=float)
    tq, tr, cq, cr = v[:, 0], v[:, 1], v[:, 2], v[:, 3]
    r0 = cr / tr
    rinf = np.where(tq > 0, cq / np.where(tq > 0, tq, 1.0), np.sign(cq) * np.inf)
    return np.minimum(r0, rinf), np.maximum(r0, rinf)


#: the model's own error of the innovations' lag-1 correlation at its designed level: the
#: clamped beam's model learned from a 60 s record read +0.01..+0.04 averaged over five
#: 1 s windows of its own load, the frame's 0.055 where its gains allow 0.039 at most
RHO_FLOOR = 0.03
#: largest spread of ``log nu`` (:meth:`LevelTracker.noise_spread`) read from a NIS: a
#: reading less certain keeps the noise of the last certain one (the designed noise at first)
NU_SPREAD_MAX = 0.15


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
       level with the nearest expectation, if it is nearer than the current one's by ``2 h``
       (a load between two grid levels read the two alternately, one second each, and the
       stated std never settled: the plate of ``benchmarks/load_user`` at 0.42x flipped
       between 0.32x and 0.56x every few seconds);
    4. ``r`` lies beyond an end of the row: that end if the row is steep there (``d log r /
       d log g >= 1``: the load dominates the innovations, so a larger or smaller load
       explains them), else keep the level. A row flattens where the sensor noise
       dominates; innovations below that floor say the noise is smaller than designed, not
       that the load is (issue #40: a record with 0.66x the learned noise sent the tracker
       to the lowest level and back every second).

    After a (re)start the windows are ``windows`` (:func:`start_windows`, none by default),
    then ``every`` samples each. A start window only widens the stated std
    (:meth:`_widen`), with the hysteresis of a whole one times ``sqrt(every / n)`` for its
    ``n`` samples; the gains stay.

    No allocation: scratch arrays are reused."""

    def __init__(self, grid, nis_table, start: int, every: int, n_channels: int = 1,
                 hysteresis: float | None = None, innov=None, windows=()):
        self.grid = np.asarray(grid, dtype=float)
        self.log_table = np.log(np.asarray(nis_table, dtype=float))
        self.level = int(start)
        self.std_level = self.level  # one statistic: the level whose std is stated
        self.period = int(every)
        self.windows = tuple(int(w) for w in windows)
        self._k = 0            # windows decided since the (re)start
        if hysteresis is None:
            hysteresis = max(0.05, 4.0 * sampling_spread(every, n_channels))
        self._h_period = float(hysteresis)
        self.since = 0
        self.switches = 0
        # two statistics (kf_innov_level): the load-to-noise ratio and the noise scale
        self.innov = None if innov is None else np.asarray(innov, dtype=float)
        self.rho_spread = 1.0 / math.sqrt(max(1, self.period * int(n_channels)))
        self.noise_scale = 1.0   # nu: the sensors' noise variance over the designed one
        self.load_power = 1.0    # g^2: the load's power over the designed one
        self.start_power = 0.0   # g^2 the start's windows read (until the first whole one)
        self._nu_avg = 1.0       # nu from averaged windows (a move's one window: a start)
        self.avg_weight = 0.2    # per window: the statistics' average over ~5 windows
        self._avg = np.full(2, np.nan)   # averaged (r, c) since the last switch
        self._avg_s2 = 1.0               # its variance over one window's
        self.last_lag1 = float("nan")
        self.unexplained = 0  # decisions whose r no level explains (rule 4, held)
        self.last_ratio = float("nan")
        self._d = np.zeros(self.grid.size)
        if self.innov is not None:
            self._rho_lo, self._rho_hi = rho_range(self.innov)
        self._log_grid = np.log(self.grid)
        self._g2 = self.grid ** 2
        self._row = np.zeros(self.grid.size)   # log r(a, b) at the tracked noise

    @property
    def every(self) -> int:
        """Samples in the current window: the start's windows, then the period."""
        return self.windows[self._k] if self._k < len(self.windows) else self.period

    @property
    def hysteresis(self) -> float:
        """``h`` of the current window: the period's times ``sqrt(period / n)``."""
        return self._h_period * math.sqrt(self.period / self.every)

    def load_level(self) -> float:
        """The load's RMS over the designed one: the grid level, or with two statistics
        ``sqrt(g^2)`` (the level's gains then set the load-to-noise ratio)."""
        if self.innov is None:
            return float(self.grid[self.std_level])
        return math.sqrt(self.stated_power)

    @property
    def stated_power(self) -> float:
        """Two statistics: the ``g^2`` the stated std uses, the tracked one or, until the
        first whole window, the start's if larger (:meth:`_widen`)."""
        return max(self.load_power, self.start_power)

    def restart(self, level: int) -> None:
        """Back to ``level`` with the designed noise (an estimator reset)."""
        self.level = self.std_level = int(level)
        self.since = 0
        self._k = 0
        self.noise_scale = self.load_power = self._nu_avg = 1.0
        self.start_power = 0.0
        self._avg[:] = np.nan

    def decide(self, ratio: float, lag1: float = float("nan")) -> int:
        """The level for a measured mean NIS ratio and mean lag-1 product per channel (and
        remember them); with ``innov`` (two statistics) also :attr:`noise_scale`."""
        self.last_ratio = ratio
        self.last_lag1 = lag1
        try:
            if not ratio > 0 or not math.isfinite(ratio):
                return self.level
            if self.starting:
                return self._widen(ratio)
            self.start_power = 0.0
            if self.innov is not None and math.isfinite(lag1):
                return self._decide_two(ratio, lag1)
            b = self._move(self._decide_one(math.log(ratio), self.log_table[self.level]))
            self.std_level = b
            return b
        finally:  # the next window
            self._k = min(self._k + 1, len(self.windows))

    @property
    def starting(self) -> bool:
        """The current window is one of the start's (:attr:`windows`)."""
        return self._k < len(self.windows)

    def _widen(self, r: float) -> int:
        """A start window: the gains stay, the stated std widens. One statistic: the level
        the rules give (:attr:`std_level`); two: ``g^2`` from the NIS at the tracked noise
        (:attr:`start_power`). The largest over the start's windows, except the last and
        longest, which alone states the std until the first whole window decides (from the
        state before the start's), never below the designed one. A short window of a load
        at its declared level read 0.2 of it on the clamped plate of an acceptance test, and
        the start-up's error (a state started at 0) reads high: moving the gains on it sent
        a frame's tracker to 5.6x for good (its NIS then below the row's floor, rule 4);
        holding the largest until the first whole window left the README beam's std 1.2x
        its error over the second one (coverage 84 % instead of 70 %)."""
        a = self.level
        last = self._k == len(self.windows) - 1  # the longest: it alone states the rest
        if self.innov is None:
            b = self._decide_one(math.log(r), self.log_table[a])
            self.std_level = max(a if last else self.std_level, b)
        elif (g2 := self._nis_load(a, r)) is not None:
            self.start_power = g2 if last else max(self.start_power, g2)
        return a

    def _move(self, b: int) -> int:
        """Go to level ``b`` (``-1``: keep the current one), counting a switch."""
        if b >= 0 and b != self.level:
            self.level = b
            self.switches += 1
        return self.level

    def _decide_one(self, lr: float, row) -> int:
        """Rules 1-4 (class docstring) for ``lr = log r`` against ``row``, ``log r(a, b)`` of
        the current level ``a``: the level, or -1 to keep it with ``r`` unexplained (counted
        in :attr:`unexplained`)."""
        a, h = self.level, self.hysteresis
        d = self._d
        # d_b = |log r - log r(a, b)|
        np.subtract(row, lr, out=d)
        np.abs(d, out=d)
        if d[a] <= h:                                     # rule 1
            return a
        b = self._nearest_explaining(d, a, h)             # rule 2
        if b >= 0:
            return b
        if row[0] <= lr <= row[-1]:                       # rule 3 (nearer by 2 h)
            b = int(np.argmin(d))
            return b if d[b] < d[a] - 2.0 * h else a
        lg = self._log_grid                               # rule 4: d log r / d log g >= 1
        if lr < row[0] and row.size > 1 and row[1] - row[0] >= lg[1] - lg[0]:
            return 0
        if lr > row[-1] and row.size > 1 and row[-1] - row[-2] >= lg[-1] - lg[-2]:
            return row.size - 1
        self.unexplained += 1
        return -1

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
        over the windows since the last switch (exponentially, ``avg_weight`` per window):
        ``nu`` from the averaged NIS at the averaged ``rho``'s ratio (clipped to the grid)
        where that reading is certain enough (:meth:`noise_spread` at most
        :data:`NU_SPREAD_MAX`: the noise dominates the NIS, or ``rho`` resolves the ratio
        beyond the model's own error of it), and ``g^2 = s2 nu``; else ``g^2`` from the NIS
        (:meth:`_estimate_load`) at the ``nu`` of the last certain reading (the designed
        noise at first): the sensors' noise does not change with the load. A move on one
        window's ``rho`` sets ``(g^2, nu)`` from that window where the reading is certain, a
        start that the average replaces from the next window on. A window whose NIS leaves
        the average by more than the hysteresis is a step of the load: the average restarts
        and the level follows the NIS at the tracked noise (:meth:`_by_nis`). From two
        averaged windows on, a level whose load is off their NIS gives way to the level the
        NIS names (:meth:`_nis_level`) where ``rho`` would keep it (:meth:`_nis_off`): after
        a step down, ``rho`` can stay within its 4 spreads (the model's error pulls it to
        0). A ``rho`` that no ``(g^2, nu)`` gives under the current gains (beyond the range
        of ``rho(s2)``,
        :func:`rho_range`, by 2 spreads: a transient, or a model error) is not read as a
        ratio: the NIS alone decides, with the one-statistic rules against ``g_b^2 tq + nu
        tr`` at the tracked noise ``nu``. The cases behind each rule: docs/load.md, "On the
        device"."""
        a = self.level
        rho = c / r
        sd = self.rho_spread
        if not self._rho_lo[a] - 2.0 * sd <= rho <= self._rho_hi[a] + 2.0 * sd:
            self._avg[:] = np.nan
            return self._by_nis(a, r)
        step = not math.isnan(self._avg[0]) and \
            abs(math.log(r / self._avg[0])) > self.hysteresis
        if abs(rho) > 4.0 * sd:
            s2 = self._ratio(a, rho - math.copysign(2.0 * sd, rho))
            b = int(np.argmin(np.abs(self._log_grid - 0.5 * math.log(s2))))
            # the NIS and the ratio stepping the same way is the load's step: the NIS's
            if not (step and (b == a or (b < a) == (r < self._avg[0]))):
                if self.noise_spread(a, s2, 2.0 * sd) <= NU_SPREAD_MAX:
                    self._estimate(a, r, s2)
                else:  # the ratio does not give the noise: keep it, the load from the NIS
                    self.noise_scale = self._nu_avg
                    self._estimate_load(a, r)
                self._avg[:] = np.nan
                return self._move(b)
        w = self.avg_weight
        if math.isnan(self._avg[0]):
            self._avg[0], self._avg[1], self._avg_s2 = r, c, 1.0
        elif step:  # a step in the NIS: the load changed, the sensors' noise did not
            self._avg[0], self._avg[1], self._avg_s2 = r, c, 1.0
            b = self._by_nis(a, r)
            if b != a:
                self._avg[:] = np.nan
                return b
        else:
            self._avg[0] += w * (r - self._avg[0])
            self._avg[1] += w * (c - self._avg[1])
            # variance factor of the weighted mean: the sum of its squared weights
            self._avg_s2 = (1.0 - w) ** 2 * self._avg_s2 + w * w
        self._refine(a)
        if self._avg_s2 < 1.0 and self._nis_off(a, b := self._nis_level(a, self._avg[0])):
            self._avg[:] = np.nan                # the level's load does not explain the NIS
            self.load_power = float(self._g2[b])
            return self._move(b)
        return a

    def _nis_off(self, a: int, b: int) -> bool:
        """The level ``b`` that the averaged NIS names (:meth:`_nis_level`) is another than
        ``a`` and would keep the tracked ratio ``s2 = g^2 / nu``: its ``rho(s2)`` within 4
        sampling spreads. A load between two grid levels (the zoo strip's 0.75 between 0.56
        and 1) reads a NIS off either; moving on it, the ``rho`` under the lower level's
        gains took the tracker back up, every few seconds."""
        if b < 0 or b == a:
            return False
        s2 = self.load_power / self.noise_scale
        tq, tr, cq, cr = self.innov[b]
        # rho(s2) = (s2 cq + cr) / (s2 tq + tr) under the gains of b
        return abs((s2 * cq + cr) / (s2 * tq + tr)) <= 4.0 * self.rho_spread

    def _refine(self, a: int) -> None:
        """``(g^2, nu)`` at the kept level ``a`` from the windows averaged since the last
        switch (the rule in :meth:`_decide_two`)."""
        rbar, rho_bar = self._avg[0], self._avg[1] / self._avg[0]
        m = 2.0 * self.rho_spread * math.sqrt(self._avg_s2)
        s2 = self._ratio(a, rho_bar)
        if self.noise_spread(a, s2, m) <= NU_SPREAD_MAX:
            # rho gives the noise well enough: nu from the average, g^2 = s2 nu
            self._estimate(a, rbar, s2)
            self._nu_avg = self.noise_scale
        else:  # the load dominates: g^2 from the NIS at the noise of averaged windows
            self.noise_scale = self._nu_avg
            self._estimate_load(a, rbar)

    def noise_spread(self, a: int, s2: float, m: float) -> float:
        """Spread of ``log nu`` read from a NIS at the ratio ``s2`` that a lag-1 correlation
        with spread ``m`` gives under the gains of ``a``, with the model's own error of the
        correlation :data:`RHO_FLOOR` added: ``nu = r / (s2 tq + tr)`` moves with ``log s2``
        by the load's share of the NIS, and ``log s2`` with ``rho`` by the slope of
        ``rho(s2)``::

            d log nu / d log s2 = -s2 tq / (s2 tq + tr)
            d rho / d log s2    = s2 (cq tr - cr tq) / (s2 tq + tr)^2
            spread = tq (s2 tq + tr) sqrt(m^2 + floor^2) / |cq tr - cr tq|"""
        tq, tr, cq, cr = self.innov[a]
        den = abs(cq * tr - cr * tq)
        if not den > 0.0:
            return math.inf
        return tq * (s2 * tq + tr) * math.hypot(m, RHO_FLOOR) / den

    def _nis_level(self, a: int, r: float) -> int:
        """The level the NIS ``r`` names under the gains of ``a`` at the tracked noise (rules
        1-4 against ``log(g_b^2 tq + nu tr)``), or -1 (unexplained, kept)."""
        tq, tr = self.innov[a, 0], self.innov[a, 1]
        row = self._row
        # log r(a, b) = log(g_b^2 tq + nu tr)
        np.multiply(self._g2, tq, out=row)
        row += self.noise_scale * tr
        np.log(row, out=row)
        return self._decide_one(math.log(r), row)

    def _by_nis(self, a: int, r: float) -> int:
        """The level from the NIS ``r`` alone at the tracked noise (:meth:`_nis_level`),
        with ``g^2`` that level's; ``nu`` is kept."""
        b = self._nis_level(a, r)
        if b >= 0 and b != a:
            self.load_power = float(self._g2[b])
        elif b == a:
            self._estimate_load(a, r)
        return self._move(b)

    def _ratio(self, a: int, rho: float) -> float:
        """``s2`` of a correlation ``rho`` under the gains of level ``a``, within the grid."""
        tq, tr, cq, cr = self.innov[a]
        den = rho * tq - cq
        # s2 = (cr - rho tr) / (rho tq - cq)
        s2 = (cr - rho * tr) / den if den != 0.0 else float("inf")
        if not s2 > 0.0:
            # beyond the range of rho(s2): the end whose limit it lies beyond, cq/tq (s2 ->
            # inf) or cr/tr (s2 -> 0); rho need not increase with s2 (the plate's rows
            # fall: a larger load read as the lowest level sent the tracker down on a step up)
            high = (rho * tr - cr) * (cq * tr - cr * tq) > 0.0
            s2 = self.grid[-1] ** 2 if high else self.grid[0] ** 2
        return min(max(s2, self.grid[0] ** 2), self.grid[-1] ** 2)

    def _estimate_load(self, a: int, r: float) -> None:
        """``load_power`` from a mean NIS ``r`` under the gains of ``a`` at the tracked noise
        ``nu``: ``g^2 = (r - nu tr) / tq``, at least the lowest level's. Used where the
        averaged ``rho`` lies beyond every ratio's (a model error colours the innovations):
        the clipped ratio put the frame's noise at 0.002 of the learned one at its designed
        load, and its stated std of the outputs then wandered 0.6-1.6x after a step down."""
        g2 = self._nis_load(a, r)
        if g2 is not None:
            self.load_power = g2

    def _nis_load(self, a: int, r: float) -> float | None:
        """``g^2 = (r - nu tr) / tq`` of a mean NIS ``r`` under the gains of ``a`` at the
        tracked noise ``nu``, within the grid; None where the load does not reach the
        innovations (``tq = 0``)."""
        tq, tr = self.innov[a, 0], self.innov[a, 1]
        if not tq > 0:
            return None
        g2 = (r - self.noise_scale * tr) / tq
        return min(max(g2, self.grid[0] ** 2), self.grid[-1] ** 2)

    def _estimate(self, a: int, r: float, s2: float) -> None:
        """``noise_scale`` and ``load_power`` from a mean NIS ``r`` under the gains of ``a``
        and a ratio ``s2``: ``nu = r / (s2 tq + tr)``, ``g^2 = s2 nu``."""
        tq, tr = self.innov[a, 0], self.innov[a, 1]
        nu = r / (s2 * tq + tr)
        if math.isfinite(nu) and nu > 0:
            self.noise_scale = min(max(nu, 1e-6), 1e6)
            self.load_power = s2 * self.noise_scale
