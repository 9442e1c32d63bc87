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
# payloads live in edge.daemon.payloads; re-exported here, where vsense imports them from
from edge.daemon.mqttwire import Wire
from edge.daemon.payloads import (BIN_HEADER, BIN_MAGIC, decode_estimates,  # noqa: F401
                                  encode_estimates)

log = logging.getLogger("vsense.mqtt")

def _describe_connect_error(e: BaseException) -> str:
    """One line naming the kind of connection failure (DNS, refused, TLS, timeout)."""
    import socket
    import ssl

    if isinstance(e, socket.gaierror):
        return f"host name not resolved ({e.strerror or e})"
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"TLS certificate verification failed ({e.verify_message or e}); check [mqtt] ca_file"
    if isinstance(e, ssl.SSLError):
        return f"TLS error ({e.reason or e})"
    if isinstance(e, ConnectionRefusedError):
        return "connection refused (no broker listening on that port?)"
    if isinstance(e, (TimeoutError, socket.timeout)):
        return "connection timed out"
    if isinstance(e, OSError):
        return f"{type(e).__name__}: {e.strerror or e}"
    return f"{type(e).__name__}: {e}"



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
    """paho client + a bounded outgoing queue drained by its own thread.

    * :meth:`add_estimates` (loop thread) appends rows to the current batch; a batch is
      closed at ``batch`` rows, on a sequence gap, or after ``max_batch_delay_s``
      (:meth:`poll`). Closed batches enter a deque of at most ``queue_messages`` entries;
      when it is full the **oldest** entry is dropped and counted (``drops_messages``,
      ``drops_samples``). Nothing here blocks the loop.
    * A closed batch goes to paho at once, on the calling thread, when the client is
      connected and nothing is waiting (the usual case): paho writes it to the
      non-blocking socket right there (:meth:`_locked_write`), so no thread is woken per
      message (QoS 0: one ``send`` of a packet built here, :mod:`edge.daemon.mqttwire`).
      The network thread (paho's ``loop_forever`` on a thread of ours, without paho's
      per-publish wake-up pipe) wakes only for incoming packets (acknowledgements,
      commands), keep-alive, reconnection, and the rest of a write the socket did not take.
    * The sender thread publishes the deque only while connected; while the broker is away
      entries wait in the deque (bounded as above) and go out after reconnection, in
      order.
    * ``status`` and ``meta`` are retained and re-sent on every (re)connection; the last
      will sets ``status`` to ``{"state": "offline"}``.
    * Incoming ``cmd`` messages are validated on the network thread; rejects are answered
      at once, accepted commands are queued for the loop thread (:attr:`commands`).
    """

    def __init__(self, cfg_mqtt: dict, device: str, registry: CommandRegistry,
                 ncol: int, password: str | None = None, client_factory=None):
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        from edge.daemon.encode import (_batch_take, _encode_into,  # numba
                                        payload_capacity, std_rows)

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
        self.out: collections.deque = collections.deque()
        self.maxq = cfg_mqtt["queue_messages"]
        self.cond = threading.Condition()
        self.connected = False
        self.stats = {"published": 0, "published_samples": 0, "drops_messages": 0,
                      "drops_samples": 0, "connects": 0, "disconnects": 0,
                      "cmd_rejected": 0, "cmd_accepted": 0, "cmd_errors": 0,
                      "connect_failures": 0}
        self._retained: dict[str, bytes] = {}
        self._retained_lock = threading.Lock()  # set_retained vs _on_connect (see there)
        # the open batch and its encoded payload (edge.daemon.encode._batch_take)
        self._bt = np.zeros(self.batch, np.int64)
        self._bv = np.zeros((self.batch, ncol))
        self._bf = np.zeros(self.batch, np.uint8)
        self._st = np.zeros(3, np.int64)  # rows in the batch, its first seq, rows encoded
        self._bstart = 0.0  # monotonic time the open batch got its first row
        self._binary = self.fmt == "binary"
        # the estimates packet: PUBLISH header (<= 1 + 4 + 2 + len(topic) bytes) written by
        # the kernel right before the payload at _o0
        self._topic_b = np.frombuffer(self.topics.estimates.encode(), np.uint8).copy()
        self._o0 = 7 + self._topic_b.shape[0]
        self._out = np.zeros(self._o0 + payload_capacity(self.batch, ncol, True, self._binary),
                             np.uint8)
        self._sc = np.zeros(self.batch * ncol)  # scratch: the binary std block
        self._take, self._encode, self._std_rows = _batch_take, _encode_into, std_rows
        self.std = None  # (ncol,) standard deviation of each column, set by the daemon
        # compile (or load from numba's cache) before the first sample, not at the first
        # hand-over: no rows, nothing encoded
        z = np.zeros(0, np.int64)
        _batch_take(0, z, z, np.zeros((0, ncol)), np.zeros(0, np.uint8), self._bt, self._bv,
                    self._bf, self._st, self._out, self._o0, self._topic_b, self._binary,
                    self._S, False, self._sc)
        _encode_into(self._out, self._binary, 0, 0, self._bt, self._bv, self._bf, self._S,
                     False, self._sc)
        self._stop = False
        self._rc_ok, self._rc_no_conn = mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_NO_CONN

        factory = client_factory or mqtt.Client
        c = factory(CallbackAPIVersion.VERSION2, client_id=device,
                    protocol=mqtt.MQTTv311, clean_session=True)
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
        c.suppress_exceptions = True  # a failing callback must not end the network thread
        self._wrap_reconnect(c)
        self.client = c
        self.where = f"{cfg_mqtt['host']}:{cfg_mqtt['port']}"
        self.last_error: str | None = None  # why the last connection attempt failed
        self.connected_event = threading.Event()  # set by the first successful CONNACK
        self.failed_event = threading.Event()  # set by every failed connection attempt
        self._answered = False  # the broker answered (CONNACK) the current connection
        self._thread = threading.Thread(target=self._run, name="vsense-mqtt", daemon=True)
        # paho's network loop (connects, reconnects with backoff, reads, keep-alive); named
        # like paho's own thread
        self._net = threading.Thread(target=self._net_main, name=f"paho-mqtt-client-{device}",
                                     daemon=True)
        # serialised writes, direct QoS 0 packets, paced reads
        self.wire = Wire(c, lambda: self._net, cfg_mqtt.get("read_interval_s", 0.0))

    @property
    def std(self) -> np.ndarray | None:
        """``(ncol,)`` standard deviation of each column (the smoother), sent as ``"s"``."""
        return self._std

    @std.setter
    def std(self, value) -> None:
        self._std = None if value is None else np.asarray(value, dtype=np.float64)
        self._S = self._std_rows(self._std, self.ncol)
        self._has_s = self._std is not None

    @property
    def _bn(self) -> int:
        """Rows in the open batch."""
        return int(self._st[0])

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> None:
        self.client.connect_async(self.cfg["host"], self.cfg["port"], self.cfg["keepalive"])
        self._net.start()
        self._thread.start()

    def _net_main(self) -> None:
        try:
            self.client.loop_forever(retry_first_connection=True)
        except Exception:  # noqa: BLE001 - reported by threads_problem()
            log.exception("MQTT: network loop failed")

    def _wake(self) -> None:
        self.wire.wake()

    def stop(self, final_status: dict | None = None, timeout: float = 5.0) -> None:
        """Flush the batch, send what is queued (up to ``timeout``), publish the final
        status, disconnect."""
        self.flush_batch()
        deadline = time.monotonic() + timeout
        while self.out and self.connected and time.monotonic() < deadline:
            with self.cond:
                self.cond.notify()
            time.sleep(0.01)
        self._stop = True
        with self.cond:
            self.cond.notify_all()
        if self._thread.ident is not None:
            self._thread.join(timeout=2.0)
        if final_status is not None and self.connected:
            info = self.client.publish(self.topics.status, json.dumps(final_status), 1, True)
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
        self.client.loop_stop()  # edge.daemon.mqttwire: ends and joins our network thread
        self.wire.close()

    def wait_connected(self, timeout: float) -> bool:
        """Block until the broker accepted the connection (``--require-broker``)."""
        return self.connected_event.wait(timeout)

    def threads_problem(self) -> str | None:
        """None while paho's network thread and the sender thread run, else the reason
        (the supervisor stops the systemd watchdog pings then: the service is restarted)."""
        if self._stop:
            return None
        net = getattr(self.client, "_thread", None) or self._net  # paho's loop_start() or ours
        if net.ident is not None and not net.is_alive():
            return "MQTT network thread ended"
        if self._thread.ident is not None and not self._thread.is_alive():
            return "MQTT sender thread ended"
        return None

    def unsent_samples(self) -> int:
        """Estimates produced but not yet handed to the broker (queue + open batch)."""
        with self.cond:
            queued = sum(e[3] for e in self.out)
        return queued + self._bn

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
        self._answered = True
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
        self.last_error = None
        log.info("MQTT: connected to %s", self.where)
        self.connected_event.set()
        client.subscribe(self.topics.cmd, qos=1)
        # under the retained lock: a set_retained() racing with this callback either lands
        # before the loop (and is published by it) or sees connected (and publishes itself);
        # without it a state set in between stayed unpublished until the next reconnection
        with self._retained_lock:
            for topic, payload in list(self._retained.items()):
                client.publish(topic, payload, qos=1, retain=True)
            with self.cond:
                self.connected = True
                self.cond.notify()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties):
        with self.cond:
            self.connected = False
        answered, self._answered = self._answered, False
        self.stats["disconnects"] += 1
        if not answered and not self._stop:  # closed before the broker's CONNACK
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
                self.client.publish(topic, payload, qos=1, retain=True)

    def reply(self, obj: dict) -> None:
        self.client.publish(self.topics.cmd_reply, json.dumps(obj), qos=1)

    def send(self, topic: str, payload: bytes, qos: int | None = None, nsamp: int = 0) -> None:
        """Publish a non-retained message: at once on this thread when connected and
        nothing waits, else through the queue (drop-oldest when it is full)."""
        qos = self.qos if qos is None else qos
        with self.cond:
            if not (self.connected and not self.out and not self._stop):
                self._enqueue((topic, payload, qos, nsamp), front=False)
                return
        if qos == 0 and self.wire.publish_qos0(topic, payload):
            rc = self._rc_ok
        else:
            c = self.client
            rc = c.publish(topic, payload, qos=qos, retain=False).rc
            if c.want_write():  # left queued in paho (its network thread was in a callback)
                self._wake()
        with self.cond:
            if self._published(rc, qos):
                self.stats["published"] += 1
                self.stats["published_samples"] += nsamp
            else:  # not taken: first in line for the sender thread
                self._enqueue((topic, payload, qos, nsamp), front=True)

    def _enqueue(self, item: tuple, front: bool) -> None:
        """Add ``item`` to the outgoing deque (caller holds :attr:`cond`); when it is full
        the oldest entry is dropped and counted."""
        if len(self.out) >= self.maxq:
            if front:  # the item is the oldest itself
                k = item[3]
                item = None
            else:
                k = self.out.popleft()[3]
            self.stats["drops_messages"] += 1
            self.stats["drops_samples"] += k
        if item is not None:
            if front:
                self.out.appendleft(item)
            else:
                self.out.append(item)
        self.cond.notify()

    def _published(self, rc, qos: int) -> bool:
        """paho took the message: success, or QoS>0 while the connection is down (paho
        keeps it and sends it after reconnecting; retrying would duplicate it). QoS 0 with
        NO_CONN was dropped by paho, and a full paho queue took nothing: retry."""
        return rc == self._rc_ok or (qos > 0 and rc == self._rc_no_conn)

    def add_estimates(self, seq: np.ndarray, t_ns: np.ndarray, values: np.ndarray,
                      flags: np.ndarray) -> None:
        """Append rows ``seq (n,) int64``, ``t_ns (n,) int64``, ``values (n, ncol)
        float64``, ``flags (n,) uint8`` to the outgoing batch; a full batch, or one the
        next row does not follow on from (a gap in ``seq``), is encoded and sent. One
        compiled call per message (:func:`edge.daemon.encode._batch_take`)."""
        n = seq.shape[0]
        i = 0
        st = self._st
        while i < n:
            if st[0] == 0:
                self._bstart = time.monotonic()
            i, m, a = self._take(i, seq, t_ns, values, flags, self._bt, self._bv, self._bf,
                                 st, self._out, self._o0, self._topic_b, self._binary, self._S,
                                 self._has_s, self._sc)
            if m:
                self._send_estimates(a, self._o0 + m, int(st[2]))

    def _send_estimates(self, a: int, end: int, nsamp: int) -> None:
        """The encoded batch: packet ``_out[a:end]``, payload ``_out[_o0:end]``. QoS 0,
        connected, nothing waiting: the packet goes to the socket straight from the buffer;
        otherwise the payload, copied, takes :meth:`send`'s way."""
        if self.qos == 0 and self.connected and not self.out and not self._stop \
                and self.wire.send_packet(self._out[a:end]):
            with self.cond:
                self.stats["published"] += 1
                self.stats["published_samples"] += nsamp
            return
        self.send(self.topics.estimates, self._out[self._o0:end].tobytes(), nsamp=nsamp)

    def poll(self) -> None:
        if self._st[0] and time.monotonic() - self._bstart >= self.max_delay:
            self.flush_batch()

    def flush_batch(self) -> None:
        n = int(self._st[0])
        if n == 0:
            return
        m = self._encode(self._out, self._binary, self._st[1], n, self._bt, self._bv, self._bf,
                         self._S, self._has_s, self._sc)
        self._st[0] = 0
        self.send(self.topics.estimates, self._out[:m].tobytes(), nsamp=n)

    def queue_depth(self) -> int:
        return len(self.out)

    # -- sender thread ------------------------------------------------------------------
    def _run(self) -> None:
        """Drain the deque (what waited for a connection, or for room in paho's queue);
        idle while it is empty: every change it waits for notifies :attr:`cond`."""
        while True:
            with self.cond:
                while not self._stop and not (self.connected and self.out):
                    self.cond.wait(5.0)
                if self._stop:
                    return
                topic, payload, qos, k = self.out[0]
            info = self.client.publish(topic, payload, qos=qos, retain=False)
            if self._published(info.rc, qos):
                with self.cond:
                    if self.out and self.out[0][1] is payload:
                        self.out.popleft()
                    self.stats["published"] += 1
                    self.stats["published_samples"] += k
            else:  # not connected / paho queue full: keep it and retry shortly
                time.sleep(0.02)
