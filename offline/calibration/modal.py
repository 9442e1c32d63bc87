"""Output-only calibration through identified natural frequencies (operational records).

A small identifier instead of an OMA library (pyoma-2 pulls a GUI/plotting stack; two modes
of a lightly damped structure under broadband excitation need only this): Welch spectra of
every channel, normalised and summed; the ``n_modes`` most prominent peaks in ``f_range``;
each refined by the vertex of a least-squares parabola through the log spectrum over ±3 bins.

Residual for VB: k_r = (f_r(θ) - f̂_r) / f̂_r with the EXACT Jacobian of the parametric model's
eigenvalues, dω²_r/dθ_j = φ_rᵀ (dK̂_j - ω²_r dM̂_j) φ_r (mass-normalised φ_r).
"""

from __future__ import annotations

import numpy as np

from edge.inverse import modal
from offline._deps import need
from offline.calibration.bilinear import matrices
from offline.calibration.noise import NoiseGroup
from offline.calibration.vb import variational_bayes


def identify_frequencies(Y, dt: float, n_modes: int, f_range=(0.0, None), nperseg: int = 1024,
                         half_width: int = 3):
    """Natural frequencies [Hz] (n_modes,) ascending, from response records (nt, nch)."""
    sig = need("scipy.signal")
    Y = np.atleast_2d(np.asarray(Y, float))
    if Y.shape[0] < 8:
        raise ValueError(f"output-only record too short ({Y.shape[0]} samples)")
    f, P = sig.welch(Y - Y.mean(axis=0), fs=1.0 / dt, nperseg=min(nperseg, Y.shape[0]), axis=0)
    S = (P / np.maximum(P.max(axis=0), 1e-300)).sum(axis=1)
    lo, hi = f_range[0], f_range[1] if f_range[1] is not None else f[-1]
    logS = np.log(np.maximum(S, 1e-300))
    pk, props = sig.find_peaks(logS, prominence=1.0)
    pk = pk[(f[pk] >= lo) & (f[pk] <= hi) & (pk > 0) & (pk < f.size - 1)]
    if pk.size < n_modes:
        raise ValueError(f"found {pk.size} spectral peak(s) in {lo:g}-{hi:g} Hz, need {n_modes}")
    prom = sig.peak_prominences(logS, pk)[0]
    pk = np.sort(pk[np.argsort(prom)[::-1][:n_modes]])
    out = []
    for k in pk:
        # least-squares parabola through the log spectrum over ±half_width bins (a noisy
        # Welch estimate shifts a three-point vertex by a bin or more); its vertex
        j = np.arange(max(k - half_width, 0), min(k + half_width + 1, f.size))
        c2, c1, _ = np.polyfit(j - k, logS[j], 2)
        off = -c1 / (2 * c2) if c2 < 0 else 0.0
        out.append(f[k] + np.clip(off, -half_width, half_width) * (f[1] - f[0]))
    return np.array(out)

def frequency_model(parts, modes):
    """Callable θ -> (f (nm,) [Hz], df/dθ (nm, p)) for the 1-based ``modes``."""
    idx = np.asarray(modes, int) - 1

    def fn(theta):
        M, K, dM, dK = matrices(parts, np.asarray(theta, float))
        w2, Phi = modal(M, K)
        w2, Phi = w2[idx], Phi[:, idx]
        w = np.sqrt(np.maximum(w2, 0.0))
        # dω²_r/dθ_j = φ_rᵀ (dK_j - ω_r² dM_j) φ_r
        dw2 = (np.einsum("nr,pnm,mr->rp", Phi, dK, Phi)
               - w2[:, None] * np.einsum("nr,pnm,mr->rp", Phi, dM, Phi))
        f = w / (2 * np.pi)
        return f, dw2 / (2 * w[:, None]) / (2 * np.pi)
    return fn


def calibrate_frequencies(setup, f_hat, settings, modes=None, tol: float = 1e-8):
    """VB on the relative frequency residuals; returns (VBResult, transforms)."""
    f_hat = np.asarray(f_hat, float)
    modes = list(range(1, f_hat.size + 1)) if modes is None else list(modes)
    fm = frequency_model(setup.pm.parts, modes)
    tr = [p.transform for p in settings.priors]
    m0 = np.array([p.mean for p in settings.priors])
    L0 = np.diag(1.0 / np.array([p.std for p in settings.priors]) ** 2)

    def model_error(xi):
        th = np.array([t.to_theta(x) for t, x in zip(tr, xi)])
        dth = np.array([t.dtheta_dxi(x) for t, x in zip(tr, xi)])
        f, df = fm(th)
        return [(f - f_hat) / f_hat], [df * dth[None, :] / f_hat[:, None]]

    res = variational_bayes(model_error, m0, L0, [NoiseGroup.vague("frequencies")], tol=tol)
    return res, tr
