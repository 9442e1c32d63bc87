"""Session fixtures: a private Mosquitto broker on a free loopback port.

The ``mosquitto`` fixture starts ``/usr/sbin/mosquitto`` (or ``mosquitto`` on PATH) with a
temporary config (listener 127.0.0.1:<free port>, anonymous, no persistence) once per
session and stops it at the end. Without the binary the MQTT tests are skipped with a clear
message, except in CI (``CI=true``), where they fail.

Edge tier: the test modules in :data:`EDGE_MODULES` need only the base install (``pip install .`` plus pytest: numpy, numba, onnxruntime, paho-mqtt; no
scipy, no ``offline`` extra). ``pytest -m edge`` selects them and does not even collect the other
modules (they may import scipy at module level); tests/edge_tier.sh runs them in a
clean venv and tests/arm64.sh under arm64 emulation. Add a module here only if it passes there.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

#: Test modules whose every test runs with the base install alone (``pytest -m edge``).
EDGE_MODULES = frozenset({
    "test_ads1256", "test_bundle", "test_config", "test_daemon", "test_estimator",
    "test_features", "test_monitor", "test_mqtt", "test_newmark", "test_packaging",
    "test_decode", "test_fastpath", "test_readme", "test_recorder", "test_sim_ads1256",
    "test_summary", "test_inverse_hook", "test_architecture",
    "test_import_graph", "test_cli_startup", "test_realtime_memory",
    "test_private_api", "test_hybrid_edge", "test_fatigue_sn", "test_bundle_checks",
})


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "edge: needs only the base install (no scipy/offline extra); "
                   "selected centrally by tests/conftest.py EDGE_MODULES")
    config.addinivalue_line(
        "markers", "reliability: the quick reliability check of the field-hardening items "
                   "(tests/reliability_tests.txt; bash tests/run.sh --reliability)")


def pytest_ignore_collect(collection_path, config):
    if (config.getoption("markexpr", "") or "").strip() == "edge" and collection_path.is_file() \
            and collection_path.name.startswith("test_") and collection_path.suffix == ".py":
        return collection_path.stem not in EDGE_MODULES or None
    return None


def _slow_tests() -> set[str]:
    """Tests (``file::name``, without parameters) and whole modules (``file``) listed in
    tests/slow_tests.txt (tests/slowest.py writes it from measured durations): marked ``slow``
    centrally, so ``tests/run.sh --fast`` skips them."""
    p = Path(__file__).with_name("slow_tests.txt")
    if not p.is_file():
        return set()
    return {x.split("#")[0].strip() for x in p.read_text().splitlines()} - {""}


def reliability_tests() -> dict[str, int]:
    """``file::test`` -> issue item number, from tests/reliability_tests.txt."""
    out = {}
    for line in Path(__file__).with_name("reliability_tests.txt").read_text().splitlines():
        name, _, note = line.partition("#")
        if name.strip():
            out[name.strip()] = int(note.split("item")[1])
    return out


def pytest_collection_modifyitems(config, items):
    slow = _slow_tests()
    reliable = reliability_tests()
    for item in items:
        if item.nodeid.split("[")[0] in reliable:
            item.add_marker(pytest.mark.reliability)
        mod = getattr(item, "module", None)
        if mod is not None and mod.__name__.rsplit(".", 1)[-1] in EDGE_MODULES:
            item.add_marker(pytest.mark.edge)
        if item.nodeid.split("[")[0] in slow or item.nodeid.split("::")[0] in slow:
            item.add_marker(pytest.mark.slow)


def _mosquitto_binary() -> str | None:
    if os.access("/usr/sbin/mosquitto", os.X_OK):
        return "/usr/sbin/mosquitto"
    return shutil.which("mosquitto")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Broker:
    """A running Mosquitto: ``host``, ``port``; :meth:`stop` / :meth:`start` for outages."""

    binary: str
    conf: Path
    port: int
    log: Path
    host: str = "127.0.0.1"
    proc: subprocess.Popen | None = None

    def start(self, timeout: float = 10.0) -> None:
        self.proc = subprocess.Popen([self.binary, "-c", str(self.conf)],
                                     stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mosquitto exited with {self.proc.returncode}: "
                                   f"{self.log.read_text()[-2000:]}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"mosquitto did not listen on port {self.port} within {timeout} s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None


@pytest.fixture(scope="session")
def mosquitto(tmp_path_factory):
    binary = _mosquitto_binary()
    if binary is None:
        msg = ("mosquitto binary not found (/usr/sbin/mosquitto or on PATH); "
               "install it with `apt-get install mosquitto` (tests/run.sh does)")
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(msg + " – required in CI")
        pytest.skip(msg)
    d = tmp_path_factory.mktemp("mosquitto")
    port = free_port()
    conf = d / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                    "log_dest stdout\nmax_queued_messages 100000\n"
                    "max_inflight_messages 100\n")
    broker = Broker(binary, conf, port, d / "mosquitto.log")
    broker.start()
    yield broker
    broker.stop()


class Subscriber:
    """A paho (2.x) test client collecting messages per topic; reconnects by itself."""

    def __init__(self, broker: Broker, topics, client_id: str):
        import threading

        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.messages: dict[str, list] = {}
        self.cond = threading.Condition()
        self.topics = [topics] if isinstance(topics, str) else list(topics)
        c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id)
        c.reconnect_delay_set(0.1, 0.5)

        def on_connect(client, userdata, flags, rc, props):
            if self.topics:
                client.subscribe([(t, 1) for t in self.topics])
            else:  # a publishing-only client: connected is ready
                on_subscribe(client, userdata, None, [], props)

        def on_subscribe(client, userdata, mid, reason_codes, props):
            # the broker's SUBACK: from here on every message on these topics reaches us
            with self.cond:
                self.subscribed = True
                self.cond.notify_all()

        def on_message(client, userdata, msg):
            with self.cond:
                self.messages.setdefault(msg.topic, []).append((msg.payload, msg.retain))
                self.cond.notify_all()

        self.subscribed = False
        c.on_connect = on_connect
        c.on_subscribe = on_subscribe
        c.on_message = on_message
        c.connect_async(broker.host, broker.port, 10)
        c.loop_start()
        self.client = c
        if not self.wait(lambda: self.subscribed, 30):
            raise TimeoutError(f"{client_id}: no SUBACK from the broker within 30 s")

    def wait(self, pred, timeout=10.0) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True

    def get(self, topic) -> list:
        with self.cond:
            return list(self.messages.get(topic, []))

    def publish(self, topic, payload, qos=1):
        self.client.publish(topic, payload, qos=qos).wait_for_publish(5)

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture
def subscriber(mosquitto):
    """Factory: ``subscriber(topics, client_id)`` -> :class:`Subscriber` (closed at teardown)."""
    made = []

    def make(topics, client_id="test-sub"):
        s = Subscriber(mosquitto, topics, client_id)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()
