"""How the client commands log in to the broker: ``vsense-edge monitor`` (and ``--fleet``),
``vsense-edge dashboard`` and ``benchmarks/fleet.py``.

They take the broker address, TLS and login exactly as the daemon's ``[mqtt]`` section has
them (the keys are validated by the daemon's schema, :func:`edge.daemon.config.check_section`),
from a device's config file and/or options; an option wins over the file:

==========================  ===============================================================
option                      meaning (``[mqtt]`` key)
==========================  ===============================================================
``-c, --config FILE``       a daemon config (``edge.toml``): ``host``, ``port``, ``tls``,
                            ``ca_file``, ``cert_file``, ``key_file``, ``username``,
                            ``password_env``, ``base_topic``, and ``[device] id``
``--broker HOST[:PORT]``    ``host``, ``port`` (default ``localhost:1883``; without a port:
                            the config's)
``--username NAME``         ``username`` (empty: anonymous)
``--password-file FILE``    the password: first line of FILE (e.g.
                            ``/etc/vsense/mqtt-viewer.secret`` written by the installer)
``--password-env NAME``     the password from environment variable NAME (``password_env``)
``--tls``                   ``tls``: connect with TLS (the system's CAs unless ``--tls-ca``)
``--tls-ca FILE``           ``ca_file`` (implies ``--tls``)
``--tls-cert/--tls-key``    ``cert_file``/``key_file``: client certificate (mutual TLS)
==========================  ===============================================================

A password is never an option's value (it would show in ``ps``). The clients refuse to log in
with the device's own user (``[mqtt] username`` equal to ``[device] id``, as the installer
sets it): the broker lets that user read only its ``cmd`` topic, and on the installer's
listener (``use_username_as_clientid``) the login would disconnect the daemon itself; log in
as ``viewer`` (``operator`` to send commands) instead.

:class:`BrokerSession` connects, subscribes, and when the broker says no, raises a
ConnectionError that names why: the CONNACK refusal (``Not authorized``, ``Bad user name or
password``), a refused subscription (the broker's access list), a TLS failure (certificate
verification, a TLS client on a plain port), or a plain client on a TLS port.
"""

from __future__ import annotations

import argparse
import os
import threading

from edge.daemon.config import check_section, load_config
from edge.daemon.mqtt import _describe_connect_error
from edge.monitor.view import parse_broker

#: The broker options: (flag, metavar, help).
OPTIONS = (
    ("--broker", "HOST[:PORT]", "broker address (default: [mqtt] host:port of --config, "
                                "else localhost:1883)"),
    ("--username", "NAME", "log in as NAME (default: [mqtt] username of --config, else "
                           "anonymous); e.g. viewer"),
    ("--password-file", "FILE", "password: the first line of FILE, e.g. "
                                "/etc/vsense/mqtt-viewer.secret"),
    ("--password-env", "NAME", "password: the environment variable NAME (default: [mqtt] "
                               "password_env of --config)"),
    ("--tls-ca", "FILE", "CA certificate (PEM) of the broker's TLS listener; implies --tls"),
    ("--tls-cert", "FILE", "client certificate (PEM) for mutual TLS"),
    ("--tls-key", "FILE", "client key (PEM) for mutual TLS"),
)


def add_broker_arguments(p: argparse.ArgumentParser, config: bool = True,
                         base: bool = True) -> argparse.ArgumentParser:
    """Add ``-c/--config`` (when ``config``), the :data:`OPTIONS`, ``--tls`` and ``--base``
    (when ``base``) to ``p``."""
    if config:
        p.add_argument("-c", "--config", default=None, metavar="FILE",
                       help="take broker, TLS, login, topic root and device id from this "
                            "daemon config (edge.toml); options below override it")
    for flag, metavar, text in OPTIONS[:1]:
        p.add_argument(flag, default=None, metavar=metavar, help=text)
    if base:
        p.add_argument("--base", default=None, metavar="ROOT",
                       help="topic root (default: [mqtt] base_topic of --config, else vsense)")
    for flag, metavar, text in OPTIONS[1:4]:
        p.add_argument(flag, default=None, metavar=metavar, help=text)
    p.add_argument("--tls", action="store_true", default=None,
                   help="connect with TLS (default: [mqtt] tls of --config)")
    for flag, metavar, text in OPTIONS[4:]:
        p.add_argument(flag, default=None, metavar=metavar, help=text)
    return p


def _read_password_file(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            pw = f.readline().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"--password-file: cannot read {path}: "
                         f"{getattr(e, 'strerror', None) or e}") from None
    if not pw:
        raise ValueError(f"--password-file: {path}: the first line is empty")
    return pw


def broker_settings(args) -> dict:
    """The ``[mqtt]`` keys (validated by the daemon's schema) plus ``password`` and
    ``device`` (``[device] id`` of ``--config``, or None) from ``args``.

    Raises
    ------
    edge.daemon.config.ConfigError or ValueError
        A config key or an option is invalid; the message names it.
    """
    mq: dict = {}
    device = None
    where = "options"
    cfg_path = getattr(args, "config", None)
    if cfg_path:
        cfg = load_config(cfg_path)
        where = str(cfg_path)
        mq, device = dict(cfg["mqtt"]), cfg["device"]["id"]
        for k in ("ca_file", "cert_file", "key_file"):  # relative to the config file
            if mq[k]:
                mq[k] = str(cfg.resolve(mq[k]))
    if getattr(args, "broker", None):
        mq["host"], mq["port"] = parse_broker(args.broker, mq.get("port", 1883))
    if getattr(args, "base", None):
        mq["base_topic"] = args.base
    pw_file, pw_env = getattr(args, "password_file", None), getattr(args, "password_env", None)
    if getattr(args, "username", None) is not None:
        mq["username"] = args.username
        if not (pw_file or pw_env):  # another user: not the password of the config's user
            mq["password_env"] = ""
    if pw_env is not None:
        mq["password_env"] = pw_env
    for opt, key in (("tls_ca", "ca_file"), ("tls_cert", "cert_file"), ("tls_key", "key_file")):
        if getattr(args, opt, None):
            mq[key] = os.path.abspath(getattr(args, opt))
    if getattr(args, "tls", None) or getattr(args, "tls_ca", None):
        mq["tls"] = True
    keep = {k: mq[k] for k in ("host", "port", "tls", "ca_file", "cert_file", "key_file",
                               "username", "password_env", "base_topic", "keepalive")
            if k in mq}
    out = check_section("mqtt", keep, where)
    if bool(out["cert_file"]) != bool(out["key_file"]):
        raise ValueError("--tls-cert and --tls-key go together ([mqtt] cert_file, key_file)")
    if device and out["username"] and out["username"] == device:
        raise ValueError(f"{where}: [mqtt] username {device!r} is the device's own login: the "
                         "broker lets it read only its cmd topic and, on the installer's "
                         "listener, logging in with it disconnects the daemon; give "
                         "--username viewer --password-file /etc/vsense/mqtt-viewer.secret")
    if pw_file:
        out["password"] = _read_password_file(pw_file)
    elif out["password_env"]:
        env = out["password_env"]
        if env not in os.environ:
            raise ValueError(f"password: environment variable {env} is not set "
                             f"({'--password-env' if pw_env else '[mqtt] password_env'})")
        out["password"] = os.environ[env]
    else:
        out["password"] = None
    out["device"] = device
    return out


def describe_settings(s: dict) -> str:
    """``host:port`` with ``(TLS)`` and ``as USER`` when they apply: for messages."""
    host = f"[{s['host']}]" if ":" in s["host"] else s["host"]
    return (f"{host}:{s['port']}" + (" (TLS)" if s["tls"] else "")
            + (f" as {s['username']}" if s["username"] else ""))


def _hint(s: dict, refusal: str) -> str:
    r = refusal.lower()
    if "authori" in r or "password" in r or "user name" in r:
        return (" (check --username / --password-file, or [mqtt] username / password_env "
                "of --config, and the broker's access list)")
    return ""


class BrokerSession:
    """A paho-mqtt 2.x client logged in with :func:`broker_settings`; it subscribes to
    ``subscriptions`` (``[(topic, qos)]``) on every (re)connection and hands every message
    to ``on_message(topic, payload)`` (paho's network thread)."""

    def __init__(self, settings: dict, subscriptions, on_message, client_id: str):
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.settings = settings
        self.where = describe_settings(settings)
        self.connected = False
        self.refusal: str | None = None   # why the broker said no (first answer only)
        self.answered = threading.Event()  # CONNACK + SUBACK, a refusal, or a dropped line
        self.subscribed = threading.Event()
        self._subs = list(subscriptions)
        c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id)
        c.reconnect_delay_set(0.2, 5)
        if settings["username"]:
            c.username_pw_set(settings["username"], settings.get("password"))
        if settings["tls"]:
            c.tls_set(ca_certs=settings["ca_file"] or None,
                      certfile=settings["cert_file"] or None,
                      keyfile=settings["key_file"] or None)

        def on_connect(client, userdata, flags, rc, props):
            if rc.is_failure:
                self._refuse(f"the broker refused the login: {rc}")
                return
            self.connected = True
            client.subscribe(self._subs)

        def on_subscribe(client, userdata, mid, rcs, props):
            bad = [(t, r) for (t, _), r in zip(self._subs, rcs) if r.is_failure]
            if bad:
                self._refuse(f"the broker refused the subscription to {bad[0][0]} "
                             f"({bad[0][1]}; not authorised by its access list?)")
                return
            self.subscribed.set()
            self.answered.set()

        def on_disconnect(client, userdata, flags, rc, props):
            was = self.connected
            self.connected = False
            if not was and not self.answered.is_set():
                self._refuse("the broker closed the connection without answering the login"
                             + ("" if settings["tls"] else
                                " (a TLS port? then give --tls-ca FILE or --tls)"))

        c.on_connect, c.on_subscribe = on_connect, on_subscribe
        c.on_disconnect = on_disconnect
        self.callback_errors = 0  # messages whose handler raised (counted, never re-raised)

        def on_msg(client, userdata, msg):
            # an exception here would end paho's network thread: the view would freeze
            try:
                on_message(msg.topic, msg.payload)
            except Exception:  # noqa: BLE001
                self.callback_errors += 1

        c.on_message = on_msg
        self.client = c

    def _refuse(self, why: str) -> None:
        if not self.answered.is_set():
            self.refusal = why
            self.answered.set()

    def start(self, timeout: float = 10.0) -> None:
        """Connect, log in and subscribe; ConnectionError names the broker and the reason
        (refused login or subscription, TLS, unreachable, no answer within ``timeout`` s)."""
        s = self.settings
        try:
            self.client.connect(s["host"], s["port"], keepalive=s.get("keepalive", 30))
        except (OSError, ValueError) as e:
            why = _describe_connect_error(e).replace("check [mqtt] ca_file",
                                                     "check --tls-ca ([mqtt] ca_file)")
            if s["tls"] and (isinstance(e, ConnectionResetError)
                             or "WRONG_VERSION" in why.upper() or "EOF" in why.upper()):
                why += " during the TLS handshake: is this port a plain (not TLS) listener?"
            raise ConnectionError(f"broker {self.where}: {why}") from None
        self.client.loop_start()
        if not self.answered.wait(timeout):
            self.stop()
            raise ConnectionError(f"broker {self.where}: no answer to the login and "
                                  f"subscription within {timeout:g} s")
        if self.refusal is not None:
            self.stop()
            raise ConnectionError(f"broker {self.where}: {self.refusal}"
                                  f"{_hint(s, self.refusal)}")

    def stop(self) -> None:
        try:
            self.client.disconnect()
        finally:
            self.client.loop_stop()


def plain_settings(host: str, port: int, base: str = "vsense") -> dict:
    """:func:`broker_settings` of an anonymous, plain-TCP login to ``host:port``."""
    s = check_section("mqtt", {"host": host, "port": int(port), "base_topic": base})
    s.update(password=None, device=None)
    return s
