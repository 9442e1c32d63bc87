"""The historian's Grafana side: every SQL query of docs/historian.md (PostgreSQL and SQLite
dialects) and every panel of deploy/grafana/historian-postgresql.json, with Grafana's macros
and variables replaced as Grafana would, on a database the historian filled from a simulated
fleet through a real Mosquitto."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from historian_fleet import count, query, wait_for
from test_historian import base, db, fleet, historian, pg  # noqa: F401 - fixtures

pytestmark = pytest.mark.mqtt


def doc_queries(dialect: str) -> list[str]:
    """The SQL blocks of docs/historian.md marked ``<!-- query: <dialect> -->``."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "historian.md").read_text()
    return re.findall(rf"<!-- query: {dialect} -->\n```sql\n(.*?)```", text, re.S)


def grafana(sql: str, t0: float, t1: float) -> str:
    """Grafana's macros and the $device variable replaced as Grafana would."""
    return (sql.replace("$device", "dev01")
            .replace("$__timeFilter(t)", f"t BETWEEN to_timestamp({t0}) AND to_timestamp({t1})")
            .replace("$__unixEpochFrom()", str(t0)).replace("$__unixEpochTo()", str(t1)))


def test_grafana_queries_of_the_docs(db, fleet, historian):  # noqa: F811 - fixtures
    dialect = "sqlite" if db.startswith("sqlite") else "postgresql"
    queries = doc_queries(dialect)
    assert len(queries) == 6, f"docs/historian.md: {len(queries)} {dialect} queries"
    t0 = time.time() - 60
    h = historian(db)
    f = fleet(3, rows=100)
    f.publish(20)
    wait_for(lambda: count(db) == len(f.sent) and h.stats["health"] == 3, 30, "every row")
    wait_for(lambda: not h.rollup.dirty, 30, "the per-second aggregates")
    t1 = time.time() + 1
    results = [query(db, grafana(q, t0, t1)) for q in queries]
    assert all(results), [len(r) for r in results]
    raw, per_second, complete, stored_1s, health, meta = results
    assert len(raw) == 2000 and len(meta) == 3 and health[0][1] == 80
    assert [(d, int(n), int(span)) for d, n, span in complete] == [
        (d, 2000, 2000) for d in ("dev00", "dev01", "dev02")]
    x = np.array([r[1] for r in raw], dtype=float)
    assert sum(r[0] is not None for r in per_second) >= 1
    assert min(r[1] for r in per_second) == pytest.approx(np.nanmin(x))
    assert max(r[2] for r in per_second) == pytest.approx(np.nanmax(x))
    assert np.allclose([r[1:4] for r in stored_1s], [r[1:4] for r in per_second])


def test_grafana_dashboard_queries_run(pg, fleet, historian):  # noqa: F811 - fixtures
    """deploy/grafana/historian-postgresql.json: every panel's SQL and the device variable's,
    with Grafana's macros and variables replaced, on a filled PostgreSQL database."""
    import json

    import psycopg

    name = "t" + uuid.uuid4().hex[:12]
    with psycopg.connect(pg.url, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    url = pg.url.rsplit("/", 1)[0] + "/" + name
    dash = json.loads((Path(__file__).resolve().parents[1] / "deploy" / "grafana"
                       / "historian-postgresql.json").read_text())
    sqls = [t["rawSql"] for p in dash["panels"] for t in p["targets"]]
    assert len(sqls) == 4
    t0 = time.time() - 60
    h = historian(url)
    f = fleet(2, rows=100)
    f.publish(20)
    wait_for(lambda: count(url) == len(f.sent) and h.stats["health"] == 2
             and not h.rollup.dirty, 30, "every row and its aggregates")
    t1 = time.time() + 1
    (var,) = [v["query"] for v in dash["templating"]["list"] if v["name"] == "device"]
    assert [r[0] for r in query(url, var)] == ["dev00", "dev01"]
    for sql in sqls:
        rows = query(url, grafana(sql.replace("${col:raw}", "2"), t0, t1))
        assert rows, sql
