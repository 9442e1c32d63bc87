"""Estimates published while no historian is subscribed (after a broker restart Mosquitto 2.0
restores plain subscriptions of persistent sessions but not shared ones, and a historian
subscribes again only once it has reconnected): devices on MQTT v5 send again what the broker
acknowledged with "No matching subscribers" shortly after their (re)connection
(``[mqtt] resend_unheard_s``), so nothing is lost; devices on 3.1.1 cannot know, and the
historian reports the hole in their sequence numbers (device, first and last ``seq``).
Against the test session's real Mosquitto 2, a real SQLite file (the holes also in a real
PostgreSQL); the daemon's test runs the daemon itself."""

from __future__ import annotations

import json
import threading
import uuid

import numpy as np
import pytest

from conftest import Subscriber
from edge.daemon.app import run_daemon
from edge.daemon.config import config_from_dict
from edge.daemon.payloads import encode_estimates
from edge.historian.gaps import Gaps
from edge.historian.ingest import Historian
from edge.historian.messages import Clocks, decode
from edge.historian.store import open_store
from edge.monitor.connect import plain_settings
from helpers import chain_bundle
from historian_fleet import Fleet, count, stored, wait_for
from test_historian import db, pg  # noqa: F401 - fixtures: a fresh SQLite / PostgreSQL database

pytestmark = pytest.mark.mqtt


def _historian(broker, base, url, gaps=None):
    h = Historian(plain_settings(broker.host, broker.port, base), open_store(url),
                  group="g", client_id=f"{base}-h", status_interval_s=0.2, gaps=gaps)
    h.start()
    return h


def _restart(broker, fleet):
    broker.stop()
    broker.start()
    wait_for(lambda: fleet.client.is_connected(), 30, "the devices' reconnection")


@pytest.mark.parametrize("resend", [20.0, None], ids=["v5-resend", "3.1.1"])
def test_what_no_historian_took_after_a_broker_restart(mosquitto, tmp_path, resend):
    base, url = "r" + uuid.uuid4().hex[:8], f"sqlite:{tmp_path / 'h.db'}"
    f = Fleet(mosquitto.host, mosquitto.port, base, 3, rows=50, seed=4,
              client_id=f"fleet-{base}", resend_unheard_s=resend)
    h = _historian(mosquitto, base, url)
    try:
        f.publish(2)
        wait_for(lambda: count(url) == len(f.sent), 30, "the rows before the restart")
        h.stop()  # the historian is not back yet when the devices publish
        _restart(mosquitto, f)
        f.publish(3, health=False)  # acknowledged by the broker, taken by no one
        h = _historian(mosquitto, base, url, gaps=Gaps(every_s=0.2, settle_s=0.5))
        f.publish(1, health=False)  # after the historian is back
        if resend is not None:
            # v5: the broker answered 0x10 "No matching subscribers"; sent again until taken
            wait_for(lambda: f.resend_due() or count(url) == len(f.sent), 30,
                     "the re-sent messages")
            n, keys = stored(url)
            assert keys == f.sent and n == len(f.sent), (n, len(f.sent))
            assert f.unheard.stats["no_subscribers"] >= 3 * 3
            assert f.unheard.stats["resent"] >= 3 * 3
            wait_for(lambda: sorted(h.gaps.checked.values()) == [299] * 3 and not h.gaps.open,
                     10, "a look for holes over every row (6 messages of 50 per device)")
            assert h.status()["gaps"] == 0
        else:
            # 3.1.1: lost; the historian names each device's hole: seq 100..249 (3 messages
            # of 50 rows after the 2 stored before the restart; the fleet's numbering)
            want = sorted([f"dev{i:02d}", 100, 249] for i in range(3))
            wait_for(lambda: h.status()["gaps"] == 3, 20, "the historian to report the holes")
            st = h.status()
            assert sorted(st["gap_list"]) == want, st["gap_list"]
            assert st["missing"] == 3 * 150 and "450 missing in 3 gaps" in h.status_line(st)
            assert count(url) == 3 * 150
    finally:
        h.stop()
        f.close()


def _rows(dev: str, seq0: int, n: int, arrival: float, t0_ns: int = 100_000_000_000):
    """Rows ``seq0 ..`` of a device at 1 kHz on an ADC clock at ``t0_ns`` for seq 0."""
    seq = seq0 + np.arange(n)
    payload = encode_estimates(seq0, t0_ns + 1_000_000 * seq, 0.5 * seq[:, None] * [1.0, 2.0],
                               (seq % 2).astype("uint8"))
    return decode(f"vs/{dev}/estimates", payload, "vs", arrival, Clocks())


def test_gaps_settle_are_reported_and_filled(db):  # noqa: F811
    store = open_store(db)
    store.connect()
    g = Gaps(settle_s=10.0)

    def write(batch):
        store.write(batch)
        g.touched(batch)
    try:
        write([_rows("a", 0, 100, 1e9), _rows("a", 150, 50, 1e9), _rows("b", 0, 80, 1e9)])
        g.run(store, now=100.0)
        assert g.stats["gaps"] == 0 and g.open == {("a", 100, 149): 100.0}  # not settled yet
        write([_rows("a", 200, 10, 1e9), _rows("b", 90, 10, 1e9)])
        g.run(store, now=111.0)  # a's hole is 11 s old, b's new
        assert g.stats == {"gaps": 1, "missing": 50, "gap_list": [["a", 100, 149]]}
        write([_rows("a", 100, 20, 1e9)])  # part of the hole comes late
        g.run(store, now=125.0)
        assert g.stats["gap_list"] == [["a", 120, 149], ["b", 80, 89]]
        assert g.stats["missing"] == 30 + 10
        write([_rows("a", 120, 30, 1e9), _rows("b", 80, 10, 1e9)])
        g.run(store, now=130.0)  # looked at again only settle_s after the last look
        assert g.stats["gap_list"] == [["a", 120, 149], ["b", 80, 89]]
        g.run(store, now=136.0)
        assert g.stats["gaps"] == 0 and not g.open
        # the device's new run (its ADC clock starts again too): seq 0..4, then 10..14; the
        # earlier run's rows 5..9 do not hide the new hole
        write([_rows("a", 0, 5, 1e9, t0_ns=0)])
        write([_rows("a", 10, 5, 1e9, t0_ns=0)])
        g.run(store, now=137.0)
        assert g.checked["a"] == 14 and g.open == {("a", 5, 9): 137.0}
    finally:
        store.close()


def test_gaps_first_look_starts_at_the_oldest_stored_row(tmp_path):
    """A historian started while a device has been running for long: its first rows are not
    a hole."""
    store = open_store(f"sqlite:{tmp_path / 'g.db'}")
    store.connect()
    try:
        batch = [_rows("a", 5_000_000, 300, 1e9)]
        store.write(batch)
        g = Gaps(settle_s=0.0)
        g.touched(batch)
        g.run(store, now=0.0)
        assert g.stats["gaps"] == 0 and g.checked["a"] == 5_000_299
    finally:
        store.close()


def test_daemon_sends_again_what_no_subscriber_took(mosquitto, tmp_path):
    """The daemon's own publisher: a subscriber of `estimates` that arrives 1 s after the
    daemon started still gets the first estimates (seq 0), sent again; health counts them."""
    base, dev = "d" + uuid.uuid4().hex[:8], "dev0"
    bundle = tmp_path / "chain.npz"
    chain_bundle(window=3, kinds=("displacement",)).save(bundle)
    cfg = config_from_dict({
        "device": {"id": dev}, "bundle": {"path": str(bundle)},
        "channels": [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0}],
        "mqtt": {"host": mosquitto.host, "port": mosquitto.port, "base_topic": base,
                 "health_interval_s": 0.5, "resend_unheard_s": 20.0},
        "recorder": {"enabled": False},
        "simulate": {"clock": "real", "duration_s": 4.0, "level": "signal"}})
    health = Subscriber(mosquitto, [f"{base}/{dev}/health"], f"h-{base}")
    codes: list = []
    th = threading.Thread(target=lambda: codes.append(
        run_daemon(cfg, simulate=True, install_signals=False)))
    th.start()
    est = None
    try:
        # estimates published with no subscriber: the health counts what the broker said
        assert health.wait(lambda: any(json.loads(p)["mqtt"].get("no_subscribers", 0) > 0
                                       for p, _ in health.get(f"{base}/{dev}/health")), 20)
        est = Subscriber(mosquitto, [f"{base}/{dev}/estimates"], f"e-{base}")
        assert est.wait(lambda: any(json.loads(p)["seq"] == 0
                                    for p, _ in est.get(f"{base}/{dev}/estimates")), 20)
    finally:
        th.join(30)
        health.close()
        if est is not None:
            est.close()
    assert codes == [0]
    last = json.loads(health.get(f"{base}/{dev}/health")[-1][0])["mqtt"]
    assert last["resent"] > 0 and last["no_subscribers"] >= last["resent"] // 2
