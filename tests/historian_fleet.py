"""Simulated devices for the historian's tests and benchmark: each publishes ``estimates``
payloads made by the daemon's own encoder (:func:`edge.daemon.payloads.encode_estimates`),
JSON on even devices and binary on odd ones, with stated standard deviations on every third,
plus ``health`` and retained ``meta``; and how to count what a database holds.
"""

from __future__ import annotations

import sqlite3
import time

import numpy as np
import orjson

from edge.daemon.payloads import encode_estimates

NCOL = 3


class Fleet:
    """``ndev`` devices ``dev00 ..`` under ``base``, ``rows`` estimates per message."""

    def __init__(self, host: str, port: int, base: str, ndev: int, rows: int = 50,
                 seed: int = 0, client_id: str = "fleet", track: bool = True,
                 resend_unheard_s: float | None = None):
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.base, self.ndev, self.rows = base, ndev, rows
        self.rng = np.random.default_rng(seed)
        self.devices = [f"dev{i:02d}" for i in range(ndev)]
        self.next_seq = dict.fromkeys(self.devices, 0)
        self.track = track  # False: count (next_seq) only, for runs of millions of rows
        self.sent: set[tuple[str, int]] = set()
        self.values: dict[tuple[str, int], list[float]] = {}
        # resend_unheard_s: MQTT v5 with the daemon's re-sending of what no subscriber took
        # after a (re)connection (edge.daemon.mqttv5.Unheard); None: MQTT 3.1.1, none
        self.unheard = None
        if resend_unheard_s is None:
            c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id)
        else:
            from edge.daemon.mqttv5 import Unheard

            self.unheard = u = Unheard(resend_unheard_s)
            c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                            protocol=mqtt.MQTTv5)
            c.on_connect = lambda *a: u.connected()
            c.on_publish = lambda cl, ud, mid, rc, props: u.acked(mid, rc)
        c.max_inflight_messages_set(100)
        c.max_queued_messages_set(0)
        c.connect(host, port, 30)
        c.loop_start()
        self.client = c

    def payload(self, i: int, dev: str) -> bytes:
        n, s0 = self.rows, self.next_seq[dev]
        seq = s0 + np.arange(n)
        v = self.rng.standard_normal((n, NCOL))
        v[self.rng.random((n, NCOL)) < 0.02] = np.nan  # a warm-up or held value now and then
        flags = self.rng.integers(0, 4, n).astype(np.uint8)
        std = np.full(NCOL, 0.1) if i % 3 == 0 else None
        self.next_seq[dev] = s0 + n
        if not self.track:
            return encode_estimates(s0, 1_000_000 * seq, v, flags,
                                    fmt="json" if i % 2 == 0 else "binary", std=std)
        for k in (0, n - 1):
            self.values[(dev, int(seq[k]))] = v[k].tolist()
        self.sent.update((dev, int(q)) for q in seq)
        return encode_estimates(s0, 1_000_000 * seq, v, flags,
                                fmt="json" if i % 2 == 0 else "binary", std=std)

    def publish(self, messages_per_device: int, health: bool = True) -> int:
        """Publish (QoS 1) and wait until the broker has acknowledged every message."""
        infos = []
        for dev in self.devices:
            infos.append(self.client.publish(f"{self.base}/{dev}/meta", orjson.dumps(
                {"columns": [f"c{j}" for j in range(NCOL)]}), qos=1, retain=True))
        for _ in range(messages_per_device):
            for i, dev in enumerate(self.devices):
                infos.append(self.send(f"{self.base}/{dev}/estimates", self.payload(i, dev)))
        if health:
            for dev in self.devices:
                infos.append(self.client.publish(f"{self.base}/{dev}/health", orjson.dumps(
                    {"samples": self.next_seq[dev], "latency_us": {"p99": 80}}), qos=1))
        for m in infos:
            m.wait_for_publish(30)
        return len(infos)

    def send(self, topic: str, payload: bytes, delay: float = 0.0):
        """Publish with QoS 1 (noted for re-sending when v5 says no subscriber took it)."""
        info = self.client.publish(topic, payload, qos=1)
        if self.unheard is not None:
            self.unheard.record(info.mid, (topic, payload), delay)
        return info

    def resend_due(self) -> None:
        """Publish again what no subscriber took after a (re)connection, when due."""
        if self.unheard is not None and self.unheard.due:
            for (topic, payload), delay in self.unheard.take_due():
                self.send(topic, payload, delay)

    def send_raw(self, topic: str, payload: bytes) -> None:
        self.client.publish(f"{self.base}/{topic}", payload, qos=1).wait_for_publish(10)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def query(url: str, sql: str) -> list[tuple]:
    """Rows of ``sql`` on the historian's database ``url`` (sqlite:PATH or postgresql://)."""
    if url.startswith("sqlite:"):
        with sqlite3.connect(url[len("sqlite:"):], timeout=10) as c:
            return c.execute(sql).fetchall()
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        return c.execute(sql).fetchall()


def stored(url: str) -> tuple[int, set[tuple[str, int]]]:
    """(rows in vsense_estimates, their distinct (device, seq))."""
    rows = query(url, "SELECT device, seq FROM vsense_estimates")
    return len(rows), {(d, int(s)) for d, s in rows}


def count(url: str) -> int:
    try:
        return int(query(url, "SELECT count(*) FROM vsense_estimates")[0][0])
    except Exception:  # noqa: BLE001 - the table does not exist yet, the database is away
        return -1


def wait_for(pred, timeout: float, what: str, poll: float = 0.05):
    """Poll ``pred()`` until it is true (returns its value); AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll)
