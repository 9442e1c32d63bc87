"""``[reduction] method = "auto"`` (the default): GMR+, unless its reduced model is off where
the estimate needs it, then Craig-Bampton with GMR+'s residual vectors (``"cb+r"``).

GMR+ folds the residual flexibility into the Craig-Bampton coordinates through a
free-vibration estimate, so a response that is a small difference of master motions can be
far off (docs/reduction.md "Which method"). The build's stage :func:`choose_reduction`, after
the calibration runs (which use the full model and so do not depend on the reduction),
compares the GMR+ reduced model with the full one under the model file's ``[design_load]``
(:mod:`offline.limit.model_error`):

* at each sensor, the RMS model error over the sensor's noise std: above ``WARN_RATIO``
  (0.5) the smoother, weighing the channel by ``1 / noise^2``, reads the difference as load.
  The portal frame of benchmarks/load_user (GMR+, 20 modes, 479 rows/s): its midspan
  velocity sensor v2z 30x its noise off (44 % of its std), the force Fx and the displacement
  d1x 3.4x and 2.7x their limit; with ``"cb+r"`` (30 coordinates instead of 25) 1.14x both.
  Every other model file of examples/ and benchmarks/load_user stays below 0.06;
* at each output, the model error over ``WARN_RATIO`` of its accuracy limit (the build's
  WARNING, the estimate then at 1.12x the limit or more).

If either fails and Craig-Bampton with the residual vectors fails less, the build reduces
with ``"cb+r"`` and says so in a ``note:`` line (``meta["reduction"]["choice"]``). The choice
rests on the declaration, not on a load learned from records (a record does not change the
structure). A model file naming a method gets that method (and the WARNING).
"""

from __future__ import annotations

import numpy as np

from edge.kinds import DEFAULT_REDUCTION_METHOD
from offline.limit.model import force_spectra, model_limit, noise_std
from offline.limit.model_error import WARN_RATIO, output_model_error, sensor_model_error
from offline.reduced import design_bundle, reduce_model

#: the method "auto" falls back to
FALLBACK = "cb+r"


def misfit(rm, mm, dt: float, limit) -> tuple[float, str]:
    """``(worst ratio, what)``: the largest of each sensor's model error over ``WARN_RATIO``
    of its noise std and each output's over ``WARN_RATIO`` of its accuracy ``limit``
    (``(nout,)`` normalised, or None: sensors only), under the ``[design_load]`` loads;
    above 1 the build would warn. ``what`` names the worst signal and its figure."""
    spec = rm.spec
    loads = force_spectra(spec)
    s = sensor_model_error(rm, mm, loads, dt, noise_std(spec, mm, dt)) / WARN_RATIO
    cand = [(float(v), f"sensor {x.name} {v * WARN_RATIO:.3g}x its noise std")
            for x, v in zip(spec.sensors, s) if np.isfinite(v)]
    if limit is not None and spec.outputs:
        d = output_model_error(rm, mm, loads, dt)
        cand += [(float(v / (WARN_RATIO * lim)), f"output {o.name} {v / lim:.3g}x its limit")
                 for o, v, lim in zip(spec.outputs, d, limit) if np.isfinite(v) and lim > 0]
    return max(cand, default=(0.0, ""))


def _limit(st):
    """The outputs' accuracy limit (normalised) under the declaration, None without outputs
    or without the limit (``build(limit=False)``)."""
    if not (st.opts.limit and st.spec.outputs):
        return None
    return model_limit(st.spec, st.model, delays=[0.0], mm=st.mm, exact=False,
                       chain=st.bundle.chain).output_nrmse


def choose_reduction(st) -> None:
    """The build's stage (:mod:`offline.build`, after the calibration runs): with
    ``method = "auto"``, keep GMR+ unless :func:`misfit` exceeds 1 and ``"cb+r"`` misfits
    less; then ``st.rm``, ``st.bundle`` (the channel weights kept) and ``st.meta`` are
    replaced and ``meta["reduction"]["choice"]`` says why."""
    rs = st.spec.reduction
    if (rs.method if rs is not None else DEFAULT_REDUCTION_METHOD) != "auto":
        return
    dt = st.bundle.dt
    worst, what = misfit(st.rm, st.mm, dt, None)
    limit = None
    if worst <= 1.0:
        limit = _limit(st)
        worst, what = misfit(st.rm, st.mm, dt, limit)
    if worst <= 1.0:
        return
    rm = reduce_model(st.spec, st.model, n_modes=st.opts.n_modes, progress=st.opts.progress,
                      method=FALLBACK)
    worst2, what2 = misfit(rm, st.mm, dt, limit if limit is not None else _limit(st))
    if worst2 >= worst:
        return  # the build's WARNING says what GMR+ misses
    bundle = design_bundle(rm, st.est_spec, st.opts.window)
    for c, c0 in zip(bundle.channels, st.bundle.channels):
        c.weight = c0.weight  # from the calibration runs' noise (offline.build.calibrate)
    bundle.meta["reduction"]["choice"] = (
        f'[reduction] method = "auto": GMR+ is off at {what}; Craig-Bampton with the residual '
        f"vectors (cb+r, {bundle.n} reduced DOFs instead of {st.bundle.n}) "
        + ("is within the bound" if worst2 <= 1.0 else "is less off") + f" (worst: {what2}); "
        'docs/reduction.md "Which method"')
    st.rm, st.bundle, st.meta = rm, bundle, bundle.meta
