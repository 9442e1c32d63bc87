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
from offline.limit.transfer import ModalModel
from offline.limit.wiener import half_weights

#: warn when the output's model error d exceeds this share of its accuracy limit: the
#: estimate's error is then sqrt(1 + 0.5^2) = 1.12x the limit or more
WARN_RATIO = 0.5
#: DFT grid of the comparison (0.12 Hz bins at 1,000 samples/s)
N_GRID = 8192


def reduced_modal_model(rm) -> ModalModel:
    """Every mode of a :class:`offline.reduced.ReducedModel`, as a :class:`ModalModel` of
    (forces -> sensors + outputs), modal damping ``c_i = phi_i^T C phi_i``."""
    lam, Phi = need("scipy.linalg").eigh(rm.reduction.K, rm.reduction.M)
    lam = np.maximum(lam, 0.0)
    c = np.einsum("ij,ij->j", Phi, rm.C @ Phi)
    rows = np.vstack([rm.channel_rows(), rm.output_rows()])
    out = rows @ Phi
    return ModalModel(lam=lam, c=c, Phi_in=(rm.force_matrix().T @ Phi), Phi_out=out,
                      R=np.zeros((out.shape[0], rm.force_matrix().shape[1])))


def output_model_error(rm, mm, loads, dt: float, n: int = N_GRID) -> np.ndarray:
    """``(nout,)`` the reduced model's error ``d`` at each output relative to the output's
    std under ``loads`` (module docstring); ``mm`` the full model's ModalModel of (forces ->
    sensors + outputs), ``loads`` ForceSpectrum entries or a load model."""
    spec = rm.spec
    nch = len(spec.sensors)
    kinds = [kind_order(s.kind) for s in spec.sensors] + [kind_order(o.kind)
                                                          for o in spec.outputs]
    fr = np.fft.rfftfreq(n, dt)
    Hz = mm.transfer(fr, kinds)[:, nch:]
    D = Hz - reduced_modal_model(rm).transfer(fr, kinds)[:, nch:]
    P = _power(loads, n, dt)
    if P.ndim == 2:  # independent forces: a diagonal power matrix per bin
        P = np.einsum("kj,jl->kjl", P, np.eye(P.shape[1]))
    w = half_weights(n)

    def var(H):  # sum_k w_k diag(H_k P_k H_k^H)
        return w @ np.real(np.einsum("koj,kjl,kol->ko", H, P, np.conj(H)))

    with np.errstate(invalid="ignore", divide="ignore"):
        return np.sqrt(var(D) / var(Hz))


def model_error_warning(rm, d: np.ndarray, limit: np.ndarray) -> str | None:
    """The WARNING of an output whose model error ``d`` exceeds WARN_RATIO of its accuracy
    ``limit`` (both relative to its std), with the remedy; None otherwise."""
    rs = rm.spec.reduction
    method = rs.method if rs is not None else rm.reduction.method
    names = [o.name for o in rm.spec.outputs]
    bad = [i for i in range(len(names))
           if np.isfinite(d[i]) and limit[i] > 0 and d[i] > WARN_RATIO * limit[i]]
    if not bad:
        return None
    i = max(bad, key=lambda j: d[j] / limit[j])
    where = rm.spec.where("[reduction]")
    fix = ('set method = "cb+r": its basis holds the masters\' static shapes and GMR+\'s '
           '(docs/reduction.md "Which method")' if method != "cb+r" else
           "raise modes or add masters at the output's nodes")
    return (f"{where}: the reduced model's response at output {names[i]} differs from the "
            f"full model's by {100 * d[i]:.3g} % of its std under the build's load, "
            f"{d[i] / limit[i]:.3g}x its accuracy limit ({100 * limit[i]:.3g} %): an estimate "
            f"through this response lies at about {np.sqrt(1 + (d[i] / limit[i]) ** 2):.3g}x "
            f"the limit or more; "
            f"{fix}")
