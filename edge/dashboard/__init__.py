"""``vsense-edge dashboard``: the live browser dashboard (static page + a tiny HTTP server).

    vsense-edge dashboard [-c edge.toml] [--url ws://HOST:9001] [--ws-port 9001]
                          [--base vsense] [--device ID] [--window S]
                          [--listen 127.0.0.1] [--port 8090] [--export DIR]

The page (``edge/dashboard/static``: HTML, JS, CSS and the vendored uPlot and MQTT.js builds
with their licences; no build step, no network at run time) connects from the browser straight
to the broker over MQTT-over-WebSockets and subscribes to ``<base>/+/{status,meta,estimates,
health,raw}``. This module only serves those files plus a generated ``config.js`` (broker
URL, topic root, credentials): with ``-c edge.toml`` the URL is ``ws[s]://<[mqtt] host>:
<ws port>`` (``wss`` when ``[mqtt] tls``), the user name is ``[mqtt] username`` and the
password comes from the variable named by ``[mqtt] password_env``, as for the daemon.
``--export DIR`` writes the page with its ``config.js`` into DIR to be opened as a file.
The password is written into ``config.js``: the server listens on the loopback address
unless ``--listen`` says otherwise.
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

STATIC = Path(__file__).resolve().parent / "static"
DEFAULT_WS_PORT = 9001
DEFAULT_HTTP_PORT = 8090


def page_config(cfg=None, url: str | None = None, ws_port: int = DEFAULT_WS_PORT,
                base: str | None = None, device: str = "", window_s: float = 10.0,
                username: str | None = None, password: str | None = None) -> dict:
    """The page's settings (``window.VSENSE_CONFIG``) from a daemon config and overrides.

    Parameters
    ----------
    cfg : edge.daemon.config.Config or None
        Daemon config: ``[mqtt] host``, ``tls``, ``base_topic``, ``username``, ``password_env``.
    url : str or None
        Full WebSocket URL (``ws://`` or ``wss://``); overrides host/port/TLS of ``cfg``.
    ws_port : int
        Port of the broker's websockets listener when ``url`` is not given.
    """
    m = cfg["mqtt"] if cfg is not None else {}
    if url is None:
        host = m.get("host", "localhost")
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        url = f"{'wss' if m.get('tls') else 'ws'}://{host}:{int(ws_port)}"
    if not (url.startswith("ws://") or url.startswith("wss://")):
        raise ValueError(f"--url: {url!r} must start with ws:// or wss://")
    if password is None and cfg is not None:
        from edge.daemon.config import mqtt_password

        password = mqtt_password(cfg)  # ConfigError names the missing variable
    if window_s <= 0 or window_s > 600:
        raise ValueError(f"--window: {window_s} s: expected 0 < S <= 600")
    return {"url": url, "base": base or m.get("base_topic", "vsense"),
            "username": (username if username is not None else m.get("username", "")) or "",
            "password": password or "", "device": device or "", "window_s": float(window_s)}


def config_js(page_cfg: dict) -> bytes:
    return ("window.VSENSE_CONFIG = " + json.dumps(page_cfg) + ";\n").encode()


class _Handler(SimpleHTTPRequestHandler):
    page_cfg: dict = {}

    def do_GET(self):
        if self.path.split("?")[0] in ("/config.js",):
            body = config_js(self.page_cfg)
            self.send_response(200)
            self.send_header("Content-Type", "text/javascript; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, fmt, *args):  # quiet: one line per request is noise here
        pass


def serve(page_cfg: dict, host: str = "127.0.0.1", port: int = DEFAULT_HTTP_PORT
          ) -> ThreadingHTTPServer:
    """Start serving the page in a daemon thread; returns the server (``.server_address``,
    ``.shutdown()``). ``port=0`` picks a free port."""
    handler = type("Handler", (_Handler,), {"page_cfg": dict(page_cfg)})
    srv = ThreadingHTTPServer((host, port), functools.partial(handler, directory=str(STATIC)))
    threading.Thread(target=srv.serve_forever, name="vsense-dashboard", daemon=True).start()
    return srv


def export(page_cfg: dict, out: str | Path) -> Path:
    """Copy the page and a ``config.js`` with ``page_cfg`` into ``out``; returns index.html."""
    out = Path(out)
    shutil.copytree(STATIC, out, dirs_exist_ok=True)
    (out / "config.js").write_bytes(config_js(page_cfg))
    return out / "index.html"


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("-c", "--config", default=None,
                   help="daemon config (edge.toml): broker host, TLS, user, password_env, base")
    p.add_argument("--url", default=None, help="broker WebSocket URL, e.g. ws://pi.local:9001")
    p.add_argument("--ws-port", type=int, default=DEFAULT_WS_PORT,
                   help="broker websockets listener port (default %(default)s)")
    p.add_argument("--base", default=None, help="topic root (default [mqtt] base_topic or vsense)")
    p.add_argument("--device", default="", help="device shown first")
    p.add_argument("--window", type=float, default=10.0,
                   help="plotted window [s] (default %(default)s)")
    p.add_argument("--listen", default="127.0.0.1", help="HTTP address (default %(default)s)")
    p.add_argument("--port", type=int, default=DEFAULT_HTTP_PORT,
                   help="HTTP port (default %(default)s; 0 = any free port)")
    p.add_argument("--export", default=None, metavar="DIR",
                   help="write the page and its config.js into DIR (open DIR/index.html) and exit")
    return p


def run_dashboard(args) -> int:
    from edge.daemon.config import ConfigError, load_config

    try:
        cfg = load_config(args.config) if args.config else None
        pc = page_config(cfg, url=args.url, ws_port=args.ws_port, base=args.base,
                         device=args.device, window_s=args.window)
    except (ConfigError, ValueError) as e:
        print(f"vsense-edge dashboard: error: {e}", file=sys.stderr)
        return 2
    if args.export:
        print(f"open {export(pc, args.export)}")
        return 0
    try:
        srv = serve(pc, args.listen, args.port)
    except OSError as e:
        print(f"vsense-edge dashboard: error: {args.listen}:{args.port}: {e.strerror or e}",
              file=sys.stderr)
        return 2
    host, port = srv.server_address[:2]
    print(f"vsense dashboard on http://{host}:{port}/ (broker {pc['url']}, topic root "
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
