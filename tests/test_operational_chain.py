"""The operational likelihood through the measurement chain (offline/calibration/spectral_chain.py).

The records' spectral matrix is ``G S_y G^H`` (``G = diag(G_c(f))``, the chain's response at
each channel's instant). The reference is the simulator's converter
(:func:`offline.chain.conversions`: the chip's taps on a fine grid of the continuous signal, a
separate code path): the Welch matrices of its conversions against the map applied to the
Welch matrices of the point samples of the same signal.
"""

from __future__ import annotations

import numpy as np
import pytest

from edge.acquisition import Chain
from edge.hw.ads1256_spec import row_rates
from offline.calibration.spectral_chain import chain_gains, through_chain
from offline.chain import conversions, row_offsets
from offline.load.welch import cross_spectra


def _band_limited(n_fine: int, dt_fine: float, f_hi: float, seed: int) -> np.ndarray:
    """Seeded white noise on the fine grid, its FFT cut to 5 Hz .. ``f_hi`` (no content at or
    above the rows' Nyquist frequency: neither point samples nor conversions alias)."""
    X = np.fft.rfft(np.random.default_rng(seed).standard_normal(n_fine))
    f = np.fft.rfftfreq(n_fine, dt_fine)
    X[(f < 5.0) | (f > f_hi)] = 0.0
    return np.fft.irfft(X, n=n_fine)


@pytest.mark.parametrize("drate, mode, nch", [(1000.0, "continuous", 1), (3750.0, "cycle", 2),
                                              (7500.0, "cycle", 3)])
def test_chain_spectral_map_equals_the_welch_spectra_of_conversions(drate, mode, nch):
    rate = row_rates(nch, mode)[drate]
    dt, s, n, N = 1.0 / rate, 32, 2 ** 14, 512
    off = row_offsets(drate, mode, nch)
    y = _band_limited((n - 1) * s + 1 + 8 * s, dt / s, 0.45 * rate, seed=3)
    # the chip's conversions of the same signal on every channel (each at its own instant)
    m = conversions(np.repeat(y[:, None], nch, axis=1), dt / s, s, n, drate, off)
    f, S_m, _ = cross_spectra([m], dt, N)
    _, S_y, _ = cross_spectra([y[:(n - 1) * s + 1:s, None]], dt, N)
    # the map: G S_y G^H, G from the model file's Chain (offsets are row_offsets negated)
    G = chain_gains(Chain("ads1256", drate, mode, tuple(-off)), f, nch)
    T = through_chain(G, np.ones((f.size, nch, 1)))
    S_map = T @ S_y @ np.conj(np.transpose(T, (0, 2, 1)))
    band = (f > 10.0) & (f < 0.4 * rate)              # the Whittle band (operational.welch_grid)
    scale = np.sqrt(np.einsum("kii->ki", S_m[band]).real)
    err = np.abs(S_map[band] - S_m[band]) / (scale[:, :, None] * scale[:, None, :])
    # every entry, cross-spectra (the cycled channels' phase) included, relative to the
    # channels' own spectra: measured 1.9e-3 (continuous), 2.2e-3 / 2.4e-3 (cycle) with 32
    # fine steps per row, 5.8e-3 / 6.1e-3 / 6.4e-3 with 16: the fine grid's interpolation of
    # the chip's taps (the reference's error, falling with the steps), not the map
    assert err.max() < 6e-3, err.max()
    # and the chain is no small correction: point samples' spectra (G = 1) miss the sinc
    # gain (|G|^2 = 0.57 at 0.4 of 1,000 SPS: S_y / S_m = 1.75) and, cycled, the phase of
    # the channels converted apart in the cross-spectra (measured 0.74, 1.20, 1.49)
    err_point = np.abs(S_y[band] - S_m[band]) / (scale[:, :, None] * scale[:, None, :])
    assert err_point.max() > 0.5, err_point.max()


def test_point_samples_keep_the_structures_transfer():
    H = np.ones((4, 2, 1), complex)
    assert through_chain(chain_gains(Chain(), np.arange(4.0), 2), H) is H
    # a drift alone (an ideal converter) changes no transfer: the walk enters as noise
    assert chain_gains(Chain(drift=(1e-4, 0.0)), np.arange(4.0), 2) is None


def _cycled_strip(params: str, nel: int, **truth) -> str:
    """The strip of tests/calib_truth.py (d110 laser, a170 accelerometer) at 1,082.5 rows/s:
    its default chain is the ADS1256's multiplexer cycling at 3,750 SPS (the channels
    converted 0.46 ms apart)."""
    from calib_truth import model_text
    return model_text(nel, params=params, **truth) + "[estimator]\nrate = 1082.5\n"


@pytest.mark.slow
def test_operational_calibration_through_the_cycled_chip_finds_the_truth(tmp_path, capsys):
    import json

    from calib_truth import PARAMS_3, own_modes_damping
    from edge.csvio import write_table
    from offline.cli import main
    from offline.simulate import simulate_model

    truth = {"E": 65e9, "zeta": 0.02, "k_root": 14.0}
    text = own_modes_damping(_cycled_strip("", 34, E=truth["E"], k_root=truth["k_root"]),
                             truth["zeta"], tmp_path / "truth.toml")
    (tmp_path / "truth.toml").write_text(text)
    r = simulate_model(tmp_path / "truth.toml", duration=4.0, noise=0.01, seed=1,
                       load={"type": "random", "band": (5.0, 250.0), "rms": 0.05},
                       progress=False)
    assert r.info["chain"] == "ads1256" and r.info["mode"] == "cycle"
    write_table(tmp_path / "op.csv", r.t, r.Y, r.channel_names)    # no force column
    (tmp_path / "m.toml").write_text(_cycled_strip(PARAMS_3, 17))
    rc = main(["calibrate", str(tmp_path / "m.toml"), "--data", str(tmp_path / "op.csv"),
               "-o", str(tmp_path / "out"), "--operational"])
    out = capsys.readouterr().out
    post = json.loads((tmp_path / "out" / "posterior.json").read_text())
    assert rc == 0, out
    assert post["measurement"] == "ads1256 3750 SPS cycle"
    assert "through the model file's measurement chain: ads1256 3750 SPS cycle" in out
    # truth within 2 posterior std (benchmarks/calibrate_operational.py --chain --layout
    # cycle, this seed: E 0.7, zeta 0.1, k_root 0.5 std). The likelihood of point samples
    # (before) on these records: zeta 0.0003 +- 0.00004, outside its prior's bounds (exit 5,
    # no calibrated model), k_root 12.3 +- 0.24 (6.8 std): the phase of the channels converted
    # 0.46 ms apart (31 degrees at 187 Hz, where the gain is 0.996), unmodelled
    for i, name in enumerate(post["names"]):
        z = abs(post["mean"][i] - truth[name]) / post["std"][i]
        assert z < 2.0, (name, post["mean"][i], post["std"][i])


def test_declared_drift_is_in_the_operational_likelihoods_expectation(tmp_path):
    """A laser declaring a drifting offset: the operational likelihood's expected spectrum
    below the force's band (5 Hz) is the walk's, as the record's Welch estimate is; the
    walk drawn by the simulator's generator (:func:`offline.chain.offset_walks`, a separate
    code path), the response synthesised from the model's own spectrum (1 % noise)."""
    from calib_truth import E_ONLY, model_text

    from offline.calibration.calibrate import settings_from_raw
    from offline.calibration.operational import Likelihood, reduced_modal
    from offline.calibration.setup import from_model_file
    from offline.calibration.spectral_chain import records_chain
    from offline.chain import offset_walks
    from offline.forcing.force_model import ForceModel
    from offline.load.model import LoadModel
    from offline.load.whittle import unpack

    drift, dt, n, E0 = 3e-4, 1e-3, 2 ** 15, 66e9
    t = model_text(params=E_ONLY)
    t = t[:t.index('[[sensors]]\nname = "a170"')] + t[t.index("[[forces]]"):]
    t = t.replace('name = "d110"\n', f'name = "d110"\ndrift = {drift!r}\n', 1)
    (tmp_path / "m.toml").write_text(t + '[acquisition]\nconverter = "ideal"\n')
    su = from_model_file(tmp_path / "m.toml")
    st = settings_from_raw(su.spec.raw, su.parameters, su.where)
    fm = ForceModel("bandpass", (5.0, 300.0), 0.05, order=4)
    f = np.fft.rfftfreq(2 ** 17, dt)
    H = reduced_modal(su.pm.parts, np.array([E0]), su.B, su.out_rows).transfer(f, su.out_kind)
    S = np.abs(H[:, 0, 0]) ** 2 * fm.psd(f)
    s = 0.01 * np.sqrt(np.fft.irfft(S)[0] / dt)
    w = np.random.default_rng(5).standard_normal(2 ** 17)
    y = np.fft.irfft(np.fft.rfft(w) * np.sqrt((S + s ** 2 * dt) / dt))[:n]
    y = y + offset_walks(n, dt, [drift], 7)[:, 0]
    chain, _ = records_chain(su.spec, dt)
    assert chain.drift == (drift,)
    xi, load = np.array([np.log(E0)]), LoadModel(forces=[fm], noise_std=np.array([s]))
    low = []
    for c in (chain, None):
        lik = Likelihood(su, st.priors, [y[:, None]], dt, None, xi, load_start=load, chain=c)
        W = lik.whittle(xi)
        E = np.real(W.expected(*unpack(lik.L, lik.lam0))[:, 0, 0])
        k = W.bin_freqs() < 4.0                     # below the force's 5 Hz corner
        low.append(np.mean(np.real(W.S_hat[k, 0, 0]) / E[k]))
    # Welch estimate over expectation, the mean over the bins 1-4 Hz: measured 0.95 with the
    # walk (a mean of 12 bins of 15 segments: scatter ~ 0.1); without it (main's likelihood)
    # the expectation is the noise and the load's skirt alone: 426x below the estimate
    assert 0.7 < low[0] < 1.4, low
    assert low[1] > 100.0, low
