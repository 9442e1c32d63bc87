"""The client commands log in like the daemon (edge.monitor.connect): `vsense-edge monitor`,
`monitor --fleet` and `vsense-edge dashboard` against a real Mosquitto set up by the installer
(deploy/mosquitto.sh: password file, access list, no anonymous access) with a TLS listener
whose self-signed CA the test makes; every refusal is named (login, subscription, TLS)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import Broker, free_port

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.mqtt,
              pytest.mark.skipif(shutil.which("mosquitto_passwd") is None
                                 and not os.access("/usr/bin/mosquitto_passwd", os.X_OK),
                                 reason="mosquitto_passwd not installed (apt-get install "
                                        "mosquitto)")]


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """Mosquitto with the installer's files: plain port, TLS port (CA of this test)."""
    pytest.importorskip("cryptography")
    from conftest import _mosquitto_binary
    from test_harden_broker import _ca_and_server

    d = tmp_path_factory.mktemp("login")
    ca = _ca_and_server(d, "good")
    other_ca = _ca_and_server(d, "other")
    port, tls_port, ws = free_port(), free_port(), free_port()
    subprocess.run(["bash", str(ROOT / "deploy" / "mosquitto.sh"), "--device", "dev1",
                    "--conf-dir", str(d), "--env-file", str(d / "env"), "--secrets-dir",
                    str(d / "sec"), "--port", str(port), "--websockets", "--ws-port", str(ws),
                    "--tls-port", str(tls_port), "--tls-cert", str(d / "good-server.crt"),
                    "--tls-key", str(d / "good-server.key"), "--ca-file", str(ca)],
                   check=True, capture_output=True, timeout=60)
    conf = d / "conf.d" / "vsense.conf"
    with open(conf, "a") as f:
        f.write("log_dest stdout\npersistence false\n"
                + ("user root\n" if os.geteuid() == 0 else ""))
    b = Broker(_mosquitto_binary(), conf, port, d / "mosquitto.log")
    b.start()  # returns when the plain port accepts; the TLS listener may come up later
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", tls_port), timeout=0.5).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                b.stop()
                raise RuntimeError(f"mosquitto's TLS listener {tls_port} did not come up: "
                                   f"{(d / 'mosquitto.log').read_text()[-2000:]}") from None
            time.sleep(0.05)
    b.tls_port, b.ca, b.other_ca, b.dir = tls_port, ca, other_ca, d
    b.dev_pw = (d / "env").read_text().split("=", 1)[1].strip()
    b.viewer_file = d / "sec" / "mqtt-viewer.secret"
    yield b
    b.stop()


class Device:
    """Publishes as the device user dev1 (its own topics only): retained status and meta,
    then estimate batches and health messages until stopped."""

    def __init__(self, broker):
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        from test_monitor import HEALTH, META

        self.meta, self.health = META, HEALTH
        self.c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="dev1")
        self.c.username_pw_set("dev1", broker.dev_pw)
        self.c.connect(broker.host, broker.port)
        self.c.loop_start()
        self.stop = threading.Event()
        self.th = threading.Thread(target=self.run, daemon=True)

    def pub(self, sub, payload, retain=False):
        self.c.publish(f"vsense/dev1/{sub}", payload, qos=1, retain=retain).wait_for_publish(5)

    def run(self):
        from test_monitor import batch

        rng = np.random.default_rng(3)
        self.pub("status", json.dumps({"state": "running", "t": time.time()}), retain=True)
        self.pub("meta", json.dumps(self.meta), retain=True)
        seq = 0
        while not self.stop.wait(0.05):  # a batch of 50 every 50 ms: about 1,000 samples/s
            self.pub("estimates", batch(seq, 50, rng)[0])
            if seq % 500 == 0:
                self.pub("health", json.dumps(dict(self.health, samples=seq)))
            seq += 50

    def __enter__(self):
        self.th.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.th.join(10)
        self.pub("status", b"", retain=True)
        self.pub("meta", b"", retain=True)
        self.c.disconnect()
        self.c.loop_stop()


def _monitor(capsys, *args):
    from edge.cli import main

    code = main(["monitor", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_viewer_logs_in_over_tls_with_a_password_file(secured, capsys):
    """The installer's viewer login (password file) over the TLS listener with the test's
    CA: the monitor shows the device's data."""
    with Device(secured):
        code, out, err = _monitor(
            capsys, "--broker", f"127.0.0.1:{secured.tls_port}", "--tls-ca", str(secured.ca),
            "--username", "viewer", "--password-file", str(secured.viewer_file),
            "--device", "dev1", "--once", "--timeout", "10")
    assert code == 0, err
    assert f"device dev1 @ 127.0.0.1:{secured.tls_port} (TLS) as viewer" in out
    assert "chain-abc123" in out and "p50 55 / p99 408" in out


@pytest.mark.parametrize("login,expected", [
    ((), "the broker refused the login: Not authorized"),
    (("--username", "viewer", "--password-env", "VSENSE_TEST_BAD_PW"),
     "the broker refused the login: Not authorized"),
])
def test_a_refused_login_is_named(secured, capsys, monkeypatch, login, expected):
    """Anonymous and wrong-password logins: exit 2 and the broker's reason (Mosquitto 2.0
    answers MQTT 3.1.1 clients 'not authorised' for both), not a timeout."""
    monkeypatch.setenv("VSENSE_TEST_BAD_PW", "not-the-password")
    code, _, err = _monitor(capsys, "--broker", f"127.0.0.1:{secured.port}", *login,
                            "--device", "dev1", "--once", "--timeout", "5")
    assert code == 2
    assert f"broker 127.0.0.1:{secured.port}" in err and expected in err
    assert "--password-file" in err  # what to check
    assert "within" not in err


def test_a_login_that_may_not_read_is_named(secured, capsys, tmp_path):
    """The device user may read only its own cmd topic. Mosquitto 2.0.11 grants its
    subscription (SUBACK 0, measured) and filters what it may not read, so with the device's
    retained status and meta on the broker the device login receives nothing and the monitor
    names the access list and the user; the viewer receives them (no such note)."""
    pw = tmp_path / "pw"
    pw.write_text(secured.dev_pw + "\n")
    code, _, err = _monitor(capsys, "--broker", f"127.0.0.1:{secured.port}", "--username",
                            "nobody", "--password-file", str(pw), "--device", "dev1", "--once",
                            "--timeout", "5")
    assert code == 2 and "refused the login" in err  # unknown user: refused at login
    dev = Device(secured)  # not run: only the retained messages
    dev.pub("status", json.dumps({"state": "running", "t": time.time()}), retain=True)
    dev.pub("meta", json.dumps(dev.meta), retain=True)
    dev.c.disconnect()
    dev.c.loop_stop()
    try:
        code, _, err = _monitor(capsys, "--broker", f"127.0.0.1:{secured.port}",
                                "--username", "dev1", "--password-file", str(pw), "--device",
                                "dev1", "--once", "--timeout", "2")
        assert code == 1
        assert ("nothing arrived on vsense/dev1/# (the device is not running, --device or "
                "--base is wrong, or the broker's access list does not let user dev1 read "
                "it)") in err, err
        code, _, err = _monitor(capsys, "--broker", f"127.0.0.1:{secured.port}",
                                "--username", "viewer", "--password-file",
                                str(secured.viewer_file), "--device", "dev1", "--once",
                                "--timeout", "2")
        assert code == 1 and "no estimates from dev1" in err and "nothing arrived" not in err
    finally:
        dev = Device(secured)
        dev.pub("status", b"", retain=True)
        dev.pub("meta", b"", retain=True)
        dev.c.disconnect()
        dev.c.loop_stop()


def test_tls_failures_are_named(secured, capsys):
    """A wrong CA, a plain client on the TLS port and a TLS client on the plain port."""
    viewer = ("--username", "viewer", "--password-file", str(secured.viewer_file),
              "--device", "dev1", "--once", "--timeout", "5")
    code, _, err = _monitor(capsys, "--broker", f"127.0.0.1:{secured.tls_port}", "--tls-ca",
                            str(secured.other_ca), *viewer)
    assert code == 2 and "TLS certificate verification failed" in err and "--tls-ca" in err
    code, _, err = _monitor(capsys, "--broker", f"127.0.0.1:{secured.tls_port}", *viewer)
    assert code == 2
    assert "closed the connection without answering the login (a TLS port?" in err, err
    code, _, err = _monitor(capsys, "--broker", f"127.0.0.1:{secured.port}", "--tls-ca",
                            str(secured.ca), *viewer)
    assert code == 2 and "during the TLS handshake: is this port a plain (not TLS) listener?" \
        in err, err


def _edge_toml(path: Path, secured, **mqtt) -> Path:
    keys = {"host": "127.0.0.1", "port": secured.tls_port, "tls": True,
            "ca_file": str(secured.ca), "username": "dev1",
            "password_env": "VSENSE_MQTT_PASSWORD", **mqtt}
    body = "\n".join(f"{k} = {json.dumps(v)}" for k, v in keys.items())
    path.write_text(f'[device]\nid = "dev1"\n\n[[channels]]\nname = "d110"\npin = "AIN0"\n\n'
                    f"[mqtt]\n{body}\n")
    return path


def test_config_gives_broker_tls_and_device_but_not_the_device_login(secured, capsys,
                                                                    tmp_path, monkeypatch):
    """``--config edge.toml``: host, TLS port, CA and device id from the device's file; its
    own login (user = device id) is refused with what to give instead, and the viewer's
    password file works with the rest of the file."""
    monkeypatch.setenv("VSENSE_MQTT_PASSWORD", secured.dev_pw)
    toml = _edge_toml(tmp_path / "edge.toml", secured)
    code, _, err = _monitor(capsys, "--config", str(toml), "--once", "--timeout", "5")
    assert code == 2 and "is the device's own login" in err
    assert "--username viewer --password-file" in err
    with Device(secured):
        code, out, err = _monitor(capsys, "--config", str(toml), "--username", "viewer",
                                  "--password-file", str(secured.viewer_file), "--once",
                                  "--timeout", "10")
    assert code == 0, err
    assert f"device dev1 @ 127.0.0.1:{secured.tls_port} (TLS) as viewer" in out


def test_fleet_once_logs_in_and_waits_for_health(secured, capsys):
    """``monitor --fleet --once`` as viewer over TLS: the line of dev1 carries the health
    figures (p99 408 us, 7 lost, CPU 6.6 %) because it waits for a health message."""
    with Device(secured):
        code, out, err = _monitor(
            capsys, "--fleet", "--broker", f"127.0.0.1:{secured.tls_port}", "--tls-ca",
            str(secured.ca), "--username", "viewer", "--password-file",
            str(secured.viewer_file), "--once", "--timeout", "15")
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("dev1 "))
    assert "running" in line and "chain-abc123" in line
    assert line.split()[5:9] == ["408", "7", "0", "6.6"], line


def test_dashboard_names_a_refused_login_and_serves_a_good_one(secured, capsys, tmp_path):
    """``vsense-edge dashboard`` (relay) logs in before serving: a wrong password is named
    (exit 2); the viewer's login over TLS serves a page whose config carries it."""
    from edge.cli import main

    bad = tmp_path / "bad"
    bad.write_text("wrong\n")
    code = main(["dashboard", "--broker", f"127.0.0.1:{secured.tls_port}", "--tls-ca",
                 str(secured.ca), "--username", "viewer", "--password-file", str(bad),
                 "--port", "0"])
    err = capsys.readouterr().err
    assert code == 2 and "refused the login: Not authorized" in err, err

    from edge.dashboard import check_login, page_config, serve
    from edge.monitor.connect import broker_settings
    from urllib.request import urlopen

    args = type("A", (), {"broker": f"127.0.0.1:{secured.tls_port}", "tls_ca": str(secured.ca),
                          "username": "viewer", "password_file": str(secured.viewer_file)})()
    s = broker_settings(args)
    check_login(s)  # raises on refusal
    srv = serve(page_config({"mqtt": s}, username=s["username"], password=s["password"],
                            relay=True), "127.0.0.1", 0, mqtt_cfg=s)
    try:
        js = urlopen(f"http://127.0.0.1:{srv.server_address[1]}/config.js", timeout=5).read()
    finally:
        srv.shutdown()
    assert b'"username": "viewer"' in js and b'"url": "relay"' in js
