"""``vsense-edge monitor``: a live terminal view of one device over MQTT.

    vsense-edge monitor --broker HOST[:PORT] --device ID [--base vsense] [--csv FILE]
                        [--once] [--duration S] [--timeout S] [--interval S]
    vsense-edge monitor --broker HOST[:PORT] --fleet [--once] ...   (edge.fleetview)

Subscribes to ``<base>/<device>/#`` (status, meta, estimates, health, cmd/reply) and redraws
about twice a second with plain ANSI escapes (no curses): state, bundle, the nominal rate (meta)
and the rate measured from the arriving estimates, the latest forces and virtual outputs with
their units, and the health counters (loop latency percentiles, overruns, lost samples,
publisher and recorder queues). ``--csv FILE`` records every estimate received
(``time,seq,<forces>,<outputs>,flags``; time = the device's sample time [s]; duplicates from
QoS 1 redelivery are skipped by ``seq``). ``--once`` prints one view as soon as ``meta`` and
an ``estimates`` batch are in (waiting up to ``--timeout`` s for ``health`` too) and exits.

Exit codes: 0 ok; 1 ``--once`` timed out without estimates; 2 bad arguments or the broker
could not be reached.

:class:`DeviceView` holds the state and is pure (fed with topic suffix and payload), so it is
also what ``offline.demo`` uses to collect a run.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import math
import struct
import sys
import threading
import time

import numpy as np

from edge.daemon.mqtt import decode_estimates

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
        self.n_messages = 0
        self.n_samples = 0          # distinct samples received
        self.n_duplicates = 0       # samples received again (QoS 1 redelivery)
        self.n_bad_payloads = 0
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
        """One MQTT message; ``sub`` is the topic below ``<base>/<device>/``."""
        now = time.monotonic() if now is None else now
        with self.lock:
            self.n_messages += 1
            try:
                if sub == "estimates":
                    self._estimates(decode_estimates(payload), now)
                elif sub in ("status", "meta", "health", "cmd/reply"):
                    obj = json.loads(payload.decode()) if payload else None
                    if sub == "status":
                        self.status = obj
                    elif sub == "meta":
                        self.meta = obj
                    elif sub == "health":
                        self.health = obj
                        self.n_health += 1
                        self.health_log.append(obj)
                    else:
                        self.replies.append(obj)
            except (ValueError, UnicodeDecodeError, KeyError, TypeError, IndexError,
                    AttributeError, RecursionError, OverflowError, struct.error):
                # a malformed message from the broker: counted, never raised on paho's
                # network thread (issue 12)
                self.n_bad_payloads += 1

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
def render(view: DeviceView, device: str, broker: str, now: float | None = None,
           connected: bool = True, csv_path: str | None = None) -> str:
    """The text of one screen (no escape codes)."""
    now = time.monotonic() if now is None else now
    st, meta, h = view.status, view.meta, view.health
    lines = [f"vsense monitor — device {device} @ {broker}"
             + ("" if connected else "   [broker connection lost, reconnecting]")]
    state = (st or {}).get("state", "?")
    extra = ""
    if st and st.get("faulty_channels"):
        extra = f"  faulty: {', '.join(st['faulty_channels'])}"
    if st and "exit_code" in st:
        extra += f"  exit code {st['exit_code']}"
    if st and st.get("error"):
        extra += f"  error: {st['error']}"
    lines.append(f"state     {state}{extra}")
    if meta:
        ch = ", ".join(f"{c['name']} [{c.get('unit', '')}]" for c in meta.get("channels", []))
        lines.append(f"bundle    {meta.get('bundle_id', '?')}  (hash "
                     f"{str(meta.get('bundle_hash', ''))[:12]})")
        lines.append(f"channels  {ch}")
        lines.append(f"delay     {meta.get('delay_samples', '?')} samples "
                     f"({1e3 * float(meta.get('delay_s', 0.0)):.3g} ms); payload "
                     f"{meta.get('format', '?')}, batch {meta.get('batch', '?')}")
    else:
        lines.append("bundle    (no meta received yet)")
    rate = view.measured_rate(now)
    nominal = meta.get("rate") if meta else None
    lines.append("rate      " + (f"{rate:,.1f} samples/s received" if rate else "—")
                 + (f"  (nominal {nominal:g})" if nominal else ""))
    lines.append(f"received  {view.n_samples:,} samples, last seq {view.last_seq}, "
                 f"{view.n_duplicates} duplicates, {view.gaps} gaps in seq"
                 + (f", {view.n_bad_payloads} bad payloads" if view.n_bad_payloads else ""))
    lines.append("")
    if view.last_values is not None:
        tdev = view.last_t_ns / 1e9 if view.last_t_ns is not None else float("nan")
        lines.append(f"latest estimate (seq {view.last_seq}, t = {tdev:.3f} s, flags "
                     f"{view.last_flags})")
        forces = {f["name"] for f in (meta or {}).get("forces", [])}
        std = view.last_std if view.last_std is not None else [None] * len(view.columns)
        for name, unit, x, sd in zip(view.columns, view.units(), view.last_values, std):
            kind = "force " if name in forces else "output"
            pm = "" if sd is None else f" +/- {_fmt(float(sd), unit)}"
            lines.append(f"  {kind}  {name:<14s} {_fmt(float(x), unit):>22s}{pm}")
    else:
        lines.append("latest estimate: none yet")
    lines.append("")
    if h:
        lat = h.get("latency_us") or {}

        def us(k):
            v = lat.get(k)
            return "—" if v is None else f"{v:,.0f}"

        lines.append(f"health    (#{view.n_health}) samples {h.get('samples', 0):,}, "
                     f"estimates {h.get('estimates', 0):,}, uptime {h.get('uptime_s', 0):.1f} s")
        lines.append(f"latency   p50 {us('p50')} / p99 {us('p99')} / p99.9 {us('p999')} / "
                     f"max {us('max')} us  (n {lat.get('n', 0)})")
        lines.append(f"loop      overruns {h.get('overruns', 0)}, lost samples "
                     f"{h.get('lost_samples', 0)}, ring {h.get('ring_depth', 0)}/"
                     f"{h.get('ring_capacity', '?')}, bad samples {h.get('bad_samples', 0)}, "
                     f"resets {h.get('estimator_resets', 0)}")
        p = h.get("publish") or {}
        if p:
            lines.append(f"publish   queue {p.get('queue_depth', 0)}, published "
                         f"{p.get('published', 0):,}, dropped {p.get('drops_messages', 0)} msgs"
                         f" / {p.get('drops_samples', 0)} samples")
        r = h.get("recorder") or {}
        if r:
            lines.append(f"recorder  queue {r.get('queue_depth', 0)}, files {r.get('files', 0)},"
                         f" {r.get('bytes', 0) / 1e6:.2f} MB, write errors "
                         f"{r.get('write_errors', 0)}")
        mc = h.get("model_check")
        if mc:
            ratio = mc.get("ratio")
            bands = ", ".join(f"{b['f_hz'][1]:g} Hz {b['ratio']:.2f}" for b in mc.get("bands", [])
                              if b.get("ratio") is not None)
            lines.append(f"model     {'SUSPECT' if mc.get('suspect') else 'ok'}: NIS/dof "
                         f"{'—' if ratio is None else f'{ratio:.3f}'} over "
                         f"{mc.get('window_s', 0):g} s" + (f"; below/above {bands}" if bands
                                                           else ""))
        cpu = h.get("cpu_percent")
        temp = h.get("cpu_temp_c")
        lines.append(f"process   CPU {cpu if cpu is not None else '—'} %, RSS "
                     f"{h.get('rss_mb', '—')} MB, CPU temp "
                     f"{'—' if temp is None else f'{temp:.1f} °C'}")
    else:
        lines.append("health    (none received yet)")
    if csv_path:
        lines.append("")
        lines.append(f"recording estimates to {csv_path}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- CSV
class CsvRecorder:
    """Writes estimates as ``time,seq,<columns>,flags``; rows before ``meta`` are held."""

    def __init__(self, path: str, view: DeviceView):
        self.path = path
        try:
            self.fh = open(path, "w", newline="")
        except OSError as e:
            raise ValueError(f"--csv: cannot write {path}: {e.strerror or e}") from None
        self.w = csv.writer(self.fh)
        self.view = view
        self.header = None
        self.pending: list = []
        self.rows = 0

    def __call__(self, rows: dict) -> None:  # called under view.lock
        if self.header is None:
            if self.view.meta is None or "columns" not in self.view.meta:
                self.pending.append(rows)
                return
            self.header = ["time", "seq", *self.view.meta["columns"], "flags"]
            self.w.writerow(self.header)
            for r in self.pending:
                self._write(r)
            self.pending.clear()
        self._write(rows)

    def _write(self, rows: dict) -> None:
        for s, t, v, f in zip(rows["seq"], rows["t_ns"], rows["v"], rows["flags"]):
            self.w.writerow([repr(int(t) / 1e9), int(s), *(repr(float(x)) for x in v), int(f)])
            self.rows += 1

    def close(self) -> None:
        with self.view.lock:
            if self.header is None and self.pending:  # never got meta: generic names
                ncol = self.pending[0]["v"].shape[1]
                self.header = ["time", "seq", *[f"c{i}" for i in range(ncol)], "flags"]
                self.w.writerow(self.header)
                for r in self.pending:
                    self._write(r)
        self.fh.close()


# ---------------------------------------------------------------------------- MQTT
class DeviceSubscriber:
    """A paho-mqtt 2.x client feeding a :class:`DeviceView` from ``<base>/<device>/#``."""

    def __init__(self, host: str, port: int, device: str, base: str = "vsense",
                 view: DeviceView | None = None, client_id: str | None = None):
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.view = view or DeviceView()
        self.prefix = f"{base}/{device}/"
        self.connected = False
        self.subscribed = threading.Event()
        cid = client_id or f"vsense-monitor-{device}-{threading.get_ident() % 100000}"
        c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=cid)
        c.reconnect_delay_set(0.2, 5)

        def on_connect(client, userdata, flags, rc, props):
            if rc.is_failure:
                return
            self.connected = True
            client.subscribe(self.prefix + "#", qos=1)

        def on_subscribe(client, userdata, mid, rcs, props):
            self.subscribed.set()

        def on_disconnect(client, userdata, flags, rc, props):
            self.connected = False

        def on_message(client, userdata, msg):
            if msg.topic.startswith(self.prefix):
                self.view.feed(msg.topic[len(self.prefix):], msg.payload)

        c.on_connect, c.on_subscribe = on_connect, on_subscribe
        c.on_disconnect, c.on_message = on_disconnect, on_message
        self.client = c
        self.host, self.port = host, port

    def start(self, timeout: float = 10.0) -> None:
        """Connect and subscribe; ConnectionError names the broker on failure."""
        try:
            self.client.connect(self.host, self.port, keepalive=30)
        except OSError as e:
            raise ConnectionError(f"broker {self.host}:{self.port}: {e.strerror or e}") from None
        self.client.loop_start()
        if not self.subscribed.wait(timeout):
            self.stop()
            raise ConnectionError(f"broker {self.host}:{self.port}: no subscription "
                                  f"acknowledgement within {timeout:g} s")

    def stop(self) -> None:
        try:
            self.client.disconnect()
        finally:
            self.client.loop_stop()


# ---------------------------------------------------------------------------- CLI
def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--broker", default="localhost:1883", help="HOST[:PORT] (default %(default)s)")
    p.add_argument("--device", default=None, help="device id ([device] id of its config)")
    p.add_argument("--fleet", action="store_true",
                   help="every device under the topic root, one line each (edge.fleetview)")
    p.add_argument("--stale", type=float, default=15.0,
                   help="--fleet: mark a device stale after S s of silence (default %(default)s)")
    p.add_argument("--base", default="vsense", help="base topic (default %(default)s)")
    p.add_argument("--csv", default=None, help="record received estimates to this CSV")
    p.add_argument("--once", action="store_true",
                   help="print one view when meta and estimates are in, then exit")
    p.add_argument("--duration", type=float, default=None, help="exit after S seconds")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="--once: longest wait for data [s] (default %(default)s)")
    p.add_argument("--interval", type=float, default=0.5,
                   help="redraw period [s] (default %(default)s)")
    p.add_argument("--no-clear", action="store_true",
                   help="do not clear the screen between views (also when not a terminal)")
    return p


def run_monitor(args, out=None) -> int:
    out = out or sys.stdout
    if getattr(args, "fleet", False):
        from edge.fleetview import run_fleet

        return run_fleet(args, out)
    if not args.device:
        print("vsense-edge monitor: error: --device ID or --fleet is required", file=sys.stderr)
        return 2
    try:
        host, port = parse_broker(args.broker)
    except ValueError as e:
        print(f"vsense-edge monitor: error: {e}", file=sys.stderr)
        return 2
    if args.interval <= 0 or args.timeout <= 0 or (args.duration is not None
                                                    and args.duration < 0):
        print("vsense-edge monitor: error: --interval, --timeout, --duration must be > 0",
              file=sys.stderr)
        return 2
    view = DeviceView()
    rec = None
    if args.csv:
        try:
            rec = CsvRecorder(args.csv, view)
        except ValueError as e:
            print(f"vsense-edge monitor: error: {e}", file=sys.stderr)
            return 2
        view.listeners.append(rec)
    sub = DeviceSubscriber(host, port, args.device, args.base, view)
    try:
        sub.start(timeout=min(args.timeout, 10.0))
    except ConnectionError as e:
        print(f"vsense-edge monitor: error: {e}", file=sys.stderr)
        if rec:
            rec.close()
        return 2
    clear = not args.no_clear and not args.once and out.isatty()
    addr = f"{host}:{port}"
    t0 = time.monotonic()
    code = 0
    try:
        if args.once:
            deadline = t0 + args.timeout
            while time.monotonic() < deadline:
                if view.meta is not None and view.n_samples > 0:
                    break
                time.sleep(0.05)
            ok = view.meta is not None and view.n_samples > 0
            # a little longer for a health message and a second batch (measured rate)
            extra = time.monotonic() + min(2.0, max(0.0, deadline - time.monotonic()))
            while ok and time.monotonic() < extra and (view.health is None
                                                       or view.measured_rate() is None):
                time.sleep(0.05)
            out.write(render(view, args.device, addr, connected=sub.connected,
                             csv_path=args.csv) + "\n")
            code = 0 if ok else 1
            if not ok:
                print(f"vsense-edge monitor: no estimates from {args.device} within "
                      f"{args.timeout:g} s", file=sys.stderr)
        else:
            while args.duration is None or time.monotonic() - t0 < args.duration:
                frame = render(view, args.device, addr, connected=sub.connected,
                               csv_path=args.csv)
                out.write((CLEAR if clear else "") + frame + ("\n" if clear else "\n\n"))
                out.flush()
                time.sleep(args.interval)
    except KeyboardInterrupt:
        pass
    finally:
        sub.stop()
        if rec:
            rec.close()
    return code


def main(argv=None) -> int:
    p = add_arguments(argparse.ArgumentParser(prog="vsense-edge monitor",
                                              description=__doc__.split("\n")[0]))
    return run_monitor(p.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
