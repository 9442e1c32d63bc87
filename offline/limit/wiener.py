"""The MMSE (Wiener) accuracy limit of force and response estimation, from spectra.

A linear structure sampled every ``dt`` with Gaussian sensor noise::

    y_k = (h_y * f)_k + n_k,   z_k = (h_z * f)_k          (h: impulse responses)

with forces ``f`` stationary, zero mean, independent between forces, known spectra, and white
noise ``n`` of variance ``sigma_c^2`` per channel. No estimator (linear or not: the processes
are jointly Gaussian) beats the conditional expectation; its error is the limit.

Everything lives on the ``N``-point DFT grid ``theta_k = 2 pi k / N`` (the circular, i.e.
long-record, approximation). Per bin the force power is ``P_k = diag(p_k)`` (nf x nf) with
``sum_k p_k = var(f)`` over the two-sided grid, the noise power ``R = diag(sigma^2) / N``.

* **Non-causal** (whole record): per bin (Wiener, e.g. Kailath, Sayed, Hassibi, *Linear
  Estimation*, 2000, eq. 7.3.7)::

      E_k = P_k - P_k H_k^H (H_k P_k H_k^H + R)^-1 H_k P_k
      err var(f) = sum_k diag(E_k),  err var(z) = sum_k diag(Hz_k E_k Hz_k^H)

* **Fixed lag d** (estimate of sample ``k - d`` from ``y_{k-M+1} .. y_k``, a causal FIR
  of memory ``M``): the normal equations in the time domain with the correlations
  ``r[m] = sum_k S_k e^(i theta_k m)`` (inverse DFT of the spectra)::

      err var(t) = var(t) - c_d^T R_yy^-1 c_d,   R_yy block Toeplitz (M nch x M nch)

  This is achievable by a causal filter of memory M with delay d, so it bounds the IIR
  fixed-lag limit from above and converges to it as M grows (reported with M).

Normalised RMS error = sqrt(err var) / std(truth), the figure the benchmarks report.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offline._deps import need


def half_weights(n: int) -> np.ndarray:
    """Weights of the ``n // 2 + 1`` one-sided bins in a two-sided sum (1 at DC and at
    Nyquist for even n, 2 elsewhere)."""
    w = np.full(n // 2 + 1, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    return w


@dataclass
class WienerLimit:
    """Non-causal limit on the grid.

    Attributes
    ----------
    force_var, force_err : (nf,)   truth and error variance of each force [unit^2]
    output_var, output_err : (nout,) the same for each output
    force_err_psd : (nbins, nf)    error power per one-sided bin (two-sided value x weight)
    """

    force_var: np.ndarray
    force_err: np.ndarray
    output_var: np.ndarray
    output_err: np.ndarray
    force_err_psd: np.ndarray

    @property
    def force_nrmse(self) -> np.ndarray:
        return np.sqrt(self.force_err / np.where(self.force_var > 0, self.force_var, np.nan))

    @property
    def output_nrmse(self) -> np.ndarray:
        return np.sqrt(self.output_err / np.where(self.output_var > 0, self.output_var, np.nan))


def _check(Hy, P, noise_var, Hz):
    Hy = np.asarray(Hy, dtype=complex)
    P = np.asarray(P, dtype=float)
    if Hy.ndim != 3:
        raise ValueError(f"Hy: expected shape (nbins, nch, nf), got {Hy.shape}")
    nb, nch, nf = Hy.shape
    if P.shape != (nb, nf):
        raise ValueError(f"P: expected shape {(nb, nf)} (bins x forces), got {P.shape}")
    if np.any(P < 0) or not np.all(np.isfinite(P)):
        raise ValueError("P: force power per bin must be finite and >= 0")
    noise_var = np.broadcast_to(np.asarray(noise_var, dtype=float), (nch,))
    if np.any(noise_var <= 0) or not np.all(np.isfinite(noise_var)):
        raise ValueError(f"noise_var: each channel needs a finite noise variance > 0, got "
                         f"{noise_var.tolist()} (a noise-free sensor has no finite limit)")
    Hz = np.zeros((nb, 0, nf), complex) if Hz is None else np.asarray(Hz, dtype=complex)
    if Hz.shape[0] != nb or Hz.shape[2] != nf:
        raise ValueError(f"Hz: expected shape (nbins={nb}, nout, nf={nf}), got {Hz.shape}")
    return Hy, P, noise_var, Hz


def wiener_limit(Hy, P, noise_var, n: int, Hz=None) -> WienerLimit:
    """Non-causal MMSE limit (module docstring) on the one-sided bins of an n-point grid.

    Parameters
    ----------
    Hy : complex ndarray, shape (n // 2 + 1, nch, nf)
        Sampled transfer functions force -> channel at ``f_k = k / (n dt)``.
    P : ndarray, shape (n // 2 + 1, nf)
        Two-sided force power per bin [unit^2] (sum over the two-sided grid = variance).
    noise_var : float or ndarray, shape (nch,)
        Variance of each channel's white noise [channel unit^2].
    n : int
        Grid length (two-sided number of bins).
    Hz : complex ndarray, shape (n // 2 + 1, nout, nf), optional
        Transfer functions force -> virtual output.
    """
    Hy, P, noise_var, Hz = _check(Hy, P, noise_var, Hz)
    w = half_weights(n)
    if w.size != Hy.shape[0]:
        raise ValueError(f"Hy has {Hy.shape[0]} bins; an n={n} grid has {w.size}")
    # S_yy = H P H^H + R,  R = diag(sigma^2) / n  (white noise spread over n bins)
    HP = Hy * P[:, None, :]                                        # (nb, nch, nf)
    Syy = HP @ np.conj(np.transpose(Hy, (0, 2, 1))) + np.diag(noise_var / n)[None]
    # E = P - P H^H S_yy^-1 H P   (per bin; P diagonal)
    X = np.linalg.solve(Syy, HP)                                   # S_yy^-1 H P
    E = np.zeros((Hy.shape[0], Hy.shape[2], Hy.shape[2]), complex)
    E[:, np.arange(P.shape[1]), np.arange(P.shape[1])] = P
    E -= np.conj(np.transpose(HP, (0, 2, 1))) @ X
    fe = np.real(np.einsum("kii->ki", E))
    Ez = Hz @ E @ np.conj(np.transpose(Hz, (0, 2, 1)))
    ze = np.real(np.einsum("kii->ki", Ez))
    zv = np.einsum("koj,kj->ko", np.abs(Hz) ** 2, P)
    return WienerLimit(force_var=w @ P, force_err=w @ np.maximum(fe, 0.0),
                       output_var=w @ zv, output_err=w @ np.maximum(ze, 0.0),
                       force_err_psd=np.maximum(fe, 0.0) * w[:, None])


def correlations(S_half: np.ndarray, n: int) -> np.ndarray:
    """``r[m] = sum_k S_k e^(i theta_k m)``, m = 0..n-1 (circular), from one-sided spectra.

    ``S_half`` (n // 2 + 1, a, b) Hermitian-extended (``S_{n-k} = conj(S_k)``): the
    correlations of real processes, real, shape (n, a, b).
    """
    return np.fft.irfft(S_half, n=n, axis=0) * n


def fixed_lag_limit(Hy, P, noise_var, n: int, lags, memory: int, Hz=None) -> dict:
    """Error variances of the best causal FIR estimate with delay ``d`` for each lag.

    Parameters as :func:`wiener_limit`; ``lags`` iterable of delays d >= 0 [samples];
    ``memory`` M: number of measurement samples used (``y_{k-M+1} .. y_k``), ``M > max(lags)``
    and ``M <= n / 2`` (the circular correlations must not wrap).

    Returns
    -------
    dict
        ``{"lags": (nl,), "force_err": (nl, nf), "output_err": (nl, nout), "force_var":
        (nf,), "output_var": (nout,), "memory": M}``.
    """
    sla = need("scipy.linalg")
    Hy, P, noise_var, Hz = _check(Hy, P, noise_var, Hz)
    lags = np.atleast_1d(np.asarray(lags, dtype=int))
    M = int(memory)
    if lags.min() < 0 or M <= lags.max() or 2 * M > n:
        raise ValueError(f"fixed-lag limit: need 0 <= lag < memory={M} <= n/2={n // 2}, got "
                         f"lags {lags.tolist()}")
    nb, nch, nf = Hy.shape
    nout = Hz.shape[1]
    HH = np.conj(np.transpose(Hy, (0, 2, 1)))
    HP = Hy * P[:, None, :]
    Syy = HP @ HH + np.diag(noise_var / n)[None]
    # targets t = [f; z]:  S_ty = [P; Hz P] H^H
    T = np.concatenate([np.broadcast_to(np.eye(nf), (nb, nf, nf)), Hz], axis=1)  # t = T f
    Sty = (T * P[:, None, :]) @ HH
    r_yy = correlations(Syy, n)                                    # (n, nch, nch)
    r_ty = correlations(Sty, n)                                    # (n, nt, nch)
    w = half_weights(n)
    var_t = np.concatenate([w @ P, w @ np.einsum("koj,kj->ko", np.abs(Hz) ** 2, P)])
    # R[i, j] = r_yy[i - j] (oldest sample first), circular index
    idx = (np.arange(M)[:, None] - np.arange(M)[None, :]) % n
    R = np.transpose(r_yy[idx], (0, 2, 1, 3)).reshape(M * nch, M * nch)
    R = 0.5 * (R + R.T)
    Lc, _ = sla.cho_factor(R, lower=True, check_finite=False)
    errs = np.zeros((lags.size, nf + nout))
    for i, d in enumerate(lags):
        # c_i = Cov(t_{k-d}, y_{k-M+1+i}) = r_ty[M - 1 - i - d]
        c = r_ty[(M - 1 - np.arange(M) - d) % n]                  # (M, nt, nch)
        C = np.transpose(c, (1, 0, 2)).reshape(nf + nout, M * nch)
        X = sla.solve_triangular(Lc, C.T, lower=True, check_finite=False)
        errs[i] = var_t - np.sum(X * X, axis=0)
    return {"lags": lags, "force_err": np.maximum(errs[:, :nf], 0.0),
            "output_err": np.maximum(errs[:, nf:], 0.0), "force_var": var_t[:nf],
            "output_var": var_t[nf:], "memory": M}
