"""MQTT protocol choice and acknowledgement reason codes of the daemon's publisher.

* :func:`make_client`: a paho 2.x client speaking MQTT v5 (clean start, session expiry 0:
  the session ends with the connection, as ``clean_session=True`` did under 3.1.1) or
  3.1.1; ``[mqtt] protocol = "auto"`` starts with v5 and falls back to 3.1.1 when the
  broker answers the CONNECT with "Unsupported protocol version" (a broker older than v5).
* :class:`AckWatch`: reads the reason codes of PUBACK (QoS 1) and SUBACK. Under v5 a broker
  whose ACL denies a topic answers PUBACK 0x87 "Not authorized" (Mosquitto 2); under 3.1.1
  it drops the message silently, so denials are only seen under v5 (a denied subscription
  is seen under both, SUBACK 0x80 / 0x87, by brokers that check subscriptions: Mosquitto 2's
  ``acl_file`` grants every SUBACK and filters on delivery). A denied topic is counted,
  logged once, and named in the status ``degraded`` reason until the broker accepts a
  message on it again.

* :class:`Unheard`: a QoS 1 message the broker acknowledges with reason 0x10 "No matching
  subscribers" (v5) within ``[mqtt] resend_unheard_s`` of a (re)connection is published
  again, after 0.25 s, then 0.5, 1, 2, ... s, until a subscriber takes it or the window ends.
  After a broker restart the consumers subscribe again after the devices may have reconnected:
  Mosquitto 2.0 restores a persistent session's plain subscriptions but not its shared ones
  (``$share/...``, the historians'), so what a device publishes before they are back, among
  it what it buffered while the broker was away, reaches no one; this sends it again. The
  broker answers 0x10 only when no subscription at all matches (a dashboard watching the
  topic hides the historians' absence: the historian reports the hole, docs/historian.md).

The publishing path pays one list store per message (``mid -> topic`` in a preallocated
table of :data:`MID_SLOTS` entries indexed by ``mid & MID_MASK``: far more than the messages
paho holds unacknowledged, at most its 50 in flight + 200 queued); everything else runs on
paho's network thread when an acknowledgement arrives.

:func:`_describe_connect_error` names a failed connection's cause in one line (the
publisher's ``last_error``; the historian and the monitor import it from here through
:mod:`edge.daemon.mqtt`).
"""

from __future__ import annotations

import collections
import logging
import time

log = logging.getLogger("vsense.mqtt")

#: ``[mqtt] protocol`` values
PROTOCOLS = ("auto", "5", "3.1.1")
UNSUPPORTED_PROTOCOL = 0x84  # CONNACK reason "Unsupported protocol version" (v5)
MID_SLOTS = 4096  # message id -> topic table (32 KB; the whole 16-bit range would be 512 KB)
MID_MASK = MID_SLOTS - 1


def paho_protocol(name: str):
    """paho's protocol constant for ``"5"`` / ``"3.1.1"``."""
    import paho.mqtt.client as mqtt

    return mqtt.MQTTv5 if name == "5" else mqtt.MQTTv311


def make_client(factory, device: str, protocol: str):
    """A paho client (callback API 2) for ``protocol`` ``"5"`` or ``"3.1.1"``."""
    from paho.mqtt.enums import CallbackAPIVersion

    if protocol == "5":
        return factory(CallbackAPIVersion.VERSION2, client_id=device,
                       protocol=paho_protocol("5"))
    return factory(CallbackAPIVersion.VERSION2, client_id=device,
                   protocol=paho_protocol("3.1.1"), clean_session=True)


def connect_kwargs(protocol: str) -> dict:
    """Extra arguments of ``connect_async``: v5 starts clean on every connection and keeps
    no session after it (no SessionExpiryInterval property = 0)."""
    return {"clean_start": True} if protocol == "5" else {}


def refused_for_protocol(reason_code) -> bool:
    """Whether a CONNACK reason says the broker does not speak the requested protocol."""
    return getattr(reason_code, "value", None) == UNSUPPORTED_PROTOCOL or \
        str(reason_code).lower() == "unsupported protocol version"


_EARLY = object()  # Unheard: a PUBACK "No matching subscribers" that came before record()


class Unheard:
    """Re-send what no subscriber took shortly after a (re)connection (module docstring).

    ``record(mid, item)`` on the publishing side; :meth:`acked` from paho's ``on_publish``
    (network thread); :meth:`take_due` on the publishing side returns the items to publish
    again (a deque between the threads).
    """

    NO_MATCHING_SUBSCRIBERS = 0x10
    FIRST_RETRY_S = 0.25

    def __init__(self, window_s: float):
        self.window_s = window_s
        self.items: list = [None] * MID_SLOTS  # mid -> (item, retry delay [s])
        self.connected_at = -1e18
        self.due: collections.deque = collections.deque()  # (when, item, next delay)
        self.stats = {"no_subscribers": 0, "resent": 0}

    def connected(self) -> None:
        self.connected_at = time.monotonic()

    def record(self, mid: int, item: tuple, delay: float = 0.0) -> None:
        """Keep ``item`` (what :meth:`take_due` hands back) until message ``mid`` is
        acknowledged; ``delay``: the wait before its next sending [s]."""
        slot = mid & MID_MASK
        prev, self.items[slot] = self.items[slot], (item, delay or self.FIRST_RETRY_S)
        if prev is not None and prev[0] is _EARLY and prev[2] == mid \
                and time.monotonic() - prev[1] < 5.0:  # acknowledged before it was recorded
            self.items[slot] = None
            self._schedule(time.monotonic(), item, delay or self.FIRST_RETRY_S, prev[1])

    def acked(self, mid: int, reason_code) -> None:
        slot = mid & MID_MASK
        held, self.items[slot] = self.items[slot], None
        if getattr(reason_code, "value", 0) != self.NO_MATCHING_SUBSCRIBERS:
            return
        self.stats["no_subscribers"] += 1
        if held is None:  # the PUBACK came before the publisher recorded the message
            self.items[slot] = (_EARLY, time.monotonic(), mid)
        else:
            self._schedule(time.monotonic(), held[0], held[1], time.monotonic())

    def _schedule(self, now: float, item: tuple, delay: float, acked_at: float) -> None:
        if acked_at - self.connected_at < self.window_s:
            self.due.append((now + delay, item, 2 * delay))

    def take_due(self) -> list[tuple]:
        """``[(item, next retry delay)]`` whose time has come, oldest first."""
        now, out = time.monotonic(), []
        while self.due and self.due[0][0] <= now:
            _, item, delay = self.due.popleft()
            out.append((item, delay))
        self.stats["resent"] += len(out)
        return out


class AckWatch:
    """Reason codes of PUBACK/SUBACK: denied topics, counted per topic.

    ``record(mid, topic)`` on the publishing side (one list store); :meth:`on_publish` and
    :meth:`on_subscribe` are paho 2.x callbacks (network thread).
    """

    def __init__(self, protocol: str, unheard: Unheard | None = None):
        self.unheard = unheard
        self.protocol = protocol  # "5" or "3.1.1": the protocol of the current connection
        self.mid_topic: list = [None] * MID_SLOTS
        self.denied: dict[str, int] = {}  # topic: denials so far
        self.reasons: dict[str, str] = {}  # topic: last denial (e.g. "publish: Not authorized")
        self.denied_now: set[str] = set()  # topics whose last acknowledgement was a denial
        self.sub_topic: dict[int, str] = {}  # subscribe mid: topic

    def record(self, mid: int, topic: str) -> None:
        self.mid_topic[mid & MID_MASK] = topic

    def on_publish(self, client, userdata, mid, reason_code, properties) -> None:
        if self.unheard is not None:
            self.unheard.acked(mid, reason_code)
        if reason_code.is_failure:
            self._deny(self.mid_topic[mid & MID_MASK], f"publish: {reason_code}")
        elif self.denied_now:
            self.denied_now.discard(self.mid_topic[mid & MID_MASK])

    def on_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        topic = self.sub_topic.pop(mid, None)
        for rc in reason_codes:
            if rc.is_failure:
                self._deny(topic, f"subscribe: {rc}")
            elif self.denied_now:
                self.denied_now.discard(topic)

    def _deny(self, topic: str | None, why: str) -> None:
        topic = topic or "?"
        n = self.denied.get(topic, 0)
        self.denied[topic] = n + 1
        self.reasons[topic] = why
        self.denied_now.add(topic)
        if n == 0:  # once per topic, not per message
            log.error("MQTT: the broker denies %s (%s): check its ACL for this device's user "
                      "(count: health mqtt denied)", topic, why)

    def problem(self) -> str | None:
        """The status ``degraded`` reason while topics are denied, else None."""
        now = sorted(self.denied_now)
        if not now:
            return None
        return ("the broker denies " + ", ".join(f"{t} ({self.reasons[t]})" for t in now)
                + ": check its ACL for this device's user (count: health mqtt denied)")

    def health(self) -> dict:
        """``{"protocol", "denied", "no_subscribers", "resent"}`` (the last two:
        :class:`Unheard`, under v5 only); under 3.1.1 ``denied`` is None and
        ``denials_visible`` false: a denied publication cannot be seen."""
        v5 = self.protocol == "5"
        return {"protocol": self.protocol, "denials_visible": v5,
                "denied": dict(self.denied) if v5 or self.denied else None,
                **(self.unheard.stats if self.unheard is not None and v5 else {})}


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
