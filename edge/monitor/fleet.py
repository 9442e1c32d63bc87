"""``vsense-edge monitor --fleet``: every device under the topic root, one line each.

    vsense-edge monitor --fleet [--broker HOST[:PORT]] [--base vsense] [--once]
                        [--duration S] [--timeout S] [--interval S]
                        [-c edge.toml] [--username U --password-file F] [--tls-ca CA]

Subscribes to ``<base>/+/status``, ``meta``, ``health`` (QoS 1) and ``estimates`` (QoS 0,
only the sample count of each batch is read) and redraws a table: device, state (``stale``
when nothing arrived for ``--stale`` s although the device did not say it stopped), bundle,
received samples/s, samples, loop latency p99, lost samples, publisher drops, CPU, last seen.
A device whose latest health message says the model check is suspect shows ``running
(model suspect)``, not ``running``: its estimates run, but the data disagree with the model
(``vsense-edge monitor --device ID`` names why).
``--once`` waits (up to ``--timeout`` s) until every device has sent estimates and a health
message (or said it stopped), then prints one table.
:class:`FleetView` is pure (fed with topic and payload) and thread-safe.
"""

from __future__ import annotations

import sys
import threading
import time

from edge.monitor.client import redraw
from edge.monitor.connect import BrokerSession, describe_settings
from edge.monitor.payload import PayloadError, clean, decode


class FleetView:
    """What arrived per device under ``<base>/``; :meth:`feed` never raises on bad input:
    every payload is checked by :func:`edge.monitor.payload.decode`, a malformed one is
    counted per device and named (``last_bad``)."""

    def __init__(self, base: str = "vsense", rate_window_s: float = 5.0):
        self.base = base
        self.lock = threading.Lock()
        self.devices: dict[str, dict] = {}
        self.n_bad = 0
        self.last_bad = ""  # the last malformed message, named
        self.rate_window_s = rate_window_s

    def _dev(self, d: str) -> dict:
        if d not in self.devices:
            self.devices[d] = {"status": None, "meta": None, "health": None, "samples": 0,
                               "max_seq": -1, "last_seen": None, "arrivals": [], "bad": 0,
                               "last_bad": ""}
        return self.devices[d]

    def feed(self, topic: str, payload: bytes, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        parts = topic.split("/")
        if len(parts) != 3 or parts[0] != self.base:
            return
        dev, sub = parts[1], parts[2]
        if sub not in ("status", "meta", "health", "estimates"):
            return
        with self.lock:
            d = self._dev(dev)
            d["last_seen"] = now
            try:
                obj = decode(sub, payload)
                if sub == "estimates":
                    self._estimates(d, obj["seq"], now)
                else:
                    d[sub] = obj
            except PayloadError as e:
                self._bad(d, topic, str(e))
            except Exception as e:  # noqa: BLE001 - never raised on paho's thread
                self._bad(d, topic, f"{type(e).__name__}: {e}")

    def _bad(self, d: dict, topic: str, reason: str) -> None:
        d["bad"] += 1
        self.n_bad += 1
        self.last_bad = d["last_bad"] = clean(f"malformed payload from {topic}: {reason}")

    def _estimates(self, d: dict, seq, now: float) -> None:
        n = int(seq.shape[0])
        if n == 0:
            return
        seq0, last = int(seq[0]), int(seq[-1])
        if last < d["max_seq"] - 10_000:  # seq started again: a restart
            d["max_seq"] = -1
        new = max(0, last - max(d["max_seq"], seq0 - 1))
        d["samples"] += new
        d["max_seq"] = max(d["max_seq"], last)
        d["arrivals"].append((now, new))
        while d["arrivals"] and d["arrivals"][0][0] < now - self.rate_window_s:
            d["arrivals"].pop(0)

    def rate(self, d: dict, now: float) -> float | None:
        arr = [(t, n) for t, n in d["arrivals"] if t >= now - self.rate_window_s]
        if len(arr) < 2 or now <= arr[0][0]:
            return None
        return sum(n for _, n in arr[1:]) / (now - arr[0][0])


def _g(obj, *keys):
    for k in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(k)
    return obj


def _denied(h: dict | None) -> list[str]:
    """The topics a device's last health says the broker denies (MQTT v5 reason codes)."""
    return sorted(((h or {}).get("mqtt") or {}).get("denied") or {})


def _num(x, fmt="{:,.0f}"):
    return fmt.format(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else "—"


def render_fleet(view: FleetView, broker: str, now: float | None = None,
                 stale_s: float = 15.0) -> str:
    """The text of one screen: a header and one line per device (sorted by id)."""
    now = time.monotonic() if now is None else now
    rows = []
    counts: dict[str, int] = {}
    with view.lock:
        items = sorted(view.devices.items())
        for dev, d in items:
            state = str(_g(d, "status", "state") or "?")
            ago = None if d["last_seen"] is None else now - d["last_seen"]
            if ago is not None and ago > stale_s and state not in ("offline", "stopped"):
                state += " (stale)"
            elif (state not in ("offline", "stopped")
                  and _g(d, "health", "model_check", "suspect") is True):
                state += " (model suspect)"
            counts[state] = counts.get(state, 0) + 1
            bundle = _g(d, "meta", "bundle_id") or _g(d, "status", "bundle") or "—"
            r = view.rate(d, now)
            rows.append(f"{dev[:20]:<20} {state[:26]:<26} {str(bundle)[:22]:<22} "
                        f"{_num(r):>7} {d['samples']:>11,} "
                        f"{_num(_g(d, 'health', 'latency_us', 'p99')):>8} "
                        f"{_num(_g(d, 'health', 'lost_samples')):>6} "
                        f"{_num(_g(d, 'health', 'publish', 'drops_samples')):>6} "
                        f"{_num(_g(d, 'health', 'cpu_percent'), '{:.1f}'):>6} "
                        f"{'—' if ago is None else f'{ago:.1f} s':>9}"
                        + (f"  {d['bad']} bad payloads" if d["bad"] else "")
                        + (f"  DENIED: {', '.join(_denied(d['health']))}"
                           if _denied(d["health"]) else ""))
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    head = [f"vsense fleet @ {broker} — topic root {view.base}: {len(rows)} devices"
            + (f" ({summary})" if summary else ""),
            f"{'device':<20} {'state':<26} {'bundle':<22} {'rate/s':>7} {'samples':>11} "
            f"{'p99 us':>8} {'lost':>6} {'drops':>6} {'cpu %':>6} {'last seen':>9}"]
    if view.last_bad:
        head.append(f"({view.n_bad} malformed payloads; last: {view.last_bad})")
    return clean("\n".join(head + (rows or ["(no device seen yet)"])), None)


def _complete(view: FleetView, now: float) -> bool:
    """Every device seen has said it stopped, or has sent estimates (with a measured rate)
    and a health message: what ``--once`` waits for."""
    with view.lock:
        devs = list(view.devices.values())
        return bool(devs) and all(
            _g(d, "status", "state") in ("offline", "stopped")
            or (d["samples"] and d["health"] is not None and view.rate(d, now) is not None)
            for d in devs)


def run_fleet(args, out, settings: dict) -> int:
    """``vsense-edge monitor --fleet``; exit codes as for the single-device monitor.
    ``settings``: :func:`edge.monitor.connect.broker_settings`."""
    b = settings["base_topic"]
    view = FleetView(b)
    session = BrokerSession(settings, [(f"{b}/+/status", 1), (f"{b}/+/meta", 1),
                                       (f"{b}/+/health", 1), (f"{b}/+/estimates", 0)],
                            view.feed, f"vsense-fleet-{threading.get_ident() % 100000}")
    try:
        session.start(min(args.timeout, 10.0))
    except ConnectionError as e:
        print(f"vsense-edge monitor: error: {e}", file=sys.stderr)
        return 2
    addr = describe_settings(settings)
    try:
        if args.once:
            # retained status/meta arrive at once; wait (up to --timeout) for estimates and a
            # health message (sent every [mqtt] health_interval_s) of every device
            deadline = time.monotonic() + args.timeout
            while time.monotonic() < deadline and not _complete(view, time.monotonic()):
                time.sleep(0.05)
            if view.devices and not _complete(view, time.monotonic()):
                with view.lock:
                    missing = sorted(k for k, d in view.devices.items() if d["health"] is None
                                     and _g(d, "status", "state") not in ("offline", "stopped"))
                if missing:
                    print(f"vsense-edge monitor: no health message within {args.timeout:g} s "
                          f"from {clean(', '.join(missing))} (p99, lost, cpu show —)", file=sys.stderr)
            out.write(render_fleet(view, addr, stale_s=args.stale) + "\n")
            return 0 if view.devices else 1
        redraw(out, lambda: render_fleet(view, addr, stale_s=args.stale),
               not args.no_clear and out.isatty(), args.interval, args.duration)
    except KeyboardInterrupt:
        pass
    finally:
        session.stop()
    return 0
