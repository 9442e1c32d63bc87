"""The state of one device's topics (pure, thread-safe) and the broker address parser."""

from __future__ import annotations

import collections
import json
import math
import threading
import time

import numpy as np

from edge.monitor.payload import PayloadError, clean, decode

CLEAR = "\x1b[H\x1b[2J"


def parse_broker(text: str, default_port: int = 1883) -> tuple[str, int]:
    """``HOST``, ``HOST:PORT`` or ``[V6]:PORT`` -> ``(host, port)``; ValueError names it."""
    t = text.strip()
    if not t:
        raise ValueError("--broker: empty host")
    host, port = t, default_port
    if t.startswith("["):
        end = t.find("]")
        if end < 0:
            raise ValueError(f"--broker: {text!r}: missing ']'")
        host, rest = t[1:end], t[end + 1:]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"--broker: {text!r}: expected [HOST]:PORT")
            port = rest[1:]
    elif t.count(":") == 1:
        host, port = t.split(":")
    try:
        port = int(port)
    except ValueError:
        raise ValueError(f"--broker: {text!r}: port {port!r} is not a number") from None
    if not 1 <= port <= 65535 or not host:
        raise ValueError(f"--broker: {text!r}: expected HOST[:PORT] with 1 <= PORT <= 65535")
    return host, port


def _fmt(x, unit: str = "") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    ax = abs(x)
    s = f"{x:+.4e}" if (ax != 0 and (ax < 1e-3 or ax >= 1e5)) else f"{x:+.5f}"
    return f"{s} {unit}".rstrip()


def fmt_pm(x, sd, unit: str = "") -> str:
    """``value ± std unit`` with the std to 3 significant digits and the value rounded to
    the same place (``+238.5 ± 11.7 N``); scientific where the std is below 1e-3 or from 1e5
    (``+1.234e-05 ± 2.93e-06 m``). Without a finite positive std: :func:`_fmt`."""
    if x is None or not math.isfinite(x):
        return "—"
    if sd is None or not math.isfinite(sd) or sd <= 0:
        return _fmt(x, unit)
    esd = math.floor(math.log10(sd))
    if 1e-3 <= sd < 1e5 and abs(x) < 1e6:
        dec = max(0, 2 - esd)
        return f"{x:+.{dec}f} ± {sd:.{dec}f} {unit}".rstrip()
    ex = math.floor(math.log10(abs(x))) if x != 0 else esd
    return f"{x:+.{max(0, ex - esd + 2)}e} ± {sd:.2e} {unit}".rstrip()


def fmt_ratio(r) -> str:
    """A ratio to 3 significant digits, without an exponent up to 99,999."""
    if r is None or not math.isfinite(r):
        return "—"
    return f"{r:.3g}" if abs(r) < 1000 else (f"{r:,.0f}" if abs(r) < 1e5 else f"{r:.3g}")


class DeviceView:
    """Everything received about one device; thread-safe, no I/O.

    Parameters
    ----------
    keep : bool
        Keep every estimate (``seq -> (t_ns, values, flags)``) for later analysis
        (:meth:`arrays`); the monitor keeps only the latest.
    rate_window_s : float
        Wall-clock window over which the received sample rate is measured [s].
    """

    def __init__(self, keep: bool = False, rate_window_s: float = 5.0):
        self.lock = threading.Lock()
        self.keep = keep
        self.status: dict | None = None
        self.meta: dict | None = None
        self.health: dict | None = None
        self.n_health = 0
        self.health_log: list[dict] = []
        self.replies: list[dict] = []
        self.fatigue: dict[str, dict] = {}  # hotspot -> its retained fatigue summary
        self.n_messages = 0
        self.n_samples = 0          # distinct samples received
        self.n_duplicates = 0       # samples received again (QoS 1 redelivery)
        self.n_bad_payloads = 0
        self.last_bad = ""          # the last malformed message, named (``_bad``)
        self.topic_prefix = ""      # ``<base>/<device>/`` for those messages
        self.last_seq = -1
        self.max_seq = -1
        self.last_t_ns = None
        self.last_values = None
        self.last_std = None        # standard deviations of the latest row (smoother)
        self.last_flags = 0
        self.first_seq = None
        self.gaps = 0               # missing seq ranges seen in arrival order
        self._seen_hi = -1
        self._arrivals = collections.deque()  # (wall time, n samples)
        self.rate_window_s = rate_window_s
        self.store: dict[int, tuple] = {}
        self.listeners = []  # callables(rows: dict) run for every new estimates batch

    # ------------------------------------------------------------------- feeding
    def feed(self, sub: str, payload: bytes, now: float | None = None) -> None:
        """One MQTT message; ``sub`` is the topic below ``<base>/<device>/``. Checked by
        :func:`edge.monitor.payload.decode`; a malformed one is counted and named in
        :attr:`last_bad` (``malformed payload from <topic>: <reason>``), never raised (it
        would end paho's network thread, or the redraw)."""
        now = time.monotonic() if now is None else now
        with self.lock:
            self.n_messages += 1
            if sub.startswith("fatigue/"):
                self._fatigue(sub, payload)
                return
            if sub not in ("estimates", "status", "meta", "health", "cmd/reply"):
                return
            try:
                cols = self.meta.get("columns") if self.meta else None
                obj = decode(sub, payload, None if cols is None else len(cols))
                if sub == "estimates":
                    self._estimates(obj, now)
                elif sub == "status":
                    self.status = obj
                elif sub == "meta":
                    self.meta = obj
                elif sub == "health":
                    self.health = obj
                    self.n_health += 1
                    self.health_log.append(obj)
                else:
                    self.replies.append(obj)
            except PayloadError as e:
                self._bad(sub, str(e))
            except Exception as e:  # noqa: BLE001 - a listener (CSV) or a case not foreseen
                self._bad(sub, f"{type(e).__name__}: {e}")

    def _fatigue(self, sub: str, payload: bytes) -> None:
        """A hotspot's retained fatigue summary (``fatigue/<output>``): a JSON object whose
        numbers are finite, else counted as malformed."""
        try:
            obj = json.loads(payload.decode()) if payload else None
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            self._bad(sub, f"{type(e).__name__}: {e}")
            return
        if not isinstance(obj, dict) or not all(
                isinstance(v, str) or (isinstance(v, (int, float)) and math.isfinite(v))
                for v in obj.values() if not isinstance(v, (list, dict, bool, type(None)))):
            self._bad(sub, "a fatigue summary is a JSON object of finite numbers")
            return
        self.fatigue[clean(sub[len("fatigue/"):])] = obj

    def _bad(self, sub: str, reason: str) -> None:
        self.n_bad_payloads += 1
        self.last_bad = clean(f"malformed payload from {self.topic_prefix}{sub}: {reason}")

    def _estimates(self, d: dict, now: float) -> None:
        seq = np.asarray(d["seq"], np.int64)
        n = int(seq.shape[0])
        if n == 0:
            return
        new = np.ones(n, bool)
        if self.keep:
            new = np.array([int(s) not in self.store for s in seq])
        else:  # without the store: anything at or below the highest seq seen repeats
            new = seq > self.max_seq
        nn = int(new.sum())
        self.n_duplicates += n - nn
        if nn == 0:
            return
        if self.first_seq is None:
            self.first_seq = int(seq[new][0])
        if int(seq[new][0]) > self._seen_hi + 1 and self._seen_hi >= 0:
            self.gaps += 1
        self._seen_hi = max(self._seen_hi, int(seq[-1]))
        self.n_samples += nn
        self.max_seq = max(self.max_seq, int(seq[-1]))
        self.last_seq = int(seq[-1])
        self.last_t_ns = int(d["t_ns"][-1])
        self.last_values = np.asarray(d["v"][-1], float)
        self.last_std = np.asarray(d["s"][-1], float) if "s" in d else None
        self.last_flags = int(d["flags"][-1])
        self._arrivals.append((now, nn))
        while self._arrivals and self._arrivals[0][0] < now - self.rate_window_s:
            self._arrivals.popleft()
        if self.keep:
            for i in np.flatnonzero(new):
                self.store[int(seq[i])] = (int(d["t_ns"][i]), np.asarray(d["v"][i], float),
                                           int(d["flags"][i]))
        rows = {"seq": seq[new], "t_ns": np.asarray(d["t_ns"])[new],
                "v": np.asarray(d["v"], float)[new], "flags": np.asarray(d["flags"])[new]}
        for cb in self.listeners:
            cb(rows)

    # ------------------------------------------------------------------- reading
    def measured_rate(self, now: float | None = None) -> float | None:
        """Samples per second received over the last ``rate_window_s`` (wall clock)."""
        now = time.monotonic() if now is None else now
        with self.lock:
            arr = [(t, n) for t, n in self._arrivals if t >= now - self.rate_window_s]
        if len(arr) < 2:
            return None
        span = now - arr[0][0]
        if span <= 0:
            return None
        # the first batch marks the start of the window; count what came after it
        return sum(n for _, n in arr[1:]) / span

    @property
    def columns(self) -> list[str]:
        if self.meta and "columns" in self.meta:
            return list(self.meta["columns"])
        n = 0 if self.last_values is None else len(self.last_values)
        return [f"c{i}" for i in range(n)]

    def units(self) -> list[str]:
        if not self.meta:
            return [""] * len(self.columns)
        u = {f["name"]: f.get("unit", "") for f in self.meta.get("forces", [])}
        u.update({o["name"]: o.get("unit", "") for o in self.meta.get("outputs", [])})
        return [u.get(c, "") for c in self.columns]

    def arrays(self):
        """Kept estimates sorted by seq: ``(seq (n,), t_ns (n,), values (n, ncol), flags)``."""
        with self.lock:
            keys = sorted(self.store)
            seq = np.array(keys, np.int64)
            if not keys:
                return seq, np.zeros(0, np.int64), np.zeros((0, len(self.columns))), \
                    np.zeros(0, np.uint8)
            t = np.array([self.store[k][0] for k in keys], np.int64)
            v = np.vstack([self.store[k][1] for k in keys])
            f = np.array([self.store[k][2] for k in keys], np.uint8)
        return seq, t, v, f


# ---------------------------------------------------------------------------- render
