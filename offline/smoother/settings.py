"""The one design path of the build's Kalman smoother: what it is made of, resolved once
from the model file (:func:`smoother_settings`), and the bundle made from it
(:func:`smoother_bundle`).

Every smoother a build ships, placement predicts or a learned load model is checked with is
made here, whether ``[estimator] method = "smoother"`` asked for it by name or the automatic
choice (``method = "auto"``, :mod:`offline.estimator_choice`) picked it. The ``[estimator]`` keys:

* ``lag``: given, else ``window - 1`` when ``window`` is a number, else the longest lag
  within ``max_delay`` (:func:`longest_lag`: 20 samples at 1 kHz and the default 20 ms);
* ``model_error``: given, the only value; absent, each of :data:`MODEL_ERRORS` is designed
  and the calibration runs choose (the first where nothing is scored: a measurement chain);
* ``check_window_s``, ``check_false_alarm``: the model check (:func:`attach_smoother`);
* the load model: a learned one (``build --record``), else the model file's declaration
  (:func:`offline.load.declared.declared_load_model`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.bundle import Bundle
from edge.estimator.operator import EstimatorError
from offline.load.declared import declared_load_model
from offline.smoother.attach import attach_smoother
from offline.smoother.gains import design_smoother

#: model-error noise levels designed and scored when ``[estimator] model_error`` is absent
MODEL_ERRORS = (0.0, 0.1)
#: longest window the automatic choice tries when ``max_delay`` allows more (samples)
MAX_AUTO_WINDOW = 201


@dataclass(frozen=True)
class SmootherSettings:
    """The resolved ``[estimator]`` and load model of one build's smoother.

    lag : int                   fixed lag [samples] (window = lag + 1)
    model_errors : tuple        the model-error levels to design (one when given)
    check_window_s, check_false_alarm : float   the model check's window and false alarms
    force_models : tuple        one :class:`~offline.smoother.ForceModel` per force
    corr : (nf, nf) or None     correlation of the forces' driving noises
    components : tuple          source components (:mod:`offline.forcing.component`)
    source : str                ``"declared"`` or ``"learned"`` (from records)
    where : str                 the model file's ``[estimator]``, for messages
    """

    lag: int
    model_errors: tuple
    check_window_s: float
    check_false_alarm: float
    force_models: tuple
    corr: np.ndarray | None = None
    components: tuple = ()
    source: str = "declared"
    where: str = "[estimator]"


def longest_lag(max_delay: float, dt: float) -> int:
    """The longest lag [samples] within ``max_delay`` [s] that the automatic choice tries:
    ``floor(max_delay / dt)``, or 100 beyond :data:`MAX_AUTO_WINDOW` (its window list,
    :func:`offline.estimator_choice.default_windows`)."""
    max_lag = int(np.floor(max_delay / dt + 1e-9))
    return max_lag if max_lag + 1 <= MAX_AUTO_WINDOW else 100


def smoother_settings(spec, est_spec, rate: float, load_model=None,
                      window=None) -> SmootherSettings:
    """The smoother of a model file (module docstring). ``window``: the build's override of
    ``[estimator] window`` (``build(window=...)``); ``load_model``: a learned
    :class:`offline.load.LoadModel` (source ``"record"``), else the declaration."""
    rule = window if window is not None else getattr(est_spec, "window", "auto")
    if est_spec.lag is not None:
        lag = int(est_spec.lag)
    elif rule != "auto":
        lag = int(rule) - 1
    else:
        lag = longest_lag(float(est_spec.max_delay), 1.0 / rate)
    me = est_spec.model_error
    errors = MODEL_ERRORS if me is None else (float(me),)
    learned = load_model is not None and load_model.source == "record"
    lm = load_model if learned else declared_load_model(spec, rate)
    return SmootherSettings(
        lag=lag, model_errors=tuple(errors), check_window_s=float(est_spec.check_window_s),
        check_false_alarm=float(est_spec.check_false_alarm), force_models=tuple(lm.forces),
        corr=lm.corr if lm.correlated else None, components=tuple(lm.components),
        source="learned" if learned else "declared", where=spec.where("[estimator]"))


def smoother_bundle(bundle: Bundle, s: SmootherSettings, model_error: float,
                    blind_ok: bool = False) -> Bundle:
    """The smoother bundle of ``bundle`` (weights = the calibration runs' 1 / sigma^2) with
    settings ``s`` at ``model_error``: :func:`~offline.smoother.design_smoother` (``blind_ok``:
    also when a force is not seen) and :func:`~offline.smoother.attach_smoother` with the
    model check's keys. An :class:`EstimatorError` names ``[estimator]``."""
    fms = list(s.force_models)
    try:
        design = design_smoother(bundle, fms, s.lag, model_error, corr=s.corr,
                                 components=list(s.components), blind_ok=blind_ok)
    except EstimatorError as exc:
        raise EstimatorError(f"{s.where}: {exc}") from None
    return attach_smoother(bundle, design, fms, model_error, s.check_window_s,
                           s.check_false_alarm, corr=s.corr, components=list(s.components))


def smoother_from_spec(bundle: Bundle, spec, est_spec, load_model=None, model_error=None,
                       window=None) -> Bundle:
    """The smoother of a model file (this module's, the one design path):
    ``[estimator]`` lag/model_error/check_* and the load model (``load_model``, a learned
    :class:`offline.load.LoadModel`; default the model file's declaration).
    ``model_error``: one of the settings' levels (default the first: the one given, else 0)."""
    s = smoother_settings(spec, est_spec, bundle.rate, load_model, window=window)
    me = s.model_errors[0] if model_error is None else float(model_error)
    return smoother_bundle(bundle, s, me)
