"""May the daemon apply a model update on its own? (issue 17, ``[inverse] auto_update``).

A calibration (``vsense-offline calibrate``) is trusted only as far as its checks go: the
k-fold model-inadequacy test (paper 001 Sect. 4) says whether ONE parameter set of the model
family explains every record, the nonlinearity measure (paper 003 eq. 18) whether the Gaussian
posterior describes the parameters, and VB's convergence whether the posterior was reached.
When the bundle's ``meta["calibration"]`` marks a failure, the family's parameters are not
meaningful as a model update, so an identification (inverse maps) of those parameters is not
applied automatically either: it is published with the reason and waits for an explicit
``update_model`` command (``force = true`` for a calibration).

NumPy-free, pure functions (no daemon state): :func:`refusal` decides, :func:`allow` records
the decision in an identification result for the ``params`` topic.
"""

from __future__ import annotations

import math

#: largest nonlinearity measure (paper 003 eq. 18) of an update applied without being asked
MAX_NONLINEARITY = 0.5


def refusal(calibration: dict | None, max_nonlinearity: float = MAX_NONLINEARITY) -> str | None:
    """Why a model update of this family must not be applied automatically, or None.

    Parameters
    ----------
    calibration : dict or None
        ``meta["calibration"]`` of the bundle (or a ``posterior.json``): keys
        ``model_inadequate`` (bool), ``inadequacy`` ({"passed", "p_min", "alpha"}),
        ``nonlinearity`` ({name: L}), ``converged`` (bool). None or {}: nothing known
        against the family (a bundle built without calibration).
    max_nonlinearity : float
        Threshold on the largest nonlinearity measure.

    Returns
    -------
    str or None
        The reasons, joined by "; ", naming the failed check and its value; None when allowed.
        A malformed entry is itself a reason (never an exception).
    """
    if not calibration:
        return None
    if not isinstance(calibration, dict):
        return f"meta.calibration is {type(calibration).__name__}, expected a table"
    reasons = []
    inad = calibration.get("inadequacy") or {}
    if not isinstance(inad, dict):
        reasons.append("meta.calibration.inadequacy is not a table")
        inad = {}
    if calibration.get("model_inadequate") or inad.get("passed") is False:
        reasons.append(f"the model family failed the inadequacy test "
                       f"(p_min {inad.get('p_min')}, alpha {inad.get('alpha')})")
    nl = calibration.get("nonlinearity") or {}
    if not isinstance(nl, dict):
        reasons.append("meta.calibration.nonlinearity is not a table {name: value}")
        nl = {}
    for name, v in nl.items():
        try:
            ok = math.isfinite(float(v)) and float(v) <= max_nonlinearity
        except (TypeError, ValueError):
            ok = False
        if not ok:
            reasons.append(f"nonlinearity measure of {name!r} is {v!r} > {max_nonlinearity}")
    if calibration.get("converged") is False:
        reasons.append("the calibration's VB iteration did not converge")
    return "; ".join(reasons) or None


def allow(result: dict, meta: dict | None, max_nonlinearity: float = MAX_NONLINEARITY) -> bool:
    """True when ``auto_update`` may apply this identification ``result``; otherwise the
    reason goes to ``result["update_rejected"]`` (published on ``params``) and False."""
    why = refusal((meta or {}).get("calibration") if isinstance(meta, dict) else None,
                  max_nonlinearity)
    if why is None:
        return True
    result["update_rejected"] = "auto_update refused: " + why
    return False
