"""From a model file to a bundle: FE model, reduction, calibration, alpha, stability check.

Steps (``vsense-offline build MODEL.toml -o BUNDLE.npz [--report DIR]``):

1. load and validate the model file, assemble the constrained FE model;
2. masters = measured DOFs first (paper eq. 8-10), then force DOFs, then the declared masters;
   reduce (GMR+ / Craig-Bampton / Guyan) and add damping (Rayleigh on the reduced matrices,
   paper eq. 7, plus ``T^T C T`` of explicit damping);
3. virtual outputs = rows of T at their physical DOFs;
4. honest calibration runs (:mod:`offline.calibration_runs`, :mod:`offline.selection`): the FULL model, integrated exactly
   mode by mode (not the estimator's reduced Newmark step), under the ``[calibration]`` load(s)
   with the sensors' noise, ``[calibration] seeds`` of them; channel weights ``1 / sigma^2``;
   estimator, window (delay <= ``[estimator] max_delay``) and alpha chosen by the lowest
   expected normalised RMS error on them (or alpha by a rule / given); the MMSE accuracy limit
   (:mod:`offline.limit`) for the report;
5. the step operator is derived and its spectral radius checked (an unstable estimator is
   refused, not shipped); the bundle is written.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edge import __version__
from edge.bundle import Bundle, Channel, Force, Output
from edge.estimator import EstimatorError, derive_operator
from offline.regularization import AlphaChoice


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
                         + ", ".join(f"{m['kind']} {m['band'][0]:g}-{m['band'][1]:g} Hz "
                                     f"rms {m['rms']:g}" for m in e["force_models"])
                         + "; std " + ", ".join(f"{n} {v:.3g}" for n, v in zip(
                             [x.name for x in (*b.forces, *b.outputs)], e["std"])))
        sel = b.meta.get("selection")
        if sel:
            best = sel["best"]
            names = sel["targets"]
            errs = ", ".join(f"{n} {v:.3g} (+/- {s:.2g})"
                             for n, v, s in zip(names, best["nrmse"], best["spread"]))
            lines.append(f"  chosen on {sel['n_runs']} full-model calibration runs: "
                         f"{sel['chosen']} L={best['window']}, normalised RMS error {errs}")
        lim = b.meta.get("limit")
        if lim:
            nc = lim["force_nrmse"] + lim["output_nrmse"]
            lines.append("  MMSE limit (non-causal): " + ", ".join(
                f"{n} {v:.3g}" for n, v in zip(lim["force_names"] + lim["output_names"], nc)))
        inv = b.meta.get("inverse")  # inverse maps (step 6): begin
        if inv:
            for name, mm in inv["maps"].items():
                mu = mm.get("test_metrics", {}).get("mu_abs", [])
                errs = ", ".join(f"{p} {100 * v:.2f} %" for p, v in zip(mm["names"], mu))
                lines.append(f"  inverse map {name} ({mm['kind']}, {len(mm['names'])} parameters, "
                             f"features {mm['features']['kind']}): test mean |eps| {errs}")  # end
        lines.append("  timings: " + ", ".join(f"{k} {v:.2f} s" for k, v in self.timings.items()))
        return "\n".join(lines)


def _radius(meta: dict) -> float:
    """Spectral radius of the estimator (Tikhonov step operator or smoother)."""
    return float(meta.get("spectral_radius",
                          meta.get("estimator", {}).get("spectral_radius", float("nan"))))


def _masters(spec, model):
    """Ordered unique master DOFs: channels first, then forces, then declared masters."""
    from offline.model import resolve_dofs

    chan = [resolve_dofs(model, s.select, s.dof, s.where or f"[[sensors]] {s.name}")[0]
            for s in spec.sensors]
    frc = [resolve_dofs(model, f.select, f.dof, f.where or f"[[forces]] {f.name}")[0]
           for f in spec.forces]
    extra = []
    if spec.reduction is not None:
        for m in spec.reduction.masters:
            extra += resolve_dofs(model, m.select, m.dofs, m.where or "[[reduction.masters]]")
    order = []
    for d in chan + frc + extra:
        if d not in order:
            order.append(d)
    return np.array(order, dtype=np.int64), chan, frc


def build(model_path, *, alpha=None, window=None, method=None, progress=True,
          report_dir=None, n_modes=None, maps=True, maps_cache=None,
          limit=True) -> BuildResult:
    """Build the bundle of a model file (see module docstring). Returns a BuildResult.

    ``maps``: train and attach the inverse maps when the model file has ``[[parameters]]``
    (step 6, :func:`attach_inverse_maps`); ``maps_cache``: directory for the cached training
    windows (default :func:`default_maps_cache`); ``limit``: compute the MMSE accuracy limit
    (:mod:`offline.limit`) for the report. ``model_path`` may also be a validated
    :class:`~offline.model.ModelSpec` (e.g. an edited copy, :func:`offline.model.spec_from_dict`).
    """
    from offline.model import build_fe_model, load_model_file, resolve_dofs
    from offline.reduction import recover, reduce

    timings = {}
    t0 = time.perf_counter()
    spec = model_path if hasattr(model_path, "sensors") else load_model_file(model_path)
    model_path = spec.path
    if not spec.sensors:
        raise ValueError(f"{spec.where('[[sensors]]')}: a bundle needs at least one sensor")
    if not spec.forces:
        raise ValueError(f"{spec.where('[[forces]]')}: a bundle needs at least one force")
    est_spec = spec.estimator
    if est_spec is None:
        from offline.model.spec import EstimatorSpec

        est_spec = EstimatorSpec()
    red_spec = spec.reduction
    model = build_fe_model(spec, progress=progress)
    timings["FE model"] = time.perf_counter() - t0

    t1 = time.perf_counter()
    masters, chan_dofs, force_dofs = _masters(spec, model)
    method_red = red_spec.method if red_spec else "gmr+"
    modes = int(n_modes if n_modes is not None else (red_spec.modes if red_spec else 50))
    red = reduce(model, masters, n_modes=modes, method=method_red,
                 n_report=red_spec.n_report if red_spec else 30, progress=progress)
    timings["reduction"] = time.perf_counter() - t1

    # damping on the reduced model: C = a M + b K (eq. 7) + T^T C_explicit T
    C = np.zeros_like(red.M)
    if model.rayleigh is not None:
        a, b = model.rayleigh
        C = a * red.M + b * red.K
    if model.C is not None:
        C = C + red.T.T @ (model.C @ red.T)
    C = 0.5 * (C + C.T)

    pos = {int(d): i for i, d in enumerate(masters)}
    dt = 1.0 / est_spec.rate
    channels = []
    for s, d in zip(spec.sensors, chan_dofs):
        node, dofn = model.dof_table()[d]
        channels.append(Channel(name=s.name, dof=pos[d], kind=s.kind, unit=s.unit,
                                weight=1.0, node=node, dof_name=dofn))
    forces = []
    for f, d in zip(spec.forces, force_dofs):
        node, dofn = model.dof_table()[d]
        forces.append(Force(name=f.name, dof=pos[d], node=node, dof_name=dofn,
                            scale=float(getattr(f, "scale", 1.0))))
    outputs = []
    out_dofs = []
    for o in spec.outputs:
        d = resolve_dofs(model, o.select, o.dof, o.where or f"[[outputs]] {o.name}")[0]
        node, dofn = model.dof_table()[d]
        outputs.append(Output(name=o.name, row=recover(red.T, [d])[0], kind=o.kind,
                              unit=o.unit, node=node, dof_name=dofn))
        out_dofs.append(d)

    window_rule = window if window is not None else est_spec.window
    L = 1 if window_rule == "auto" else int(window_rule)
    meta = {
        "name": spec.name, "model_file": str(Path(model_path).name),
        "reduction": {"method": red.method, "masters": len(masters), "modes": red.n_modes,
                      "full_dofs": int(model.n_dofs)},
        "vsense_version": __version__,
    }
    bundle = Bundle(M=red.M, C=C, K=red.K, dt=dt, channels=channels, forces=forces,
                    outputs=outputs, alpha=0.0, beta=est_spec.beta, gamma=est_spec.gamma,
                    window=L, discretization=getattr(est_spec, "discretization", "newmark"),
                    regularization=getattr(est_spec, "regularization", "tikhonov0"),
                    meta=meta,
                    report={"freqs_full": red.report.freqs_full,
                            "freqs_reduced": red.report.freqs_reduced,
                            "eig_error": red.report.eig_error})

    # honest calibration runs: the FULL model, exact modal integration, the sensors' noise
    # (offline/calibration_runs.py, offline/selection.py); weights 1/sigma^2, then estimator, window and alpha
    t2 = time.perf_counter()
    from offline.calibration_runs import calibration_runs
    from offline.selection import select
    from offline.limit.transfer import modal_model

    mm = modal_model(model, force_dofs, list(chan_dofs) + list(out_dofs))
    runs = calibration_runs(spec, model, chan_dofs, force_dofs, out_dofs, dt, mm=mm,
                            show_progress=progress)
    sigma = np.mean([r.sigma for r in runs], axis=0)
    for c, sg in zip(channels, sigma):
        c.weight = float(1.0 / sg ** 2)
    levels = np.array([max(s.noise, 1e-4) for s in spec.sensors])
    choice = None
    alpha_rule = alpha if alpha is not None else est_spec.alpha
    if method is not None:
        alpha_rule = method
    smoother = getattr(est_spec, "method", "tikhonov") == "smoother"
    max_delay = float(getattr(est_spec, "max_delay", 0.02))
    windows = None if window_rule == "auto" else [L]
    reference = None
    if limit:
        t4 = time.perf_counter()
        from offline.limit.model import model_limit

        lim = model_limit(spec, model, delays=sorted({0.0, max_delay, 0.1}), mm=mm)
        meta["limit"] = lim.as_dict()
        reference = np.concatenate([lim.force_nrmse, lim.output_nrmse])
        timings["accuracy limit"] = time.perf_counter() - t4
        t2 += timings["accuracy limit"]
    chosen_bundle = None
    if smoother:  # asked for by name (offline/smoother.py): no alpha, no choice
        alpha_rule, L = 0.0, 1
        alpha_val = 0.0
        meta["alpha_method"] = "none (smoother)"
    else:
        sel = select(bundle, runs, max_delay, windows=windows, alpha_rule=alpha_rule,
                     show_progress=progress, reference=reference, spec=spec)
        chosen_bundle = sel.pop("_bundle", None)  # a candidate that makes its own bundle
        meta["selection"] = sel
        L = int(sel["best"]["window"])
        alpha_val = float(sel["best"].get("alpha", 0.0))
        bundle = bundle.replace(window=L, **sel["best"].get("changes", {}))
        smoother = chosen_bundle is not None
    if smoother:
        meta["alpha_method"] = "none (smoother)"
    elif isinstance(alpha_rule, str) and alpha_rule == "auto":
        meta["alpha_method"] = "minimum calibration error"
    elif isinstance(alpha_rule, str):
        meta["alpha_method"] = alpha_rule
    else:
        meta["alpha_method"] = "given"
    if report_dir is not None:
        from offline.regularization import choose_alpha

        try:  # the L-curve of the chosen window, for the report
            choice = choose_alpha(bundle, runs[0].Y, window=L, method="lcurve",
                                  show_progress=False)
        except EstimatorError:
            choice = None
    timings["calibration + choice"] = time.perf_counter() - t2
    Yc, Y, F = runs[0].Y_clean, runs[0].Y, runs[0].F
    tt = runs[0].t
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
    if chosen_bundle is not None:  # the automatic choice designed it (offline/selection.py)
        bundle = chosen_bundle.replace(meta={**meta, "estimator": chosen_bundle.meta["estimator"]})
    elif smoother:
        from offline.smoother import smoother_from_spec

        bundle = smoother_from_spec(bundle, spec, est_spec)  # kf_* gains, meta["estimator"]
    if choice is not None:
        bundle.extras.update({"lcurve_alphas": choice.alphas,
                              "lcurve_residual": choice.residual_norm,
                              "lcurve_solution": choice.solution_norm})
    # --- inverse maps (step 6; docs/inverse.md "Build"): begin --------------------------
    if maps and spec.raw.get("parameters"):
        t3 = time.perf_counter()
        bundle = attach_inverse_maps(bundle, model_path, cache_dir=maps_cache, progress=progress)
        timings["inverse maps"] = time.perf_counter() - t3
    # --- inverse maps: end ---------------------------------------------------------------
    res = BuildResult(bundle=bundle, reduction=red, model=model, spec=spec, choice=choice,
                      calibration={"t": tt, "Y": Y, "Y_clean": Yc, "F": F, "runs": runs},
                      timings=timings,
                      full_dofs={"channels": chan_dofs, "forces": force_dofs,
                                 "outputs": out_dofs})
    if report_dir is not None:
        write_build_report(res, report_dir)
    return res


# --- inverse maps (step 6): begin -------------------------------------------------------
def default_maps_cache() -> Path:
    """Cache of the inverse-map training windows: ``$VSENSE_CACHE/inverse`` (default
    ``~/.cache/vsense/inverse``)."""
    import os

    return Path(os.environ.get("VSENSE_CACHE", "~/.cache/vsense")).expanduser() / "inverse"


def attach_inverse_maps(bundle: Bundle, model_path, cache_dir=None, progress=True) -> Bundle:
    """Train the inverse map(s) of ``[[parameters]]``/``[experiment]``/``[inverse]`` and add
    them and the parametric parts to ``bundle`` (:func:`offline.inverse.pipeline.attach`).

    The training windows are cached in ``cache_dir`` (default :func:`default_maps_cache`).
    The map's test metrics and timings go to ``meta["inverse"]``.
    """
    from offline.inverse.pipeline import attach

    cache = Path(cache_dir) if cache_dir is not None else default_maps_cache()
    cache.mkdir(parents=True, exist_ok=True)
    out, res = attach(bundle, model_path, cache_dir=cache, progress=progress)
    out.meta["inverse"]["timings"] = {k: float(v) for k, v in res["timings"].items()}
    return out
# --- inverse maps: end -----------------------------------------------------------------


def plot_selection(sel: dict, path, dt: float) -> str:
    """Expected normalised RMS error on the calibration runs per window, per estimator."""
    from offline._deps import need

    need("matplotlib").use("Agg")
    plt = need("matplotlib.pyplot")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for (name, c), mk in zip(sel["candidates"].items(), "osD^v<>"):
        rows = sorted(c["rows"], key=lambda r: r["delay"])
        ax.plot([r["delay"] * dt * 1e3 for r in rows], [r["score"] for r in rows], "-",
                marker=mk, mfc="none", label=name)  # open markers: coinciding lines show
    b = sel["best"]
    ax.plot([b["delay"] * dt * 1e3], [b["score"]], "*", ms=14, color="C3",
            label=f"chosen: {sel['chosen']}, L={b['window']}")
    ax.axvline(sel["max_delay_s"] * 1e3, color="0.5", ls=":", label="max_delay")
    ax.set_xlabel("delay [ms]")
    ax.set_ylabel("mean normalised RMS error")
    ax.set_yscale("log")  # the per-step estimator can be 10x the others
    ax.set_title("estimator choice on the calibration runs (full model)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


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
    (d / "build_summary.txt").write_text(res.summary() + "\n\n" + res.reduction.report.format()
                                         + "\n")
    (d / "build_meta.json").write_text(json.dumps(res.bundle.meta, indent=2, default=float))
    from offline.report import write_build_html

    write_build_html(res, d)  # d/index.html: the same, self-contained (PNGs embedded)
    return d
