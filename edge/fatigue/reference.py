"""NumPy twin of the compiled counter (:mod:`edge.fatigue.rainflow`): the whole record at
once, for the tests, the benchmark and the offline interval (offline/fatigue.py), not for
the device's sample path.

Turning points by array operations (non-finite samples dropped, repeats merged, the sign
changes of the differences), then the four-point test in a plain Python loop (the same rule
as the kernel), then histogram and damage vectorised over the cycles. No residue cap: the
twin is the uncapped count.
"""

from __future__ import annotations

import numpy as np

from edge.fatigue.sn_curve import P_LOGA1, P_LOGA2, P_M1, P_M2, P_SCALE, P_SCUT, P_SKNEE


def reversal_index(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(z, i)``: ``y`` with gaps dropped and repeats merged, and the indices into ``z`` of
    its start point, its turning points and its last sample (every index for two samples or
    fewer)."""
    y = np.asarray(y, dtype=np.float64)
    z = y[np.isfinite(y)]
    if z.size:
        z = z[np.concatenate(([True], np.diff(z) != 0))]
    if z.size <= 2:
        return z, np.arange(z.size)
    s = np.sign(np.diff(z))
    turn = np.nonzero(s[:-1] != s[1:])[0] + 1
    return z, np.concatenate(([0], turn, [z.size - 1]))


def reversals(y: np.ndarray) -> np.ndarray:
    """Start point, the turning points and the last sample of ``y`` (gaps dropped, repeats
    merged). Empty for an empty or all-gap record."""
    z, i = reversal_index(y)
    return z[i]


def four_point(rev) -> tuple[np.ndarray, np.ndarray]:
    """Closed cycles ``(k, 2)`` (from, to) and the residue of a reversal sequence."""
    res: list[float] = []
    cyc: list[tuple[float, float]] = []
    for v in rev.tolist():
        res.append(v)
        while len(res) >= 4:
            s0, s1, s2, s3 = res[-4], res[-3], res[-2], res[-1]
            d2 = abs(s2 - s1)
            if d2 <= abs(s1 - s0) and d2 <= abs(s3 - s2):
                cyc.append((s1, s2))
                del res[-3:-1]
            else:
                break
    return np.array(cyc, dtype=np.float64).reshape(-1, 2), np.array(res, dtype=np.float64)


def damage_of(ranges, weights, sn_row) -> float:
    """Miner sum with one kernel curve row (``SNCurve.params``)."""
    s = np.abs(np.asarray(ranges, dtype=np.float64)) * sn_row[P_SCALE]
    w = np.asarray(weights, dtype=np.float64)
    live = (s > 0) & (s >= sn_row[P_SCUT])
    lg = np.log10(np.where(live, s, 1.0))
    logn = np.where(s >= sn_row[P_SKNEE], sn_row[P_LOGA1] - sn_row[P_M1] * lg,
                    sn_row[P_LOGA2] - sn_row[P_M2] * lg)
    return float(np.sum(np.where(live, w * 10.0 ** (-logn), 0.0)))


def histogram_of(cycles, weights, hbins_row, n_range, n_mean) -> tuple[np.ndarray, int]:
    """Range-mean histogram with the kernel's binning and clipping; ``(hist, clipped)``."""
    a, b = cycles[:, 0], cycles[:, 1]
    r, m = np.abs(b - a), 0.5 * (a + b)
    ir = (r / hbins_row[0] * n_range).astype(np.int64)
    mf = (m - hbins_row[1]) / (hbins_row[2] - hbins_row[1]) * n_mean
    clipped = (ir >= n_range) | (mf < 0) | (mf >= n_mean)
    ir = np.minimum(ir, n_range - 1)
    im = np.clip(np.floor(mf), 0, n_mean - 1).astype(np.int64)
    hist = np.zeros((n_range, n_mean))
    np.add.at(hist, (ir, im), weights)
    return hist, int(clipped.sum())


def count(y, sn_row, hbins_row, n_range=32, n_mean=32) -> dict:
    """What the streaming counter holds after the whole record ``y``: the closed cycles
    (the last sample is the partial extremum, not a reversal), the residue, the pending
    point, histogram and damage."""
    rev = reversals(y)
    pending = float(rev[-1]) if rev.size >= 2 else None
    committed = rev[:-1] if rev.size >= 2 else rev
    cyc, res = four_point(committed)
    w = np.ones(len(cyc))
    hist, clipped = histogram_of(cyc, w, hbins_row, n_range, n_mean)
    return {"cycles": cyc, "residue": res, "pending": pending, "hist": hist,
            "clipped": clipped, "damage": damage_of(np.abs(cyc[:, 1] - cyc[:, 0]), w, sn_row)}
