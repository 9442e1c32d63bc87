"""Choice of the Tikhonov parameter alpha: L-curve (maximum curvature, Hansen) and GCV.

Both criteria are evaluated on a calibration record (a simulated run with the expected sensor
noise, or a recorded measurement) by running the *exact* edge estimator for each alpha on a
logarithmic grid:

* residual norm  ``rho(alpha) = ||W^(1/2) (y - S x)||`` over the record (measurement misfit),
* solution norm  ``eta(alpha) = ||f||`` over the record (identified forces),

The L-curve is ``(log rho, log eta)``; its corner is the point of maximum signed curvature

    kappa = (x' y'' - x'' y') / (x'^2 + y'^2)^(3/2),   x = log rho, y = log eta,

with derivatives taken with respect to ``t = log alpha`` (Hansen, "The L-curve and its use in
the numerical treatment of inverse problems", 2001). The sign convention makes the corner a
maximum: the curve is traversed from the steep leg (small alpha) to the flat leg (large alpha),
a counter-clockwise turn. The L-curve of a *recursive* estimator run over a finite noisy record
is not as smooth as a batch Tikhonov problem's (rho and eta are not monotone in alpha), so
log rho and log eta are smoothed over log alpha with a Gaussian kernel of ``smooth_decades``
before the curvature is taken.

GCV uses the one-step influence of the measurement on its own fit, ``H = S Gamma K1_0``
(nch x nch): ``GCV = mean(w r^2) / (1 - tr(H) / nch)^2``.

The discrepancy principle (Morozov) picks the alpha where the weighted residual reaches the
noise level, ``mean(w r^2) = 1`` per channel, with ``w = 1 / sigma^2`` the channel weights
(the last upward crossing on the grid).

``method="auto"`` uses the discrepancy principle for fixed-lag windows on displacement
channels and the L-curve otherwise: measured on simulated records, the L-curve
under-regularises windowed displacement estimators (force errors 2-5x the best alpha on the
grid) while the discrepancy principle lands within 1.6x; the per-step estimator cannot fit the
data to the noise level at any useful alpha, and with velocity/acceleration channels the
residual reaches the noise level only where the displacement has drifted, so the discrepancy
principle fails there (see docs/estimator.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edge.bundle import Bundle, VirtualOutput
from edge.estimator import Estimator, EstimatorError, derive_operator
from offline._deps import need, progress as _progress


@dataclass
class AlphaChoice:
    """Result of an alpha sweep (arrays over the grid; NaN where the estimator was unstable)."""

    alphas: np.ndarray
    residual_norm: np.ndarray
    solution_norm: np.ndarray
    curvature: np.ndarray
    gcv: np.ndarray
    alpha_lcurve: float
    alpha_gcv: float
    window: int
    alpha_discrepancy: float = float("nan")
    method: str = "lcurve"
    unstable: list = field(default_factory=list)
    chi2: np.ndarray | None = None

    displacement_only: bool = True

    @property
    def resolved_method(self) -> str:
        if self.method == "auto":
            return "discrepancy" if self.window > 1 and self.displacement_only else "lcurve"
        return self.method

    @property
    def alpha(self) -> float:
        """The alpha of the chosen method."""
        return {"lcurve": self.alpha_lcurve, "gcv": self.alpha_gcv,
                "discrepancy": self.alpha_discrepancy}[self.resolved_method]

    def plot(self, path, title: str = "") -> str:
        """Save the L-curve (with the curvature and GCV beneath) as a PNG.

        Norms and GCV are drawn as their base-10 logarithms on linear axes: a sweep whose
        runs grew without bound (every alpha of a window unstable on the run) gives norms up
        to 1e140 and GCV values up to 1e280, where matplotlib's logarithmic tick locator
        overflows.
        """
        need("matplotlib").use("Agg")
        plt = need("matplotlib.pyplot")

        def lg(v):
            v = np.asarray(v, dtype=float)
            with np.errstate(divide="ignore", invalid="ignore"):
                out = np.log10(v)
            return np.where(np.isfinite(out), out, np.nan)

        lr, ls, lgcv, la = lg(self.residual_norm), lg(self.solution_norm), lg(self.gcv), \
            lg(self.alphas)
        ok = np.isfinite(lr) & np.isfinite(ls)
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4))
        ax.plot(lr[ok], ls[ok], ".-", color="0.3")
        for a, mark, lab in ((self.alpha_lcurve, "o", "L-curve corner"),
                             (self.alpha_gcv, "s", "GCV minimum"),
                             (self.alpha_discrepancy, "^", "discrepancy")):
            if not np.isfinite(a):
                continue
            i = int(np.argmin(np.abs(np.log(self.alphas / a))))
            ax.plot(lr[i], ls[i], mark, ms=9, mfc="none", label=f"{lab}: alpha={a:.3g}")
        ax.set_xlabel("log10 residual norm ||W^1/2 (y - S x)||")
        ax.set_ylabel("log10 solution norm ||f|| [N]")
        ax.set_title(title or f"L-curve (window L={self.window}); chosen by "
                              f"{self.resolved_method}: alpha={self.alpha:.3g}")
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
        ax2.plot(la, self.curvature, color="C0", label="L-curve curvature")
        if np.isfinite(self.alpha_lcurve):
            ax2.axvline(np.log10(self.alpha_lcurve), color="C1", ls="--", label="L-curve corner")
        ax2.set_xlabel("log10 alpha")
        ax2.set_ylabel("L-curve curvature")
        ax3 = ax2.twinx()
        ax3.plot(la, lgcv, color="C2", label="GCV (right axis)")
        if np.isfinite(self.alpha_gcv):
            ax3.axvline(np.log10(self.alpha_gcv), color="C2", ls=":", label="GCV minimum")
        ax3.set_ylabel("log10 GCV")
        h2, l2 = ax2.get_legend_handles_labels()
        h3, l3 = ax3.get_legend_handles_labels()
        ax2.legend(h2 + h3, l2 + l3, fontsize=8, loc="best")
        ax2.set_title("curvature and GCV over alpha")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return str(path)


def curvature(x, y, t):
    """Signed curvature of the parametric curve (x(t), y(t)) by second-order differences.

    Parameters
    ----------
    x, y, t : ndarray, shape (m,)
        Curve coordinates and parameter (need not be uniform).
    """
    dx = np.gradient(x, t)
    dy = np.gradient(y, t)
    ddx = np.gradient(dx, t)
    ddy = np.gradient(dy, t)
    # kappa = (x' y'' - x'' y') / (x'^2 + y'^2)^(3/2)
    return (dx * ddy - ddx * dy) / np.power(dx * dx + dy * dy, 1.5)


def smooth_log(v, t, width):
    """Gaussian-kernel smoothing of samples v(t) with standard deviation ``width`` (in t)."""
    if width <= 0:
        return np.asarray(v, dtype=float)
    k = np.exp(-0.5 * ((t[:, None] - t[None, :]) / width) ** 2)
    return (k @ v) / k.sum(axis=1)


def corner_index(x, y, t) -> int:
    """Index of maximum curvature of (x(t), y(t)), ignoring the two end points."""
    k = curvature(x, y, t)
    k[[0, -1]] = -np.inf
    k[~np.isfinite(k)] = -np.inf
    return int(np.argmax(k))


def _with_channel_outputs(bundle: Bundle) -> Bundle:
    """Bundle whose outputs are the channels themselves (to measure the fit S x)."""
    outs = []
    for ch in bundle.channels:
        row = np.zeros(bundle.n)
        row[ch.dof] = 1.0
        outs.append(VirtualOutput(name=f"__fit_{ch.name}", row=row, kind=ch.kind, unit=ch.unit))
    return bundle.replace(outputs=outs)


def alpha_grid(bundle: Bundle, window: int, n: int = 57, decades=(-10.0, 4.0)) -> np.ndarray:
    """Log grid of alpha scaled by the largest eigenvalue of J^T W J (one-step sensitivity)."""
    op = derive_operator(bundle, alpha=1.0, window=1, check_stability=False)
    D = op.S @ op.Gamma  # (nch, nf) one-step sensitivity
    w = np.array([c.weight for c in bundle.channels])
    scale = float(np.linalg.norm(D.T @ (w[:, None] * D), 2)) * window
    return scale * np.logspace(decades[0], decades[1], n)


def _sweep(fit_bundle: Bundle, Y, alphas, L: int, w, progress: bool):
    """The L-curve's points and GCV over ``alphas``: residual norm ``rho`` (weighted by ``w``),
    solution norm ``eta`` and GCV per alpha (NaN where refused or blown up), and the alphas
    refused. ``fit_bundle``: the bundle with its channels as outputs."""
    nch = len(w)
    rho = np.full(alphas.size, np.nan)
    eta = np.full(alphas.size, np.nan)
    gcv = np.full(alphas.size, np.nan)
    unstable = []
    for i, a in enumerate(_progress(alphas, desc=f"alpha sweep (L={L})", enable=progress)):
        # stability is checked for the chosen alpha only (an eigenvalue problem of the closed
        # loop per grid point would dominate the sweep); a blown-up run is dropped here
        try:
            est = Estimator(fit_bundle, alpha=float(a), window=L, check_stability=False)
        except EstimatorError:
            unstable.append(float(a))
            continue
        F, Z, fl = est.run(Y)
        if not (np.all(np.isfinite(F[L - 1:])) and np.all(np.isfinite(Z[L - 1:]))):
            unstable.append(float(a))
            continue
        # runs that blow up (unstable alpha) overflow here; they are dropped below as non-finite
        with np.errstate(over="ignore", invalid="ignore"):
            d = est.delay
            ok = np.isfinite(F[:, 0])
            # estimate row j describes sample j - d: compare with the measurement it describes
            r = (Y[: Y.shape[0] - d] - Z[d:])[ok[d:]]
            rho[i] = np.sqrt(np.sum(w * r * r))
            eta[i] = np.sqrt(np.sum(F[ok] ** 2))
            # one-step influence of y_{k+1} on its own fit: H = S Gamma K1[:, first block]
            op = est.op
            H = (op.S @ op.Gamma) @ op.Ky[:, :nch]
            denom = 1.0 - np.trace(H) / nch
            gcv[i] = np.mean(w * r * r) / max(denom, 1e-300) ** 2
    return rho, eta, gcv, unstable


def _discrepancy(alphas, good, rho, t, width: float, nobs: int):
    """The discrepancy principle: the alpha just above the last grid point whose (smoothed)
    weighted residual per sample and channel ``chi2`` is below 1 (the noise level, weights
    being 1/sigma^2); taking the last crossing skips small-alpha runs made noisy by a marginal
    closed loop. ``(chi2 per alpha, alpha)``."""
    chi2 = np.full(alphas.size, np.nan)
    chi2[good] = np.exp(smooth_log(np.log(rho[good] ** 2 / nobs), t, width))
    below = np.flatnonzero(good & (chi2 < 1.0))
    if below.size == 0:
        return chi2, float(alphas[np.flatnonzero(good)[0]])
    nxt = np.flatnonzero(good & (np.arange(alphas.size) > below[-1]))
    return chi2, float(alphas[nxt[0]]) if nxt.size else float("nan")


def choose_alpha(bundle: Bundle, Y: np.ndarray, window: int | None = None,
                 alphas: np.ndarray | None = None, method: str = "auto",
                 smooth_decades: float = 0.35, progress: bool = True) -> AlphaChoice:
    """Sweep alpha on a calibration record and pick it by the L-curve corner or GCV.

    Parameters
    ----------
    bundle : Bundle
        The bundle (its alpha is ignored).
    Y : ndarray, shape (nt, nch)
        Calibration measurements in channel units.
    window : int, optional
        Fixed-lag window (default: the bundle's).
    alphas : ndarray, optional
        Grid (default :func:`alpha_grid`).
    method : {"auto", "lcurve", "gcv", "discrepancy"}
    smooth_decades : float
        Width of the Gaussian smoothing of the L-curve over log10(alpha).
    """
    if method not in ("auto", "lcurve", "gcv", "discrepancy"):
        raise ValueError(f"alpha method must be 'auto', 'lcurve', 'gcv' or 'discrepancy', "
                         f"got {method!r}")
    L = int(bundle.window if window is None else window)
    Y = np.ascontiguousarray(Y, dtype=np.float64)
    if alphas is None:
        alphas = alpha_grid(bundle, L)
    alphas = np.sort(np.asarray(alphas, dtype=float))
    w = np.array([c.weight for c in bundle.channels])
    nch = len(bundle.channels)
    rho, eta, gcv, unstable = _sweep(_with_channel_outputs(bundle), Y, alphas, L, w, progress)
    good = np.isfinite(rho) & np.isfinite(eta) & (rho > 0) & (eta > 0)
    if good.sum() < 5:
        raise EstimatorError(
            f"alpha selection failed: only {int(good.sum())} of {alphas.size} grid values give "
            "a stable estimator with a finite L-curve point")
    t = np.log(alphas[good])
    width = smooth_decades * np.log(10.0)
    xs = smooth_log(np.log(rho[good]), t, width)
    ys = smooth_log(np.log(eta[good]), t, width)
    kap = np.full(alphas.size, np.nan)
    kap[good] = curvature(xs, ys, t)
    i_corner = np.flatnonzero(good)[corner_index(xs, ys, t)]
    g = np.where(good, gcv, np.inf)
    i_gcv = int(np.argmin(g))
    nobs = (Y.shape[0] - (L - 1)) * nch
    chi2, alpha_disc = _discrepancy(alphas, good, rho, t, width, nobs)
    choice = AlphaChoice(alphas=alphas, residual_norm=rho, solution_norm=eta, curvature=kap,
                       gcv=gcv, alpha_lcurve=float(alphas[i_corner]),
                       alpha_gcv=float(alphas[i_gcv]), alpha_discrepancy=alpha_disc,
                       window=L, method=method, unstable=unstable, chi2=chi2,
                       displacement_only=all(c.kind == "displacement"
                                             for c in bundle.channels))
    _ensure_stable(choice, bundle)
    return choice


def _ensure_stable(choice: AlphaChoice, bundle: Bundle) -> None:
    """Move each chosen alpha up the grid until the closed loop is stable (rho <= 1)."""
    for attr in ("alpha_lcurve", "alpha_gcv", "alpha_discrepancy"):
        a0 = getattr(choice, attr)
        if not np.isfinite(a0):
            continue
        for a in choice.alphas[choice.alphas >= a0]:
            try:
                derive_operator(bundle, alpha=float(a), window=choice.window)
            except EstimatorError:
                if float(a) not in choice.unstable:
                    choice.unstable.append(float(a))
                continue
            setattr(choice, attr, float(a))
            break
        else:
            setattr(choice, attr, float("nan"))
