"""Figures of the demo report (``offline.report.write_demo_report``): identified against true
(time window and spectra), per-step computation time, the daemon's loop latency, the measured
input. Each function writes one PNG and returns its path; matplotlib is imported when used.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from offline._deps import need


def _plt():
    need("matplotlib").use("Agg")
    return need("matplotlib.pyplot")


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


def plot_identification(t, est, ref, name: str, unit: str, band, path, window_s=0.3,
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
        ax.fill_between(t[w], est[w] - 2 * sd, est[w] + 2 * sd, color="C3", alpha=0.10, lw=0,
                        label="identified +/- 2 sigma (stated uncertainty)")
    ax.plot(t[w], ref[w], color="0.1", lw=2.4, alpha=0.45, label="true (full FE model)")
    ax.plot(t[w], est[w], color="C3", lw=1.1, label="identified (edge daemon, over MQTT)")
    ax.plot(t[w], bandpass(est, dt, band)[w], color="C0", lw=0.9, ls="--",
            label=f"identified, {band[0]:g}-{band[1]:g} Hz part (what the FDE sees)")
    span = np.nanmax(np.abs(np.concatenate([ref[w], est[w]]))) if w.any() else np.nan
    if np.isfinite(span) and span > 0:  # the signal fills the panel; a wide band is clipped
        ax.set_ylim(-1.6 * span, 1.6 * span)
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
               label=f"Oh et al., Table 10: mean on a Pi 3B+ ({paper_mean_us:g} us)")
    ax.axhline(step_us.mean(), color="C2", ls="--", lw=1.0,
               label=f"mean here {step_us.mean():.1f} us")
    if daemon_latency and daemon_latency.get("p99") is not None:
        ax.axhline(daemon_latency["p99"], color="C1", ls="-.", lw=1.0,
                   label=f"daemon latency p99 {daemon_latency['p99']:.0f} us (health; includes "
                         f"waiting, see the note)")
    ax.set_yscale("log")
    ax.set_xlabel("step (sample) index")
    ax.set_ylabel("time [us]")
    ax.set_title("Per-step computation time (Oh et al., Fig. 15)")
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


def plot_health(health_log: list[dict], path, period_us: float | None = None) -> Path | None:
    """Loop latency percentiles of the daemon over the run (``health`` messages); the
    latency is measured from DRDY or from the sample entering the ring, as ``latency_from``
    of the messages says; ``period_us`` draws the sample period."""
    rows = [h for h in health_log if h.get("latency_us", {}).get("p50") is not None]
    if len(rows) < 2:
        return None
    plt = _plt()
    up = np.array([h.get("uptime_s", i) for i, h in enumerate(rows)], float)
    fig, ax = plt.subplots(figsize=(10, 3.4))
    for key, c in (("p50", "C0"), ("p99", "C1"), ("p999", "C3"), ("max", "0.5")):
        ax.semilogy(up, [h["latency_us"].get(key) or np.nan for h in rows], "o-", ms=3,
                    color=c, label=key)
    if period_us:
        ax.axhline(period_us, color="C3", lw=1.0, ls="--", label=f"sample period {period_us:g} us")
    start = {"drdy": "DRDY (sample ready at the ADC)", "ring": "sample in the ring"}.get(
        rows[-1].get("latency_from", "ring"), str(rows[-1].get("latency_from")))
    ax.set_xlabel("daemon uptime [s]")
    ax.set_ylabel("latency [us]")
    ax.set_title(f"Daemon latency over the run: {start} -> estimate handed to MQTT and recorder")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, ncol=5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)




def plot_measurement(t, y, name: str, noise: float, snr_db: float, path) -> Path:
    """The measured input signal over the whole record."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(10, 2.8))
    ax.plot(t, y, lw=0.6, color="C0")
    ax.set_xlabel("time [s]")
    ax.set_ylabel(f"{name} [m]")
    ax.set_title(f"Measured input: {name} with {100 * noise:g} % noise (SNR {snr_db:.1f} dB, "
                 f"eq. 29)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
