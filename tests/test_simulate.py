"""Load profiles and noise of the simulated rig (offline/simulate.py)."""

import numpy as np
import pytest

from offline.simulate import add_noise, load_profile


def test_sine_and_ramp():
    t = np.arange(2000) * 1e-3
    f = load_profile("sine", t, freq=10.0, amplitude=2.0)
    np.testing.assert_allclose(f, 2.0 * np.sin(2 * np.pi * 10 * t), atol=1e-12)
    g = load_profile("sine", t, freq=10.0, amplitude=2.0, ramp=0.05)  # paper eq. 27 onset
    np.testing.assert_allclose(g, f * (1 - np.exp(-t / 0.05)), atol=1e-12)


def test_random_is_band_limited_with_the_requested_rms():
    t = np.arange(20000) * 1e-4
    f = load_profile("random", t, band=(5.0, 160.0), rms=1.5, seed=3)
    assert abs(np.sqrt(np.mean(f ** 2)) - 1.5) < 1e-9  # scaled exactly (zero-mean band)
    spec = np.abs(np.fft.rfft(f)) ** 2
    fr = np.fft.rfftfreq(t.size, 1e-4)
    out = spec[(fr < 5.0) | (fr > 160.0)].sum() / spec.sum()
    assert out < 1e-20  # ideal FFT filter: nothing outside the band
    # seeded: the same seed gives the same record, another seed another one
    np.testing.assert_array_equal(f, load_profile("random", t, band=(5, 160), rms=1.5, seed=3))
    assert not np.allclose(f, load_profile("random", t, band=(5, 160), rms=1.5, seed=4))


def test_chirp_sweeps_the_band():
    t = np.arange(20001) * 1e-4
    f = load_profile("chirp", t, band=(10.0, 50.0), amplitude=1.0)
    # mean frequency from zero crossings in the first and last 0.5 s (+-1 crossing: 1 Hz)
    def freq(seg):
        s = np.signbit(seg).astype(int)
        return np.count_nonzero(np.diff(s)) / 2 / (seg.size * 1e-4)
    assert abs(freq(f[:5000]) - 15.0) < 1.5  # f(t) = 10 + 20 t: mean 15 Hz over 0-0.5 s
    assert abs(freq(f[-5000:]) - 45.0) < 1.5  # mean 45 Hz over 1.5-2.0 s


def test_csv_load_is_interpolated(tmp_path):
    p = tmp_path / "f.csv"
    p.write_text("time,F\n0,0\n0.01,1\n0.02,0\n")
    t = np.array([0.0, 0.005, 0.01, 0.015, 0.03])
    np.testing.assert_allclose(load_profile("csv", t, csv_path=p, column="F"),
                               [0.0, 0.5, 1.0, 0.5, 0.0])


@pytest.mark.parametrize("kind,kw,msg", [
    ("sine", {}, "freq"), ("random", {"band": (1, 2)}, "rms"), ("chirp", {}, "band"),
    ("square", {}, "unknown load type")])
def test_bad_profiles(kind, kw, msg):
    with pytest.raises(ValueError, match=msg):
        load_profile(kind, np.arange(10) * 1e-3, **kw)


def test_noise_level_per_channel():
    Y = np.column_stack([np.sin(np.arange(100000) / 50), 100 * np.cos(np.arange(100000) / 70)])
    N = add_noise(Y, [0.01, 0.05], np.random.default_rng(1)) - Y
    ratio = np.std(N, axis=0) / np.std(Y, axis=0)
    np.testing.assert_allclose(ratio, [0.01, 0.05], rtol=0.02)  # 1e5 samples: ~0.5 % spread
