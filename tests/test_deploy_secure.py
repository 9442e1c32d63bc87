"""Issue 26 item 4: the installer is closed by default. ``deploy/install.sh --dry-run`` prints
every file it would write; these tests read them: the local broker has no anonymous access,
TLS with a CA made by openssl (or the user's), listeners on 127.0.0.1 and only the addresses
named with --listen, WebSockets only on request, the device's raw topic in the ACL, the
daemon's [mqtt] switched to TLS with its credentials, and no commands accepted unless listed.
A real Mosquitto run with the generated files: tests/test_harden_broker.py."""

import re
import subprocess
from pathlib import Path

import pytest

from edge.daemon.commands import CommandError, CommandRegistry, register_builtin_commands
from edge.daemon.config import load_config

ROOT = Path(__file__).resolve().parents[1]


def _dry(*args) -> str:
    r = subprocess.run(["bash", str(ROOT / "deploy" / "install.sh"), "--dry-run", *args],
                       capture_output=True, text=True, timeout=300)  # hang guard (apt-cache)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _written(out: str, name: str) -> str:
    """The content the dry run prints for the file ``name`` ("+ write <path>:" then "|   ")."""
    m = re.search(rf"^\+ write \S*{re.escape(name)}:\n((?:\|   .*\n|\|\n)*)", out, re.M)
    assert m, f"{name} not in the dry run"
    return "".join(line[4:] + "\n" for line in m.group(1).splitlines())


def _listeners(conf: str) -> list[tuple[str, str, bool]]:
    """(port, address, TLS) of every listener block."""
    out = []
    for block in re.split(r"^(?=listener )", conf, flags=re.M)[1:]:
        port, addr = re.match(r"listener (\d+) (\S+)", block).groups()
        out.append((port, addr, "certfile " in block))
    return out


def test_default_install_is_tls_on_loopback_with_credentials_and_no_commands():
    out = _dry()
    conf = _written(out, "conf.d/vsense.conf")
    assert "allow_anonymous false" in conf and "allow_anonymous true" not in conf
    assert sorted(_listeners(conf)) == [("1883", "127.0.0.1", False),
                                        ("8883", "127.0.0.1", True)]
    assert "websockets" not in conf  # the dashboard listener only on request
    assert re.search(r"^\+ openssl req -x509 .*vsense-ca\.key", out, re.M)  # the CA, made here
    acl = _written(out, "vsense.acl")
    for t in ("status", "meta", "estimates", "raw", "health", "params", "cmd/reply"):
        assert f"pattern write vsense/%u/{t}\n" in acl
    assert "topic write vsense/+/cmd" in acl.split("user operator")[1].split("user viewer")[0]
    # the daemon's [mqtt]: TLS to the local broker, its CA and credentials
    sed = next(line for line in out.splitlines() if line.startswith("+ sed -i"))
    for edit in ("s|^tls = false|tls = true|", "s|^port = 1883|port = 8883|",
                 'ca_file = "/etc/mosquitto/certs/vsense-ca.crt"',
                 'password_env = "VSENSE_MQTT_PASSWORD"'):
        assert edit in sed
    shipped = (ROOT / "deploy" / "edge.toml").read_text()
    for line in ("port = 1883", "tls = false", 'ca_file = ""', 'username = ""',
                 'password_env = ""'):  # what the edits find
        assert re.search(rf"^{re.escape(line)}(\s|$)", shipped, re.M), line


def test_shipped_config_accepts_no_command():
    cfg = load_config(ROOT / "deploy" / "edge.toml")
    assert cfg["mqtt"]["commands"] == []
    reg = CommandRegistry(allowed=cfg["mqtt"]["commands"])
    register_builtin_commands(reg)
    with pytest.raises(CommandError, match="not allowed on this device"):
        reg.parse(b'{"cmd": "pause"}')


def test_named_addresses_get_tls_listeners_and_the_certificate_names_them():
    out = _dry("--listen", "10.1.2.3", "--listen", "10.1.2.3", "--websockets",
               "--tls-name", "pi.lan")
    conf = _written(out, "conf.d/vsense.conf")
    assert sorted(_listeners(conf)) == [("1883", "127.0.0.1", False),
                                        ("8883", "10.1.2.3", True),
                                        ("8883", "127.0.0.1", True),
                                        ("9001", "127.0.0.1", True)]  # wss, once per address
    assert re.search(r"broker certificate for DNS:localhost,IP:127\.0\.0\.1,.*IP:10\.1\.2\.3,"
                     r"DNS:pi\.lan$", out, re.M)


def test_insecure_is_explicit_and_keeps_credentials():
    out = _dry("--insecure", "--listen", "10.1.2.3")
    conf = _written(out, "conf.d/vsense.conf")
    assert sorted(_listeners(conf)) == [("1883", "10.1.2.3", False),
                                        ("1883", "127.0.0.1", False)]
    assert "allow_anonymous false" in conf and "NO TLS (--insecure)" in out
    assert "+ openssl" not in out  # no CA made
    sed = next(line for line in out.splitlines() if line.startswith("+ sed -i"))
    assert "tls = true" not in sed and 'username = "cantilever-01"' in sed


def test_own_certificates_and_bad_addresses():
    out = _dry("--tls-cert", "/etc/ssl/b.crt", "--tls-key", "/etc/ssl/b.key", "--ca-file",
               "/etc/ssl/ca.crt")
    conf = _written(out, "conf.d/vsense.conf")
    assert "certfile /etc/ssl/b.crt" in conf and "+ openssl" not in out
    assert 'ca_file = "/etc/ssl/ca.crt"' in out
    for bad in (["--listen", "0.0.0.0; rm -rf /x"], ["--tls-cert", "/x.crt", "--tls-key",
                                                      "/x.key"]):
        r = subprocess.run(["bash", str(ROOT / "deploy" / "install.sh"), "--dry-run", *bad],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and "mosquitto.sh:" in r.stderr


def test_no_mosquitto_writes_no_broker_config():
    out = _dry("--no-mosquitto")
    assert "conf.d/vsense.conf" not in out and "apt-get install -y mosquitto" not in out
    assert "--no-mosquitto: set [mqtt]" in out
