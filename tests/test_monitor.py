"""edge.monitor: DeviceView (pure), rendering, CSV recording, and `vsense-edge monitor` against
the session's Mosquitto with a fake device publishing status/meta/estimates/health."""

from __future__ import annotations

import csv
import json
import threading
import time

import numpy as np
import pytest

from edge.daemon.mqtt import encode_estimates
from edge.monitor import CsvRecorder, DeviceView, parse_broker, render

META = {"bundle_id": "chain-abc123", "bundle_hash": "abc123def4567890",
        "channels": [{"name": "d110", "unit": "m"}],
        "forces": [{"name": "F110", "unit": "N"}],
        "outputs": [{"name": "d60", "unit": "m", "kind": "displacement"}],
        "columns": ["F110", "d60"], "rate": 1000.0, "delay_samples": 0, "delay_s": 0.0,
        "format": "json", "batch": 50}
HEALTH = {"samples": 5000, "estimates": 5000, "uptime_s": 5.0,
          "latency_us": {"p50": 55.0, "p99": 408.0, "p999": 2035.0, "max": 2664.0, "n": 5000},
          "missed_conversions": 5, "overruns": 3, "lost_samples": 7, "ring_depth": 2,
          "ring_capacity": 2000,
          "bad_samples": 1, "estimator_resets": 0, "cpu_percent": 6.6, "rss_mb": 120.5,
          "cpu_temp_c": None,
          "publish": {"queue_depth": 4, "drops_messages": 0, "drops_samples": 0,
                      "published": 100, "connected": True},
          "recorder": {"queue_depth": 0, "files": 2, "bytes": 123456, "write_errors": 0}}


def batch(seq0, n, rng, fmt="json"):
    """A batch of n estimates; values seeded, t_ns = seq * 1 ms."""
    seq = np.arange(seq0, seq0 + n)
    v = rng.standard_normal((n, 2)) * [1.0, 1e-4]
    return encode_estimates(seq0, seq * 1_000_000, v, np.zeros(n, np.uint8), fmt), v


# ------------------------------------------------------------------------ pure parts
@pytest.mark.parametrize("text,expected", [
    ("localhost", ("localhost", 1883)), ("10.0.0.2:1884", ("10.0.0.2", 1884)),
    ("[::1]:1885", ("::1", 1885)), ("[::1]", ("::1", 1883)), (" host ", ("host", 1883))])
def test_parse_broker(text, expected):
    assert parse_broker(text) == expected


@pytest.mark.parametrize("text,word", [("", "empty"), ("h:abc", "not a number"),
                                       ("h:0", "PORT"), ("h:70000", "PORT"),
                                       ("[::1", "missing"), (":1883", "HOST")])
def test_parse_broker_rejects(text, word):
    with pytest.raises(ValueError, match="--broker") as e:
        parse_broker(text)
    assert word in str(e.value)


@pytest.mark.parametrize("fmt", ["json", "binary"])
def test_view_collects_deduplicates_and_sorts(fmt):
    rng = np.random.default_rng(3)
    view = DeviceView(keep=True)
    view.feed("meta", json.dumps(META).encode(), now=0.0)
    view.feed("status", b'{"state": "running", "t": 1.0, "device": "d"}', now=0.0)
    p1, v1 = batch(50, 50, rng, fmt)
    p0, v0 = batch(0, 50, rng, fmt)
    view.feed("estimates", p1, now=0.1)
    view.feed("estimates", p0, now=0.2)   # out of order
    view.feed("estimates", p1, now=0.3)   # QoS-1 redelivery
    view.feed("estimates", b"garbage", now=0.3)
    seq, t_ns, v, f = view.arrays()
    np.testing.assert_array_equal(seq, np.arange(100))
    np.testing.assert_array_equal(t_ns, np.arange(100) * 1_000_000)
    # JSON floats are printed round-trip exact and binary is raw f8: equality to 0 ulp
    np.testing.assert_array_equal(v, np.vstack([v0, v1]))
    assert view.n_samples == 100 and view.n_duplicates == 50 and view.n_bad_payloads == 1
    assert view.columns == ["F110", "d60"] and view.units() == ["N", "m"]
    assert view.status["state"] == "running"


def test_measured_rate_from_arrivals():
    # 20 batches of 50 samples 0.05 s apart = 1000 samples/s exactly (constructed arrivals)
    rng = np.random.default_rng(0)
    view = DeviceView(rate_window_s=5.0)
    for i in range(20):
        view.feed("estimates", batch(50 * i, 50, rng)[0], now=10.0 + 0.05 * i)
    assert view.measured_rate(now=10.0 + 0.05 * 19) == pytest.approx(1000.0, rel=1e-9)
    # everything older than the window is forgotten: no rate
    assert view.measured_rate(now=100.0) is None
    # without keep, a repeat of an old batch is a duplicate, not new samples
    view.feed("estimates", batch(0, 50, rng)[0], now=11.0)
    assert view.n_samples == 1000 and view.n_duplicates == 50


def test_render_shows_values_units_and_health():
    view = DeviceView()
    view.feed("meta", json.dumps(META).encode(), now=0.0)
    view.feed("status", b'{"state": "sensor_fault", "faulty_channels": ["d110"]}', now=0.0)
    payload = encode_estimates(7, np.array([7_000_000]), np.array([[0.125, -2.5e-4]]),
                               np.array([1], np.uint8))
    view.feed("estimates", payload, now=0.0)
    view.feed("health", json.dumps(HEALTH).encode(), now=0.0)
    text = render(view, "dev1", "h:1883", now=0.0)
    assert "sensor_fault" in text and "faulty: d110" in text
    assert "chain-abc123" in text and "d110 [m]" in text
    assert "+0.12500 N" in text and "-2.5000e-04 m" in text
    assert "p50 55 / p99 408 / p99.9 2,035 / max 2,664 us" in text
    assert "missed conversions 5, overruns 3, lost samples 7" in text and "queue 4" in text
    assert "seq 7" in text and "flags 1" in text
    empty = render(DeviceView(), "dev1", "h:1883", now=0.0, connected=False)
    assert "no meta" in empty and "none yet" in empty and "connection lost" in empty


def test_csv_holds_rows_until_meta(tmp_path):
    rng = np.random.default_rng(2)
    view = DeviceView()
    rec = CsvRecorder(str(tmp_path / "m.csv"), view)
    view.listeners.append(rec)
    p0, v0 = batch(0, 5, rng)
    view.feed("estimates", p0)
    assert rec.header is None and rec.rows == 0
    view.feed("meta", json.dumps(META).encode())
    p1, v1 = batch(5, 5, rng)
    view.feed("estimates", p1)
    rec.close()
    rows = list(csv.reader(open(tmp_path / "m.csv")))
    assert rows[0] == ["time", "seq", "F110", "d60", "flags"]
    data = np.array(rows[1:], float)
    np.testing.assert_array_equal(data[:, 1], np.arange(10))
    np.testing.assert_allclose(data[:, 0], np.arange(10) * 1e-3, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(data[:, 2:4], np.vstack([v0, v1]))  # repr: exact


def test_csv_unwritable_is_a_clear_error(tmp_path, capsys):
    from edge.cli import main

    code = main(["monitor", "--broker", "127.0.0.1:1", "--device", "x",
                 "--csv", str(tmp_path / "no" / "dir" / "m.csv"), "--once"])
    assert code == 2
    assert "--csv: cannot write" in capsys.readouterr().err


def test_unreachable_broker_exit_2(capsys):
    from conftest import free_port
    from edge.cli import main

    port = free_port()
    code = main(["monitor", "--broker", f"127.0.0.1:{port}", "--device", "x", "--once",
                 "--timeout", "1"])
    assert code == 2
    assert f"127.0.0.1:{port}" in capsys.readouterr().err


# ------------------------------------------------------------------------ live, Mosquitto
class FakeDevice:
    """Publishes like the daemon: retained status/meta, estimate batches, health."""

    def __init__(self, broker, device="fake-01"):
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.pre = f"vsense/{device}/"
        self.c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"fake-{device}")
        self.c.connect(broker.host, broker.port)
        self.c.loop_start()
        self.rng = np.random.default_rng(7)
        self.sent = []
        self.stop = threading.Event()

    def pub(self, sub, payload, retain=False):
        self.c.publish(self.pre + sub, payload, qos=1, retain=retain).wait_for_publish(5)

    def run(self, seconds=6.0, n=50, period=0.05):
        self.pub("status", json.dumps({"state": "running", "t": time.time()}), retain=True)
        self.pub("meta", json.dumps(META), retain=True)
        seq, t_end = 0, time.monotonic() + seconds
        while not self.stop.is_set() and time.monotonic() < t_end:
            p, v = batch(seq, n, self.rng)
            self.pub("estimates", p)
            if seq == 100:  # a QoS-1 style repeat of the previous batch
                self.pub("estimates", batch(50, n, np.random.default_rng(99))[0])
            self.sent.append(v)
            if seq % 200 == 0:
                self.pub("health", json.dumps(dict(HEALTH, samples=seq)))
            seq += n
            time.sleep(period)

    def close(self):
        self.stop.set()
        # clear the retained messages so later tests start clean
        self.pub("status", b"", retain=True)
        self.pub("meta", b"", retain=True)
        self.c.disconnect()
        self.c.loop_stop()


@pytest.mark.mqtt
def test_monitor_once_against_mosquitto(mosquitto, tmp_path, capsys):
    from edge.cli import main

    dev = FakeDevice(mosquitto)
    th = threading.Thread(target=dev.run, daemon=True)
    th.start()
    try:
        code = main(["monitor", "--broker", f"{mosquitto.host}:{mosquitto.port}", "--device",
                     "fake-01", "--once", "--timeout", "10", "--csv", str(tmp_path / "m.csv")])
    finally:
        dev.stop.set()
        th.join(10)
        dev.close()
    out = capsys.readouterr().out
    assert code == 0, out
    assert "state     running" in out and "chain-abc123" in out
    assert "F110" in out and " N" in out and "d60" in out
    assert "samples/s received" in out and "(nominal 1000)" in out
    assert "p50 55 / p99 408" in out
    rows = list(csv.reader(open(tmp_path / "m.csv")))
    assert rows[0] == ["time", "seq", "F110", "d60", "flags"]
    data = np.array(rows[1:], float)
    seq = data[:, 1].astype(int)
    # every row once, in order, and equal to what was published (repr: exact)
    assert len(seq) == len(set(seq)) and np.all(np.diff(seq) > 0)
    sent = np.vstack(dev.sent)
    np.testing.assert_array_equal(data[:, 2:4], sent[seq])


@pytest.mark.mqtt
def test_monitor_duration_redraws_and_once_timeout(mosquitto, capsys):
    from edge.cli import main

    code = main(["monitor", "--broker", f"{mosquitto.host}:{mosquitto.port}", "--device",
                 "nobody", "--duration", "1.2", "--interval", "0.3"])
    out = capsys.readouterr().out
    assert code == 0
    # frames every 0.3 s for 1.2 s: 4 or 5 of them (scheduler slack on a loaded box)
    assert 3 <= out.count("vsense monitor — device nobody") <= 6
    code = main(["monitor", "--broker", f"{mosquitto.host}:{mosquitto.port}", "--device",
                 "nobody", "--once", "--timeout", "0.5"])
    assert code == 1
    assert "no estimates from nobody" in capsys.readouterr().err


def test_render_names_why_the_model_is_suspect_and_the_load_level():
    view = DeviceView()
    view.feed("meta", json.dumps(META).encode(), now=0.0)
    mc = {"nis": 3000.0, "dof": 8000, "window_s": 8.0, "ratio": 0.375, "suspect": True,
          "bands": [], "reasons": ["innovations too small (NIS/dof 0.375 below 0.8)"],
          "load_level": 0.0316}
    view.feed("health", json.dumps({**HEALTH, "model_check": mc}).encode(), now=0.0)
    text = render(view, "dev1", "h:1883", now=0.0)
    assert "SUSPECT" in text and "innovations too small" in text
    assert "level 0.0316 x the designed force RMS" in text
    # NIS as a ratio to its expected value (issue 37: "121551009.0 / 16000" read raw)
    assert "NIS 0.375 x its expected value over 8 s" in text
    mc.update(nis=121551009.0, dof=16000, ratio=121551009.0 / 16000)
    view.feed("health", json.dumps({**HEALTH, "model_check": mc}).encode(), now=0.0)
    assert "NIS 7,597 x its expected value" in render(view, "dev1", "h:1883", now=0.0)


def test_render_value_with_its_std_to_sensible_digits():
    """The std to 3 significant digits, the value to the same place (issue 37: the monitor
    printed "+/- +11.67153 N")."""
    from edge.monitor.view import fmt_pm

    # references: the rule written out by hand for each case
    assert fmt_pm(238.4567, 11.67153, "N") == "+238.5 ± 11.7 N"
    assert fmt_pm(-0.0123456, 0.5, "N") == "-0.012 ± 0.500 N"
    assert fmt_pm(1.2345e-5, 2.93e-6, "m") == "+1.234e-05 ± 2.93e-06 m"  # 1e-8 place
    assert fmt_pm(1234.4, 1234.4, "N") == "+1234 ± 1234 N"
    assert fmt_pm(float("nan"), 1.0, "N") == "—" and fmt_pm(0.125, None, "N") == "+0.12500 N"
    view = DeviceView()
    view.feed("meta", json.dumps(META).encode(), now=0.0)
    payload = encode_estimates(7, np.array([7_000_000]), np.array([[238.4567, -2.5e-4]]),
                               np.array([0], np.uint8), std=np.array([11.67153, 2.93e-6]))
    view.feed("estimates", payload, now=0.0)
    text = render(view, "dev1", "h:1883", now=0.0)
    assert "+238.5 ± 11.7 N" in text and "+/-" not in text


def test_broker_settings_from_a_config_and_options(tmp_path, monkeypatch):
    """edge.monitor.connect: the daemon's [mqtt] keys from -c, options over them, the
    password from a file or a variable, and each bad value named (no broker needed)."""
    import argparse

    from edge.monitor.connect import add_broker_arguments, broker_settings

    p = add_broker_arguments(argparse.ArgumentParser())
    toml = tmp_path / "edge.toml"
    toml.write_text('[device]\nid = "dev1"\n[[channels]]\nname = "y0"\npin = "AIN0"\n'
                    '[mqtt]\nhost = "pi.local"\nport = 8883\ntls = true\nca_file = "ca.pem"\n'
                    'username = "eng"\npassword_env = "VSENSE_TEST_PW"\nbase_topic = "plant"\n')
    monkeypatch.setenv("VSENSE_TEST_PW", "s3")
    s = broker_settings(p.parse_args(["-c", str(toml)]))
    assert (s["host"], s["port"], s["tls"], s["ca_file"], s["username"], s["password"],
            s["base_topic"], s["device"]) == ("pi.local", 8883, True, str(tmp_path / "ca.pem"),
                                              "eng", "s3", "plant", "dev1")
    # another host (the file's port kept), another user: not the file's user's password
    s = broker_settings(p.parse_args(["-c", str(toml), "--broker", "other",
                                      "--username", "viewer"]))
    assert (s["host"], s["port"], s["username"], s["password"]) == ("other", 8883, "viewer",
                                                                    None)
    pw = tmp_path / "pw"
    pw.write_text("secret\n")
    s = broker_settings(p.parse_args(["--username", "viewer", "--password-file", str(pw),
                                      "--tls-ca", "x.pem"]))
    assert (s["host"], s["port"], s["tls"], s["password"]) == ("localhost", 1883, True, "secret")
    pw.write_text("\n")
    for argv, msg in ((["--broker", "h:70000"], "70000"),
                      (["--password-file", str(pw)], "first line is empty"),
                      (["--password-file", str(tmp_path / "none")], "cannot read"),
                      (["--tls-cert", "c.pem"], "go together"),
                      (["--password-env", "VSENSE_TEST_UNSET_PW"], "VSENSE_TEST_UNSET_PW"),
                      (["-c", str(tmp_path / "none.toml")], "none.toml")):
        with pytest.raises(ValueError, match=msg):
            broker_settings(p.parse_args(argv))
