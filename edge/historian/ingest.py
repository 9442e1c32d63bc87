"""The historian's loop: MQTT v5 in (shared subscription, persistent session, manual
acknowledgement), the database out, at-least-once with idempotent writes.

* paho-mqtt 2.x with ``protocol=MQTTv5`` and ``manual_ack=True``: a message is acknowledged
  (PUBACK, ``Client.ack``) only after the transaction holding its rows has committed. The
  session is persistent (``clean_start=False``, ``SessionExpiryInterval``), so what was not
  acknowledged when the historian stopped or died is sent again when it comes back under the
  same client id; the store ignores rows it already has, so nothing is lost and nothing is
  doubled.
* Back-pressure and bounded memory: the CONNECT's ``ReceiveMaximum`` (``receive_max``) caps the
  messages the broker has in flight to this client unacknowledged. While the database is away
  nothing is acknowledged, so the broker stops sending after ``receive_max`` messages and
  keeps the rest (in its queue for the session); the historian holds at most ``receive_max``
  messages (the queue is sized twice that for a reconnection's redeliveries).
* ``$share/<group>/<base>/+/estimates`` and ``.../+/health``: the broker hands each message to
  one member of the group, so several historians split a fleet (``share=False``: plain
  subscriptions, for one historian alone; Mosquitto restores those after its restart). ``<base>/+/meta`` is a plain
  subscription (retained messages are not sent on shared subscriptions).
* One writer thread takes what waits (every message the broker has in flight), writes it in one transaction,
  retries with a growing delay while the database fails, and acknowledges after the commit.
  Messages that do not decode are counted (``bad``) and acknowledged with the batch.
* :meth:`Historian.status`: rows written, duplicates skipped, messages, bad ones, queue depth,
  lag (age of the oldest message not yet committed), database state; logged every
  ``status_interval_s`` and published (retained) to ``status_topic``.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from dataclasses import dataclass

import orjson

from edge.daemon.mqtt import _describe_connect_error
from edge.historian.messages import BadMessage, Clocks, decode
from edge.monitor.connect import describe_settings

log = logging.getLogger("vsense.historian")


@dataclass
class Received:
    gen: int  # connection generation: acknowledge only on the connection that delivered it
    mid: int
    qos: int
    topic: str
    payload: bytes
    arrival: float  # time.time()


class Historian:
    """Subscribe, buffer, write, acknowledge. ``settings``: the broker login of
    :func:`edge.monitor.connect.broker_settings`; ``store``: :func:`edge.historian.store.
    open_store`."""

    def __init__(self, settings: dict, store, *, group: str = "vsense-historian",
                 client_id: str | None = None, receive_max: int = 500,
                 session_expiry_s: int = 3600,
                 status_interval_s: float = 5.0, status_topic: str | None = None,
                 retry_max_s: float = 5.0, rollup=None, share: bool = True, gaps=None):
        for name, val in (("--group", group), ("--client-id", client_id or "x")):
            if not val or any(ch in val for ch in "/+#"):
                raise ValueError(f"{name} {val!r}: give a non-empty name without / + #")
        if not 1 <= receive_max <= 65535:
            raise ValueError(f"--receive-max {receive_max}: give 1..65535")
        self.settings, self.store = settings, store
        self.base = settings["base_topic"]
        self.group = group
        self.client_id = client_id or f"vsense-historian-{socket.gethostname()}"
        self.receive_max = receive_max
        self.session_expiry_s = session_expiry_s
        self.status_interval_s, self.retry_max_s = status_interval_s, retry_max_s
        self.status_topic = (f"{self.base}/historian/{self.client_id}/status"
                             if status_topic is None else status_topic)
        share = f"$share/{group}/" if share else ""
        self.topics = [f"{share}{self.base}/+/estimates", f"{share}{self.base}/+/health",
                       f"{self.base}/+/meta"]
        self.queue: queue.Queue[Received] = queue.Queue(maxsize=2 * receive_max)
        self.stats = {"rows": 0, "duplicates": 0, "messages": 0, "bad": 0, "health": 0,
                      "commits": 0, "retries": 0, "queue_max": 0, "connects": 0,
                      "subscribed": 0}
        self.db_state = "not connected"
        self.last_error: str | None = None
        self.connected = False
        self.answered = threading.Event()
        self.refusal: str | None = None
        self._gen = 0
        self.clocks = Clocks()
        self.rollup = rollup  # edge.historian.rollup.Rollup, or None: raw rows only
        self.gaps = gaps  # edge.historian.gaps.Gaps, or None: holes in seq not looked for
        self._pending_since: float | None = None  # arrival of the oldest uncommitted message
        self._held = 0  # messages taken from the queue, not yet committed
        self._stop = threading.Event()
        self._writer: threading.Thread | None = None
        self._last_status = 0.0
        self.client = self._client()

    # ---------------------------------------------------------------- MQTT (paho's thread)
    def _client(self):
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        s = self.settings
        c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=self.client_id,
                        protocol=mqtt.MQTTv5, manual_ack=True)
        # back soon after a broker restart: Mosquitto 2.0 does not restore shared
        # subscriptions from its persistence file, so what devices send before this
        # historian subscribes again reaches no one (docs/historian.md)
        c.reconnect_delay_set(0.1, 1)
        if s["username"]:
            c.username_pw_set(s["username"], s.get("password"))
        if s["tls"]:
            c.tls_set(ca_certs=s["ca_file"] or None, certfile=s["cert_file"] or None,
                      keyfile=s["key_file"] or None)
        c.on_connect, c.on_subscribe = self._on_connect, self._on_subscribe
        c.on_disconnect, c.on_message = self._on_disconnect, self._on_message
        return c

    def _on_connect(self, client, userdata, flags, rc, props):
        from paho.mqtt.subscribeoptions import SubscribeOptions

        if rc.is_failure:
            self._refuse(f"the broker refused the login: {rc}")
            return
        self._gen += 1
        self.connected = True
        self.stats["connects"] += 1
        client.subscribe([(t, SubscribeOptions(qos=1)) for t in self.topics])

    def _on_subscribe(self, client, userdata, mid, rcs, props):
        bad = [(t, r) for t, r in zip(self.topics, rcs) if r.is_failure]
        if bad:
            self._refuse(f"the broker refused the subscription to {bad[0][0]} ({bad[0][1]}; "
                         "not authorised by its access list, or no shared subscriptions?)")
            return
        self.stats["subscribed"] += 1
        self.answered.set()

    def _on_disconnect(self, client, userdata, flags, rc, props):
        was, self.connected = self.connected, False
        if not was and not self.answered.is_set():
            self._refuse(f"the broker closed the connection without answering ({rc})")

    def _refuse(self, why: str) -> None:
        if not self.answered.is_set():
            self.refusal = why
            self.answered.set()

    def _on_message(self, client, userdata, msg):
        r = Received(self._gen, msg.mid, msg.qos, msg.topic, msg.payload, time.time())
        while not self._stop.is_set():  # full only past receive_max (a reconnection's overlap)
            try:
                self.queue.put(r, timeout=0.5)
                break
            except queue.Full:
                continue
        self.stats["queue_max"] = max(self.stats["queue_max"], self.queue.qsize())

    # ---------------------------------------------------------------- start / stop
    def start(self, timeout: float = 10.0) -> None:
        """Connect (ConnectionError names the broker and the reason) and start the writer."""
        from paho.mqtt.packettypes import PacketTypes
        from paho.mqtt.properties import Properties

        s, where = self.settings, describe_settings(self.settings)
        props = Properties(PacketTypes.CONNECT)
        props.SessionExpiryInterval = int(self.session_expiry_s)
        props.ReceiveMaximum = int(self.receive_max)
        if self.store.conn is not None:  # connected by the caller: take the stored clocks
            try:
                self._open()
            except Exception as e:  # noqa: BLE001 - the writer reopens and retries
                self._db_failed(e)
        self._writer = threading.Thread(target=self._write_loop, name="historian-writer",
                                        daemon=True)
        self._writer.start()
        try:
            self.client.connect(s["host"], s["port"], keepalive=s.get("keepalive", 30),
                                clean_start=False, properties=props)
        except (OSError, ValueError) as e:
            self.stop()
            raise ConnectionError(f"broker {where}: {_describe_connect_error(e)}") from None
        self.client.loop_start()
        if not self.answered.wait(timeout) or self.refusal is not None:
            why = self.refusal or f"no answer to the login and subscription within {timeout:g} s"
            self.stop()
            raise ConnectionError(f"broker {where}: {why}")

    def stop(self) -> None:
        """Finish the batch being written, acknowledge it and disconnect; what waits unwritten
        stays unacknowledged, so the broker sends it again to the next session."""
        self._stop.set()
        if self._writer is not None:
            self._writer.join(30)
        try:
            self.client.disconnect()
        finally:
            self.client.loop_stop()
            self.store.close()

    # ---------------------------------------------------------------- writer thread
    def _take(self) -> list[Received]:
        """What waits (at most the queue's size: ``2 * receive_max`` messages)."""
        try:
            items = [self.queue.get(timeout=0.2)]
        except queue.Empty:
            return []
        while True:
            try:
                items.append(self.queue.get_nowait())
            except queue.Empty:
                return items

    def _write_loop(self) -> None:
        delay = 0.0
        while True:
            if self.store.conn is None and not self._stop.is_set():
                delay = self._try(self._open, delay)
                continue
            items = [] if self._stop.is_set() else self._take()
            if items:
                self._pending_since, self._held = items[0].arrival, len(items)
                if not self._write(self._decode(items)):
                    return
                delay = 0.0
                self._pending_since, self._held = None, 0
            if self.rollup is not None and self.rollup.due() and self.store.conn is not None:
                delay = self._try(lambda: self.rollup.run(self.store), delay)
            if self.gaps is not None and self.gaps.due() and self.store.conn is not None:
                delay = self._try(lambda: self.gaps.run(self.store), delay)
            self._maybe_status()
            if self._stop.is_set():
                return

    def _write(self, pairs: list) -> bool:
        """Commit ``pairs`` (message, rows or None when undecodable), retrying while the
        database fails; after 3 failures one message at a time, so that one the database
        rejects (a value it cannot store) is counted bad instead of stalling the rest.
        False when stopped first."""
        delay, fails = 0.0, 0
        while pairs:
            if self._commit([r for r, _ in pairs], [d for _, d in pairs if d is not None]):
                return True
            fails += 1
            if fails >= 3:
                pairs = self._one_by_one(pairs)
                if not pairs:
                    return True
            delay = min(max(0.2, 2 * delay), self.retry_max_s)
            if self._stop.wait(delay):
                return False
        return True

    def _one_by_one(self, pairs: list) -> list:
        """Commit each message alone; one that fails while the database answers is bad
        (counted, acknowledged). Returns what is left when the database is away."""
        for i, (r, d) in enumerate(pairs):
            if self._commit([r], [d] if d is not None else []):
                continue
            try:  # is the database there? (an empty write)
                self._open()
                self.store.write([])
            except Exception as e:  # noqa: BLE001 - away: the rest waits
                self._db_failed(e)
                return pairs[i:]
            self.stats["bad"] += 1
            log.warning("%s: the database rejects this message (%s); counted as bad",
                        r.topic, self.last_error)
            if r.qos and r.gen == self._gen:
                self.client.ack(r.mid, r.qos)
        return []

    def _open(self) -> None:
        if self.store.conn is None:
            self.store.connect()
        self.clocks.merge(self.store.clocks())  # where this and other instances left them
        self.db_state = "ok"

    def _try(self, fn, delay: float) -> float:
        try:
            fn()
            return 0.0
        except Exception as e:  # noqa: BLE001 - any database failure: report, wait, retry
            self._db_failed(e)
        self._maybe_status()
        delay = min(max(0.2, 2 * delay), self.retry_max_s)
        self._stop.wait(delay)
        return delay

    def _db_failed(self, e: BaseException) -> None:
        self.last_error = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e) else ''}"
        if self.db_state != "error":
            log.warning("database %s: %s (retrying)", self.store.url, self.last_error)
        self.db_state = "error"
        self.stats["retries"] += 1
        self.store.close()

    def _decode(self, items: list[Received]) -> list:
        """``[(message, rows or None)]``: an undecodable message is counted bad."""
        out = []
        for r in items:
            try:
                out.append((r, decode(r.topic, r.payload, self.base, r.arrival, self.clocks)))
            except BadMessage as e:
                self.stats["bad"] += 1
                log.warning("bad message: %s", e)
                out.append((r, None))
        return out

    def _commit(self, items: list[Received], batch: list) -> bool:
        """Write ``batch`` in one transaction, then acknowledge ``items``; False (the error
        noted) when the database failed."""
        if self.store.conn is None:
            try:
                self._open()
            except Exception as e:  # noqa: BLE001 - reported, retried by the caller
                self._db_failed(e)
                self._maybe_status()
                return False
        try:
            inserted = self.store.write(batch)
        except Exception as e:  # noqa: BLE001 - reported, retried by the caller
            self._db_failed(e)
            self._maybe_status()
            return False
        self.db_state = "ok"
        nrows = sum(len(b) for b in batch if hasattr(b, "seq"))
        st = self.stats
        st["rows"] += inserted
        st["duplicates"] += nrows - inserted
        st["messages"] += len(items)
        st["health"] += sum(1 for b in batch if getattr(b, "kind", "") == "health")
        st["commits"] += 1
        if self.rollup is not None:
            self.rollup.touched(batch)
        if self.gaps is not None:
            self.gaps.touched(batch)
        gen = self._gen
        for r in items:
            if r.qos and r.gen == gen:  # an older connection's message comes again anyway
                self.client.ack(r.mid, r.qos)
        changed = self.clocks.take_changed()
        try:  # the devices' clock offsets, for a restart and the other instances
            self.clocks.merge(self.store.sync_clocks(changed))
        except Exception as e:  # noqa: BLE001 - the next commit tries again
            self.clocks.changed.update(d for d, _, _ in changed)
            log.debug("clock offsets not stored: %s", e)
        return True

    # ---------------------------------------------------------------- status
    def status(self) -> dict:
        since = self._pending_since
        if since is None:  # none held by the writer (the database away): the oldest queued
            with self.queue.mutex:
                since = self.queue.queue[0].arrival if self.queue.queue else None
        return {"t": round(time.time(), 3), "client_id": self.client_id, "group": self.group,
                "db": self.db_state, "db_url": self.store.url, "error": self.last_error,
                "mqtt": self.connected, "queue": self.queue.qsize(),
                "pending": self.queue.qsize() + self._held,
                "queue_limit": self.queue.maxsize,
                **(self.rollup.stats if self.rollup is not None else {}),
                **(self.gaps.stats if self.gaps is not None else {}),
                "lag_s": 0.0 if since is None else round(time.time() - since, 3),
                **self.stats}

    def status_line(self, st: dict | None = None) -> str:
        st = st or self.status()
        return (f"historian {st['client_id']}: db {st['db']}, {st['rows']} rows "
                f"({st['duplicates']} duplicates), {st['messages']} messages, {st['bad']} bad, "
                f"{st['pending']} pending (queue {st['queue']}/{st['queue_limit']}), "
                f"lag {st['lag_s']:.1f} s, "
                + (f"{st['missing']} missing in {st['gaps']} gaps, " if "gaps" in st else "")
                + f"mqtt {'connected' if st['mqtt'] else 'disconnected'}")

    def _maybe_status(self) -> None:
        now = time.monotonic()
        if now - self._last_status < self.status_interval_s:
            return
        self._last_status = now
        st = self.status()
        log.info("%s", self.status_line(st))
        if self.status_topic and self.connected:
            self.client.publish(self.status_topic, orjson.dumps(st), qos=0, retain=True)
