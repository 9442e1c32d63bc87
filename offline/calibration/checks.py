"""Cross-checks of a VB calibration: MCMC (emcee) and the k-fold model-inadequacy test.

MCMC target: the exact posterior of ξ with the noise precisions integrated out against their
Gamma priors (likelihood weight w included)::

    log p(ξ | y) = -½ (ξ - m₀)ᵀ Λ₀ (ξ - m₀) - Σᵢ (c₀ + wᵢNᵢ/2) log(1/s₀ + wᵢ/2 kᵢ(ξ)ᵀkᵢ(ξ)) + const

Inadequacy test (paper 001 Sect. 4, Algorithm 1 with the test of its ref. [12]): k-fold by
input, never by time: the groups are independent records (or blocks of one long record, each
longer than five decay times of the first mode) each split into a band below and above the
geometric mean of the first two natural frequencies (:mod:`offline.calibration.folds`: the
bands are records of different admissible inputs; records with one force spectrum alone let a
wrong family fit every record the same wrong way). For each group r: calibrate on the other
groups (ξ_a, C_a) and on r alone (ξ_b, C_b); under the hypothesis that one parameter set
explains every record to within the model's own fidelity (a discretised, reduced model is not
exact: a relative ``tolerance``, 0.5 % of each parameter by default, C_ε of
:func:`fidelity_cov`), T = (ξ_a - ξ_b)ᵀ (C_a + C_b + C_ε)⁻¹ (ξ_a - ξ_b) is χ²(p); its upper
tail probability is the fold's p-value.
The family fails when any fold rejects; the paper argues that disjoint validation sets need no
multiple-testing correction, but the decision "any of k folds below α" rejects a right family
with a probability up to 1 - (1 - α)ᵏ (18.5 % for four folds at 5 %), so the family's p-value is
Bonferroni's min(1, k α_min) and ``alpha`` is the probability of rejecting a right family.

The test is only as good as the fits: a fit stuck in a local optimum (a mode off by more than its
half-power bandwidth) reads as a broad tempered posterior and hides the contradiction. Every
fit of the test is therefore also started from the natural frequencies identified in its
groups (:func:`frequency_start`) and the better of the two (weight-free profile misfit) kept.
T ~ χ²(p) needs near-Gaussian posteriors: a fold whose fits have a nonlinearity measure (paper
003 eq. 18) above 0.5 (the limit above which the edge refuses a calibration) is inconclusive
and left out of the decision (five damage zones seen by two sensors: one band leaves two zones
on a curved ridge, measure ~1, and T read the jump along it as a contradiction).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from edge.inverse import MAX_NONLINEARITY  # a fold whose fits exceed it is inconclusive
from offline._deps import MissingDependency, need
from offline.calibration.calibrate import calibrate
from offline.calibration.folds import fold_groups
from offline.calibration.modal import frequency_model, identify_frequencies
from offline.calibration.noise import NoiseGroup
from offline.calibration.vb import variational_bayes

TOLERANCE = 0.005   # relative fidelity of a discretised, reduced model's parameters (fidelity_cov)


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


def _misfit(res) -> float:
    """Profile objective of a fit, weight-free (the noise precisions profiled out):
    Σᵢ ½ Nᵢ log(kᵢᵀkᵢ / Nᵢ) + ½ (m - m₀)ᵀ Λ₀ (m - m₀); lower is better. Compares fits of the
    same data from different starts (their free energies carry different likelihood weights)."""
    p = res.problem
    k, _ = p.residuals(res.vb.m, jac=False)
    d = res.vb.m - p.m0
    return float(sum(0.5 * kk.size * np.log(max(kk @ kk, 1e-300) / kk.size) for kk in k)
                 + 0.5 * d @ p.L0 @ d)


def frequency_start(setup, settings, groups, bands=None, f_split=None, nextra: int = 0):
    """ξ matched to the natural frequencies identified in the groups' responses (mode 1 from
    the bands below ``f_split``, mode 2 from those above; without bands modes 1 and 2 over the
    whole range): a start near the global optimum for stiffness parameters, whose time-domain
    misfit has a local optimum wherever a mode is off by more than its half-power bandwidth.
    ``bands``: "below"/"above" per group (None without bands); ``nextra``: zeros appended (the
    sensor offsets' ξ). None when no peak is found."""
    dt = groups[0].dt
    fs, modes = [], []
    try:
        if f_split is None:
            f = np.mean([identify_frequencies(g.Y[g.used], dt, 2) for g in groups], axis=0)
            fs, modes = list(f), [1, 2]
        else:
            for mode, tag, rng in ((1, "below", (1.0, f_split)), (2, "above", (f_split, None))):
                sel = [g for g, b in zip(groups, bands) if b == tag]
                if sel:
                    fs.append(np.mean([identify_frequencies(g.Y[g.used], dt, 1, rng)[0]
                                       for g in sel]))
                    modes.append(mode)
        f_hat = np.array(fs)
        fm = frequency_model(setup.pm.parts, modes)
        tr = [p.transform for p in settings.priors]
        m0 = np.array([p.mean for p in settings.priors])
        L0 = np.diag(1.0 / np.array([p.std for p in settings.priors]) ** 2)

        def k_rel(xi):
            th = np.array([t.to_theta(x) for t, x in zip(tr, xi)])
            dth = np.array([t.dtheta_dxi(x) for t, x in zip(tr, xi)])
            f, df = fm(th)
            return [(f - f_hat) / f_hat], [df * dth[None, :] / f_hat[:, None]]
        # relative frequency error known to ~0.1 % (a Welch peak's vertex): a fixed precision,
        # so one frequency moves the parameters (a learned noise level would not)
        res = variational_bayes(k_rel, m0, L0, [NoiseGroup("frequencies", fixed=1e6)], tol=1e-8)
    except (ValueError, np.linalg.LinAlgError):
        return None
    return np.concatenate([res.m, np.zeros(nextra)])


def _fit(setup, settings, groups, bands, f_split, m_init=None):
    """Calibration of ``groups`` from ``m_init`` (None: the prior mean) and from the frequency
    start; the fit with the lower :func:`_misfit` (module docstring: the test is only as
    good as the fits, and a fit stuck in a local optimum reads as a broad posterior)."""
    best = calibrate(setup, None, settings, records=groups, m_init=m_init)
    nextra = best.vb.m.size - best.problem.nmodel
    xf = frequency_start(setup, settings, groups, bands, f_split, nextra)
    if xf is not None and np.max(np.abs(xf - best.vb.m) / best.vb.std) > 1.0:
        other = calibrate(setup, None, settings, records=groups, m_init=xf)
        if _misfit(other) < _misfit(best):
            best = other
    return best


def fidelity_cov(problem, xi, tolerance: float) -> np.ndarray:
    """Covariance on ξ (p, p) of the model's own fidelity: each of the two fits may be off by a
    relative ``tolerance`` of its parameter's scale s (θ for moduli, springs, damping ratios,
    masses; the remaining stiffness 1 - ω for a damage zone), Δξ = tolerance s / |dθ/dξ|;
    two independent fits: C = 2 diag(Δξ²)."""
    dx = []
    for t, x in zip(problem.transforms, xi):
        th, g = float(t.to_theta(x)), abs(float(t.dtheta_dxi(x)))
        s = (1.0 - th) if t.kind == "damage" else abs(th)
        dx.append(tolerance * max(s, 1e-12) / max(g, 1e-300))
    return 2.0 * np.diag(np.square(dx))


def kfold_inadequacy(setup, records, settings, alpha: float = 0.05, progress: bool = False,
                     paths=None, bands: bool = True, tolerance: float = TOLERANCE) -> dict:
    """Paper 001 k-fold test (module docstring) over the groups of
    :func:`offline.calibration.folds.fold_groups`: independent records (or blocks of one long
    record) x frequency bands. ``paths``: the records' files, for the overlap check.

    ``tolerance``: the model's relative fidelity (:func:`fidelity_cov`).

    Returns {alpha, folds (per group: T, dof, p_value, nonlinearity, conclusive, θ of both
    fits), p_min, p_family (Bonferroni over the k conclusive folds: min(1, k min p)), passed
    (p_family >= alpha), conclusive (any conclusive fold), tolerance, plan}."""
    from scipy.stats import chi2

    groups, plan = fold_groups(setup, records, settings, paths=paths, bands=bands)
    if progress:
        print(f"  {len(groups)} groups: " + ", ".join(plan["groups"]), flush=True)
    tags, fsp = plan["bands"], plan["f_split"]
    # each fit starts at the prior mean and at its frequency start (_fit), not from the
    # screen of starting points: the figures of the test were measured so, at a third of the
    # cost; the folds' posteriors are compared as the test measured them, without the
    # profiles of offline.calibration.identify (a widened fold posterior would weaken T), and
    # without the discretisation check: the forward model's own error is common to both fits
    # of a fold (it cancels in their difference); the fidelity floor Cε is the test's margin
    settings = replace(settings, multistart=False, identifiability=False, discretisation=False)
    folds = []
    for i, rec in enumerate(groups):
        rest = [r for j, r in enumerate(groups) if j != i]
        a = _fit(setup, settings, rest, tags[:i] + tags[i + 1:], fsp)
        # the held-out group from the others' posterior mean (and its own frequency start)
        b = _fit(setup, settings, [rec], [tags[i]], fsp, m_init=a.vb.m)
        npar = a.problem.nmodel
        d = a.vb.m[:npar] - b.vb.m[:npar]
        S = (a.vb.cov[:npar, :npar] + b.vb.cov[:npar, :npar]
             + fidelity_cov(a.problem, 0.5 * (a.vb.m + b.vb.m)[:npar], tolerance))
        T = float(d @ np.linalg.solve(S, d))
        pval = float(chi2.sf(T, npar))
        # T ~ χ² needs Gaussian posteriors: the nonlinearity measure (paper 003 eq. 18) of
        # either fit above the edge's limit makes the fold inconclusive
        nl = float(max(np.max(a.nonlinearity[:npar]), np.max(b.nonlinearity[:npar])))
        folds.append({"validation": rec.name, "T": T, "dof": npar, "p_value": pval,
                      "nonlinearity": nl, "conclusive": bool(nl <= MAX_NONLINEARITY),
                      "theta_calibration": a.theta[:npar].tolist(),
                      "theta_validation": b.theta[:npar].tolist()})
        if progress:
            print(f"  fold {i + 1}/{len(groups)} (validate on {rec.name}): T = {T:.3g}, "
                  f"p = {pval:.3g}" + ("" if nl <= MAX_NONLINEARITY else
                                       f" (inconclusive: nonlinearity {nl:.2f})"), flush=True)
    used = [f["p_value"] for f in folds if f["conclusive"]]
    pmin = min(f["p_value"] for f in folds)
    # the family fails when ANY conclusive fold rejects: Bonferroni keeps P(reject a right
    # family) <= alpha; no conclusive fold: the test cannot judge the family (passed, and
    # "conclusive": false says so)
    pfam = min(1.0, len(used) * min(used)) if used else 1.0
    return {"alpha": alpha, "folds": folds, "p_min": pmin, "p_family": pfam,
            "passed": bool(pfam >= alpha), "conclusive": bool(used), "tolerance": tolerance,
            "plan": plan}
