"""A smoother bundle: the gains and model-check arrays attached (``kf_*``), and the
smoother of a model file's ``[estimator]`` and ``[[forces]]``."""

from __future__ import annotations

import numpy as np

from edge.bundle import Bundle
from edge.estimator.chi2 import nis_threshold
from offline.forcing.component import Component
from offline.forcing.force_model import ForceModel
from offline.smoother.error import startup_variance
from offline.smoother.gains import SmootherDesign
from offline.smoother.levels import LEVELS, level_arrays, whitening

#: longest start-up the bundle describes [s]: beyond, the remaining excess is kept
STARTUP_MAX_S = 30.0
from offline.smoother.model_check import (SHAPE_MARGIN, band_filters, check_bands, shape_pair,
                                          shape_thresholds)


def attach_smoother(bundle: Bundle, design: SmootherDesign, force_models, model_error: float,
                    nis_window_s: float = 8.0, nis_false_alarm: float = 0.01,
                    bands=None, nis_tolerance: float = 2.0, corr=None,
                    nis_tolerance_low: float = 1.25, components=()) -> Bundle:
    """A copy of ``bundle`` that runs the smoother (``kf_*`` arrays, ``meta["estimator"]``).

    ``bands``: model-check bands [Hz] (default :func:`check_bands`, then the load-shape pair
    :func:`shape_pair`, its thresholds :func:`shape_thresholds` with the bound
    :data:`SHAPE_MARGIN`). The broadband NIS flags
    above ``max(chi-square quantile, nis_tolerance * dof)`` and below ``min(lower chi-square
    quantile, dof / nis_tolerance_low)`` (innovations too small: the declared load or noise
    too large; the device's level tracker takes up a load of another size, so what stays too
    small is a noise or load the model overstates beyond the tracked range). A displacement
    sensor's one-step innovation is mostly its noise, so a load 50x below its declaration
    lowers the NIS by only ~25 %: hence the tighter lower tolerance. The gains of other load
    levels: :func:`with_load_levels`."""
    W = max(int(round(nis_window_s / bundle.dt)), 1)
    nch = len(bundle.channels)
    dof = W * nch
    shape = shape_pair(force_models, bundle.rate) if bands is None else []
    bands = check_bands(bundle, force_models) if bands is None else list(bands)
    ba, gain, thr = band_filters(bands + shape, bundle.rate, W, nch, nis_false_alarm)
    if shape:  # the bound; with load levels, the tilt their gains give (with_load_levels)
        thr[-2:] = shape_thresholds(thr[-2:], SHAPE_MARGIN)
    kf = {"A": design.A, "H": design.H, "K": design.K, "Cq": design.Cq, "G": design.G,
          "Sinv": design.Sinv, "std": design.std,
          "nis_window": np.array(W, dtype=np.int64),
          "nis_threshold": np.array(max(nis_threshold(dof, nis_false_alarm),
                                        nis_tolerance * dof)),
          # P(chi2 < x) = p: the upper quantile of 1 - p
          "nis_threshold_low": np.array(min(nis_threshold(dof, 1.0 - nis_false_alarm),
                                            dof / nis_tolerance_low)),
          "Wt": whitening(design.Sinv), "band_ba": ba, "band_gain": gain,
          "band_threshold": thr, "band_hz": np.array(bands + shape, dtype=float).reshape(-1, 2),
          # the error's excess over std^2 from the first sample (offline/smoother/error.py)
          "startup_var": startup_variance(design.A, design.H, design.Q, design.K, design.G,
                                          design.Cq, design.P, design.std,
                                          max_samples=int(round(STARTUP_MAX_S * bundle.rate)),
                                          walk=design.walk)}
    meta = dict(bundle.meta)
    meta["estimator"] = {
        "method": "smoother", "lag": design.lag, "n_force_states": design.n_force_states,
        "proportional": design.proportional, "model_error": float(model_error),
        "force_models": [fm.as_dict() for fm in force_models],
        "force_corr": None if corr is None else np.asarray(corr, dtype=float).tolist(),
        "force_components": [c.as_dict() for c in components],
        "spectral_radius": design.spectral_radius,
        "rigid_modes": design.n_rigid, "rigid_anchor_hz": design.anchor_hz,
        "check_window_s": W * bundle.dt, "check_false_alarm": float(nis_false_alarm),
        "check_bands_hz": [list(map(float, b)) for b in bands],
        # the last pair of kf_band_*: [f_lo, f_m, f_hi], or None
        "check_shape_hz": [shape[0][0], shape[0][1], shape[1][1]] if shape else None,
        "std_filtered": design.std_filtered.tolist(), "std": design.std.tolist(),
        "load_levels": None}
    return bundle.replace(kf=kf, window=design.lag + 1, meta=meta)


def with_load_levels(bundle: Bundle, grid=LEVELS, scale_noise: bool = False) -> Bundle:
    """A copy of a smoother ``bundle`` with the gains of a grid of load levels
    (:mod:`offline.smoother.levels`), from its own model and ``meta["estimator"]``;
    ``scale_noise``: the noise was declared relative to the signal and scales with the
    level."""
    e = bundle.meta["estimator"]
    fms = [ForceModel.from_dict(d) for d in e["force_models"]]
    corr = None if e.get("force_corr") is None else np.array(e["force_corr"], dtype=float)
    comps = [Component.from_dict(c) for c in e.get("force_components", [])]
    kf = dict(bundle.kf)
    shape = e.get("check_shape_hz") is not None           # the last pair of kf_band_*
    arrays = level_arrays(bundle, fms, int(e["lag"]), float(e.get("model_error", 0.0)),
                          corr=corr, grid=grid, scale_noise=scale_noise, components=comps,
                          shape_ba=kf["band_ba"][-2:] if shape else None)
    if shape:  # the tilt these gains give a load half a level off, not the bound
        margin = arrays.pop("shape_margin")
        stat = band_filters(kf["band_hz"][-2:], bundle.rate, int(kf["nis_window"]),
                            len(bundle.channels), float(e["check_false_alarm"]))[2]
        kf["band_threshold"] = np.r_[kf["band_threshold"][:-2], shape_thresholds(stat, margin)]
    kf.update(arrays)
    meta = dict(bundle.meta)
    meta["estimator"] = {**e, "load_levels": [float(g) for g in kf["level_grid"]],
                         "load_levels_scale_noise": bool(scale_noise)}
    if shape:
        meta["estimator"]["check_shape_margin"] = float(margin)
    return bundle.replace(kf=kf, meta=meta)
