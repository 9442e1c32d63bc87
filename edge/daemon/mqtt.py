"""MQTT side of the daemon (paho-mqtt 2.x): topics, payloads, commands, publisher.

Topic tree under ``<base>/<device id>/`` (base ``vsense`` by default):

=============  =======  ============================================================
topic          retain   payload
=============  =======  ============================================================
status         yes      JSON ``{"state": starting|running|degraded|paused|sensor_fault|
                        stopped|offline, "t": unix s, "reason"?, ...}``; the last will
                        sets ``offline``
meta           yes      JSON: bundle id/hash, channels, forces, outputs, units, rate,
                        estimator delay (samples and seconds), payload format
estimates      no       batch of estimates (JSON, or the binary layout below)
health         no       JSON loop statistics (latency, overruns, lost samples, queues...)
raw            no       optional: measured channels, every k-th sample (edge.daemon.raw)
params         yes      reserved for the inverse maps (identified parameters)
fatigue/<out>  yes      JSON fatigue summary of a ``[[fatigue]]`` hotspot (edge.fatigue)
cmd            -        JSON command to the device, ``{"cmd": name, "id": any, "args": {}}``
cmd/reply      no       ``{"id", "cmd", "ok": bool, "reason"?: str, ...}``
=============  =======  ============================================================

Payloads of ``estimates`` (JSON and binary layouts): :mod:`edge.daemon.payloads`.
"""

from __future__ import annotations

import collections
import json
import logging
import queue
import threading
import time

import numpy as np

# commands live in edge.daemon.commands; re-exported here, where vsense imports them from
from edge.daemon.commands import (MAX_COMMAND_BYTES, MAX_COMMAND_DEPTH,  # noqa: F401
                                  Command, CommandError, CommandRegistry)
from edge.daemon.mqttv5 import (MID_MASK, AckWatch, Unheard,  # noqa: F401
                                _describe_connect_error, connect_kwargs, make_client,
                                refused_for_protocol)
# payloads live in edge.daemon.payloads; re-exported here, where vsense imports them from
from edge.daemon.payloads import (BIN_HEADER, BIN_MAGIC, Batch,  # noqa: F401
                                  decode_estimates, encode_estimates)

log = logging.getLogger("vsense.mqtt")


class Topics:
    def __init__(self, base: str, device: str):
        root = f"{base}/{device}"
        self.root = root
        self.status = f"{root}/status"
        self.meta = f"{root}/meta"
        self.estimates = f"{root}/estimates"
        self.health = f"{root}/health"
        self.raw = f"{root}/raw"
        self.params = f"{root}/params"
        self.cmd = f"{root}/cmd"
        self.cmd_reply = f"{root}/cmd/reply"


class Publisher:
    """paho client (its own network thread, ``loop_start``) + a bounded outgoing queue.

    * :meth:`add_estimates` (I/O thread) appends rows to the open batch (:class:`Batch`); a
      batch is closed at ``batch`` rows, on a sequence gap, or after ``max_batch_delay_s``
      (:meth:`poll`), encoded (:func:`edge.daemon.payloads.encode_estimates`) and sent.
    * :meth:`send` hands a message to paho's ``publish`` when connected and nothing waits;
      otherwise (broker away, paho's own queue full) it waits in a deque of at most
      ``queue_messages`` entries: when that is full the **oldest** entry is dropped and
      counted (``drops_messages``, ``drops_samples``). What waits goes out in order once
      the broker is back (on the connection, then by :meth:`poll`). Nothing here blocks
      the caller.
    * ``status`` and ``meta`` are retained and re-sent on every (re)connection; the last
      will sets ``status`` to ``{"state": "offline"}``.
    * Incoming ``cmd`` messages are validated on paho's network thread; rejects are answered
      at once, accepted commands are queued for the acquisition thread (:attr:`commands`).
    * MQTT v5 where the broker offers it (``[mqtt] protocol``), 3.1.1 otherwise; the reason
      codes of PUBACK/SUBACK name a topic the broker denies (:class:`edge.daemon.mqttv5.
      AckWatch`, :attr:`acks`).
    """

    def __init__(self, cfg_mqtt: dict, device: str, registry: CommandRegistry,
                 ncol: int, password: str | None = None, client_factory=None):
        import paho.mqtt.client as mqtt

        self.cfg = cfg_mqtt
        self.topics = Topics(cfg_mqtt["base_topic"], device)
        self.registry = registry
        self.qos = cfg_mqtt["qos"]
        self.fmt = cfg_mqtt["format"]
        self.batch = cfg_mqtt["batch"]
        self.max_delay = cfg_mqtt["max_batch_delay_s"]
        self.ncol = ncol
        self.commands: queue.Queue = queue.Queue(maxsize=100)
        self.cmd_flag = False  # set when a command was queued (polled by the estimating thread)
        self.out: collections.deque = collections.deque()  # (topic, payload, qos, samples)
        self.maxq = cfg_mqtt["queue_messages"]
        self.lock = threading.Lock()  # the deque and the counters (I/O and paho threads)
        self.connected = False
        self.stats = {"published": 0, "published_samples": 0, "drops_messages": 0,
                      "drops_samples": 0, "connects": 0, "disconnects": 0,
                      "cmd_rejected": 0, "cmd_accepted": 0, "cmd_errors": 0,
                      "connect_failures": 0}
        self._retained: dict[str, bytes] = {}
        self._retained_lock = threading.Lock()  # set_retained vs _on_connect (see there)
        self._batch = Batch(self.batch, ncol)
        self.std = None  # (ncol,) standard deviation of each column, set by the daemon
        self._stop = False
        self._rc_ok, self._rc_no_conn = mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN

        self._factory = client_factory or mqtt.Client
        self._device, self._password = device, password
        proto = cfg_mqtt.get("protocol", "auto")
        self.unheard = Unheard(cfg_mqtt.get("resend_unheard_s", 10.0))
        self.acks = AckWatch("3.1.1" if proto == "3.1.1" else "5", self.unheard)
        self.client = self._new_client(self.acks.protocol)
        self.where = f"{cfg_mqtt['host']}:{cfg_mqtt['port']}"
        self.last_error: str | None = None  # why the last connection attempt failed
        self.connected_event = threading.Event()  # set by the first successful CONNACK
        self.failed_event = threading.Event()  # set by every failed connection attempt
        self._net: threading.Thread | None = None  # paho's network thread (loop_start)
        # stop() against _fall_back's new client: that client is started whole before stop
        # reads self.client, or not made once stop has begun (else stop joined its thread
        # before it started: "cannot join thread before it is started")
        self._life = threading.Lock()
        self._answered = False  # the broker answered (CONNACK) the current connection

    def _new_client(self, protocol: str):
        """A configured paho client speaking ``protocol`` (``"5"`` or ``"3.1.1"``)."""
        cfg_mqtt, password = self.cfg, self._password
        c = make_client(self._factory, self._device, protocol)
        if cfg_mqtt["username"]:
            c.username_pw_set(cfg_mqtt["username"], password)
        if cfg_mqtt["tls"]:
            c.tls_set(ca_certs=cfg_mqtt["ca_file"] or None,
                      certfile=cfg_mqtt["cert_file"] or None,
                      keyfile=cfg_mqtt["key_file"] or None)
        c.will_set(self.topics.status, json.dumps({"state": "offline"}), qos=1, retain=True)
        c.reconnect_delay_set(cfg_mqtt["reconnect_min_s"], cfg_mqtt["reconnect_max_s"])
        c.max_inflight_messages_set(50)
        c.max_queued_messages_set(200)  # paho's own queue stays small; ours is the buffer
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_message = self._on_message
        c.on_connect_fail = self._on_connect_fail
        c.on_publish = self.acks.on_publish
        c.on_subscribe = self.acks.on_subscribe
        c.suppress_exceptions = True  # a failing callback must not end the network thread
        self._wrap_reconnect(c)
        return c

    @property
    def std(self) -> np.ndarray | None:
        """``(ncol,)`` standard deviation of each column (the smoother), sent as ``"s"``."""
        return self._std

    @std.setter
    def std(self, value) -> None:
        self._std = None if value is None else np.asarray(value, dtype=np.float64)

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        """Connect in the background: paho's network thread (``loop_start``) connects,
        reconnects with backoff, reads and keeps the connection alive."""
        self.client.connect_async(self.cfg["host"], self.cfg["port"], self.cfg["keepalive"],
                                  **connect_kwargs(self.acks.protocol))
        before = set(threading.enumerate())
        self.client.loop_start()
        new = [t for t in threading.enumerate() if t not in before]
        self._net = new[0] if len(new) == 1 else None

    def stop(self, final_status: dict | None = None, timeout: float = 5.0) -> None:
        """Flush the batch, send what is queued (up to ``timeout``), publish the final
        status, disconnect."""
        self.flush_batch()
        deadline = time.monotonic() + timeout
        self.poll()
        while self.out and self.connected and time.monotonic() < deadline:
            time.sleep(0.01)  # paho's queue had no room: its network thread empties it
            self.poll()
        with self._life:  # no fallback client after this (_fall_back)
            self._stop = True
        if final_status is not None and self.connected:
            info = self.client.publish(self.topics.status, json.dumps(final_status), 1, True)
            self.acks.record(info.mid, self.topics.status)
            try:
                info.wait_for_publish(timeout=max(0.1, deadline - time.monotonic()))
            except (RuntimeError, ValueError):
                pass
        unsent = self.unsent_samples()
        if unsent or self.stats["drops_samples"]:
            log.error("MQTT: %d estimates were not sent to %s%s, %d dropped while the queue "
                      "was full", unsent, self.where,
                      "" if self.stats["connects"] else " (never connected: "
                      f"{self.last_error or 'no answer'})", self.stats["drops_samples"])
        self.client.disconnect()
        self.client.loop_stop()

    def wait_connected(self, timeout: float) -> bool:
        """Block until the broker accepted the connection (``--require-broker``)."""
        return self.connected_event.wait(timeout)

    def threads_problem(self) -> str | None:
        """None while paho's network thread runs, else the reason (the supervisor stops
        the systemd watchdog pings then: the service is restarted)."""
        if self._stop or self._net is None:
            return None
        if not self._net.is_alive():
            return "MQTT network thread ended"
        return None

    def unsent_samples(self) -> int:
        """Estimates produced but not yet handed to the broker (queue + open batch)."""
        with self.lock:
            queued = sum(e[3] for e in self.out)
        return queued + self._batch.n

    # -- connection diagnostics ----------------------------------------------------------
    def _wrap_reconnect(self, c) -> None:
        """Keep the exception of a failed (re)connection attempt: paho's network thread
        swallows it and only calls ``on_connect_fail``."""
        orig = c.reconnect

        def reconnect():
            try:
                return orig()
            except Exception as e:  # re-raised: paho retries with backoff
                self.last_error = _describe_connect_error(e)
                if self.cfg["tls"] and isinstance(e, ConnectionResetError):  # in the handshake
                    self.last_error += (f": is port {self.cfg['port']} a TLS listener? Else "
                                        f"set [mqtt] tls = false")
                raise

        c.reconnect = reconnect

    def _on_connect_fail(self, client, userdata):
        if client is not self.client:
            return
        self.stats["connect_failures"] += 1
        self.failed_event.set()
        n = self.stats["connect_failures"]
        # loud at first, then every 10th retry (the backoff already spaces them out)
        if n <= 3 or n % 10 == 0:
            log.error("MQTT: cannot connect to %s: %s (attempt %d; retrying with backoff "
                      "%g..%g s)", self.where, self.last_error or "connection failed", n,
                      self.cfg["reconnect_min_s"], self.cfg["reconnect_max_s"])

    # -- paho callbacks (network thread) ------------------------------------------------
    def _on_connect(self, client, userdata, flags, reason_code, properties):
        if client is not self.client:  # a client given up for 3.1.1 (_fall_back)
            return
        self._answered = True
        if reason_code.is_failure and refused_for_protocol(reason_code) \
                and self.acks.protocol == "5" and self.cfg.get("protocol", "auto") == "auto":
            self._fall_back(client)
            return
        if reason_code.is_failure:
            self.stats["connect_failures"] += 1
            self.last_error = f"broker refused the connection: {reason_code}"
            hint = ""
            if "authori" in str(reason_code).lower() or "password" in str(reason_code).lower():
                hint = " (check [mqtt] username / password_env and the broker's ACL)"
            log.error("MQTT: %s refused the connection: %s%s", self.where, reason_code, hint)
            self.failed_event.set()
            return
        self.stats["connects"] += 1
        self.unheard.connected()
        self.last_error = None
        log.info("MQTT: connected to %s (MQTT %s)", self.where, self.acks.protocol)
        self.connected_event.set()
        self.acks.sub_topic[client.subscribe(self.topics.cmd, qos=1)[1]] = self.topics.cmd
        # under the retained lock: a set_retained() racing with this callback either lands
        # before the loop (and is published by it) or sees connected (and publishes itself);
        # without it a state set in between stayed unpublished until the next reconnection
        with self._retained_lock:
            for topic, payload in list(self._retained.items()):
                self.acks.record(client.publish(topic, payload, qos=1, retain=True).mid, topic)
            self.connected = True
        self._drain()  # what waited for the connection, in order

    def _fall_back(self, old) -> None:
        """The broker does not speak v5 (``[mqtt] protocol = "auto"``): a new 3.1.1 client
        replaces ``old``, whose network thread ends after this callback."""
        log.warning("MQTT: %s does not speak MQTT v5; connecting with 3.1.1 (a topic the "
                    "broker denies cannot be seen then)", self.where)
        old.loop_stop()  # from its own thread: no join, the thread ends after this callback
        with self._life:
            if self._stop:  # stop() has begun: it stops the client it reads, this one
                return
            self.acks.protocol = "3.1.1"
            self.client = self._new_client("3.1.1")
            self.start()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties):
        if client is not self.client:
            return
        self.connected = False
        answered, self._answered = self._answered, False
        self.stats["disconnects"] += 1
        if not answered and not self._stop:  # closed before the broker's CONNACK
            if self.acks.protocol == "5" and self.cfg.get("protocol", "auto") == "auto":
                # a broker that cannot parse a v5 CONNECT may just close (amqtt: "Will flag
                # set, but will topic/message not present"): try 3.1.1 before giving reasons
                self._fall_back(client)
                return
            self._closed_before_connack(reason_code)
            return
        if not self._stop:
            log.warning("MQTT: disconnected from %s (%s); %d estimates unsent, reconnecting "
                        "with backoff", self.where, reason_code, self.unsent_samples())

    def _closed_before_connack(self, reason_code) -> None:
        """The broker closed the connection before it answered the CONNECT: without TLS the
        usual cause is a TLS listener (it reads the plain CONNECT as a broken handshake)."""
        self.stats["connect_failures"] += 1
        if self.cfg["tls"]:
            self.last_error = f"connection closed before the broker answered ({reason_code})"
        else:
            self.last_error = (f"connection closed before the broker answered ({reason_code}): "
                               f"is port {self.cfg['port']} a TLS listener? Then set [mqtt] "
                               f"tls = true and ca_file")
        n = self.stats["connect_failures"]
        if n <= 3 or n % 10 == 0:
            log.error("MQTT: cannot connect to %s: %s (attempt %d)", self.where,
                      self.last_error, n)
        self.failed_event.set()

    def _on_message(self, client, userdata, msg):
        # runs on paho's network thread: nothing may escape from here, or the thread ends
        # and with it all publishing (issue 12, item 1)
        try:
            self._handle_command(msg)
        except Exception:  # noqa: BLE001 - logged and counted, the network thread goes on
            self.stats["cmd_errors"] += 1
            log.exception("MQTT: command handling failed on %s", msg.topic)

    def _handle_command(self, msg) -> None:
        if msg.topic != self.topics.cmd:
            return
        try:
            cmd, args, cid = self.registry.parse(msg.payload)
        except CommandError as e:
            self.stats["cmd_rejected"] += 1
            self.reply({"id": e.cid, "ok": False, "reason": str(e)})
            return
        try:
            self.commands.put_nowait((cmd, args, cid))
            # a plain attribute the estimating thread polls without taking the queue's lock
            self.cmd_flag = True
            self.stats["cmd_accepted"] += 1
        except queue.Full:
            self.reply({"id": cid, "cmd": cmd.name, "ok": False,
                        "reason": "busy: command queue full"})

    # -- publishing API -----------------------------------------------------------------
    def set_retained(self, topic: str, obj: dict) -> None:
        """Publish (now if connected, and again on every reconnection) a retained JSON."""
        payload = json.dumps(obj).encode()
        with self._retained_lock:
            self._retained[topic] = payload
            if self.connected:
                self.acks.record(self.client.publish(topic, payload, qos=1, retain=True).mid,
                                 topic)

    def reply(self, obj: dict) -> None:
        self.acks.record(self.client.publish(self.topics.cmd_reply, json.dumps(obj), qos=1).mid,
                         self.topics.cmd_reply)

    def send(self, topic: str, payload: bytes, qos: int | None = None, nsamp: int = 0,
             retry_s: float = 0.0) -> None:
        """Publish a non-retained message: now when connected and nothing waits, else
        through the queue (drop-oldest when it is full). Never blocks. ``retry_s``: the
        delay before sending it again if no subscriber takes it (:class:`Unheard`)."""
        qos = self.qos if qos is None else qos
        item = (topic, payload, qos, nsamp, retry_s) if retry_s else (topic, payload, qos, nsamp)
        with self.lock:
            if self.connected and not self.out and not self._stop \
                    and self._publish(item):
                return
            self._enqueue(item)

    def _publish(self, item: tuple) -> bool:
        """Hand ``item`` to paho (caller holds :attr:`lock`); False when paho did not take
        it. Taken: success, or QoS > 0 while the connection is down (paho keeps it and
        sends it after reconnecting; retrying would duplicate it). QoS 0 with NO_CONN was
        dropped by paho, and a full paho queue took nothing: retry later."""
        topic, payload, qos, nsamp = item[:4]
        info = self.client.publish(topic, payload, qos=qos, retain=False)
        rc = info.rc
        self.acks.mid_topic[info.mid & MID_MASK] = topic  # AckWatch.record, inlined
        if qos == 1 and self.unheard.window_s > 0:
            self.unheard.record(info.mid, item[:4], item[4] if len(item) > 4 else 0.0)
        if rc == self._rc_ok or (qos > 0 and rc == self._rc_no_conn):
            self.stats["published"] += 1
            self.stats["published_samples"] += nsamp
            return True
        return False

    def _enqueue(self, item: tuple) -> None:
        """Append ``item`` to the outgoing deque (caller holds :attr:`lock`); when it is
        full the oldest entry is dropped and counted."""
        if len(self.out) >= self.maxq:
            k = self.out.popleft()[3]
            self.stats["drops_messages"] += 1
            self.stats["drops_samples"] += k
        self.out.append(item)

    def add_estimates(self, seq: np.ndarray, t_ns: np.ndarray, values: np.ndarray,
                      flags: np.ndarray) -> None:
        """Append rows ``seq (n,) int64``, ``t_ns (n,) int64``, ``values (n, ncol)
        float64``, ``flags (n,) uint8`` to the outgoing batch; a full batch, or one the
        next row does not follow on from (a gap in ``seq``), is encoded and sent."""
        self._batch.add(seq, t_ns, values, flags, self._send_batch)

    def _send_batch(self, seq0: int, t, V, f) -> None:
        self.send(self.topics.estimates,
                  encode_estimates(seq0, t, V, f, self.fmt, self._std), nsamp=t.shape[0])

    def poll(self) -> None:
        """Close a batch older than ``max_batch_delay_s``; send what waits in the queue
        while connected (I/O thread)."""
        if self._batch.n and time.monotonic() - self._batch.start >= self.max_delay:
            self.flush_batch()
        if self.unheard.due:  # no subscriber took these after a (re)connection: again
            for (topic, payload, qos, _), delay in self.unheard.take_due():
                self.send(topic, payload, qos, 0, retry_s=delay)  # its samples counted once
        if self.out and self.connected:
            self._drain()

    def _drain(self) -> None:
        """Hand the waiting messages to paho, oldest first, while it takes them."""
        with self.lock:
            while self.out and self.connected and self._publish(self.out[0]):
                self.out.popleft()

    def flush_batch(self) -> None:
        self._batch.flush(self._send_batch)

    def queue_depth(self) -> int:
        return len(self.out)
