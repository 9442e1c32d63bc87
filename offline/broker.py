"""An MQTT broker for the demo and for tests: reuse, start Mosquitto, or embed amqtt.

:func:`find_or_start_broker` tries, in order,

1. a broker that already answers on ``localhost:1883`` (``prefer_existing=True``);
2. the ``mosquitto`` binary (``/usr/sbin/mosquitto`` or on ``PATH``) started on a free
   loopback port with a temporary config (anonymous, no persistence);
3. an **embedded** broker: amqtt (``pip install 'vsense[demo]'``) running on its own asyncio
   event loop in a background thread of this process, on a free loopback port.

Each returns a :class:`BrokerHandle` (``host``, ``port``, ``kind``, ``stop()``; also a context
manager). Only what this module started is stopped.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger("vsense.broker")

KINDS = ("existing", "mosquitto", "amqtt")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def answers(host: str, port: int, timeout: float = 0.3) -> bool:
    """True when something accepts a TCP connection on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _wait_listening(host: str, port: int, timeout: float, alive=lambda: True) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            return False
        if answers(host, port, 0.2):
            return True
        time.sleep(0.05)
    return False


@dataclass
class BrokerHandle:
    """A reachable MQTT broker. ``kind`` is one of :data:`KINDS`."""

    host: str
    port: int
    kind: str
    _stop: object = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self) -> None:
        """Stop the broker if this process started it (an existing broker is left alone)."""
        if self._stop is not None:
            stop, self._stop = self._stop, None
            stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def mosquitto_binary() -> str | None:
    if os.access("/usr/sbin/mosquitto", os.X_OK):
        return "/usr/sbin/mosquitto"
    return shutil.which("mosquitto")


def start_mosquitto(binary: str | None = None, host: str = "127.0.0.1", port: int | None = None,
                    timeout: float = 10.0) -> BrokerHandle:
    """Start ``mosquitto`` on ``host:port`` (a free port by default) with a temporary config."""
    binary = binary or mosquitto_binary()
    if binary is None:
        raise FileNotFoundError("mosquitto binary not found (/usr/sbin/mosquitto or on PATH)")
    port = port or free_port(host)
    d = Path(tempfile.mkdtemp(prefix="vsense-mosquitto-"))
    conf = d / "mosquitto.conf"
    conf.write_text(f"listener {port} {host}\nallow_anonymous true\npersistence false\n"
                    "log_dest stdout\nmax_queued_messages 100000\n")
    logf = open(d / "mosquitto.log", "ab")
    proc = subprocess.Popen([binary, "-c", str(conf)], stdout=logf, stderr=subprocess.STDOUT)

    def stop():
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        logf.close()
        shutil.rmtree(d, ignore_errors=True)

    if not _wait_listening(host, port, timeout, lambda: proc.poll() is None):
        stop()
        raise RuntimeError(f"mosquitto ({binary}) did not listen on {host}:{port} within "
                           f"{timeout:g} s")
    return BrokerHandle(host, port, "mosquitto", stop)


def start_embedded(host: str = "127.0.0.1", port: int | None = None,
                   timeout: float = 15.0) -> BrokerHandle:
    """Start an amqtt broker in a background thread (own event loop) on ``host:port``.

    Raises ImportError naming the extra (``vsense[demo]``) when amqtt is not installed.
    """
    try:
        from amqtt.broker import Broker
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("the embedded MQTT broker needs amqtt: pip install 'vsense[demo]' "
                          f"({e})") from None
    port = port or free_port(host)
    config = {
        "listeners": {"default": {"type": "tcp", "bind": f"{host}:{port}",
                                  "max_connections": 50}},
        # only anonymous auth: no $SYS publisher, no per-packet logging
        "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin":
                    {"allow_anonymous": True}},
    }
    for name in ("amqtt", "transitions"):
        logging.getLogger(name).setLevel(logging.WARNING)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    state: dict = {}

    def run():
        asyncio.set_event_loop(loop)
        try:
            broker = Broker(config, loop=loop)
            loop.run_until_complete(broker.start())
            state["broker"] = broker
        except BaseException as e:  # reported to the caller below
            state["error"] = e
            started.set()
            return
        started.set()
        loop.run_forever()
        try:
            loop.run_until_complete(broker.shutdown())
        except Exception:  # pragma: no cover - best effort at exit
            pass
        loop.close()

    th = threading.Thread(target=run, name="amqtt-broker", daemon=True)
    th.start()
    started.wait(timeout)
    if "error" in state:
        raise RuntimeError(f"embedded amqtt broker on {host}:{port} failed to start: "
                           f"{state['error']!r}")

    def stop():
        if loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        th.join(10)

    # broker.start() returns once the listener is bound (no probe: a bare TCP probe makes
    # amqtt log a decode warning)
    if "broker" not in state:
        stop()
        raise RuntimeError(f"embedded amqtt broker did not listen on {host}:{port} within "
                           f"{timeout:g} s")
    return BrokerHandle(host, port, "amqtt", stop)


def find_or_start_broker(prefer: str = "auto", host: str = "127.0.0.1",
                         existing_port: int = 1883) -> BrokerHandle:
    """A broker for the demo.

    Parameters
    ----------
    prefer : "auto" | "existing" | "mosquitto" | "amqtt"
        ``auto``: an existing broker on ``localhost:existing_port``, else a started
        ``mosquitto``, else the embedded amqtt broker. The other values force one kind
        (``existing`` fails when nothing answers).
    """
    if prefer not in ("auto",) + KINDS:
        raise ValueError(f"broker: expected one of auto, {', '.join(KINDS)}; got {prefer!r}")
    if prefer in ("auto", "existing"):
        if answers("localhost", existing_port):
            return BrokerHandle("localhost", existing_port, "existing")
        if prefer == "existing":
            raise RuntimeError(f"broker: nothing answers on localhost:{existing_port}")
    if prefer in ("auto", "mosquitto"):
        b = mosquitto_binary()
        if b is not None:
            try:
                return start_mosquitto(b, host)
            except RuntimeError as e:
                if prefer == "mosquitto":
                    raise
                log.warning("%s; using the embedded broker", e)
        elif prefer == "mosquitto":
            raise FileNotFoundError("broker: mosquitto binary not found")
    return start_embedded(host)
