"""A bench run tells the truth about the model check: ``vsense-edge run --simulate`` drives
the bundle's reduced model with the bundle's own load model by default (``[simulate] load =
"model"``: edge/daemon/sim_load.py), so a right model says ok; a load 30x the declaration
shows SUSPECT in the health payload, in the daemon's log (one line per verdict change, from
the supervisor) and in the fleet row (``vsense-edge monitor --fleet``: not a plain
"running")."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import numpy as np
import pytest

from edge.daemon.sim_load import ModelLoad, load_psd

BEAM = Path(__file__).resolve().parents[1] / "examples" / "my_beam.toml"


def _load_model():
    """Two correlated band-pass forces (one tilted with a peak) and a source component."""
    from offline.load.model import LoadModel
    from offline.forcing.component import Component
    from offline.forcing.force_model import ForceModel

    fms = [ForceModel("bandpass", (2.0, 100.0), 3.0, 2),
           ForceModel("bandpass", (5.0, 80.0), 1.5, 4, tilt=1.0, peaks=((20.0, 0.05, 3.0),))]
    return LoadModel(fms, corr=np.array([[1.0, 0.5], [0.5, 1.0]]),
                     components=[Component(12.0, 0.02, (0.1, 0.05))])


def test_the_edge_load_spectrum_is_the_offline_load_models():
    """edge.daemon.sim_load's NumPy spectra (no scipy on the Pi) against offline's
    LoadModel.psd (scipy's Butterworth sections, Lyapunov-normalised), and the streamed
    forces' covariance against the model's."""
    lm = _load_model()
    f = np.geomspace(0.5, 400.0, 300)
    ref, got = lm.psd(f), load_psd(lm.as_meta(), f)
    # the same closed forms; offline's qc from a Lyapunov equation, the edge's from a
    # trapezoid on 40,000 log-spaced points: measured 3e-13 relative
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-12 * np.abs(ref).max())
    ml = ModelLoad(lm.as_meta(), 1e-3, scale=2.0, seed=1)
    x = np.vstack([ml.take(n) for n in (1, 999, 4096, 395_000)])  # any chunking
    # covariance of the model below the 500 Hz Nyquist frequency, on a fine grid
    fg = np.linspace(0.0, 500.0, 200_001)[1:]
    S = load_psd(lm.as_meta(), fg)
    cov = 4.0 * 2 * np.sum(S, axis=0) * (fg[1] - fg[0])  # two sides, scale 2 squared
    # 400 s of a process whose slowest feature (a 12 Hz component, zeta 0.02) decorrelates
    # in ~0.7 s: ~600 independent stretches, the variance within ~6 % (3 sigma)
    scale = np.sqrt(np.outer(np.diag(cov), np.diag(cov)))
    assert np.all(np.abs(np.cov(x.T) - cov) <= 0.08 * scale), (np.cov(x.T), cov)
    again = ModelLoad(lm.as_meta(), 1e-3, scale=2.0, seed=1).take(5000)
    np.testing.assert_array_equal(again, x[:5000])  # seeded


def test_one_sample_map_is_its_newmark_substeps_and_keeps_the_period():
    """edge.daemon.simulate.sample_map against the sub-steps run one by one (the plain
    twin), and the frequency of a 52 Hz oscillator it integrates at 1 kHz."""
    from edge.daemon.simulate import sample_map
    from edge.estimator.newmark import effective_stiffness, internal_force, update_rates
    from tests.helpers import chain_matrices

    M, C, K = chain_matrices(n=4)
    dt, sub, beta, gamma, fd = 1e-3, 8, 0.25, 0.5, [3]
    A, B0, B1 = sample_map(M, C, K, dt, beta, gamma, fd, sub)
    rng = np.random.default_rng(2)
    u, v, a = rng.standard_normal((3, 4))
    f0, f1 = rng.standard_normal(2)
    h = dt / sub
    Kinv = np.linalg.inv(effective_stiffness(M, C, K, h, beta, gamma))
    x = (u, v, a)
    for s in range(1, sub + 1):  # u+ = Keff^-1 (r + f+) (paper 004 eq. 15a), f linear
        fv = np.zeros(4)
        fv[3] = f0 + (f1 - f0) * s / sub
        u1 = Kinv @ (internal_force(M, C, *x, h, beta, gamma) + fv)
        x = (u1, *update_rates(u1, *x, h, beta, gamma))
    got = A @ np.concatenate([u, v, a]) + B0 @ [f0] + B1 @ [f1]
    # the same arithmetic regrouped: round-off only
    np.testing.assert_allclose(got, np.concatenate(x), rtol=1e-9, atol=1e-12)
    # a 52.4 Hz undamped oscillator: Newmark's period error (w h)^2 / 12 is 0.9 % at the
    # sample rate, 0.014 % in 8 sub-steps; its frequency from the map's eigenvalues
    w0 = 2 * np.pi * 52.4
    A1 = sample_map(np.eye(1), np.zeros((1, 1)), np.eye(1) * w0 ** 2, dt, beta, gamma,
                    [0], sub)[0]
    w = np.max(np.abs(np.angle(np.linalg.eigvals(A1)))) / dt
    assert abs(w / w0 - 1) < 3e-4, w / w0


@pytest.fixture(scope="module")
def beam_bundle(tmp_path_factory):
    """The README's beam built as a user builds it (declared load, no record)."""
    from offline.cli import main

    d = tmp_path_factory.mktemp("bench")
    assert main(["build", str(BEAM), "-o", str(d / "my_beam.npz"), "--quiet"]) == 0
    return d / "my_beam.npz"


def _config(bundle, port, dev, **simulate):
    from edge.daemon.config import config_from_dict

    return config_from_dict({
        "device": {"id": dev}, "bundle": {"path": str(bundle)},
        # 5 V/m keeps a 30x load's tip displacement inside the ADC's range
        "channels": [{"name": "d_tip", "pin": "AIN0", "sensitivity": 5.0, "offset": 2.5,
                      "unit": "m"}],
        "mqtt": {"host": "127.0.0.1", "port": port, "health_interval_s": 0.2},
        "realtime": {"sched_fifo_priority": 0, "mlockall": False},
        "simulate": {"level": "signal", "clock": "virtual", "seed": 4, **simulate}})


class _Fleet:
    """The fleet view of ``vsense-edge monitor --fleet`` fed with every message under
    ``vsense/`` in arrival order; the row as it read when each health message arrived."""

    def __init__(self, port: int, dev: str):
        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        from edge.monitor.fleet import FleetView, render_fleet

        self.view, self.dev = FleetView("vsense"), dev
        self.health, self.rows = [], []
        self.cond = threading.Condition()
        self.ready = False
        c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"fleet-{dev}")

        def on_connect(client, userdata, flags, rc, props):
            client.subscribe([(f"vsense/{dev}/{t}", 1) for t in
                              ("status", "meta", "health", "estimates")])

        def on_subscribe(client, userdata, mid, rcs, props):
            with self.cond:
                self.ready = True
                self.cond.notify_all()

        def on_message(client, userdata, msg):
            self.view.feed(msg.topic, msg.payload)
            if msg.topic.endswith("/health"):
                row = next(ln for ln in render_fleet(self.view, "test").splitlines()
                           if ln.startswith(dev))
                with self.cond:
                    self.health.append(json.loads(msg.payload))
                    self.rows.append(row)
                    self.cond.notify_all()

        c.on_connect, c.on_subscribe, c.on_message = on_connect, on_subscribe, on_message
        c.connect("127.0.0.1", port, 10)
        c.loop_start()
        self.client = c
        self.wait(lambda: self.ready, 10)

    def wait(self, pred, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(pred, timeout)

    def close(self):
        self.client.disconnect()
        self.client.loop_stop()


def _run(cfg, caplog) -> list[str]:
    """Run the daemon to its simulated end; the model-check lines it logged."""
    from edge.daemon.app import run_daemon

    with caplog.at_level(logging.INFO, logger="vsense.loop"):
        assert run_daemon(cfg, simulate=True, install_signals=False) == 0
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("model check")]


@pytest.mark.slow
def test_a_bench_run_under_the_bundles_load_says_ok(beam_bundle, mosquitto, caplog):
    fleet = _Fleet(mosquitto.port, "bench-ok")
    try:
        # no [simulate] load: the bundle's own load model and sensor noise
        lines = _run(_config(beam_bundle, mosquitto.port, "bench-ok", duration_s=20.0), caplog)
        assert fleet.wait(lambda: any((h.get("model_check") or {}).get("nis") is not None
                                      for h in fleet.health), 20)
    finally:
        fleet.close()
    judged = [h["model_check"] for h in fleet.health if h["model_check"]["nis"] is not None]
    # a right model: no verdict line, no suspect health message, the NIS ratio near 1 and the
    # tracked load level at the designed 1x (the grid's neighbours are 0.56x and 1.78x);
    # measured NIS/dof 0.98-1.05, load level 1.0
    assert lines == []
    assert not any(mc["suspect"] for mc in judged), [mc["reasons"] for mc in judged]
    assert all(0.7 < mc["ratio"] < 1.4 for mc in judged), [mc["ratio"] for mc in judged]
    assert all(0.5 < mc["load_level"] < 1.8 for mc in judged)
    assert all("(model suspect)" not in r for r in fleet.rows)


@pytest.mark.slow
def test_a_load_30x_the_declaration_is_suspect_in_health_log_and_fleet(beam_bundle, mosquitto,
                                                                       caplog):
    fleet = _Fleet(mosquitto.port, "bench-30x")
    try:
        # the old bench default: white noise through a 10 Hz low-pass, 30 N against the
        # declared 1 N random 2-100 Hz; 30 s of simulated time (the check's window is 8 s)
        lines = _run(_config(beam_bundle, mosquitto.port, "bench-30x", duration_s=30.0,
                             load="random", amplitude=30.0), caplog)
        assert fleet.wait(lambda: any((h.get("model_check") or {}).get("suspect")
                                      for h in fleet.health), 20)
    finally:
        fleet.close()
    k = next(i for i, h in enumerate(fleet.health) if h["model_check"]["suspect"])
    mc, h = fleet.health[k]["model_check"], fleet.health[k]
    # within a few seconds of data after the 8 s window filled
    assert h["samples"] <= 8000 + 5000, h["samples"]
    assert mc["ratio"] > 2.0 and any("innovations too large" in r for r in mc["reasons"])
    # the fleet row when that health message arrived: not a plain "running"
    assert "running (model suspect)" in fleet.rows[k], fleet.rows[k]
    # the log: one line at the change, with the NIS ratio and the load level (the verdict
    # stays suspect: no second line within the run)
    assert len(lines) == 1 and lines[0].startswith("model check: SUSPECT (NIS/dof "), lines
    assert "load level" in lines[0] and "innovations too large" in lines[0]
