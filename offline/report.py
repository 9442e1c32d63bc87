"""Self-contained HTML reports (PNG figures embedded as base64) for builds and demo runs.

* :func:`write_build_html` – the build half, for any model: summary, eigenvalue error of the
  reduction (paper 004 eq. 31, Fig. 5/11), the L-curve (eq. 20-24), the reduction table.
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

from offline._deps import need

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
pre{background:#f6f8fa;padding:.6em;overflow-x:auto;font-size:.85em}
.note{color:#555;font-size:.92em}
.ok{color:#070}.bad{color:#a00}
"""


def _plt():
    need("matplotlib").use("Agg")
    return need("matplotlib.pyplot")


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
        ("max |eigenvalue error| (eq. 31)",
         f"{np.nanmax(np.abs(rep.eig_error)):.3g} % over the first {len(rep.eig_error)} modes"),
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
                f"{f.name}: {fm['kind']} {fm['band'][0]:g}-{fm['band'][1]:g} Hz, rms "
                f"{fm['rms']:g}, order {fm['order']}" for f, fm in zip(b.forces,
                                                                       e["force_models"]))),
            ("standard deviation of each estimate", ", ".join(
                f"{n} {v:.4g}" for n, v in zip(names, e["std"]))),
            ("Kalman predictor spectral radius", f"{e['spectral_radius']:.6f} (< 1: stable)"),
            ("model check", f"window {e['check_window_s']:g} s, false-alarm probability "
                            f"{e['check_false_alarm']:g} per window; band pairs " + (", ".join(
                                f"{lo:.1f}-{hi:.1f} Hz" for lo, hi in e["check_bands_hz"])
                                or "none (no resonance inside the force band)")),
        ]
    parts = ["<h2>Bundle</h2>", _table(("item", "value"), rows)]
    parts.append("<h2>Model reduction: eigenvalue error (paper Fig. 5/11, eq. 31)</h2>")
    parts.append(_img(d / "eigenvalue_error.png",
                      "relative eigenvalue error of the reduced model against the full model"))
    if b.method == "smoother":  # no L-curve: the choice and the limit, then the reduction
        parts += accuracy_parts(b, d)
        parts.append("<h2>Reduction table</h2><pre>" + html.escape(rep.format()) + "</pre>")
        return parts
    parts.append("<h2>Regularisation: L-curve (eq. 20-24)</h2>")
    if res.choice is not None:
        parts.append(_img(d / "lcurve.png", "L-curve of the calibration run and the chosen "
                                            "alpha"))
    else:
        parts.append('<p class="note">alpha was given as a number: no L-curve.</p>')
    parts += accuracy_parts(b, d)
    parts.append("<h2>Reduction table</h2><pre>" + html.escape(rep.format()) + "</pre>")
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
        nc = (lim["force_nrmse"] + lim["output_nrmse"]) if lim else [float("nan")] * len(names)
        for cname, c in sel["candidates"].items():
            r = c["best"]
            rows.append([cname + (" (chosen)" if cname == sel["chosen"] else ""),
                         r["window"], f"{r['delay'] * b.dt * 1e3:g}",
                         f"{r['alpha']:.3g}" if "alpha" in r else "-"]
                        + [f"{v:.3g} +/- {s:.2g} ({v / n:.2f}x limit)"
                           for v, s, n in zip(r["nrmse"], r["spread"], nc)])
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
                     f'residual; causal limits with {lim["memory"]} samples of memory).</p>')
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


# ---------------------------------------------------------------------- demo figures
def spectrum(x: np.ndarray, dt: float):
    """One-sided amplitude spectrum: ``(f [Hz], |X| * 2 / n)``."""
    n = x.shape[0]
    return np.fft.rfftfreq(n, dt), np.abs(np.fft.rfft(x)) * 2.0 / n


def bandpass(x: np.ndarray, dt: float, band) -> np.ndarray:
    """``x`` with every FFT bin outside ``band`` [Hz] zeroed (NaN rows stay NaN; the finite
    stretch between the first and last finite sample is filtered, NaN inside it taken as 0)."""
    y = np.full(x.shape, np.nan)
    idx = np.flatnonzero(np.isfinite(x))
    if idx.size < 4:
        return y
    sl = slice(idx[0], idx[-1] + 1)
    xs = np.where(np.isfinite(x[sl]), x[sl], 0.0)
    X = np.fft.rfft(xs)
    f = np.fft.rfftfreq(xs.size, dt)
    X[(f < band[0]) | (f > band[1])] = 0.0
    y[sl] = np.fft.irfft(X, xs.size)
    return y


def plot_identification(t, est, ref, name: str, unit: str, band, path, window_s=1.0,
                        title: str = "", std=None) -> Path:
    """Fig. 13/14 style: identified vs true, a time window and the amplitude spectra.

    ``std``: the estimate's standard deviation (scalar or (ns,); the smoother states it),
    drawn as shaded +/-1 and +/-2 sigma bands around the estimate."""
    plt = _plt()
    ok = np.isfinite(est)
    dt = float(t[1] - t[0])
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(10, 6.2))
    # a window in the middle of the record, after the start-up
    mid = t[ok][len(t[ok]) // 2] if ok.any() else t[len(t) // 2]
    w = (t >= mid - window_s / 2) & (t <= mid + window_s / 2)
    if std is not None:
        sd = np.broadcast_to(np.asarray(std, dtype=float), est.shape)[w]
        for k, a in ((2, 0.10), (1, 0.20)):
            ax.fill_between(t[w], est[w] - k * sd, est[w] + k * sd, color="C3", alpha=a,
                            lw=0, label=f"+/- {k} sigma (stated uncertainty)")
    ax.plot(t[w], est[w], color="C3", lw=0.6, alpha=0.35, label="identified (edge daemon)")
    ax.plot(t[w], ref[w], color="0.2", lw=1.4, label="true (full FE model)")
    ax.plot(t[w], bandpass(est, dt, band)[w], color="C3", lw=1.1, ls="--",
            label=f"identified, {band[0]:g}-{band[1]:g} Hz part (what the FDE sees)")
    ax.set_xlabel("time [s]")
    ax.set_ylabel(f"{name} [{unit}]")
    ax.set_title(title or f"{name}: identified vs true")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)
    idx = np.flatnonzero(ok)
    if idx.size > 8:
        sl = slice(idx[0], idx[-1] + 1)
        e = np.where(np.isfinite(est[sl]), est[sl], 0.0)
        f, R = spectrum(ref[sl], dt)
        _, E = spectrum(e, dt)
        ax2.semilogy(f, R, color="0.2", lw=1.2, label="true")
        ax2.semilogy(f, E, color="C3", lw=0.8, alpha=0.85, label="identified")
        ax2.axvspan(band[0], band[1], color="C0", alpha=0.08, label=f"FDE band "
                    f"{band[0]:g}-{band[1]:g} Hz")
        top = max(R.max(), 1e-300)
        ax2.set_ylim(top * 1e-6, top * 3)
        ax2.set_xlim(0, min(f[-1], 4 * band[1]))
    ax2.set_xlabel("frequency [Hz]")
    ax2.set_ylabel(f"amplitude [{unit}]")
    ax2.legend(fontsize=8, loc="upper right")
    ax2.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def plot_step_times(step_us: np.ndarray, dt: float, path, paper_mean_us=461.5,
                    daemon_latency: dict | None = None) -> Path:
    """Fig. 15 style: computation time of every step against the sample period."""
    plt = _plt()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 1]})
    k = np.arange(step_us.size)
    ax.plot(k, step_us, ".", ms=1.5, color="C0", label="Estimator.process, one sample")
    ax.axhline(dt * 1e6, color="C3", lw=1.2, label=f"sample period {dt * 1e3:g} ms (budget)")
    ax.axhline(paper_mean_us, color="0.4", ls=":", lw=1.2,
               label=f"paper Table 10 mean on a Pi 3B+ ({paper_mean_us:g} us)")
    ax.axhline(step_us.mean(), color="C2", ls="--", lw=1.0,
               label=f"mean here {step_us.mean():.1f} us")
    if daemon_latency and daemon_latency.get("p99") is not None:
        ax.axhline(daemon_latency["p99"], color="C1", ls="-.", lw=1.0,
                   label=f"daemon loop latency p99 {daemon_latency['p99']:.0f} us (health)")
    ax.set_yscale("log")
    ax.set_xlabel("step (sample) index")
    ax.set_ylabel("time [us]")
    ax.set_title("Per-step computation time (paper Fig. 15)")
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3, which="both")
    ax2.hist(np.log10(np.maximum(step_us, 1e-3)), bins=60, color="C0")
    ax2.set_yscale("log")
    ax2.set_xlabel("log10 time [us]")
    ax2.set_ylabel("steps")
    ax2.set_title("distribution")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def plot_health(health_log: list[dict], path) -> Path | None:
    """Loop latency percentiles and CPU of the daemon over the run (``health`` messages)."""
    rows = [h for h in health_log if h.get("latency_us", {}).get("p50") is not None]
    if len(rows) < 2:
        return None
    plt = _plt()
    up = np.array([h.get("uptime_s", i) for i, h in enumerate(rows)], float)
    fig, ax = plt.subplots(figsize=(10, 3.4))
    for key, c in (("p50", "C0"), ("p99", "C1"), ("p999", "C3"), ("max", "0.5")):
        ax.semilogy(up, [h["latency_us"].get(key) or np.nan for h in rows], "o-", ms=3,
                    color=c, label=key)
    ax.set_xlabel("daemon uptime [s]")
    ax.set_ylabel("loop latency [us]")
    ax.set_title("Daemon loop latency over the run (sample in ring -> estimate handed on)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, ncol=4)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


# ---------------------------------------------------------------------- demo report
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
    parts = []
    fde = run["fde"]
    # summary first: what a newcomer wants to see
    rows = []
    for i, n in enumerate(cols):
        if n in fde:
            rows.append((n, units[i] if i < len(units) else "",
                         f"{fde[n]['band']:.4f}", f"{fde[n]['full']:.4f}"))
    parts.append("<h2>Result: FDE of the identified quantities (paper eq. 33)</h2>")
    parts.append(_table(("quantity", "unit", f"FDE {fde[cols[0]]['band_label']}"
                         if cols and cols[0] in fde else "FDE band", "FDE full spectrum"),
                        rows, num_cols=(2, 3)))
    parts.append(
        f'<p class="note">FDE = &Sigma;|E&minus;C| / &Sigma;(|E|+|C|) over the one-sided FFT '
        f"bins of the band (0 = identical, 1 = unrelated); band = the load band "
        f"{band[0]:g}-{band[1]:g} Hz. Compared over samples {run['compared'][0]}-"
        f"{run['compared'][1] - 1} ({(run['compared'][1] - run['compared'][0]) * dt:.2f} s). "
        f"Paper 004 Table 9 (experiment, random 5-160 Hz): force 0.1336, displacement at "
        f"60 mm 0.3275.</p>")
    parts.append(_table(("run", "value"), [
        ("estimates received over MQTT", f"{run['received']:,} of {run['samples']:,} samples "
                                         f"({run['duplicates']} duplicates dropped)"),
        ("broker", run["broker"]),
        ("daemon exit code", run["exit_code"]),
        ("kernel time per step (offline re-run)",
         f"mean {run['step_time_us']['mean']:.1f} us, p99 {run['step_time_us']['p99']:.1f} us,"
         f" max {run['step_time_us']['max']:.0f} us (budget {dt * 1e6:.0f} us); "
         f"{run['step_time_us'].get('over_budget', 0)} steps over budget (preemption by "
         f"other processes: no real-time scheduling here)"),
        ("demo wall time", ", ".join(f"{k} {v:.1f}" for k, v in run["timings"].items())),
    ]))
    # identification figures
    parts.append("<h2>Identified vs true (paper Fig. 13/14 style)</h2>")
    parts.append(
        '<p class="note">Truth: the full FE model (Newmark with '
        f"{s['oversample']} sub-step(s) per sample, {run['truth_info'].get('full_dofs', '?')}"
        " DOFs) under the applied random force; the estimator runs the reduced model of the "
        "bundle on the noisy laser signal only.</p>")
    for i, n in enumerate(cols):
        if n not in ref:
            continue
        u = units[i] if i < len(units) else ""
        p = plot_identification(t, est[:, i], ref[n], n, u, band, d / f"identified_{n}.png",
                                std=None if std is None else std[i])
        parts.append(_img(p, f"{n}: identified against true, time window and amplitude "
                             f"spectra"))
    if y_meas is not None:
        plt = _plt()
        fig, ax = plt.subplots(figsize=(10, 2.8))
        ax.plot(t, y_meas[:, 0], lw=0.6, color="C0")
        ax.set_xlabel("time [s]")
        ax.set_ylabel(f"{y_name} [m]")
        ax.set_title(f"Measured input: {y_name} with {100 * s['noise']:g} % noise "
                     f"(SNR {run['snr_db'].get(y_name, float('nan')):.1f} dB, eq. 29)")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(d / "measurement.png", dpi=110)
        plt.close(fig)
        parts.append(_img(d / "measurement.png", "the only input of the estimator"))
    # timing
    parts.append("<h2>Computation time per step (paper Fig. 15, Table 10)</h2>")
    lat = (run.get("health") or {}).get("latency_us") or {}
    p = plot_step_times(np.asarray(step_us), dt, d / "step_time.png", daemon_latency=lat)
    parts.append(_img(p, "time of Estimator.process for each sample"))
    parts.append(
        '<p class="note">The daemon publishes loop-latency percentiles in <code>health</code>, '
        "not per-sample timings, so the per-step times above come from re-running the same "
        "kernel (<code>Estimator.process</code>, one sample per call, as the daemon with "
        "<code>block = 1</code>) over the same measurement after the run, on this machine. "
        "The daemon's loop latency (sample entering the ring to estimate handed to publisher "
        "and recorder; includes thread hand-over) is below.</p>")
    if lat:
        parts.append(_table(("daemon loop latency [us]", "p50", "p99", "p99.9", "max", "n"),
                            [("last health message", *(f"{lat.get(k, float('nan')):,.0f}"
                                                       if lat.get(k) is not None else "—"
                                                       for k in ("p50", "p99", "p999",
                                                                 "max")),
                              f"{lat.get('n', 0):,}")], num_cols=(1, 2, 3, 4, 5)))
    hp = plot_health(health_log, d / "daemon_latency.png")
    if hp is not None:
        parts.append(_img(hp, "loop latency percentiles from the health messages"))
    h = run.get("health") or {}
    if h:
        parts.append(_table(("health counter (last message)", "value"), [
            ("samples / estimates", f"{h.get('samples', 0):,} / {h.get('estimates', 0):,}"),
            ("overruns / lost samples", f"{h.get('overruns', 0)} / {h.get('lost_samples', 0)}"),
            ("bad samples / estimator resets",
             f"{h.get('bad_samples', 0)} / {h.get('estimator_resets', 0)}"),
            ("CPU / RSS", f"{h.get('cpu_percent', '—')} % / {h.get('rss_mb', '—')} MB"),
            ("publish", json.dumps(h.get("publish", {}))),
            ("recorder", json.dumps(h.get("recorder", {}))),
        ]))
    # build half
    parts.extend(build_parts(res, d))
    # configuration
    parts.append("<h2>Configuration of the run</h2>")
    parts.append(_table(("setting", "value"), [
        ("model", s["model"]), ("device id", run["device"]),
        ("load", f"random, band {band[0]:g}-{band[1]:g} Hz, RMS {s['rms']:g} N at the force "
                 f"DOF; seed {s['seed']}"),
        ("measurement noise", f"{100 * s['noise']:g} % of the signal std (eq. 28)"),
        ("record / daemon run", f"{s['duration']:g} s at {run['rate']:g} samples/s, "
                                f"real-time clock, simulated ADC at {s['level']} level"),
        ("truth", f"full FE model, {s['oversample']} Newmark sub-step(s) per sample"),
        ("channel sensitivity", f"{run['sensitivity_V_per_m']:.4g} V/m, offset 2.5 V"),
        ("MQTT", "QoS 1, JSON estimates, batch 50, health every 1 s"),
    ]))
    cfg = Path(run.get("config_path", "")) if run.get("config_path") else None
    if cfg is not None and cfg.is_file():
        parts.append("<h3>edge.toml</h3><pre>" + html.escape(cfg.read_text()) + "</pre>")
    parts.append("<h3>run.json</h3><pre>" + html.escape(json.dumps(
        {k: v for k, v in run.items() if k != "health"}, indent=1, default=str)) + "</pre>")
    path = d / "index.html"
    path.write_text(page(f"vsense demo — {res.bundle.meta.get('name', '')}: edge virtual "
                         f"sensing over MQTT", parts), encoding="utf-8")
    return path
