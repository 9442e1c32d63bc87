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
