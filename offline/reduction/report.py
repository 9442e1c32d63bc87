"""The reduction report: full vs reduced eigenfrequencies and the eigenvalue error (eq. 31).

Paper 004 eq. 31: ``eps_i = (lambda_i - lambda_hat_i) / lambda_i * 100`` [%], with
``lambda = omega^2`` of the full model and ``lambda_hat`` of the reduced one. The reduced model
is a Rayleigh-Ritz projection, so ``lambda_hat_i >= lambda_i`` and ``eps_i <= 0``; plots show
``|eps_i|`` on a log axis like the paper's Fig. 5 and 11.

Rigid-body modes (``lambda_i = 0``) have no relative error; for them the denominator is the
first elastic eigenvalue of the full model (documented in docs/reduction.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from offline._deps import need

#: Smallest |error| [%] drawn on the log axis (exact agreement is drawn here).
PLOT_FLOOR = 1e-14


def frequencies(lam: np.ndarray) -> np.ndarray:
    """Natural frequencies [Hz] from eigenvalues ``lambda = omega^2`` [rad^2/s^2].

    Round-off negatives of rigid-body modes give 0 Hz.
    """
    # f = sqrt(lambda) / (2 pi)
    return np.sqrt(np.clip(np.asarray(lam, dtype=float), 0.0, None)) / (2.0 * np.pi)


def eigenvalue_error(lam_full: np.ndarray, lam_reduced: np.ndarray, n_rigid: int = 0
                     ) -> np.ndarray:
    """Percentage eigenvalue error, paper 004 eq. 31.

    Parameters
    ----------
    lam_full, lam_reduced : ndarray, shape (nr,)
        Lowest eigenvalues of the full and reduced models [rad^2/s^2], ascending.
    n_rigid : int
        Number of rigid-body modes at the start of ``lam_full``; their error is taken relative
        to the first elastic eigenvalue ``lam_full[n_rigid]`` (or absolute if none).

    Returns
    -------
    ndarray, shape (nr,)
        ``(lambda_i - lambda_hat_i) / lambda_i * 100`` [%].
    """
    lf = np.asarray(lam_full, dtype=float)
    lr = np.asarray(lam_reduced, dtype=float)
    if lf.shape != lr.shape:
        raise ValueError(f"lam_full {lf.shape} and lam_reduced {lr.shape} differ in shape")
    den = lf.copy()
    if n_rigid:
        den[:n_rigid] = lf[n_rigid] if n_rigid < lf.size else 1.0
    # eps_i = (lambda_i - lambda_hat_i) / lambda_i * 100   (eq. 31)
    return (lf - lr) / den * 100.0


@dataclass
class ReductionReport:
    """Accuracy and cost of one reduction.

    Attributes
    ----------
    method : str
        ``"gmr+"``, ``"cb"`` or ``"guyan"``.
    n_full, n_reduced : int
        DOFs before and after.
    freqs_full, freqs_reduced : ndarray, shape (nr,)
        Lowest natural frequencies [Hz] of the full and reduced models,
        ``nr = min(n_report, n_reduced)``.
    eig_error : ndarray, shape (nr,)
        Eigenvalue error [%], eq. 31 (``<= 0`` up to round-off).
    timings : dict of str -> float
        Wall-clock seconds per phase.
    diagnostics : dict
        ``asym_M``, ``asym_K`` (relative asymmetry before symmetrising), ``sigma_slave``,
        ``sigma_full`` (shifts used), ``n_rigid_slave``, ``n_rigid_full``,
        ``flex_iterations`` and the like.
    lam_full, lam_reduced : ndarray, shape (nr,)
        The eigenvalues [rad^2/s^2] behind the frequencies.
    n_rigid : int
        Rigid-body modes of the full model among the reported ones.
    warnings : list of str
        ``WARNING: ...`` lines printed after the largest error (a mechanism, an in-band error
        above a threshold: :mod:`offline.model.checks`, set by
        :func:`offline.reduced.reduce_model`).
    """

    method: str
    n_full: int
    n_reduced: int
    freqs_full: np.ndarray
    freqs_reduced: np.ndarray
    eig_error: np.ndarray
    timings: dict = field(default_factory=dict)
    diagnostics: dict = field(default_factory=dict)
    lam_full: np.ndarray = field(default_factory=lambda: np.zeros(0))
    lam_reduced: np.ndarray = field(default_factory=lambda: np.zeros(0))
    n_rigid: int = 0
    warnings: list = field(default_factory=list)

    def format(self, f_band: float | None = None) -> str:
        """Plain-text table: mode, full and reduced frequency [Hz], eigenvalue error [%]
        (eq. 31), and the largest error; with ``f_band`` [Hz] (the build passes half the
        sample rate) the largest error is given separately for the modes within the band and
        for those above it."""
        lines = [
            f"reduction {self.method}: {self.n_full} -> {self.n_reduced} DOFs; eigenvalue "
            "error = (full - reduced) / full eigenvalue (Oh et al. eq. 31)",
            f"{'mode':>4}  {'f_full [Hz]':>14}  {'f_reduced [Hz]':>14}  {'error [%]':>13}",
        ]
        for i, (ff, fr, e) in enumerate(zip(self.freqs_full, self.freqs_reduced,
                                            self.eig_error)):
            tag = "  rigid" if i < self.n_rigid else ""
            lines.append(f"{i + 1:>4}  {ff:>14.6g}  {fr:>14.6g}  {e:>13.3e}{tag}")
        if self.eig_error.size:
            lines.append(largest_error(np.abs(self.eig_error),
                                        np.asarray(self.freqs_full, float), f_band))
        lines += list(self.warnings)
        if self.timings:
            lines.append("timings [s]: " + ", ".join(
                f"{k} {v:.3g}" for k, v in self.timings.items()))
        if self.diagnostics:
            lines.append("diagnostics: " + ", ".join(
                f"{k} {_fmt(v)}" for k, v in self.diagnostics.items()))
        return "\n".join(lines)

    def as_arrays(self) -> dict:
        """``{"freqs_full", "freqs_reduced", "eig_error"}`` for the bundle's report arrays."""
        return {"freqs_full": np.asarray(self.freqs_full, dtype=np.float64),
                "freqs_reduced": np.asarray(self.freqs_reduced, dtype=np.float64),
                "eig_error": np.asarray(self.eig_error, dtype=np.float64)}

    def plot(self, path) -> Path:
        """PNG of ``|eps_i|`` [%] vs mode number on a log axis (paper Fig. 5/11)."""
        return plot_reports([self], path)


def plot_reports(reports, path, title: str | None = None) -> Path:
    """Several reports on one log-scale axes (e.g. GMR+ vs CB vs Guyan), saved as PNG.

    Parameters
    ----------
    reports : sequence of ReductionReport
    path : str or Path
        Output file (``.png``).
    title : str, optional
    """
    need("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    reports = list(reports)
    if not reports:
        raise ValueError("plot_reports: no reports given")
    fig = Figure(figsize=(6.4, 4.0), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    markers = "osd^v<>"
    for j, r in enumerate(reports):
        e = np.abs(np.asarray(r.eig_error, dtype=float))
        modes = np.arange(1, e.size + 1)
        ax.semilogy(modes, np.maximum(e, PLOT_FLOOR), marker=markers[j % len(markers)],
                    ms=4, lw=1, label=f"{r.method} ({r.n_reduced} DOFs)")
    ax.set_xlabel("mode number")
    ax.set_ylabel("relative eigenvalue error |eps| [%] (eq. 31)")
    ax.set_title(title or f"Relative eigenvalue error, full model {reports[0].n_full} DOFs")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, format="png")
    return path


def largest_error(a: np.ndarray, f: np.ndarray, f_band: float | None) -> str:
    """One line: the largest |eigenvalue error| [%], split at ``f_band`` [Hz] when given."""
    if f_band is None:
        return (f"largest |eigenvalue error|: {a.max():.3g} % (the {a.size} modes listed, up "
                f"to {f.max():.4g} Hz)")
    inb = f <= f_band
    parts = []
    if inb.any():
        parts.append(f"{a[inb].max():.3g} % for the {int(inb.sum())} modes within the band "
                     f"(up to {f_band:g} Hz, half the sample rate)")
    if (~inb).any():
        parts.append(f"{a[~inb].max():.3g} % for the {int((~inb).sum())} modes above the band "
                     f"({f[~inb].min():.4g}-{f[~inb].max():.4g} Hz)")
    return "largest |eigenvalue error|: " + "; ".join(parts)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)
