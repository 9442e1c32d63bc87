"""Cross-spectral matrices of records by Welch's method, and the expectation of such an
estimate under a model spectrum (the window's spectral kernel).

For a stationary multichannel record the Welch estimate at bin ``f_k`` (Hann segments of
``N`` samples, 50 % overlap, two-sided density scaling ``|X|^2 / (fs sum w^2)``) has the
expectation ``E S_hat(f_k) = int S(nu) |W(f_k - nu)|^2 d nu / int |W|^2``: the true spectrum
smoothed by the window's kernel. A lightly damped resonance is narrower than a bin of a few
seconds' segment, so the likelihood compares the estimate with the *smoothed* model
(:func:`window_kernel`), not with the model at the bin centre.
"""

from __future__ import annotations

import numpy as np


def segment_length(n: int, dt: float, seg_s: float | None = None) -> int:
    """Samples per segment: ``seg_s`` (default 4 s), at most a quarter of the record (at
    least 7 segments with 50 % overlap), a power of two."""
    want = int(round((seg_s or 4.0) / dt))
    want = min(want, max(n // 4, 16))
    return int(2 ** np.floor(np.log2(max(want, 16))))


def hann(N: int) -> np.ndarray:
    """Periodic Hann window (the DFT-even form Welch's method uses)."""
    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N) / N)


def cross_spectra(records, dt: float, N: int):
    """Welch cross-spectral matrices of one or more records.

    Parameters
    ----------
    records : list of (n_i, nch) arrays (each record's samples; gaps between records)
    dt : sample interval [s];  N : samples per segment

    Returns
    -------
    freqs : (N // 2 + 1,) [Hz];  S : (N // 2 + 1, nch, nch) complex two-sided density
    [unit^2/Hz];  n_seg : number of segments averaged
    """
    w = hann(N)
    step = N // 2
    acc = None
    n_seg = 0
    for Y in records:
        Y = np.asarray(Y, dtype=float)
        for s in range(0, Y.shape[0] - N + 1, step):
            seg = Y[s:s + N]
            X = np.fft.rfft((seg - seg.mean(axis=0)) * w[:, None], axis=0)  # (nb, nch)
            P = X[:, :, None] * np.conj(X[:, None, :])
            acc = P if acc is None else acc + P
            n_seg += 1
    if n_seg == 0:
        raise ValueError(f"records shorter than one segment of {N * dt:g} s")
    return np.fft.rfftfreq(N, dt), acc / (n_seg * np.sum(w ** 2) / dt), n_seg


def window_kernel(N: int, over: int = 4, half_width: int = 3) -> np.ndarray:
    """Weights of the Hann window's spectral kernel ``|W(nu)|^2`` on a grid ``over`` times
    finer than the bins, over ``+/- half_width`` bins, normalised to sum 1 (a flat spectrum
    keeps its level). Shape ``(2 half_width over + 1,)``."""
    w = hann(N)
    K = np.abs(np.fft.fft(w, over * N)) ** 2
    m = half_width * over
    k = np.concatenate([K[-m:], K[: m + 1]])
    return k / k.sum()


def peak_of_ratio(f_bins, ratio):
    """The largest excess of a records' spectrum over a model's (``ratio`` per bin, smoothed
    over 3 bins): ``(f0, zeta, r)``, its frequency, the damping of its half-excess width
    (clipped to 0.003-0.25) and the smoothed ratio there; None when nowhere by 2x."""
    ratio = np.convolve(ratio, np.ones(3) / 3, mode="same")
    k = int(np.argmax(ratio))
    if ratio[k] < 2.0:
        return None
    half = ratio > 1.0 + 0.5 * (ratio[k] - 1.0)
    a = b = k
    while a > 0 and half[a - 1]:
        a -= 1
    while b < ratio.size - 1 and half[b + 1]:
        b += 1
    f0 = float(f_bins[k])
    width = max(float(f_bins[b] - f_bins[a]), float(f_bins[1] - f_bins[0]))
    return f0, float(np.clip(width / (2 * f0), 0.003, 0.25)), float(ratio[k])
