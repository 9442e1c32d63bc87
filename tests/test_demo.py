"""The newcomer path: offline.demo (short mode, embedded amqtt broker), offline.report,
offline.broker.

The end-to-end test builds the paper cantilever bundle, simulates the full FE model, runs the
edge daemon as a process for 4 s in real time against an embedded amqtt broker and checks the
report and the FDE figures against the bounds stated in docs/quickstart.md.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import threading
import time

import numpy as np
import pytest

# FDE bounds (paper 004 eq. 33, band 5-160 Hz) for `--short` (4 s, seed 1, random force
# 5-160 Hz RMS 0.05 N, 1 % laser noise, truth = full FE model integrated exactly by modal
# superposition; fixed-lag window and alpha chosen by the build). Measured with
# `python -m offline.demo --short --broker amqtt` on the 2-core development machine:
# F110 0.239, d60 0.017 (the run is deterministic when every sample arrives). Bounds with
# about 20 % / 100 % headroom, stated in docs/quickstart.md. For scale, paper Table 9
# (experiment, 5-160 Hz): force 0.1336, displacement 0.3275.
FDE_FORCE_MAX = 0.29
FDE_D60_MAX = 0.035


@pytest.fixture(scope="module")
def short_demo(tmp_path_factory):
    pytest.importorskip("amqtt")
    from offline.demo import DemoSettings, run_demo

    out = tmp_path_factory.mktemp("demo")
    s = DemoSettings(out=str(out), short=True, broker="amqtt", progress=False)
    t0 = time.monotonic()
    printed = io.StringIO()  # what the demo prints (the build's summary among it)
    with contextlib.redirect_stdout(printed):
        r = run_demo(s)
    return r, time.monotonic() - t0, printed.getvalue()


@pytest.mark.slow
def test_demo_short_end_to_end(short_demo):
    r, took, _ = short_demo
    assert r.exit_code == 0 and r.broker == "amqtt"
    # every sample of the 4 s record (4001 rows at 1 kHz) but the last L - 1 (fixed-lag
    # window chosen by the build) has its estimate, and all of them arrived over MQTT
    assert 4001 - 20 <= r.expected <= 4001 and r.received == r.expected
    html = r.report.read_text()
    assert r.report.name == "index.html"
    # self-contained: every figure embedded (eigenvalue error, L-curve, 2 identified,
    # measurement, step time, daemon latency)
    imgs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(imgs) >= 6
    import base64

    assert all(base64.b64decode(b)[:8] == b"\x89PNG\r\n\x1a\n" for b in imgs)
    assert "src=\"http" not in html and "<script" not in html
    for png in ("eigenvalue_error.png", "lcurve.png", "identified_F110.png",
                "identified_d60.png", "step_time.png", "measurement.png"):
        assert (r.report.parent / png).stat().st_size > 5000, png
    assert "5-160 Hz" in html and "FDE" in html and "edge.toml" in html
    f, d = r.fde["F110"]["band"], r.fde["d60"]["band"]
    assert f.band == (5.0, 160.0) and d.band == (5.0, 160.0)
    assert float(f.value) < FDE_FORCE_MAX, f
    assert float(d.value) < FDE_D60_MAX, d
    # the kernel keeps up with the paper's 1 kHz (Table 10 budget: 1 ms per step)
    assert r.step_time_us["p50"] < 1000.0
    run = json.loads((r.out / "run.json").read_text())
    assert run["fde"]["d60"]["band"] == pytest.approx(float(d.value), rel=1e-12)
    assert run["n_health"] >= 1 and run["health"]["latency_us"]["n"] > 0
    # the time-domain figure beside every FDE: recomputed here from the two CSVs the demo
    # wrote (independent of offline.report): RMS(estimate - truth) / std(truth), full band,
    # over the rows compared
    est = np.genfromtxt(r.out / "estimates.csv", delimiter=",", names=True)
    tru = np.genfromtxt(r.out / "truth.csv", delimiter=",", names=True)
    c0, c1 = run["compared"]
    for n in ("F110", "d60"):
        e, t = est[n][c0:c1], tru[n][c0:c1]
        want = np.sqrt(np.mean((e - t) ** 2)) / np.std(t)
        assert run["nrmse"][n]["value"] == pytest.approx(want, rel=1e-9)
        assert r.fde[n]["nrmse"] == pytest.approx(want, rel=1e-9)
    # and next to the accuracy limit of the bundle at the estimator's delay (20 ms): the 20 s
    # demo measured 1.04x for the force, this 4 s run 1.22x (docs/quickstart.md: the
    # smoother's start-up and a short record); bound with about 15 % headroom
    lim = run["nrmse"]["F110"]
    assert lim["limit_delay_ms"] == pytest.approx(20.0, abs=1e-9)
    assert lim["value"] < 1.4 * lim["limit"], lim
    # (no wall-clock bound: project rule; the duration is in run.json and the docs)


@pytest.mark.slow
def test_demo_build_and_limit_print_the_same_ratio(short_demo, capsys):
    """The ratio to the accuracy limit the demo prints (the build's summary of its bundle)
    is the one ``vsense-offline limit --bundle`` prints for that bundle: one definition
    (offline/limit/ratio.py), the bundle's learned load model, its delay."""
    from offline.cli import main
    from offline.demo import DEFAULT_MODEL

    r, _, printed = short_demo
    line = next(ln for ln in printed.splitlines() if "ratio to the accuracy limit" in ln)
    demo = {m[0]: float(m[1]) for m in re.findall(r"(\w+) ([0-9.]+)x \(", line)}
    assert set(demo) == {"F110", "d60"}, line
    assert main(["limit", str(DEFAULT_MODEL), "--delay", "20", "--bundle",
                 str(r.out / "bundle.npz"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "learned from records" in out
    rows = {ln.split()[0]: float(ln.split()[-1]) for ln in out.splitlines()
            if ln.split()[:1] and ln.split()[0] in demo}
    # the same estimator on the same calibration runs (same seeds and load model) over the
    # limit at the same delay, computed the same way: equal to the printed 2 decimals
    # (tolerance: half the last digit)
    for name, v in demo.items():
        assert rows[name] == pytest.approx(v, abs=0.005), (name, demo, rows)


@pytest.mark.slow
def test_demo_estimates_match_a_replay_of_the_same_measurement(short_demo):
    """What arrived over MQTT equals the estimator run offline on the same CSV (independent
    path: Estimator.run over the whole record, no daemon, no MQTT)."""
    from edge.bundle import Bundle
    from edge.estimator import Estimator
    from offline.simulate import read_csv

    r, _, _ = short_demo
    t, Y, _ = read_csv(r.out / "measurement.csv")
    _, E, names = read_csv(r.out / "estimates.csv")
    est = Estimator(Bundle.load(r.out / "bundle.npz"))
    F, Z, _flags = est.run(Y)
    d = est.delay  # row j of the run describes sample j - d; estimates.csv row k is sample k
    ref = np.column_stack([F, Z])[d:]
    n = ref.shape[0]
    assert names[:2] == ["F110", "d60"]
    # JSON estimates are round-trip exact; the same kernel on the same samples: to 1e-9 rel
    np.testing.assert_allclose(E[:n, :2], ref, rtol=1e-9, atol=1e-12 * np.abs(ref).max())
    assert np.all(np.isnan(E[n:, :2]))  # the last d samples have no estimate


def test_settings_validate_with_field_names():
    from offline.demo import DemoSettings

    with pytest.raises(ValueError, match="duration"):
        DemoSettings(duration=0.1)
    with pytest.raises(ValueError, match="oversample"):
        DemoSettings(oversample=0)
    with pytest.raises(ValueError, match="level"):
        DemoSettings(level="bits")
    s = DemoSettings(short=True)
    # 2 load points per sample in the truth, short as well (offline/demo.py __post_init__)
    assert (s.duration, s.oversample) == (4.0, 2)
    s = DemoSettings()
    assert (s.duration, s.oversample) == (20.0, 2)


def test_edge_config_is_accepted_by_the_daemon(tmp_path):
    from edge.daemon.config import load_config
    from offline.demo import DemoSettings, edge_config

    s = DemoSettings(out=str(tmp_path))
    text = edge_config(s, tmp_path / "b.npz", tmp_path / "m.csv", "127.0.0.1", 1884,
                       tmp_path / "rec", "d110", 1234.5, 1000.0, 20001)
    p = tmp_path / "edge.toml"
    p.write_text(text)
    cfg = load_config(p)
    assert cfg["mqtt"]["port"] == 1884 and cfg["simulate"]["source"] == "file"
    assert cfg["simulate"]["duration_s"] == pytest.approx(20.001, rel=1e-12)  # 20001 / 1000
    assert cfg.channels[0]["sensitivity"] == 1234.5 and cfg.channels[0]["name"] == "d110"


def test_bandpass_keeps_only_the_band():
    from offline.report import bandpass

    dt = 1e-3
    t = np.arange(2000) * dt
    # integer numbers of periods in 2 s: both tones sit exactly on FFT bins (analytic result)
    low, high = np.sin(2 * np.pi * 20 * t), 0.5 * np.sin(2 * np.pi * 300 * t)
    y = bandpass(low + high, dt, (5.0, 160.0))
    np.testing.assert_allclose(y, low, atol=1e-12)
    x = low.copy()
    x[:10] = np.nan
    y = bandpass(x, dt, (5.0, 160.0))
    assert np.isnan(y[:10]).all() and np.isfinite(y[10:]).all()


def test_spectrum_amplitude_of_a_sine():
    from offline.report import spectrum

    dt, n = 1e-3, 1000
    t = np.arange(n) * dt
    f, A = spectrum(0.7 * np.sin(2 * np.pi * 50 * t), dt)
    # one-sided amplitude of an on-bin sine = its amplitude (analytic)
    assert f[np.argmax(A)] == pytest.approx(50.0, abs=1e-12)
    assert A.max() == pytest.approx(0.7, rel=1e-12)


def test_time_kernel_shape_and_positive():
    from helpers import chain_bundle
    from offline.demo import time_kernel

    rng = np.random.default_rng(5)
    us = time_kernel(chain_bundle(), rng.standard_normal((200, 1)) * 1e-6)
    assert us.shape == (200,) and np.all(us > 0) and np.all(np.isfinite(us))


# ----------------------------------------------------------------------------- broker
def _roundtrip(b):
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    pub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="t-pub")
    pub.connect(b.host, b.port)
    pub.loop_start()
    pub.publish("t/retained", b"kept", qos=1, retain=True).wait_for_publish(5)
    got, ev = [], threading.Event()
    sub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="t-sub")

    def on_message(c, u, m):
        got.append((m.topic, m.payload))
        if len(got) >= 2:
            ev.set()

    subscribed = threading.Event()
    sub.on_connect = lambda c, u, f, rc, p: c.subscribe("t/#", qos=1)
    sub.on_subscribe = lambda c, u, mid, rcs, p: subscribed.set()
    sub.on_message = on_message
    sub.connect(b.host, b.port)
    sub.loop_start()
    assert subscribed.wait(10), "no SUBACK from the broker"
    pub.publish("t/live", b"now", qos=1).wait_for_publish(5)
    ev.wait(5)
    for c in (pub, sub):
        c.disconnect()
        c.loop_stop()
    return sorted(got)


def test_embedded_broker_roundtrip_and_retained():
    pytest.importorskip("amqtt")
    from offline.broker import answers, start_embedded

    with start_embedded() as b:
        assert b.kind == "amqtt"
        assert _roundtrip(b) == [("t/live", b"now"), ("t/retained", b"kept")]
        port = b.port
    deadline = time.monotonic() + 10  # the listener closes asynchronously: wait for it
    while answers("127.0.0.1", port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not answers("127.0.0.1", port)


def test_started_mosquitto_roundtrip():
    from offline.broker import mosquitto_binary, start_mosquitto

    if mosquitto_binary() is None:
        pytest.skip("mosquitto binary not installed")
    with start_mosquitto() as b:
        assert b.kind == "mosquitto"
        assert _roundtrip(b) == [("t/live", b"now"), ("t/retained", b"kept")]


def test_find_broker_errors_name_the_problem():
    from conftest import free_port
    from offline.broker import find_or_start_broker

    port = free_port()
    with pytest.raises(RuntimeError, match=f"localhost:{port}"):
        find_or_start_broker("existing", existing_port=port)
    with pytest.raises(ValueError, match="broker"):
        find_or_start_broker("rabbit")


BEAM_TOML = """
name = "small-beam"
type = "beam"
[materials.steel]
E = 210e9
nu = 0.3
rho = 7850.0
[beam.sections.main]
material = "steel"
rectangle = { b = 0.02, h = 0.005 }
[[beam.members]]
name = "span"
section = "main"
line = { start = [0, 0, 0], end = [0.5, 0, 0], n = 10 }
[[boundary]]
select = { at = [0, 0, 0] }
[damping]
ratios = [[10.0, 0.02], [200.0, 0.02]]
[reduction]
modes = 4
[[reduction.masters]]
select = { at = [0.25, 0, 0] }
dofs = ["uz"]
[estimator]
rate = 1000.0
alpha = "lcurve"
[[sensors]]
name = "tip"
select = { at = [0.5, 0, 0] }
dof = "uz"
noise = 0.01
[[forces]]
name = "Ftip"
select = { at = [0.5, 0, 0] }
dof = "uz"
[[outputs]]
name = "mid"
select = { at = [0.25, 0, 0] }
dof = "uz"
[design_load]
duration = 0.5
load = { type = "random", band = [2.0, 100.0], rms = 1.0 }
"""


def test_build_report_html_for_any_model(tmp_path):
    """`vsense-offline build --report DIR` writes DIR/index.html with the PNGs embedded."""
    from offline.cli import main

    model = tmp_path / "beam.toml"
    # as shipped (the default ADS1256 chain, which every estimator models: every candidate
    # scored on the converted runs): the eigenvalue error, the L-curve and the estimator
    # choice, embedded
    model.write_text(BEAM_TOML)
    assert main(["build", str(model), "-o", str(tmp_path / "a.npz"), "--report",
                 str(tmp_path / "rep0"), "--quiet"]) == 0
    html = (tmp_path / "rep0" / "index.html").read_text()
    assert html.count("data:image/png;base64,") == 3 and "Estimator choice" in html
    # point samples: every candidate, so also the L-curve
    model.write_text(BEAM_TOML + '\n[acquisition]\nconverter = "ideal"\n')
    code = main(["build", str(model), "-o", str(tmp_path / "b.npz"), "--report",
                 str(tmp_path / "rep"), "--quiet"])
    assert code == 0
    html = (tmp_path / "rep" / "index.html").read_text()
    # eigenvalue error, L-curve and the fixed-lag window study, all embedded
    assert html.count("data:image/png;base64,") == 3
    assert "small-beam" in html and "eigenvalue error" in html and "spectral radius" in html
