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
"""

from __future__ import annotations

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


def walk_spectra(drift, N: int, dt: float, bins) -> np.ndarray | None:
    """Each channel's expected Welch estimate of its drifting offset, ``(len(bins), nch)``
    (``drift`` (nch,) [unit / sqrt(s)], ``q = drift^2 dt``); None when no channel drifts."""
    drift = np.asarray(drift, dtype=float)
    if not np.any(drift > 0):
        return None
    bins = np.asarray(bins, dtype=int)
    contiguous = bins.size > 1 and np.all(np.diff(bins) == 1)
    unit = (_walk_welch_range(int(N), float(dt), int(bins[0]), int(bins[-1])) if contiguous
            else walk_welch(N, dt, bins))
    return unit[:, None] * (drift ** 2 * dt)[None, :]
