"""The MMSE (Wiener) accuracy limit of force and response estimation, from spectra.

A linear structure sampled every ``dt`` with Gaussian sensor noise::

    y_k = (h_y * f)_k + n_k,   z_k = (h_z * f)_k          (h: impulse responses)

with forces ``f`` stationary, zero mean, of known spectra (independent, or a power matrix
per bin for correlated forces), and white noise ``n`` of variance ``sigma_c^2`` per channel. No estimator (linear or not: the processes
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

* **Fixed lag d, unlimited memory** (the IIR limit, :func:`iir_fixed_lag_limit`): with the
  minimum-phase factor ``Phi_yy = psi psi^H`` (:mod:`offline.limit.spectral_factor`) the
  innovation ``w = psi^-1 y`` is white with unit covariance; with
  ``c_m = Cov(t_{k+m}, w_k)``, the inverse DFT of ``Phi_ty psi^-H``, the best estimate of
  ``t_{k-d}`` from ``w_j, j <= k`` leaves (Kailath et al., ch. 7)::

      err var(t) = var(t) - sum_{m >= -d} |c_m|^2

  Summed over every m this is the non-causal limit (Parseval), a check of the factor.

Normalised RMS error = sqrt(err var) / std(truth), the figure the benchmarks report.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offline._deps import need
from offline.limit.spectral_factor import spectral_factor


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
    if P.shape == (nb, nf):  # independent forces: a diagonal power matrix per bin
        if np.any(P < 0) or not np.all(np.isfinite(P)):
            raise ValueError("P: force power per bin must be finite and >= 0")
        Pm = np.zeros((nb, nf, nf))
        Pm[:, np.arange(nf), np.arange(nf)] = P
        P = Pm
    elif P.shape != (nb, nf, nf):
        raise ValueError(f"P: expected shape {(nb, nf)} (bins x forces) or {(nb, nf, nf)} "
                         f"(a power matrix per bin), got {P.shape}")
    if not np.all(np.isfinite(P)) or np.any(np.einsum("kii->ki", P) < 0):
        raise ValueError("P: force power per bin must be finite and >= 0")
    noise_var = np.asarray(noise_var, dtype=float)
    noise_var = np.broadcast_to(noise_var, (nb, nch) if noise_var.ndim == 2 else (nch,))
    if np.any(noise_var <= 0) or not np.all(np.isfinite(noise_var)):
        raise ValueError(f"noise_var: each channel needs a finite noise variance > 0, got "
                         f"{np.min(noise_var, axis=0).tolist()} (smallest per channel; a "
                         "noise-free sensor has no finite limit)")
    Hz = np.zeros((nb, 0, nf), complex) if Hz is None else np.asarray(Hz, dtype=complex)
    if Hz.shape[0] != nb or Hz.shape[2] != nf:
        raise ValueError(f"Hz: expected shape (nbins={nb}, nout, nf={nf}), got {Hz.shape}")
    return Hy, P, noise_var, Hz


def noise_matrix(noise_var: np.ndarray, nb: int, n: int) -> np.ndarray:
    """``R_k = diag(sigma_k^2) / n`` (nb, nch, nch): white noise of variance ``sigma^2`` spread
    over the n bins; ``noise_var`` (nch,) the same in every bin, or (nb, nch) per bin (a
    coloured noise: its two-sided power in bin k times n, e.g. a drifting offset's)."""
    v = np.broadcast_to(noise_var, (nb, noise_var.shape[-1]))
    R = np.zeros((nb, v.shape[1], v.shape[1]))
    R[:, np.arange(v.shape[1]), np.arange(v.shape[1])] = v / n
    return R


def wiener_limit(Hy, P, noise_var, n: int, Hz=None) -> WienerLimit:
    """Non-causal MMSE limit (module docstring) on the one-sided bins of an n-point grid.

    Parameters
    ----------
    Hy : complex ndarray, shape (n // 2 + 1, nch, nf)
        Sampled transfer functions force -> channel at ``f_k = k / (n dt)``.
    P : ndarray, shape (n // 2 + 1, nf)
        Two-sided force power per bin [unit^2] (sum over the two-sided grid = variance).
    noise_var : float or ndarray, shape (nch,) or (n // 2 + 1, nch)
        Variance of each channel's white noise [channel unit^2]; per bin, a coloured noise's
        two-sided power in the bin times n (:func:`noise_matrix`).
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
    HP = Hy @ P                                                    # (nb, nch, nf)
    Syy = HP @ np.conj(np.transpose(Hy, (0, 2, 1))) + noise_matrix(noise_var, Hy.shape[0], n)
    # E = P - P H^H S_yy^-1 H P   (per bin)
    X = np.linalg.solve(Syy, HP)                                   # S_yy^-1 H P
    E = P - np.conj(np.transpose(HP, (0, 2, 1))) @ X
    fe = np.real(np.einsum("kii->ki", E))
    Ez = Hz @ E @ np.conj(np.transpose(Hz, (0, 2, 1)))
    ze = np.real(np.einsum("kii->ki", Ez))
    zv = np.real(np.einsum("kii->ki", Hz @ P @ np.conj(np.transpose(Hz, (0, 2, 1)))))
    pv = np.einsum("kii->ki", P)
    return WienerLimit(force_var=w @ pv, force_err=w @ np.maximum(fe, 0.0),
                       output_var=w @ zv, output_err=w @ np.maximum(ze, 0.0),
                       force_err_psd=np.maximum(fe, 0.0) * w[:, None])


def correlations(S_half: np.ndarray, n: int) -> np.ndarray:
    """``r[m] = sum_k S_k e^(i theta_k m)``, m = 0..n-1 (circular), from one-sided spectra.

    ``S_half`` (n // 2 + 1, a, b) Hermitian-extended (``S_{n-k} = conj(S_k)``): the
    correlations of real processes, real, shape (n, a, b).
    """
    return np.fft.irfft(S_half, n=n, axis=0) * n


def _target_spectra(Hy, P, noise_var, n: int, Hz):
    """Per-bin spectra of the measurements, ``S_yy = H P H^H + R`` (nb, nch, nch), and of the
    targets ``t = [f; z] = T f`` with them, ``S_ty = T P H^H`` (nb, nt, nch), and the
    targets' variances (nt,)."""
    nb, nch, nf = Hy.shape
    HH = np.conj(np.transpose(Hy, (0, 2, 1)))
    Syy = Hy @ P @ HH + noise_matrix(noise_var, nb, n)
    T = np.concatenate([np.broadcast_to(np.eye(nf), (nb, nf, nf)), Hz], axis=1)
    Sty = T @ P @ HH
    w = half_weights(n)
    var_t = w @ np.real(np.einsum("kii->ki", T @ P @ np.conj(np.transpose(T, (0, 2, 1)))))
    return Syy, Sty, var_t


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
    Syy, Sty, var_t = _target_spectra(Hy, P, noise_var, n, Hz)
    r_yy = correlations(Syy, n)                                    # (n, nch, nch)
    r_ty = correlations(Sty, n)                                    # (n, nt, nch)
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


def _full_grid(S_half: np.ndarray, n: int) -> np.ndarray:
    """Two-sided grid ``(n, a, b)`` from one-sided bins with ``S_{n-k} = conj(S_k)``."""
    tail = np.conj(S_half[1:(n + 1) // 2][::-1])
    return np.concatenate([S_half, tail], axis=0)


def iir_fixed_lag_limit(Hy, P, noise_var, n: int, lags, Hz=None, tol: float = 1e-10,
                        check: float = 0.01) -> dict:
    """Error variances of the best estimate with delay ``d`` from the whole past of the
    measurements (no memory limit), for each lag; module docstring.

    Parameters as :func:`wiener_limit`; ``lags`` iterable of delays d >= 0 [samples],
    ``d < n / 2``. The grid must be long against the slowest decay of the structure (its
    impulse responses wrap around the ``n``-point circle otherwise); ``check``: largest
    relative gap allowed between the factor's non-causal error (every lag summed) and the
    per-bin one of :func:`wiener_limit`.

    Returns
    -------
    dict
        As :func:`fixed_lag_limit` (``memory`` None) plus ``"factor"``: the spectral
        factor's ``iterations``, ``residual`` (relative, max over bins), ``converged`` and
        ``noncausal_gap`` (relative, max over targets); ``noncausal_err`` (nt,).

    Raises
    ------
    ValueError
        When the spectral factorisation does not converge or misses the per-bin non-causal
        error by more than ``check`` (e.g. a sine load: a spectral line makes the
        measurement spectrum near singular); use :func:`fixed_lag_limit` then.
    """
    Hy, P, noise_var, Hz = _check(Hy, P, noise_var, Hz)
    lags = np.atleast_1d(np.asarray(lags, dtype=int))
    if lags.min() < 0 or 2 * lags.max() >= n:
        raise ValueError(f"fixed-lag limit: need 0 <= lag < n/2={n // 2}, got "
                         f"lags {lags.tolist()}")
    nb, nch, nf = Hy.shape
    nout = Hz.shape[1]
    Syy, Sty, var_t = _target_spectra(Hy, P, noise_var, n, Hz)
    # densities (per-bin power x n): Phi_yy = n S_yy, Phi_ty = n S_ty on the full grid
    Phi_yy = _full_grid(n * Syy, n)
    Phi_yy = 0.5 * (Phi_yy + np.conj(np.transpose(Phi_yy, (0, 2, 1))))
    fac = spectral_factor(Phi_yy, tol=tol)
    if not fac.converged:
        raise ValueError(f"spectral factorisation did not converge ({fac.iterations} "
                         f"iterations, residual {fac.residual:.2g})")
    Phi_ty = _full_grid(n * Sty, n)                                             # (n, nt, nch)
    # Phi_tw = Phi_ty psi^-H ;  c_m = Cov(t_{k+m}, w_k) = ifft(Phi_tw)[m]
    psi_h = np.conj(np.transpose(fac.psi, (0, 2, 1)))
    Phi_tw = np.transpose(np.linalg.solve(psi_h.transpose(0, 2, 1),
                                          Phi_ty.transpose(0, 2, 1)), (0, 2, 1))
    c = np.fft.ifft(Phi_tw, axis=0)                                             # (n, nt, nch)
    energy = np.sum(np.abs(c) ** 2, axis=2)                                     # (n, nt)
    # explained variance: lags m = 0 .. n/2 - 1 (causal) plus -d .. -1 (indices n-d .. n-1)
    causal = energy[: n // 2].sum(axis=0)
    neg = np.cumsum(energy[::-1][: n // 2], axis=0)                             # m = -1, -2, ..
    errs = np.zeros((lags.size, nf + nout))
    for i, d in enumerate(lags):
        errs[i] = var_t - causal - (neg[d - 1] if d > 0 else 0.0)
    # check: every lag summed is the non-causal error, per bin sum_k w_k (S_tt - S_ty S_yy^-1
    # S_yt); the factor's truncation on the grid shows up here first
    expl = np.real(np.einsum("kti,kti->kt", Sty,
                             np.linalg.solve(Syy, np.conj(np.transpose(Sty, (0, 2, 1))))
                             .transpose(0, 2, 1)))
    nc_bins = var_t - half_weights(n) @ expl
    nc_fac = var_t - causal - neg[-1]
    gap = np.abs(nc_fac - nc_bins) / np.maximum(nc_bins, 1e-300)
    if np.any(gap > check):
        raise ValueError(f"spectral factor off the per-bin limit by {100 * gap.max():.2g} % "
                         f"(grid too short for the slowest decay?)")
    return {"lags": lags, "force_err": np.maximum(errs[:, :nf], 0.0),
            "output_err": np.maximum(errs[:, nf:], 0.0), "force_var": var_t[:nf],
            "output_var": var_t[nf:], "memory": None,
            "factor": {"iterations": fac.iterations, "residual": fac.residual,
                       "converged": fac.converged, "noncausal_gap": float(gap.max())},
            "noncausal_err": nc_fac}
