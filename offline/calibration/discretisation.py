"""The forward model's own numerical error in the posterior: a refinement check.

The VB posterior is that of the parameters *of this forward model* given the records: its
width comes from the sensor noise alone (with the likelihood weights of
:func:`offline.calibration.noise.spectral_weight`). The forward model is a discretisation, the
Newmark recursion with ``substeps`` steps per sample and a reduced basis of a few modes; its
error at the true parameters is a deterministic response error that the parameters absorb.
Absorbed, it leaves the residual white at the noise level, so no residual statistic (Birge
ratio, effective sample size) can see it. Measured (two-span strip, 1 % noise, 2 s): the
34-element model at the truth's parameters misses the record by 1.5 % RMS at the sensor,
from its time step (period error ≈ (ωh)²/12: 4e-4 at 176 Hz with 16 sub-steps) and its
6-mode basis (mode 2 1.6e-4 stiff); the calibration moved zone z2 from 0.4 to 0.362 with a
posterior std of 0.004.

The check refines both, ``REFINE_STEPS`` times the sub-steps and twice the basis' modes, and
runs the refined model once at the posterior mean m. With δᵢ = kᵢ,ref(m) - kᵢ(m) the change of
each noise group's residual, the Gauss-Newton step of the refined model from m is::

    Δ = -Λd⁻¹ Σᵢ wᵢ E[Φᵢ] Jᵢᵀ δᵢ,   Λd = Λ₀ + Σᵢ wᵢ E[Φᵢ] JᵢᵀJᵢ        (paper 003 eq. 15-16)

(m itself is the stationary point of the coarse model's objective, so the step is the shift
of the optimum). The shift is a systematic error of unknown sign left in the estimate: it is
added to the covariance as a standard uncertainty, Λ⁻¹ ← Λ⁻¹ + Δ Δᵀ (GUM's treatment of a
correction that is not applied). The mean stays the coarse model's: the calibrated model file
is built with that model's discretisation, and its parameters compensate it (the estimates
with it are those of the true parameters within 0.93-0.98x).

Not covered: the finite-element mesh (the model file's elements are not refined; on the
strip, a truth of 68 elements instead of 34 moved z2 by less than 0.001) and errors of the
records themselves (a force between samples that is not the band-limited one the forward
model assumes).
"""

from __future__ import annotations

import numpy as np

#: sub-steps of the refined forward model, as a multiple of the model's
REFINE_STEPS = 4


def shift(prob, ref, m, groups, noise, k, J):
    """``(Δ (p,), rms)``: the Gauss-Newton shift on ξ of the posterior mean ``m`` when
    ``prob``'s forward model is replaced by the refined one of ``ref`` (module docstring), and
    the RMS of each noise group's residual change δᵢ (in units of the channel's std).

    Parameters
    ----------
    prob, ref : calibrate.Problem   the calibration problem and its refined twin (same
                                    records, parameters and noise groups)
    m : (p,)                        posterior mean of ξ
    groups : list of NoiseGroup     likelihood weights wᵢ
    noise : list of GammaPosterior  q(Φᵢ)
    k, J : lists of (Nᵢ,), (Nᵢ, p)  residuals and Jacobians of ``prob`` at ``m``
    """
    k_ref, _ = ref.residuals(m, jac=False)
    prob.n_evals += ref.n_evals
    ref.n_evals = 0
    e = [g.weight * q.mean for g, q in zip(groups, noise)]
    # Λd = Λ₀ + Σ wᵢ E[Φᵢ] JᵢᵀJᵢ (eq. 15, the data's precision before any widening)
    Ld = prob.L0 + sum(ei * (Ji.T @ Ji) for ei, Ji in zip(e, J))
    # Δ = -Λd⁻¹ Σ wᵢ E[Φᵢ] Jᵢᵀ (kᵢ,ref - kᵢ)                                     (eq. 16)
    g = sum(ei * (Ji.T @ (kr - ki)) for ei, Ji, kr, ki in zip(e, J, k_ref, k))
    rms = [float(np.sqrt(np.mean((kr - ki) ** 2))) for kr, ki in zip(k_ref, k)]
    return np.linalg.solve(0.5 * (Ld + Ld.T), -g), rms


def check(prob, vb, groups, k, J, ref_time, ref_all=None) -> dict:
    """The refinement check of ``vb`` (a VBResult on ``prob``; ``k``, ``J`` at its mean):
    ``ref_time`` refines the time step, ``ref_all`` (None: no richer basis) also the basis.
    Widens ``vb.precision`` in place to (Λ⁻¹ + ΔΔᵀ)⁻¹ and returns what ``posterior.json``
    reports: {"substeps", "modes_refined", "shift" (ξ), "shift_time_step" (ξ, the time step
    alone), "response_change" (RMS of δᵢ per noise group, channel stds), "std_before" (ξ)}."""
    d_time, rms = shift(prob, ref_time, vb.m, groups, vb.noise, k, J)
    d_all = d_time
    if ref_all is not None:
        d_all, rms = shift(prob, ref_all, vb.m, groups, vb.noise, k, J)
    std0 = vb.std
    # Λ⁻¹ + ΔΔᵀ: the shift as a standard uncertainty of the mean
    cov = vb.cov + np.outer(d_all, d_all)
    vb.precision = np.linalg.inv(0.5 * (cov + cov.T))
    return {"substeps": int(ref_time.s.substeps), "modes_refined": ref_all is not None,
            "shift": d_all.tolist(), "shift_time_step": d_time.tolist(),
            "response_change": dict(zip(prob.group_names, rms)), "std_before": std0.tolist()}


def summary(info: dict, names) -> str:
    """One line: the refined model, the largest shift in posterior stds (before the check) and
    that the stds include it."""
    d, s0 = np.abs(info["shift"]), np.asarray(info["std_before"])
    i = int(np.argmax(d / s0))
    what = "time step" + (" and basis" if info["modes_refined"] else "")
    return (f"discretisation check ({what} refined: {info['substeps']} sub-steps"
            + (", twice the modes" if info["modes_refined"] else "") + f"): the posterior mean "
            f"moves by up to {d[i] / s0[i]:.2g} std ({names[i]}; std without the check); the "
            "shift is included in every std")
