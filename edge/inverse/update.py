"""Model updates: parameters (identified, sent, or a calibration posterior) -> a new step
operator for the running estimator. NumPy; the operator is derived by :mod:`edge.estimator`.
"""

from __future__ import annotations

import hashlib
import json

from edge.estimator.operator import derive_operator
from edge.inverse.parametric import Parts, RejectedUpdate, check_parameters, matrices


def model_id(bundle_id: str, names, theta) -> str:
    """Identifier of an updated model: bundle id plus a short hash of the parameters."""
    h = hashlib.sha256(json.dumps([list(names), [float(v) for v in theta]]).encode()).hexdigest()
    return f"{bundle_id}+{h[:10]}"


def update_model(parts: Parts, bundle, theta, derive=None):
    """Rebuild M̂, Ĉ, K̂ for ``theta`` and derive the estimator's new step operator.

    Parameters
    ----------
    parts : Parts
    bundle : edge.bundle.Bundle
        The running bundle (its channels, forces, outputs, dt, alpha are kept).
    theta : array_like (np,) or dict {name: value}
    derive : callable bundle -> operator, optional
        Defaults to :func:`edge.estimator.derive_operator`.

    Returns
    -------
    op : step operator, new_bundle : Bundle (hash cleared), theta : ndarray (np,)

    Raises
    ------
    RejectedUpdate
        The parameters cannot be applied (reason in the message).
    """
    th = check_parameters(parts, theta)
    if parts.n != bundle.M.shape[0]:
        raise RejectedUpdate(f"parametric model has {parts.n} DOFs, the running bundle {bundle.M.shape[0]}")
    M, C, K = matrices(parts, th)
    derive = derive_operator if derive is None else derive
    nb = bundle.replace(M=M, C=C, K=K)
    try:
        op = derive(nb)
    except ValueError as exc:
        raise RejectedUpdate(f"the estimator cannot use the updated model: {exc}") from None
    return op, nb, th


#: largest nonlinearity measure (paper 003 eq. 18) of a calibration applied without force=true
MAX_NONLINEARITY = 0.5


def calibration_params(calib: dict, max_nonlinearity: float = MAX_NONLINEARITY,
                       force: bool = False) -> tuple[dict, dict]:
    """Parameters to apply from a calibration posterior (``posterior.json`` of
    ``vsense-offline calibrate``, or a bundle's ``meta["calibration"]``).

    Returns ({name: median} without sensor offsets, {"std", "free_energy", "nonlinearity"}).
    Raises :class:`RejectedUpdate` naming the reason when the model family failed the
    inadequacy test, a nonlinearity measure exceeds ``max_nonlinearity`` (the Gaussian
    posterior is not trustworthy) or VB did not converge, unless ``force``.
    """
    try:
        names, mean, std = list(calib["names"]), list(calib["mean"]), list(calib["std"])
    except (KeyError, TypeError):
        raise RejectedUpdate("calibration: needs 'names', 'mean' and 'std' (posterior.json)") from None
    if not (len(names) == len(mean) == len(std)):
        raise RejectedUpdate("calibration: 'names', 'mean' and 'std' differ in length")
    kinds = list(calib.get("kinds") or [None] * len(names))
    nl = dict(calib.get("nonlinearity") or {})
    reasons = []
    inad = calib.get("inadequacy") or {}
    if inad.get("passed") is False or calib.get("model_inadequate"):
        reasons.append(f"the model family failed the inadequacy test (p_min {inad.get('p_min')})")
    worst = max(nl.items(), key=lambda kv: kv[1]) if nl else None
    if worst is not None and not worst[1] <= max_nonlinearity:
        reasons.append(f"nonlinearity measure of {worst[0]!r} is {worst[1]:.3g} > {max_nonlinearity}")
    if calib.get("converged") is False:
        reasons.append("the VB iteration did not converge")
    if reasons and not force:
        raise RejectedUpdate("calibration not applied: " + "; ".join(reasons)
                             + "; send force=true to apply it")
    keep = [i for i, k in enumerate(kinds) if k != "offset"]
    params = {names[i]: float(mean[i]) for i in keep}
    info = {"std": {names[i]: float(std[i]) for i in keep},
            "free_energy": calib.get("free_energy"), "nonlinearity": nl}
    return params, info
