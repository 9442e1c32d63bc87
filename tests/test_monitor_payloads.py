"""The monitor against hostile messages (issue 40 item 4): every payload is checked in one
place (edge.monitor.payload), a malformed one is counted and named, never raised; nothing a
payload carries reaches the terminal as a control character; the fleet view's paho callback
never raises. Pure views, then `vsense-edge monitor` against a real Mosquitto, then the
seeded fuzz class (2,000+ cases in the reliability tier, a sample in the normal tier)."""

from __future__ import annotations

import json
import re
import threading
import time

import numpy as np
import pytest
from fuzz import run_cases, tier_cases

from edge.daemon.mqtt import encode_estimates
from edge.monitor import DeviceView, render
from edge.monitor.fleet import FleetView, render_fleet
from edge.monitor.payload import PayloadError, decode

META = {"bundle_id": "chain-abc123", "bundle_hash": "abc123def4567890",
        "channels": [{"name": "d110", "unit": "m"}], "forces": [{"name": "F110", "unit": "N"}],
        "outputs": [{"name": "d60", "unit": "m", "kind": "displacement"}],
        "columns": ["F110", "d60"], "rate": 1000.0, "delay_samples": 0, "delay_s": 0.0,
        "format": "json", "batch": 50}
HEALTH = {"samples": 5000, "estimates": 5000, "uptime_s": 5.0,
          "latency_us": {"p50": 55.0, "p99": 408.0, "p999": 2035.0, "max": 2664.0, "n": 5000},
          "lost_samples": 7, "ring_capacity": 2000, "cpu_percent": 6.6, "rss_mb": 120.5,
          "publish": {"queue_depth": 4, "drops_messages": 0, "drops_samples": 0,
                      "published": 100},
          "recorder": {"queue_depth": 0, "files": 2, "bytes": 123456, "write_errors": 0},
          "missed_conversions": 5, "overruns": 3, "ring_depth": 2, "bad_samples": 1,
          "estimator_resets": 0, "cpu_temp_c": None, "rate_hz": 1000.0,
          "model_check": {"ratio": 1.01, "suspect": False, "window_s": 10.0,
                          "bands": [{"f_hz": [1.0, 2.0, 3.0], "ratio": 1.1}], "reasons": [],
                          "load_level": 1.2}}
#: printable output: text, newlines; no ESC, BEL, CR, backspace, C1 or bidi controls
CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

#: status payloads of the audit's kind: each must be refused (counted) or shown, never raise
STATUS = [b'{"faulty_channels":[1]}', b'{"faulty_channels":"abc"}', b'{"faulty_channels":{}}',
          b'{"exit_code":"x"}', b'{"exit_code":1e400}', b'{"state":5}', b'{"state":null}',
          b'{"error":[1,2]}', b'{"t":"now"}', b'[]', b'"running"', b'1', b'null',
          b'{"state":"running","faulty_channels":[null]}', b'{"t":NaN}', b'\xff\xfe',
          b'{"state": "' + b"[" * 3000 + b'"}', b"[" * 5000 + b"]" * 5000]


def _good(fmt="json", n=3, ncol=2, std=None):
    return encode_estimates(0, np.arange(n, dtype=np.int64), np.ones((n, ncol)),
                            np.zeros(n, np.uint8), fmt, std=std)


@pytest.mark.parametrize("payload", STATUS)
def test_a_malformed_status_is_counted_and_named_never_raised(payload):
    view = DeviceView()
    view.topic_prefix = "vsense/dev/"
    view.feed("meta", json.dumps(META).encode())
    view.feed("status", payload)
    text = render(view, "dev", "broker")
    if view.n_bad_payloads:
        assert view.status is None
        assert "malformed payload from vsense/dev/status: " in text
    else:  # a JSON value the views can show (e.g. a cleared status): shown as such
        assert "state     " in text
    assert not CONTROL.search(text)
    fleet = FleetView("vsense")
    fleet.feed("vsense/dev/status", payload)
    text = render_fleet(fleet, "broker")
    assert fleet.n_bad == view.n_bad_payloads
    assert not CONTROL.search(text)


STATUS_OK = {"state": "degraded", "t": 1.0, "device": "d", "bundle": "b",
             "faulty_channels": ["y0"], "exit_code": 0, "error": "e", "reason": "r"}
HOSTILE = [None, "", "\x1b[2J", [], {}, True, -1, 2**70, 1e300, float("nan"), ["x", 1],
           [{"f_hz": "x"}], {"a": None}]


def _leaves(obj, path=()):
    """Every (path) to a value inside ``obj`` (dict keys and list items, nested)."""
    items = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for k, v in items:
        yield (*path, k)
        if isinstance(v, (dict, list)):
            yield from _leaves(v, (*path, k))


def _replaced(obj, path, value):
    obj = json.loads(json.dumps(obj))
    t = obj
    for k in path[:-1]:
        t = t[k]
    t[path[-1]] = value
    return obj


@pytest.mark.parametrize("sub,base", [("status", STATUS_OK), ("meta", META), ("health", HEALTH)])
def test_every_field_replaced_by_every_hostile_value_is_shown_or_refused(sub, base):
    """Exhaustive type confusion: each field (nested ones too) of a valid payload replaced by
    each value of HOSTILE; both views and both renderers: no exception, no control
    character on the screen."""
    n = 0
    for path in _leaves(base):
        for value in HOSTILE:
            payload = json.dumps(_replaced(base, path, value)).encode()
            view, fleet = DeviceView(), FleetView("vsense")
            if sub != "meta":
                view.feed("meta", json.dumps(META).encode())
            view.feed(sub, payload)
            view.feed("estimates", _good())
            fleet.feed(f"vsense/x/{sub}", payload)
            for text in (render(view, "x", "b"), render_fleet(fleet, "b")):
                assert not CONTROL.search(text), (path, value)
            n += 1
    assert n >= 13 * 8


def test_the_audits_status_payloads_are_refused_with_the_reason():
    refused = 0
    for p in STATUS:
        try:
            decode("status", p)
        except PayloadError:
            refused += 1
    assert refused == len(STATUS) - 1  # null: a cleared retained status is no error
    with pytest.raises(PayloadError, match=r"faulty_channels\[0\]: expected text, got int"):
        decode("status", b'{"faulty_channels":[1]}')


def test_escape_sequences_in_payload_text_never_reach_the_terminal():
    view = DeviceView()
    evil = "\x1b[2J\x1b]0;owned\x07\u202eevil\x9b31m"
    view.feed("status", json.dumps({"state": evil, "error": evil}).encode())
    view.feed("meta", json.dumps(dict(META, bundle_id=evil, columns=[evil, "d60"],
                                      forces=[{"name": evil, "unit": evil}])).encode())
    view.feed("estimates", _good())
    view.feed("health", json.dumps(dict(HEALTH, model_check=dict(
        HEALTH["model_check"], reasons=[evil]))).encode())
    assert view.n_bad_payloads == 0
    text = render(view, "dev", "broker")
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
    assert "?[2J?]0;owned??evil?31m" in text
    fleet = FleetView("vsense")
    fleet.feed(f"vsense/{evil}/status", json.dumps({"state": evil}).encode())
    text = render_fleet(fleet, "broker")
    assert not CONTROL.search(text) and "owned" in text


def test_csv_of_the_monitor_quotes_and_defuses_hostile_names(tmp_path):
    import csv

    from edge.monitor import CsvRecorder

    view = DeviceView()
    rec = CsvRecorder(str(tmp_path / "m.csv"), view)
    view.listeners.append(rec)
    names = ['=HYPERLINK("http://x.invalid","y")', "a,b"]
    view.feed("meta", json.dumps(dict(META, columns=names)).encode())
    view.feed("estimates", _good())
    rec.close()
    rows = list(csv.reader(open(tmp_path / "m.csv", newline="")))
    assert rows[0] == ["time", "seq", "'" + names[0], "a,b", "flags"]
    assert [len(r) for r in rows] == [5] * 4


def test_estimates_are_checked_against_their_length_and_meta():
    # a header claiming 4,000 columns over a 32 KB payload: refused before any allocation
    hdr = encode_estimates(0, np.zeros(1, np.int64), np.zeros((1, 4000)),
                           np.zeros(1, np.uint8), "binary")[:24]
    with pytest.raises(PayloadError, match="header .* says"):
        decode("estimates", hdr + bytes(32_000))
    with pytest.raises(PayloadError, match="seq: expected an integer, got float"):
        decode("estimates", b'{"seq": Infinity, "n": 1, "t_ns": [0], "v": [[1]], "flags": [0]}')
    with pytest.raises(PayloadError, match="3 columns, meta.columns has 2"):
        decode("estimates", _good(ncol=3), ncol=2)
    d = decode("estimates", _good("binary", std=np.full(2, 0.25)))  # version 2: std block
    np.testing.assert_allclose(d["s"], 0.25, rtol=0, atol=0)
    view = DeviceView()
    view.topic_prefix = "vsense/d/"
    view.feed("meta", json.dumps(META).encode())
    view.feed("estimates", _good(ncol=3))
    assert view.n_bad_payloads == 1 and view.n_samples == 0
    assert view.last_bad == "malformed payload from vsense/d/estimates: 3 columns, " \
                            "meta.columns has 2"


def test_fleet_counts_an_infinite_seq_and_keeps_counting_good_batches():
    v = FleetView("vsense")
    v.feed("vsense/a/estimates", b'{"seq": Infinity, "n": 1}', now=0.0)
    v.feed("vsense/a/estimates", _good("binary"), now=0.1)
    assert v.n_bad == 1 and v.devices["a"]["samples"] == 3
    assert "malformed payload from vsense/a/estimates: seq:" in render_fleet(v, "b", now=0.2)


# --------------------------------------------------------------------- live, Mosquitto
def _publisher(broker, cid):
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=cid)
    c.connect(broker.host, broker.port)
    c.loop_start()

    def pub(topic, payload, retain=False):
        c.publish(topic, payload, qos=1, retain=retain).wait_for_publish(5)
    return c, pub


def _wait(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()


@pytest.mark.mqtt
def test_monitor_starts_over_a_retained_malformed_status(mosquitto, capsys):
    """The audit: a retained {"faulty_channels":[1]} crashed the monitor on every start."""
    from edge.cli import main

    c, pub = _publisher(mosquitto, "hostile-pub")
    pre = "vsense/hostile-01/"
    stop = threading.Event()

    def feed():
        seq = 0
        while not stop.is_set():
            pub(pre + "estimates", encode_estimates(
                seq, np.arange(seq, seq + 50) * 1_000_000, np.ones((50, 2)),
                np.zeros(50, np.uint8), "json"))
            seq += 50
            stop.wait(0.05)

    pub(pre + "status", b'{"faulty_channels":[1]}', retain=True)
    pub(pre + "meta", json.dumps(META), retain=True)
    th = threading.Thread(target=feed, daemon=True)
    th.start()
    try:
        code = main(["monitor", "--broker", f"{mosquitto.host}:{mosquitto.port}", "--device",
                     "hostile-01", "--once", "--timeout", "10"])
    finally:
        stop.set()
        th.join(10)
        pub(pre + "status", b"", retain=True)
        pub(pre + "meta", b"", retain=True)
        c.disconnect()
        c.loop_stop()
    out = capsys.readouterr().out
    assert code == 0, out
    assert "malformed payload from vsense/hostile-01/status: faulty_channels[0]: expected " \
           "text, got int" in out
    assert "F110" in out and "latest estimate (seq" in out


@pytest.mark.mqtt
def test_fleet_paho_thread_survives_hostile_messages_and_a_raising_handler(mosquitto):
    from edge.monitor.connect import BrokerSession, plain_settings

    c, pub = _publisher(mosquitto, "hostile-fleet-pub")
    view = FleetView("vsense")
    calls = []

    def handler(topic, payload):
        # the first fz-bad message raises (other tests' retained messages on the shared
        # broker may arrive before it: they are fed as usual)
        if topic.startswith("vsense/fz-bad/"):
            calls.append(topic)
            if len(calls) == 1:
                raise RuntimeError("a handler bug")  # must not end paho's network thread
        view.feed(topic, payload)

    s = BrokerSession(plain_settings(mosquitto.host, mosquitto.port),
                      [("vsense/+/estimates", 1), ("vsense/+/status", 1)], handler, "hfleet")
    s.start(10)
    try:
        pub("vsense/fz-bad/estimates", b'{"seq": 1}')          # raised by the handler
        pub("vsense/fz-bad/estimates", b'{"seq": Infinity, "n": 1}')
        pub("vsense/fz-bad/estimates", b"VSE1" + bytes(20))      # header claims nothing
        pub("vsense/fz-good/status", b'{"state": "running"}')
        assert _wait(lambda: "fz-good" in view.devices
                     and view.devices["fz-good"]["status"] is not None)
    finally:
        s.stop()
        c.disconnect()
        c.loop_stop()
    assert s.callback_errors == 1
    assert view.devices["fz-bad"]["bad"] == 2
    assert view.devices["fz-bad"]["last_bad"] == ("malformed payload from vsense/fz-bad/"
                                                  "estimates: binary estimates: unsupported "
                                                  "version 0")


# --------------------------------------------------------------------- fuzz class
def _hostile(d) -> tuple[str, bytes]:
    sub = d.choice(["status", "meta", "health", "estimates", "estimates", "cmd/reply"])
    base = {"status": {"state": "running", "faulty_channels": ["a"], "exit_code": 0},
            "meta": META, "health": HEALTH, "cmd/reply": {"id": 1}}.get(sub)
    k = d.int(0, 4)
    if base is not None and k <= 1:  # one field of a valid payload replaced
        obj = json.loads(json.dumps(base))
        target = obj
        while isinstance(target, dict) and target and d.bool():
            key = d.choice(sorted(target))
            if isinstance(target[key], dict):
                target = target[key]
            else:
                break
        keys = sorted(target) if isinstance(target, dict) else []
        key = d.choice(keys) if keys and d.int(0, 4) else d.absurd()
        if isinstance(target, dict):
            target[key] = d.choice([d.json(), d.absurd(), d.extreme(), [d.json()],
                                    [d.absurd()], None, {}, [], True])
        return sub, json.dumps(obj).encode()
    if k == 2:
        good = _good(d.choice(["json", "binary"]), d.int(0, 4), d.int(1, 3),
                     std=d.choice([None, 0.5]))
        return sub, d.mutated_bytes(good)
    if k == 3:
        return sub, json.dumps(d.json()).encode()
    return sub, d.binary(0, 64)


def test_fuzz_monitor_payloads_through_both_views_and_renderers(request):
    """Hostile messages into the single-device view and the fleet view, each rendered:
    0 exceptions, no control character in the text, a good message still counted after."""

    def case(d):
        sub, payload = _hostile(d)
        view, fleet = DeviceView(), FleetView("vsense")
        view.topic_prefix = "vsense/x/"
        view.feed("meta", json.dumps(META).encode())
        view.feed(sub, payload)
        fleet.feed(f"vsense/{d.absurd()[:30]}/{sub}", payload)
        for text in (render(view, "x", "b"), render_fleet(fleet, "b")):
            assert not CONTROL.search(text), repr(text)
        n = view.n_samples
        view.feed("meta", json.dumps(META).encode())  # a device that behaves again
        view.feed("estimates", encode_estimates(10**6, np.arange(2), np.ones((2, 2)),
                                                np.zeros(2, np.uint8), "binary"))
        assert view.n_samples == n + 2
        return "malformed" if view.n_bad_payloads else "shown"

    counts = run_cases("monitor-views", case, tier_cases(request))
    assert counts.get("malformed", 0) > 0 and counts.get("shown", 0) > 0
