"""Access control that the installer sets up (deploy/mosquitto.sh), against a real
Mosquitto started with exactly the files it writes: no anonymous access, devices publish
only their own topics, only the operator may send commands, a session cannot be taken over
with another user's credentials, the WebSockets listener has the same rules, and the daemon
reports a refused login loudly."""

import json
import logging
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import Broker, free_port
from helpers import chain_bundle

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("mosquitto_passwd") is None and
                                not os.access("/usr/bin/mosquitto_passwd", os.X_OK),
                                reason="mosquitto_passwd not installed (apt-get install mosquitto)")


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory):
    from conftest import _mosquitto_binary

    d = tmp_path_factory.mktemp("acl")
    port, ws = free_port(), free_port()
    subprocess.run(["bash", str(ROOT / "deploy" / "mosquitto.sh"), "--device", "dev1",
                    "--conf-dir", str(d), "--env-file", str(d / "env"), "--secrets-dir",
                    str(d / "sec"), "--port", str(port), "--ws-port", str(ws), "--websockets",
                    "--insecure"], check=True, capture_output=True, timeout=60)
    conf = d / "conf.d" / "vsense.conf"
    with open(conf, "a") as f:
        f.write("log_dest stdout\npersistence false\n")
        if os.geteuid() == 0:  # keep root: the test's files are not readable by 'mosquitto'
            f.write("user root\n")
    b = Broker(_mosquitto_binary(), conf, port, d / "mosquitto.log")
    b.start()
    pw = {"dev1": (d / "env").read_text().split("=", 1)[1].strip(),
          "operator": (d / "sec" / "mqtt-operator.secret").read_text().strip(),
          "viewer": (d / "sec" / "mqtt-viewer.secret").read_text().strip()}
    b.ws_port, b.pw = ws, pw
    yield b
    b.stop()


class Client:
    def __init__(self, broker, user, password, client_id, topics=(), ws=False, port=None,
                 ca=None):
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.cond = threading.Condition()
        self.msgs, self.rc, self.disconnects = [], None, 0
        c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                        transport="websockets" if ws else "tcp")
        if user:
            c.username_pw_set(user, password)
        if ca is not None:
            c.tls_set(ca_certs=str(ca))

        def on_connect(cl, u, flags, rc, props):
            for t in topics:
                cl.subscribe(t, qos=1)
            with self.cond:
                self.rc = rc
                self.cond.notify_all()

        def on_subscribe(cl, u, mid, rcs, props):
            with self.cond:
                self.subscribed = True
                self.cond.notify_all()

        def on_message(cl, u, m):
            with self.cond:
                self.msgs.append((m.topic, m.payload))
                self.cond.notify_all()

        def on_disconnect(cl, u, flags, rc, props):
            with self.cond:
                self.disconnects += 1
                self.cond.notify_all()

        self.subscribed = not topics
        c.on_connect, c.on_message, c.on_subscribe = on_connect, on_message, on_subscribe
        c.on_disconnect = on_disconnect
        c.connect_async(broker.host, port or (broker.ws_port if ws else broker.port), 10)
        c.loop_start()
        self.c = c

    def wait(self, pred, timeout=10.0):
        with self.cond:
            return self.cond.wait_for(pred, timeout)

    def pub(self, topic, payload):
        self.c.publish(topic, payload, qos=1).wait_for_publish(5)

    def close(self):
        self.c.disconnect()
        self.c.loop_stop()


def _client(broker, user, cid, topics=(), ws=False):
    cl = Client(broker, user, broker.pw.get(user), cid, topics, ws)
    assert cl.wait(lambda: cl.rc is not None)
    return cl


def test_anonymous_and_wrong_passwords_are_refused(acl_broker):
    anon = Client(acl_broker, None, None, "anon")
    bad = Client(acl_broker, "dev1", "wrong", "bad")
    try:
        assert anon.wait(lambda: anon.rc is not None) and anon.rc.is_failure
        assert bad.wait(lambda: bad.rc is not None) and bad.rc.is_failure
    finally:
        anon.close()
        bad.close()


def test_roles_only_operator_commands_devices_own_topics(acl_broker):
    dev = _client(acl_broker, "dev1", "dev1", ["vsense/dev1/cmd"])
    view = _client(acl_broker, "viewer", "v1", ["vsense/#"])
    op = _client(acl_broker, "operator", "op1")
    try:
        assert not dev.rc.is_failure and dev.wait(lambda: dev.subscribed)
        assert view.wait(lambda: view.subscribed)
        view.pub("vsense/dev1/cmd", b'{"cmd": "pause", "id": "viewer"}')  # refused
        dev.pub("vsense/dev1/cmd", b'{"cmd": "pause", "id": "self"}')  # refused
        dev.pub("vsense/dev2/estimates", b"spoof")  # another device's topic: refused
        dev.pub("vsense/dev1/estimates", b"mine")
        op.pub("vsense/dev1/cmd", b'{"cmd": "status", "id": "op"}')
        assert dev.wait(lambda: any(b'"op"' in p for _, p in dev.msgs))
        assert view.wait(lambda: ("vsense/dev1/estimates", b"mine") in view.msgs)
        cmds = [p for t, p in dev.msgs if t == "vsense/dev1/cmd"]
        assert cmds == [b'{"cmd": "status", "id": "op"}']
        assert not any(t == "vsense/dev2/estimates" for t, _ in view.msgs)
        # another user presenting the device's client id does not take its session over
        op.close()
        thief = _client(acl_broker, "operator", "dev1")  # on the MQTT listener
        dev.pub("vsense/dev1/estimates", b"still here")
        assert view.wait(lambda: ("vsense/dev1/estimates", b"still here") in view.msgs)
        assert dev.disconnects == 0
        thief.close()
    finally:
        for c in (dev, view, op):
            c.close()


def test_websockets_listener_same_rules(acl_broker):
    dev = _client(acl_broker, "dev1", "dev1", ["vsense/dev1/cmd"])
    op = _client(acl_broker, "operator", "op-ws", ws=True)
    anon = Client(acl_broker, None, None, "anon-ws", ws=True)
    try:
        assert not op.rc.is_failure
        assert anon.wait(lambda: anon.rc is not None) and anon.rc.is_failure
        assert dev.wait(lambda: dev.subscribed)
        op.pub("vsense/dev1/cmd", b'{"cmd": "status", "id": "ws"}')
        assert dev.wait(lambda: any(b'"ws"' in p for _, p in dev.msgs))
    finally:
        for c in (dev, op, anon):
            c.close()


def test_daemon_with_device_credentials_and_loud_refusal(acl_broker, tmp_path, monkeypatch,
                                                         caplog):
    from edge.daemon.app import run_daemon
    from edge.daemon.config import config_from_dict

    p = tmp_path / "chain.npz"
    chain_bundle(window=3, kinds=("displacement",)).save(p)
    view = _client(acl_broker, "viewer", "v2", ["vsense/dev1/status"])
    assert view.wait(lambda: view.subscribed)

    def cfg(env):
        return config_from_dict({
            "device": {"id": "dev1"}, "bundle": {"path": str(p)},
            "channels": [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0}],
            "mqtt": {"host": "127.0.0.1", "port": acl_broker.port, "username": "dev1",
                     "password_env": env, "require_broker": True, "connect_timeout_s": 5.0,
                     "reconnect_min_s": 0.2, "reconnect_max_s": 0.5},
            "recorder": {"enabled": False},
            "simulate": {"clock": "virtual", "duration_s": 0.5, "level": "signal"}})

    try:
        monkeypatch.setenv("PW_OK", acl_broker.pw["dev1"])
        assert run_daemon(cfg("PW_OK"), simulate=True, install_signals=False) == 0
        assert view.wait(lambda: any(json.loads(x)["state"] == "stopped"
                                     for t, x in view.msgs))
        monkeypatch.setenv("PW_BAD", "not-the-password")
        with caplog.at_level(logging.INFO, logger="vsense"):
            assert run_daemon(cfg("PW_BAD"), simulate=True, install_signals=False) == 7
        assert f"127.0.0.1:{acl_broker.port} refused the connection: Not authorized" \
            in caplog.text
    finally:
        view.close()


def _ca_and_server(d: Path, name: str):
    """A CA and a server certificate for 127.0.0.1 signed by it (PEM files in ``d``)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def cert(subject, issuer, pub, key, ca, san=None):
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
             .public_key(pub).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(days=1))
             .not_valid_after(now + datetime.timedelta(days=2))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if san:
            b = b.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return b.sign(key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} CA")])
    ca = cert(ca_name, ca_name, ca_key.public_key(), ca_key, True)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = cert(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]), ca_name,
               srv_key.public_key(), ca_key, False,
               [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    pem = serialization.Encoding.PEM
    (d / f"{name}-ca.crt").write_bytes(ca.public_bytes(pem))
    (d / f"{name}-server.crt").write_bytes(srv.public_bytes(pem))
    (d / f"{name}-server.key").write_bytes(srv_key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return d / f"{name}-ca.crt"


def test_tls_listener_and_a_wrong_ca_is_named(tmp_path, caplog):
    """The installer's TLS option works with the right CA; a wrong CA is logged as a TLS
    verification failure naming host:port (it used to run silently, exit 0)."""
    from conftest import _mosquitto_binary
    from edge.daemon.config import config_from_dict
    from edge.daemon.mqtt import CommandRegistry, Publisher

    pytest.importorskip("cryptography")
    good_ca = _ca_and_server(tmp_path, "good")
    wrong_ca = _ca_and_server(tmp_path, "other")
    port, tls_port, ws = free_port(), free_port(), free_port()
    subprocess.run(["bash", str(ROOT / "deploy" / "mosquitto.sh"), "--device", "tdev",
                    "--conf-dir", str(tmp_path), "--env-file", str(tmp_path / "env"),
                    "--secrets-dir", str(tmp_path / "sec"), "--port", str(port), "--ws-port",
                    str(ws), "--tls-port", str(tls_port), "--tls-cert",
                    str(tmp_path / "good-server.crt"), "--tls-key",
                    str(tmp_path / "good-server.key"), "--ca-file", str(good_ca)],
                   check=True, capture_output=True, timeout=60)
    conf = tmp_path / "conf.d" / "vsense.conf"
    with open(conf, "a") as f:
        f.write("log_dest stdout\n" + ("user root\n" if os.geteuid() == 0 else ""))
    b = Broker(_mosquitto_binary(), conf, port, tmp_path / "mosquitto.log")
    b.start()
    pw = (tmp_path / "env").read_text().split("=", 1)[1].strip()
    try:
        for ca, ok in ((good_ca, True), (wrong_ca, False)):
            cfg = config_from_dict({"device": {"id": "tdev"},
                                    "channels": [{"name": "y0", "pin": "AIN0"}],
                                    "mqtt": {"host": "127.0.0.1", "port": tls_port, "tls": True,
                                             "ca_file": str(ca), "username": "tdev",
                                             "reconnect_min_s": 5.0}})
            pub = Publisher(cfg["mqtt"], "tdev", CommandRegistry(), ncol=1, password=pw)
            with caplog.at_level(logging.INFO, logger="vsense"):
                pub.start()
                if ok:
                    assert pub.wait_connected(20)
                else:
                    assert pub.failed_event.wait(20)
                pub.stop(timeout=0.1)
        assert (f"cannot connect to 127.0.0.1:{tls_port}: TLS certificate verification "
                "failed") in caplog.text
    finally:
        b.stop()


def test_default_broker_setup_is_tls_only_on_loopback_and_closed(tmp_path, monkeypatch):
    """Issue 26 item 4: deploy/mosquitto.sh as the installer runs it by default (no
    --insecure): a CA made with openssl, a TLS listener, plain MQTT on loopback only, no
    listener on any other address, no WebSockets; against a real Mosquitto started with
    exactly those files an anonymous client is refused on the TLS port, the device's
    credentials with the CA are accepted, and the daemon runs through it."""
    from conftest import _mosquitto_binary
    from edge.daemon.app import run_daemon
    from edge.daemon.config import config_from_dict

    port, tls_port = free_port(), free_port()
    subprocess.run(["bash", str(ROOT / "deploy" / "mosquitto.sh"), "--device", "tdev",
                    "--conf-dir", str(tmp_path), "--env-file", str(tmp_path / "env"),
                    "--secrets-dir", str(tmp_path / "sec"), "--port", str(port),
                    "--tls-port", str(tls_port)], check=True, capture_output=True, timeout=60)
    conf = tmp_path / "conf.d" / "vsense.conf"
    text = conf.read_text()
    assert sorted(re.findall(r"^listener (\d+) (\S+)$", text, re.M)) == sorted(
        [(str(port), "127.0.0.1"), (str(tls_port), "127.0.0.1")])
    assert "allow_anonymous false" in text and "websockets" not in text
    assert "pattern write vsense/%u/raw" in (tmp_path / "vsense.acl").read_text()
    ca = tmp_path / "certs" / "vsense-ca.crt"
    with open(conf, "a") as f:
        f.write("log_dest stdout\npersistence false\n" +
                ("user root\n" if os.geteuid() == 0 else ""))
    b = Broker(_mosquitto_binary(), conf, port, tmp_path / "mosquitto.log")
    b.start()
    pw = (tmp_path / "env").read_text().split("=", 1)[1].strip()
    b.pw = {"viewer": (tmp_path / "sec" / "mqtt-viewer.secret").read_text().strip()}
    clients = []
    try:
        anon = Client(b, None, None, "anon-tls", port=tls_port, ca=ca)
        clients.append(anon)
        assert anon.wait(lambda: anon.rc is not None) and anon.rc.is_failure
        dev = Client(b, "tdev", pw, "tdev", port=tls_port, ca=ca)
        clients.append(dev)
        assert dev.wait(lambda: dev.rc is not None) and not dev.rc.is_failure
        dev.close()
        clients.remove(dev)
        view = Client(b, "viewer", b.pw["viewer"], "v-tls", ["vsense/tdev/status"],
                      port=tls_port, ca=ca)
        clients.append(view)
        assert view.wait(lambda: view.subscribed)
        p = tmp_path / "chain.npz"
        chain_bundle(window=3, kinds=("displacement",)).save(p)
        monkeypatch.setenv("PW_TLS", pw)
        cfg = config_from_dict({
            "device": {"id": "tdev"}, "bundle": {"path": str(p)},
            "channels": [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0}],
            "mqtt": {"host": "127.0.0.1", "port": tls_port, "tls": True, "ca_file": str(ca),
                     "username": "tdev", "password_env": "PW_TLS", "require_broker": True,
                     "connect_timeout_s": 10.0},
            "recorder": {"enabled": False},
            "simulate": {"clock": "virtual", "duration_s": 0.5, "level": "signal"}})
        assert run_daemon(cfg, simulate=True, install_signals=False) == 0
        assert view.wait(lambda: any(json.loads(x)["state"] == "stopped"
                                     for t, x in view.msgs))
        # issue 26 item 6: the wrong protocol for the port is named (it logged only
        # "Unspecified error"): plain MQTT to the TLS port, TLS to the plain port
        from edge.daemon.mqtt import CommandRegistry, Publisher

        for tls, where, named, secret in (
                (False, tls_port, "is port %d a TLS listener?" % tls_port, pw),
                (True, port, "is port %d a TLS listener?" % port, pw),
                # a refusal (CONNACK) stays a refusal, not "closed before the broker answered"
                (True, tls_port, "broker refused the connection: Not authorized", "wrong")):
            m = dict(cfg["mqtt"], tls=tls, port=where, reconnect_min_s=5.0)
            pub = Publisher(m, "tdev", CommandRegistry(), ncol=1, password=secret)
            pub.start()
            try:
                assert pub.failed_event.wait(20) and named in (pub.last_error or "")
            finally:
                pub.stop(timeout=0.1)
    finally:
        for c in clients:
            c.close()
        b.stop()
