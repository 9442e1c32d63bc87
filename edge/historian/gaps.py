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

A device's new run (its ``t_ns`` more than a minute below its newest, as
:class:`edge.historian.messages.Clocks` decides) starts ``seq`` at 0: its holes are looked for
among the rows from the first ``t_ns`` of the new run this instance saw (rows of the earlier run
at the same ``seq`` are kept apart by ``t_ns``, in the key). Limit: a hole at the very start of
a new run, before the first row this instance saw, is not seen. The first look at a device starts at its oldest row among the ``lookback`` below its
newest (what came before the historian's start is not a hole).
"""

from __future__ import annotations

import bisect
import logging
import time

log = logging.getLogger("vsense.historian")

#: the holes in ``seq`` between ``lo`` and ``hi`` of one device, as (first, last) missing
#: (rows of the current run only: ``t_ns`` from the first this instance saw of the run to its
#: newest; rows of a run up to ``seq`` have ``t_ns`` up to the newest's)
RUN = " AND t_ns >= ? AND t_ns <= ?"
HOLES = """
SELECT seq + 1, nxt - 1 FROM (
    SELECT seq, lead(seq) OVER (ORDER BY seq) AS nxt FROM vsense_estimates
    WHERE device = ? AND seq >= ? AND seq <= ?""" + RUN + """) g
WHERE nxt > seq + 1
"""
RANGE = "SELECT min(seq), max(seq) FROM vsense_estimates WHERE device = ? AND seq >= ? " \
        "AND seq <= ?" + RUN
NEW_RUN_NS = 60_000_000_000  # a t_ns this far below the newest: a new run (as Clocks)
T_MAX = 2**63 - 1


def _sql(store, sql: str) -> str:
    return sql.replace("?", "%s") if store.kind == "postgresql" else sql


def holes(store, device: str, lo: int, hi: int, t0: int = 0,
          t1: int = T_MAX) -> list[tuple[int, int]]:
    """Missing ``seq`` ranges ``(first, last)`` of ``device`` within ``[lo, hi]`` (both
    ends included: no row at all is one hole ``(lo, hi)``), among rows with ``t0 <= t_ns <=
    t1``."""
    c = store.conn
    first, last = c.execute(_sql(store, RANGE), (device, lo, hi, t0, t1)).fetchone()
    if first is None:
        return [(lo, hi)]
    out = [(lo, int(first) - 1)] if first > lo else []
    out += [(int(a), int(b)) for a, b in c.execute(_sql(store, HOLES), (device, lo, hi, t0, t1))]
    if last < hi:
        out.append((int(last) + 1, hi))
    return out


def _clusters(keys: list, far: int = 10_000):
    """Sorted open holes ``(device, first, last)`` grouped per device into runs no more than
    ``far`` apart: ``(device, first, last, [keys])``, one look at the database each."""
    out: list = []
    for k in keys:
        if out and out[-1][0] == k[0] and k[1] - out[-1][2] <= far:
            out[-1][2] = max(out[-1][2], k[2])
            out[-1][3].append(k)
        else:
            out.append([k[0], k[1], k[2], [k]])
    return [tuple(c) for c in out]


class Gaps:
    """Per-device holes in the stored ``seq``: found, settled, reported, filled.
    :meth:`touched` with each committed batch (the devices' newest rows: runs, where to look
    up to), :meth:`run` every ``every_s`` (the database: what all instances stored)."""

    def __init__(self, every_s: float = 5.0, settle_s: float = 30.0, lookback: int = 100_000,
                 listed: int = 10):
        self.every_s, self.settle_s = every_s, settle_s
        self.lookback, self.listed = lookback, listed
        self.run_of: dict[str, list[int]] = {}  # device: [first t_ns, newest t_ns, its seq]
        self.checked: dict[str, int] = {}  # device: newest seq looked at
        self.open: dict[tuple[str, int, int], float] = {}  # (device, first, last): first seen
        self.next_check: dict[tuple[str, int, int], float] = {}  # when to look at it again
        self.reported: set[tuple[str, int, int]] = set()
        self._last = time.monotonic()
        self.stats = {"gaps": 0, "missing": 0, "gap_list": []}

    def touched(self, batch) -> None:
        """Note the newest row of each device in a committed ``batch`` (its Estimates)."""
        for e in batch:
            if not hasattr(e, "seq") or not len(e):
                continue
            k = int(e.t_ns.argmax())
            t, q = int(e.t_ns[k]), int(e.seq[k])
            r = self.run_of.get(e.device)
            if r is None or t < r[1] - NEW_RUN_NS:  # the first rows, or a new run
                if r is not None:
                    log.info("%s: a new run (t_ns went back); holes looked for from its start",
                             e.device)
                    self._forget(e.device)
                    self.checked[e.device] = -1
                self.run_of[e.device] = [int(e.t_ns.min()) if r is not None else 0, t, q]
            elif t > r[1]:
                r[1], r[2] = t, q

    def _refresh(self, d: str, keys: list, left: list[tuple[int, int]], now: float) -> None:
        """``left``: the holes now within the span of the open holes ``keys`` of device ``d``
        that were looked at again; each part keeps the time its hole was first seen, a
        reported one stays reported. Open holes not in ``keys`` stay as they are."""
        old = [(k, self.open.pop(k)) for k in keys]
        for k in keys:
            self.next_check.pop(k, None)
        starts = [k[1] for k, _ in old]
        new_reported = set()
        for a, b in left:
            i = bisect.bisect_right(starts, a) - 1
            if i < 0 or a > old[i][0][2]:  # another open hole, or rows deleted by retention
                continue
            k, seen = old[i]
            self.open[(d, a, b)] = seen
            self.next_check[(d, a, b)] = now + self.settle_s  # looked at: again after a while
            if k in self.reported:
                new_reported.add((d, a, b))
        for k, _ in old:
            if k in self.reported:
                self.reported.discard(k)
                if k not in new_reported:
                    rest = [h for h in new_reported if k[1] <= h[1] <= k[2]]
                    log.warning("%s: seq %d..%d filled since (%d left)", d, k[1], k[2],
                                sum(h[2] - h[1] + 1 for h in rest))
        self.reported.update(new_reported)

    def _forget(self, device: str) -> None:
        for key in [k for k in self.open if k[0] == device]:
            del self.open[key]
            self.next_check.pop(key, None)
            self.reported.discard(key)

    def due(self) -> bool:
        return time.monotonic() - self._last >= self.every_s

    def run(self, store, now: float | None = None) -> None:
        """Look at the rows stored since the last run and again at the open holes; raises
        (the caller retries) when the database fails."""
        now = time.monotonic() if now is None else now
        self._last = time.monotonic()
        c = store.conn
        for d, (t0, t1, newest) in sorted(self.run_of.items()):
            lo = self.checked.get(d)
            if lo is None:  # from the oldest row of the last `lookback` (none before it)
                first = c.execute(_sql(store, RANGE), (d, max(0, newest - self.lookback),
                                                       newest, t0, t1)).fetchone()[0]
                lo = newest if first is None else int(first) - 1
            if newest > lo:
                for a, b in holes(store, d, lo + 1, newest, t0, t1):
                    if (d, a, b) not in self.open:  # looked at again once it may be settled
                        self.open[(d, a, b)] = now
                        self.next_check[(d, a, b)] = now + self.settle_s
                self.checked[d] = newest
        due = sorted(k for k in self.open if now >= self.next_check.get(k, 0.0))
        for d, x, y, keys in _clusters(due):  # filled since, fully or in part?
            self._refresh(d, keys, holes(store, d, x, y, *self.run_of[d][:2]), now)
        for key, seen in sorted(self.open.items()):
            if key not in self.reported and now - seen >= self.settle_s:
                d, a, b = key
                self.reported.add(key)
                log.warning("%s: %d estimates missing in the database, seq %d..%d (still "
                            "missing %.0f s after they were due)", d, b - a + 1, a, b, now - seen)
        rep = sorted(self.reported)
        self.stats = {"gaps": len(rep), "missing": sum(b - a + 1 for _, a, b in rep),
                      "gap_list": [list(k) for k in rep[:self.listed]]}
