"""Minimum-phase spectral factor of a matrix spectral density on a DFT grid (Wilson, 1972).

For a stationary vector process ``y`` with spectral density ``Phi(theta)`` (``m x m``,
Hermitian, positive definite at every bin), find the causal, minimum-phase ``psi`` with::

    Phi(theta) = psi(theta) psi(theta)^H,    psi(theta) = sum_{j >= 0} A_j e^(-i j theta)

``w = psi^-1(q) y`` is then the normalised innovation of ``y`` (white, unit covariance, and
``w_k`` is a causal function of ``y_{<=k}`` and vice versa), the object every causal and
fixed-lag Wiener filter is built on (Kailath, Sayed, Hassibi, *Linear Estimation*, 2000,
ch. 7-8).

Wilson's Newton iteration (G. T. Wilson, "The factorization of matricial spectral
densities", SIAM J. Appl. Math. 23 (1972) 420-426; the form of Dhamala, Rangarajan, Ding,
Phys. Rev. Lett. 100 (2008) 018701)::

    g     = psi^-1 Phi psi^-H + I
    psi  <- psi [g]_+

with ``[g]_+`` the causal part of ``g`` (lags 1.. kept; of lag 0 the strict lower triangle
and half the diagonal, :func:`_causal_part`, so the lag-0 coefficient of ``psi`` stays lower
triangular). At the fixed point
``psi^-1 Phi psi^-H = I``. Convergence is quadratic near the solution.

Everything is on the ``n``-point circle: ``theta_k = 2 pi k / n``, numpy's FFT conventions
(``A_j = ifft(psi)[j]``; lags ``j >= n/2`` stand for ``j - n``). The grid must be long
enough for the factor's impulse response to decay within ``n / 2`` samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class SpectralFactor:
    """Result of :func:`spectral_factor`.

    Attributes
    ----------
    psi : complex ndarray, shape (n, m, m)
        The factor on the full grid.
    iterations : int
    residual : float
        ``max_k ||psi psi^H - Phi||_F / ||Phi||_F`` at the end.
    converged : bool
        The change fell below ``tol``, or the residual below ``accept``.
    """

    psi: np.ndarray
    iterations: int
    residual: float
    converged: bool


def _causal_part(g: np.ndarray) -> np.ndarray:
    """``[g]_+``: lags ``1 .. n/2`` kept, negative lags zeroed, and of lag 0 the strict lower
    triangle and half the diagonal, so that ``[g]_+ + [g]_+^H = g`` for a Hermitian ``g``
    (the Newton step of ``Phi = psi psi^H``); back on the grid."""
    n = g.shape[0]
    beta = np.fft.ifft(g, axis=0)
    b0 = beta[0]
    beta[0] = np.tril(b0, -1) + 0.5 * np.diag(np.real(np.diagonal(b0)))
    beta[n // 2 + 1:] = 0.0
    return np.fft.fft(beta, axis=0)


def spectral_factor(Phi: np.ndarray, tol: float = 1e-10, max_iter: int = 100,
                    accept: float = 1e-3) -> SpectralFactor:
    """Wilson's minimum-phase factor of ``Phi`` (module docstring).

    Parameters
    ----------
    Phi : complex ndarray, shape (n, m, m)
        Spectral density on the full ``n``-point grid (``sum_k Phi_k / n`` = lag-0
        covariance), Hermitian positive definite at every bin.
    tol : float
        Stop when the relative change of ``psi`` (max over bins) falls below ``tol``; the
        iteration also stops when a change below 1e-3 no longer halves in three iterations.
    max_iter : int
    accept : float
        ``converged`` is also True when it stopped with ``residual < accept``.

    Returns
    -------
    SpectralFactor
    """
    Phi = np.asarray(Phi, dtype=complex)
    if Phi.ndim != 3 or Phi.shape[1] != Phi.shape[2]:
        raise ValueError(f"Phi: expected shape (n, m, m), got {Phi.shape}")
    if not np.all(np.isfinite(Phi)):
        raise ValueError("Phi: non-finite spectral density")
    n, m, _ = Phi.shape
    eye = np.eye(m)
    # start: a constant factor of the lag-0 covariance, gamma_0 = L L^T (lower Cholesky)
    gamma0 = np.real(np.fft.ifft(Phi, axis=0)[0])
    gamma0 = 0.5 * (gamma0 + gamma0.T)
    psi = np.broadcast_to(np.linalg.cholesky(gamma0).astype(complex), (n, m, m)).copy()
    change, it, history = np.inf, 0, []
    for it in range(1, max_iter + 1):
        psi_inv = np.linalg.inv(psi)
        # g = psi^-1 Phi psi^-H + I
        g = psi_inv @ Phi @ np.conj(np.transpose(psi_inv, (0, 2, 1))) + eye
        new = psi @ _causal_part(g)
        change = float(np.max(np.abs(new - psi)) / np.max(np.abs(new)))
        psi = new
        history.append(change)
        # converged, or stagnant: a spectrum with edges (an ideal band) has a factor whose
        # impulse response outlives n / 2; the iteration then settles at that truncation
        # level, which the residual below reports
        if change < tol or (change < 1e-3 and len(history) > 4 and change > 0.5 * history[-4]):
            break
    rec = psi @ np.conj(np.transpose(psi, (0, 2, 1)))
    res = float(np.max(np.linalg.norm(rec - Phi, axis=(1, 2))
                       / np.linalg.norm(Phi, axis=(1, 2))))
    return SpectralFactor(psi=psi, iterations=it, residual=res,
                          converged=change < tol or res < accept)
