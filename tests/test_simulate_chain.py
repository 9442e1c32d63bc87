"""``vsense-offline simulate --chain ads1256``: measurements converted like the ADS1256
(issue 35), each channel over its window at its own instant (offline/chain.py); the truth
stays point values. References: the datasheet's closed-form response
(edge/hw/ads1256_filter.frequency_response), the taps' linear-phase delay and Table 14's
cycling throughput (channel_instants)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("scipy.sparse")

from edge.csvio import read_table  # noqa: E402
from edge.hw.ads1256_filter import (F_MOD, conversion_taps, frequency_response,  # noqa: E402
                                    modulator_lags_s)
from edge.hw.ads1256_spec import CYCLING_THROUGHPUT_HZ  # noqa: E402
from helpers import strip_toml  # noqa: E402
from offline.chain import (MIN_STEPS_PER_ROW, conversions, interpolation_gain_error,  # noqa: E402
                           plan_chain)
from offline.cli import main  # noqa: E402
from offline.simulate import simulate_model  # noqa: E402

SENSOR = """
[[sensors]]
name = "{name}"
select = {{ at = [{x}, 0.0, 0.0] }}
dof = "uz"
kind = "{kind}"
"""
TAIL = """
[[boundary]]
select = {{ at = [0.0, 0.0, 0.0] }}
[estimator]
rate = {rate}
[[forces]]
name = "F_tip"
select = {{ at = [0.17, 0.0, 0.0] }}
dof = "uz"
[[outputs]]
name = "u_mid"
select = {{ at = [0.085, 0.0, 0.0] }}
dof = "uz"
kind = "displacement"
"""


def model(tmp_path, rate, sensors, damping=""):
    path = tmp_path / "beam.toml"
    text = strip_toml(10) + damping + TAIL.format(rate=rate)
    for name, x, kind in sensors:
        text += SENSOR.format(name=name, x=x, kind=kind)
    path.write_text(text)
    return path


# ---------------------------------------------------------------- the pure function
@pytest.mark.parametrize("drate,frac", [(1000.0, 0.5), (1000.0, 0.13), (3750.0, 0.5)])
def test_conversions_on_the_fine_grid_error_is_the_interpolation_bound(drate, frac):
    # a sine on a grid of MIN_STEPS_PER_ROW steps per row, converted at offsets 0 and 0.37
    # rows: reference the taps over the exact sine at every modulator instant; the linear
    # interpolation's error is below pi^2 / (12 s^2) = 8.0e-4 of the amplitude at half the row
    # rate (offline/chain.py), far below 1 % sensor noise
    s = MIN_STEPS_PER_ROW
    assert interpolation_gain_error(s) < 8.1e-4
    f = frac * drate
    dt_f = 1.0 / (drate * s)
    n_rows = 60
    tf = np.arange((n_rows + 2) * s) * dt_f
    offs = np.array([0.0, 0.37 / drate])
    y = np.column_stack([np.sin(2 * np.pi * f * tf + 0.3)] * 2)
    got = conversions(y, dt_f, s, n_rows, drate, offs)
    h, lags = conversion_taps(drate), modulator_lags_s(drate)
    t = np.arange(n_rows) / drate
    for j, o in enumerate(offs):
        exact = np.array([h @ np.sin(2 * np.pi * f * (tr + o - lags) + 0.3) for tr in t])
        live = t + o >= lags[-1]  # windows inside the record (before it: at rest, 0)
        err = np.max(np.abs(got[live, j] - exact[live]))
        assert err <= interpolation_gain_error(s) * (2 * frac) ** 2 + 1e-9, (j, err)
    # at rest before the record (zeros): of row 0's window only the taps within one fine
    # step of its end see the record (|sin| <= 1), their sum bounds the conversion
    assert abs(got[0, 0]) <= h[lags < dt_f].sum() + 1e-12


def test_plan_chain_defaults_and_errors():
    one = plan_chain("ads1256", 1000.0, 1)
    assert (one.drate, one.mode, one.offsets.tolist()) == (1000.0, "continuous", [0.0])
    assert one.refine * 10 >= MIN_STEPS_PER_ROW
    # two channels cycled at DRATE 3750: Table 14's 2165 conversions/s, 1082.5 rows/s
    two = plan_chain("ads1256", 1082.5, 2)
    assert two.drate == 3750.0 and two.mode == "cycle"
    # the row's time is the last channel's conversion: channel 0 ends one step before it
    assert two.offsets.tolist() == pytest.approx([-1 / CYCLING_THROUGHPUT_HZ[3750.0], 0.0])
    with pytest.raises(ValueError, match=r"--drate.*1000 SPS gives 1000 rows/s.*2000"):
        plan_chain("ads1256", 2000.0, 1, drate=1000.0)
    with pytest.raises(ValueError, match=r"--drate\): no ADS1256 data rate gives"):
        plan_chain("ads1256", 1000.0, 2)
    with pytest.raises(ValueError, match=r"--mode\) continuous converts one channel"):
        plan_chain("ads1256", 1000.0, 2, mode="continuous")
    with pytest.raises(ValueError, match=r"--chain"):
        plan_chain("sinc", 1000.0, 1)
    with pytest.raises(ValueError, match=r"--drate/--mode"):
        plan_chain("ideal", 1000.0, 1, drate=1000.0)


# ---------------------------------------------------------------- simulate
def reference(path, load, rate, n_rows, drate, offsets, steps=64):
    """The conversions computed directly: an ideal run at ``steps`` times the row rate (the
    same load grid and exact first-order-hold discretisation as the chip run with
    ``oversample=steps``), the taps over np.interp of it at every modulator instant (at rest,
    0, before the record)."""
    fine = simulate_model(path, load, (n_rows - 1) / rate, noise=0.0, progress=False,
                          rate=rate * steps, oversample=1, chain="ideal")
    h, lags = conversion_taps(drate), modulator_lags_s(drate)
    t = np.arange(n_rows) / rate
    return np.column_stack([[h @ np.interp(tr + o - lags, fine.t, fine.Y_clean[:, j], left=0.0)
                             for tr in t] for j, o in enumerate(offsets)])


def test_continuous_chain_is_the_filter_of_the_same_response(tmp_path):
    """One laser (102 mm), DRATE 1000 continuous, a 130 Hz sine load from rest: the
    measurement is the truth through the filter (reference: the taps over a 64 kHz ideal
    run, computed directly); the truth is the ideal run's (the refined grid integrates the
    same piecewise-linear load exactly: modal engine, first-order hold)."""
    path = model(tmp_path, 1000.0, [("d102", 0.102, "displacement")])
    load = {"type": "sine", "freq": 130.0, "amplitude": 1.0}
    ideal = simulate_model(path, load, 0.2, noise=0.0, progress=False, chain="ideal")
    chip = simulate_model(path, load, 0.2, noise=0.0, progress=False, chain="ads1256")
    # the default ("model"): a model file without [acquisition] is converted by the ADS1256
    # at the rate giving its 1000 rows/s, exactly as the explicit chain
    dflt = simulate_model(path, load, 0.2, noise=0.0, progress=False)
    np.testing.assert_array_equal(dflt.Y, chip.Y)
    assert ideal.info["chain"] == "ideal" and ideal.Y_conv is None
    assert chip.info["drate"] == 1000.0 and chip.info["mode"] == "continuous"
    scale = np.abs(ideal.Y_clean).max()
    # same truth to the round-off of a 4x finer step of the same exact discretisation
    np.testing.assert_allclose(chip.Y_clean, ideal.Y_clean, atol=1e-6 * scale)
    np.testing.assert_allclose(chip.Z, ideal.Z, atol=1e-6 * np.abs(ideal.Z).max())
    np.testing.assert_array_equal(chip.Y, chip.Y_conv)  # noise 0
    # the chain differs from point samples by far more than 1 % noise (|H(130)| = 0.78 and
    # a 0.57 ms delay)
    assert np.max(np.abs(chip.Y_conv[:, 0] - ideal.Y_clean[:, 0])) > 0.2 * scale
    exact = simulate_model(path, load, 0.2, noise=0.0, progress=False, chain="ads1256",
                           oversample=64)
    ref = reference(path, load, 1000.0, 201, 1000.0, [0.0])
    # same grid, same interpolant: to round-off (1e-9 of the amplitude)
    np.testing.assert_allclose(exact.Y_conv, ref, atol=1e-9 * scale)
    # the default grid (load linear between 10 kHz points, 32 steps per row) is within
    # 0.3 % of the amplitude of it (the load's own linear interpolation at 130 Hz,
    # (pi 130 / 10 kHz)^2 / 3 = 5.6e-4, plus the response's 8e-4 bound)
    assert np.max(np.abs(chip.Y_conv - ref)) < 3e-3 * scale


def test_sine_steady_state_difference_is_the_datasheet_response(tmp_path):
    """A 170 Hz sine load, 5 % damping, 1 s warm-up (the first mode's transient decays to
    e^-10): the ideal point samples are a pure sine; the chain's conversions are that sine
    times the datasheet's |H(170 Hz)| = 0.64 at 1000 SPS, delayed by the symmetric taps'
    (L - 1) / (2 F_MOD) = 0.565 ms."""
    path = model(tmp_path, 1000.0, [("d102", 0.102, "displacement")],
                 damping="[damping]\nratios = [[30.0, 0.05], [1000.0, 0.05]]\n")
    load = {"type": "sine", "freq": 170.0, "amplitude": 1.0}
    chip = simulate_model(path, load, 0.2, noise=0.0, progress=False, warmup=1.0,
                          chain="ads1256")
    t, y = chip.t, chip.Y_clean[:, 0]
    w = 2 * np.pi * 170.0
    A = np.column_stack([np.sin(w * t), np.cos(w * t)])
    c = np.linalg.lstsq(A, y, rcond=None)[0]
    scale = np.hypot(*c)
    assert np.max(np.abs(A @ c - y)) < 1e-3 * scale  # steady state
    tau = (len(conversion_taps(1000.0)) - 1) / (2 * F_MOD)
    pred = frequency_response(1000.0, 170.0) * (np.column_stack(
        [np.sin(w * (t - tau)), np.cos(w * (t - tau))]) @ c)
    # 0.3 %: the steady-state residual (0.1 %) plus the load's and the response's linear
    # interpolation (offline/chain.py: 8e-4 x (0.34)^2 and (pi 170 / 10 kHz)^2 / 3 = 1e-3)
    assert np.max(np.abs(chip.Y_conv[:, 0] - pred)) < 3e-3 * scale
    # and the difference from the point samples is large: 1 - 0.64 and a 35 degree lag
    assert np.max(np.abs(chip.Y_conv[:, 0] - y)) > 0.3 * scale


def test_cycled_channels_each_at_their_own_instant(tmp_path):
    """Two sensors cycled at DRATE 3750 (1082.5 rows/s): channel 0's window ends
    1 / 2165 s (Table 14) before channel 1's, whose conversion is the row's time (the
    estimator's convention, offline.chain.row_offsets; reference: the taps over a fine ideal
    run at those instants, computed directly)."""
    rate = CYCLING_THROUGHPUT_HZ[3750.0] / 2
    path = model(tmp_path, rate, [("d102", 0.102, "displacement"),
                                  ("a_tip", 0.17, "acceleration")])
    load = {"type": "sine", "freq": 90.0, "amplitude": 1.0}
    n = 301
    chip = simulate_model(path, load, (n - 1) / rate, noise=0.0, progress=False,
                          chain="ads1256", oversample=64)
    assert chip.info["mode"] == "cycle" and chip.info["drate"] == 3750.0
    offs = [-1 / CYCLING_THROUGHPUT_HZ[3750.0], 0.0]
    assert chip.info["offsets_s"] == pytest.approx(offs)
    ref = reference(path, load, rate, n, 3750.0, offs)
    scale = np.abs(ref).max(axis=0)
    np.testing.assert_allclose(chip.Y_conv, ref, atol=1e-9 * scale.max())
    # at the wrong instant (channel 0 as if converted with channel 1) it would differ
    wrong = reference(path, load, rate, n, 3750.0, [0.0, 0.0])
    assert np.max(np.abs(wrong[:, 0] - ref[:, 0])) > 0.05 * scale[0]


def test_cli_writes_conversions_with_noise_and_point_truth(tmp_path, capsys):
    path = model(tmp_path, 1000.0, [("d102", 0.102, "displacement")])
    args = ["simulate", str(path), "--load", "random", "--duration", "0.5", "--quiet",
            "--seed", "4"]
    assert main(args + ["--chain", "ads1256", "--drate", "1000", "--mode", "continuous",
                        "-o", str(tmp_path / "chip")]) == 0
    assert "ADS1256 at 1000 SPS, continuous mode" in capsys.readouterr().out
    assert main(args + ["-o", str(tmp_path / "ideal")]) == 0
    t, y, _ = read_table(tmp_path / "chip_measurement.csv")
    _, truth_chip, names = read_table(tmp_path / "chip_truth.csv")
    _, truth_ideal, _ = read_table(tmp_path / "ideal_truth.csv")
    # the truth is point values either way (same load realisation, same response)
    for j in range(truth_ideal.shape[1]):  # each column to 1e-6 of its own size
        np.testing.assert_allclose(truth_chip[:, j], truth_ideal[:, j], rtol=0,
                                   atol=1e-6 * np.abs(truth_ideal[:, j]).max())
    res = simulate_model(path, {"type": "random", "band": (5.0, 160.0), "rms": 1.0}, 0.5,
                         seed=4, progress=False, chain="ads1256")
    # 1 % noise on the conversions (paper eq. 28): relative to their own std, 5 % rel.
    # tolerance for 501 samples (chi-square: sd of a std estimate 1/sqrt(2 n) = 3 %)
    noise = y[:, 0] - res.Y_conv[:, 0]
    assert np.std(noise) / np.std(res.Y_conv[:, 0]) == pytest.approx(0.01, rel=0.1)
    assert main(args + ["--chain", "ads1256", "--drate", "2000", "-o",
                        str(tmp_path / "x")]) == 2
    assert "--drate" in capsys.readouterr().err


def test_newmark_engines_run_the_chain_on_the_finer_step(tmp_path):
    """--reduced and --engine newmark integrate on the refined grid too: their truth is the
    ideal run's up to the period error Newmark makes on the coarser step (about 1 % of the
    amplitude here, 10 kHz against 40 kHz; bound 3 %), and the conversions differ from it by
    the filter (13 % here, more than 5 %)."""
    path = model(tmp_path, 1000.0, [("d102", 0.102, "displacement")])
    load = {"type": "random", "band": (5.0, 160.0), "rms": 1.0}
    for kw in ({"reduced": True}, {"engine": "newmark"}):
        ideal = simulate_model(path, load, 0.3, noise=0.0, progress=False, **kw)
        chip = simulate_model(path, load, 0.3, noise=0.0, progress=False, chain="ads1256",
                              **kw)
        scale = np.abs(ideal.Y_clean).max()
        assert np.max(np.abs(chip.Y_clean - ideal.Y_clean)) < 0.03 * scale
        assert np.max(np.abs(chip.Y_conv - chip.Y_clean)) > 0.05 * scale
        assert chip.info["dt_fine"] == pytest.approx(1e-3 / 40)  # oversample 10 x refine 4


def test_a_model_files_daq_is_simulated_through_its_fir(tmp_path):
    """A model file declaring a generic DAQ ([acquisition] converter = "daq", cutoff 300 Hz,
    group delay 2 ms): `simulate` (default chain "model") converts through its FIR
    (edge.acquisition.daq_taps). 170 Hz sine, 5 % damping, 1 s warm-up (steady state, as the
    test above): reference sum_i h_i y(t - i spacing) of the fitted sine, computed directly."""
    from edge.acquisition import daq_taps

    path = model(tmp_path, 1000.0, [("d102", 0.102, "displacement")],
                 damping="[damping]\nratios = [[30.0, 0.05], [1000.0, 0.05]]\n")
    path.write_text(path.read_text() + '\n[acquisition]\nconverter = "daq"\ncutoff = 300.0\n'
                                       'group_delay = 2.0e-3\n')
    load = {"type": "sine", "freq": 170.0, "amplitude": 1.0}
    daq = simulate_model(path, load, 0.2, noise=0.0, progress=False, warmup=1.0)
    assert daq.info["chain"] == "daq" and daq.info["drate"] == 1000.0
    t, y = daq.t, daq.Y_clean[:, 0]
    w = 2 * np.pi * 170.0
    c = np.linalg.lstsq(np.column_stack([np.sin(w * t), np.cos(w * t)]), y, rcond=None)[0]
    scale = np.hypot(*c)
    h, spacing = daq_taps(1000.0, 300.0, 2.0e-3)
    lag = np.arange(h.size) * spacing
    pred = np.array([h @ (np.sin(w * (tr - lag)) * c[0] + np.cos(w * (tr - lag)) * c[1])
                     for tr in t])
    # 0.3 %: the steady-state residual and the linear interpolation, as the test above
    assert np.max(np.abs(daq.Y_conv[:, 0] - pred)) < 3e-3 * scale
    # the FIR delays by its 2 ms group delay, 122 degrees at 170 Hz: the conversions differ
    # from the point samples by |1 - |H| e^-2.14j| ~ 1.7 times the sine's amplitude
    assert np.max(np.abs(daq.Y_conv[:, 0] - y)) > 1.0 * scale
    with pytest.raises(ValueError, match="drate/mode"):
        simulate_model(path, load, 0.01, noise=0.0, progress=False, drate=1000.0)
