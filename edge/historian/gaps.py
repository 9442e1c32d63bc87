"""Holes in a device's stored sequence numbers: what the database is missing, made visible.

A device numbers its ADC samples (``seq``) from 0 on each run, so the rows of one run stored
without loss cover ``seq`` without a hole. QoS 1 and the historian's acknowledgement after the
commit keep every message the broker accepted; what never reached a subscriber (Mosquitto 2.0
does not restore shared subscriptions after its restart: a message published before the
historians have subscribed again goes to no one; a device's own queue overflowing) leaves a
hole. :class:`Gaps` looks for holes in the database (so every instance of a group sees the
rows of all of them), every ``every_s``, in the rows stored since its last look; a hole still
open ``settle_s`` after it was seen (a second historian's share or a redelivery may still be
on its way) is reported: logged once (device, first and last missing ``seq``, how many) and
listed in the status (``gaps``, ``missing``, ``gap_list``) until rows fill it.

Limits: a device's new run restarts ``seq`` at 0; its holes are looked for again from 0 once
its newest ``seq`` is below the one checked last, but rows of the earlier run at the same
``seq`` (kept apart by ``t_ns`` in the key) hide holes of the new one until ``--keep-raw``
deletes them. The first look at a device starts at its oldest row among the ``lookback`` below its
newest (what came before the historian's start is not a hole).
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger("vsense.historian")

#: the holes in ``seq`` between ``lo`` and ``hi`` of one device, as (first, last) missing
HOLES = """
SELECT seq + 1, nxt - 1 FROM (
    SELECT seq, lead(seq) OVER (ORDER BY seq) AS nxt FROM vsense_estimates
    WHERE device = ? AND seq >= ? AND seq <= ?) g
WHERE nxt > seq + 1
"""
RANGE = "SELECT min(seq), max(seq) FROM vsense_estimates WHERE device = ? AND seq >= ? AND seq <= ?"
NEWEST = "SELECT max(seq) FROM vsense_estimates WHERE device = ?"


def _sql(store, sql: str) -> str:
    return sql.replace("?", "%s") if store.kind == "postgresql" else sql


def holes(store, device: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """Missing ``seq`` ranges ``(first, last)`` of ``device`` within ``[lo, hi]`` (both
    ends included: no row at all is one hole ``(lo, hi)``)."""
    c = store.conn
    first, last = c.execute(_sql(store, RANGE), (device, lo, hi)).fetchone()
    if first is None:
        return [(lo, hi)]
    out = [(lo, int(first) - 1)] if first > lo else []
    out += [(int(a), int(b)) for a, b in c.execute(_sql(store, HOLES), (device, lo, hi))]
    if last < hi:
        out.append((int(last) + 1, hi))
    return out


class Gaps:
    """Per-device holes in the stored ``seq``: found, settled, reported, filled."""

    def __init__(self, every_s: float = 5.0, settle_s: float = 30.0, lookback: int = 100_000,
                 listed: int = 10):
        self.every_s, self.settle_s = every_s, settle_s
        self.lookback, self.listed = lookback, listed
        self.checked: dict[str, int] = {}  # device: newest seq looked at
        self.open: dict[tuple[str, int, int], float] = {}  # (device, first, last): first seen
        self.reported: set[tuple[str, int, int]] = set()
        self._last = time.monotonic()
        self.stats = {"gaps": 0, "missing": 0, "gap_list": []}

    def due(self) -> bool:
        return time.monotonic() - self._last >= self.every_s

    def run(self, store, devices, now: float | None = None) -> None:
        """Look at the rows stored since the last run and again at the open holes; raises
        (the caller retries) when the database fails."""
        now = time.monotonic() if now is None else now
        self._last = time.monotonic()
        c = store.conn
        for d in sorted(devices):
            newest = c.execute(_sql(store, NEWEST), (d,)).fetchone()[0]
            if newest is None:
                continue
            newest = int(newest)
            lo = self.checked.get(d)
            if lo is None:  # from the oldest row of the last `lookback` (none before it)
                lo = int(c.execute(_sql(store, RANGE), (d, max(0, newest - self.lookback),
                                                         newest)).fetchone()[0]) - 1
            elif newest < lo:  # a new run of the device: seq starts again at 0
                log.info("%s: seq went back to %d (a new run); holes looked for from 0", d, newest)
                lo = -1
            if newest > lo:
                for a, b in holes(store, d, lo + 1, newest):
                    self.open.setdefault((d, a, b), now)
                self.checked[d] = newest
        for key, seen in list(self.open.items()):  # filled since, fully or in part?
            d, a, b = key
            left = holes(store, d, a, b)
            if left == [(a, b)]:
                continue
            del self.open[key]
            for h in left:
                self.open[(d, *h)] = seen
            if key in self.reported:
                self.reported.discard(key)
                self.reported.update((d, *h) for h in left)
                log.warning("%s: seq %d..%d filled since (%s left)", d, a, b,
                            sum(y - x + 1 for x, y in left))
        for key, seen in sorted(self.open.items()):
            if key not in self.reported and now - seen >= self.settle_s:
                d, a, b = key
                self.reported.add(key)
                log.warning("%s: %d estimates missing in the database, seq %d..%d (still "
                            "missing %.0f s after they were due)", d, b - a + 1, a, b, now - seen)
        rep = sorted(self.reported)
        self.stats = {"gaps": len(rep), "missing": sum(b - a + 1 for _, a, b in rep),
                      "gap_list": [list(k) for k in rep[:self.listed]]}
