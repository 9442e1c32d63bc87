"""What a build says about itself: the text summary (:func:`build_summary`, what
``vsense-offline build`` prints) and the report directory (:func:`write_build_report`,
``vsense-offline build --report DIR``).

The summary has one function per part of the bundle: reduction and Newmark settings, the
estimator, its choice on the calibration runs, the measurement chain, the accuracy limit,
inverse maps, hybrid twin, and the load model learned from records.
"""

from __future__ import annotations

import json
from pathlib import Path

from offline.limit.ratio import format_ratios
from offline.load.model import total_rms_note
from offline.load.plots import plot_spectra, plot_whiteness
from offline.report import write_build_html
from offline.estimator_choice import plot_selection, worse_than_zero
from offline.smoother.std_scale import scale_note


def _radius(meta: dict) -> float:
    """Spectral radius of the estimator (Tikhonov step operator or smoother)."""
    return float(meta.get("spectral_radius",
                          meta.get("estimator", {}).get("spectral_radius", float("nan"))))


def _head(res) -> list[str]:
    """Reduction, rate and Newmark settings, the signals, and the estimator's line."""
    b, red = res.bundle, res.reduction
    return [
        f"bundle {b.bundle_id if b.content_hash else b.meta.get('name')}: {b.n} reduced DOFs "
        f"({len(red.masters)} masters + {red.n_modes} modes, "
        f"{red.method}) from {res.model.n_dofs} FE DOFs",
        *([f"  note: {b.meta['reduction']['choice']}"] if b.meta.get("reduction", {}).get(
            "choice") else []),
        f"  rate {b.rate:g} samples/s, Newmark beta={b.beta:g} gamma={b.gamma:g}, "
        f"window L={b.window} (delay {(b.window - 1) * b.dt * 1e3:g} ms)",
        f"  channels: {', '.join(f'{c.name} ({c.kind}, {c.unit})' for c in b.channels)}",
        f"  forces: {', '.join(f.name for f in b.forces)}",
        f"  outputs: {', '.join(f'{o.name} ({o.kind}, {o.unit})' for o in b.outputs)}",
        _estimator_line(b),
    ]


def _estimator_line(b) -> str:
    """Tikhonov: alpha and spectral radius; Kalman fixed-lag smoother: lag, force models, std."""
    if b.method != "smoother":
        return (f"  alpha = {b.alpha:.4g} ({b.meta.get('alpha_method', '')}), spectral radius "
                f"{_radius(b.meta):.6f}")
    e = b.meta["estimator"]
    return (f"  Kalman fixed-lag smoother, lag {e['lag']} "
            f"({e['lag'] * b.dt * 1e3:g} ms), force models "
            + ", ".join(f"{m['kind']} {m['band'][0]:.3g}-{m['band'][1]:.3g} Hz "
                        f"rms {m['rms']:.3g}" for m in e["force_models"])
            + total_rms_note(e)
            + "; std " + ", ".join(f"{n} {v:.3g}" for n, v in zip(
                [x.name for x in (*b.forces, *b.outputs)], e["std"]))
            + scale_note(e))


def _selection_lines(b) -> list[str]:
    """The candidate chosen on the calibration runs and its normalised RMS error."""
    sel = b.meta.get("selection")
    if not sel:
        return []
    best, names = sel["best"], sel["targets"]
    errs = ", ".join(f"{n} {v:.3g} (+/- {s:.2g})"
                     for n, v, s in zip(names, best["nrmse"], best["spread"]))
    lines = [f"  chosen on {sel['n_runs']} full-model calibration runs: "
             f"{sel['chosen']} L={best['window']}, normalised RMS error {errs}"]
    worse = worse_than_zero(names, best["nrmse"])
    if worse:
        lines.append(f"  WARNING: {worse}")
    if sel.get("note"):  # smoother not preferred (far_worse), or the chosen one's unseen forces
        lines.append(f"  note: {sel['note']}")
    return lines


def _chain_lines(b) -> list[str]:
    """The acquisition chain and the sensor dynamics the smoother models."""
    lines = []
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
    note = b.meta.get("chain_check", {}).get("note")
    if note and b.method == "smoother":
        lines.append(f"  chain check: {note}")
    return lines


def _accuracy_lines(b) -> list[str]:
    """The MMSE accuracy limit and the estimator's ratio to it (docs/glossary.md)."""
    lines = []
    lim = b.meta.get("limit")
    if lim:
        nc = lim["force_nrmse"] + lim["output_nrmse"]
        lines.append("  accuracy limit (lowest normalised RMS error of any estimator; MMSE, "
                     "non-causal): " + ", ".join(
                         f"{n} {v:.3g}" for n, v in zip(lim["force_names"] + lim["output_names"],
                                                         nc)))
    if b.meta.get("accuracy"):  # the one ratio of docs/glossary.md (offline/limit/ratio.py)
        lines.append("  " + format_ratios(b.meta["accuracy"]))
    hint = order_hint(b.meta)
    if hint:
        lines.append("  " + hint)
    return lines


#: ratio to the limit above which the build names the force model's roll-off
ORDER_HINT_RATIO = 1.5


def order_hint(meta: dict) -> str | None:
    """What a second-order force model costs on a declared ideal band, or None.

    A ``random`` ``[design_load]`` has ideal band edges in the calibration runs and the
    limit; a declared band without ``[[forces]] model.order`` gives the smoother a
    second-order roll-off (a real load's gentle edges, docs/load.md "Without a record"). On
    the paper cantilever's 5-80 Hz band that is 2.65x the 20 ms limit, 1.12x with order 16
    (docs/estimator.md "Through the chip's chain"). Said when a target of the build's ratio
    (``meta["accuracy"]``) is above :data:`ORDER_HINT_RATIO` and the smoother runs the
    declared load model with a band-pass force of order <= 2. Order 8 is the first advice;
    an acceleration output, which weighs the band's upper edge by ``omega^4``, needed 16 on
    the chain benchmark's plate (``a_out`` 1.46x its limit at order 8, 1.11x at 16;
    docs/benchmarks.md "The measurement chain on a beam, a plate and a frame")."""
    e, acc = meta.get("estimator") or {}, meta.get("accuracy") or {}
    if e.get("method") != "smoother" or (meta.get("load_model") or {}).get("source") not in (
            None, "declared") or (meta.get("calibration") or {}).get("load") != "random":
        return None
    low = [fm for fm in e.get("force_models", []) if fm.get("kind") == "bandpass"
           and min(fm.get("hp_order") or fm["order"], fm.get("lp_order") or fm["order"]) <= 2]
    far = [r for r in acc.get("rows", []) if r["ratio"] > ORDER_HINT_RATIO]
    if not (low and far):
        return None
    return ("hint: " + ", ".join(f"{r['name']} {r['ratio']:.2f}x" for r in far)
            + " the accuracy limit on calibration runs whose load has the declared band's "
            "ideal edges, and the smoother's force model rolls off at second order there (the "
            "default of a band without [[forces]] model.order); if the real load's band is "
            "sharp, declare it ([[forces]] model = { order = 8 }; 16 where an acceleration "
            "output or a strain sees the band's upper edge), else learn it (build --record)")


def _attached_lines(b) -> list[str]:
    """Inverse maps of ``[[parameters]]`` and the hybrid twin."""
    lines = []
    inv = b.meta.get("inverse")
    if inv:
        for name, mm in inv["maps"].items():
            mu = mm.get("test_metrics", {}).get("mu_abs", [])
            errs = ", ".join(f"{p} {100 * v:.2f} %" for p, v in zip(mm["names"], mu))
            lines.append(f"  inverse map {name} ({mm['kind']}, {len(mm['names'])} parameters, "
                         f"features {mm['features']['kind']}): mean absolute error on test "
                         f"data {errs}")
    hy = b.meta.get("hybrid")
    if hy:
        lines.append(f"  hybrid twin: {hy['inputs']} -> {hy['hidden']}x{hy['layers']} -> "
                     f"{hy['outputs']} ({hy['acts_on']}), validation loss "
                     f"{hy['loss_best_val']:.4g} (linear {hy['loss_linear_val']:.4g}), "
                     f"epoch {hy['best_epoch']} of {hy['epochs']}")
    return lines


def _load_lines(res) -> list[str]:
    """The load model's warnings, and the model learned from records: fit, choice, check."""
    b, fit = res.bundle, res.load_fit
    lm = b.meta.get("load_model") or {}
    lines = [f"  WARNING: {w}" for w in lm.get("info", {}).get("warnings", [])]
    if fit is None:
        return lines
    lines.append("  " + fit.summary(
        [f.name for f in b.forces], [c.name for c in b.channels]).replace("\n", "\n  "))
    lines.append("  " + fit.info["choice"]["text"].replace("\n", "\n  "))
    chk = fit.info.get("check")
    if chk:
        lines.append(f"  {chk['text']}")
        if chk.get("chain"):
            lines.append(f"  {chk['chain']['text']}")
    return lines


def build_summary(res) -> str:
    """The summary of a :class:`offline.build.BuildResult`, one line per fact."""
    b = res.bundle
    lines = _head(res) + _selection_lines(b) + _chain_lines(b)
    lines += [f"  WARNING: {w}" for w in b.meta.get("warnings", [])]
    lines += _accuracy_lines(b) + _attached_lines(b) + _load_lines(res)
    lines.append("  timings: " + ", ".join(f"{k} {v:.2f} s" for k, v in res.timings.items()))
    return "\n".join(lines)


def write_build_report(res, report_dir) -> Path:
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
