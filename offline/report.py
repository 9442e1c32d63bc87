"""Self-contained HTML reports (PNG figures embedded as base64) for builds and demo runs.

* :func:`write_build_html` – the build half, for any model: summary, eigenvalue error of the
  reduction (Oh et al., eq. 31, Fig. 5/11), the L-curve (eq. 20-24), the reduction table.
  ``offline.build.write_build_report`` calls it, so ``vsense-offline build --report DIR``
  writes ``DIR/index.html`` next to the PNGs.
* :func:`write_demo_report` – the build half plus a run: identified against true force and
  response (time traces and spectra, Fig. 13/14 style), the FDE table (eq. 33, band stated),
  the per-step computation time (Fig. 15, Table 10) and the run's configuration.

Every figure is also written as a PNG beside ``index.html``; the HTML embeds them, so the
page can be mailed or archived alone.
"""

from __future__ import annotations

import base64
import html
import json
import time
from pathlib import Path

import numpy as np

from offline.load.model import LoadModel
from offline.load.plots import load_parts
from offline.reduction.report import largest_error
from offline.report_plots import (_plt, bandpass, plot_health, plot_identification,  # noqa: F401
                                  plot_measurement, plot_step_times, spectrum)

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;
margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.6em;border-bottom:2px solid #345;padding-bottom:.2em}
h2{font-size:1.25em;margin-top:1.8em;color:#234}
table{border-collapse:collapse;margin:.6em 0}
td,th{border:1px solid #bbb;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#eef2f6}
td.num{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;border:1px solid #ddd;margin:.4em 0}
pre{background:#f6f8fa;padding:.6em;font-size:.85em;white-space:pre-wrap;word-break:break-word}
details{margin:.6em 0}summary{cursor:pointer;color:#234}
.note{color:#555;font-size:.92em}
.ok{color:#070}.bad{color:#a00}
"""


def data_uri(png_path) -> str:
    """``data:image/png;base64,...`` of a PNG file."""
    raw = Path(png_path).read_bytes()
    return "data:image/png;base64," + base64.b64encode(raw).decode("ascii")


def _img(path, caption: str) -> str:
    p = Path(path)
    if not p.is_file():
        return f'<p class="note">({html.escape(p.name)} not available)</p>'
    return (f'<figure><img src="{data_uri(p)}" alt="{html.escape(caption)}">'
            f'<figcaption class="note">{html.escape(caption)} ({html.escape(p.name)})'
            f"</figcaption></figure>")


def _table(header, rows, num_cols=()) -> str:
    h = "".join(f"<th>{html.escape(str(x))}</th>" for x in header)
    body = []
    for r in rows:
        cells = []
        for i, x in enumerate(r):
            cls = ' class="num"' if i in num_cols else ""
            cells.append(f"<td{cls}>{x if isinstance(x, Markup) else html.escape(str(x))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><tr>{h}</tr>{''.join(body)}</table>"


class Markup(str):
    """A string that is already HTML."""


def page(title: str, parts: list[str]) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><p class=\"note\">written {stamp} by vsense "
            f"(offline.report)</p>{''.join(parts)}</body></html>\n")


# ---------------------------------------------------------------------- build half
def build_parts(res, d: Path) -> list[str]:
    """HTML blocks of the build: summary, eigenvalue error, L-curve, reduction table."""
    b = res.bundle
    rep = res.reduction.report
    m = b.meta
    rows = [
        ("bundle", b.bundle_id if b.content_hash else m.get("name", "")),
        ("model file", m.get("model_file", "")),
        ("FE model", f"{res.model.n_dofs:,} DOFs"),
        ("reduction", f"{res.reduction.method}: {len(res.reduction.masters)} masters + "
                      f"{res.reduction.n_modes} modes = {b.n} reduced DOFs"),
        ("largest eigenvalue error of the reduction (eq. 31)",
         largest_error(np.abs(rep.eig_error), np.asarray(rep.freqs_full, float),
                        b.rate / 2).split(": ", 1)[1]),
        ("rate / Newmark", f"{b.rate:g} samples/s, beta={b.beta:g}, gamma={b.gamma:g}, "
                           f"window L={b.window}"),
        ("channels", ", ".join(f"{c.name} ({c.kind}, {c.unit})" for c in b.channels)),
        ("forces", ", ".join(f"{f.name} [{f.unit}]" for f in b.forces)),
        ("outputs", ", ".join(f"{o.name} ({o.kind}, {o.unit})" for o in b.outputs)),
        ("alpha (Tikhonov)", f"{b.alpha:.4g} ({m.get('alpha_method', '')})"),
        ("spectral radius of the step operator",
         f"{_radius(m):.6f} (< 1: stable)"),
        ("build time", ", ".join(f"{k} {v:.1f} s" for k, v in res.timings.items())),
    ]
    if b.method == "smoother":  # Kalman fixed-lag smoother (docs "The Kalman smoother")
        e = m["estimator"]
        names = [x.name for x in (*b.forces, *b.outputs)]
        rows[-3:-1] = [
            ("estimator", f"Kalman fixed-lag smoother, lag {e['lag']} "
                          f"({e['lag'] * b.dt * 1e3:g} ms), exact (Van Loan) discretisation"),
            ("force models", "; ".join(
                f"{f.name}: {fm['kind']} {fm['band'][0]:.3g}-{fm['band'][1]:.3g} Hz, rms "
                f"{fm['rms']:.3g}, roll-off orders {fm.get('hp_order', fm['order'])}/"
                f"{fm.get('lp_order', fm['order'])}"
                + "".join(f", peak {p[0]:.1f} Hz x{p[2]:.2g}" for p in fm.get("peaks", []))
                + (f" (its floor; with the {len(e['force_components'])} source components: "
                   f"rms {tot:.3g})" if e.get("force_components") else "")
                for f, fm, tot in zip(b.forces, e["force_models"],
                                      LoadModel.from_estimator(e).rms()))),
            ("standard deviation of each estimate", ", ".join(
                f"{n} {v:.4g}" for n, v in zip(names, e["std"]))),
            ("Kalman predictor spectral radius", f"{e['spectral_radius']:.6f} (< 1: stable)"),
            ("model check", f"window {e['check_window_s']:g} s, false-alarm probability "
                            f"{e['check_false_alarm']:g} per window; band pairs " + (", ".join(
                                f"{lo:.1f}-{hi:.1f} Hz" for lo, hi in e["check_bands_hz"])
                                or "none (no resonance inside the force band)")),
        ]
    parts = ["<h2>Bundle</h2>", _table(("item", "value"), rows)]
    parts.append("<h2>Model reduction: eigenvalue error (Oh et al., Fig. 5/11, eq. 31)</h2>")
    parts.append(_img(d / "eigenvalue_error.png",
                      "relative eigenvalue error of the reduced model against the full model"))
    parts += load_parts(res, d, _img)
    if b.method == "smoother":  # no L-curve: the choice and the limit, then the reduction
        parts += accuracy_parts(b, d)
        parts.append("<h2>Reduction table</h2><pre>" + html.escape(rep.format(b.rate / 2)) + "</pre>")
        return parts
    parts.append("<h2>Regularisation: L-curve (eq. 20-24)</h2>")
    if res.choice is not None:
        parts.append(_img(d / "lcurve.png", "L-curve of the calibration run and the chosen "
                                            "alpha"))
    else:
        parts.append('<p class="note">alpha was given as a number: no L-curve.</p>')
    parts += accuracy_parts(b, d)
    parts.append("<h2>Reduction table</h2><pre>" + html.escape(rep.format(b.rate / 2)) + "</pre>")
    return parts


def _radius(m: dict) -> float:
    """Spectral radius of the estimator (Tikhonov step operator or smoother)."""
    return float(m.get("spectral_radius",
                       m.get("estimator", {}).get("spectral_radius", float("nan"))))


def accuracy_parts(b, d: Path) -> list[str]:
    """Estimator choice on the calibration runs next to the MMSE limit (issue 11)."""
    m = b.meta
    parts = []
    sel = m.get("selection")
    lim = m.get("limit")
    if sel:
        cal = m.get("calibration", {})
        parts.append("<h2>Estimator choice (honest calibration runs)</h2>")
        parts.append(f'<p class="note">{sel["n_runs"]} runs of the full FE model '
                     f'({html.escape(str(cal.get("engine", "")))}), seeds {sel["seeds"]}, '
                     f'the sensors\' noise; delay bound {sel["max_delay_s"] * 1e3:g} ms. '
                     f'Figures: normalised RMS error RMS(estimate - truth) / std(truth), full '
                     f'band, mean (+/- spread) over the runs.</p>')
        names = sel["targets"]
        rows = []
        for cname, c in sel["candidates"].items():
            r = c["best"]
            d_ms = r["delay"] * b.dt * 1e3
            # the ratio to the limit at the candidate's own delay (docs/glossary.md)
            at = [limit_at(m, n, d_ms) for n in names]
            rows.append([cname + (" (chosen)" if cname == sel["chosen"] else ""),
                         r["window"], f"{d_ms:g}",
                         f"{r['alpha']:.3g}" if "alpha" in r else "-"]
                        + [f"{v:.3g} +/- {s:.2g}" + (f" ({v / a[0]:.2f}x the {a[1]:g} ms limit)"
                                                    if a else "")
                           for v, s, a in zip(r["nrmse"], r["spread"], at)])
        parts.append(_table(("estimator", "L", "delay [ms]", "alpha", *names), rows))
        if (d / "selection.png").exists():
            parts.append(_img(d / "selection.png", "expected error per delay and estimator"))
    if lim:
        parts.append("<h2>MMSE (Wiener) accuracy limit</h2>")
        heads = [f"{x:g} ms" for x in lim["delays_ms"]] + ["non-causal"]
        rows = []
        for i, n in enumerate(lim["force_names"]):
            rows.append([n] + [f"{r[i]:.4g}" for r in lim["lag_force_nrmse"]]
                        + [f"{lim['force_nrmse'][i]:.4g}"])
        for i, n in enumerate(lim["output_names"]):
            rows.append([n] + [f"{r[i]:.4g}" for r in lim["lag_output_nrmse"]]
                        + [f"{lim['output_nrmse'][i]:.4g}"])
        parts.append(f'<p class="note">Lowest normalised RMS error any estimator can reach '
                     f'with these sensors, noise and load (full model, {lim["n_modes"]} modes + '
                     f'residual; {lim.get("causal_method", "")}).</p>')
        parts.append(_table(("target", *heads), rows))
    return parts


def write_build_html(res, report_dir) -> Path:
    """``report_dir/index.html`` for a :class:`offline.build.BuildResult` (PNGs already
    written by ``write_build_report``)."""
    d = Path(report_dir)
    d.mkdir(parents=True, exist_ok=True)
    name = res.bundle.meta.get("name", "model")
    path = d / "index.html"
    path.write_text(page(f"vsense build report — {name}", build_parts(res, d)),
                    encoding="utf-8")
    return path


# ---------------------------------------------------------------------- demo report
CITATION = ("S. Oh, H. Lee, J.-K. Lee, H. Yoon, J.-G. Kim: <i>Real-time response estimation of "
            "structural vibration with inverse force identification</i> (the method, the "
            "cantilever rig and the figures referred to as Oh et al.).")


def _kv(d: dict) -> str:
    """A flat ``key value, ...`` line of a health sub-object (nested objects in brackets)."""
    items = []
    for k, v in d.items():
        if isinstance(v, dict):
            v = "(" + _kv(v) + ")"
        elif isinstance(v, float):
            v = f"{v:.4g}"
        items.append(f"{k.replace('_', ' ')} {v}")
    return ", ".join(items)


def _truth_text(info: dict, s: dict) -> str:
    """How the truth was integrated, from the simulator's own record (run.json truth_info)."""
    dofs = info.get("full_dofs", "?")
    dofs = f"{dofs:,}" if isinstance(dofs, int) else dofs
    if info.get("engine") == "modal":
        return (f"the full FE model ({dofs} DOFs) integrated exactly by modal superposition "
                f"with static correction, load sampled every {info.get('dt_fine', 0) * 1e3:g} ms "
                f"({s['oversample']} points per sample)")
    return (f"the full FE model ({dofs} DOFs), {info.get('engine', 'Newmark')} with "
            f"{s['oversample']} sub-steps per sample")


def nrmse_full_band(e: np.ndarray, r: np.ndarray) -> float:
    """RMS(estimate - truth) / std(truth) over the rows where both are finite (full band)."""
    ok = np.isfinite(e) & np.isfinite(r)
    return float(np.sqrt(np.mean((e[ok] - r[ok]) ** 2)) / np.std(r[ok])) if ok.sum() > 2 \
        else float("nan")


def limit_at(meta: dict, name: str, delay_ms: float) -> tuple[float, float] | None:
    """``(limit, delay used [ms])``: the MMSE limit of ``name`` at the largest computed delay
    not above the estimator's (the bundle's ``limit``), or None."""
    lim = meta.get("limit")
    if not lim:
        return None
    names = lim["force_names"] + lim["output_names"]
    if name not in names:
        return None
    i = names.index(name)
    rows = [f + o for f, o in zip(lim["lag_force_nrmse"], lim["lag_output_nrmse"])]
    ok = [k for k, dl in enumerate(lim["delays_ms"]) if dl <= delay_ms + 1e-9]
    if not ok:
        return None
    k = ok[-1]
    return float(rows[k][i]), float(lim["delays_ms"][k])


def _result_parts(res, run: dict, est, ref: dict, cols, units, band, dt: float,
                  delay_ms: float) -> list[str]:
    """The demo report's first section: the accuracy of each identified quantity (FDE, its
    normalised RMS error and the accuracy limit), then the run's figures."""
    b = res.bundle
    parts = []
    fde = run["fde"]
    c0, c1 = run["compared"]
    # summary first: what a newcomer wants to see
    rows = []
    for i, n in enumerate(cols):
        if n not in fde or n not in ref:
            continue
        e = nrmse_full_band(est[c0:c1, i], ref[n][c0:c1])
        lim = limit_at(b.meta, n, delay_ms)
        rows.append((n, units[i] if i < len(units) else "", f"{fde[n]['band']:.4f}",
                     f"{fde[n]['full']:.4f}", f"{e:.4g}",
                     f"{lim[0]:.4g} ({e / lim[0]:.2f}x, {lim[1]:g} ms)" if lim else "-"))
    parts.append("<h2>Result: accuracy of the identified quantities</h2>")
    parts.append(_table(("quantity", "unit", f"FDE {band[0]:g}-{band[1]:g} Hz",
                         "FDE full spectrum", "normalised RMS error",
                         "accuracy limit (ratio, delay)"), rows, num_cols=(2, 3, 4)))
    parts.append(
        f'<p class="note">FDE (Oh et al., eq. 33) = &Sigma;|E&minus;C| / &Sigma;(|E|+|C|) over '
        f"the one-sided FFT bins of the band (0 = identical, 1 = unrelated); the band is the "
        f"load band {band[0]:g}-{band[1]:g} Hz. Normalised RMS error = RMS(estimate &minus; "
        f"truth) / std(truth) in the time domain, full band. Accuracy limit: the lowest "
        f"normalised RMS error any estimator can reach with this sensor, noise and load at the "
        f"estimator's delay ({delay_ms:g} ms; the MMSE (Wiener) estimate, from the build). "
        f"Compared over samples {c0}-{c1 - 1} ({(c1 - c0) * dt:.2f} s). For scale, Oh et al. "
        f"report FDE 0.1336 for the force and 0.3275 for the displacement at 60 mm on the real "
        f"rig (their Table 9, random 5-160 Hz).</p>")
    st = run["step_time_us"]
    parts.append(_table(("run", "value"), [
        ("estimates received over MQTT", f"{run['received']:,} of {run['samples']:,} samples "
                                         f"({run['duplicates']} duplicates dropped)"),
        ("broker", run["broker"]),
        ("daemon exit code", run["exit_code"]),
        ("kernel time per step (offline re-run)",
         f"mean {st['mean']:.1f} us, p99 {st['p99']:.1f} us, max {st['max']:.0f} us (budget "
         f"{dt * 1e6:.0f} us); {st.get('over_budget', 0)} steps over budget"),
        ("demo wall time", ", ".join(f"{k} {v:.1f}" for k, v in run["timings"].items())),
    ]))
    return parts


def write_demo_report(report_dir, res, run: dict, *, t, est, ref: dict, cols, units,
                      health_log, step_us, y_meas=None, y_name="", std=None) -> Path:
    """Write the figures and ``report_dir/index.html`` for a demo run; returns the HTML path.

    Parameters
    ----------
    res : offline.build.BuildResult        the build (its PNGs are already in report_dir)
    run : dict                              figures of the run (``offline.demo``: run.json)
    t : (ns,) [s]; est : (ns, ncol) estimates aligned to ``t`` (NaN where none arrived)
    ref : {name: (ns,)}                     truth per estimate column
    step_us : (ns,) per-sample kernel time [us]
    std : (ncol,) or None                   standard deviation of each column (smoother):
                                            shaded bands in the time plots
    """
    d = Path(report_dir)
    d.mkdir(parents=True, exist_ok=True)
    s = run["settings"]
    band = tuple(s["band"])
    dt = float(t[1] - t[0])
    b = res.bundle
    delay_ms = run.get("delay_samples", 0) * dt * 1e3
    parts = _result_parts(res, run, est, ref, cols, units, band, dt, delay_ms)
    # identification figures
    parts.append("<h2>Identified against true (Oh et al., Fig. 13/14 style)</h2>")
    parts.append(f'<p class="note">Truth: {html.escape(_truth_text(run["truth_info"], s))}, '
                 "under the applied random force. The estimator runs the reduced model of the "
                 "bundle on the noisy measured signal only, so its model and discretisation "
                 "are not the truth's.</p>")
    for i, n in enumerate(cols):
        if n not in ref:
            continue
        u = units[i] if i < len(units) else ""
        p = plot_identification(t, est[:, i], ref[n], n, u, band, d / f"identified_{n}.png",
                                std=None if std is None else std[i])
        parts.append(_img(p, f"{n}: identified against true, a 0.3 s window and the amplitude "
                             f"spectra"))
    if y_meas is not None:
        p = plot_measurement(t, y_meas[:, 0], y_name, s["noise"],
                             run["snr_db"].get(y_name, float("nan")), d / "measurement.png")
        parts.append(_img(p, "the only input of the estimator"))
    parts += _timing_parts(d, run, step_us, dt, health_log)
    parts.extend(build_parts(res, d))
    parts += _config_parts(run, s, band)
    parts.append(f'<h2>Reference</h2><p class="note">{CITATION}</p>')
    path = d / "index.html"
    path.write_text(page(f"vsense demo — {b.meta.get('name', '')}: edge virtual sensing over "
                         f"MQTT", parts), encoding="utf-8")
    return path


def _timing_parts(d: Path, run: dict, step_us, dt: float, health_log) -> list[str]:
    """Per-step kernel time, the daemon's latency over the run and its health counters."""
    parts = ["<h2>Computation time per step (Oh et al., Fig. 15, Table 10)</h2>"]
    h = run.get("health") or {}
    lat = h.get("latency_us") or {}
    p = plot_step_times(np.asarray(step_us), dt, d / "step_time.png", daemon_latency=lat)
    parts.append(_img(p, "time of Estimator.process for each sample"))
    start = {"drdy": "DRDY (the ADC's data-ready edge)", "ring": "the sample entering the "
             "ring buffer"}.get(h.get("latency_from", "ring"), str(h.get("latency_from")))
    parts.append(
        '<p class="note">Per-step times: the daemon publishes latency percentiles in '
        "<code>health</code>, not per-sample timings, so the times above come from re-running "
        "the same kernel (<code>Estimator.process</code>, one sample per call, as the daemon "
        "with <code>block = 1</code>) over the same measurement after the run. The daemon's "
        f"latency runs from {start} to the estimate handed to publisher and recorder; it "
        "includes the time a sample waits in the ring while the thread is not scheduled. On "
        "a workstation without real-time scheduling (<code>sched_fifo_priority = 0</code>) "
        "and with other programs running, that wait reaches tens of milliseconds, far above "
        "the 1 ms sample period: the ring absorbs it and the estimator catches up, so no "
        "sample is lost as long as <i>overruns</i> and <i>lost samples</i> below stay 0. On "
        "the device, SCHED_FIFO and an otherwise idle CPU bound it (docs/daemon.md).</p>")
    if lat:
        parts.append(_table(("daemon latency [us]", "p50", "p99", "p99.9", "max", "n"),
                            [("last health message", *(f"{lat.get(k):,.0f}"
                                                       if lat.get(k) is not None else "—"
                                                       for k in ("p50", "p99", "p999",
                                                                 "max")),
                              f"{lat.get('n', 0):,}")], num_cols=(1, 2, 3, 4, 5)))
    hp = plot_health(health_log, d / "daemon_latency.png", period_us=dt * 1e6)
    if hp is not None:
        parts.append(_img(hp, "latency percentiles from the health messages"))
    if h:
        parts.append(_table(("health counter (last message)", "value"), [
            ("samples / estimates", f"{h.get('samples', 0):,} / {h.get('estimates', 0):,}"),
            ("overruns / lost samples", f"{h.get('overruns', 0)} / {h.get('lost_samples', 0)}"),
            ("bad samples / estimator resets",
             f"{h.get('bad_samples', 0)} / {h.get('estimator_resets', 0)}"),
            ("CPU / RSS", f"{h.get('cpu_percent', '—')} % / {h.get('rss_mb', '—')} MB"),
            ("MQTT publisher", _kv(h.get("publish", {}))),
            ("recorder", _kv(h.get("recorder", {}))),
        ]))
    return parts


def _config_parts(run: dict, s: dict, band) -> list[str]:
    """The run's settings as a table; edge.toml and run.json folded away."""
    parts = ["<h2>Configuration of the run</h2>", _table(("setting", "value"), [
        ("model", Path(s["model"]).name), ("device id", run["device"]),
        ("load", f"random, band {band[0]:g}-{band[1]:g} Hz, RMS {s['rms']:g} N at the force "
                 f"DOF; seed {s['seed']}"),
        ("measurement noise", f"{100 * s['noise']:g} % of the signal std (Oh et al., eq. 28)"),
        ("record / daemon run", f"{s['duration']:g} s at {run['rate']:g} samples/s, "
                                f"real-time clock, simulated ADC at {s['level']} level"),
        ("truth", _truth_text(run["truth_info"], s)),
        ("channel sensitivity", f"{run['sensitivity_V_per_m']:.4g} V/m, offset 2.5 V"),
        ("MQTT", "QoS 1, JSON estimates, batch 50, health every 1 s"),
    ])]
    cfg = Path(run.get("config_path", "")) if run.get("config_path") else None
    if cfg is not None and cfg.is_file():
        parts.append("<details><summary>the daemon's configuration (edge.toml)</summary><pre>"
                     + html.escape(cfg.read_text()) + "</pre></details>")
    parts.append("<details><summary>every figure of the run (run.json)</summary><pre>"
                 + html.escape(json.dumps({k: v for k, v in run.items() if k != "health"},
                                          indent=1, default=str)) + "</pre></details>")
    return parts
