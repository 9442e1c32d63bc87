"""PostgreSQL store of the historian (psycopg 3: ``pip install 'vsense[historian]'``).

Each batch is one transaction: ``COPY`` into a temporary staging table (``ON COMMIT DELETE
ROWS``), then ``INSERT INTO vsense_estimates SELECT ... ON CONFLICT DO NOTHING`` (a row already
stored is skipped, so a redelivered message changes nothing). When the server offers the
TimescaleDB extension, ``vsense_estimates`` becomes a hypertable partitioned on ``t_ns`` (the
key must contain the partitioning column; ``t`` is not in the key because a redelivered
message arrives at another time); otherwise it is a plain table with an index on
``(device, t)``. The tables are described in :mod:`edge.historian.store`.
"""

from __future__ import annotations

from edge.historian.messages import Estimates, redact, rows_of
from edge.historian.rollup import PG_ROLLUP, PG_TABLE

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vsense_estimates (
    device text NOT NULL, seq bigint NOT NULL, t_ns bigint NOT NULL, t timestamptz NOT NULL,
    flags smallint NOT NULL, v float8[] NOT NULL, s float8[],
    PRIMARY KEY (device, seq, t_ns));
CREATE INDEX IF NOT EXISTS vsense_estimates_device_t ON vsense_estimates (device, t);
CREATE TABLE IF NOT EXISTS vsense_health (
    device text NOT NULL, id text NOT NULL, t timestamptz NOT NULL, samples bigint,
    doc jsonb NOT NULL, PRIMARY KEY (device, id));
CREATE TABLE IF NOT EXISTS vsense_meta (device text PRIMARY KEY, t timestamptz NOT NULL,
                                        doc jsonb NOT NULL);
CREATE TABLE IF NOT EXISTS vsense_clock (device text PRIMARY KEY, offset_s float8 NOT NULL,
                                         newest_t_ns bigint NOT NULL);
"""
_CLOCK = """
INSERT INTO vsense_clock AS c VALUES (%s, %s, %s) ON CONFLICT (device) DO UPDATE SET
    offset_s = CASE WHEN excluded.newest_t_ns < c.newest_t_ns - 60000000000
                    THEN excluded.offset_s ELSE least(c.offset_s, excluded.offset_s) END,
    newest_t_ns = CASE WHEN excluded.newest_t_ns < c.newest_t_ns - 60000000000
                       THEN excluded.newest_t_ns ELSE greatest(c.newest_t_ns, excluded.newest_t_ns) END
RETURNING device, offset_s, newest_t_ns
"""
_STAGE = """
CREATE TEMPORARY TABLE IF NOT EXISTS vsense_stage (
    device text, seq bigint, t_ns bigint, t_s float8, flags smallint, v float8[], s float8[])
    ON COMMIT DELETE ROWS
"""
# one hour of t_ns per chunk
_HYPERTABLE = ("SELECT create_hypertable('vsense_estimates', 't_ns', "
               "chunk_time_interval => 3600000000000, if_not_exists => TRUE, "
               "migrate_data => TRUE)")


def _psycopg():
    try:
        import psycopg
    except ImportError:
        raise ValueError("--db postgresql://...: the PostgreSQL driver psycopg 3 is not "
                         "installed: pip install 'vsense[historian]'") from None
    return psycopg


class PostgresStore:
    """PostgreSQL (TimescaleDB when the extension is available) through psycopg 3."""

    kind = "postgresql"

    def __init__(self, url: str, connect_timeout_s: int = 5):
        self.psycopg = _psycopg()
        self.url = redact(url)
        self._url = url
        self.connect_timeout_s = connect_timeout_s
        self.conn = None
        self.timescale = False

    def connect(self) -> None:
        psycopg = self.psycopg
        try:
            conn = psycopg.connect(self._url, autocommit=True,
                                   connect_timeout=self.connect_timeout_s)
        except psycopg.ProgrammingError as e:  # a malformed URL or option
            raise ValueError(f"--db {self.url}: {e}") from None
        try:
            with conn.transaction():
                # historians starting together: one creates the tables, the others wait
                conn.execute("SELECT pg_advisory_xact_lock(73951)")
                conn.execute(_SCHEMA)
                conn.execute(PG_TABLE)
                have = conn.execute("SELECT 1 FROM pg_available_extensions "
                                    "WHERE name = 'timescaledb'").fetchone()
                if have:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS timescaledb")
                    conn.execute(_HYPERTABLE)
                self.timescale = bool(have)
            with conn.transaction():
                conn.execute(_STAGE)
        except BaseException:
            conn.close()
            raise
        self.conn = conn

    def write(self, items) -> int:
        conn = self.conn
        est = 0
        with conn.transaction(), conn.cursor() as cur:
            staged = 0
            with cur.copy("COPY vsense_stage (device, seq, t_ns, t_s, flags, v, s) "
                          "FROM STDIN") as cp:
                for it in items:
                    if isinstance(it, Estimates):
                        for row in rows_of(it, nan_null=False):
                            cp.write_row(row)
                        staged += len(it)
            if staged:
                cur.execute("INSERT INTO vsense_estimates (device, seq, t_ns, t, flags, v, s) "
                            "SELECT device, seq, t_ns, to_timestamp(t_s), flags, v, s "
                            "FROM vsense_stage ON CONFLICT DO NOTHING")
                est = cur.rowcount
            docs = [it for it in items if not isinstance(it, Estimates)]
            health = [(d.device, d.id, d.t, d.samples, d.doc) for d in docs
                      if d.kind == "health"]
            if health:
                cur.executemany("INSERT INTO vsense_health VALUES (%s, %s, to_timestamp(%s), "
                                "%s, %s::jsonb) ON CONFLICT DO NOTHING", health)
            for d in docs:
                if d.kind == "meta":
                    cur.execute("INSERT INTO vsense_meta VALUES (%s, to_timestamp(%s), "
                                "%s::jsonb) ON CONFLICT (device) DO UPDATE "
                                "SET t = excluded.t, doc = excluded.doc",
                                (d.device, d.t, d.doc))
        return est

    def sync_clocks(self, rows) -> list[tuple]:
        """Store ``(device, offset, newest t_ns)`` rows; the stored ones after the merge."""
        with self.conn.transaction():
            return [self.conn.execute(_CLOCK, r).fetchone() for r in rows]

    def clocks(self) -> list[tuple]:
        return self.conn.execute("SELECT device, offset_s, newest_t_ns FROM vsense_clock"
                                 ).fetchall()

    def rollup(self, pairs: list[tuple[str, int]]) -> None:
        """Recompute the per-second aggregates of these ``(device, second)`` (one historian at
        a time: the advisory lock)."""
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(73952)")
            self.conn.execute(PG_ROLLUP, ([d for d, _ in pairs], [s for _, s in pairs]))

    def expire(self, devices: list[str], before: float) -> int:
        """Delete the raw rows of ``devices`` older than ``before`` [unix s]; how many."""
        with self.conn.transaction():
            cur = self.conn.execute("DELETE FROM vsense_estimates WHERE device = ANY(%s) "
                                    "AND t < to_timestamp(%s)", (devices, before))
            return cur.rowcount

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            finally:
                self.conn = None
