"""Accuracy metrics of paper 004 (Oh et al., Sect. 4): FDE (eq. 33), SNR (eq. 29), noise (eq. 28).

Pure NumPy functions. Signals are sampled uniformly; a 1-D array is one signal of shape
``(nt,)``, a 2-D array holds one signal per column, shape ``(nt, nc)``.

Two deliberate readings of the printed equations (documented in docs/metrics.md):

* eq. 33 prints the denominator as ``sqrt(R^2 - I^2)``; that is a typo for the magnitude
  ``sqrt(R^2 + I^2)`` (Dragovich & Lepage 2009, the paper's ref. 42). With magnitudes the
  index is ``FDE = sum |E - C| / sum (|E| + |C|)``, which lies in [0, 1] by the triangle
  inequality: 0 for identical signals, 1 for opposite signals or an all-zero estimate.
* eq. 29 prints the noise power as ``sum (ubar^2 - u^2)``; the noise power is
  ``sum (ubar - u)^2``, which is what is used here. The numerator is the RMS of the noisy
  signal ``ubar``, as printed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["FDE", "fde", "snr_db", "rms_error", "correlation", "add_noise"]


@dataclass(frozen=True)
class FDE:
    """Result of :func:`fde`.

    Attributes
    ----------
    value : float or ndarray, shape (nc,)
        The frequency domain error index in [0, 1] (per column for 2-D input).
    band : tuple of float or None
        The requested band ``(f0, fmax)`` [Hz], or None for the full spectrum.
    f_lo, f_hi : float
        Frequencies of the first and last FFT bin actually summed [Hz].
    n_bins : int
        Number of one-sided FFT bins summed.
    """

    value: float | np.ndarray
    band: tuple | None
    f_lo: float
    f_hi: float
    n_bins: int

    @property
    def label(self) -> str:
        """``"0-200 Hz"`` for a band, ``"full spectrum (0-500 Hz)"`` otherwise."""
        if self.band is None:
            return f"full spectrum ({_hz(self.f_lo)}-{_hz(self.f_hi)} Hz)"
        return f"{_hz(self.band[0])}-{_hz(self.band[1])} Hz"

    def __float__(self) -> float:
        return float(self.value)

    def __str__(self) -> str:
        v = np.atleast_1d(self.value)
        vals = ", ".join(f"{x:.4f}" for x in v)
        return f"FDE over {self.label}: {vals}"


def _hz(f: float) -> str:
    return f"{f:g}"


def _as_signal(x, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim not in (1, 2):
        raise ValueError(f"{name}: expected shape (nt,) or (nt, nc), got {a.shape}")
    if a.shape[0] < 2:
        raise ValueError(f"{name}: needs at least 2 samples, got {a.shape[0]}")
    if not np.all(np.isfinite(a)):
        bad = int(np.flatnonzero(~np.all(np.isfinite(a.reshape(a.shape[0], -1)), axis=1))[0])
        raise ValueError(f"{name}: contains NaN or inf (first at sample {bad}); "
                         "drop or mask such rows first")
    return a


def _pair(estimate, truth, names=("estimate", "truth")):
    e = _as_signal(estimate, names[0])
    c = _as_signal(truth, names[1])
    if e.shape != c.shape:
        raise ValueError(f"{names[0]} shape {e.shape} and {names[1]} shape {c.shape} differ")
    return e, c


def fde(estimate, truth, dt: float, band=None) -> FDE:
    """Frequency domain error index of paper 004, eq. 33 (magnitude denominator).

    Parameters
    ----------
    estimate : array_like, shape (nt,) or (nt, nc)
        Identified signal(s) (any unit).
    truth : array_like, same shape as ``estimate``
        Reference signal(s), same unit and time base.
    dt : float
        Sample interval [s] (> 0).
    band : tuple (f0, fmax) of float, optional
        Sum only over one-sided FFT bins with ``f0 <= f <= fmax`` [Hz]; the full spectrum
        (0 to Nyquist) when omitted.

    Returns
    -------
    FDE
        ``value`` = sum_i |E_i - C_i| / sum_i (|E_i| + |C_i|) over the selected bins of the
        one-sided FFTs E (estimate) and C (truth), in [0, 1]; 0 when both are zero in the band.
        ``label`` names the band for printing ("FDE over 0-200 Hz" / "full spectrum").
    """
    e, c = _pair(estimate, truth)
    dt = float(dt)
    if not (np.isfinite(dt) and dt > 0):
        raise ValueError(f"dt: must be a finite positive sample interval [s], got {dt}")
    nt = e.shape[0]
    freqs = np.fft.rfftfreq(nt, dt)
    if band is None:
        sel = np.ones(freqs.shape, dtype=bool)
        band_used = None
    else:
        try:
            f0, fmax = (float(b) for b in band)
        except (TypeError, ValueError):
            raise ValueError(f"band: expected (f0, fmax) in Hz, got {band!r}") from None
        if not (np.isfinite(f0) and np.isfinite(fmax) and 0 <= f0 < fmax):
            raise ValueError(f"band: need 0 <= f0 < fmax, got ({f0}, {fmax})")
        sel = (freqs >= f0) & (freqs <= fmax)
        if not np.any(sel):
            raise ValueError(f"band: ({f0:g}, {fmax:g}) Hz contains no FFT bin (resolution "
                             f"{freqs[1]:g} Hz, Nyquist {freqs[-1]:g} Hz)")
        band_used = (f0, fmax)
    # E, C: one-sided spectra of the estimate and the reference
    E = np.fft.rfft(e, axis=0)[sel]
    C = np.fft.rfft(c, axis=0)[sel]
    # FDE = sum |E - C| / sum (|E| + |C|)                         (eq. 33, magnitudes)
    num = np.sum(np.abs(E - C), axis=0)
    den = np.sum(np.abs(E) + np.abs(C), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        val = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
    value = float(val) if val.ndim == 0 else val
    f_sel = freqs[sel]
    return FDE(value=value, band=band_used, f_lo=float(f_sel[0]), f_hi=float(f_sel[-1]),
               n_bins=int(sel.sum()))


def snr_db(noisy, clean):
    """Signal-to-noise ratio of paper 004, eq. 29 [dB].

    Parameters
    ----------
    noisy : array_like, shape (nt,) or (nt, nc)
        The signal with noise, ``ubar`` (any unit).
    clean : array_like, same shape
        The noise-free signal ``u``.

    Returns
    -------
    float or ndarray, shape (nc,)
        ``20 log10( rms(ubar) / rms(ubar - u) )``; +inf when there is no noise.
    """
    ub, u = _pair(noisy, clean, ("noisy", "clean"))
    # SNR = 20 log10( sqrt(sum ubar^2 / n) / sqrt(sum (ubar - u)^2 / n) )   (eq. 29, noise power)
    s = np.sqrt(np.mean(ub**2, axis=0))
    nz = np.sqrt(np.mean((ub - u) ** 2, axis=0))
    with np.errstate(divide="ignore"):
        out = 20.0 * np.log10(s / nz)
    return float(out) if np.ndim(out) == 0 else out


def rms_error(estimate, truth):
    """Root-mean-square error ``sqrt(mean((estimate - truth)^2))``, in the signals' unit.

    Shapes as :func:`fde`; returns a float or an array of shape (nc,).
    """
    e, c = _pair(estimate, truth)
    out = np.sqrt(np.mean((e - c) ** 2, axis=0))
    return float(out) if np.ndim(out) == 0 else out


def correlation(estimate, truth):
    """Pearson correlation coefficient between estimate and truth (per column), in [-1, 1].

    NaN when either signal is constant. Shapes as :func:`fde`.
    """
    e, c = _pair(estimate, truth)
    ed = e - e.mean(axis=0)
    cd = c - c.mean(axis=0)
    den = np.sqrt(np.sum(ed**2, axis=0) * np.sum(cd**2, axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(den > 0, np.sum(ed * cd, axis=0) / np.where(den > 0, den, 1.0), np.nan)
    return float(out) if np.ndim(out) == 0 else out


def add_noise(signal, level: float, rng: np.random.Generator):
    """Gaussian measurement noise of paper 004, eq. 28: ``ubar = u + sigma N(0, 1)``.

    Parameters
    ----------
    signal : array_like, shape (nt,) or (nt, nc)
        Clean signal(s) ``u``.
    level : float
        Noise level relative to the signal's standard deviation, ``sigma = level * std(u)``
        per column (0.01 is the paper's "1 % noise", about 40 dB).
    rng : numpy.random.Generator
        Seeded generator (``np.random.default_rng(seed)``); required so runs are reproducible.

    Returns
    -------
    ndarray, same shape as ``signal``
    """
    u = _as_signal(signal, "signal")
    level = float(level)
    if not (np.isfinite(level) and level >= 0):
        raise ValueError(f"level: must be a finite number >= 0, got {level}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError("rng: pass a numpy.random.Generator, e.g. np.random.default_rng(0)")
    # sigma = level * std(u)                                                   (eq. 28)
    sigma = level * np.std(u, axis=0)
    return u + sigma * rng.standard_normal(u.shape)
