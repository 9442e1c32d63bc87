"""The chi-square distribution of the smoother's model check (normalised innovation squared
summed over a window): tail probability and threshold by the Wilson-Hilferty cube-root normal
approximation."""

from __future__ import annotations

import math


def _norm_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def chi2_sf(x: float, dof: int) -> float:
    """P(X > x) for X ~ chi-square(dof), Wilson-Hilferty cube-root normal approximation
    (relative error of the quantile < 1e-3 for dof >= 100; the model check uses dof >= 1000)."""
    if x <= 0:
        return 1.0
    k = float(dof)
    # z = ((x/k)^(1/3) - (1 - 2/(9k))) / sqrt(2/(9k))
    z = ((x / k) ** (1.0 / 3.0) - (1.0 - 2.0 / (9.0 * k))) / math.sqrt(2.0 / (9.0 * k))
    return _norm_sf(z)


def nis_threshold(dof: int, p: float) -> float:
    """x with ``chi2_sf(x, dof) = p`` (Wilson-Hilferty; the normal quantile by bisection)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _norm_sf(mid) > p:
            lo = mid
        else:
            hi = mid
    z = 0.5 * (lo + hi)
    k = float(dof)
    return k * (1.0 - 2.0 / (9.0 * k) + z * math.sqrt(2.0 / (9.0 * k))) ** 3
