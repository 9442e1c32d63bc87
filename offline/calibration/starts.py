"""Starting points of the calibration: the global optimum of a multimodal posterior.

Damage zones make the posterior multimodal: a stiffness loss in one zone is partly mimicked
by losses in its neighbours, and a local search from the prior mean (all zones intact) can stop
with the damage in the wrong zone. The likelihood weights of :mod:`noise` make this worse
when they are measured at the prior mean: the residual there is the unmodelled damage, the
weights come out tiny (N_eff/N ~ 0.01) and the posterior hardly leaves the prior.

The choice here is a screening pass, then a local refinement::

    starts  = {m₀} ∪ {m₀ ± 1.5 σ₀ⱼ eⱼ : j = 1..p} ∪ {ξ ~ N(m₀, Λ₀⁻¹), ``draws`` of them}
    screen  = a trust-region least-squares search from each start, likelihood untempered
              (w = 1), each noise std at its maximum-likelihood value, on the first
              ``screen_s`` seconds of each record; again from the two best (noise refreshed)
    modes   = the screened optima, merged when every coordinate is within 0.25 σ₀,
              ranked by the profile log posterior (:func:`profile_log_posterior`)
    answer  = the best mode searched again on the whole records, then the full (tempered)
              calibration from there; the runner-up is refined with the same likelihood
              weights, so the two free energies compare

The one-at-a-time starts are a sensitivity screen: each zone (each parameter) gets a start
where it alone carries the change, so the zone that explains the record is on the table
whatever the prior mean suggests; a damage parameter only gets the + side (the − side, a
stiffer zone, is the prior's tail). The prior draws cover interactions. Why not the other
remedies: a sparse (ARD) prior over zones changes the answer (it shrinks a real damage), and a
tempering schedule needs many more model runs for the same effect; the screen costs
1 + p + ``draws`` local searches of at most ``screen_iter`` model runs on ``screen_s``
seconds of data, and ``[bayes] multistart = false`` replaces it by a single start at the
prior mean. With more than ``AXIS_LIMIT`` parameters only the prior
mean and the draws are screened.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offline._deps import need

AXIS_LIMIT = 12          # more parameters: no one-at-a-time starts
AXIS_STEP = 1.5          # prior stds of a one-at-a-time start
SAME_MODE = 0.25         # prior stds: two optima closer than this in every coordinate merge
CLOSE_F = 3.0            # free-energy gap below which a runner-up is reported as close
                         # (a Bayes factor of e³ ≈ 20, "strong" on Jeffreys' scale)
REFINE_GAP = 100.0       # screened log-posterior gap beyond which the runner-up is not refined
                         # (tempering scales it by the likelihood weight, >= ~0.01)


@dataclass
class Mode:
    """One optimum found by the screen (where it started, ξ, its log posterior)."""

    start: str
    m: np.ndarray
    F: float          # profile log posterior (profile_log_posterior)


def starting_points(m0, std0, names, kinds, draws: int = 2, seed: int = 0) -> list:
    """[(label, ξ)] per the module docstring; ``kinds`` per parameter (offsets: "offset")."""
    m0, std0 = np.asarray(m0, float), np.asarray(std0, float)
    out = [("prior mean", m0.copy())]
    if len(names) <= AXIS_LIMIT:
        for j, (n, k) in enumerate(zip(names, kinds)):
            if k == "offset":
                continue
            for sgn in ((1.0,) if k == "damage" else (1.0, -1.0)):
                x = m0.copy()
                x[j] += sgn * AXIS_STEP * std0[j]
                out.append((f"{n} {'+' if sgn > 0 else '-'}{AXIS_STEP:g} sd", x))
    rng = np.random.default_rng(seed)
    for i in range(draws):
        out.append((f"prior draw {i + 1}", m0 + std0 * rng.standard_normal(m0.size)))
    return out


def profile_log_posterior(prob, xi, k) -> float:
    """log p(y | ξ) with each group's noise variance at its maximum (σᵢ² = kᵢᵀkᵢ / Nᵢ), plus
    log p(ξ), up to a constant: -Σᵢ Nᵢ/2 log(kᵢᵀkᵢ / Nᵢ) - ½ (ξ - m₀)ᵀ Λ₀ (ξ - m₀)."""
    d = np.asarray(xi, float) - prob.m0
    return float(-sum(0.5 * kk.size * np.log(max(kk @ kk / kk.size, 1e-300)) for kk in k)
                 - 0.5 * d @ prob.L0 @ d)


def _local(prob, x, max_nfev: int, s=None):
    """Trust-region least squares of [kᵢ/σᵢ; R (ξ - m₀)] (RᵀR = Λ₀), σᵢ the rms residual at
    ``x`` (or ``s``): robust where a Gauss-Newton step overshoots (a sharp, untempered
    likelihood of thousands of samples in a nonlinear model). Returns (ξ, log posterior)."""
    opt = need("scipy.optimize")
    R = np.linalg.cholesky(prob.L0).T
    cache = {}

    def kJ(xi, jac):
        # the trial points of the trust region need residuals only; the Jacobian (p more
        # propagations) is computed at accepted points
        key = xi.tobytes()
        if key not in cache or (jac and not cache[key][0]):
            cache.clear()
            cache[key] = (jac, prob.residuals(xi, jac=jac))
        return cache[key][1]

    x = np.asarray(x, float)
    if s is None:
        s = [max(np.sqrt(kk @ kk / kk.size), 1e-300) for kk in kJ(x, False)[0]]
    fun = lambda xi: np.concatenate([kk / si for kk, si in zip(kJ(xi, False)[0], s)]  # noqa: E731
                                    + [R @ (xi - prob.m0)])
    jac = lambda xi: np.vstack([JJ / si for JJ, si in zip(kJ(xi, True)[1], s)] + [R])  # noqa: E731
    x = opt.least_squares(fun, x, jac=jac, method="trf", max_nfev=max_nfev,
                          x_scale=1.0 / np.sqrt(np.diag(prob.L0))).x
    return x, profile_log_posterior(prob, x, kJ(x, False)[0])


def _distinct(found, std0) -> list:
    found = sorted(found, key=lambda md: -md.F)
    modes = []
    for md in found:
        if all(np.max(np.abs(md.m - o.m) / std0) >= SAME_MODE for o in modes):
            modes.append(md)
    return modes


def screen(prob, starts, max_iter: int = 20, keep: int = 2) -> list:
    """A local search from every start (:func:`_local`, at most ``max_iter`` model runs),
    then another with the noise stds refreshed from the ``keep`` best distinct optima
    -> distinct :class:`Mode` s, best first by :func:`profile_log_posterior`."""
    std0 = 1.0 / np.sqrt(np.diag(prob.L0))
    found = []
    for label, x in starts:
        try:
            m, F = _local(prob, np.asarray(x, float), max_iter)
        except (ValueError, np.linalg.LinAlgError):
            continue     # a start where the model fails (non-finite response): not a mode
        found.append(Mode(label, m, F))
    if not found:
        raise ValueError("calibration: the model failed at every starting point")
    modes = _distinct(found, std0)
    for i, md in enumerate(modes[:keep]):
        try:
            m, F = _local(prob, md.m, max_iter)
        except (ValueError, np.linalg.LinAlgError):
            continue
        modes[i] = Mode(md.start, m, F)
    return _distinct(modes, std0)


def polish(prob, x, max_iter: int = 20) -> np.ndarray:
    """ξ of :func:`_local` from ``x`` on ``prob``'s records (x itself where the model fails)."""
    try:
        return _local(prob, np.asarray(x, float), max_iter)[0]
    except (ValueError, np.linalg.LinAlgError):
        return np.asarray(x, float)
