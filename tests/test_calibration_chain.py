"""Calibration through the measurement chain (offline/calibration/measurement.py).

The records a device writes are the ADS1256's conversions, not point samples of the response;
the calibration's forward model passes its response through the model file's chain. The
reference for the map is the simulator's converter (:func:`offline.chain.conversions`: the
chip's taps on a fine grid of the continuous signal, an independent code path); the end to
end case is a one-laser cantilever (the ADS1256 in continuous mode at 1,000 SPS, the default
chain of a one-sensor model file at 1,000 samples/s) whose records ``simulate`` converts.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from calib_truth import PARAMS_3, model_text

from edge.acquisition import Chain
from edge.csvio import write_table
from edge.hw.ads1256_spec import row_rates
from offline.calibration.measurement import Measurement
from offline.chain import conversions, row_offsets
from offline.cli import main
from offline.simulate import simulate_model


def _signal(t, dt, rate):
    """Three sines from rest (a cos^2 ramp over 50 rows), up to 0.2 of the row rate."""
    fr, ph = np.array([37.0, 113.0, 0.2 * rate]), np.array([0.3, 1.1, 2.0])
    env = 0.5 - 0.5 * np.cos(np.pi * np.clip(t / (50 * dt), 0, 1))
    return env * np.sin(2 * np.pi * fr[:, None] * t[None, :] + ph[:, None]).sum(axis=0)


@pytest.mark.parametrize("drate, mode, nch", [(1000.0, "continuous", 1), (3750.0, "cycle", 2),
                                              (7500.0, "cycle", 3)])
def test_measurement_equals_the_simulated_chips_conversions(drate, mode, nch):
    rate = row_rates(nch, mode)[drate]
    dt, s, n = 1.0 / rate, 64, 2000
    off = row_offsets(drate, mode, nch)
    # the reference: the continuous signal on 64 steps per row (and 8 rows past the end)
    tf = np.arange((n - 1) * s + 1 + 8 * s) * dt / s
    ref = conversions(np.repeat(_signal(tf, dt, rate)[:, None], nch, axis=1), dt / s, s, n,
                      drate, off)
    Y = np.repeat(_signal(np.arange(n) * dt, dt, rate)[:, None], nch, axis=1)
    got = Measurement(Chain("ads1256", drate, mode, tuple(-off)), dt, nch).apply(Y)
    err = np.abs(got - ref).max(axis=1) / ref.std()
    # measured 3.4e-5 (continuous) of the std before the last 100 rows: the fine grid's linear
    # interpolation (pi^2 / (12 s^2) = 2e-4 at half the row rate) and the band-limited
    # kernel's tails; within the last 10 rows the record's end (2.7 % at the last row)
    assert err[:n - 100].max() < 5e-4
    assert err[:n - 10].max() < 5e-3
    # and the chain is no small correction here: point samples are 1.5-2x the std off
    assert np.abs(Y - ref)[:n - 100].max() / ref.std() > 0.5
    # the sensitivities' axis: a leading axis maps the same
    both = Measurement(Chain("ads1256", drate, mode, tuple(-off)), dt, nch).apply(
        np.stack([Y, 2 * Y]))
    np.testing.assert_allclose(both[1], 2 * got, rtol=0, atol=1e-12 * np.abs(got).max())


def test_point_chain_is_the_identity():
    Y = np.random.default_rng(0).standard_normal((100, 2))
    assert Measurement(Chain(), 1e-3, 2).apply(Y) is Y


def _one_laser(text: str) -> str:
    """The calibration strip with its d110 laser only (one channel: continuous mode)."""
    return text[:text.index('[[sensors]]\nname = "a170"')] + text[text.index("[[forces]]"):]


TRUTH = {"E": 65e9, "k_root": 14.0}


@pytest.fixture(scope="module")
def chip_records(tmp_path_factory):
    """Two 3 s records of a 34-element truth (E 65 GPa, k_root 14) converted by the ADS1256 at
    1,000 SPS (the file declares no [acquisition]: the default chain), 1 % noise."""
    d = tmp_path_factory.mktemp("chip")
    truth = _one_laser(model_text(34, E=TRUTH["E"], k_root=TRUTH["k_root"], params=""))
    (d / "truth.toml").write_text(truth + "[estimator]\nrate = 1000.0\n")
    paths = []
    for seed in (1, 2):
        r = simulate_model(d / "truth.toml", duration=3.0, noise=0.01, seed=seed,
                           load={"type": "random", "band": (5.0, 250.0), "rms": 0.05},
                           progress=False)
        assert r.info["chain"] == "ads1256" and r.info["mode"] == "continuous"
        paths.append(d / f"rec{seed}.csv")
        write_table(paths[-1], r.t, np.hstack([r.F, r.Y]), r.force_names + r.channel_names)
    return d, paths


def _calibrate(d, paths, name, acquisition, capsys):
    cal = _one_laser(model_text(17, params=PARAMS_3))
    (d / f"{name}.toml").write_text(cal + "[estimator]\nrate = 1000.0\n" + acquisition)
    args = ["calibrate", str(d / f"{name}.toml"), "-o", str(d / name), "--no-kfold"]
    for p in paths:
        args += ["--data", str(p)]
    assert main(args) == 0
    out = capsys.readouterr().out
    return json.loads((d / name / "posterior.json").read_text()), out


def _z(post, name):
    i = post["names"].index(name)
    return abs(post["mean"][i] - TRUTH[name]) / post["std"][i]


def _std(post, name):
    return post["std"][post["names"].index(name)]


@pytest.mark.slow
def test_calibration_through_the_chip_finds_the_truth(chip_records, capsys):
    d, paths = chip_records
    post, out = _calibrate(d, paths, "chip", "", capsys)
    assert "through the model file's measurement chain: ads1256 1000 SPS continuous" in out
    assert post["measurement"] == "ads1256 1000 SPS continuous"
    # truth within 3 posterior std (measured 0.96 / 0.97 std on 4 s records), the residual
    # white (measured lag-1 -0.01, as on point samples)
    for name in TRUTH:
        assert _z(post, name) < 3.0, (name, _z(post, name))
    assert abs(post["noise_groups"]["d110"]["lag1"]) < 0.2
    # the same records taken as point samples (the file declares an ideal converter, as
    # the calibration did before): E and k_root 1.5 / 0.9 std off with 14-30x wider stds, the
    # residual correlated (lag-1 0.92)
    bad, out_bad = _calibrate(d, paths, "point", '[acquisition]\nconverter = "ideal"\n', capsys)
    assert bad["measurement"] == "point samples"
    assert bad["noise_groups"]["d110"]["lag1"] > 0.5
    widths = [_std(bad, n) / _std(post, n) for n in TRUTH]
    assert min(widths) > 5.0, widths


@pytest.mark.parametrize("acquisition, dt, expect", [
    ("", 1e-3, "chain"),                                   # records at [estimator] rate
    ("", 2e-3, "warning"),                                 # records at 500 samples/s
    ('[acquisition]\nconverter = "ideal"\n', 2e-3, "point"),  # point samples declared
])
def test_records_at_another_rate_are_compared_as_point_samples(tmp_path, acquisition, dt, expect):
    """The chain is declared for the estimator's rate: records at another rate cannot be
    mapped through it, so they are compared at their sample instants, with a warning that
    names both rates; a file that declares point samples gets neither map nor warning."""
    from offline.calibration.measurement import of_records
    from offline.model.modelfile import load_model_file

    path = tmp_path / "cal.toml"
    path.write_text(_one_laser(model_text(17, params=PARAMS_3)) + "[estimator]\nrate = 1000.0\n"
                    + acquisition)
    meas, warning = of_records(load_model_file(path), dt)
    if expect == "chain":
        assert warning is None and meas.chain.converter == "ads1256" and not meas.identity
    elif expect == "warning":
        assert meas is None
        assert "500 samples/s" in warning and "1000.0" in warning and "ads1256" in warning
    else:
        assert meas is None and warning is None
