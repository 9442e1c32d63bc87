"""Design of the joint input-state fixed-lag Kalman smoother (offline; scipy allowed).

The reduced model in modal coordinates, each force the output of a stochastic shaping filter
driven by white noise, discretised exactly (Van Loan), and the steady-state gains from the
discrete algebraic Riccati equation. The edge runs the fixed linear recursion of
:mod:`edge.estimator.smoother` with these gains; docs/estimator.md has the derivation.

Continuous model (per force j a shaping filter ``xi_j' = Af_j xi_j + Bf_j w_j``,
``f_j = Cf_j xi_j``, ``E[w_j(t) w_j(s)] = qc_j delta(t - s)``)::

    q''  = -W2 q - Ct q' + Phi^T B Cf xi  (+ model-error noise on q')
    xi'  = Af xi + Bf w
    y    = H x + v,   E[v v^T] = R = diag(1 / channel_weight)

State ``x = [q_1, qd_1, ..., q_n, qd_n, xi]`` (the edge kernel's layout: 2x2 modal blocks,
then the force-model states; the modes couple to the force states only).

The force models it is designed for are :mod:`offline.forcing`'s. Files, by mathematical
object: `van_loan` (exact discretisation), `gains` (state-space model, Riccati, fixed-lag
gains), `model_check` (band pairs), `levels` (gains for a grid of load levels), `attach`
(bundle arrays), `settings` (the one design path from a model file's ``[estimator]``: lag,
model error, model check, load model), `std_scale` (the model's own error in the stated
std, measured on the full-model calibration runs).
"""

from offline.forcing.force_model import FORCE_MODELS, ForceModel
from offline.smoother.attach import attach_smoother, with_load_levels
from offline.smoother.gains import SmootherDesign, design_smoother
from offline.smoother.model_check import band_filters, check_bands
from offline.smoother.settings import (MODEL_ERRORS, SmootherSettings, smoother_bundle,
                                       smoother_from_spec, smoother_settings)
from offline.smoother.van_loan import van_loan

__all__ = ["FORCE_MODELS", "MODEL_ERRORS", "ForceModel", "SmootherDesign", "SmootherSettings",
           "attach_smoother", "band_filters", "check_bands", "design_smoother",
           "smoother_bundle", "smoother_from_spec", "smoother_settings",
           "van_loan", "with_load_levels"]
