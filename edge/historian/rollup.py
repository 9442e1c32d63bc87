"""Downsampling and retention: per-second aggregates kept beside (and longer than) the raw rows.

``vsense_estimates_1s (device, t, col, n, min, max, mean, std, std_stated)``, key
``(device, t, col)``: for each device, second ``t`` (the start of the second: PostgreSQL
``timestamptz``, SQLite unix seconds) and column ``col`` (0-based, the order of ``meta``'s
``columns``): the count of finite values, their minimum, maximum, mean, population standard
deviation, and the mean of the stated standard deviation (null without one).

An aggregate is always recomputed from the raw rows of its second (never accumulated), so a
redelivered message, a late one and a second historian's rows all end in the same figures:
:class:`Rollup` notes the seconds each commit touched and, every ``every_s``, recomputes those
that ended more than ``late_s`` ago, then (``keep_raw_s``) deletes each device's raw rows older
than that. PostgreSQL serialises the recomputation of all historians with an advisory lock, so
the last one to run, which follows every commit of the second, writes last.
"""

from __future__ import annotations

import time

import numpy as np

#: PostgreSQL: the aggregates of ``(device, second)`` pairs given as two arrays
PG_ROLLUP = """
INSERT INTO vsense_estimates_1s (device, t, col, n, min, max, mean, std, std_stated)
SELECT e.device, to_timestamp(d.sec), u.k - 1, count(u.x), min(u.x), max(u.x), avg(u.x),
       stddev_pop(u.x), avg(u.sd)
FROM unnest(%s::text[], %s::bigint[]) AS d(device, sec)
JOIN vsense_estimates e
  ON e.device = d.device AND e.t >= to_timestamp(d.sec) AND e.t < to_timestamp(d.sec + 1)
CROSS JOIN LATERAL unnest(e.v, e.s) WITH ORDINALITY AS u(x, sd, k)
WHERE u.x <> 'NaN'
GROUP BY e.device, d.sec, u.k
ON CONFLICT (device, t, col) DO UPDATE SET n = excluded.n, min = excluded.min,
    max = excluded.max, mean = excluded.mean, std = excluded.std,
    std_stated = excluded.std_stated
"""
PG_TABLE = """
CREATE TABLE IF NOT EXISTS vsense_estimates_1s (
    device text NOT NULL, t timestamptz NOT NULL, col integer NOT NULL, n integer NOT NULL,
    min float8, max float8, mean float8, std float8, std_stated float8,
    PRIMARY KEY (device, t, col));
"""

#: SQLite: the same, the pairs as a JSON array ``[[device, second], ...]``
SQLITE_ROLLUP = """
INSERT INTO vsense_estimates_1s (device, t, col, n, min, max, mean, std, std_stated)
SELECT e.device, d.sec, CAST(j.key AS INTEGER), count(j.value), min(j.value), max(j.value),
       avg(j.value), sqrt(max(avg(j.value * j.value) - avg(j.value) * avg(j.value), 0)),
       avg(json_extract(e.s, '$[' || j.key || ']'))
FROM (SELECT json_extract(value, '$[0]') AS device, json_extract(value, '$[1]') AS sec
      FROM json_each(?)) AS d
JOIN vsense_estimates e ON e.device = d.device AND e.t >= d.sec AND e.t < d.sec + 1
JOIN json_each(e.v) AS j
WHERE j.type != 'null'
GROUP BY e.device, d.sec, j.key
ON CONFLICT (device, t, col) DO UPDATE SET n = excluded.n, min = excluded.min,
    max = excluded.max, mean = excluded.mean, std = excluded.std,
    std_stated = excluded.std_stated
"""
SQLITE_TABLE = """
CREATE TABLE IF NOT EXISTS vsense_estimates_1s (
    device TEXT NOT NULL, t INTEGER NOT NULL, col INTEGER NOT NULL, n INTEGER NOT NULL,
    min REAL, max REAL, mean REAL, std REAL, std_stated REAL,
    PRIMARY KEY (device, t, col)) WITHOUT ROWID;
"""


class Rollup:
    """Which seconds need their aggregates (re)computed, and when to run.

    ``every_s`` period of the maintenance; ``late_s`` how long after its end a second is
    taken as complete; ``keep_raw_s`` the raw rows' lifetime (None: kept); ``enabled`` False:
    no aggregates (retention still runs).
    """

    def __init__(self, enabled: bool = True, keep_raw_s: float | None = None,
                 every_s: float = 5.0, late_s: float = 2.0):
        if keep_raw_s is not None and keep_raw_s < 60:
            raise ValueError(f"--keep-raw {keep_raw_s:g}: keep raw rows at least 60 s")
        self.enabled, self.keep_raw_s = enabled, keep_raw_s
        self.every_s, self.late_s = every_s, late_s
        self.dirty: set[tuple[str, int]] = set()
        self.devices: set[str] = set()
        self._last = time.monotonic()
        self.stats = {"seconds_aggregated": 0, "raw_deleted": 0}

    def touched(self, batch) -> None:
        """Note the seconds of the committed ``batch`` (its Estimates)."""
        for e in batch:
            if hasattr(e, "seq") and len(e):
                self.devices.add(e.device)
                if self.enabled:
                    self.dirty.update((e.device, int(s)) for s in np.unique(np.floor(e.t)))

    def due(self) -> bool:
        return (self.enabled or self.keep_raw_s is not None) and \
            time.monotonic() - self._last >= self.every_s

    def run(self, store, now: float | None = None) -> None:
        """Recompute the complete dirty seconds, then delete expired raw rows; raises (the
        caller retries: the dirty seconds stay) when the database fails."""
        now = time.time() if now is None else now
        self._last = time.monotonic()  # a failure waits for the next period too
        ready = sorted(p for p in self.dirty if p[1] + 1 + self.late_s <= now)
        if ready:
            store.rollup(ready)
            self.dirty.difference_update(ready)
            self.stats["seconds_aggregated"] += len(ready)
        if self.keep_raw_s is not None and self.devices:
            self.stats["raw_deleted"] += store.expire(sorted(self.devices),
                                                      now - self.keep_raw_s)
