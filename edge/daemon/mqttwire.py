"""The daemon's writes to the MQTT socket, one at a time, from the thread that has the data.

paho-mqtt 2.x, when no ``loop_start()`` thread exists, writes a packet from ``publish()``
on the calling thread; :class:`Wire` makes that safe and cheap for the daemon:

* every write (``loop_write`` of any thread, and :meth:`Wire.publish_qos0`) holds one lock,
  so packets never interleave on the socket;
* the network thread (paho's ``loop_forever`` on a thread of the publisher) selects on the
  read end of a socket pair of ours, written only to wake it (shutdown, the rest of a write
  the socket did not take): paho's own pair, made by ``loop_start()``, receives a byte on
  every publish, i.e. a thread wake-up per message; ``client.loop_stop()`` ends and joins
  that thread as it would paho's;
* :meth:`Wire.publish_qos0` sends a QoS 0 PUBLISH packet (MQTT 3.1.1, section 3.3) with one
  ``send`` when nothing else waits to be written: no paho message object, no packet queue.
  The rest of a partial write is kept here and written first by the next ``loop_write``
  (paho's ``want_write`` says so to the network thread, which then waits for room); a
  reconnection discards it, as paho discards its own unsent packets;
* after each pass of its loop the network thread waits ``read_interval_s`` (``[mqtt]
  read_interval_s``) before it reads again, unless woken: with QoS 1 a PUBACK comes back
  for every message, and one wake-up per interval reads all that came meanwhile instead of
  one wake-up each (not while paho has packets to write, e.g. the subscription queued by
  ``on_connect``, nor while half of its in-flight window is taken: the pace never limits
  the message rate).
"""

from __future__ import annotations

import select
import socket
import threading


def _varint(n: int) -> bytes:
    """MQTT "remaining length": 7 bits per byte, low first, bit 7 = more (3.1.1, 2.2.3)."""
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


class Wire:
    """Serialised writes and a wake-up pair for ``client`` (a ``paho.mqtt.client.Client``
    whose network loop runs on ``net_thread()``, never ``loop_start()``)."""

    def __init__(self, client, net_thread, read_interval_s: float = 0.0):
        self.client = c = client
        self._net_thread = net_thread
        self.read_interval_s = read_interval_s
        self.lock = threading.Lock()
        self._pending: memoryview | None = None  # rest of a QoS 0 packet the socket refused
        self._topics: dict[str, bytes] = {}  # topic -> its 2-byte length + UTF-8 bytes
        self.direct = 0  # packets sent by publish_qos0
        self.partial = 0  # ... of which the socket took only part at once
        orig_write, orig_want, orig_reconnect = c.loop_write, c.want_write, c.reconnect
        orig_loop = c._loop

        def paced_loop(timeout=1.0):
            rc = orig_loop(timeout)
            if self.read_interval_s > 0 and rc == 0 and not c._thread_terminate and \
                    not want_write() and len(c._out_messages) < c.max_inflight_messages // 2:
                try:  # returns early when woken (stop, the rest of a write)
                    select.select([self._wake_r], [], [], self.read_interval_s)
                except (OSError, ValueError):  # closed at shutdown
                    pass
            return rc

        def loop_write():
            with self.lock:
                if self._pending is not None and not self._send_pending():
                    rc = 0  # MQTT_ERR_SUCCESS: the socket is full, the rest waits
                else:
                    rc = orig_write()
            if self.want_write() and threading.current_thread() is not self._net_thread():
                self.wake()  # the network thread waits for room in the socket
            return rc

        def want_write():
            return self._pending is not None or orig_want()

        def reconnect():
            with self.lock:
                self._pending = None  # never the tail of a packet on a new connection
            return orig_reconnect()

        def loop_stop():
            """paho's ``loop_stop`` for our network thread: end its loop and join it."""
            c._thread_terminate = True
            self.wake()
            t = self._net_thread()
            if t is not None and t.ident is not None and t is not threading.current_thread():
                t.join(5.0)
            return 0

        self.want_write = want_write
        c.loop_write, c.want_write, c.reconnect = loop_write, want_write, reconnect
        c.loop_stop = loop_stop
        c._loop = paced_loop  # what loop_forever calls for each pass
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        c._sockpairR = self._wake_r  # paho selects on it and empties it when readable

    def wake(self) -> None:
        """Wake the network thread out of its ``select``."""
        try:
            self._wake_w.send(b"\0")
        except OSError:  # BlockingIOError: a wake-up byte is pending already
            pass

    def close(self) -> None:
        self.client._sockpairR = None
        for s in (self._wake_r, self._wake_w):
            s.close()

    def publish_qos0(self, topic: str, payload: bytes) -> bool:
        """Send a QoS 0, non-retained PUBLISH now; False when it must go through paho
        (not connected, paho has packets waiting, a write of ours is incomplete)."""
        tb = self._topics.get(topic)
        if tb is None:
            t = topic.encode()
            tb = self._topics[topic] = len(t).to_bytes(2, "big") + t
        # fixed header: PUBLISH (3 << 4), QoS 0, no retain; remaining length; topic; payload
        pkt = b"".join((b"\x30", _varint(len(tb) + len(payload)), tb, payload))
        return self.send_packet(pkt)

    def send_packet(self, pkt) -> bool:
        """:meth:`publish_qos0` for a whole packet built by the caller (``pkt``: any
        buffer, e.g. a slice of the publisher's encoding buffer; copied only when the
        socket does not take all of it)."""
        c = self.client
        with self.lock:
            if self._pending is not None or c._sock is None or c._out_packet:
                return False
            try:
                k = c._sock_send(pkt)
            except BlockingIOError:
                k = 0
            except OSError:
                return False
            self.direct += 1
            if k < len(pkt):
                self.partial += 1
                self._pending = memoryview(bytes(pkt[k:]))
        if k < len(pkt):
            self.wake()
        return True

    def _send_pending(self) -> bool:
        """Write the rest of our partial packet (lock held); True when it is all out."""
        try:
            k = self.client._sock_send(self._pending)
        except BlockingIOError:
            return False
        except OSError:  # connection lost: paho's read side handles it; the rest is void
            self._pending = None
            return True
        self._pending = self._pending[k:] if k < len(self._pending) else None
        return self._pending is None
