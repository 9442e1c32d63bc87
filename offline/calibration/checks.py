"""Cross-checks of a VB calibration: MCMC (emcee) and the k-fold model-inadequacy test.

MCMC target: the exact posterior of ξ with the noise precisions integrated out against their
Gamma priors (likelihood weight w included)::

    log p(ξ | y) = -½ (ξ - m₀)ᵀ Λ₀ (ξ - m₀) - Σᵢ (c₀ + wᵢNᵢ/2) log(1/s₀ + wᵢ/2 kᵢ(ξ)ᵀkᵢ(ξ)) + const

Inadequacy test (paper 001 Sect. 4, Algorithm 1 with the test of its ref. [12]): k-fold by
RECORD, never by time. For each record r: calibrate on the other records (ξ_a, C_a) and on r
alone (ξ_b, C_b); under the hypothesis that one parameter set explains every record,
T = (ξ_a - ξ_b)ᵀ (C_a + C_b)⁻¹ (ξ_a - ξ_b) is χ²(p); its upper tail probability is the p-value
α_min. The family fails when any fold's p-value is below ``alpha`` (paper: 5 %; disjoint
validation sets, so no multiple-testing correction, as the paper argues).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from offline._deps import MissingDependency, need
from offline.calibration.calibrate import calibrate


def log_posterior(prob, groups):
    """Callable ξ -> log p(ξ|y) + const (module docstring); -inf where the model fails."""
    L0, m0 = prob.L0, prob.m0

    def f(xi):
        try:
            k, _ = prob.residuals(np.asarray(xi, float), jac=False)
        except (ValueError, np.linalg.LinAlgError, FloatingPointError):
            return -np.inf
        d = xi - m0
        out = -0.5 * d @ L0 @ d
        for g, kk in zip(groups, k):
            if not np.all(np.isfinite(kk)):
                return -np.inf
            # ∫ Φ^{wN/2} e^{-Φ w kᵀk/2} Ga(Φ; c₀, s₀) dΦ ∝ (1/s₀ + w kᵀk/2)^{-(c₀ + wN/2)}
            out -= (g.c0 + 0.5 * g.weight * kk.size) * np.log(1.0 / g.s0 + 0.5 * g.weight * kk @ kk)
        return float(out)
    return f


def mcmc_check(res, steps: int = 1500, burn: int | None = None, seed: int = 0, max_params: int = 6,
               progress: bool = False) -> dict:
    """emcee on the same posterior; compares means (in posterior σ) and standard deviations.

    Returns a dict: mcmc mean/std of ξ, ``max_mean_dev_sigma`` = max |m_mcmc - m_vb| / σ_vb,
    ``std_ratio`` = σ_mcmc / σ_vb per parameter, evaluations, seconds, acceptance.
    """
    try:
        emcee = need("emcee")
    except MissingDependency as exc:
        raise MissingDependency(f"--check mcmc: {exc}") from None
    p = res.vb.m.size
    if p > max_params:
        raise ValueError(f"--check mcmc is for small problems (<= {max_params} parameters), "
                         f"this one has {p}")
    burn = steps // 2 if burn is None else burn
    lp = log_posterior(res.problem, res.groups)
    nw = max(4 * p, 16)
    rng = np.random.default_rng(seed)
    C = res.vb.cov
    start = rng.multivariate_normal(res.vb.m, C, size=nw)
    t0 = time.perf_counter()
    n0 = res.problem.n_evals
    sampler = emcee.EnsembleSampler(nw, p, lp)
    sampler.random_state = np.random.RandomState(seed).get_state()
    sampler.run_mcmc(start, steps, progress=progress)
    chain = sampler.get_chain(discard=burn, flat=True)
    mean, std = chain.mean(axis=0), chain.std(axis=0, ddof=1)
    try:
        tau = sampler.get_autocorr_time(discard=burn, quiet=True)
    except Exception:  # noqa: BLE001 - emcee raises its own error class on short chains
        tau = np.full(p, np.nan)
    return {"method": "emcee", "walkers": nw, "steps": steps, "burn": burn,
            "mean_xi": mean.tolist(), "std_xi": std.tolist(),
            "max_mean_dev_sigma": float(np.max(np.abs(mean - res.vb.m) / res.vb.std)),
            "std_ratio": (std / res.vb.std).tolist(),
            "autocorr_steps": np.asarray(tau, float).tolist(),
            "acceptance": float(np.mean(sampler.acceptance_fraction)),
            "model_evaluations": res.problem.n_evals - n0,
            "seconds": time.perf_counter() - t0}


def kfold_inadequacy(setup, records, settings, alpha: float = 0.05, progress: bool = False) -> dict:
    """Paper 001 k-fold test by record (module docstring). Needs at least two records."""
    from scipy.stats import chi2

    if len(records) < 2:
        raise ValueError("the inadequacy test needs at least two records (k-fold by record)")
    # each fold's search starts at the prior mean (no screen of starting points): the test
    # compares where the records pull the parameters from the same start
    settings = replace(settings, multistart=False)
    folds = []
    for i, rec in enumerate(records):
        rest = [r for j, r in enumerate(records) if j != i]
        a = calibrate(setup, None, settings, records=rest)
        # the held-out record is calibrated from the others' posterior mean (a local search:
        # one record alone may leave the (E, k) ridge ambiguous from the prior mean)
        b = calibrate(setup, None, settings, records=[rec], m_init=a.vb.m)
        npar = a.problem.nmodel
        d = a.vb.m[:npar] - b.vb.m[:npar]
        S = a.vb.cov[:npar, :npar] + b.vb.cov[:npar, :npar]
        T = float(d @ np.linalg.solve(S, d))
        pval = float(chi2.sf(T, npar))
        folds.append({"validation": rec.name, "T": T, "dof": npar, "p_value": pval,
                      "theta_calibration": a.theta[:npar].tolist(),
                      "theta_validation": b.theta[:npar].tolist()})
        if progress:
            print(f"  fold {i + 1}/{len(records)} (validate on {rec.name}): T = {T:.3g}, "
                  f"p = {pval:.3g}", flush=True)
    pmin = min(f["p_value"] for f in folds)
    return {"alpha": alpha, "folds": folds, "p_min": pmin, "passed": bool(pmin >= alpha)}
