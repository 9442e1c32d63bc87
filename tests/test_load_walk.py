"""A sensor's drifting offset in record learning (offline/load/walk.py): the expected Welch
estimate of a random walk, and the Whittle expectation that carries it."""

from dataclasses import replace

import numpy as np
import pytest

from edge.acquisition import Chain
from offline.calibration_runs import convert
from offline.chain import offset_walks
from offline.forcing.force_model import ForceModel
from offline.load.walk import converted_share, walk_spectra, walk_welch
from offline.load.welch import cross_spectra, window_kernel
from offline.load.whittle import Whittle


def test_walk_welch_is_the_mean_of_welch_estimates_of_random_walks():
    # 799 Hann segments (N = 256, 50 % overlap) of one seeded walk with unit increments: the
    # Welch estimate's mean over bins 1..128. Per bin a Welch average of K segments has a
    # relative sd of about 1.5 / sqrt(K) (overlap) = 5 %; tolerance 5 sd per bin, and the
    # mean ratio over the 128 bins within 1.5 % (5 sd of a mean of ~128 / 2 independent bins)
    N, dt = 256, 1e-3
    bins = np.arange(1, N // 2 + 1)
    rng = np.random.default_rng(7)
    Y = np.cumsum(rng.standard_normal((400 * N, 1)), axis=0)
    _, S, K = cross_spectra([Y], dt, N)
    ratio = np.real(S[bins, 0, 0]) / walk_welch(N, dt, bins)
    sd = 1.5 / np.sqrt(K)
    assert np.all(np.abs(ratio - 1.0) < 5 * sd), ratio
    assert np.mean(ratio) == pytest.approx(1.0, abs=0.015)


def test_walk_welch_approaches_the_random_walk_spectrum_far_from_dc():
    # q dt / (4 sin^2(pi k / N)) (a walk's two-sided density, q = 1): the window's kernel
    # hardly changes a smooth spectrum far from DC (measured 1.0002 at k = 64 of N = 256),
    # but near DC the kernel and the segment's mean removal do (1.07 at k = 4): the reason the
    # fit takes the exact expectation, not the spectrum at the bin centre
    N, dt = 256, 1e-3
    k = np.array([4, 64, 128])
    ratio = walk_welch(N, dt, k) / (dt / (4 * np.sin(np.pi * k / N) ** 2))
    assert ratio[1:] == pytest.approx(1.0, abs=1e-3)
    assert ratio[0] > 1.03


def test_walk_spectra_scale_with_the_declared_drift_and_vanish_without():
    # q = drift^2 dt per channel; no drifting channel: None (the fit is the old one)
    N, dt = 128, 1e-3
    bins = np.arange(4, 60)
    W = walk_spectra([0.0, 2e-3], N, dt, bins)
    assert W.shape == (bins.size, 2) and np.all(W[:, 0] == 0.0)
    np.testing.assert_allclose(W[:, 1], walk_welch(N, dt, bins) * 4e-6 * dt, rtol=1e-12)
    assert walk_spectra([0.0, 0.0], N, dt, bins) is None


def test_whittle_expectation_adds_the_walk_on_the_diagonal_only():
    # one force, two channels: E_k with the walk minus E_k without it is diag(walk_k) exactly
    # (rounding: 1e-12 of the diagonal), and the likelihood of a record whose low bins carry
    # that walk is higher with it
    N, dt, over, hw = 128, 1e-3, 4, 3
    kern = window_kernel(N, over, hw)
    nb = 40
    f_fine = (1 + np.arange(nb * over + 2 * hw * over + 1) / over) / (N * dt)
    H = np.ones((f_fine.size, 2, 1), complex) * np.array([1e-3, 2e-3])[None, :, None]
    bins = 4 + np.arange(nb)
    walk = walk_spectra([1e-2, 0.0], N, dt, bins)
    fm = ForceModel(kind="bandpass", band=(5.0, 100.0), rms=1.0)
    noise, corr = np.array([1e-4, 1e-4]), np.eye(1)
    W0 = Whittle(f_fine, H, np.zeros((nb, 2, 2), complex), kern, over, 10.0, dt)
    E0 = W0.expected([fm], noise, corr)
    W1 = Whittle(f_fine, H, E0 + np.einsum("kc,cd->kcd", walk, np.eye(2)), kern, over, 10.0,
                 dt, walk=walk)
    D = W1.expected([fm], noise, corr) - E0
    np.testing.assert_allclose(np.real(D[:, 0, 0]), walk[:, 0], rtol=1e-12)
    assert np.max(np.abs(D - np.einsum("kc,cd->kcd", walk, np.eye(2)))) <= 1e-12 * np.max(
        np.abs(E0))
    W0s = Whittle(f_fine, H, W1.S_hat, kern, over, 10.0, dt)
    assert W1.nll_of(W1.expected([fm], noise, corr)) < W0s.nll_of(W0s.expected([fm], noise,
                                                                                corr))


def test_a_converted_walk_is_expected_as_the_converter_makes_it():
    # A walk of 1e-3 unit/sqrt(s) on a 32-steps-per-row grid converted like the ADS1256 at
    # 1000 SPS (offline.calibration_runs.convert, the build's runs' conversion), 60000 rows:
    # its Welch estimate against walk_spectra with the chain, per bin within 5 sd (1.5 /
    # sqrt(K) per bin, K ~ 470 segments: 7 %) and on average over bins 4-128 within 2 %
    # (measured 1.008 on 200000 rows); the point samples' formula is 3x too high near
    # Nyquist (measured 0.32 of it at 488 Hz; converted_share 0.33 at 499 Hz)
    dt, sub, ns, N = 1e-3, 32, 60000, 256
    ch = Chain(converter="ads1256", drate=1000.0, drift=(1e-3,))
    b = offset_walks((ns - 1) * sub + 1 + 2000, dt / sub, [1e-3], 5)
    Y = convert(b, dt / sub, sub, ns, ch)
    _, S, K = cross_spectra([Y], dt, N)
    bins = np.arange(4, N // 2 + 1)
    ratio = np.real(S[bins, 0, 0]) / walk_spectra([1e-3], N, dt, bins, ch)[:, 0]
    assert np.all(np.abs(ratio - 1.0) < 5 * 1.5 / np.sqrt(K)), ratio
    assert np.mean(ratio) == pytest.approx(1.0, abs=0.02)
    point = walk_spectra([1e-3], N, dt, bins)[:, 0]
    assert np.real(S[bins[-1], 0, 0]) / point[-1] < 0.5
    # an ideal converter, a sensor's own average or high-pass: no share (the offset comes
    # after them); at 2 Hz the ADS1256's share is 1 within 1e-4 (measured 0.99997)
    f = np.array([2.0, 100.0, 499.0])
    np.testing.assert_array_equal(converted_share(Chain(average=(1e-3,), drift=(1.0,)), f, 1,
                                                  dt), np.ones((3, 1)))
    np.testing.assert_allclose(converted_share(replace(ch, average=(1e-3,)), f, 1, dt),
                               converted_share(ch, f, 1, dt), rtol=1e-12)
    assert converted_share(ch, f, 1, dt)[0, 0] == pytest.approx(1.0, abs=1e-4)
