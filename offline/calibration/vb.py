"""Variational Bayes with a linearised model and Gamma noise groups (paper 003 Sect. 3.2).

Model error per noise group i, with the SIGN of paper 003 eq. 16/19 (the first slip the issue
names: eq. 8 prints k = y - g, but eq. 16 only holds for the residual ``k = g(θ) - y``)::

    kᵢ(ξ) = gᵢ(θ(ξ)) - yᵢ ≈ kᵢ(m) + Jᵢ (ξ - m)                         (eq. 9)
    q(ξ) = N(m, Λ⁻¹),   q(Φᵢ) = Ga(sᵢ, cᵢ)                              (eq. 10-11)

Updates (eq. 13-16), iterated until the free energy changes less than ``tol``::

    cᵢ = wᵢ Nᵢ / 2 + cᵢ₀                                                   (13)
    1/sᵢ = 1/sᵢ₀ + wᵢ/2 (kᵢᵀkᵢ + tr(Λ⁻¹ JᵢᵀJᵢ))                             (14)
    Λ = Λ₀ + Σᵢ wᵢ sᵢcᵢ JᵢᵀJᵢ                                              (15)
    Λ m = Λ₀ m₀ + Σᵢ wᵢ sᵢcᵢ Jᵢᵀ (-kᵢ + Jᵢ m_old)                           (16)

with wᵢ the group's likelihood weight (1 by default; see :mod:`noise`). The free energy is
eq. A1 written term by term (the printed A1 has typesetting slips, e.g. "½ tr[Λ⁻¹Λ]"):
F = E_q[log p(y|ξ,Φ)] + E_q[log p(ξ)] + Σ E_q[log p(Φᵢ)] + H[q(ξ)] + Σ H[q(Φᵢ)].
For a linear model with known noise, one update gives the exact posterior and F = log p(y).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from offline._deps import need
from offline.calibration.noise import GammaPosterior

LOG2PI = float(np.log(2.0 * np.pi))
MAX_HALVINGS = 6     # back-tracking: a step shortened below 1/2⁶ of the Gauss-Newton step stops


@dataclass
class VBResult:
    """Posterior of a VB calibration.

    Attributes
    ----------
    m : ndarray, shape (p,)        posterior mean of ξ
    precision : ndarray, (p, p)    Λ
    noise : list of GammaPosterior, one per group
    F : float                      free energy at the returned posterior (≤ log evidence)
    n_evals : int                  model-error evaluations (each with its Jacobian)
    iterations : int
    converged : bool
    history : list of float        F per iteration
    seconds : float
    stop : str                     why the iteration ended: "converged", "max_iter" (the
                                   ``max_iter`` limit) or "backtrack" (the step was halved
                                   ``MAX_HALVINGS`` times without raising F: the linearised
                                   posterior points nowhere better, typically a ridge or a
                                   nonlinear valley; more iterations would not help)
    """

    m: np.ndarray
    precision: np.ndarray
    noise: list
    F: float
    n_evals: int
    iterations: int
    converged: bool
    history: list = field(default_factory=list)
    seconds: float = 0.0
    stop: str = "converged"

    @property
    def cov(self) -> np.ndarray:
        """Λ⁻¹, shape (p, p)."""
        return np.linalg.inv(self.precision)

    @property
    def std(self) -> np.ndarray:
        """Posterior standard deviations sqrt(diag Λ⁻¹) (paper eq. 17 prints Λ_ii^½: the
        covariance, not the precision, is meant)."""
        return np.sqrt(np.diag(self.cov))

    @property
    def corr(self) -> np.ndarray:
        c = self.cov
        d = np.sqrt(np.diag(c))
        return c / np.outer(d, d)


def _as_list(x, n, what):
    if isinstance(x, np.ndarray) and n == 1 and x.ndim <= 2:
        x = [x]
    x = list(x)
    if len(x) != n:
        raise ValueError(f"model error returned {len(x)} {what}, expected one per noise group ({n})")
    return x


def free_energy(m, precision, noise, k, J, m0, precision0, groups) -> float:
    """Variational free energy F (paper 003 eq. A1) under the linearisation at ``m``.

    Parameters
    ----------
    m : (p,) ; precision : (p, p)     q(ξ) = N(m, Λ⁻¹)
    noise : list of GammaPosterior    q(Φᵢ)
    k : list of (Nᵢ,) ; J : list of (Nᵢ, p)   residual kᵢ(m) = gᵢ - yᵢ and its Jacobian
    m0 : (p,) ; precision0 : (p, p)   prior N(m₀, Λ₀⁻¹)
    groups : list of NoiseGroup       priors (shape c₀, scale s₀, fixed, weight)
    """
    sp = need("scipy.special")
    m, m0 = np.asarray(m, float), np.asarray(m0, float)
    L, L0 = np.asarray(precision, float), np.asarray(precision0, float)
    p = m.size
    cL = np.linalg.cholesky(L)
    cov = np.linalg.inv(L)
    logdet_L = 2.0 * np.log(np.diag(cL)).sum()
    logdet_L0 = np.linalg.slogdet(L0)[1]
    F = 0.0
    for q, g, ki, Ji in zip(noise, groups, k, J):
        w = g.weight
        Ni = ki.size
        ElogPhi, EPhi = q.mean_log(), q.mean
        # E[log p(yᵢ|ξ,Φᵢ)] = w Nᵢ/2 (E[log Φᵢ] - log 2π) - w/2 E[Φᵢ] (kᵢᵀkᵢ + tr(Λ⁻¹ JᵢᵀJᵢ))
        F += 0.5 * w * Ni * (ElogPhi - LOG2PI) - 0.5 * w * EPhi * (ki @ ki + np.sum(cov * (Ji.T @ Ji)))
        if not q.fixed:
            # E[log p(Φᵢ)] = (c₀-1) E[log Φ] - E[Φ]/s₀ - c₀ log s₀ - log Γ(c₀)
            F += (g.c0 - 1.0) * ElogPhi - EPhi / g.s0 - g.c0 * np.log(g.s0) - sp.gammaln(g.c0)
            # H[Ga(s, c)] = c + log s + log Γ(c) + (1 - c) ψ(c)
            F += q.c + np.log(q.s) + sp.gammaln(q.c) + (1.0 - q.c) * sp.digamma(q.c)
    d = m - m0
    # E[log p(ξ)] = -p/2 log 2π + ½ log|Λ₀| - ½ ((m-m₀)ᵀΛ₀(m-m₀) + tr(Λ₀ Λ⁻¹))
    F += -0.5 * p * LOG2PI + 0.5 * logdet_L0 - 0.5 * (d @ L0 @ d + np.sum(L0 * cov))
    # H[N(m, Λ⁻¹)] = p/2 (1 + log 2π) - ½ log|Λ|
    F += 0.5 * p * (1.0 + LOG2PI) - 0.5 * logdet_L
    return float(F)


def _noise_update(groups, k, J, cov):
    out = []
    for g, ki, Ji in zip(groups, k, J):
        if g.fixed is not None:
            out.append(GammaPosterior(g.name, s=float(g.fixed), c=1.0, fixed=True))
            continue
        w = g.weight
        # cᵢ = w Nᵢ/2 + cᵢ₀                                                  (eq. 13)
        c = 0.5 * w * ki.size + g.c0
        # 1/sᵢ = 1/sᵢ₀ + w/2 (kᵢᵀkᵢ + tr(Λ⁻¹ JᵢᵀJᵢ))                           (eq. 14)
        s = 1.0 / (1.0 / g.s0 + 0.5 * w * (ki @ ki + np.sum(cov * (Ji.T @ Ji))))
        out.append(GammaPosterior(g.name, s=float(s), c=float(c)))
    return out


def _param_update(m_old, noise, groups, k, J, m0, L0):
    L = L0.copy()
    rhs = L0 @ m0
    for q, g, ki, Ji in zip(noise, groups, k, J):
        e = g.weight * q.mean
        # Λ = Λ₀ + Σ w sᵢcᵢ JᵢᵀJᵢ                                            (eq. 15)
        L += e * (Ji.T @ Ji)
        # Λ m = Λ₀ m₀ + Σ w sᵢcᵢ Jᵢᵀ(-kᵢ + Jᵢ m_old)   (k = g - y)             (eq. 16)
        rhs += e * (Ji.T @ (-ki + Ji @ m_old))
    L = 0.5 * (L + L.T)
    return np.linalg.solve(L, rhs), L


def variational_bayes(model_error, m0, precision0, groups, tol: float = 1e-6,
                      max_iter: int = 50, noise0=None, callback=None, m_init=None,
                      step_tol: float = 0.0) -> VBResult:
    """Calibrate ξ by variational Bayes (module docstring).

    Parameters
    ----------
    model_error : callable ξ (p,) -> (k, J)
        ``k``: list of residuals kᵢ = gᵢ - yᵢ, shape (Nᵢ,), one per noise group; ``J``: list
        of Jacobians dkᵢ/dξ, shape (Nᵢ, p). One call = one model evaluation.
    m0 : (p,)                    prior mean of ξ
    precision0 : (p, p)          prior precision Λ₀
    groups : list of NoiseGroup
    tol : float                  stop when |F - F_prev| < tol (paper: 0.1; the default is tight)
    step_tol : float             also stop when the next step of the mean is below step_tol
                                 posterior stds in every parameter (0: F test only)
    noise0 : list of GammaPosterior, optional   starting noise (default: prior means)
    m_init : (p,), optional      first expansion point (default m0)
    callback : callable (it, F, m) -> None, optional   progress

    Returns
    -------
    VBResult
    """
    t0 = time.perf_counter()
    m0, L0, groups = _prior(m0, precision0, groups)
    p = m0.size
    m = m0.copy() if m_init is None else np.asarray(m_init, float).reshape(p).copy()
    L = L0.copy()
    noise = noise0 or [GammaPosterior(g.name, s=float(g.fixed), c=1.0, fixed=True) if g.fixed
                       else GammaPosterior(g.name, s=g.s0, c=g.c0) for g in groups]
    hist, n_evals, converged, stop = [], 0, False, "max_iter"
    F_best, best, prev_acc = -np.inf, None, None
    shrink, it, m_prop = 1.0, 0, m  # m_prop: the last proposed step (back-tracking target)
    for it in range(1, max_iter + 1):
        k, J = _linearised(model_error, m, groups)
        n_evals += 1
        # q(Φ) for the current q(ξ) and linearisation                          (eq. 13-14)
        noise = _noise_update(groups, k, J, np.linalg.inv(L))
        F = free_energy(m, L, noise, k, J, m0, L0, groups)
        hist.append(F)
        if callback is not None:
            callback(it, F, m)
        if best is not None and F < F_best - max(tol, 1e-12 * abs(F_best)):
            # the linearised step overshot (nonlinear model): back-track towards the best point
            shrink *= 0.5
            if shrink < 0.5 ** MAX_HALVINGS:
                stop = "backtrack"
                break
            m = best[0] + shrink * (m_prop - best[0])
            continue
        if F > F_best:
            F_best, best = F, (m.copy(), L.copy(), list(noise))
        # converged: the step changed F by less than tol, scaled by the step length (a step
        # shortened to s gains about s times a full step near the optimum)
        if prev_acc is not None and abs(F - prev_acc) < tol * shrink:
            converged, stop = True, "converged"
            break
        prev_acc = F
        # q(ξ) update from this linearisation                                   (eq. 15-16)
        m_prop, L = _param_update(m, noise, groups, k, J, m0, L0)
        # step length kept from the last back-tracking: growing it back to a full step made
        # nonlinear problems cycle (full step, overshoot, half step, full step, ...)
        step = shrink * (m_prop - m)
        if np.max(np.abs(step) / np.sqrt(np.diag(np.linalg.inv(L)))) < step_tol:
            # the next step moves the mean by less than step_tol posterior stds
            converged, stop = True, "converged"
            break
        m = m + step
    m, L, noise = best
    return VBResult(m=m, precision=L, noise=noise, F=F_best, n_evals=n_evals, iterations=it,
                    converged=converged, history=hist, seconds=time.perf_counter() - t0, stop=stop)


def _prior(m0, precision0, groups):
    """``(m0, L0, groups)`` as arrays and a list; ValueError for a precision of the wrong
    shape or no noise group."""
    m0 = np.asarray(m0, float).reshape(-1)
    L0 = np.atleast_2d(np.asarray(precision0, float))
    p = m0.size
    if L0.shape != (p, p):
        raise ValueError(f"prior precision has shape {L0.shape}, expected ({p}, {p})")
    groups = list(groups)
    if not groups:
        raise ValueError("at least one noise group is needed")
    return m0, L0, groups


def _linearised(model_error, m, groups):
    """``(k, J)``: the residuals kᵢ (Nᵢ,) and Jacobians Jᵢ (Nᵢ, p) of each noise group at
    ξ = ``m`` (one model evaluation); ValueError names a group whose arrays are non-finite
    or of mismatched length."""
    p = m.size
    k, J = model_error(m)
    k = [np.asarray(x, float).reshape(-1) for x in _as_list(k, len(groups), "residual arrays")]
    J = [np.asarray(x, float).reshape(-1, p) for x in _as_list(J, len(groups), "Jacobians")]
    for g, ki, Ji in zip(groups, k, J):
        if ki.shape[0] != Ji.shape[0] or not (np.all(np.isfinite(ki)) and np.all(np.isfinite(Ji))):
            raise ValueError(f"noise group {g.name!r}: residual/Jacobian non-finite or of "
                             f"mismatched length ({ki.shape[0]} vs {Ji.shape[0]}) at ξ = {m.tolist()}")
    return k, J
