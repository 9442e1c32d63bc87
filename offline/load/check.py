"""Does the built estimator explain the records? Its whitened innovations on them.

For a right model (structure, load and noise) the whitened innovations ``eps_k = Wt (y_k - H
x_k|k-1)`` of the steady-state filter are white with unit variance. After a build with
``--record`` they are checked on the records themselves: a variance far from 1 or many
coloured lags means the learned load model does not explain the records (e.g. correlated
loads outside the fit's family), and the stated uncertainty cannot be trusted.
"""

from __future__ import annotations

import numpy as np

from edge.estimator import EstimatorError
from offline.smoother import smoother_from_spec
from offline.smoother.chain_alt import records_chain_check, with_chain_alternative
from offline.smoother.std_scale import lag_products

#: accepted mean variance of the whitened innovations; a lag counts as coloured above the
#: white-noise band or 0.1, whichever is wider (a long record resolves the slight colour a
#: reduced model always leaves: 0.02-0.06 on the zoo's strip), at most this share of them,
#: and no lag above PEAK_MAX
VARIANCE_RANGE = (0.8, 1.25)
COLOURED_MIN = 0.1
COLOURED_MAX = 0.2
PEAK_MAX = 0.3


def innovations(bundle, Y: np.ndarray) -> np.ndarray:
    """Whitened innovations ``Wt (y_k - H x_k|k-1)`` (nt, nch) of the bundle's smoother (its
    designed level) on a record: white with unit variance for a right model."""
    kf = bundle.kf
    A, H, K, Wt = (np.asarray(kf[k], dtype=float) for k in ("A", "H", "K", "Wt"))
    x = np.zeros(A.shape[0])
    out = np.zeros(Y.shape)
    AK = A @ K
    for k in range(Y.shape[0]):
        e = Y[k] - H @ x
        out[k] = Wt @ e
        # x_k+1|k = A x_k|k-1 + A K e_k
        x = A @ x + AK @ e
    return out


def autocorrelation(e: np.ndarray, lags: int) -> np.ndarray:
    """Normalised autocorrelation of one series at lags ``1..lags``."""
    # r_m = sum_k e_k e_k+m / sum_k e_k^2 (the lag products by FFT, zero-padded)
    r = lag_products((e - e.mean())[:, None], lags)[:, 0]
    return r[1:] / r[0]


def innovation_check(bundle, records, skip_s: float = 1.0, max_s: float = 20.0,
                     lags: int = 50) -> dict:
    """``{"variance", "coloured", "peak", "ok", "text"}``: the mean variance of the whitened
    innovations over the records (after ``skip_s``, at most ``max_s`` of each), the share of
    lags ``1..lags`` of each channel's autocorrelation beyond ``max(1.96 / sqrt(n), 0.1)``
    and the largest autocorrelation (module constants: the limits)."""
    s0, s1 = int(round(skip_s / bundle.dt)), int(round((skip_s + max_s) / bundle.dt))
    eps = np.vstack([innovations(bundle, Y[:s1])[s0:] for Y in records])
    var = float(np.mean(eps ** 2))
    n = eps.shape[0]
    band = max(1.96 / np.sqrt(n), COLOURED_MIN)
    r = np.abs(np.array([autocorrelation(eps[:, c], lags) for c in range(eps.shape[1])]))
    coloured, peak = float(np.mean(r > band)), float(r.max())
    ok = (VARIANCE_RANGE[0] <= var <= VARIANCE_RANGE[1] and coloured <= COLOURED_MAX
          and peak <= PEAK_MAX)
    text = (f"innovations on the record(s): variance {var:.3g} (1 for a right model), "
            f"largest autocorrelation {peak:.2g} at lags 1-{lags}, {100 * coloured:.0f} % "
            f"of them above {band:.2g}")
    if not ok:
        text = ("WARNING: the learned load model does not explain the records: " + text
                + "; the stated standard deviations are not to be trusted (loads outside "
                "the fit's family, e.g. correlated forces whose coherence changes with "
                "frequency, a structure the model does not describe, or a channel in another unit)")
    return {"variance": var, "coloured": coloured, "peak": peak, "ok": bool(ok),
            "text": text}


def check_learned(bundle, spec, est_spec, load_model, records) -> dict:
    """:func:`innovation_check` of a learned load model on its records, whatever estimator the
    build chose: through the bundle's smoother, else a smoother designed with the model (a
    Tikhonov bundle has no innovations of its own); ``"chain"``: whether the records fit the
    declared measurement chain (:func:`offline.smoother.chain_alt.records_chain_check`)."""
    try:
        chk = bundle if bundle.method == "smoother" else smoother_from_spec(
            bundle, spec, est_spec, load_model=load_model)
        out = innovation_check(chk, records)
    except EstimatorError as exc:
        return {"ok": False, "text": "WARNING: the learned load model could not be checked "
                                     f"on the records: {exc}"}
    if "alt_A" not in chk.kf:  # the chain check's alternative (a Tikhonov build's smoother)
        chk = with_chain_alternative(chk)
    out["chain"] = records_chain_check(chk, records)
    return out
