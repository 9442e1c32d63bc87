"""Strain-gauge channels of the daemon (edge/daemon/gauge.py): the bridge's sensitivity against
the bridge formula, the tare at start through the daemon's acquisition, the PGA range refusal
of ``check-config --bundle`` and the errors of bad gauge configs.

Reference: a Wheatstone bridge with k active arms, V_out / V_ex = k GF eps / 4 (quarter k = 1,
linearised from the exact GF eps / (4 + 2 GF eps); half k = 2; full k = 4), e.g. Hoffmann,
"An Introduction to Stress Analysis and Transducer Design using Strain Gauges", HBM, ch. 7.
"""

from __future__ import annotations

import numpy as np
import pytest

from edge.cli import main
from edge.csvio import write_table
from edge.daemon.config import ConfigError, config_from_dict
from tests.helpers import chain_bundle

GF, VEX = 2.1, 5.0


@pytest.fixture(scope="module")
def gauge_bundle(tmp_path_factory):
    # a chain bundle whose first channel is a strain gauge in microstrain (what the offline
    # build writes for [[sensors]] kind = "strain": a channel of kind 3 reading one reduced
    # coordinate), with the channel std the build states
    b = chain_bundle(window=3, kinds=("displacement", "acceleration"))
    b.channels[0].kind, b.channels[0].unit = "strain", "microstrain"
    b.meta["channel_std"] = {"y0": 2500.0, "y1": 1.0}
    p = tmp_path_factory.mktemp("gauge") / "gauge.npz"
    b.save(p)
    return p


def _cfg(bundle, **ch0):
    c0 = {"name": "y0", "pin": "AIN0", "pin_neg": "AIN1", "bridge": "quarter",
          "gauge_factor": GF, "excitation_v": VEX, "unit": "microstrain"}
    c0.update(ch0)
    return {"device": {"id": "g1"}, "bundle": {"path": str(bundle)},
            "channels": [c0, {"name": "y1", "pin": "AIN2", "sensitivity": 0.01}],
            "simulate": {"clock": "virtual", "level": "signal"}}


@pytest.mark.parametrize("bridge, k", [("quarter", 1), ("half", 2), ("full", 4)])
def test_bridge_sensitivity_is_the_bridge_formula(gauge_bundle, bridge, k):
    cfg = config_from_dict(_cfg(gauge_bundle, bridge=bridge))
    # V_out / V_ex = k GF eps / 4, eps = 1e-6 per microstrain
    assert cfg.channels[0]["sensitivity"] == pytest.approx(k * GF * VEX / 4 * 1e-6, rel=1e-12)
    if bridge == "quarter":
        # the exact quarter bridge at 1000 microstrain: V_ex GF eps / (4 + 2 GF eps); the
        # linear sensitivity reads it high by GF eps / 2 = 0.105 % (module docstring)
        eps = 1e-3
        exact = VEX * GF * eps / (4 + 2 * GF * eps)
        lin = cfg.channels[0]["sensitivity"] * 1000.0
        assert lin / exact - 1 == pytest.approx(GF * eps / 2, rel=1e-6)
    strain = config_from_dict(_cfg(gauge_bundle, bridge=bridge, unit="strain"))
    assert strain.channels[0]["sensitivity"] == pytest.approx(k * GF * VEX / 4, rel=1e-12)


@pytest.mark.parametrize("ch0, pattern", [
    ({"gauge_factor": 0.0}, r"#0 \(y0\) gauge_factor: must be > 0, got 0"),
    ({"gauge_factor": -2.0}, r"#0 \(y0\) gauge_factor: must be > 0"),
    ({"excitation_v": 0.0}, r"#0 \(y0\) excitation_v: must be > 0 V"),
    ({"bridge": "eighth"}, r"#0 bridge: must be one of"),
    ({"unit": "m"}, r"#0 \(y0\) unit: a bridge channel reads strain"),
    ({"sensitivity": 1e-6}, r"#0 \(y0\) sensitivity: a bridge channel's sensitivity follows"),
    ({"bridge": ""}, r"#0 \(y0\) gauge_factor: only for a strain-gauge channel"),
    ({"tare_samples": -1}, r"#0 tare_samples: must be >= 0"),
    ({"range": -1.0}, r"#0 range: must be >= 0"),
])
def test_bad_gauge_configs_name_the_key(gauge_bundle, ch0, pattern):
    with pytest.raises(ConfigError, match=pattern):
        config_from_dict(_cfg(gauge_bundle, **ch0))


def _toml(d: dict) -> str:
    """The config as a user writes it: tables, then the [[channels]] array."""
    val = lambda v: f'"{v}"' if isinstance(v, str) else repr(v)  # noqa: E731
    out = []
    for sec, body in d.items():
        for t in (body if isinstance(body, list) else [body]):
            out.append(f"[[{sec}]]" if isinstance(body, list) else f"[{sec}]")
            out += [f"{k} = {val(v)}" for k, v in t.items()]
    return "\n".join(out) + "\n"


def _check(tmp_path, d, capsys):
    p = tmp_path / "edge.toml"
    p.write_text(_toml(d))
    rc = main(["check-config", str(p), "--bundle", "--simulate"])
    return rc, capsys.readouterr()


def test_expected_strain_beyond_the_pga_range_is_refused(tmp_path, gauge_bundle, capsys,
                                                          caplog):
    # the bundle states std 2500 microstrain: peak 4 x 2500 = 10000 microstrain = 26.25 mV
    # at the input (2.625e-6 V per microstrain); pga 64 gives +-2 x 2.5 / 64 = 78.1 mV: fits,
    # and no higher PGA exists
    d = _cfg(gauge_bundle)
    d["adc"] = {"pga": 64}
    rc, out = _check(tmp_path, d, capsys)
    assert rc == 0, out.err
    assert "would still fit" not in caplog.text
    # pga 1 (+-5 V): the 26.25 mV peak uses 0.53 % of it; pga 64 would still fit: a warning
    d["adc"] = {"pga": 1}
    rc, out = _check(tmp_path, d, capsys)
    assert rc == 0 and "uses 0.53 % of the +-5 V input range; [adc] pga = 64" in caplog.text
    d["adc"] = {"pga": 64}
    # a declared range of 40000 microstrain: 105 mV > 78.1 mV: refused, naming the numbers
    d["channels"][0]["range"] = 40000.0
    rc, out = _check(tmp_path, d, capsys)
    assert rc == 2
    assert "range: expected peak 4e+04 microstrain (its range) is 0.105 V" in out.err
    assert "+-0.07812 V" in out.err and "set [adc] pga <= 32" in out.err
    # a bridge on a channel the bundle reads as an acceleration: refused
    d = _cfg(gauge_bundle)
    d["channels"][1].update(bridge="full", unit="microstrain")
    d["channels"][1].pop("sensitivity")
    rc, out = _check(tmp_path, d, capsys)
    assert rc == 2 and "#1 (y1) bridge: the bundle's channel 'y1' is acceleration" in out.err


def test_tare_subtracts_the_mean_of_the_first_samples(tmp_path, gauge_bundle):
    from edge.daemon.app import load_estimator, make_acquisition

    # a gauge at rest with a bridge imbalance of 37 microstrain and noise 0.5 microstrain,
    # then a step of 100 microstrain (a load) after the tare window
    rng = np.random.default_rng(4)
    n, ntare = 3000, 500
    t = np.arange(n) * 1e-3
    y0 = 37.0 + 0.5 * rng.standard_normal(n) + np.where(t >= 1.0, 100.0, 0.0)
    y1 = 0.01 * rng.standard_normal(n)
    f = tmp_path / "rest.csv"
    write_table(f, t, np.column_stack([y0, y1]), ["y0", "y1"])
    d = _cfg(gauge_bundle, tare_samples=ntare)
    d["simulate"].update(source="file", file=str(f), duration_s=n * 1e-3)
    cfg = config_from_dict(d)
    est, _, _ = load_estimator(cfg)
    acq, _ = make_acquisition(cfg, est, simulate=True)
    vals, tns, flags = np.zeros((n, 2)), np.zeros(n, np.int64), np.zeros(n, np.uint8)
    k = 0
    while k < n:
        k += acq.read(vals[k:], tns[k:], flags[k:])
    acq.close()
    assert acq.done
    # the offset is the mean of the first 500 samples: 37 +- 0.5 / sqrt(500) = 0.022 (4 sigma)
    assert acq.offset[0] == pytest.approx(np.mean(y0[:ntare]), abs=1e-9)
    assert abs(acq.offset[0] - 37.0) < 4 * 0.5 / np.sqrt(ntare)
    assert acq.offset[1] == 0.0  # no tare asked for: untouched
    np.testing.assert_allclose(vals[:, 1], y1, atol=1e-9)
    # after the tare: the load alone (the step of 100) with the noise; the read-back is
    # exact to the float round-off of volts -> strain (atol 1e-6 microstrain)
    np.testing.assert_allclose(vals[ntare:, 0], y0[ntare:] - acq.offset[0], atol=1e-6)
    assert abs(np.mean(vals[ntare:1000, 0])) < 4 * 0.5 / np.sqrt(ntare) + 4 * 0.5 / np.sqrt(500)
    # during the tare: the running mean subtracted, the first sample reads 0
    assert vals[0, 0] == pytest.approx(0.0, abs=1e-6)
    run = np.cumsum(y0[:ntare]) / np.arange(1, ntare + 1)
    np.testing.assert_allclose(vals[:ntare, 0], y0[:ntare] - run, atol=1e-6)


def _shifted_record(tmp_path, n, shift_at, seed=4):
    """A gauge at rest: imbalance 37 microstrain, 62 from row ``shift_at`` on (a temperature
    change), noise 0.5 microstrain; the second channel noise only."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) * 1e-3
    y0 = np.where(np.arange(n) >= shift_at, 62.0, 37.0) + 0.5 * rng.standard_normal(n)
    y1 = 0.01 * rng.standard_normal(n)
    f = tmp_path / "shift.csv"
    write_table(f, t, np.column_stack([y0, y1]), ["y0", "y1"])
    return f, y0


def test_retare_keeps_the_old_offset_until_the_new_mean_is_in(tmp_path, gauge_bundle):
    from edge.daemon.app import load_estimator, make_acquisition

    n, ntare, start, nre = 4000, 500, 1500, 800
    f, y0 = _shifted_record(tmp_path, n, 1000)
    d = _cfg(gauge_bundle, tare_samples=ntare)
    d["simulate"].update(source="file", file=str(f), duration_s=n * 1e-3)
    cfg = config_from_dict(d)
    est, _, _ = load_estimator(cfg)
    acq, _ = make_acquisition(cfg, est, simulate=True)
    vals, tns, flags = np.zeros((n, 2)), np.zeros(n, np.int64), np.zeros(n, np.uint8)
    done, k = [], 0
    while k < n:
        if k >= start and not done and acq.pending is None:
            acq.retare([nre, 0], lambda prev, short: done.append((prev.copy(), short, k)))
            with pytest.raises(RuntimeError, match="a tare is running"):
                acq.retare([nre, 0], None)
            k0 = k
        k += acq.read(vals[k:], tns[k:], flags[k:])
    acq.close()
    (prev, short, _), = done
    assert short is None
    # the start tare: the mean of rows 0..499 (37 +- 0.5 / sqrt(500)); the re-tare: the mean
    # of the raw rows k0 .. k0+799, to the float round-off of volts -> strain (1e-6)
    assert prev[0] == pytest.approx(np.mean(y0[:ntare]), abs=1e-6)
    assert acq.offset[0] == pytest.approx(np.mean(y0[k0:k0 + nre]), abs=1e-6)
    assert abs(acq.offset[0] - 62.0) < 4 * 0.5 / np.sqrt(nre)
    assert acq.offset[1] == 0.0 and prev[1] == 0.0  # not asked: untouched
    # during the re-tare the old offset is subtracted (the shift reads as +25), after it the
    # new one (the gauge reads its noise about 0 again)
    np.testing.assert_allclose(vals[k0:k0 + nre, 0], y0[k0:k0 + nre] - prev[0], atol=1e-6)
    np.testing.assert_allclose(vals[k0 + nre:, 0], y0[k0 + nre:] - acq.offset[0], atol=1e-6)


def test_retare_of_a_channel_without_finite_samples_gives_up_naming_it(tmp_path,
                                                                      gauge_bundle):
    from edge.daemon.tare import RETARE_PATIENCE, TareAcquisition

    class NaNs:  # a channel in fault: every sample NaN
        def read(self, values, t_ns, flags):
            values[:] = np.nan
            return values.shape[0]

    acq = TareAcquisition(NaNs(), [0, 0])
    out = []
    acq.retare([100, 0], lambda prev, short: out.append(short))
    vals = np.zeros((10, 2))
    for _ in range(RETARE_PATIENCE * 10 - 1):
        acq.read(vals, None, None)
    assert out == [] and acq.pending is not None
    acq.read(vals, None, None)  # the 400th row: gives up
    assert out == [[0]] and acq.pending is None and acq.offset[0] == 0.0


@pytest.mark.mqtt
def test_tare_command_through_mosquitto(tmp_path, gauge_bundle, mosquitto, subscriber):
    """Real clock, 5 s of a gauge at rest whose zero moves from 37 to 62 microstrain at 1 s:
    the ``tare`` command (in [mqtt] commands) replies when its samples are in, with the new
    and the previous offset; a second one while it runs, a bad sample count and a device
    without the command in its allow-list are refused with the reason."""
    import json
    import threading

    from edge.daemon.app import run_daemon
    from edge.daemon.payloads import decode_estimates

    n = 5000
    f, y0 = _shifted_record(tmp_path, n, 1000)
    d = _cfg(gauge_bundle, tare_samples=500)
    d["simulate"].update(source="file", file=str(f), duration_s=n * 1e-3, clock="real")
    d["mqtt"] = {"host": "127.0.0.1", "port": mosquitto.port, "reconnect_min_s": 0.1,
                 "reconnect_max_s": 0.5, "commands": ["tare", "status"]}
    d["device"]["id"] = "tare1"
    d["recorder"] = {"enabled": False}
    base = "vsense/tare1"
    sub = subscriber([f"{base}/estimates", f"{base}/cmd/reply"], "s-tare")
    codes = []
    th = threading.Thread(target=lambda: codes.append(
        run_daemon(config_from_dict(d), simulate=True, install_signals=False)))
    th.start()
    replies = lambda: [json.loads(p) for p, _ in sub.get(f"{base}/cmd/reply")]  # noqa: E731
    try:
        # past the zero's move (row 1000) and the start tare: the estimates of row 1500
        assert sub.wait(lambda: any(decode_estimates(p)["seq"][-1] >= 1500
                                    for p, _ in sub.get(f"{base}/estimates")), 120)
        for cid, args in ((1, {"samples": 1000}), (2, {}), (3, {"samples": 0})):
            sub.publish(f"{base}/cmd", json.dumps({"cmd": "tare", "id": cid, "args": args}))
        assert sub.wait(lambda: len(replies()) >= 3, 30), replies()
        r = {x["id"]: x for x in replies()}
        # the second while the first runs (1000 samples: 1 s), the third out of range
        assert not r[2]["ok"] and "a tare is running" in r[2]["reason"], r
        assert not r[3]["ok"] and "samples must be 1 .." in r[3]["reason"], r
        tare = r[1]["tare"]
        assert r[1]["ok"] and list(tare) == ["y0"], r  # the bridge channel only
        # previous: the start tare, the mean of rows 0..499 (37 +- 0.5 / sqrt(500), 4 sigma);
        # new: 1000 samples after the move (62 +- 0.5 / sqrt(1000), 4 sigma)
        assert tare["y0"]["previous"] == pytest.approx(np.mean(y0[:500]), abs=1e-6)
        assert abs(tare["y0"]["offset"] - 62.0) < 4 * 0.5 / np.sqrt(1000), tare
        assert tare["y0"]["samples"] == 1000
    finally:
        th.join(30)
    assert codes == [0]
