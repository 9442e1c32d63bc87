"""From a model file to a bundle: FE model, reduction, calibration, alpha, stability check.

Steps (``vsense-offline build MODEL.toml -o BUNDLE.npz [--report DIR]``):

1. load and validate the model file, assemble the constrained FE model;
2. masters = measured DOFs first (paper eq. 8-10), then force DOFs, then the declared masters;
   reduce (GMR+ / Craig-Bampton / Guyan) and add damping (Rayleigh on the reduced matrices,
   paper eq. 7, plus ``T^T C T`` of explicit damping);
3. virtual outputs = rows of T at their physical DOFs;
4. calibration run: the reduced model under the ``[calibration]`` load with the sensors' noise;
   channel weights ``1 / sigma^2``; alpha from the L-curve / GCV / discrepancy principle unless
   given as a number;
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
from offline.regularization import AlphaChoice, choose_alpha
from offline.simulate import add_noise, load_profile, simulate_dense


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
            f"{b.meta.get('spectral_radius', float('nan')):.6f}",
        ]
        inv = b.meta.get("inverse")  # inverse maps (step 6): begin
        if inv:
            for name, mm in inv["maps"].items():
                mu = mm.get("test_metrics", {}).get("mu_abs", [])
                errs = ", ".join(f"{p} {100 * v:.2f} %" for p, v in zip(mm["names"], mu))
                lines.append(f"  inverse map {name} ({mm['kind']}, {len(mm['names'])} parameters, "
                             f"features {mm['features']['kind']}): test mean |eps| {errs}")  # end
        lines.append("  timings: " + ", ".join(f"{k} {v:.2f} s" for k, v in self.timings.items()))
        return "\n".join(lines)


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
          report_dir=None, n_modes=None, maps=True, maps_cache=None) -> BuildResult:
    """Build the bundle of a model file (see module docstring). Returns a BuildResult.

    ``maps``: train and attach the inverse maps when the model file has ``[[parameters]]``
    (step 6, :func:`attach_inverse_maps`); ``maps_cache``: directory for the cached training
    windows (default :func:`default_maps_cache`).
    """
    from offline.model import build_fe_model, load_model_file, resolve_dofs
    from offline.reduction import recover, reduce

    timings = {}
    t0 = time.perf_counter()
    spec = load_model_file(model_path)
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
        forces.append(Force(name=f.name, dof=pos[d], node=node, dof_name=dofn))
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

    # calibration run on the reduced model: weights from the expected noise, then alpha
    t2 = time.perf_counter()
    cal = spec.calibration
    rng = np.random.default_rng(cal.seed if cal else 0)
    duration = cal.duration if cal else 2.0
    nt = int(round(duration / dt)) + 1
    tt = np.arange(nt) * dt
    F = np.zeros((nt, len(forces)))
    if cal is not None:
        ld = cal.load
        prof = load_profile(ld.type, tt, freq=ld.freq, amplitude=ld.amplitude or 1.0,
                            band=ld.band, rms=ld.rms, seed=cal.seed)
        targets = [i for i, f in enumerate(forces) if ld.force in (None, f.name)]
        for i in targets:
            F[:, i] = prof
    else:
        F[:, :] = load_profile("random", tt, band=(1.0, 0.4 / dt), rms=1.0, seed=0)[:, None]
    rows = np.zeros((len(channels), bundle.n))
    for i, c in enumerate(channels):
        rows[i, c.dof] = 1.0
    kinds = [["displacement", "velocity", "acceleration"].index(c.kind) for c in channels]
    Yc = simulate_dense(bundle.M, bundle.C, bundle.K, [f.dof for f in forces], F, dt, rows, kinds)
    levels = np.array([max(s.noise, 1e-4) for s in spec.sensors])
    sigma = levels * np.std(Yc, axis=0)
    sigma = np.where(sigma > 0, sigma, 1.0)
    for c, s in zip(channels, sigma):
        c.weight = float(1.0 / s ** 2)
    Y = add_noise(Yc, levels, rng)
    choice = None
    alpha_rule = alpha if alpha is not None else est_spec.alpha
    if method is not None:
        alpha_rule = method
    smoother = getattr(est_spec, "method", "tikhonov") == "smoother"
    if smoother:  # Kalman smoother (offline/smoother.py): no alpha, no window study
        alpha_rule, window_rule = 0.0, 1
    study = None
    study_choices = {}  # AlphaChoice per window of the study, reused below
    if not smoother and (window_rule == "auto"
                         or (report_dir is not None and isinstance(alpha_rule, str))):
        study = window_study(bundle, Y, F, alpha_rule if isinstance(alpha_rule, str) else "auto",
                             show_progress=progress, choices=study_choices)
        meta["window_study"] = study
        if window_rule == "auto":
            L = study["recommended"]
            bundle = bundle.replace(window=L)
    if isinstance(alpha_rule, str):
        choice = study_choices.get(L) or choose_alpha(bundle, Y, window=L, method=alpha_rule,
                                                      show_progress=progress)
        alpha_val = choice.alpha
        meta["alpha_method"] = choice.resolved_method
        meta["alpha_candidates"] = {"lcurve": choice.alpha_lcurve, "gcv": choice.alpha_gcv,
                                    "discrepancy": choice.alpha_discrepancy}
    else:
        alpha_val = float(alpha_rule)
        meta["alpha_method"] = "given"
    timings["calibration + alpha"] = time.perf_counter() - t2

    bundle = bundle.replace(alpha=alpha_val)
    try:
        op = None if smoother else derive_operator(bundle)
    except EstimatorError as exc:
        raise EstimatorError(f"{spec.where('[estimator]')}: {exc}") from None
    if op is not None:
        meta["spectral_radius"] = op.spectral_radius
        meta["condition"] = op.info["condition"]
    meta["calibration"] = {"duration_s": duration, "noise": levels.tolist(),
                           "load": (cal.load.type if cal else "random")}
    bundle = bundle.replace(meta=meta)
    if smoother:
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
                      calibration={"t": tt, "Y": Y, "Y_clean": Yc, "F": F}, timings=timings,
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


def window_study(bundle: Bundle, Y, F_true, rule="auto", windows=(1, 5, 10, 20),
                 tolerance=1.1, show_progress=False, choices: dict | None = None) -> dict:
    """Force FDE on the calibration run for each window L, each with its automatic alpha.

    The calibration run is simulated, so its force is known. The recommended L is the
    smallest window whose force FDE is within ``tolerance`` of the best (a shorter window
    means less delay). FDE over 0 .. min(200 Hz, 0.4 rate), as in the benchmarks.
    ``choices``, when given, receives the :class:`AlphaChoice` of each window.
    """
    from edge.estimator import Estimator
    from offline.metrics import fde

    band = (0.0, min(200.0, 0.4 / bundle.dt))
    rows = []
    for L in windows:
        try:
            ch = choose_alpha(bundle, Y, window=L, method=rule, show_progress=False)
            if choices is not None:
                choices[L] = ch
            est = Estimator(bundle, alpha=ch.alpha, window=L)
        except EstimatorError as exc:
            rows.append({"window": L, "alpha": float("nan"), "force_fde": float("nan"),
                         "error": str(exc)})
            continue
        Fe, _, _ = est.run(Y)
        d = L - 1
        val = fde(Fe[d:, 0], F_true[: len(Fe) - d, 0], bundle.dt, band=band).value
        rows.append({"window": L, "alpha": ch.alpha, "force_fde": float(val),
                     "method": ch.resolved_method})
    ok = [r for r in rows if np.isfinite(r["force_fde"])]
    if not ok:
        raise EstimatorError("no window gives a stable estimator on the calibration run")
    best = min(r["force_fde"] for r in ok)
    rec = min(r["window"] for r in ok if r["force_fde"] <= tolerance * best)
    return {"band_hz": list(band), "rows": rows, "recommended": int(rec),
            "tolerance": tolerance}


def plot_window_study(study: dict, path, dt: float) -> str:
    from offline._deps import need

    need("matplotlib").use("Agg")
    plt = need("matplotlib.pyplot")
    rows = [r for r in study["rows"] if np.isfinite(r["force_fde"])]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    Ls = [r["window"] for r in rows]
    ax.plot(Ls, [r["force_fde"] for r in rows], "o-")
    rec = study["recommended"]
    ax.axvline(rec, color="C1", ls="--", label=f"recommended L={rec} "
                                               f"(delay {(rec - 1) * dt * 1e3:g} ms)")
    ax.set_xlabel("window L [samples]")
    ax.set_ylabel(f"force FDE {study['band_hz'][0]:g}-{study['band_hz'][1]:g} Hz")
    ax.set_title("fixed-lag window on the calibration run (automatic alpha each)")
    ax.grid(alpha=0.3)
    ax.legend()
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
    if "window_study" in res.bundle.meta:
        plot_window_study(res.bundle.meta["window_study"], d / "window.png", res.bundle.dt)
    (d / "build_summary.txt").write_text(res.summary() + "\n\n" + res.reduction.report.format()
                                         + "\n")
    (d / "build_meta.json").write_text(json.dumps(res.bundle.meta, indent=2, default=float))
    from offline.report import write_build_html

    write_build_html(res, d)  # d/index.html: the same, self-contained (PNGs embedded)
    return d
