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

The publishing path pays one list store per message (``mid -> topic`` in a preallocated
table of :data:`MID_SLOTS` entries indexed by ``mid & MID_MASK``: far more than the messages
paho holds unacknowledged, at most its 50 in flight + 200 queued); everything else runs on
paho's network thread when an acknowledgement arrives.
"""

from __future__ import annotations

import logging

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


class AckWatch:
    """Reason codes of PUBACK/SUBACK: denied topics, counted per topic.

    ``record(mid, topic)`` on the publishing side (one list store); :meth:`on_publish` and
    :meth:`on_subscribe` are paho 2.x callbacks (network thread).
    """

    def __init__(self, protocol: str):
        self.protocol = protocol  # "5" or "3.1.1": the protocol of the current connection
        self.mid_topic: list = [None] * MID_SLOTS
        self.denied: dict[str, int] = {}  # topic: denials so far
        self.reasons: dict[str, str] = {}  # topic: last denial (e.g. "publish: Not authorized")
        self.denied_now: set[str] = set()  # topics whose last acknowledgement was a denial
        self.sub_topic: dict[int, str] = {}  # subscribe mid: topic

    def record(self, mid: int, topic: str) -> None:
        self.mid_topic[mid & MID_MASK] = topic

    def on_publish(self, client, userdata, mid, reason_code, properties) -> None:
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
        """``{"protocol", "denied"}``; under 3.1.1 ``denied`` is None and
        ``denials_visible`` false: a denied publication cannot be seen."""
        v5 = self.protocol == "5"
        return {"protocol": self.protocol, "denials_visible": v5,
                "denied": dict(self.denied) if v5 or self.denied else None}
