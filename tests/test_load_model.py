"""The load model's spectra, its sampling, Welch's estimate and the Whittle likelihood's
identifiability (offline/load/)."""

import numpy as np
import pytest

from offline.load import LoadModel
from offline.load.welch import cross_spectra, window_kernel
from offline.load.whittle import Whittle, make_layout, start_theta, unpack
from offline.smoother import ForceModel

SHAPES = [ForceModel("bandpass", (5.0, 160.0), 2.0, 4),
          ForceModel("bandpass", (5.0, 160.0), 1.0, 2, hp_order=1, lp_order=3, tilt=1.0,
                     peaks=((40.0, 0.02, 5.0),)),
          ForceModel("bandpass", (2.0, 80.0), 0.3, 2, tilt=-0.7)]


@pytest.mark.parametrize("fm", SHAPES)
def test_psd_integrates_to_the_variance(fm):
    # closed form: the two-sided PSD integrates to rms^2 (Lyapunov-scaled qc), 1e-4
    f = np.linspace(-5000.0, 5000.0, 2_000_001)
    assert np.trapezoid(fm.psd(f), f) == pytest.approx(fm.rms ** 2, rel=1e-4)


def test_shape_parts_have_their_closed_forms():
    base = ForceModel("bandpass", (5.0, 160.0), 1.0, 2)
    peak = ForceModel("bandpass", (5.0, 160.0), 1.0, 2, peaks=((40.0, 0.02, 5.0),))
    # a peak section multiplies |H| by its gain at its frequency relative to far from it
    # (closed form of the section: exactly gain at w0, -> 1 for w >> w0; 1e-3)
    r = np.sqrt(peak.shape([40.0, 4000.0]) / base.shape([40.0, 4000.0]))
    assert r[0] / r[1] == pytest.approx(5.0, rel=1e-3)
    # a tilt of 1 is a 1/f power slope inside the band: 10 dB per decade (+/- 1 dB ripple)
    pink = ForceModel("bandpass", (1.0, 1000.0), 1.0, 2, tilt=1.0)
    drop = 10 * np.log10(pink.shape([20.0]) / pink.shape([200.0]))[0]
    assert drop == pytest.approx(10.0, abs=1.0)
    fm = SHAPES[1]
    assert ForceModel.from_dict(fm.as_dict()).as_dict() == fm.as_dict()


def test_samples_have_the_model_variance_and_correlation():
    lm = LoadModel([ForceModel("bandpass", (5.0, 100.0), 2.0, 2),
                    ForceModel("bandpass", (5.0, 100.0), 0.5, 2)],
                   corr=np.array([[1.0, -0.8], [-0.8, 1.0]]))
    t = np.arange(400_000) * 1e-3
    F = lm.sample(t, 3)
    # 400 s of a 5-100 Hz process: sampling error of the variance ~2 % (3 sigma: 6 %)
    np.testing.assert_allclose(np.std(F, axis=0), [2.0, 0.5], rtol=0.06)
    assert np.corrcoef(F.T)[0, 1] == pytest.approx(-0.8, abs=0.03)
    # the limit's power per bin sums to the covariance (two-sided grid); what lies above
    # the Nyquist frequency (the 2nd-order roll-off's tail beyond 500 Hz: 0.25 %) is missing
    from offline.limit.wiener import half_weights
    n = 2 ** 16
    P = lm.power_per_bin(n, 1e-3)
    C = np.einsum("k,kij->ij", half_weights(n), P)
    np.testing.assert_allclose(C, [[4.0, -0.8], [-0.8, 0.25]], rtol=5e-3)


def test_welch_of_white_noise_is_its_level():
    rng = np.random.default_rng(0)
    dt, s = 1e-3, 0.3
    Y = s * rng.standard_normal((60_000, 2))
    f, S, n = cross_spectra([Y], dt, 1024)
    # two-sided density of white noise: s^2 dt; 116 averages: 1/sqrt(116) = 9 %, mean of
    # 500 bins within 1 %
    assert np.mean(np.real(S[5:-5, 0, 0])) == pytest.approx(s ** 2 * dt, rel=0.01)
    assert abs(np.mean(S[5:-5, 0, 1])) < 0.02 * s ** 2 * dt
    assert window_kernel(1024).sum() == pytest.approx(1.0, abs=1e-12)


def test_a_force_no_sensor_sees_stays_at_its_declaration():
    # Synthetic likelihood: force 0 seen by the channel, force 1 not at all (H = 0). The
    # record's spectrum is that of force 0 at 3x its declared RMS. Expected: force 0 found
    # at 3x (5 %), force 1 at its declaration (the prior mean) and not identified.
    dt = 1e-3
    df = 0.5
    over, hw = 4, 3
    f_fine = (1 + np.arange(400 * over + 2 * hw * over + 1) / over) * df
    H = np.zeros((f_fine.size, 1, 2), complex)
    H[:, 0, 0] = 1.0 / (1.0 + 1j * f_fine / 50.0)
    true = [ForceModel("bandpass", (5.0, 100.0), 3.0, 2), ForceModel("bandpass", (5.0, 100.0),
                                                                      1.0, 2)]
    prior = [ForceModel("bandpass", (5.0, 100.0), 1.0, 2, hp_order=2, lp_order=2)] * 2
    noise = np.array([0.01])
    W0 = Whittle(f_fine, H, np.zeros((401, 1, 1)), window_kernel(2000, over, hw), over,
                 50.0, dt)
    W0.S_hat = W0.expected(true, noise, np.eye(2))  # the expectation itself as the record
    L = make_layout(prior, noise, 1 / dt, df, fit_corr=False)
    th = start_theta(L, prior, noise)
    from offline.load.learn import _optimise

    th, _ = _optimise(W0, L, th)
    models, nz, _ = unpack(L, th)
    assert models[0].rms == pytest.approx(3.0, rel=0.05)
    assert models[1].rms == pytest.approx(1.0, rel=1e-3)
    post = np.sqrt(np.diag(np.linalg.inv(W0.fisher(L, th))))
    i0, i1 = L.index("ln_rms0"), L.index("ln_rms1")
    assert post[i0] < 0.1 * L.sd[i0] and post[i1] == pytest.approx(L.sd[i1], rel=1e-3)


def test_innovation_check_passes_white_and_flags_wrong_innovations():
    from offline.load.check import autocorrelation, innovation_check

    rng = np.random.default_rng(4)
    # autocorrelation against its definition (np.correlate), 1e-12
    e = rng.standard_normal(500)
    d = e - e.mean()
    ref = np.correlate(d, d, "full")[500:510] / np.dot(d, d)
    np.testing.assert_allclose(autocorrelation(e, 10), ref, atol=1e-12)

    class Stub:  # a "bundle" whose filter passes the record through: eps = y
        dt = 1e-3
        kf = {"A": np.zeros((1, 1)), "H": np.zeros((1, 1)), "K": np.zeros((1, 1)),
              "Wt": np.eye(1)}

    white = rng.standard_normal((21_000, 1))
    ok = innovation_check(Stub, [white])
    assert ok["ok"] and abs(ok["variance"] - 1) < 0.03 and ok["peak"] < 0.05
    assert not innovation_check(Stub, [2.0 * white])["ok"]          # variance 4
    coloured = np.convolve(white[:, 0], np.ones(5) / np.sqrt(5), "same")[:, None]
    bad = innovation_check(Stub, [coloured])                         # variance 1, not white
    # a 5-sample moving average: lag-1 autocorrelation 0.8 (closed form (5 - 1) / 5)
    assert not bad["ok"] and bad["peak"] == pytest.approx(0.8, abs=0.03)
    assert "WARNING" in bad["text"]
