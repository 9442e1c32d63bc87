"""A sensor's drifting offset in the records' Welch spectra: what the load fit must not learn.

A sensor with a DC path may declare a drifting offset (``[[sensors]] drift``: a random walk
``b_n = b_(n-1) + u_n``, ``E[u_n^2] = q = drift^2 dt``, in the channel's unit per sqrt(s);
:mod:`edge.acquisition`). Its power ``q dt / (4 sin^2(pi f dt))`` sits at low frequency,
where a fit without it learns it as load (a low band edge far too low) or as noise. The load
fit (:mod:`offline.load.learn`) adds it, fixed at the declaration, to each drifting channel's
expected Welch estimate.

A random walk is not stationary, so its Welch estimate is not the window's kernel applied to
a spectrum: its expectation follows from the increments. In a segment of ``N`` samples with
its mean removed (:func:`offline.load.welch.cross_spectra`)::

    b_n - mean(b) = sum_(m=1)^(N-1) u_m (1[m <= n] - (N - m) / N)

so the Hann-windowed transform at bin ``k`` is ``X_k = sum_m u_m c_m(k)`` with::

    c_m(k) = sum_(n >= m) w_n e^(-2 pi i k n / N) - (N - m) / N sum_n w_n e^(-2 pi i k n / N)

and, with Welch's two-sided density scaling ``|X|^2 dt / sum w^2``::

    E S_hat_walk(k) = q dt / sum(w^2) * sum_m |c_m(k)|^2                       (exact)

which for ``k`` well above 1 approaches ``q dt / (4 sin^2(pi k / N))`` smoothed by the
window's kernel. Exact for every segment (the increments are stationary).

That is the walk of point samples. The device's converter (an ADS1256's sinc filter and
averager, :mod:`edge.acquisition`) converts the offset with the sensor's output: the sampled
spectrum is ``drift^2 sum_m |G(f + m fs)|^2 / (2 pi (f + m fs))^2`` (``G`` the conversion's
response, the sensor's own high-pass and average left out: the offset comes after them),
against ``drift^2 sum_m 1 / (2 pi (f + m fs))^2 = q dt / (4 sin^2(pi f dt))`` for point
samples. Their ratio (:func:`converted_share`, 1 at low frequency, 0.33 at 499 Hz
for the ADS1256 at 1000 SPS) multiplies the exact estimate: near DC, where the kernel and
the mean removal matter, the conversion does not, and near Nyquist, where it does, the
kernel does not. Without it a strong drift's walk, converted, was expected 2-3x too high
near Nyquist and the fit lowered the white noise under it (3.6x on the README beam at
3e-4 m / sqrt(s)).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import numpy as np

from offline.load.welch import hann

#: bins per block of the tail sums (a block is an (N, BLOCK) complex array)
BLOCK = 128


@lru_cache(maxsize=8)
def _walk_welch_range(N: int, dt: float, k0: int, k1: int) -> np.ndarray:
    """:func:`walk_welch` at the bins ``k0 .. k1`` (the fit asks for the same range several
    times: once per candidate), read-only."""
    out = walk_welch(N, dt, np.arange(k0, k1 + 1))
    out.flags.writeable = False
    return out


def walk_welch(N: int, dt: float, bins) -> np.ndarray:
    """``E S_hat(k) / q`` (len(bins),): the expected Welch estimate (Hann segments of ``N``
    samples, each segment's mean removed, two-sided density) of a random walk whose
    increments have variance ``q``, per unit ``q``, at the bin indices ``bins`` (module
    docstring)."""
    w = hann(N)
    n = np.arange(N)
    m = np.arange(1, N)
    bins = np.asarray(bins, dtype=int)
    out = np.empty(bins.size)
    for s in range(0, bins.size, BLOCK):
        k = bins[s:s + BLOCK]
        a = w[:, None] * np.exp(-2j * np.pi * np.outer(n, k) / N)          # (N, nk)
        tail = np.cumsum(a[::-1], axis=0)[::-1]                            # sum_(n >= m)
        c = tail[1:] - ((N - m) / N)[:, None] * tail[0][None]              # (N - 1, nk)
        out[s:s + BLOCK] = np.sum(np.abs(c) ** 2, axis=0)
    return out * dt / np.sum(w ** 2)


def converted_share(chain, f, nch: int, dt: float, images: int = 4) -> np.ndarray:
    """``(nf, nch)``: the converted walk's sampled spectrum over the point-sampled walk's at
    ``f`` (0 < f <= fs / 2) (module docstring; the alias images ``|m| <= images``); ones for
    an ideal converter or no ``chain``."""
    f = np.asarray(f, dtype=float)
    if chain is None or chain.ideal:
        return np.ones((f.size, nch))
    conv = replace(chain, highpass=(), average=(), drift=())   # the offset follows them
    fs = 1.0 / dt
    num = np.zeros((f.size, nch))
    for m in range(-images, images + 1):
        fm = np.abs(f + m * fs)
        num += np.abs(conv.response(fm, nch)) ** 2 / fm[:, None] ** 2
    # sum over all m of 1 / (f + m fs)^2 = pi^2 / (fs^2 sin^2(pi f / fs))
    return num / (np.pi ** 2 / (fs ** 2 * np.sin(np.pi * f * dt) ** 2))[:, None]


def walk_spectra(drift, N: int, dt: float, bins, chain=None) -> np.ndarray | None:
    """Each channel's expected Welch estimate of its drifting offset, ``(len(bins), nch)``
    (``drift`` (nch,) [unit / sqrt(s)], ``q = drift^2 dt``), converted by ``chain``
    (:class:`edge.acquisition.Chain`; None: point samples); None when no channel drifts."""
    drift = np.asarray(drift, dtype=float)
    if not np.any(drift > 0):
        return None
    bins = np.asarray(bins, dtype=int)
    contiguous = bins.size > 1 and np.all(np.diff(bins) == 1)
    unit = (_walk_welch_range(int(N), float(dt), int(bins[0]), int(bins[-1])) if contiguous
            else walk_welch(N, dt, bins))
    share = converted_share(chain, bins / (N * dt), drift.size, dt)
    return unit[:, None] * (drift ** 2 * dt)[None, :] * share
