"""Build-report figures of a learned load: declared against fitted force spectra (with what
the records say), and the whiteness of the estimator's innovations on the records."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np

from offline._deps import need
from offline.load.check import autocorrelation, innovations


def _plt():
    need("matplotlib").use("Agg")
    return need("matplotlib.pyplot")


def plot_spectra(fit, force_names, path) -> str:
    """Per force: the declared and the fitted PSD [unit^2/Hz] over the fitted band, and the
    force spectrum the records imply under the fitted model (posterior mean per bin)."""
    plt = _plt()
    f, fitted, post = fit.info["whittle"].posterior_force_spectra(
        fit.model.forces, fit.model.noise_std, fit.model.corr, fit.model.components)
    prior = fit.prior.psd(f)
    nf = len(force_names)
    fig, axes = plt.subplots(nf, 1, figsize=(6.4, 2.6 * nf), squeeze=False)
    for j, (ax, n) in enumerate(zip(axes[:, 0], force_names)):
        ax.loglog(f, np.real(post[:, j, j]), ".", ms=2, color="0.6",
                  label="from the records")
        ax.loglog(f, prior[:, j, j], "--", color="C0", label="declared (prior)")
        ax.loglog(f, fitted[:, j, j], "-", color="C3", label="fitted")
        ax.set_ylabel(f"{n} PSD [unit²/Hz]")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    axes[-1, 0].set_xlabel("frequency [Hz]")
    fig.suptitle("load model: declared and learned force spectra", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def plot_whiteness(bundle, Y, path, lags: int = 50) -> str:
    """Autocorrelation of each channel's whitened innovation (after 1 s), with the 95 %
    band of white noise, ``+/- 1.96 / sqrt(n)``."""
    plt = _plt()
    eps = innovations(bundle, Y)[int(round(1.0 / bundle.dt)):]
    n = eps.shape[0]
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for c, ch in enumerate(bundle.channels):
        r = autocorrelation(eps[:, c], lags)
        ax.plot(np.arange(1, lags + 1), r, ".-", ms=3,
                label=f"{ch.name} (variance {np.var(eps[:, c]):.2f})")
    ax.axhspan(-1.96 / np.sqrt(n), 1.96 / np.sqrt(n), color="0.85", label="white, 95 %")
    ax.set_xlabel("lag [samples]")
    ax.set_ylabel("autocorrelation")
    ax.set_title("innovations on the record (white, variance 1 for a right model)",
                 fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def load_parts(res, d: Path, img) -> list[str]:
    """HTML blocks of the load model for the build report (``img(path, caption)``)."""
    fit = res.load_fit
    if fit is None:
        return []
    b = res.bundle
    parts = ["<h2>Load model learned from the records</h2>",
             "<pre>" + html.escape(fit.summary([f.name for f in b.forces],
                                              [c.name for c in b.channels])) + "</pre>"]
    chk = fit.info.get("check")
    if chk:
        parts.append(f'<p class="{"note" if chk["ok"] else "bad"}">{html.escape(chk["text"])}</p>')
        cc = chk.get("chain")
        if cc:
            parts.append(f'<p class="{"note" if cc["ok"] else "bad"}">{html.escape(cc["text"])}</p>')
    if (d / "load_spectra.png").exists():
        parts.append(img(d / "load_spectra.png", "declared and learned force spectra"))
    if (d / "innovations.png").exists():
        parts.append(img(d / "innovations.png", "whiteness of the estimator's innovations "
                                                "on the first record"))
    return parts
