"""Accuracy of inverse maps: relative-error metrics (paper 000, eq. 18-21), a Table-5-like
comparison of feature types, and the extrapolation test of Sect. 4.3.2.
"""

from __future__ import annotations

import numpy as np

from offline.inverse.sampling import widen


def relative_errors(p_hat, p_true) -> np.ndarray:
    """ε_s = (p̂_s - p̄_s) ⊘ p̄_s   (eq. 18), shape (S, np)."""
    p_hat, p_true = np.asarray(p_hat, np.float64), np.asarray(p_true, np.float64)
    if p_hat.shape != p_true.shape:
        raise ValueError(f"estimates {p_hat.shape} and true values {p_true.shape} differ in shape")
    if np.any(p_true == 0):
        raise ValueError("relative error undefined: a true parameter value is 0 (eq. 18 divides by it)")
    # eps = (p_hat - p_true) / p_true   (eq. 18)
    return (p_hat - p_true) / p_true


def metrics(p_hat, p_true) -> dict:
    """μ_ε (eq. 19), σ_ε (eq. 20, unbiased), μ_|ε| (eq. 21) per parameter, as fractions.

    Returns
    -------
    dict of ndarray (np,): ``mu``, ``sigma``, ``mu_abs``; and ``n`` (samples)
    """
    eps = relative_errors(p_hat, p_true)
    S = eps.shape[0]
    if S < 2:
        raise ValueError("metrics need at least 2 test samples (sigma uses n - 1)")
    # mu_eps = 1/n Σ eps_s   (eq. 19)
    mu = eps.sum(axis=0) / S
    # sigma_eps = sqrt( 1/(n-1) Σ (eps_s - mu)⊗(eps_s - mu) )   (eq. 20)
    sigma = np.sqrt(((eps - mu) * (eps - mu)).sum(axis=0) / (S - 1))
    # mu_|eps| = 1/n Σ |eps_s|   (eq. 21)
    mu_abs = np.abs(eps).sum(axis=0) / S
    return {"mu": mu, "sigma": sigma, "mu_abs": mu_abs, "n": S}


def table(rows: dict, names, n_features: dict | None = None, title: str = "") -> str:
    """Text table like the paper's Table 5: one row per feature type, μ_ε / σ_ε / μ_|ε| in %.

    Parameters
    ----------
    rows : dict  feature type -> metrics dict (from :func:`metrics`)
    names : sequence of str   parameter names
    n_features : dict  feature type -> n_psi
    """
    names = list(names)
    head = f"{'feature type':<22}{'n_psi':>6}  " + "  ".join(f"{n:^26}" for n in names)
    sub = f"{'':<22}{'':>6}  " + "  ".join(f"{'mu_eps':>8}{'sig_eps':>9}{'mu_|eps|':>9}" for _ in names)
    lines = ([title] if title else []) + [head, sub, "-" * len(sub)]
    for kind, m in rows.items():
        nf = "" if n_features is None else str(n_features.get(kind, ""))
        cells = "  ".join(f"{100 * m['mu'][j]:8.3f}{100 * m['sigma'][j]:9.3f}{100 * m['mu_abs'][j]:9.3f}"
                          for j in range(len(names)))
        lines.append(f"{kind:<22}{nf:>6}  {cells}")
    lines.append("(all in %: bias eq. 19, std eq. 20, mean absolute relative error eq. 21)")
    return "\n".join(lines)


ZONES = ("inside", "band", "outside")


def zones(theta, bounds, params, band: float = 0.2) -> np.ndarray:
    """Extrapolation zone of each sample (Sect. 4.3.2) for the parameters ``params`` (indices).

    ``outside``: some listed parameter lies outside the training box; ``band``: inside, but in
    the central band of width ``band`` (fraction of the box width) excluded from training for
    some listed parameter; ``inside``: elsewhere in the box.
    """
    th = np.asarray(theta, np.float64)
    b = np.asarray(bounds, np.float64)
    lab = np.full(th.shape[0], "inside", dtype=object)
    inb = np.zeros(th.shape[0], bool)
    out = np.zeros(th.shape[0], bool)
    for j in params:
        lo, hi = b[j]
        c, hw = 0.5 * (lo + hi), 0.5 * band * (hi - lo)
        out |= (th[:, j] < lo) | (th[:, j] > hi)
        inb |= np.abs(th[:, j] - c) < hw
    lab[inb] = "band"
    lab[out] = "outside"
    return lab


def extrapolation_split(theta_train, bounds, params, band: float = 0.2) -> np.ndarray:
    """Mask of training samples kept when the central band is excluded (Sect. 4.3.2)."""
    return zones(theta_train, bounds, params, band) == "inside"


def extrapolation_test_box(bounds, params, extend: float = 0.5) -> np.ndarray:
    """Test box: the training box widened by ``extend`` of its width for ``params`` (Sect. 4.3.2)."""
    b = np.asarray(bounds, np.float64).copy()
    w = widen(b, extend)
    for j in params:
        b[j] = w[j]
    return b


def zone_report(p_hat, p_true, labels, names, flags=None) -> str:
    """μ_|ε| per parameter and zone (and the fraction flagged out of range per zone)."""
    eps = np.abs(relative_errors(p_hat, p_true))
    lines = [f"{'zone':<10}{'n':>6}  " + "".join(f"{n + ' mu_|eps| %':>20}" for n in names)
             + ("   flagged %" if flags is not None else "")]
    for z in ZONES:
        m = labels == z
        if not m.any():
            continue
        row = f"{z:<10}{int(m.sum()):>6}  " + "".join(f"{100 * eps[m, j].mean():>20.3f}" for j in range(len(names)))
        if flags is not None:
            row += f"   {100 * np.mean(np.asarray(flags)[m]):9.1f}"
        lines.append(row)
    return "\n".join(lines)
