"""HTML report of a calibration: prior and posterior marginals, correlations, fit."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from offline.report import _img, _plt, _table, page


def _marginals(res, path):
    plt = _plt()
    p = res.problem
    n = len(res.names)
    cols = min(n, 4)
    rows = -(-n // cols)
    fig, axs = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.4 * rows), squeeze=False)
    for i, name in enumerate(res.names):
        ax = axs[i // cols][i % cols]
        m, s = res.vb.m[i], res.vb.std[i]
        m0, s0 = p.m0[i], p.priors[i].std
        lo, hi = min(m - 4 * s, m0 - 3 * s0), max(m + 4 * s, m0 + 3 * s0)
        xi = np.linspace(lo, hi, 800)
        t = p.transforms[i] if i < p.nmodel else None
        th = t.to_theta(xi) if t is not None else xi * p.scale[p.off_ch[i - p.nmodel]]
        jac = np.abs(t.dtheta_dxi(xi)) if t is not None else p.scale[p.off_ch[i - p.nmodel]]
        for mu, sd, lab, c in ((m0, s0, "prior", "0.6"), (m, s, "posterior", "C0")):
            # density of θ = t(ξ), ξ ~ N(mu, sd²): N(ξ; mu, sd) / |dθ/dξ|
            dens = np.exp(-0.5 * ((xi - mu) / sd) ** 2) / (sd * np.sqrt(2 * np.pi)) / jac
            ax.plot(th, dens / dens.max(), color=c, label=lab)
        zoom = t.to_theta(np.array([m - 5 * s, m + 5 * s])) if t is not None else None
        if zoom is not None and s < 0.05 * s0:
            ax.set_xlim(min(zoom), max(zoom))
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
    for j in range(n, rows * cols):
        axs[j // cols][j % cols].axis("off")
    axs[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _corr(res, path):
    plt = _plt()
    c = res.vb.corr
    fig, ax = plt.subplots(figsize=(1.5 + 0.45 * len(c), 1.2 + 0.4 * len(c)))
    im = ax.imshow(c, vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_xticks(range(len(c)), res.names, rotation=90, fontsize=7)
    ax.set_yticks(range(len(c)), res.names, fontsize=7)
    fig.colorbar(im, ax=ax, shrink=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _fit(res, path, window_s=0.5):
    plt = _plt()
    fits = res.fit()
    name, t, Y, G = fits[0]
    sensors = res.problem.setup.sensors
    fig, axs = plt.subplots(len(sensors), 1, figsize=(8, 1.8 * len(sensors)), squeeze=False)
    k = t <= t[0] + window_s
    for c, s in enumerate(sensors):
        ax = axs[c][0]
        ax.plot(t[k], Y[k, c], color="0.5", lw=1, label="measured")
        ax.plot(t[k], G[k, c], color="C0", lw=1, label="model at the posterior")
        ax.set_ylabel(s, fontsize=8)
        ax.tick_params(labelsize=7)
    axs[0][0].legend(fontsize=7)
    axs[-1][0].set_xlabel(f"time [s] ({name})")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_report(res, out_dir, extra_rows=()) -> Path:
    """``OUTDIR/report.html`` with the figures as embedded PNGs; returns the path."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    _marginals(res, d / "marginals.png")
    _corr(res, d / "correlation.png")
    _fit(res, d / "fit.png")
    info = res.to_dict()
    rows = [(n, f"{pm:.6g}", f"{m:.6g}" + ("" if info["determined"][n] else " (not determined)"),
             f"{s:.3g}", f"{iv[0]:.3g} .. {iv[1]:.3g}", f"{info['nonlinearity'][n]:.3g}")
            for n, pm, m, s, iv in zip(info["names"], info["prior"]["median"], info["mean"],
                                       info["std"], info["interval95"])]
    parts = [
        "<h2>Posterior</h2>",
        _table(["parameter", "prior median", "posterior median", "posterior std",
                "95 % interval", "nonlinearity L (eq. 18)"], rows, num_cols=(1, 2, 3, 4, 5)),
        *[f"<p><b>Not determined:</b> {u['text']}</p>"
          for u in info["identifiability"]["undetermined"]],
        _table(["noise group", "noise std", "likelihood weight", "residual lag-1"],
               [(g, f"{info['noise_std'][g]:.3g}", f"{v['weight']:.3g}", f"{v['lag1']:.3f}")
                for g, v in info["noise_groups"].items()], num_cols=(1, 2, 3)),
        _table(["quantity", "value"],
               [("free energy F (nats)", f"{info['free_energy']:.6g}"),
                ("converged", info["converged"]), ("model evaluations", info["model_evaluations"]),
                ("time [s]", f"{info['seconds']:.2f}")] + list(extra_rows)),
        _img(d / "marginals.png", "prior (grey) and posterior (blue) marginals, scaled to peak 1"),
        _img(d / "correlation.png", "posterior correlation"),
        _img(d / "fit.png", "measured and calibrated-model response, first record"),
    ]
    path = d / "report.html"
    path.write_text(page("vsense calibration", parts))
    return path
