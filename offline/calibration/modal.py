"""Output-only calibration through identified natural frequencies (operational records).

A small identifier instead of an OMA library (pyoma-2 pulls a GUI/plotting stack; two modes
of a lightly damped structure under broadband excitation need only this): Welch spectra of
every channel, normalised and summed; the most prominent peaks in ``f_range``; each refined
by the vertex of a least-squares parabola through the log spectrum over ±3 bins.

Plausibility (:func:`identify_modes`): a candidate peak is a mode only when it is STABLE (a
peak within ±2 bins or ±1 % of it in the spectra of half and twice the segment length and, when the
record holds four segments, of each half of the record: a resonance stays where it is, a
peak of the estimate's noise moves) and its DAMPING is
plausible: the half-power bandwidth Δf of the spectrum, less the Hann window's own
half-power width (1.44 bins) in quadrature, ζ = Δf / (2 f0) (not resolved, nan, when Δf is
under 3 bins: a longer ``nperseg`` resolves lighter damping), must be found
(both half-power points within ±20 % of f0) and below ``max_zeta`` (0.2; a wider hump is a
band edge of the load, not a mode). Dropped peaks are returned with the reason.

Residual for VB: k_r = (f_r(θ) - f̂_r) / f̂_r with the EXACT Jacobian of the parametric model's
eigenvalues, dω²_r/dθ_j = φ_rᵀ (dK̂_j - ω²_r dM̂_j) φ_r (mass-normalised φ_r).
"""

from __future__ import annotations

import numpy as np

from edge.inverse import modal
from offline._deps import need
from offline.calibration.bilinear import matrices
from offline.calibration.forward import damped_matrices
from offline.calibration.noise import NoiseGroup
from offline.calibration.vb import variational_bayes


def _spectrum(Y, dt, nperseg):
    """(f, summed normalised Welch spectrum) of (nt, nch) samples."""
    sig = need("scipy.signal")
    f, P = sig.welch(Y - Y.mean(axis=0), fs=1.0 / dt, nperseg=min(nperseg, Y.shape[0]), axis=0)
    return f, (P / np.maximum(P.max(axis=0), 1e-300)).sum(axis=1)


def _peaks(f, S, lo, hi, prominence=1.0):
    """(bins, prominences in log) of the spectrum's peaks in [lo, hi]."""
    sig = need("scipy.signal")
    logS = np.log(np.maximum(S, 1e-300))
    pk, _ = sig.find_peaks(logS, prominence=prominence)
    pk = pk[(f[pk] >= lo) & (f[pk] <= hi) & (pk > 0) & (pk < f.size - 1)]
    return pk, (sig.peak_prominences(logS, pk)[0] if pk.size else np.zeros(0))


def _vertex(f, S, k, half_width):
    """Peak frequency: vertex of a least-squares parabola through log S over ±half_width
    bins (a noisy Welch estimate shifts a three-point vertex by a bin or more)."""
    logS = np.log(np.maximum(S, 1e-300))
    j = np.arange(max(k - half_width, 0), min(k + half_width + 1, f.size))
    c2, c1, _ = np.polyfit(j - k, logS[j], 2)
    off = -c1 / (2 * c2) if c2 < 0 else 0.0
    return f[k] + np.clip(off, -half_width, half_width) * (f[1] - f[0])


def half_power_damping(f, S, f0):
    """ζ from the half-power bandwidth around ``f0`` (module docstring), or None when a
    half-power point is not found within ±20 % of f0. A peak narrower than the window's
    main lobe gives 0 (lighter damping than the segment resolves)."""
    df = f[1] - f[0]
    k = int(np.argmin(np.abs(f - f0)))
    half = 0.5 * S[k]
    a = k
    while a > 0 and S[a] > half and f[a] > 0.8 * f0:
        a -= 1
    b = k
    while b < f.size - 1 and S[b] > half and f[b] < 1.2 * f0:
        b += 1
    if S[a] > half or S[b] > half:
        return None
    # linear interpolation of the half-power crossings
    fa = f[a] + (half - S[a]) / (S[a + 1] - S[a]) * df
    fb = f[b - 1] + (S[b - 1] - half) / (S[b - 1] - S[b]) * df
    bw2 = (fb - fa) ** 2 - (1.44 * df) ** 2          # Hann main lobe's half-power width
    # a bandwidth under 3 bins is not resolved: 0 (lighter than the segment can tell)
    return float(np.sqrt(bw2) / (2 * f0)) if fb - fa >= 3 * df else 0.0


def identify_modes(Y, dt: float, n_modes: int, f_range=(0.0, None), nperseg: int = 1024,
                   half_width: int = 3, max_zeta: float = 0.2):
    """Natural frequencies and damping ratios of the ``n_modes`` most prominent peaks that
    pass the plausibility checks (module docstring).

    Parameters
    ----------
    Y : (nt, nch) responses;  dt : sample interval [s];  f_range : (lo, hi or None) [Hz]

    Returns
    -------
    f : (n_modes,) [Hz] ascending;  zeta : (n_modes,) (nan: not resolved)
    dropped : list of (f [Hz], reason) of the candidates rejected on the way
    """
    Y = np.atleast_2d(np.asarray(Y, float))
    if Y.shape[0] < 8:
        raise ValueError(f"output-only record too short ({Y.shape[0]} samples)")
    N = min(nperseg, Y.shape[0])
    f, S = _spectrum(Y, dt, N)
    lo, hi = f_range[0], f_range[1] if f_range[1] is not None else f[-1]
    pk, prom = _peaks(f, S, lo, hi)
    nt = Y.shape[0]
    others = [(f"{n}-sample segments", _spectrum(Y, dt, n)) for n in (N // 2, 2 * N)
              if 32 <= n <= nt // 2]
    if nt // 2 >= 2 * N:       # each half of the record on its own, as another record
        others += [(f"{w} half of the record", _spectrum(Y[sl], dt, N))
                   for w, sl in (("first", slice(0, nt // 2)), ("second", slice(nt // 2, None)))]
    kept, dropped = [], []
    for k in pk[np.argsort(prom)[::-1]]:
        f0 = _vertex(f, S, k, half_width)
        # stable: a peak within 2 bins (of the coarser grid) or 1 % in every other spectrum
        moved = []
        for what, (fo, So) in others:
            po, _ = _peaks(fo, So, lo, hi, prominence=0.5)
            tol = max(2 * max(fo[1] - fo[0], f[1] - f[0]), 0.01 * f0)
            if not np.any(np.abs(fo[po] - f0) <= tol):
                moved.append(what)
        if moved:
            dropped.append((float(f0), f"not stable: no peak near it with {', '.join(moved)}"))
            continue
        z = half_power_damping(f, S, f0)
        if z is None or z > max_zeta:
            dropped.append((float(f0), "damping not plausible: " + (
                "no half-power point within 20 % (a hump, not a resonance)" if z is None
                else f"zeta {z:.3f} > {max_zeta}")))
            continue
        kept.append((float(f0), z if z > 0 else np.nan))
        if len(kept) == n_modes:
            break
    if len(kept) < n_modes:
        why = "; ".join(f"{a:.1f} Hz {r}" for a, r in dropped)
        raise ValueError(f"found {len(kept)} plausible mode(s) in {lo:g}-{hi:g} Hz, need "
                         f"{n_modes}" + (f" (dropped: {why})" if why else ""))
    kept.sort()
    return (np.array([a for a, _ in kept]), np.array([b for _, b in kept]), dropped)


def identify_frequencies(Y, dt: float, n_modes: int, f_range=(0.0, None), nperseg: int = 1024,
                         half_width: int = 3):
    """Natural frequencies [Hz] (n_modes,) ascending, from response records (nt, nch): the
    plausible modes of :func:`identify_modes`."""
    return identify_modes(Y, dt, n_modes, f_range, nperseg, half_width)[0]

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


def damping_model(parts, modes):
    """Callable θ -> modal damping ratios ζ_r = φ_rᵀ Ĉ φ_r / (2 ω_r) (nm,) of the parametric
    model (Rayleigh damping: exactly modal) for the 1-based ``modes``."""
    idx = np.asarray(modes, int) - 1

    def fn(theta):
        M, C, K, *_ = damped_matrices(parts, np.asarray(theta, float))
        w2, Phi = modal(M, K)
        return np.einsum("ir,ij,jr->r", Phi[:, idx], C, Phi[:, idx]) / (2 * np.sqrt(w2[idx]))
    return fn


def calibrate_frequencies(setup, f_hat, settings, modes=None, tol: float = 1e-8,
                          zeta_hat=None, h: float = 1e-6):
    """VB on the relative frequency residuals and, with ``zeta_hat`` (nm,; nan: not resolved)
    and a ``damping_ratio`` parameter, on the relative damping residuals of the resolved
    modes (a noise group of their own; Jacobian by central differences, step ``h`` in ξ).
    Returns (VBResult, transforms)."""
    f_hat = np.asarray(f_hat, float)
    modes = list(range(1, f_hat.size + 1)) if modes is None else list(modes)
    fm = frequency_model(setup.pm.parts, modes)
    tr = [p.transform for p in settings.priors]
    m0 = np.array([p.mean for p in settings.priors])
    L0 = np.diag(1.0 / np.array([p.std for p in settings.priors]) ** 2)
    kinds = [p.kind for p in setup.parameters]
    z_hat = np.full(f_hat.size, np.nan) if zeta_hat is None else np.asarray(zeta_hat, float)
    ok = np.isfinite(z_hat) & (z_hat > 0)
    use_z = "damping_ratio" in kinds and ok.any()
    zm = damping_model(setup.pm.parts, np.asarray(modes)[ok]) if use_z else None

    def theta(xi):
        return np.array([t.to_theta(x) for t, x in zip(tr, xi)])

    def model_error(xi):
        th = theta(xi)
        dth = np.array([t.dtheta_dxi(x) for t, x in zip(tr, xi)])
        f, df = fm(th)
        k, J = [(f - f_hat) / f_hat], [df * dth[None, :] / f_hat[:, None]]
        if use_z:
            # k_r = (ζ_r(θ) - ζ̂_r) / ζ̂_r; dk/dξ_j by central differences
            k.append((zm(th) - z_hat[ok]) / z_hat[ok])
            E = np.eye(xi.size) * h
            J.append(np.column_stack([(zm(theta(xi + e)) - zm(theta(xi - e))) / (2 * h)
                                      for e in E]) / z_hat[ok][:, None])
        return k, J

    groups = [NoiseGroup.vague("frequencies")] + ([NoiseGroup.vague("damping")] if use_z else [])
    # converged also when the next step moves every mean by < 1 % of its posterior std (as the
    # time-domain route): F of a near-exact fit changes by round-off, never below tol
    res = variational_bayes(model_error, m0, L0, groups, tol=tol, step_tol=settings.step_tol)
    return res, tr
