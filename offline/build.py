"""From a model file to a bundle: FE model, reduction, calibration, alpha, stability check.

Stages (``vsense-offline build MODEL.toml -o BUNDLE.npz [--report DIR]``), each a function over
one :class:`BuildState` that :func:`build` calls in order:

1. load and validate the model file, assemble the constrained FE model (:func:`_stage_model`:
   :func:`offline.model.load_model_file`, :func:`offline.model.build_fe_model`);
2. the reduced model (:func:`_stage_reduce`: :func:`offline.reduced.reduce_model`): masters =
   measured DOFs first (paper eq. 8-10), then force DOFs, then the declared masters; GMR+ or,
   "auto", cb+r where GMR+ is off (:mod:`offline.reduction_choice`, after 3); damping (Rayleigh
   on the reduced matrices, paper eq. 7, plus ``T^T C T`` of explicit damping); virtual outputs
   = rows of T at their DOFs; the bundle before calibration (:func:`offline.reduced.design_bundle`);
3. honest calibration runs (:func:`_stage_calibrate`: :func:`calibrate`,
   :mod:`offline.calibration_runs`): the FULL model, integrated exactly mode by mode (not the
   estimator's reduced Newmark step), under the ``[design_load]`` load(s) or the load model
   learned from records (:func:`learn_from_records`) with the sensors' noise,
   ``[design_load] seeds`` of them; channel weights ``1 / sigma^2``;
4. estimator, window (delay <= ``[estimator] max_delay``) and alpha chosen by the lowest expected
   normalised RMS error on them (:func:`_stage_choose`: :func:`offline.estimator_choice.select`; or
   alpha by a rule / given); the MMSE accuracy limit (:mod:`offline.limit`) for the report; the
   step operator is derived and its spectral radius checked (:func:`_stage_estimator`: an
   unstable estimator is refused, not shipped);
5. inverse maps of ``[[parameters]]`` (:func:`_stage_maps`: :func:`attach_inverse_maps`, the
   reduction of step 2 reused);
6. the smoother's gains for the device (:func:`_stage_device_gains`), the hybrid twin
   (:func:`_stage_hybrid`), the load model and accuracy in the bundle's meta
   (:func:`_stage_load_meta`); the summary and report (:mod:`offline.build_report`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edge.bundle import Bundle
from edge.estimator import EstimatorError, derive_operator
from offline.calibration_runs import calibration_runs, noise_warning, own_load_runs
from offline.hybrid import attach_hybrid
from offline.inverse.pipeline import attach
from offline.limit.model import force_spectra, model_limit, noise_std
from offline.limit.model_error import model_error_warning, output_model_error, sensor_model_error
from offline.limit.ratio import build_accuracy
from offline.load import declared_load_model, read_records
from offline.load.check import check_learned
from offline.smoother.chain_alt import with_chain_alternative
from offline.load.units import records_at_model_level
from offline.load.select import choice_meta, learn_and_choose
from offline.load.declared import replaced_kinds
from offline.load.observability import bundle_load_warnings
from offline.limit.transfer import modal_model
from offline.build_report import build_summary, write_build_report
from offline.model import EstimatorSpec, ModelSpec, build_fe_model, load_model_file
from offline.model.sections import point_sample_warning
from offline.reduced import ReducedModel, design_bundle, reduce_model
from offline.reduction_choice import choose_reduction
from offline.regularization import AlphaChoice, choose_alpha
from offline.estimator_choice import (candidates_for, chain_policy, select,  # noqa: F401
                                      worse_than_zero)  # worse_than_zero: callers'
from offline.smoother import smoother_settings, with_load_levels
from offline.smoother.std_scale import with_std_scale


@dataclass
class BuildResult:
    bundle: Bundle
    reduction: object
    model: object
    spec: object
    choice: AlphaChoice | None
    calibration: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    full_dofs: dict = field(default_factory=dict)
    reduced: ReducedModel | None = None  # step 2 (offline.reduced): model, reduction, signals
    load_fit: object = None  # the load model learned from records (offline.load.LoadFit)

    def summary(self) -> str:
        """The text ``vsense-offline build`` prints (:func:`offline.build_report.build_summary`)."""
        return build_summary(self)


def learn_from_records(spec, mm, bundle: Bundle, records, progress: bool = True):
    """The load model of ``records`` (paths; :func:`offline.load.learn_load`), the model
    file's declaration its prior. Returns ``(LoadFit, LoadModel)``, ``(None, None)``
    without records."""
    if not records:
        return None, None
    names = [c.name for c in bundle.channels]
    Ys = read_records(records, names, bundle.dt)
    prior = declared_load_model(spec, bundle.rate, noise_std=noise_std(spec, mm, bundle.dt))
    say = (lambda s: print(f"load model: {s}", flush=True)) if progress else None
    level_warns = records_at_model_level(mm, Ys, bundle, prior, records)  # units (mm for m)
    est_spec = spec.estimator if spec.estimator is not None else EstimatorSpec()
    # candidates (declared, learned, with components) chosen by held-out likelihood
    fit, model, choice = learn_and_choose(mm, bundle, spec, est_spec, Ys, prior, say)
    fit.info["choice"] = choice
    warn = replaced_kinds(spec, prior.forces, fit.model.forces)
    if warn and model is not None:  # the fit's family is the band-pass model
        model.info.setdefault("warnings", []).append(warn)
    if model is not None:
        model.info.setdefault("warnings", []).extend(level_warns)
    return fit, model


def calibrate(rm: ReducedModel, bundle: Bundle, progress: bool = True, mm=None,
              load_model=None):
    """Step 3: the honest calibration runs and the channel weights.

    The FULL model, integrated exactly mode by mode (not the estimator's reduced step), under
    the ``[design_load]`` load(s) with the sensors' noise (:mod:`offline.calibration_runs`).
    Sets ``weight = 1 / sigma^2`` on ``bundle.channels`` (sigma: the mean noise std of the
    runs, per channel). ``load_model``: a load model learned from records
    (:mod:`offline.load`) drives the runs instead of the ``[design_load]`` loads.

    Returns
    -------
    runs : list of CalRun
    mm : ModalModel
        Modes and residual flexibility of the full model at the signals' DOFs
        (:func:`offline.limit.transfer.modal_model`), shared with the accuracy limit.
    """
    if mm is None:
        mm = modal_model(rm.model, rm.force_dofs, list(rm.chan_dofs) + list(rm.out_dofs))
    runs = calibration_runs(rm.spec, rm.model, rm.chan_dofs, rm.force_dofs, rm.out_dofs,
                            bundle.dt, mm=mm, progress=progress, load_model=load_model,
                            chain=bundle.chain)
    for c, sg in zip(bundle.channels, np.mean([r.sigma for r in runs], axis=0)):
        c.weight = float(1.0 / sg ** 2)
    return runs, mm


@dataclass
class BuildOptions:
    """The arguments of :func:`build` other than the model file (see its docstring)."""
    alpha: object = None
    window: object = None
    alpha_rule: object = None
    progress: bool = True
    report_dir: object = None
    n_modes: int | None = None
    maps: bool = True
    maps_cache: object = None
    limit: bool = True
    records: object = None
    hybrid: object = None


@dataclass
class BuildState:
    """What the stages of :func:`build` hand on, each stage reading some fields and setting
    others (the stage that sets a field is named in its comment)."""
    opts: BuildOptions
    spec: ModelSpec                       # _stage_model
    est_spec: EstimatorSpec               # _stage_model
    model: object                         # _stage_model: the constrained FE model
    timings: dict = field(default_factory=dict)  # every stage, in the order they run
    rm: ReducedModel | None = None        # _stage_reduce
    bundle: Bundle | None = None          # _stage_reduce, then each stage that changes it
    meta: dict = field(default_factory=dict)  # _stage_reduce: the design bundle's meta
    mm: object = None                     # _stage_calibrate: ModalModel of the full model
    load_fit: object = None               # _stage_calibrate: LoadFit of the records
    load_model: object = None             # _stage_calibrate: LoadModel learned from them
    runs: list = field(default_factory=list)  # _stage_calibrate: the calibration runs
    t_calibration: float = 0.0            # _stage_calibrate: its time [s]
    alpha_rule: object = None             # _stage_choose: a number or a rule name
    made: Bundle | None = None            # _stage_choose: the smoother bundle the choice designed
    alpha: float = 0.0                    # _stage_choose: the chosen alpha (0: smoother)
    choice: AlphaChoice | None = None     # _stage_choose: the L-curve, for the report


def _timed(st: BuildState, name: str, t0: float) -> None:
    st.timings[name] = time.perf_counter() - t0


def _stage_model(model_path, opts: BuildOptions) -> BuildState:
    """Step 1: the model file, validated, and the constrained FE model."""
    t0 = time.perf_counter()
    spec = model_path if hasattr(model_path, "sensors") else load_model_file(model_path)
    if not spec.sensors:
        raise ValueError(f"{spec.where('[[sensors]]')}: a bundle needs at least one sensor")
    if not spec.forces:
        raise ValueError(f"{spec.where('[[forces]]')}: a bundle needs at least one force")
    est_spec = spec.estimator if spec.estimator is not None else EstimatorSpec()
    model = build_fe_model(spec, progress=opts.progress)
    st = BuildState(opts=opts, spec=spec, est_spec=est_spec, model=model)
    _timed(st, "FE model", t0)
    return st


def _stage_reduce(st: BuildState) -> None:
    """Step 2: the reduced model and the estimator's bundle before calibration."""
    t1 = time.perf_counter()
    st.rm = reduce_model(st.spec, st.model, n_modes=st.opts.n_modes, progress=st.opts.progress)
    _timed(st, "reduction", t1)
    st.bundle = design_bundle(st.rm, st.est_spec, st.opts.window)
    st.meta = st.bundle.meta


def _stage_calibrate(st: BuildState) -> None:
    """Step 3: the load model of the records (if any) and the honest calibration runs, which
    set the channel weights."""
    rm, progress = st.rm, st.opts.progress
    t2 = time.perf_counter()
    mm = modal_model(rm.model, rm.force_dofs, list(rm.chan_dofs) + list(rm.out_dofs))
    st.load_fit, st.load_model = learn_from_records(st.spec, mm, st.bundle, st.opts.records,
                                                    progress)
    if st.load_fit is not None:
        _timed(st, "load model", t2)
    t2 = time.perf_counter()
    st.runs, st.mm = calibrate(rm, st.bundle, progress, mm=mm, load_model=st.load_model)
    st.t_calibration = time.perf_counter() - t2


def _stage_limit(st: BuildState, max_delay: float):
    """Step 4 (report): the MMSE accuracy limit, into ``meta["limit"]``; its normalised RMS
    errors (the reference of the choice), None without ``limit``."""
    if not st.opts.limit:
        return None
    t4 = time.perf_counter()
    lim = model_limit(st.spec, st.model, delays=sorted({0.0, max_delay, 0.1}), mm=st.mm,
                      exact=False, loads=st.load_model, chain=st.bundle.chain)
    st.meta["limit"] = lim.as_dict()
    # the reduction's own error at each output, against the limit (a WARNING when comparable)
    loads = st.load_model if st.load_model is not None else force_spectra(st.spec)
    d = output_model_error(st.rm, st.mm, loads, st.bundle.dt)
    st.meta["reduction"]["output_error"] = d.tolist()
    if warn := model_error_warning(st.rm, d, lim.output_nrmse, sensor_model_error(
            st.rm, st.mm, loads, st.bundle.dt, lim.noise_std)):
        st.meta.setdefault("warnings", []).append(warn)
    _timed(st, "accuracy limit", t4)
    return np.concatenate([lim.force_nrmse, lim.output_nrmse])


def _alpha_method(smoother: bool, alpha_rule) -> str:
    """How alpha was chosen, for ``meta["alpha_method"]``."""
    if smoother:
        return "none (smoother)"
    if isinstance(alpha_rule, str) and alpha_rule == "auto":
        return "minimum calibration error"
    if isinstance(alpha_rule, str):
        return alpha_rule
    return "given"


def _stage_choose(st: BuildState) -> None:
    """Step 4: estimator, window and alpha by the lowest expected normalised RMS error on the
    calibration runs (:func:`offline.estimator_choice.select`); the L-curve for the report."""
    t2 = time.perf_counter()
    o, spec, est_spec, bundle, meta = st.opts, st.spec, st.est_spec, st.bundle, st.meta
    window_rule = o.window if o.window is not None else est_spec.window
    st.alpha_rule = o.alpha_rule
    if st.alpha_rule is None:  # a number or a rule name (auto, lcurve, gcv, discrepancy)
        st.alpha_rule = o.alpha if o.alpha is not None else est_spec.alpha
    # the one design path of the smoother (offline/smoother/settings.py): by name or chosen
    settings = smoother_settings(spec, est_spec, bundle.rate, st.load_model, window=o.window)
    forced = chain_policy(bundle.chain, est_spec, meta, bool(o.hybrid), spec.where("[hybrid]"))
    max_delay = float(getattr(est_spec, "max_delay", 0.02))
    windows = None if window_rule == "auto" else [bundle.window]
    reference = _stage_limit(st, max_delay)
    t2 += st.timings.get("accuracy limit", 0.0)
    # every candidate [estimator] method asks for, scored on the same runs, converted as the
    # chain converts (offline.calibration_runs); sensor dynamics (forced): the smoother alone,
    # the only estimator that models them
    sel = select(bundle, st.runs, max_delay, windows=windows, alpha_rule=st.alpha_rule,
                 candidates=candidates_for("smoother" if forced else est_spec.method,
                                           st.alpha_rule),
                 progress=o.progress, reference=reference, smoother=settings)
    st.made = sel.bundle  # the bundle the chosen candidate designed and was scored as
    meta["selection"] = sel.report
    L = int(sel.best["window"])
    st.alpha = float(sel.best.get("alpha", 0.0))
    st.bundle = bundle.replace(window=L, **sel.best.get("changes", {}))
    meta["alpha_method"] = _alpha_method(st.made is not None, st.alpha_rule)
    if o.report_dir is not None:
        try:  # the L-curve of the chosen window, for the report
            st.choice = choose_alpha(st.bundle, st.runs[0].Y, window=L, method="lcurve",
                                     progress=False)
        except EstimatorError:
            st.choice = None
    st.timings["calibration + choice"] = st.t_calibration + time.perf_counter() - t2


def _stage_estimator(st: BuildState) -> None:
    """Step 4 (end): the chosen estimator in the bundle, the Tikhonov step operator derived and
    its spectral radius checked (an unstable estimator is refused), the calibration's meta."""
    spec, runs, meta = st.spec, st.runs, st.meta
    # each channel's std under the declared load (all runs): the device checks a strain
    # gauge's expected peak against its converter's input range (edge/daemon/gauge.py)
    meta["channel_std"] = {c.name: float(np.std(np.concatenate([r.Y_clean[:, i] for r in runs])))
                           for i, c in enumerate(st.bundle.channels)}
    duration = spec.calibration.duration if spec.calibration else 2.0
    for warn in filter(None, (noise_warning(spec, st.load_model), point_sample_warning(spec))):
        meta.setdefault("warnings", []).append(warn)
    bundle = st.bundle.replace(alpha=st.alpha)
    try:
        op = None if st.made is not None else derive_operator(bundle)
    except EstimatorError as exc:
        raise EstimatorError(f"{spec.where('[estimator]')}: {exc}") from None
    if op is not None:
        meta["spectral_radius"] = op.spectral_radius
        meta["condition"] = op.info["condition"]
    cal = spec.calibration
    levels = np.array([max(s.noise, 1e-4) for s in spec.sensors])
    meta["calibration"] = {"duration_s": float(duration), "noise": levels.tolist(),
                           "load": (cal.load.type if cal else "random"),
                           "model": "full", "engine": "exact modal (FOH, 10 sub-steps) + "
                           "residual flexibility", "modes": int(st.mm.lam.size),
                           "seeds": [r.seed for r in runs],
                           "warmup_s": float(runs[0].start * bundle.dt)}
    bundle = bundle.replace(meta=meta)
    if st.made is not None:  # kf_* gains, meta["estimator"]: designed once, by the choice
        bundle = st.made.replace(meta={**meta, **{k: st.made.meta[k] for k in (  # accel_modes
            "estimator", "reduction")}})
    if st.choice is not None:
        bundle.extras.update({"lcurve_alphas": st.choice.alphas,
                              "lcurve_residual": st.choice.residual_norm,
                              "lcurve_solution": st.choice.solution_norm})
    st.bundle = bundle


def _stage_maps(st: BuildState) -> None:
    """Step 5: the inverse maps of ``[[parameters]]`` (docs/inverse.md "Build"), the reduction
    of step 2 reused."""
    if not (st.opts.maps and st.spec.raw.get("parameters")):
        return
    t3 = time.perf_counter()
    st.bundle = attach_inverse_maps(st.bundle, st.spec.path, cache_dir=st.opts.maps_cache,
                                    progress=st.opts.progress, reduced=st.rm)
    _timed(st, "inverse maps", t3)


def _stage_device_gains(st: BuildState) -> None:
    """The smoother's gains for the device: to follow the load's level (kf_level_*), to check
    the measurement chain (kf_alt_*), and the model's own error in the stated std (std_scale)."""
    if st.bundle.method != "smoother":
        return
    t5 = time.perf_counter()
    # a noise declared relative to the signal is tied to the load's size
    relative = st.load_model is None and all(getattr(s, "noise_std", None) is None
                                             for s in st.spec.sensors)
    st.bundle = with_load_levels(st.bundle, scale_noise=relative)
    _timed(st, "load levels", t5)
    t5 = time.perf_counter()
    st.bundle = with_chain_alternative(st.bundle, st.runs)
    _timed(st, "chain check", t5)
    t5 = time.perf_counter()
    runs = own_load_runs(st.rm, st.bundle, st.mm, st.runs, st.load_model)
    st.bundle = with_std_scale(st.bundle, runs, narrow=True)  # the smoother's own load
    _timed(st, "std scale", t5)


def _stage_hybrid(st: BuildState) -> None:
    """The hybrid twin: a neural correction trained on force-and-response records."""
    if not st.opts.hybrid:
        return
    t6 = time.perf_counter()
    st.bundle = attach_hybrid(st.bundle, st.rm, st.spec, st.opts.hybrid, st.opts.progress)[0]
    _timed(st, "hybrid", t6)


def _stage_load_meta(st: BuildState) -> None:
    """The final estimator's accuracy over the limit, and the load model the bundle was built
    for (``meta["load_model"]``) with its warnings and, if learned, its check on the records."""
    spec, bundle, load_model = st.spec, st.bundle, st.load_model
    if st.opts.limit:  # the final estimator's error over the limit at its delay, same load
        acc = build_accuracy(bundle, st.runs, spec, st.model, st.mm, load_model)
        if acc:
            bundle.meta["accuracy"] = acc
    used = load_model if load_model is not None else declared_load_model(spec, bundle.rate)
    bundle.meta["load_model"] = used.as_meta()
    warns = bundle_load_warnings(st.mm, used, bundle, spec)  # loads the records cannot show
    if warns:
        info = bundle.meta["load_model"]["info"]
        bundle.meta["load_model"]["info"] = {**info, "warnings": info.get("warnings", []) + warns}
    if st.load_fit is not None:  # does it explain the records? (whatever estimator was chosen)
        fit = st.load_fit
        fit.info["check"] = check_learned(bundle, spec, st.est_spec, load_model,
                                          fit.info["data"])
        bundle.meta["load_model"]["info"]["check"] = dict(fit.info["check"])
        bundle.meta["load_model"]["info"]["choice"] = choice_meta(fit.info["choice"])


def _result(st: BuildState) -> BuildResult:
    rm, run = st.rm, st.runs[0]
    return BuildResult(bundle=st.bundle, reduction=rm.reduction, model=st.model, spec=st.spec,
                       choice=st.choice,
                       calibration={"t": run.t, "Y": run.Y, "Y_clean": run.Y_clean, "F": run.F,
                                    "runs": st.runs},
                       timings=st.timings,
                       full_dofs={"channels": rm.chan_dofs, "forces": rm.force_dofs,
                                  "outputs": rm.out_dofs}, reduced=rm, load_fit=st.load_fit)


def build(model_path, *, alpha=None, window=None, alpha_rule=None, progress=True,
          report_dir=None, n_modes=None, maps=True, maps_cache=None,
          limit=True, records=None, hybrid=None) -> BuildResult:
    """Build the bundle of a model file (see module docstring). Returns a BuildResult.

    ``alpha``: a value or rule overriding ``[estimator] alpha``; ``alpha_rule`` overrides both
    (the rule name; not to be confused with the reduction ``method`` of ``[reduction]``).

    ``maps``: train and attach the inverse maps when the model file has ``[[parameters]]``
    (step 5, :func:`attach_inverse_maps`); ``maps_cache``: directory for the cached training
    windows (default :func:`default_maps_cache`); ``limit``: compute the MMSE accuracy limit
    (:mod:`offline.limit`) for the report. ``records``: paths of records of the structure in
    operation (time and sensor columns): the load and noise model is learned from them
    (:mod:`offline.load`) and drives the calibration runs, the estimator choice, its gains
    and its stated std, and the limit. ``model_path`` may also be a validated
    :class:`~offline.model.ModelSpec` (e.g. an edited copy, :func:`offline.model.spec_from_dict`).
    ``hybrid``: paths of force-and-response records: the neural correction of ``[hybrid]`` is
    trained on them (:mod:`offline.hybrid`, docs/hybrid.md).
    """
    opts = BuildOptions(alpha=alpha, window=window, alpha_rule=alpha_rule, progress=progress,
                        report_dir=report_dir, n_modes=n_modes, maps=maps, maps_cache=maps_cache,
                        limit=limit, records=records, hybrid=hybrid)
    st = _stage_model(model_path, opts)
    for stage in (_stage_reduce, _stage_calibrate, choose_reduction, _stage_choose, _stage_estimator,
                  _stage_maps, _stage_device_gains, _stage_hybrid, _stage_load_meta):
        stage(st)
    res = _result(st)
    if report_dir is not None:
        write_build_report(res, report_dir)
    return res


# --- inverse maps (step 6): begin -------------------------------------------------------
def default_maps_cache() -> Path:
    """The inverse maps' training cache: ``$VSENSE_CACHE/inverse`` (~/.cache/vsense)."""
    return Path(os.environ.get("VSENSE_CACHE", "~/.cache/vsense")).expanduser() / "inverse"


def attach_inverse_maps(bundle: Bundle, model_path, cache_dir=None, progress=True,
                        reduced: ReducedModel | None = None) -> Bundle:
    """Train the inverse map(s) of ``[[parameters]]``/``[experiment]``/``[inverse]`` and add
    them and the parametric parts to ``bundle`` (:func:`offline.inverse.pipeline.attach`).

    The training windows are cached in ``cache_dir`` (default :func:`default_maps_cache`).
    The map's test metrics and timings go to ``meta["inverse"]``. ``reduced``: the build's
    reduced model (reused, not reduced again).
    """
    cache = Path(cache_dir) if cache_dir is not None else default_maps_cache()
    cache.mkdir(parents=True, exist_ok=True)
    out, res = attach(bundle, model_path, cache_dir=cache, progress=progress, reduced=reduced)
    out.meta["inverse"]["timings"] = {k: float(v) for k, v in res["timings"].items()}
    return out
# --- inverse maps: end -----------------------------------------------------------------
