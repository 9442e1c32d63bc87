"""A smoother bundle: the gains and model-check arrays attached (``kf_*``), and the
smoother of a model file's ``[estimator]`` and ``[[forces]]``."""

from __future__ import annotations

import numpy as np

from edge.bundle import Bundle
from edge.estimator.operator import EstimatorError
from edge.estimator.smoother import nis_threshold
from offline.smoother.force_model import DEFAULT_ORDER, ForceModel
from offline.smoother.gains import SmootherDesign, design_smoother
from offline.smoother.model_check import band_filters, check_bands


def attach_smoother(bundle: Bundle, design: SmootherDesign, force_models, model_error: float,
                    nis_window_s: float = 8.0, nis_false_alarm: float = 0.01,
                    bands=None, nis_tolerance: float = 2.0) -> Bundle:
    """A copy of ``bundle`` that runs the smoother (``kf_*`` arrays, ``meta["estimator"]``).

    ``bands``: model-check bands [Hz] (default :func:`check_bands`). The broadband NIS flags
    above ``max(chi-square quantile, nis_tolerance * dof)``: the innovation level also follows
    the load's level, which the force model only states roughly."""
    W = max(int(round(nis_window_s / bundle.dt)), 1)
    nch = len(bundle.channels)
    dof = W * nch
    bands = check_bands(bundle, force_models) if bands is None else list(bands)
    ba, gain, thr = band_filters(bands, bundle.rate, W, nch, nis_false_alarm)
    # whitening: S^-1 = Lc Lc^T, eps = Lc^T e  ->  eps^T eps = e^T S^-1 e
    Lc = np.linalg.cholesky(0.5 * (design.Sinv + design.Sinv.T))
    kf = {"A": design.A, "H": design.H, "K": design.K, "Cq": design.Cq, "G": design.G,
          "Sinv": design.Sinv, "std": design.std,
          "nis_window": np.array(W, dtype=np.int64),
          "nis_threshold": np.array(max(nis_threshold(dof, nis_false_alarm),
                                        nis_tolerance * dof)),
          "Wt": np.ascontiguousarray(Lc.T), "band_ba": ba, "band_gain": gain,
          "band_threshold": thr, "band_hz": np.array(bands, dtype=float).reshape(-1, 2)}
    meta = dict(bundle.meta)
    meta["estimator"] = {
        "method": "smoother", "lag": design.lag, "n_force_states": design.n_force_states,
        "proportional": design.proportional, "model_error": float(model_error),
        "force_models": [{"kind": fm.kind, "band": list(map(float, fm.band)),
                          "rms": float(fm.rms), "order": int(fm.order)} for fm in force_models],
        "spectral_radius": design.spectral_radius,
        "rigid_modes": design.n_rigid, "rigid_anchor_hz": design.anchor_hz,
        "check_window_s": W * bundle.dt, "check_false_alarm": float(nis_false_alarm),
        "check_bands_hz": [list(map(float, b)) for b in bands],
        "std_filtered": design.std_filtered.tolist(), "std": design.std.tolist()}
    return bundle.replace(kf=kf, window=design.lag + 1, meta=meta)


def smoother_from_spec(bundle: Bundle, spec, est_spec) -> Bundle:
    """The smoother of a model file: ``[estimator]`` method/lag/model_error/check_* and each
    force's ``model`` (band and RMS default to the ``[calibration]`` random load's, else
    1 Hz .. 0.4 rate and 1)."""
    cal = spec.calibration
    dflt_band = (1.0, 0.4 * bundle.rate)
    dflt_rms = 1.0
    if cal is not None and cal.load.type == "random":
        dflt_band, dflt_rms = tuple(cal.load.band), float(cal.load.rms)
    models = []
    for f in spec.forces:
        m = f.model or {}
        fm = ForceModel(kind=m.get("kind", "bandpass"),
                        band=tuple(m.get("band") or dflt_band),
                        rms=float(m.get("rms") or dflt_rms), order=int(m.get("order", DEFAULT_ORDER)))
        fm.check(f.where or f"[[forces]] {f.name}")
        models.append(fm)
    lag = est_spec.lag if est_spec.lag is not None else int(round(0.02 * bundle.rate))
    try:
        design = design_smoother(bundle, models, lag, est_spec.model_error)
    except EstimatorError as exc:
        raise EstimatorError(f"{spec.where('[estimator]')}: {exc}") from None
    return attach_smoother(bundle, design, models, est_spec.model_error,
                           est_spec.check_window_s, est_spec.check_false_alarm)
