"""``vsense-edge dashboard``: the live browser dashboard (static page + a tiny HTTP server).

    vsense-edge dashboard [-c edge.toml] [--broker HOST[:PORT]]
                          [--username U --password-file F] [--tls-ca CA.pem]
                          [--direct [--ws-port 9001] | --url ws://HOST:9001]
                          [--base vsense] [--device ID] [--window S] [--history S]
                          [--listen 127.0.0.1] [--port 8090] [--export DIR]

The page (``edge/dashboard/static``: HTML, JS, CSS and the vendored uPlot and MQTT.js builds
with their licences; no build step, no network at run time) speaks MQTT over WebSockets from
the browser (MQTT.js) and subscribes to ``<base>/+/{status,meta,estimates,health,raw}`` and
``<base>/+/fatigue/+``. Two ways to the broker:

* **relay** (default when served): the page connects to ``/mqtt`` on this server, which
  relays the bytes to the broker's MQTT port (``[mqtt] host``/``port``, TLS with the daemon's
  ``ca_file``/``cert_file``/``key_file`` when ``[mqtt] tls``; :mod:`edge.dashboard.relay`).
  Works with any broker and avoids the slow websockets listener of Mosquitto 2.0.11.
* **direct** (``--direct``, ``--url``, and a page opened as a file): the page connects to the
  broker's websockets listener, ``ws[s]://<[mqtt] host>:<--ws-port>`` (``wss`` with TLS).

Login and TLS as for every client command (:mod:`edge.monitor.connect`): ``--username``,
``--password-file``/``--password-env``, ``--tls-ca``..., or ``[mqtt]`` of ``-c``. In relay
mode the command logs in once before serving and exits with code 2 naming a refused login,
subscription or TLS handshake. User and password go into the generated ``config.js`` (the
page sends them in its MQTT CONNECT), so the server listens on the loopback address unless
``--listen`` says otherwise. ``--export DIR`` writes the page with a direct ``config.js``
into DIR to be opened as a file.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from edge.daemon.config import mqtt_password
from edge.dashboard.relay import serve_websocket
from edge.monitor.connect import (BrokerSession, add_broker_arguments, broker_settings,
                                  describe_settings)

STATIC = Path(__file__).resolve().parent / "static"
DEFAULT_WS_PORT = 9001
DEFAULT_HTTP_PORT = 8090


def page_config(cfg=None, url: str | None = None, ws_port: int = DEFAULT_WS_PORT,
                base: str | None = None, device: str = "", window_s: float = 10.0,
                username: str | None = None, password: str | None = None,
                relay: bool = False, history_s: float = 60.0) -> dict:
    """The page's settings (``window.VSENSE_CONFIG``) from a daemon config and overrides.

    Parameters
    ----------
    cfg : edge.daemon.config.Config or None
        Daemon config: ``[mqtt] host``, ``tls``, ``base_topic``, ``username``, ``password_env``.
    url : str or None
        Full WebSocket URL (``ws://`` or ``wss://``); overrides host/port/TLS of ``cfg``.
    ws_port : int
        Port of the broker's websockets listener when ``url`` is not given.
    relay : bool
        The page connects to ``/mqtt`` of the server that served it (:func:`serve` with
        ``mqtt_cfg``); ``url`` and ``ws_port`` are ignored.
    window_s, history_s : float
        Plotted window at start and history kept per device [s] (``window_s <= history_s``;
        the page zooms and exports within the history).
    """
    m = cfg["mqtt"] if cfg is not None else {}
    if relay:
        url = "relay"
    elif url is None:
        host = m.get("host", "localhost")
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        url = f"{'wss' if m.get('tls') else 'ws'}://{host}:{int(ws_port)}"
    if url != "relay" and not url.startswith(("ws://", "wss://")):
        raise ValueError(f"--url: {url!r} must start with ws:// or wss://")
    if password is None and cfg is not None:
        password = mqtt_password(cfg)  # ConfigError names the missing variable
    if not 0 < history_s <= 3600:
        raise ValueError(f"--history: {history_s} s: expected 0 < S <= 3600")
    if not 0 < window_s <= history_s:
        raise ValueError(f"--window: {window_s} s: expected 0 < S <= --history ({history_s:g})")
    return {"url": url, "base": base or m.get("base_topic", "vsense"),
            "username": (username if username is not None else m.get("username", "")) or "",
            "password": password or "", "device": device or "", "window_s": float(window_s),
            "history_s": float(history_s)}


def config_js(page_cfg: dict) -> bytes:
    return ("window.VSENSE_CONFIG = " + json.dumps(page_cfg) + ";\n").encode()


class _Handler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # browsers want "HTTP/1.1 101" for the WebSocket upgrade
    page_cfg: dict
    mqtt_cfg: dict | None

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/mqtt" and self.mqtt_cfg is not None:
            serve_websocket(self, self.mqtt_cfg)
            return
        if path == "/config.js":
            body = config_js(self.page_cfg)
            self.send_response(200)
            self.send_header("Content-Type", "text/javascript; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, format, *args):  # quiet: one line per request is noise here
        pass


def serve(page_cfg: dict, host: str = "127.0.0.1", port: int = DEFAULT_HTTP_PORT,
          mqtt_cfg: dict | None = None) -> ThreadingHTTPServer:
    """Start serving the page in a daemon thread; returns the server (``.server_address``,
    ``.shutdown()``). ``port=0`` picks a free port. ``mqtt_cfg`` (``host``, ``port``,
    ``tls``, ``ca_file``, ``cert_file``, ``key_file``): relay ``/mqtt`` to that broker."""
    handler = type("Handler", (_Handler,), {"page_cfg": dict(page_cfg),
                                            "mqtt_cfg": mqtt_cfg})
    srv = ThreadingHTTPServer((host, port), functools.partial(handler, directory=str(STATIC)))
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, name="vsense-dashboard", daemon=True).start()
    return srv


def export(page_cfg: dict, out: str | Path) -> Path:
    """Copy the page and a ``config.js`` with ``page_cfg`` into ``out``; returns index.html."""
    out = Path(out)
    shutil.copytree(STATIC, out, dirs_exist_ok=True)
    (out / "config.js").write_bytes(config_js(page_cfg))
    return out / "index.html"


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    add_broker_arguments(p)  # -c, --broker, --base, --username, --password-file, TLS
    p.add_argument("--direct", action="store_true",
                   help="no relay: the page connects to the broker's websockets listener")
    p.add_argument("--url", default=None,
                   help="direct: broker WebSocket URL, e.g. ws://pi.local:9001")
    p.add_argument("--ws-port", type=int, default=DEFAULT_WS_PORT,
                   help="direct: broker websockets listener port (default %(default)s)")
    p.add_argument("--device", default=None,
                   help="device shown first (default: [device] id of --config, else none: "
                        "click one in the fleet table; a new device never takes the view)")
    p.add_argument("--window", type=float, default=10.0,
                   help="plotted window at start [s] (default %(default)s; the page keeps "
                        "--history s)")
    p.add_argument("--history", type=float, default=60.0,
                   help="history kept per device in the page, for zoom and CSV export [s] "
                        "(default %(default)s)")
    p.add_argument("--listen", default="127.0.0.1", help="HTTP address (default %(default)s)")
    p.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT,
                   help="HTTP port (default %(default)s; 0 = any free port)")
    p.add_argument("--export", default=None, metavar="DIR",
                   help="write the page and its config.js into DIR (open DIR/index.html) and exit")
    return p


def check_login(settings: dict, timeout: float = 10.0) -> None:
    """Log in to the broker once as the relay's pages will (ConnectionError names a refused
    login, a refused subscription, a TLS failure or an unreachable broker)."""
    s = BrokerSession(settings, [(f"{settings['base_topic']}/+/status", 1)],
                      lambda topic, payload: None, "vsense-dashboard-check")
    s.start(timeout)
    s.stop()


def run_dashboard(args) -> int:
    direct = bool(args.direct or args.url or args.export)
    try:
        mq = broker_settings(args)
        pc = page_config({"mqtt": mq}, url=args.url, ws_port=args.ws_port,
                         device=args.device or mq["device"] or "", window_s=args.window,
                         history_s=args.history, username=mq["username"],
                         password=mq["password"] or "", relay=not direct)
    except ValueError as e:  # ConfigError is one
        print(f"vsense-edge dashboard: error: {e}", file=sys.stderr)
        return 2
    if args.export:
        print(f"open {export(pc, args.export)}")
        return 0
    if not direct:
        try:
            check_login(mq)
        except ConnectionError as e:
            print(f"vsense-edge dashboard: error: {e}", file=sys.stderr)
            return 2
    try:
        srv = serve(pc, args.listen, args.port, mqtt_cfg=None if direct else mq)
    except OSError as e:
        print(f"vsense-edge dashboard: error: {args.listen}:{args.port}: {e.strerror or e}",
              file=sys.stderr)
        return 2
    host, port = srv.server_address[:2]
    via = pc["url"] if direct else f"relay to {describe_settings(mq)}"
    print(f"vsense dashboard on http://{host}:{port}/ (broker: {via}, topic root "
          f"{pc['base']}); Ctrl-C stops", flush=True)
    if pc["password"] and args.listen not in ("127.0.0.1", "localhost", "::1"):
        print("warning: the page's config.js carries the MQTT password and the server "
              f"listens on {args.listen}", file=sys.stderr)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        srv.shutdown()
    return 0
