"""Variational Bayes core (paper 003 eq. 13-18, A1) against closed forms and the paper's example."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats

from offline.calibration import (GammaPosterior, NoiseGroup, Transform, free_energy,
                                 nonlinearity_measure, variational_bayes)


def _linear_problem(seed=0, N=40, p=3):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(N, p))
    b = rng.normal(size=N)
    theta = np.array([1.0, -2.0, 0.5])[:p]
    m0 = np.zeros(p)
    R = rng.normal(size=(p, p))
    L0 = R @ R.T + p * np.eye(p)
    return rng, A, b, theta, m0, L0


def test_linear_gaussian_fixed_noise_equals_closed_form():
    rng, A, b, theta, m0, L0 = _linear_problem()
    phi = np.array([4.0, 25.0])                  # two groups: rows 0..19 and 20..39
    sl = [slice(0, 20), slice(20, 40)]
    y = A @ theta + b + np.concatenate([rng.normal(size=20) / np.sqrt(phi[0]),
                                        rng.normal(size=20) / np.sqrt(phi[1])])
    groups = [NoiseGroup("a", fixed=phi[0]), NoiseGroup("b", fixed=phi[1])]

    def model_error(xi):                          # k = g - y (eq. 16 sign)
        r = A @ xi + b - y
        return [r[s] for s in sl], [A[s] for s in sl]

    res = variational_bayes(model_error, m0, L0, groups, tol=1e-12)
    # conjugate closed form: Λ = Λ0 + Σ φ_i A_iᵀA_i, m = Λ⁻¹(Λ0 m0 + Σ φ_i A_iᵀ(y_i - b_i))
    L = L0 + sum(f * A[s].T @ A[s] for f, s in zip(phi, sl))
    m = np.linalg.solve(L, L0 @ m0 + sum(f * A[s].T @ (y[s] - b[s]) for f, s in zip(phi, sl)))
    # exact evidence: y ~ N(A m0 + b, diag(1/φ) + A Λ0⁻¹ Aᵀ) (scipy.stats, independent code)
    D = np.diag(np.concatenate([np.full(20, 1 / phi[0]), np.full(20, 1 / phi[1])]))
    logZ = stats.multivariate_normal(A @ m0 + b, D + A @ np.linalg.inv(L0) @ A.T).logpdf(y)
    assert res.converged and res.n_evals <= 3
    np.testing.assert_allclose(res.m, m, rtol=0, atol=1e-10)
    np.testing.assert_allclose(res.cov, np.linalg.inv(L), rtol=0, atol=1e-10)
    assert abs(res.F - logZ) < 1e-10 * max(1.0, abs(logZ))
    # F <= log Z for any other Gaussian q (Jensen; eq. 7 with KL >= 0)
    noise = [GammaPosterior(g.name, s=g.fixed, c=1.0, fixed=True) for g in groups]
    k, J = model_error(m)
    for _ in range(20):
        mq = m + rng.normal(size=3) * 0.3
        Lq = L @ np.diag(rng.uniform(0.5, 2.0, 3))
        Lq = 0.5 * (Lq + Lq.T) + 0.5 * np.eye(3) * np.abs(np.linalg.eigvalsh(Lq)).max()
        kq, Jq = model_error(mq)
        assert free_energy(mq, Lq, noise, kq, Jq, m0, L0, groups) < logZ


def test_gamma_noise_free_energy_below_quadrature_evidence():
    rng, A, b, theta, m0, L0 = _linear_problem(seed=1, N=30)
    y = A @ theta + b + 0.5 * rng.normal(size=30)
    g = NoiseGroup("all", c0=2.0, s0=1.0)         # proper prior: Ga(scale 1, shape 2)

    def model_error(xi):
        return [A @ xi + b - y], [A]

    res = variational_bayes(model_error, m0, L0, [g], tol=1e-10)

    # log Z = log ∫ N(y; A m0 + b, Φ⁻¹ I + A Λ0⁻¹ Aᵀ) Ga(Φ; c0, s0) dΦ   (1-D quadrature)
    S0 = A @ np.linalg.inv(L0) @ A.T

    def integrand(phi):
        return np.exp(stats.multivariate_normal(A @ m0 + b, np.eye(30) / phi + S0).logpdf(y)
                      + stats.gamma(a=g.c0, scale=g.s0).logpdf(phi) + 60.0)

    Z, _ = integrate.quad(integrand, 1e-6, 60.0, limit=400, points=[2.0, 4.0, 8.0])
    logZ = np.log(Z) - 60.0
    assert res.converged
    assert res.F <= logZ + 1e-9
    # mean-field gap (θ and Φ independent in q, the exact posterior couples them): measured
    # 0.27 nats here
    assert logZ - res.F < 0.5
    # noise precision near the truth 1/0.5² = 4 (30 samples: ±26 % one sigma)
    assert 2.0 < res.noise[0].mean < 7.0


def test_gamma_only_evidence_is_exact():
    """Model independent of ξ: q(Φ) is the exact Gamma posterior and F = log Z, with
    log Z = -N/2 log 2π + log Γ(c0 + N/2) - log Γ(c0) - c0 log s0 + (c0 + N/2) log s_N,
    1/s_N = 1/s0 + ½ Σ r² (Normal with known mean, Gamma precision: closed form)."""
    from scipy.special import gammaln
    rng = np.random.default_rng(2)
    r = 0.3 * rng.normal(size=25)
    g = NoiseGroup("r", c0=3.0, s0=2.0)
    res = variational_bayes(lambda xi: ([r], [np.zeros((25, 1))]), [0.0], [[1.0]], [g], tol=1e-12)
    sN = 1.0 / (1.0 / g.s0 + 0.5 * r @ r)
    logZ = (-12.5 * np.log(2 * np.pi) + gammaln(g.c0 + 12.5) - gammaln(g.c0)
            - g.c0 * np.log(g.s0) + (g.c0 + 12.5) * np.log(sN))
    assert abs(res.F - logZ) < 1e-10 * abs(logZ)
    assert abs(res.noise[0].s - sN) < 1e-12 * sN and res.noise[0].c == g.c0 + 12.5


def test_nonlinearity_measure_orders_paper_appendix_d():
    """Paper 003 Appendix D: y = x (θ0 + θ1² + θ2² + θ3²) + N(0, 1), x = 0, 0.05, ..., 1,
    θ_true = (-4, -1, 1, 4), posterior N(θ_true, diag(1, 2, 1, 1)): L0 = 0, L1 > 1, and
    L1 > L2 > L3 (θ2 is narrower than θ1, θ3 is further from the origin)."""
    rng = np.random.default_rng(3)
    x = np.linspace(0.0, 1.0, 21)
    th_true = np.array([-4.0, -1.0, 1.0, 4.0])

    def g(t):
        return x * (t[0] + t[1] ** 2 + t[2] ** 2 + t[3] ** 2)

    y = g(th_true) + rng.normal(size=21)
    m = th_true
    std = np.sqrt([1.0, 2.0, 1.0, 1.0])
    J = np.outer(x, [1.0, 2 * m[1], 2 * m[2], 2 * m[3]])
    L, n = nonlinearity_measure(lambda t: [g(t) - y], m, std, [g(m) - y], [J])
    assert n == 4 * 6
    assert L[0] < 1e-12                      # linear parameter: exact (round-off only)
    assert L[1] > 1.0                        # the paper: "L_1 > 1"
    assert L[1] > L[2] > L[3] > 0.0          # the paper's ordering


def test_transforms_roundtrip_and_derivative():
    rng = np.random.default_rng(0)
    for t in (Transform("identity"), Transform("log"), Transform("logit", 0.2, 3.0)):
        xi = rng.normal(size=5)
        np.testing.assert_allclose(t.to_xi(t.to_theta(xi)), xi, rtol=0, atol=1e-12)
        h = 1e-6  # central difference: error O(h²) ~ 1e-12 relative
        fd = (t.to_theta(xi + h) - t.to_theta(xi - h)) / (2 * h)
        np.testing.assert_allclose(t.dtheta_dxi(xi), fd, rtol=1e-8)
    with pytest.raises(ValueError, match="θ > 0"):
        Transform("log").to_xi(-1.0)
    with pytest.raises(ValueError, match="transform must be one of"):
        Transform("sqrt")


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="noise group 'acc'.*c0 > 0"):
        NoiseGroup("acc", c0=0.0)
    with pytest.raises(ValueError, match="noise group 'x': residual/Jacobian non-finite"):
        variational_bayes(lambda m: ([np.array([np.nan])], [np.ones((1, 1))]), [0.0], [[1.0]],
                          [NoiseGroup("x", fixed=1.0)])


def test_spectral_weight_is_the_effective_sample_fraction():
    from offline.calibration.noise import spectral_weight
    rng = np.random.default_rng(0)
    rho, n = 0.5, 2000
    ar, white = [], []
    for _ in range(50):
        e = rng.normal(size=n)
        x = np.empty(n)
        x[0] = e[0] / np.sqrt(1 - rho ** 2)
        for i in range(1, n):
            x[i] = rho * x[i - 1] + e[i]
        ar.append((x, np.ones((n, 1))))
        white.append((e, np.column_stack([np.ones(n), np.sin(0.3 * np.arange(n))])))
    # AR(1) residual, parameter acting as an offset (J = 1): Var(Σ k) / (N σ²) is the long-run
    # variance ratio (1 + ρ)/(1 - ρ) = 3 (closed form), so w = 1/3; estimate from 50 x 9
    # Daniell-smoothed periodogram bins: ~5 % std -> 15 % tolerance (measured 0.313)
    w, lam = spectral_weight(ar)
    assert abs(w - 1 / 3) < 0.15 / 3 and abs(lam - 3.0) < 0.45
    # white residual: no inflation in any direction (largest of 2 eigenvalues, measured 1.06)
    w, lam = spectral_weight(white)
    assert w > 0.85 and lam < 1.15
    # too short to estimate: no tempering
    assert spectral_weight([(np.ones(5), np.ones((5, 1)))]) == (1.0, 1.0)
