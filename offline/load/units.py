"""The records' level against the model's prediction: a column in another unit.

A record in mm where the model's sensor is in m (or an accelerometer in g for m/s^2) is
1e3 (or 9.81) times the level the structure can give; the load fit would take it as a load
1e3 times the declared one and stay inside its 12-decade scan, so nothing downstream notices.
Before the fit, each channel's RMS in the fit's band is compared with the RMS the full model
predicts there under the declared load and noise (:meth:`offline.load.whittle.Whittle.
expected`, the same transfer functions and measurement chain as the fit)::

    factor_c = sqrt( sum_k S_hat_cc(f_k) / sum_k E_cc(f_k) )

A factor beyond :data:`REFUSE_FACTOR` (either way) is refused naming the column and the
factor; beyond :data:`WARN_FACTOR` the build warns. A declared load that is simply off (the
demo declares 1 N for a 0.05 N rig: factor 0.05) stays below both.
"""

from __future__ import annotations

import sys

import numpy as np

from offline.load.learn import whittle_of_records

#: warn when a record's level is this far from the prediction (either way; the demo's rig
#: runs at 1/20 of its declared load)
WARN_FACTOR = 30.0
#: refuse beyond this factor: a unit error of 1e3 (kN for N, mm for m) is refused unless the
#: declared load overstates the real one by more than 3.3x in the same direction (then it
#: warns); a declared load that is this far off is refused too (fix the declaration)
REFUSE_FACTOR = 300.0


def record_level_factors(mm, records, dt: float, prior, kinds, chain=None) -> np.ndarray:
    """(nch,) each channel's RMS over the RMS the model predicts under ``prior`` (the declared
    :class:`offline.load.LoadModel`, its ``noise_std`` absolute), over the fit's band."""
    W = whittle_of_records(mm, records, dt, kinds, chain=chain)[0]
    corr = prior.corr if prior.correlated else np.eye(len(prior.forces))
    ns = np.zeros(len(kinds)) if prior.noise_std is None else np.asarray(prior.noise_std,
                                                                          float)
    E = np.real(np.einsum("kii->ki", W.expected(prior.forces, ns, corr, prior.components)))
    S = np.real(np.einsum("kii->ki", W.S_hat))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt(S.sum(axis=0) / E.sum(axis=0))


def check_record_levels(factors, names, paths, what: str = "the declared load") -> list[str]:
    """Refuse (``ValueError`` naming the records, the column and the factor) a channel whose
    level is more than :data:`REFUSE_FACTOR` from the prediction; return warnings for those
    beyond :data:`WARN_FACTOR`."""
    where = ", ".join(str(p) for p in paths)
    warns = []
    for name, f in zip(names, np.asarray(factors, float)):
        off = max(f, 1.0 / f) if np.isfinite(f) and f > 0 else np.inf
        if off <= WARN_FACTOR:
            continue
        text = (f"{where}: column '{name}': its RMS is {f:.3g} times the response the model "
                f"predicts under {what} (a column in another unit: mm for m is 1e3, kN for "
                f"N 1e-3 or 1e3; or a declared load that far off)")
        if off > REFUSE_FACTOR:
            raise ValueError(text + f": more than {REFUSE_FACTOR:g} times either way, "
                             "refused; fix the column's unit, or the declared load's rms")
        warns.append(text)
    return warns


def records_at_model_level(mm, records, bundle, prior, paths) -> list[str]:
    """``build --record``: :func:`check_record_levels` of the sensor records ``records``
    (arrays of ``paths``) against the bundle's channels under the declared load ``prior``;
    the warnings are printed (stderr) and returned (the load model's ``warnings``)."""
    factors = record_level_factors(mm, records, bundle.dt, prior,
                                   [c.kind for c in bundle.channels], bundle.chain)
    warns = check_record_levels(factors, [c.name for c in bundle.channels], paths)
    for w in warns:
        print(f"warning: {w}", file=sys.stderr, flush=True)
    return warns
