"""edge.features against naive twins (explicit DFT sums, index loops, analytic extrema)."""

import numpy as np
import pytest

from edge import features as F


def _window(n=64, nch=2, seed=0):
    return np.random.default_rng(seed).standard_normal((n, nch))


def _naive_dft(y):
    # Y_j = 1/n Σ_k y_k exp(-2πi jk/n), j = 0..n//2   (definition of the DFT, eq. 12)
    n = y.size
    return np.array([sum(y[k] * np.exp(-2j * np.pi * j * k / n) for k in range(n)) / n
                     for j in range(n // 2 + 1)])


@pytest.mark.parametrize("n", [64, 63])
@pytest.mark.parametrize("kind", ["fft_ri", "fft_mp"])
def test_fft_features_match_naive_dft(n, kind):
    W = _window(n)
    psi = F.extract(kind, W, 100.0)
    ref = []
    for c in range(W.shape[1]):
        Y = _naive_dft(W[:, c])
        inner = np.ones(Y.size, bool)
        inner[0] = False
        if n % 2 == 0:
            inner[-1] = False  # Nyquist bin of an even-length real signal is real
        if kind == "fft_ri":
            ref += [Y.real, Y.imag[inner]]
        else:
            ref += [np.abs(Y), np.angle(Y[inner])]
    ref = np.concatenate(ref)
    assert psi.shape == ref.shape == (F.n_features(kind, n, 2),)
    # reference: explicit DFT sum above; tolerance = float64 round-off of an n-term sum
    np.testing.assert_allclose(psi, ref, rtol=0, atol=1e-12)


def test_fft_bins_select_bins_of_interest():
    n, rate = 100, 1000.0
    W = _window(n, 1, seed=3)
    bins = F.bins_of_interest([[95.0, 125.0]], n, rate, margin=1)
    # hand count: df = 10 Hz; floor(9.5)-1 = 8 .. ceil(12.5)+1 = 14
    assert bins.tolist() == list(range(8, 15))
    cfg = F.FeatureConfig(kind="fft_bins", bins=tuple(bins))
    psi = F.extract("fft_bins", W, rate, cfg)
    Y = _naive_dft(W[:, 0])
    ref = np.concatenate([Y.real[bins], Y.imag[bins]])
    # reference: naive DFT restricted to the same bins; float64 round-off
    np.testing.assert_allclose(psi, ref, atol=1e-12, rtol=0)
    assert len(F.feature_labels("fft_bins", n, 1, rate, cfg)) == psi.size


def test_time_samples_dense_and_sparse_match_index_loops():
    W = _window(50, 2)
    dense = F.extract("time_samples", W, 10.0)
    ref = [W[k, c] for c in range(2) for k in range(1, 50)]
    np.testing.assert_array_equal(dense, ref)  # exact copy of samples: no arithmetic
    cfg = F.FeatureConfig(n_samples=7)
    sp = F.extract("time_samples_sparse", W, 10.0, cfg)
    idx = F.sparse_indices(50, 7)
    assert idx[0] > 0 and idx[-1] == 49 and len(idx) == 7
    np.testing.assert_array_equal(sp, [W[k, c] for c in range(2) for k in idx])


def test_extrema_of_damped_cosine_match_analytic_times():
    rate, n = 20000.0, 4000
    t = np.arange(n) / rate
    sig, om = 3.0, 2 * np.pi * 25.0
    y = np.exp(-sig * t) * np.cos(om * t)
    cfg = F.FeatureConfig(kind="time_extrema", n_extrema=6, prominence=0.05)
    psi = F.extract("time_extrema", y[:, None], rate, cfg)
    # analytic: y' = 0  <=>  tan(ωt) = -σ/ω  =>  t_k = (kπ - atan(σ/ω))/ω, k = 1, 2, ...
    tk = (np.arange(1, 7) * np.pi - np.arctan(sig / om)) / om
    np.testing.assert_allclose(psi[6:], tk, atol=1.0 / rate)  # within one sample
    np.testing.assert_allclose(psi[:6], np.exp(-sig * tk) * np.cos(om * tk), atol=1e-5)


def test_extrema_one_per_peak_despite_noise():
    rate, n = 2000.0, 2000
    t = np.arange(n) / rate
    clean = np.exp(-2.0 * t) * np.sin(2 * np.pi * 10 * t)
    noisy = clean + 0.01 * np.random.default_rng(1).standard_normal(n)
    k_clean = F.find_extrema(clean, 0.05)
    k_noisy = F.find_extrema(noisy, 0.05)
    # reference: sin(2π 10 t) has extrema at t = (2k+1)/40 s, 20 of them in [0, 1) s, the last
    # (t = 0.975 s) still confirmed by a drop > 0.05 max|y| before the end; noise adds none
    np.testing.assert_array_equal(k_clean, np.round((2 * np.arange(20) + 1) / 40 * rate) - 1)
    assert len(k_noisy) == len(k_clean)
    # a peak of amplitude A is flat within 3σ noise over ±sqrt(6σ/(Aω²)) ≈ ±10 ms at the smallest
    # A = 0.14 (t ≈ 1 s): the noisy extremum stays within 1/8 period = 12.5 ms = 25 samples
    assert np.max(np.abs(k_noisy - k_clean)) <= 25


def test_missing_extrema_are_nan():
    y = np.linspace(0, 1, 40)[:, None]  # monotone: no extremum
    psi = F.extract("time_extrema", y, 100.0, F.FeatureConfig(n_extrema=2))
    assert np.isnan(psi).all()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("kind", ["time_samples", "fft_ri", "time_extrema"])
def test_non_finite_window_rejected(bad, kind):
    W = _window(32, 2)
    W[5, 1] = bad
    with pytest.raises(ValueError, match="window contains 1 non-finite.*sample 5, channel 1"):
        F.extract(kind, W, 100.0)


def test_bad_inputs_named():
    with pytest.raises(ValueError, match="unknown feature kind 'wavelet'"):
        F.extract("wavelet", _window(), 10.0)
    with pytest.raises(ValueError, match="features.bins"):
        F.extract("fft_ri_bins", _window(32), 10.0, F.FeatureConfig(bins=(3, 40)))
    with pytest.raises(ValueError, match="rate"):
        F.extract("fft_ri", _window(32), 0.0)
    with pytest.raises(ValueError, match="unknown key"):
        F.FeatureConfig.from_dict({"kind": "fft_ri", "bogus": 1})


def test_batch_equals_single():
    W = np.random.default_rng(4).standard_normal((5, 40, 2))
    cfg = F.FeatureConfig(kind="fft_mp_bins", bins=(2, 3, 4, 20))
    B = F.extract_batch("fft_mp_bins", W, 50.0, cfg)
    for s in range(5):
        # the batch is a vectorised loop over the same code path: identical to round-off
        np.testing.assert_allclose(B[s], F.extract("fft_mp_bins", W[s], 50.0, cfg), atol=1e-15)


def test_combined_kind_is_concatenation():
    W = _window(64, 2, seed=7)
    cfg = F.FeatureConfig(bins=(3, 4, 5), n_samples=5)
    both = F.extract("fft_ri_bins+time_samples_sparse", W, 100.0, cfg)
    ref = np.concatenate([F.extract("fft_ri_bins", W, 100.0, cfg),
                          F.extract("time_samples_sparse", W, 100.0, cfg)])
    np.testing.assert_array_equal(both, ref)  # pure concatenation, no arithmetic
    assert F.n_features("fft_ri_bins+time_samples_sparse", 64, 2, cfg) == both.size
    with pytest.raises(ValueError, match="unknown feature kind 'x'"):
        F.extract("fft_ri+x", W, 100.0)
