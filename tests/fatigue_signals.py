"""Seeded test records for the fatigue counter: narrow-band vibration with bursts, level
changes and gaps (not a stationary band)."""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter


def record(n: int, seed: int, integer: bool = False, gaps: bool = True) -> np.ndarray:
    """``n`` samples: an AR(2) resonance (~25 samples a period) whose amplitude jumps between
    levels in bursts, on a mean that changes in steps, with NaN gaps. ``integer``: rounded to
    integers in [0, k] (ADC-code-like, plateaus and repeated levels)."""
    rng = np.random.default_rng(seed)
    seg = rng.integers(500, 40000, size=n // 500 + 2)
    nseg = int(np.searchsorted(np.cumsum(seg), n)) + 1
    seg = seg[:nseg]
    level = np.repeat(rng.normal(0.0, 30.0, nseg), seg)[:n]
    amp = np.repeat(rng.choice([0.3, 2.0, 8.0, 30.0], nseg), seg)[:n]
    w0 = 2 * np.pi / 25
    e = rng.standard_normal(n)
    y = lfilter([0.1], [1.0, -2 * 0.98 * np.cos(w0), 0.98 ** 2], e)
    y = level + amp * y / np.std(y)
    if integer:
        y = np.round(y)
        y -= y.min()
    if gaps:
        for start in rng.integers(0, n - 200, size=20):
            y[start:start + rng.integers(1, 200)] = np.nan
    return y


def cuts(n: int, seed: int, max_block: int = 5000) -> np.ndarray:
    """Random block boundaries over ``n`` samples (blocks of 0 to ``max_block`` samples)."""
    rng = np.random.default_rng(seed)
    b = np.cumsum(rng.integers(0, max_block + 1, size=2 * n // max_block + 10))
    return np.concatenate(([0], b[b < n], [n]))
