"""What the historian takes from a message: the device and kind from the topic, the rows of an
``estimates`` payload (either format, through the daemon's own
:func:`edge.daemon.payloads.decode_estimates`), one row per ``health`` and ``meta`` message.

A payload that does not decode raises :class:`BadMessage` (counted by the historian, never a
crash): the messages come from the network.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np
import orjson

from edge.daemon.payloads import decode_estimates

#: the topic kinds the historian stores: ``<base>/<device>/<kind>``
KINDS = ("estimates", "health", "meta")


class BadMessage(ValueError):
    """A message the historian cannot store (the text names the topic and why)."""


@dataclass
class Estimates:
    """The rows of one ``estimates`` message.

    ``seq``, ``t_ns`` (n,) int64 as the device sent them; ``t`` (n,) float64 the wall time the
    historian gives each row [unix s]: ``t_ns`` (the device's ADC clock, not unix time) plus the
    device's offset (:class:`Clocks`), or without one the arrival of the message for its newest
    row and earlier rows by their ``t_ns`` distance to it;
    ``flags`` (n,) uint8; ``v`` (n, ncol) float64, NaN where the device sent null;
    ``s`` (n, ncol) stated standard deviations or None.
    """

    device: str
    seq: np.ndarray
    t_ns: np.ndarray
    t: np.ndarray
    flags: np.ndarray
    v: np.ndarray
    s: np.ndarray | None

    def __len__(self) -> int:
        return int(self.seq.shape[0])


@dataclass
class Document:
    """A ``health`` or ``meta`` message: ``doc`` is the JSON text as received (validated);
    ``id`` the sha1 of the payload (a redelivered message has the same), ``samples`` the
    health's ``samples`` counter (None when absent)."""

    kind: str
    device: str
    id: str
    t: float
    doc: str
    samples: int | None = None


def parse_topic(topic: str, base: str) -> tuple[str, str]:
    """``(device, kind)`` of ``<base>/<device>/<kind>``; BadMessage otherwise."""
    parts = topic.split("/")
    nb = len(base.split("/"))
    if (len(parts) != nb + 2 or "/".join(parts[:nb]) != base or not parts[nb]
            or parts[nb + 1] not in KINDS):
        raise BadMessage(f"{topic}: not a {base}/<device>/({'|'.join(KINDS)}) topic")
    return parts[nb], parts[nb + 1]


class Clocks:
    """Each device's ADC clock (``t_ns``) mapped to wall time: the offset is the smallest
    ``arrival - t_ns`` of the newest row over the device's messages (the message that came
    fastest), so a message that waited in the broker (a database outage, a restart of the
    historian) is placed at the time it was sampled, not at the time it arrived. A ``t_ns`` more
    than a minute below the device's newest starts a new clock (a rebooted device, a
    simulated one restarted). The stores keep the offsets (``vsense_clock``): a restarted
    historian and the other instances of its group start from them (:meth:`merge`)."""

    NEW_RUN_NS = 60_000_000_000

    def __init__(self):
        self.clock: dict[str, tuple[float, int]] = {}  # device -> (offset [s], newest t_ns)
        self.changed: set[str] = set()

    def _update(self, device: str, off: float, t_ns_newest: int) -> float:
        old = self.clock.get(device)
        if old is None or t_ns_newest < old[1] - self.NEW_RUN_NS:
            new = (off, t_ns_newest)  # the first message, or a new run of the device
        else:
            new = (min(old[0], off), max(old[1], t_ns_newest))
        if new != old:
            self.clock[device] = new
            self.changed.add(device)
        return new[0]

    def offset(self, device: str, t_ns_newest: int, arrival: float) -> float:
        """The device's offset [s] after a message whose newest row is ``t_ns_newest``."""
        return self._update(device, arrival - t_ns_newest * 1e-9, t_ns_newest)

    def merge(self, rows) -> None:
        """Take ``(device, offset, newest t_ns)`` rows from the store as observations."""
        for device, off, newest in rows:
            mine = self.clock.get(device)
            if mine is not None and int(newest) < mine[1] - self.NEW_RUN_NS:
                continue  # an earlier run of the device: ours is newer
            self._update(device, float(off), int(newest))
            self.changed.discard(device)

    def take_changed(self) -> list[tuple[str, float, int]]:
        """``(device, offset, newest t_ns)`` of the devices changed since the last call."""
        out = [(d, *self.clock[d]) for d in sorted(self.changed)]
        self.changed.clear()
        return out


def estimates(device: str, topic: str, payload: bytes, arrival: float,
              clocks: Clocks | None = None) -> Estimates:
    """The rows of an ``estimates`` payload received at ``arrival`` [unix s]."""
    try:
        d = decode_estimates(payload)
        seq, t_ns = np.asarray(d["seq"], np.int64), np.asarray(d["t_ns"], np.int64)
        v = np.asarray(d["v"], np.float64)
        flags = np.asarray(d["flags"], np.uint8)
        s = d.get("s")
        s = None if s is None else np.asarray(s, np.float64)
    except Exception as e:  # noqa: BLE001 - any decoding failure of network input is counted
        raise BadMessage(f"{topic}: undecodable estimates payload "
                         f"({type(e).__name__}: {e})") from None
    n = seq.shape[0]
    if (t_ns.shape != (n,) or flags.shape != (n,) or v.ndim != 2 or v.shape[0] != n
            or (s is not None and s.shape != v.shape)):
        raise BadMessage(f"{topic}: inconsistent estimates payload (seq {seq.shape}, t_ns "
                         f"{t_ns.shape}, v {v.shape}, flags {flags.shape})")
    if n and (seq.min() < 0 or t_ns.min() < 0):
        raise BadMessage(f"{topic}: negative seq or t_ns")
    if not n:
        t = np.zeros(0)
    elif clocks is None:
        t = arrival - (t_ns[-1] - t_ns) * 1e-9
    else:
        t = clocks.offset(device, int(t_ns[-1]), arrival) + t_ns * 1e-9
    return Estimates(device, seq, t_ns, t, flags, v, s)


def document(kind: str, device: str, topic: str, payload: bytes, arrival: float) -> Document:
    """A ``health`` or ``meta`` message as a :class:`Document` (its JSON must be an object)."""
    try:
        d = orjson.loads(payload)
    except orjson.JSONDecodeError as e:
        raise BadMessage(f"{topic}: not JSON ({e})") from None
    if not isinstance(d, dict):
        raise BadMessage(f"{topic}: a JSON object expected, got {type(d).__name__}")
    samples = d.get("samples")
    samples = samples if isinstance(samples, int) and not isinstance(samples, bool) else None
    return Document(kind, device, hashlib.sha1(payload).hexdigest(), arrival,
                    orjson.dumps(d).decode(), samples)


def decode(topic: str, payload: bytes, base: str, arrival: float,
           clocks: Clocks | None = None) -> Estimates | Document:
    """One received message as rows to store; BadMessage when it has none."""
    device, kind = parse_topic(topic, base)
    if kind == "estimates":
        return estimates(device, topic, payload, arrival, clocks)
    return document(kind, device, topic, payload, arrival)


def rows_of(e: Estimates, nan_null: bool):
    """``(device, seq, t_ns, t, flags, v, s)`` tuples of ``e``: ``v``/``s`` as JSON text
    (``nan_null``, orjson writes NaN as null) or as lists of floats."""
    if nan_null:
        v = [orjson.dumps(r, option=orjson.OPT_SERIALIZE_NUMPY).decode() for r in e.v]
        s = ([None] * len(e) if e.s is None else
             [orjson.dumps(r, option=orjson.OPT_SERIALIZE_NUMPY).decode() for r in e.s])
    else:
        v = e.v.tolist()
        s = [None] * len(e) if e.s is None else e.s.tolist()
    return zip([e.device] * len(e), e.seq.tolist(), e.t_ns.tolist(), e.t.tolist(),
               e.flags.tolist(), v, s)


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages and the status)."""
    return re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)
