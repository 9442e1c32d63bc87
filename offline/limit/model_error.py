"""The reduced model's own error at each virtual output, against the full model, under the
build's load, and the build's WARNING when it is comparable to the accuracy limit.

The smoother is the best estimator *of its model*: on the portal frame of
benchmarks/strain_cases.py (GMR+, 12 modes) it reached 0.00326 of the strain's std in its own
(reduced) world under the true load, the limit being 0.00327, yet 0.0044 on the full model.
The difference was the reduction: the reduced model's strain 20 mm below the joint differed
from the full model's by 0.29 % of its std (2.5 % statically: GMR+'s correction assumes free
vibration, so the masters' static shapes are not in its basis), while the sensors' differed
by 4e-5. An error of the model adds to the estimate's error in quadrature::

    e^2 ~= limit^2 + d^2,    d^2 = sum_k w_k |H_z(f_k) - H^_z(f_k)|^2 P_k / sum_k w_k |H_z|^2 P_k

with ``H_z`` the full model's transfer (modes + residual flexibility,
:func:`offline.limit.transfer.modal_model`), ``H^_z`` the reduced model's (all its modes,
modal damping ``phi^T C phi`` as the full model's), ``P_k`` the load's power per bin and
``w_k`` the one-sided weights. Above :data:`WARN_RATIO` of the limit (the estimate then at
>= 1.12x its limit) the build says so, with the remedy.
"""

from __future__ import annotations

import numpy as np

from edge.kinds import kind_order
from offline._deps import need
from offline.limit.model import _power
from offline.limit.modal_damping import modal_damping
from offline.limit.transfer import ModalModel
from offline.limit.wiener import half_weights

#: warn when the output's model error d exceeds this share of its accuracy limit: the
#: estimate's error is then sqrt(1 + 0.5^2) = 1.12x the limit or more
WARN_RATIO = 0.5
#: DFT grid of the comparison (0.12 Hz bins at 1,000 samples/s)
N_GRID = 8192


def reduced_modal_model(rm) -> ModalModel:
    """Every mode of a :class:`offline.reduced.ReducedModel`, as a :class:`ModalModel` of
    (forces -> sensors + outputs), modal damping ``c_i = phi_i^T C phi_i`` (the whole
    ``Phi^T C Phi`` where it couples the modes, :mod:`offline.limit.modal_damping`)."""
    lam, Phi = need("scipy.linalg").eigh(rm.reduction.K, rm.reduction.M)
    lam = np.maximum(lam, 0.0)
    c, Ct = modal_damping(Phi, rm.C)
    rows = np.vstack([rm.channel_rows(), rm.output_rows()])
    out = rows @ Phi
    return ModalModel(lam=lam, c=c, Phi_in=(rm.force_matrix().T @ Phi), Phi_out=out,
                      R=np.zeros((out.shape[0], rm.force_matrix().shape[1])), Ct=Ct)


def model_errors(rm, mm, loads, dt: float, n: int = N_GRID):
    """``(e, s)``, each ``(nch + nout,)``, sensors then outputs: the RMS of the reduced
    model's error ``H_z - H^_z`` and the RMS of the full model's response ``H_z`` under
    ``loads`` (module docstring); ``mm`` the full model's ModalModel of (forces -> sensors +
    outputs), ``loads`` ForceSpectrum entries or a load model."""
    spec = rm.spec
    kinds = [kind_order(s.kind) for s in spec.sensors] + [kind_order(o.kind)
                                                          for o in spec.outputs]
    fr = np.fft.rfftfreq(n, dt)
    Hz = mm.transfer(fr, kinds)
    D = Hz - reduced_modal_model(rm).transfer(fr, kinds)
    P = _power(loads, n, dt)
    if P.ndim == 2:  # independent forces: a diagonal power matrix per bin
        P = np.einsum("kj,jl->kjl", P, np.eye(P.shape[1]))
    w = half_weights(n)

    def var(H):  # sum_k w_k diag(H_k P_k H_k^H)
        return w @ np.real(np.einsum("koj,kjl,kol->ko", H, P, np.conj(H)))

    return np.sqrt(var(D)), np.sqrt(var(Hz))


def output_model_error(rm, mm, loads, dt: float, n: int = N_GRID) -> np.ndarray:
    """``(nout,)`` the reduced model's error ``d`` at each output relative to the output's
    std under ``loads`` (:func:`model_errors`)."""
    e, s = model_errors(rm, mm, loads, dt, n)
    nch = len(rm.spec.sensors)
    with np.errstate(invalid="ignore", divide="ignore"):
        return e[nch:] / s[nch:]


def sensor_model_error(rm, mm, loads, dt: float, noise, n: int = N_GRID) -> np.ndarray:
    """``(nch,)`` the reduced model's RMS error at each sensor over the sensor's noise std
    ``noise`` (absolute, :func:`offline.limit.model.noise_std`): the smoother weighs a channel
    by ``1 / noise^2``, so a model error comparable to the noise is read as load. The frame
    of benchmarks/load_user (GMR+, 20 modes) had its midspan velocity sensor 30x its noise
    off (44 % of its std): the force 3.4x its limit where Craig-Bampton with the residual
    vectors reached 1.14x (docs/reduction.md "Which method")."""
    e, _ = model_errors(rm, mm, loads, dt, n)
    nch = len(rm.spec.sensors)
    return e[:nch] / np.asarray(noise, dtype=float)


def model_error_warning(rm, d: np.ndarray, limit: np.ndarray, sensor=None) -> str | None:
    """The WARNING of the sensors whose model error exceeds WARN_RATIO of their noise std
    (``sensor``, :func:`sensor_model_error`) and of the output whose model error ``d``
    exceeds WARN_RATIO of its accuracy ``limit`` (both relative to its std), with the remedy;
    None when neither does."""
    parts = []
    if sensor is not None:
        names = [s.name for s in rm.spec.sensors]
        bad = [i for i, v in enumerate(sensor) if np.isfinite(v) and v > WARN_RATIO]
        if bad:
            i = max(bad, key=lambda j: sensor[j])
            parts.append(f"the reduced model's response at sensor {names[i]} differs from the "
                         f"full model's by {sensor[i]:.3g}x its noise std under the build's "
                         f"load (the estimator reads the difference as load)")
    names = [o.name for o in rm.spec.outputs]
    bad = [i for i in range(len(names))
           if np.isfinite(d[i]) and limit[i] > 0 and d[i] > WARN_RATIO * limit[i]]
    if bad:
        i = max(bad, key=lambda j: d[j] / limit[j])
        parts.append(f"the reduced model's response at output {names[i]} differs from the "
                     f"full model's by {100 * d[i]:.3g} % of its std under the build's load, "
                     f"{d[i] / limit[i]:.3g}x its accuracy limit ({100 * limit[i]:.3g} %): an "
                     f"estimate through this response lies at about "
                     f"{np.sqrt(1 + (d[i] / limit[i]) ** 2):.3g}x the limit or more")
    if not parts:
        return None
    fix = ('set method = "cb+r": its basis holds the masters\' static shapes and GMR+\'s '
           '(docs/reduction.md "Which method")' if rm.reduction.method != "cb+r" else
           "raise modes or add masters at the output's nodes")
    return f"{rm.spec.where('[reduction]')}: " + "; ".join(parts) + f"; {fix}"
