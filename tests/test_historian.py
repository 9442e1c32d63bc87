"""vsense-edge historian (edge/historian/): simulated devices -> a real Mosquitto 2 (MQTT v5,
shared subscriptions) -> historian -> a real SQLite file and a real PostgreSQL (a throwaway
cluster from Debian's package, tests/pgserver.py): every (device, seq) exactly once, after a
killed and restarted historian, with two historians sharing the subscription, and across a
database outage with bounded memory. Waits are on observable conditions with timeouts.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import uuid

import numpy as np
import orjson
import pytest

from edge.daemon.payloads import encode_estimates
from edge.historian.ingest import Historian
from edge.historian.messages import BadMessage, Clocks, decode
from edge.historian.rollup import Rollup
from edge.historian.store import open_store
from edge.monitor.connect import plain_settings
from historian_fleet import Fleet, count, query, stored, wait_for
from pgserver import PgServer, pg_bindir

pytestmark = pytest.mark.mqtt
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _missing(what: str):
    msg = f"{what} (tests/run.sh installs it)"
    if IN_CI:
        pytest.fail(msg + " - required in CI")
    pytest.skip(msg)


@pytest.fixture(scope="module")
def pg():
    bindir = pg_bindir()
    if bindir is None:
        _missing("PostgreSQL not found: apt-get install postgresql")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _missing("psycopg 3 not installed: pip install 'vsense[historian]'")
    server = PgServer(bindir)
    server.start()
    yield server
    server.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    """A fresh database URL of each kind."""
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'history.db'}"
    server = request.getfixturevalue("pg")
    import psycopg

    name = "t" + uuid.uuid4().hex[:12]
    with psycopg.connect(server.url, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    return server.url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture
def base():
    return "h" + uuid.uuid4().hex[:8]


@pytest.fixture
def fleet(mosquitto, base):
    made = []

    def make(ndev, rows=50, seed=0):
        f = Fleet(mosquitto.host, mosquitto.port, base, ndev, rows, seed,
                  client_id="fleet-" + base)
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()


@pytest.fixture
def historian(mosquitto, base):
    made = []

    def make(url, client_id="h1", group="g", **kw):
        kw.setdefault("rollup", Rollup(every_s=0.2, late_s=0.2))
        h = Historian(plain_settings(mosquitto.host, mosquitto.port, base), open_store(url),
                      group=group, client_id=f"{base}-{client_id}", status_interval_s=0.2,
                      **kw)
        h.start()
        made.append(h)
        return h

    yield make
    for h in made:
        h.stop()


def _exactly_once(url, fleet):
    n, keys = stored(url)
    assert keys == fleet.sent, (len(keys), len(fleet.sent))
    assert n == len(fleet.sent), f"{n - len(fleet.sent)} duplicate rows"


# ------------------------------------------------------------------ messages, URLs
def test_decode_both_formats_and_bad_payloads():
    rng = np.random.default_rng(1)
    v = rng.standard_normal((4, 2))
    v[1, 0] = np.nan
    for fmt in ("json", "binary"):
        p = encode_estimates(10, np.arange(4) * 1000, v, np.zeros(4, np.uint8), fmt=fmt,
                             std=np.array([0.1, 0.2]))
        e = decode("vsense/d1/estimates", p, "vsense", 100.0)
        assert e.device == "d1" and e.seq.tolist() == [10, 11, 12, 13]
        np.testing.assert_array_equal(e.v, v)
        assert e.t[-1] == 100.0 and e.t[0] == pytest.approx(100.0 - 3e-6)
        assert np.isnan(e.s[1, 0]) and e.s[0, 1] == 0.2
    good = encode_estimates(0, np.arange(3), np.ones((3, 2)), np.zeros(3, np.uint8), "binary")
    for topic, payload in (("vsense/d1/estimates", b"{not json"),
                           ("vsense/d1/estimates", good[:-5]),
                           ("vsense/d1/estimates", b'{"seq": 0, "n": 2, "t_ns": [1],'
                                                   b' "v": [[1], [2]], "flags": [0, 0]}'),
                           ("vsense/d1/health", b"[1, 2]"),
                           ("vsense/d1/raw", good), ("other/d1/estimates", good)):
        with pytest.raises(BadMessage, match=topic.split("/")[0]):
            decode(topic, payload, "vsense", 0.0)


def test_rows_are_placed_at_their_sample_time_not_their_arrival():
    clocks = Clocks()
    up = 3600_000_000_000  # the device's clock has run for an hour
    p = [encode_estimates(50 * k, up + (50 * k + np.arange(50)) * 1_000_000, np.ones((50, 1)),
                          np.zeros(50, np.uint8)) for k in range(4)]
    e0 = decode("v/d/estimates", p[0], "v", 1000.049, clocks)  # came in 0 ms
    e1 = decode("v/d/estimates", p[1], "v", 1030.0, clocks)    # waited 30 s in the broker
    e2 = decode("v/d/estimates", p[2], "v", 1000.1495, clocks)  # came in 0.5 ms: no change
    assert e0.t[0] == pytest.approx(1000.0) and e1.t[0] == pytest.approx(1000.05)
    assert e2.t[-1] == pytest.approx(1000.149)
    assert e0.t_ns[0] == up
    # a rebooted device: its clock starts again
    p0 = encode_estimates(0, np.arange(50) * 1_000_000, np.ones((50, 1)), np.zeros(50, np.uint8))
    assert decode("v/d/estimates", p0, "v", 5000.049, clocks).t[0] == pytest.approx(5000.0)


def test_clock_offsets_are_kept_for_a_restart_and_shared(db):
    up = 3600_000_000_000
    store = open_store(db)
    store.connect()
    try:
        c1 = Clocks()
        off = c1.offset("d", up, 1000.0)  # a fresh message
        store.sync_clocks(c1.take_changed())
        c2 = Clocks()  # a restarted historian: its first message waited 30 s in the broker
        c2.merge(store.clocks())
        assert c2.offset("d", up + 1_000_000_000, 1031.0) == off
        # another instance saw a faster message: the stored offset is the smaller one
        (row,) = store.sync_clocks([("d", off - 0.01, up)])
        assert row[1] == pytest.approx(off - 0.01) and row[2] == up
        c2.merge([row])
        assert c2.offset("d", up + 2_000_000_000, 1040.0) == pytest.approx(off - 0.01)
        # the device rebooted: its clock starts again, the stored offset is replaced
        (row,) = store.sync_clocks([("d", 5000.0, 1_000_000_000)])
        assert tuple(row[1:]) == (5000.0, 1_000_000_000)
    finally:
        store.close()


def test_database_url_errors_name_the_url(tmp_path):
    with pytest.raises(ValueError, match="'mysql://x': not a database URL"):
        open_store("mysql://x")
    with pytest.raises(ValueError, match="does not exist"):
        open_store(f"sqlite:{tmp_path}/no/such/dir/h.db").connect()
    r = subprocess.run([sys.executable, "-m", "edge.cli", "historian", "--db",
                        "postgres://u:secret@h/db", "--receive-max", "0"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--receive-max 0" in r.stderr and "secret" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "edge.cli", "historian", "--db", "h.db",
                        "--username", "viewer", "--password-file", str(tmp_path / "nope")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--password-file" in r.stderr and "nope" in r.stderr
    r = subprocess.run([sys.executable, "-m", "edge.cli", "historian", "--db",
                        f"sqlite:{tmp_path}/h.db", "--broker", "127.0.0.1:1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "127.0.0.1:1" in r.stderr and "refused" in r.stderr


# ------------------------------------------------------------------ end to end
def test_fleet_rows_stored_exactly_once(db, fleet, historian):
    h = historian(db)
    f = fleet(8, rows=40)
    f.publish(15)
    f.send_raw("dev00/estimates", b"\x00garbage")
    f.send_raw("dev01/estimates", b'{"seq": 1}')
    wait_for(lambda: count(db) == len(f.sent) and h.stats["bad"] == 2
             and h.stats["health"] == 8, 30, "every row, both bad messages and the health")
    _exactly_once(db, f)
    assert h.stats["rows"] == len(f.sent) == 8 * 15 * 40
    dev, seq = next(iter(sorted(f.values)))
    (v,) = query(db, f"SELECT v FROM vsense_estimates WHERE device = '{dev}' AND seq = {seq}")[0]
    v = [float("nan") if x is None else x for x in (eval(v) if isinstance(v, str) else v)]
    np.testing.assert_array_equal(v, f.values[(dev, seq)])
    assert len(query(db, "SELECT device FROM vsense_meta")) == 8
    wait_for(lambda: not h.rollup.dirty, 30, "the per-second aggregates")
    finite = ("SELECT count(*) FROM vsense_estimates, json_each(v) j WHERE j.type != 'null'"
              if db.startswith("sqlite") else
              "SELECT count(*) FROM vsense_estimates, unnest(v) x WHERE x <> 'NaN'")
    assert query(db, "SELECT sum(n) FROM vsense_estimates_1s")[0][0] == query(db, finite)[0][0]
    st = h.status()
    assert st["db"] == "ok" and st["queue"] == 0 and st["lag_s"] == 0.0 and st["mqtt"]


def test_killed_historian_restarts_without_loss_or_duplicates(db, fleet, mosquitto, base,
                                                              subscriber, request):
    """Killed (SIGKILL) while it holds delivered, unacknowledged messages (the database away),
    more published while it is dead, started again under the same client id."""
    pg = request.getfixturevalue("pg") if db.startswith("postgres") else None
    cmd = [sys.executable, "-m", "edge.cli", "historian", "--db", db, "--broker",
           f"{mosquitto.host}:{mosquitto.port}", "--base", base, "--client-id", base + "-k",
           "--status-interval", "0.2"]
    topic = f"{base}/historian/{base}-k/status"
    status = subscriber(topic, client_id=base + "-watch")

    def last_status():
        got = status.get(topic)
        return orjson.loads(got[-1][0]) if got else {}

    def start():
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        n0 = len(status.get(topic))
        assert status.wait(lambda: len(status.get(topic)) > n0, 60), "no status published"
        return p

    p = start()
    f = fleet(6, rows=50)
    f.publish(10)
    wait_for(lambda: count(db) == len(f.sent), 30, "the first rows")
    back = _block(db, pg)
    try:
        f.publish(10)
        assert status.wait(lambda: last_status().get("db") == "error"
                           and last_status().get("pending", 0) > 0, 30), last_status()
        p.send_signal(signal.SIGKILL)  # holding delivered messages it has not acknowledged
        p.wait(10)
    finally:
        back()
    f.publish(10)  # while it is dead: the broker keeps them for its session
    p = start()
    try:
        wait_for(lambda: count(db) >= len(f.sent), 60, "every row after the restart")
        _exactly_once(db, f)
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 0, p.stderr.read().decode()[-2000:]


def test_per_second_aggregates_from_the_raw_rows_and_retention(db):
    rng = np.random.default_rng(3)
    v = rng.standard_normal((2500, 2))
    v[rng.random(v.shape) < 0.05] = np.nan
    t_ns = 5_000_000_000 + np.arange(2500) * 1_000_000  # 2.5 s at 1 kHz
    std = np.array([0.1, 0.3])
    clocks = Clocks()
    batch = [decode("vsense/d1/estimates", encode_estimates(k, t_ns[k:k + 500], v[k:k + 500],
                                                            np.zeros(500, np.uint8), std=std),
                    "vsense", 1_000_000.0 + (k + 499) * 1e-3, clocks)
             for k in range(0, 2500, 500)]
    store = open_store(db)
    store.connect()
    rollup = Rollup(keep_raw_s=60, late_s=0.0)
    try:
        for _ in range(2):  # a redelivery changes no aggregate
            store.write(batch)
            rollup.touched(batch)
            rollup.run(store, now=1_000_010.0)
        assert not rollup.dirty and rollup.stats["seconds_aggregated"] == 3 * 2
        t = np.concatenate([e.t for e in batch])
        sec = np.floor(t).astype(int)
        got = query(db, "SELECT t, col, n, min, max, mean, std, std_stated FROM "
                        "vsense_estimates_1s ORDER BY t, col")
        assert len(got) == 3 * 2
        for ts, col, n, lo, hi, mean, sd, stated in got:
            ts = ts if isinstance(ts, int) else int(ts.timestamp())
            x = v[sec == ts, col]
            x = x[np.isfinite(x)]
            assert n == x.size and lo == x.min() and hi == x.max()
            assert mean == pytest.approx(x.mean()) and sd == pytest.approx(x.std(), rel=1e-6)
            assert stated == pytest.approx(std[col])
        rollup.run(store, now=1_000_000.0 + 61.0)  # raw rows older than 60 s go, not the rest
        assert count(db) == 2500 - int(np.sum(t < 1_000_001.0))
        rollup.run(store, now=1_000_100.0)
        assert count(db) == 0 and rollup.stats["raw_deleted"] == 2500
        assert len(query(db, "SELECT * FROM vsense_estimates_1s")) == 6
    finally:
        store.close()


def test_a_message_stored_twice_changes_nothing(db):
    store = open_store(db)
    store.connect()
    try:
        p = encode_estimates(5, np.arange(10) * 1000, np.ones((10, 2)), np.zeros(10, np.uint8))
        items = [decode("vsense/d1/estimates", p, "vsense", 1.0),
                 decode("vsense/d1/health", b'{"samples": 3}', "vsense", 1.0)]
        assert store.write(items) == 10
        items[0].t += 5.0  # a redelivery arrives later: still the same rows
        assert store.write(items) == 0
    finally:
        store.close()
    assert count(db) == 10 and query(db, "SELECT count(*) FROM vsense_health")[0][0] == 1


def test_two_historians_split_a_shared_subscription(db, fleet, historian):
    h1, h2 = historian(db, "a"), historian(db, "b")
    f = fleet(10, rows=20)
    f.publish(20)
    wait_for(lambda: count(db) == len(f.sent), 60, "every row from both historians")
    _exactly_once(db, f)
    m1, m2 = h1.stats["messages"], h2.stats["messages"]
    assert m1 > 0 and m2 > 0, (m1, m2)  # both took a share
    assert h1.stats["rows"] + h2.stats["rows"] == len(f.sent)
    assert h1.stats["duplicates"] + h2.stats["duplicates"] == 0


def test_a_message_the_database_rejects_is_counted_and_does_not_stall(db, fleet, historian):
    h = historian(db, retry_max_s=0.2)
    f = fleet(3, rows=20)
    f.send_raw("dev00/health", b'{"samples": 1, "note": "\\u0000"}')  # jsonb refuses U+0000
    f.publish(5)
    pg = db.startswith("postgres")
    wait_for(lambda: count(db) == len(f.sent) and h.stats["health"] == 3 + (not pg), 60,
             "every row past the rejected message")
    _exactly_once(db, f)
    assert h.stats["bad"] == (1 if pg else 0)


@pytest.mark.parametrize("share", [True, False])
def test_historian_rides_out_a_broker_restart(db, fleet, historian, mosquitto, share):
    h = historian(db, share=share)
    assert h.topics[0].startswith("$share/") == share
    f = fleet(3, rows=50)
    f.publish(5)
    wait_for(lambda: count(db) == len(f.sent), 30, "the rows before the restart")
    mosquitto.stop()
    try:
        wait_for(lambda: not h.connected, 30, "the historian to see the broker go")
    finally:
        mosquitto.start()
    wait_for(lambda: h.stats["subscribed"] == 2, 30, "the new subscription")
    wait_for(lambda: f.client.is_connected(), 30, "the devices' reconnection")
    f.publish(5)
    wait_for(lambda: count(db) == len(f.sent), 30, "the rows after the restart")
    _exactly_once(db, f)


def _block(db, pg):
    """Take the database away; returns the function that brings it back."""
    if db.startswith("sqlite:"):
        c = sqlite3.connect(db[len("sqlite:"):], isolation_level=None)
        c.execute("BEGIN EXCLUSIVE")  # every writer waits, then fails "database is locked"

        def back():
            c.execute("COMMIT")
            c.close()
        return back
    pg.stop()
    return pg.start


def test_database_outage_buffers_bounded_then_writes(db, fleet, historian, request):
    pg = request.getfixturevalue("pg") if db.startswith("postgres") else None
    h = historian(db, receive_max=8, retry_max_s=0.5)
    f = fleet(4, rows=25)
    f.publish(2)
    wait_for(lambda: count(db) == len(f.sent), 30, "the rows before the outage")
    back = _block(db, pg)
    try:
        f.publish(40)  # 160 messages: far more than receive_max
        wait_for(lambda: h.db_state == "error", 30, "the historian to see the outage")
        wait_for(lambda: h.status()["pending"] > 0, 30, "messages waiting")
        assert h.stats["rows"] == 2 * 4 * 25
        assert h.status()["lag_s"] > 0
    finally:
        back()
    wait_for(lambda: count(db) == len(f.sent), 60, "every row after the outage")
    _exactly_once(db, f)
    # memory: the broker holds back past receive_max unacknowledged messages (Mosquitto 2.0.11
    # lets up to 2 x receive_max - 1 through once acknowledgements resume: the queue's size)
    assert h.stats["queue_max"] <= 2 * 8
    assert h.stats["retries"] > 0 and h.db_state == "ok"
