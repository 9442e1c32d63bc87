"""From a model file to a bundle: FE model, reduction, calibration, alpha, stability check.

Steps (``vsense-offline build MODEL.toml -o BUNDLE.npz [--report DIR]``), each a public function:

1. load and validate the model file, assemble the constrained FE model
   (:func:`offline.model.load_model_file`, :func:`offline.model.build_fe_model`);
2. the reduced model (:func:`offline.reduced.reduce_model`): masters = measured DOFs first
   (paper eq. 8-10), then force DOFs, then the declared masters; GMR+ / Craig-Bampton / Guyan;
   damping (Rayleigh on the reduced matrices, paper eq. 7, plus ``T^T C T`` of explicit damping);
   virtual outputs = rows of T at their physical DOFs; the estimator's bundle before
   calibration (:func:`design_bundle`);
3. honest calibration runs (:func:`calibrate`, :mod:`offline.calibration_runs`): the FULL model,
   integrated exactly mode by mode (not the estimator's reduced Newmark step), under the
   ``[calibration]`` load(s) with the sensors' noise, ``[calibration] seeds`` of them; channel
   weights ``1 / sigma^2``;
4. estimator, window (delay <= ``[estimator] max_delay``) and alpha chosen by the lowest expected
   normalised RMS error on them (:func:`offline.selection.select`; or alpha by a rule / given);
   the MMSE accuracy limit (:mod:`offline.limit`) for the report; the step operator is derived
   and its spectral radius checked (an unstable estimator is refused, not shipped);
5. inverse maps of ``[[parameters]]`` (:func:`attach_inverse_maps`, the reduction of step 2
   reused); the bundle is written.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edge import __version__
from edge.bundle import Bundle, IdentifiedForce, SensorChannel, VirtualOutput
from edge.estimator import EstimatorError, derive_operator
from offline.calibration_runs import calibration_runs
from offline.hybrid import attach_hybrid
from offline.inverse.pipeline import attach
from offline.limit.model import model_limit, noise_std
from offline.limit.ratio import build_accuracy, format_ratios
from offline.load import declared_load_model, read_records
from offline.load.check import check_learned
from offline.smoother.chain_alt import with_chain_alternative
from offline.load.units import records_at_model_level
from offline.load.select import choice_meta, learn_and_choose
from offline.load.declared import replaced_kinds
from offline.load.model import total_rms_note
from offline.load.observability import bundle_blind_warning
from offline.load.plots import plot_spectra, plot_whiteness
from offline.limit.transfer import modal_model
from offline.model import EstimatorSpec, build_fe_model, load_model_file
from offline.reduced import ReducedModel, master_dofs, reduce_model
from offline.regularization import AlphaChoice, choose_alpha
from offline.report import write_build_html
from offline.selection import (candidates_for, chain_policy, default_chain_fallback,
                               plot_selection, select, worse_than_zero)
from offline.smoother import smoother_settings, with_load_levels
from offline.smoother.std_scale import scale_note, with_std_scale


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
        b = self.bundle
        lines = [
            f"bundle {b.bundle_id if b.content_hash else b.meta.get('name')}: {b.n} reduced DOFs "
            f"({len(self.reduction.masters)} masters + {self.reduction.n_modes} modes, "
            f"{self.reduction.method}) from {self.model.n_dofs} FE DOFs",
            f"  rate {b.rate:g} samples/s, Newmark beta={b.beta:g} gamma={b.gamma:g}, "
            f"window L={b.window} (delay {(b.window - 1) * b.dt * 1e3:g} ms)",
            f"  channels: {', '.join(f'{c.name} ({c.kind}, {c.unit})' for c in b.channels)}",
            f"  forces: {', '.join(f.name for f in b.forces)}",
            f"  outputs: {', '.join(f'{o.name} ({o.kind}, {o.unit})' for o in b.outputs)}",
            f"  alpha = {b.alpha:.4g} ({b.meta.get('alpha_method', '')}), spectral radius "
            f"{_radius(b.meta):.6f}",
        ]
        if b.method == "smoother":  # Kalman fixed-lag smoother (offline/smoother.py)
            e = b.meta["estimator"]
            lines[-1] = (f"  Kalman fixed-lag smoother, lag {e['lag']} "
                         f"({e['lag'] * b.dt * 1e3:g} ms), force models "
                         + ", ".join(f"{m['kind']} {m['band'][0]:.3g}-{m['band'][1]:.3g} Hz "
                                     f"rms {m['rms']:.3g}" for m in e["force_models"])
                         + total_rms_note(e)
                         + "; std " + ", ".join(f"{n} {v:.3g}" for n, v in zip(
                             [x.name for x in (*b.forces, *b.outputs)], e["std"]))
                         + scale_note(e))
        sel = b.meta.get("selection")
        if sel:
            best = sel["best"]
            names = sel["targets"]
            errs = ", ".join(f"{n} {v:.3g} (+/- {s:.2g})"
                             for n, v, s in zip(names, best["nrmse"], best["spread"]))
            lines.append(f"  chosen on {sel['n_runs']} full-model calibration runs: "
                         f"{sel['chosen']} L={best['window']}, normalised RMS error {errs}")
            worse = worse_than_zero(names, best["nrmse"])
            if worse:
                lines.append(f"  WARNING: {worse}")
        if not b.chain.ideal:
            c, w = b.chain, b.chain.intervals(b.dt, len(b.channels))
            lines.append(f"  acquisition: {c.converter} {c.drate:g} SPS {c.mode}, each "
                         f"conversion modelled by the smoother ({w} states per channel)")
        if b.chain.dynamic:
            nr, nb = b.chain.sensor_states(len(b.channels))
            lines.append(f"  sensor dynamics modelled by the smoother: {nr} high-pass and "
                         f"{nb} drifting-offset state(s)" + (
                             f", moving averages over {b.chain.intervals(b.dt, len(b.channels))}"
                             f" intervals" if b.chain.average else ""))
        for w in b.meta.get("warnings", []):
            lines.append(f"  WARNING: {w}")
        lim = b.meta.get("limit")
        if lim:
            nc = lim["force_nrmse"] + lim["output_nrmse"]
            lines.append("  accuracy limit (lowest normalised RMS error of any estimator; MMSE, "
                         "non-causal): " + ", ".join(
                f"{n} {v:.3g}" for n, v in zip(lim["force_names"] + lim["output_names"], nc)))
        if b.meta.get("accuracy"):  # the one ratio of docs/glossary.md (offline/limit/ratio.py)
            lines.append("  " + format_ratios(b.meta["accuracy"]))
        inv = b.meta.get("inverse")  # inverse maps (step 6): begin
        if inv:
            for name, mm in inv["maps"].items():
                mu = mm.get("test_metrics", {}).get("mu_abs", [])
                errs = ", ".join(f"{p} {100 * v:.2f} %" for p, v in zip(mm["names"], mu))
                lines.append(f"  inverse map {name} ({mm['kind']}, {len(mm['names'])} parameters, "
                             f"features {mm['features']['kind']}): mean absolute error on test "
                             f"data {errs}")  # end
        hy = b.meta.get("hybrid")
        if hy:
            lines.append(f"  hybrid twin: {hy['inputs']} -> {hy['hidden']}x{hy['layers']} -> "
                         f"{hy['outputs']} ({hy['acts_on']}), validation loss "
                         f"{hy['loss_best_val']:.4g} (linear {hy['loss_linear_val']:.4g}), "
                         f"epoch {hy['best_epoch']} of {hy['epochs']}")
        lm = b.meta.get("load_model") or {}
        for w in lm.get("info", {}).get("warnings", []):
            lines.append(f"  WARNING: {w}")
        if self.load_fit is not None:
            lines.append("  " + self.load_fit.summary(
                [f.name for f in b.forces], [c.name for c in b.channels]).replace("\n", "\n  "))
            lines.append("  " + self.load_fit.info["choice"]["text"].replace("\n", "\n  "))
            chk = self.load_fit.info.get("check")
            if chk:
                lines.append(f"  {chk['text']}")
                if chk.get("chain"):
                    lines.append(f"  {chk['chain']['text']}")
        lines.append("  timings: " + ", ".join(f"{k} {v:.2f} s" for k, v in self.timings.items()))
        return "\n".join(lines)


def _radius(meta: dict) -> float:
    """Spectral radius of the estimator (Tikhonov step operator or smoother)."""
    return float(meta.get("spectral_radius",
                          meta.get("estimator", {}).get("spectral_radius", float("nan"))))


#: Former private name of :func:`offline.reduced.master_dofs` (kept for callers).
_masters = master_dofs


def design_bundle(rm: ReducedModel, est_spec: EstimatorSpec, window=None) -> Bundle:
    """The estimator's bundle before calibration: reduced matrices, signals, Newmark settings.

    Channel weights are 1 and ``alpha`` 0 until the calibration runs choose them; ``window``
    (int or "auto", default ``[estimator] window``) gives ``L`` (1 for "auto").
    """
    spec, model, red = rm.spec, rm.model, rm.reduction
    table = model.dof_table()
    channels = [SensorChannel(name=s.name, dof=rm.position(d), kind=s.kind, unit=s.unit,
                              weight=1.0, node=table[d][0], dof_name=table[d][1])
                for s, d in zip(spec.sensors, rm.chan_dofs)]
    forces = [IdentifiedForce(name=f.name, dof=rm.position(d), node=table[d][0],
                              dof_name=table[d][1], scale=float(f.scale))
              for f, d in zip(spec.forces, rm.force_dofs)]
    outputs = [VirtualOutput(name=o.name, row=row, kind=o.kind, unit=o.unit, node=table[d][0],
                             dof_name=table[d][1])
               for o, d, row in zip(spec.outputs, rm.out_dofs, rm.output_rows())]
    rule = window if window is not None else est_spec.window
    meta = {
        "name": spec.name, "model_file": str(Path(spec.path).name),
        "reduction": {"method": red.method, "masters": len(rm.masters), "modes": red.n_modes,
                      "full_dofs": int(model.n_dofs)},
        "vsense_version": __version__,
    }
    return Bundle(M=red.M, C=rm.C, K=red.K, dt=1.0 / est_spec.rate, channels=channels,
                  forces=forces, outputs=outputs, alpha=0.0, beta=est_spec.beta,
                  gamma=est_spec.gamma, window=1 if rule == "auto" else int(rule),
                  discretization=est_spec.discretization, regularization=est_spec.regularization,
                  meta=meta, chain=spec.chain(),
                  report={"freqs_full": red.report.freqs_full,
                          "freqs_reduced": red.report.freqs_reduced,
                          "eig_error": red.report.eig_error})


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
    the ``[calibration]`` load(s) with the sensors' noise (:mod:`offline.calibration_runs`).
    Sets ``weight = 1 / sigma^2`` on ``bundle.channels`` (sigma: the mean noise std of the
    runs, per channel). ``load_model``: a load model learned from records
    (:mod:`offline.load`) drives the runs instead of the ``[calibration]`` loads.

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
    sigma = np.mean([r.sigma for r in runs], axis=0)
    for c, sg in zip(bundle.channels, sigma):
        c.weight = float(1.0 / sg ** 2)
    return runs, mm


def build(model_path, *, alpha=None, window=None, alpha_rule=None, progress=True,
          report_dir=None, n_modes=None, maps=True, maps_cache=None,
          limit=True, records=None, hybrid=None) -> BuildResult:
    """Build the bundle of a model file (see module docstring). Returns a BuildResult.

    ``alpha``: a value or rule overriding ``[estimator] alpha``; ``alpha_rule`` overrides both
    (the rule name; not to be confused with the reduction ``method`` of ``[reduction]``).

    ``maps``: train and attach the inverse maps when the model file has ``[[parameters]]``
    (step 6, :func:`attach_inverse_maps`); ``maps_cache``: directory for the cached training
    windows (default :func:`default_maps_cache`); ``limit``: compute the MMSE accuracy limit
    (:mod:`offline.limit`) for the report. ``records``: paths of records of the structure in
    operation (time and sensor columns): the load and noise model is learned from them
    (:mod:`offline.load`) and drives the calibration runs, the estimator choice, its gains
    and its stated std, and the limit. ``model_path`` may also be a validated
    :class:`~offline.model.ModelSpec` (e.g. an edited copy, :func:`offline.model.spec_from_dict`).
    ``hybrid``: paths of force-and-response records: the neural correction of ``[hybrid]`` is
    trained on them (:mod:`offline.hybrid`, docs/hybrid.md).
    """
    timings = {}
    t0 = time.perf_counter()
    spec = model_path if hasattr(model_path, "sensors") else load_model_file(model_path)
    model_path = spec.path
    if not spec.sensors:
        raise ValueError(f"{spec.where('[[sensors]]')}: a bundle needs at least one sensor")
    if not spec.forces:
        raise ValueError(f"{spec.where('[[forces]]')}: a bundle needs at least one force")
    est_spec = spec.estimator if spec.estimator is not None else EstimatorSpec()
    model = build_fe_model(spec, progress=progress)
    timings["FE model"] = time.perf_counter() - t0

    t1 = time.perf_counter()
    rm = reduce_model(spec, model, n_modes=n_modes, progress=progress)
    red = rm.reduction
    chan_dofs, force_dofs, out_dofs = rm.chan_dofs, rm.force_dofs, rm.out_dofs
    timings["reduction"] = time.perf_counter() - t1
    bundle = design_bundle(rm, est_spec, window)
    meta, L, dt = bundle.meta, bundle.window, bundle.dt
    window_rule = window if window is not None else est_spec.window

    # step 3: honest calibration runs, weights 1/sigma^2; step 4: estimator, window and alpha
    t2 = time.perf_counter()
    mm = modal_model(rm.model, rm.force_dofs, list(rm.chan_dofs) + list(rm.out_dofs))
    load_fit, load_model = learn_from_records(spec, mm, bundle, records, progress)
    if load_fit is not None:
        timings["load model"] = time.perf_counter() - t2
    t2 = time.perf_counter()
    runs, mm = calibrate(rm, bundle, progress, mm=mm, load_model=load_model)
    levels = np.array([max(s.noise, 1e-4) for s in spec.sensors])
    choice = None
    if alpha_rule is None:  # a number or a rule name (auto, lcurve, gcv, discrepancy)
        alpha_rule = alpha if alpha is not None else est_spec.alpha
    # the one design path of the smoother (offline/smoother/settings.py): by name or chosen
    settings = smoother_settings(spec, est_spec, bundle.rate, load_model, window=window)
    default_chain_fallback(spec, bundle, bool(hybrid))
    forced = chain_policy(bundle.chain, est_spec, meta, bool(hybrid), spec.where("[hybrid]"))
    max_delay = float(getattr(est_spec, "max_delay", 0.02))
    windows = None if window_rule == "auto" else [L]
    reference = None
    if limit:
        t4 = time.perf_counter()
        lim = model_limit(spec, model, delays=sorted({0.0, max_delay, 0.1}), mm=mm, exact=False,
                          loads=load_model, chain=bundle.chain)
        meta["limit"] = lim.as_dict()
        reference = np.concatenate([lim.force_nrmse, lim.output_nrmse])
        timings["accuracy limit"] = time.perf_counter() - t4
        t2 += timings["accuracy limit"]
    # every candidate [estimator] method asks for, scored on the same runs; a measurement
    # chain (forced): the smoother alone, the only estimator that models it, scored on runs
    # converted as the chain converts (offline.calibration_runs)
    sel = select(bundle, runs, max_delay, windows=windows, alpha_rule=alpha_rule,
                 candidates=candidates_for("smoother" if forced else est_spec.method,
                                           alpha_rule),
                 progress=progress, reference=reference, smoother=settings)
    made = sel.bundle  # the bundle the chosen candidate designed and was scored as
    meta["selection"] = sel.report
    L = int(sel.best["window"])
    alpha_val = float(sel.best.get("alpha", 0.0))
    bundle = bundle.replace(window=L, **sel.best.get("changes", {}))
    smoother = made is not None
    if smoother:
        meta["alpha_method"] = "none (smoother)"
    elif isinstance(alpha_rule, str) and alpha_rule == "auto":
        meta["alpha_method"] = "minimum calibration error"
    elif isinstance(alpha_rule, str):
        meta["alpha_method"] = alpha_rule
    else:
        meta["alpha_method"] = "given"
    if report_dir is not None:
        try:  # the L-curve of the chosen window, for the report
            choice = choose_alpha(bundle, runs[0].Y, window=L, method="lcurve",
                                  progress=False)
        except EstimatorError:
            choice = None
    timings["calibration + choice"] = time.perf_counter() - t2
    Yc, Y, F = runs[0].Y_clean, runs[0].Y, runs[0].F
    tt = runs[0].t
    # each channel's std under the declared load (all runs): the device checks a strain
    # gauge's expected peak against its converter's input range (edge/daemon/gauge.py)
    meta["channel_std"] = {c.name: float(np.std(np.concatenate([r.Y_clean[:, i] for r in runs])))
                           for i, c in enumerate(bundle.channels)}
    duration = spec.calibration.duration if spec.calibration else 2.0

    bundle = bundle.replace(alpha=alpha_val)
    try:
        op = None if smoother else derive_operator(bundle)
    except EstimatorError as exc:
        raise EstimatorError(f"{spec.where('[estimator]')}: {exc}") from None
    if op is not None:
        meta["spectral_radius"] = op.spectral_radius
        meta["condition"] = op.info["condition"]
    cal = spec.calibration
    meta["calibration"] = {"duration_s": float(duration), "noise": levels.tolist(),
                           "load": (cal.load.type if cal else "random"),
                           "model": "full", "engine": "exact modal (FOH, 10 sub-steps) + "
                           "residual flexibility", "modes": int(mm.lam.size),
                           "seeds": [r.seed for r in runs],
                           "warmup_s": float(runs[0].start * dt)}
    bundle = bundle.replace(meta=meta)
    if made is not None:  # kf_* gains, meta["estimator"]: designed once, above
        bundle = made.replace(meta={**meta, "estimator": made.meta["estimator"]})
    if choice is not None:
        bundle.extras.update({"lcurve_alphas": choice.alphas,
                              "lcurve_residual": choice.residual_norm,
                              "lcurve_solution": choice.solution_norm})
    # --- inverse maps (step 6; docs/inverse.md "Build"): begin --------------------------
    if maps and spec.raw.get("parameters"):
        t3 = time.perf_counter()
        bundle = attach_inverse_maps(bundle, model_path, cache_dir=maps_cache, progress=progress,
                                     reduced=rm)
        timings["inverse maps"] = time.perf_counter() - t3
    # --- inverse maps: end ---------------------------------------------------------------
    if bundle.method == "smoother":  # gains for the device to follow the load's level
        t5 = time.perf_counter()
        # a noise declared relative to the signal is tied to the load's size
        relative = load_model is None and all(getattr(s, "noise_std", None) is None
                                              for s in spec.sensors)
        bundle = with_load_levels(bundle, scale_noise=relative)
        timings["load levels"] = time.perf_counter() - t5
        t5 = time.perf_counter()  # the device's measurement-chain check (kf_alt_*)
        bundle = with_chain_alternative(bundle)
        timings["chain check"] = time.perf_counter() - t5
        t5 = time.perf_counter()  # the model's own error in the stated std (kf_std_scale)
        bundle = with_std_scale(bundle, runs)
        timings["std scale"] = time.perf_counter() - t5
    if hybrid:  # the hybrid twin: a neural correction trained on force-and-response records
        t6 = time.perf_counter()
        bundle = attach_hybrid(bundle, rm, spec, hybrid, progress)[0]
        timings["hybrid"] = time.perf_counter() - t6
    if limit:  # the final estimator's error over the limit at its delay, same load
        acc = build_accuracy(bundle, runs, spec, model, mm, load_model)
        if acc:
            bundle.meta["accuracy"] = acc
    used = load_model if load_model is not None else declared_load_model(spec, bundle.rate)
    bundle.meta["load_model"] = used.as_meta()
    blind = bundle_blind_warning(mm, used, bundle, spec)  # loads no record tells apart
    if blind:
        info = bundle.meta["load_model"]["info"]
        bundle.meta["load_model"]["info"] = {**info, "warnings": info.get("warnings", []) + [blind]}
    if load_fit is not None:  # does it explain the records? (whatever estimator was chosen)
        load_fit.info["check"] = check_learned(bundle, spec, est_spec, load_model,
                                               load_fit.info["data"])
        bundle.meta["load_model"]["info"]["check"] = dict(load_fit.info["check"])
        bundle.meta["load_model"]["info"]["choice"] = choice_meta(load_fit.info["choice"])
    res = BuildResult(bundle=bundle, reduction=red, model=model, spec=spec, choice=choice,
                      calibration={"t": tt, "Y": Y, "Y_clean": Yc, "F": F, "runs": runs},
                      timings=timings,
                      full_dofs={"channels": chan_dofs, "forces": force_dofs,
                                 "outputs": out_dofs}, reduced=rm, load_fit=load_fit)
    if report_dir is not None:
        write_build_report(res, report_dir)
    return res


# --- inverse maps (step 6): begin -------------------------------------------------------
def default_maps_cache() -> Path:
    """Cache of the inverse-map training windows: ``$VSENSE_CACHE/inverse`` (default
    ``~/.cache/vsense/inverse``)."""
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


def write_build_report(res: BuildResult, report_dir) -> Path:
    """PNG plots (eigenvalue error, L-curve), a summary JSON/text and ``index.html``
    (:func:`offline.report.write_build_html`) in ``report_dir``."""
    d = Path(report_dir)
    d.mkdir(parents=True, exist_ok=True)
    res.reduction.report.plot(d / "eigenvalue_error.png")
    if res.choice is not None:
        res.choice.plot(d / "lcurve.png")
    if "selection" in res.bundle.meta:
        plot_selection(res.bundle.meta["selection"], d / "selection.png", res.bundle.dt)
    if res.load_fit is not None:  # declared vs learned spectra, innovations on the record
        b = res.bundle
        plot_spectra(res.load_fit, [f.name for f in b.forces], d / "load_spectra.png")
        if b.method == "smoother":
            plot_whiteness(b, res.load_fit.info["data"][0], d / "innovations.png")
    (d / "build_summary.txt").write_text(res.summary() + "\n\n"
                                         + res.reduction.report.format(res.bundle.rate / 2)
                                         + "\n")
    (d / "build_meta.json").write_text(json.dumps(res.bundle.meta, indent=2, default=float))
    write_build_html(res, d)  # d/index.html: the same, self-contained (PNGs embedded)
    return d
