"""MQTT: payload codecs, command validation, publisher against a real Mosquitto."""

import json
import math
import threading

import numpy as np
import pytest

from edge.daemon.config import config_from_dict
from edge.daemon.mqtt import (BIN_HEADER, BIN_MAGIC, CommandError, CommandRegistry, Publisher,
                              decode_estimates, encode_estimates)
from conftest import free_port


def _encode_twin(seq0, t_ns, values, flags, fmt="json", std=None):
    """Plain twin of the compiled encoder: the dict + ``json.dumps`` / ``struct`` encoder
    the daemon used before (the reference for the layouts on the wire)."""
    n = int(t_ns.shape[0])
    S = None
    if std is not None:
        S = np.broadcast_to(np.asarray(std, dtype=np.float64), values.shape)
        S = np.where(np.isfinite(values), S, np.nan)
    if fmt == "binary":
        v = np.ascontiguousarray(values, dtype="<f8")
        parts = [BIN_HEADER.pack(BIN_MAGIC, 1 if S is None else 2, v.shape[1], n, 0, int(seq0)),
                 np.ascontiguousarray(t_ns, "<i8").tobytes(), v.tobytes(),
                 np.ascontiguousarray(flags, "u1").tobytes()]
        if S is not None:
            parts.append(np.ascontiguousarray(S, "<f8").tobytes())
        return b"".join(parts)

    def rows(a):
        return [[x if math.isfinite(x) else None for x in r] for r in a.tolist()]

    d = {"seq": int(seq0), "n": n, "t_ns": t_ns.tolist(), "v": rows(values),
         "flags": flags.tolist()}
    if S is not None:
        d["s"] = rows(S)
    return json.dumps(d, separators=(",", ":")).encode()


def _same_payload(a: bytes, b: bytes) -> bool:
    """Binary: the same bytes; JSON: the same document (keys, ints, and floats that read
    back to the same doubles: orjson and json.dumps may print a float differently)."""
    if a[:4] == BIN_MAGIC or b[:4] == BIN_MAGIC:
        return a == b
    return json.loads(a) == json.loads(b)


@pytest.mark.parametrize("fmt", ["json", "binary"])
def test_encoder_matches_its_twin(fmt):
    """Random shapes (empty too), NaN/inf/-0.0 values, negative seq and times, std per
    column and per value (with NaN), against the dict + json.dumps / struct twin: binary
    byte for byte, JSON value for value (every float reads back to the same double)."""
    rng = np.random.default_rng(5)
    for trial in range(150):
        n, ncol = int(rng.integers(0, 30)), int(rng.integers(0, 5))
        v = rng.standard_normal((n, ncol)) * 10.0 ** rng.integers(-30, 30, (n, ncol))
        if v.size:
            m = rng.random(v.shape) < 0.15
            v[m] = rng.choice([np.nan, np.inf, -np.inf, 0.0, -0.0], int(m.sum()))
        t = rng.integers(-2**62, 2**62, n)
        f = rng.integers(0, 256, n).astype(np.uint8)
        seq0 = int(rng.integers(-2**40, 2**62))
        std = [None, rng.random(ncol), rng.random((n, ncol))][trial % 3]
        if std is not None and std.size:
            std.flat[0] = np.nan
        got = encode_estimates(seq0, t, v, f, fmt, std)
        assert _same_payload(got, _encode_twin(seq0, t, v, f, fmt, std)), trial


def test_json_floats_read_back_identically():
    """orjson's float text against the doubles it came from: random bit patterns (every
    exponent, subnormals), powers of two and ten; ``float(text)`` must give the same bits
    (reference: the input array itself)."""
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 2**63, 20_000, dtype=np.int64).view(np.float64)
    x = np.concatenate([bits[np.isfinite(bits)], 2.0 ** np.arange(-1074, 1024),
                        [float(f"1e{e}") for e in range(-323, 309)],
                        [0.0, -0.0, 0.1, 1 / 3, 5e-324, 1.7976931348623157e308]])
    V = x.reshape(-1, 1)
    d = json.loads(encode_estimates(0, np.arange(x.size), V, np.zeros(x.size, np.uint8)))
    back = np.array([r[0] for r in d["v"]], dtype=np.float64)
    np.testing.assert_array_equal(back.view(np.int64), x.view(np.int64))


def test_batches_split_at_gaps_and_at_the_batch_size():
    """The batching: consecutive rows fill batches of ``batch``; a gap in seq closes
    the open batch (the layout needs consecutive seqs); nothing is lost or reordered."""
    cfg = _mqtt_cfg(free_port(), batch=4)  # nobody listens: messages wait in the queue
    pub = Publisher(cfg, "dev-g", _registry(), ncol=2)
    pub.std = np.array([0.5, 2.0])
    seq = np.array([0, 1, 2, 3, 4, 5, 9, 10, 11, 12, 13, 20])
    v = np.arange(24.0).reshape(12, 2)
    v[5, 1] = np.nan
    pub.add_estimates(seq[:7], seq[:7] * 10, v[:7], np.zeros(7, np.uint8))
    pub.add_estimates(seq[7:], seq[7:] * 10, v[7:], np.ones(5, np.uint8))
    pub.flush_batch()
    got = [decode_estimates(m[1]) for m in pub.out]
    # reference: the rows given above, cut at the gaps 5->9 and 13->20 and after 4 rows
    assert [g["seq"].tolist() for g in got] == [[0, 1, 2, 3], [4, 5], [9, 10, 11, 12], [13],
                                                [20]]
    np.testing.assert_array_equal(np.concatenate([g["v"] for g in got]), v)
    assert [m[3] for m in pub.out] == [4, 2, 4, 1, 1]  # samples per message
    s = np.concatenate([g["s"] for g in got])
    assert np.isnan(s[5, 1]) and s[0].tolist() == [0.5, 2.0]  # null where the value is
    assert _same_payload(pub.out[0][1], _encode_twin(0, seq[:4] * 10, v[:4],
                                                     np.zeros(4, np.uint8), std=pub.std))
    pub.stop(timeout=0.1)


def _mqtt_cfg(port, **kw):
    d = {"device": {"id": "d1"}, "channels": [{"name": "y0", "pin": "AIN0"}],
         "mqtt": dict({"host": "127.0.0.1", "port": port, "reconnect_min_s": 0.1,
                       "reconnect_max_s": 0.5}, **kw)}
    return config_from_dict(d)["mqtt"]


@pytest.mark.parametrize("fmt", ["json", "binary"])
def test_estimates_codec_round_trips_exactly(fmt):
    rng = np.random.default_rng(7)
    v = rng.standard_normal((13, 4)) * 10.0 ** rng.integers(-12, 12, (13, 4))
    v[2, 1] = np.nan  # warm-up / missing -> null in JSON
    t = np.arange(13, dtype=np.int64) * 1_000_000 + 123
    f = rng.integers(0, 16, 13).astype(np.uint8)
    d = decode_estimates(encode_estimates(41, t, v, f, fmt))
    # reference: the encoded arrays themselves (both formats are lossless)
    np.testing.assert_array_equal(d["v"], v)
    np.testing.assert_array_equal(d["t_ns"], t)
    np.testing.assert_array_equal(d["flags"], f)
    np.testing.assert_array_equal(d["seq"], np.arange(41, 54))


def test_binary_layout_is_as_documented():
    p = encode_estimates(5, np.array([7, 8], np.int64), np.array([[1.0, 2.0], [3.0, 4.0]]),
                         np.array([0, 2], np.uint8), "binary")
    assert p[:4] == b"VSE1" and len(p) == 24 + 2 * 8 + 4 * 8 + 2  # header 24 B (docstring layout)
    assert int.from_bytes(p[6:8], "little") == 2 and int.from_bytes(p[8:12], "little") == 2
    assert int.from_bytes(p[16:24], "little") == 5
    assert np.frombuffer(p, "<f8", 4, 40).tolist() == [1.0, 2.0, 3.0, 4.0]


def _registry():
    reg = CommandRegistry()
    reg.register("pause", lambda d, a: None)
    reg.register("identify", lambda d, a: {"window": a["window_s"]},
                 args={"window_s": (int, float), "label": str}, required=("window_s",))
    return reg


@pytest.mark.parametrize("payload, reason", [
    (b"{not json", "payload is not JSON"),
    (b"[1, 2]", "must be a JSON object"),
    (b'{"args": {}}', "'cmd' missing"),
    (b'{"cmd": "explode"}', "unknown command 'explode' (known: identify, pause)"),
    (b'{"cmd": "pause", "extra": 1}', "unknown field 'extra'"),
    (b'{"cmd": "pause", "args": [1]}', "'args' must be an object"),
    (b'{"cmd": "identify", "args": {}}', "missing argument 'window_s'"),
    (b'{"cmd": "identify", "args": {"window_s": "2"}}', "'window_s' has the wrong type"),
    (b'{"cmd": "identify", "args": {"window_s": true}}', "must be"),
    (b'{"cmd": "identify", "args": {"window_s": 1, "x": 1}}', "unknown argument 'x'"),
    (b"\xff\xfe", "payload is not JSON"),
])
def test_malformed_commands_are_rejected_with_a_reason(payload, reason):
    with pytest.raises(CommandError, match=__import__("re").escape(reason)):
        _registry().parse(payload)


def test_valid_command_and_hook_registry():
    reg = _registry()
    cmd, args, cid = reg.parse(b'{"cmd": "identify", "id": 9, "args": {"window_s": 2.5}}')
    assert (cmd.name, args, cid) == ("identify", {"window_s": 2.5}, 9)
    assert cmd.handler(None, args) == {"window": 2.5}
    with pytest.raises(ValueError, match="already registered"):
        reg.register("pause", lambda d, a: None)


def test_publisher_retained_status_meta_estimates_and_last_will(mosquitto, subscriber):
    cfg = _mqtt_cfg(mosquitto.port, batch=4)
    pub = Publisher(cfg, "dev-a", _registry(), ncol=2)
    sub = subscriber(["vsense/dev-a/#"], "sub-a")
    pub.start()
    pub.set_retained(pub.topics.status, {"state": "running"})
    pub.set_retained(pub.topics.meta, {"rate": 1000.0})
    t = np.arange(10, dtype=np.int64)
    v = np.arange(20, dtype=float).reshape(10, 2)
    pub.add_estimates(np.arange(10), t, v, np.zeros(10, np.uint8))
    pub.flush_batch()
    assert sub.wait(lambda: len(sub.get("vsense/dev-a/estimates")) == 3, 30)
    got = [decode_estimates(p) for p, _ in sub.get("vsense/dev-a/estimates")]
    assert [len(g["seq"]) for g in got] == [4, 4, 2]  # batch = 4
    np.testing.assert_array_equal(np.concatenate([g["v"] for g in got]), v)
    assert sub.wait(lambda: sub.get("vsense/dev-a/meta"))
    # a late subscriber gets the retained status and meta
    late = subscriber(["vsense/dev-a/status", "vsense/dev-a/meta"], "sub-late")
    assert late.wait(lambda: late.get("vsense/dev-a/status") and late.get("vsense/dev-a/meta"))
    payload, retained = late.get("vsense/dev-a/status")[0]
    assert retained and json.loads(payload)["state"] == "running"
    # the device dies without DISCONNECT: the broker publishes the last will (retained)
    pub._stop = True
    pub.client.loop_stop()
    pub.client.socket().close()
    assert sub.wait(lambda: any(json.loads(p).get("state") == "offline"
                                for p, _ in sub.get("vsense/dev-a/status")), 15)


def test_outgoing_queue_is_bounded_drop_oldest_and_never_blocks():
    port = free_port()  # nobody listens here
    cfg = _mqtt_cfg(port, batch=1, queue_messages=5)
    pub = Publisher(cfg, "dev-b", _registry(), ncol=1)
    pub.start()
    done = threading.Event()

    def add():
        for k in range(100):
            pub.add_estimates(np.array([k]), np.array([k]), np.array([[float(k)]]),
                              np.zeros(1, np.uint8))
        done.set()

    # 100 batches, no broker: adding must never wait for the network (a hang guard, not a
    # time bound: a blocking add would wait for connect retries forever)
    threading.Thread(target=add, daemon=True).start()
    assert done.wait(60), "add_estimates blocked with no broker"
    assert pub.queue_depth() == 5
    assert pub.stats["drops_messages"] == 95 and pub.stats["drops_samples"] == 95
    kept = [decode_estimates(m[1])["seq"][0] for m in pub.out]
    assert kept == [95, 96, 97, 98, 99]  # the newest survive
    pub.stop(timeout=0.2)


def test_malformed_command_gets_a_reply_with_the_reason(mosquitto, subscriber):
    pub = Publisher(_mqtt_cfg(mosquitto.port), "dev-c", _registry(), ncol=1)
    pub.start()
    sub = subscriber(["vsense/dev-c/cmd/reply"], "sub-c")
    assert sub.wait(lambda: pub.connected, 10)
    # the device subscribes to `cmd` on its CONNACK: a command published before the broker
    # has that subscription goes nowhere. Probe until the first reply (bounded, no sleep)
    probes = 0
    while probes < 100 and not sub.get("vsense/dev-c/cmd/reply"):
        sub.publish("vsense/dev-c/cmd", b'{"cmd": "probe", "id": "probe"}')
        probes += 1
        sub.wait(lambda: len(sub.get("vsense/dev-c/cmd/reply")) > 0, 0.1)
    n0 = len(sub.get("vsense/dev-c/cmd/reply"))
    assert n0 > 0, "the device never answered on cmd/reply"
    sub.publish("vsense/dev-c/cmd", b'{"cmd": "selfdestruct", "id": 4}')
    sub.publish("vsense/dev-c/cmd", b"not json at all")
    sub.publish("vsense/dev-c/cmd", b'{"cmd": "pause", "id": 5}')
    # every probe still in flight is answered too; the two replies follow the probes'
    assert sub.wait(lambda: len([p for p, _ in sub.get("vsense/dev-c/cmd/reply")
                                 if b'"probe"' not in p]) == 2)
    r = [json.loads(p) for p, _ in sub.get("vsense/dev-c/cmd/reply") if b'"probe"' not in p]
    assert r[0]["ok"] is False and r[0]["id"] == 4 and "unknown command" in r[0]["reason"]
    assert r[1]["ok"] is False and "not JSON" in r[1]["reason"]
    cmd, args, cid = pub.commands.get(timeout=5)  # valid: queued for the loop thread
    assert (cmd.name, cid) == ("pause", 5)
    pub.stop(final_status={"state": "stopped"})


def test_a_payload_the_socket_takes_in_parts_arrives_whole_and_in_order(mosquitto,
                                                                         subscriber):
    """A QoS 0 message the socket takes only in part (a 4 KB send buffer, 2 MB payload):
    the rest goes out before any later message (paho's network thread writes it)."""
    import socket

    pub = Publisher(_mqtt_cfg(mosquitto.port, qos=0), "dev-w", _registry(), ncol=1)
    sub = subscriber(["vsense/dev-w/raw"], "sub-w")
    pub.start()
    assert pub.wait_connected(10)
    pub.client.socket().setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    big = bytes(range(256)) * 8192
    pub.send(pub.topics.raw, big)
    pub.send(pub.topics.raw, b"after")
    assert sub.wait(lambda: len(sub.get("vsense/dev-w/raw")) == 2, 30)
    assert [p for p, _ in sub.get("vsense/dev-w/raw")] == [big, b"after"]
    assert pub.stats["published"] == 2 and pub.queue_depth() == 0
    pub.stop()


@pytest.mark.parametrize("fmt", ["json", "binary"])
@pytest.mark.parametrize("qos", [0, 1])
def test_batches_reach_subscribers_as_the_twin_encodes_them(mosquitto, subscriber, fmt, qos):
    """Connected: batches go out through paho's publish; what subscribers get is the
    twin's payload (binary bytes, JSON values)."""
    pub = Publisher(_mqtt_cfg(mosquitto.port, qos=qos, batch=4, format=fmt), "dev-q",
                    _registry(), ncol=2)
    sub = subscriber(["vsense/dev-q/estimates"], "sub-q")
    pub.start()
    assert pub.wait_connected(10)
    seq = np.arange(100, 110)
    v = np.arange(20, dtype=float).reshape(10, 2) / 3.0
    f = np.arange(10, dtype=np.uint8)
    pub.add_estimates(seq, seq * 1000, v, f)
    pub.flush_batch()
    assert sub.wait(lambda: len(sub.get("vsense/dev-q/estimates")) == 3)
    got = [p for p, _ in sub.get("vsense/dev-q/estimates")]
    # reference: the twin encoder on the same rows, cut after 4 rows (batch = 4)
    cuts = [(0, 4), (4, 8), (8, 10)]
    want = [_encode_twin(100 + a, seq[a:b] * 1000, v[a:b], f[a:b], fmt) for a, b in cuts]
    assert all(_same_payload(g, w) for g, w in zip(got, want))
    assert pub.stats["published_samples"] == 10
    pub.stop()
