"""Starting points of the calibration: the global optimum of a multimodal posterior.

Damage zones make the posterior multimodal: a stiffness loss in one zone is partly mimicked
by losses in its neighbours, and a local search from the prior mean (all zones intact) can stop
with the damage in the wrong zone. The likelihood weights of :mod:`noise` make this worse
when they are measured at the prior mean: the residual there is the unmodelled damage, the
weights come out tiny (N_eff/N ~ 0.01) and the posterior hardly leaves the prior.

The choice here is a screening pass, then a local refinement::

    starts  = {m₀} ∪ {m₀ ± 1.5 σ₀ⱼ eⱼ : j = 1..p} ∪ {ξ ~ N(m₀, Λ₀⁻¹), ``draws`` of them}
    screen  = a few VB iterations from each start, likelihood untempered (w = 1)
    modes   = the screened optima, merged when every coordinate is within 0.25 σ₀,
              ranked by free energy F
    answer  = the full (tempered) calibration from the best mode; the runner-up is refined
              with the same likelihood weights, so the two free energies compare

The one-at-a-time starts are a sensitivity screen: each zone (each parameter) gets a start
where it alone carries the change, so the zone that explains the record is on the table
whatever the prior mean suggests; a damage parameter only gets the + side (the − side, a
stiffer zone, is the prior's tail). The prior draws cover interactions. Why not the other
remedies: a sparse (ARD) prior over zones changes the answer (it shrinks a real damage), and a
tempering schedule needs many more model runs for the same effect; the screen costs
1 + p + ``draws`` short runs and is switched off with ``[bayes] multistart = false`` (the
former single start at the prior mean). With more than ``AXIS_LIMIT`` parameters only the prior
mean and the draws are screened.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offline.calibration.noise import NoiseGroup
from offline.calibration.vb import variational_bayes

AXIS_LIMIT = 12          # more parameters: no one-at-a-time starts
AXIS_STEP = 1.5          # prior stds of a one-at-a-time start
SAME_MODE = 0.25         # prior stds: two optima closer than this in every coordinate merge
CLOSE_F = 3.0            # free-energy gap below which a runner-up is reported as close
                         # (a Bayes factor of e³ ≈ 20, "strong" on Jeffreys' scale)


@dataclass
class Mode:
    """One optimum found by the screen (ξ, its free energy, where it started)."""

    start: str
    m: np.ndarray
    F: float
    converged: bool


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


def screen(prob, starts, max_iter: int = 10, tol: float = 1e-3) -> list:
    """Short untempered VB runs from every start -> distinct :class:`Mode` s, best first."""
    std0 = 1.0 / np.sqrt(np.diag(prob.L0))
    groups = [NoiseGroup.vague(g) for g in prob.group_names]
    found = []
    for label, x in starts:
        try:
            r = variational_bayes(prob.residuals, prob.m0, prob.L0, groups, tol=tol,
                                  max_iter=max_iter, m_init=x)
        except (ValueError, np.linalg.LinAlgError):
            continue     # a start where the model fails (non-finite response): not a mode
        found.append(Mode(label, r.m, float(r.F), bool(r.converged)))
    if not found:
        raise ValueError("calibration: the model failed at every starting point")
    found.sort(key=lambda md: -md.F)
    modes = []
    for md in found:
        if all(np.max(np.abs(md.m - o.m) / std0) >= SAME_MODE for o in modes):
            modes.append(md)
    return modes
