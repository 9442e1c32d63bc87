"""The daemon speaks MQTT v5 and reads acknowledgement reason codes: against a real Mosquitto
whose ACL denies the device its `estimates` topic (PUBACK 0x87 "Not authorized" under v5,
silence under 3.1.1), the denial shows in health and status; 3.1.1 can still be forced."""

import json
import logging
import os
import shutil
import subprocess
import threading

import pytest

from conftest import Broker, Subscriber, _mosquitto_binary, free_port
from edge.daemon.app import run_daemon
from edge.daemon.config import config_from_dict
from helpers import chain_bundle

PASSWD = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"
pytestmark = pytest.mark.skipif(_mosquitto_binary() is None or not os.access(PASSWD, os.X_OK),
                                reason="mosquitto / mosquitto_passwd not installed "
                                       "(apt-get install mosquitto)")
DEV = "dev5"
DENIED = f"vsense/{DEV}/estimates"


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    """Mosquitto 2 with passwords and an ACL: ``dev5`` may publish every topic of its own
    but ``estimates``; ``viewer`` reads everything."""
    d = tmp_path_factory.mktemp("acl5")
    pw = d / "passwd"
    for i, (user, secret) in enumerate((("dev5", "d5"), ("viewer", "v5"))):
        subprocess.run([PASSWD, *(["-c"] if i == 0 else []), "-b", str(pw), user, secret],
                       check=True, capture_output=True, timeout=30)
    acl = d / "acl"
    acl.write_text(f"user {DEV}\n" + "".join(
        f"topic readwrite vsense/{DEV}/{t}\n" for t in ("status", "meta", "health", "raw",
                                                        "params", "cmd/reply"))
        + f"topic read vsense/{DEV}/cmd\n\nuser viewer\ntopic read vsense/#\n")
    port = free_port()
    conf = d / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous false\npassword_file {pw}\n"
                    f"acl_file {acl}\npersistence false\nlog_dest stdout\n"
                    + ("user root\n" if os.geteuid() == 0 else ""))
    b = Broker(_mosquitto_binary(), conf, port, d / "mosquitto.log")
    b.start()
    yield b
    b.stop()


def _viewer(broker) -> Subscriber:
    """A subscriber logged in as ``viewer`` (conftest's Subscriber is anonymous)."""
    import paho.mqtt.client as mqtt

    orig = mqtt.Client.connect_async

    def connect_async(self, *a, **k):
        self.username_pw_set("viewer", "v5")
        return orig(self, *a, **k)

    mqtt.Client.connect_async = connect_async
    try:
        return Subscriber(broker, [f"vsense/{DEV}/health", f"vsense/{DEV}/status"], "viewer5")
    finally:
        mqtt.Client.connect_async = orig


def _cfg(bundle, port, protocol, duration_s, monkeypatch):
    monkeypatch.setenv("VSENSE_TEST_PW", "d5")
    return config_from_dict({
        "device": {"id": DEV}, "bundle": {"path": str(bundle)},
        "channels": [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0}],
        "mqtt": {"host": "127.0.0.1", "port": port, "username": DEV,
                 "password_env": "VSENSE_TEST_PW", "protocol": protocol,
                 "health_interval_s": 0.5, "reconnect_min_s": 0.1, "reconnect_max_s": 0.5},
        "recorder": {"enabled": False},
        "simulate": {"clock": "real", "duration_s": duration_s, "level": "signal"}})


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    p = tmp_path_factory.mktemp("b5") / "chain.npz"
    chain_bundle(window=3, kinds=("displacement",)).save(p)
    return p


def _run(cfg):
    codes = []
    th = threading.Thread(target=lambda: codes.append(
        run_daemon(cfg, simulate=True, install_signals=False)))
    th.start()
    return th, codes


def _health(sub):
    return [json.loads(p) for p, _ in sub.get(f"vsense/{DEV}/health")]


def test_denied_topic_in_health_and_status_within_one_interval(acl_broker, bundle,
                                                               monkeypatch, caplog):
    view = _viewer(acl_broker)
    try:
        with caplog.at_level(logging.INFO, logger="vsense"):
            th, codes = _run(_cfg(bundle, acl_broker.port, "auto", 3.0, monkeypatch))
            try:
                assert view.wait(lambda: any(h["mqtt"]["denied"] for h in _health(view)), 20)
                assert view.wait(lambda: any(
                    json.loads(p).get("state") == "degraded" and
                    DENIED in json.loads(p).get("reason", "")
                    for p, _ in view.get(f"vsense/{DEV}/status")), 10)
            finally:
                th.join(30)
        assert codes == [0]
        hs = _health(view)
        assert all(h["mqtt"]["protocol"] == "5" and h["mqtt"]["denials_visible"] for h in hs)
        # within one health interval of the first estimates: in the next health message
        first = next(i for i, h in enumerate(hs) if h["estimates"] > 0)
        assert DENIED in (hs[first + 1]["mqtt"]["denied"] if first + 1 < len(hs) else {}) \
            or DENIED in hs[first]["mqtt"]["denied"], [h["mqtt"] for h in hs[:first + 2]]
        last = hs[-1]["mqtt"]["denied"]
        assert set(last) == {DENIED} and last[DENIED] > 10  # every batch, only this topic
        assert "Not authorized" in hs[-1]["degraded"]
        # logged once for the topic, not once per message
        assert sum(r.name == "vsense.mqtt" and f"the broker denies {DENIED}" in r.getMessage()
                   for r in caplog.records) == 1
        assert "(MQTT 5)" in caplog.text
    finally:
        view.close()


def test_forced_311_works_and_says_denials_are_invisible(acl_broker, bundle, monkeypatch):
    view = _viewer(acl_broker)
    try:
        th, codes = _run(_cfg(bundle, acl_broker.port, "3.1.1", 1.5, monkeypatch))
        try:
            assert view.wait(lambda: len(_health(view)) >= 2, 20)
        finally:
            th.join(30)
        assert codes == [0]
        hs = _health(view)
        assert all(h["mqtt"] == {"protocol": "3.1.1", "denials_visible": False,
                                 "denied": None} for h in hs), hs[-1]["mqtt"]
        assert all("degraded" not in h for h in hs)  # the broker drops silently under 3.1.1
    finally:
        view.close()


def test_monitor_shows_the_denied_topic(acl_broker, bundle, monkeypatch, tmp_path, capsys):
    """`vsense-edge monitor` (one device, then --fleet), logged in as `viewer`, names the topic
    the broker's ACL denies the device, from the device's health."""
    from edge.cli import main

    pw = tmp_path / "viewer.secret"
    pw.write_text("v5\n")
    login = ["--broker", f"127.0.0.1:{acl_broker.port}", "--username", "viewer",
             "--password-file", str(pw)]
    view = _viewer(acl_broker)
    th, codes = _run(_cfg(bundle, acl_broker.port, "auto", 8.0, monkeypatch))
    try:
        # the daemon is up and denied (its start takes a while on a loaded machine); health
        # every 0.5 s: a 2.5 s view holds several
        assert view.wait(lambda: any(h["mqtt"]["denied"] for h in _health(view)), 20)
        one = main(["monitor", *login, "--device", DEV, "--duration", "2.5", "--interval",
                    "0.5"])
        out_one = capsys.readouterr().out
        fleet = main(["monitor", *login, "--fleet", "--duration", "1.5", "--interval", "0.5"])
        out_fleet = capsys.readouterr().out
    finally:
        th.join(30)
        view.close()
    assert codes == [0] and one == 0 and fleet == 0
    assert f"mqtt      MQTT 5, DENIED by the broker: {DENIED} (" in out_one, out_one[-1500:]
    assert f"DENIED: {DENIED}" in out_fleet, out_fleet[-1500:]


class OldBroker:
    """A broker that knows no MQTT v5: a loopback gate in front of the real Mosquitto that
    answers a v5 CONNECT as a 3.1.1-only broker does (CONNACK return code 1, "unacceptable
    protocol version", then closes) and passes every other connection through."""

    def __init__(self, target):
        import socket

        self.target, self.refused_v5 = target, 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import socket

        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            first = self._read_packet(conn)
            if first is None:
                conn.close()
            elif first[first.index(b"MQTT") + 4] == 5:  # protocol level of the CONNECT
                self.refused_v5 += 1
                conn.sendall(b"\x20\x02\x00\x01")
                conn.close()
            else:
                up = socket.create_connection((self.target.host, self.target.port))
                up.sendall(first)
                for a, b in ((conn, up), (up, conn)):
                    threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _read_packet(conn) -> bytes | None:
        """One whole MQTT packet (fixed header, remaining length, body)."""
        def take(n):
            b = b""
            while len(b) < n:
                x = conn.recv(n - len(b))
                if not x:
                    return None
                b += x
            return b

        head = take(1)
        length, mult, raw = 0, 1, b""
        while head is not None:
            c = take(1)
            if c is None:
                return None
            raw += c
            length += (c[0] & 0x7F) * mult
            mult *= 128
            if not c[0] & 0x80:
                body = take(length)
                return None if body is None else head + raw + body
        return None

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                x = a.recv(65536)
                if not x:
                    break
                b.sendall(x)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.close()
            except OSError:
                pass

    def close(self):
        self.sock.close()


def test_auto_falls_back_to_311_when_the_broker_refuses_v5(mosquitto, subscriber):
    from edge.daemon.mqtt import CommandRegistry, Publisher

    old = OldBroker(mosquitto)
    sub = subscriber(["vsense/old1/health"], "s-old1")
    cfg = config_from_dict({"device": {"id": "old1"},
                            "channels": [{"name": "y0", "pin": "AIN0"}],
                            "mqtt": {"host": "127.0.0.1", "port": old.port,
                                     "reconnect_min_s": 0.1, "reconnect_max_s": 0.5}})["mqtt"]
    assert cfg["protocol"] == "auto"
    pub = Publisher(cfg, "old1", CommandRegistry(), ncol=1)
    try:
        pub.start()
        assert pub.wait_connected(10)
        assert old.refused_v5 == 1 and pub.acks.protocol == "3.1.1"
        assert pub.acks.health() == {"protocol": "3.1.1", "denials_visible": False,
                                     "denied": None}
        pub.send("vsense/old1/health", b'{"ok": 1}')
        assert sub.wait(lambda: sub.get("vsense/old1/health"), 10)
        assert pub.threads_problem() is None  # the 3.1.1 client's network thread runs
    finally:
        pub.stop()
        old.close()


def test_no_fallback_client_once_stop_has_begun():
    """A v5 connection closed before its CONNACK while the daemon stops (the start-up fuzz
    of tests/test_fuzz_startup.py, case 384 at load 8): the fallback made and started a
    3.1.1 client while stop() read ``self.client`` and joined that client's thread before it
    had started (RuntimeError: cannot join thread before it is started). Once stop() has
    begun, a fallback makes no client."""
    from edge.daemon.mqtt import CommandRegistry, Publisher

    cfg = config_from_dict({"device": {"id": "late1"},
                            "channels": [{"name": "y0", "pin": "AIN0"}],
                            "mqtt": {"host": "127.0.0.1", "port": 9}})["mqtt"]  # nothing there
    pub = Publisher(cfg, "late1", CommandRegistry(), ncol=1)
    pub.start()
    pub.stop(timeout=0.1)
    first = pub.client
    pub._fall_back(first)  # what paho's thread does on a close before CONNACK
    assert pub.client is first and pub.acks.protocol == "5"
