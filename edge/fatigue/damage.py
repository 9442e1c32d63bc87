"""Miner damage, damage rate, equivalent stress range and the range-mean histogram.

Palmgren-Miner: a cycle of stress range ``S`` consumes ``1 / N(S)`` of the life, ``N`` from
the S-N curve (:mod:`edge.fatigue.sn_curve`); a half cycle half of that. The damage of a
history is ``D = sum_i n_i / N(S_i)``, failure at ``D = 1`` (design codes: ``D <= 1`` with
their partial factors). The damage rate is ``D / T`` over the counted time ``T``; the time
to ``D = 1`` at that rate is ``(1 - D) / rate``.

Equivalent constant-amplitude range for ``n_eq`` cycles and slope ``m``:
``S_eq = (sum_i n_i S_i^m / n_eq)^(1/m)`` (one-slope Basquin, the ranges above the cut-off);
with ``n_eq`` the counted cycles it is the range that, repeated, does the same damage on a
one-slope curve of slope ``m``.

The range-mean histogram has fixed bins declared up front (:class:`HistogramBins`): ranges
``[0, range_max)`` in ``n_range`` bins, means ``[mean_lo, mean_hi)`` in ``n_mean`` bins, in
the units of the counted signal; a cycle outside goes into the edge bin and is counted as
clipped. Memory: ``8 n_range n_mean`` bytes per hotspot (32 x 32 bins: 8 KiB), whatever the
record length. The damage itself is summed cycle by cycle from the exact range, not from the
bins.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.fatigue.sn_curve import SNCurve


class HistogramError(ValueError):
    """Bins that cannot hold a cycle."""


@dataclass(frozen=True)
class HistogramBins:
    """Range-mean bins of one hotspot, in the counted signal's units."""

    range_max: float
    mean_lo: float
    mean_hi: float

    def __post_init__(self):
        vals = (self.range_max, self.mean_lo, self.mean_hi)
        if not all(np.isfinite(v) for v in vals) or self.range_max <= 0 \
                or self.mean_hi <= self.mean_lo:
            raise HistogramError(f"histogram bins need range_max > 0 and mean_hi > mean_lo, "
                                 f"finite; got {vals}")

    def row(self) -> np.ndarray:
        return np.array([self.range_max, self.mean_lo, self.mean_hi])

    def edges(self, n_range: int, n_mean: int):
        """Range edges (n_range + 1,) and mean edges (n_mean + 1,)."""
        return (np.linspace(0.0, self.range_max, n_range + 1),
                np.linspace(self.mean_lo, self.mean_hi, n_mean + 1))


def miner_damage(ranges, weights, curve: SNCurve, scale: float = 1.0) -> float:
    """``sum w_i / N(scale * r_i)``: ranges in signal units, ``scale`` to MPa."""
    r = np.abs(np.asarray(ranges, dtype=np.float64)) * scale
    w = np.asarray(weights, dtype=np.float64)
    if r.size == 0:
        return 0.0
    with np.errstate(divide="ignore"):  # N underflows to 0 for absurd ranges: D = inf
        return float(np.sum(w / curve.cycles(r)))


def residue_half_cycles(residue) -> tuple[np.ndarray, np.ndarray]:
    """ASTM E1049-85 (2017) 5.4.4: each range between consecutive residue points is a half
    cycle. Returns ``(from, to)`` arrays."""
    r = np.asarray(residue, dtype=np.float64)
    return r[:-1], r[1:]


def equivalent_range(ranges, weights, m: float, n_eq: float | None = None,
                     cutoff: float = 0.0) -> float:
    """``(sum w S^m / n_eq)^(1/m)`` over ranges ``S >= cutoff`` (same units as the ranges);
    ``n_eq`` defaults to the summed weights."""
    S = np.abs(np.asarray(ranges, dtype=np.float64))
    w = np.asarray(weights, dtype=np.float64)
    keep = S >= cutoff
    n = float(np.sum(w)) if n_eq is None else float(n_eq)
    if n <= 0 or not np.any(keep):
        return 0.0
    return float((np.sum(w[keep] * S[keep] ** m) / n) ** (1.0 / m))


def damage_rate(damage: float, seconds: float) -> float:
    """Damage per second over the counted time (0 for no time)."""
    return damage / seconds if seconds > 0 else 0.0


def histogram_ranges(hist: np.ndarray, bins: HistogramBins) -> tuple[np.ndarray, np.ndarray]:
    """Bin-centre ranges and counts summed over the means: ``(ranges, counts)``."""
    nr = hist.shape[0]
    r_edges, _ = bins.edges(nr, hist.shape[1])
    return 0.5 * (r_edges[1:] + r_edges[:-1]), hist.sum(axis=1)
