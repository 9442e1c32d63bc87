"""Where the historian writes: the database URL, the tables, and the embedded default (SQLite).

``open_store(url)``:

* ``sqlite:PATH`` or ``sqlite:///ABSOLUTE/PATH`` (or a path ending in ``.db``/``.sqlite``):
  :class:`SQLiteStore`, Python's own ``sqlite3`` (no server, no extra package), WAL mode,
  ``synchronous=FULL`` (a commit is on disk before the messages in it are acknowledged);
* ``postgresql://...`` or ``postgres://...`` (libpq's URL): :class:`edge.historian.postgres.
  PostgresStore` (psycopg 3, the ``historian`` extra).

Every store has the same three tables (``docs/historian.md``):

* ``vsense_estimates (device, seq, t_ns, t, flags, v, s)``, key ``(device, seq, t_ns)``:
  one row per estimate; ``v``/``s`` the values and stated standard deviations in the order of
  the device's ``meta`` ``columns`` (SQLite: JSON text, NaN as null; PostgreSQL:
  ``float8[]``); ``t`` the wall time the historian gives the row (:class:`edge.historian.
  messages.Estimates`). A row already there (QoS 1 redelivery, a restarted historian) is
  ignored, so storing a message twice changes nothing;
* ``vsense_health (device, id, t, samples, doc)``, key ``(device, id)``: one row per
  ``health`` message (``id`` = sha1 of the payload);
* ``vsense_meta (device, t, doc)``: each device's latest ``meta``.

``write(items)`` stores a list of :class:`~edge.historian.messages.Estimates` and
:class:`~edge.historian.messages.Document` in one transaction and returns the number of
estimate rows inserted (the others were there already); any failure raises (the caller keeps
the items, acknowledges nothing and retries).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson

from edge.historian.messages import Estimates, redact, rows_of
from edge.historian.rollup import SQLITE_ROLLUP, SQLITE_TABLE

_SQLITE_SCHEMA = """
CREATE TABLE IF NOT EXISTS vsense_estimates (
    device TEXT NOT NULL, seq INTEGER NOT NULL, t_ns INTEGER NOT NULL, t REAL NOT NULL,
    flags INTEGER NOT NULL, v TEXT NOT NULL, s TEXT,
    PRIMARY KEY (device, seq, t_ns)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS vsense_estimates_device_t ON vsense_estimates (device, t);
CREATE TABLE IF NOT EXISTS vsense_health (
    device TEXT NOT NULL, id TEXT NOT NULL, t REAL NOT NULL, samples INTEGER, doc TEXT NOT NULL,
    PRIMARY KEY (device, id));
CREATE TABLE IF NOT EXISTS vsense_meta (device TEXT PRIMARY KEY, t REAL NOT NULL,
                                        doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS vsense_clock (device TEXT PRIMARY KEY, offset_s REAL NOT NULL,
                                         newest_t_ns INTEGER NOT NULL);
"""
#: a device's clock offset: the smaller one, or the new run's (edge.historian.messages.Clocks)
_SQLITE_CLOCK = """
INSERT INTO vsense_clock VALUES (?, ?, ?) ON CONFLICT (device) DO UPDATE SET
    offset_s = CASE WHEN excluded.newest_t_ns < newest_t_ns - 60000000000 THEN excluded.offset_s
                    ELSE min(offset_s, excluded.offset_s) END,
    newest_t_ns = CASE WHEN excluded.newest_t_ns < newest_t_ns - 60000000000
                       THEN excluded.newest_t_ns ELSE max(newest_t_ns, excluded.newest_t_ns) END
RETURNING device, offset_s, newest_t_ns
"""


def open_store(url: str):
    """The store of a database URL; ValueError names a URL it does not understand."""
    if url.startswith(("postgresql://", "postgres://")):
        from edge.historian.postgres import PostgresStore

        return PostgresStore(url)
    path = None
    if url.startswith("sqlite:"):
        path = url[len("sqlite:"):]
        if path.startswith("//"):  # sqlite:///abs/path
            path = path[2:]
    elif url.endswith((".db", ".sqlite", ".sqlite3")) and "://" not in url:
        path = url
    if not path:
        raise ValueError(f"--db {redact(url)!r}: not a database URL (give sqlite:PATH, a "
                         "file.db, or postgresql://USER@HOST:PORT/DBNAME)")
    return SQLiteStore(path)


class SQLiteStore:
    """The embedded default: one SQLite file (WAL), no server."""

    kind = "sqlite"

    def __init__(self, path: str, busy_timeout_s: float = 1.0):
        self.path = Path(path)
        self.url = f"sqlite:{path}"
        self.busy_timeout_s = busy_timeout_s
        self.conn: sqlite3.Connection | None = None

    def connect(self) -> None:
        if not self.path.parent.is_dir():
            raise ValueError(f"--db {self.url}: the folder {self.path.parent} does not exist")
        c = sqlite3.connect(self.path, timeout=self.busy_timeout_s, isolation_level=None,
                            check_same_thread=False)
        try:
            c.execute("PRAGMA journal_mode=WAL")
            c.execute("PRAGMA synchronous=FULL")
            c.executescript(_SQLITE_SCHEMA + SQLITE_TABLE)
        except sqlite3.Error:
            c.close()
            raise
        self.conn = c

    def write(self, items) -> int:
        c = self.conn
        est = 0
        c.execute("BEGIN IMMEDIATE")
        try:
            for it in items:
                n0 = c.total_changes
                if isinstance(it, Estimates):
                    c.executemany("INSERT OR IGNORE INTO vsense_estimates VALUES "
                                  "(?, ?, ?, ?, ?, ?, ?)", rows_of(it, nan_null=True))
                    est += c.total_changes - n0
                elif it.kind == "health":
                    c.execute("INSERT OR IGNORE INTO vsense_health VALUES (?, ?, ?, ?, ?)",
                              (it.device, it.id, it.t, it.samples, it.doc))
                else:
                    c.execute("INSERT INTO vsense_meta VALUES (?, ?, ?) ON CONFLICT (device) "
                              "DO UPDATE SET t = excluded.t, doc = excluded.doc",
                              (it.device, it.t, it.doc))
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise
        return est

    def _transaction(self, fn):
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            out = fn(c)
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise
        return out

    def sync_clocks(self, rows) -> list[tuple]:
        """Store ``(device, offset, newest t_ns)`` rows; the stored ones after the merge."""
        return self._transaction(lambda c: [c.execute(_SQLITE_CLOCK, r).fetchone()
                                            for r in rows])

    def clocks(self) -> list[tuple]:
        return self.conn.execute("SELECT device, offset_s, newest_t_ns FROM vsense_clock"
                                 ).fetchall()

    def rollup(self, pairs: list[tuple[str, int]]) -> None:
        """Recompute the per-second aggregates of these ``(device, second)``."""
        self._transaction(lambda c: c.execute(SQLITE_ROLLUP, (orjson.dumps(pairs).decode(),)))

    def expire(self, devices: list[str], before: float) -> int:
        """Delete the raw rows of ``devices`` older than ``before`` [unix s]; how many."""
        def run(c):
            n0 = c.total_changes
            for d in devices:
                c.execute("DELETE FROM vsense_estimates WHERE device = ? AND t < ?", (d, before))
            return c.total_changes - n0
        return self._transaction(run)

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            finally:
                self.conn = None
