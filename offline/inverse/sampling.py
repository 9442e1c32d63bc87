"""Sampling of the parameter box: Latin hypercube (training) and uniform (validation, test).

IMPU paper (file 000) Sect. 2.2.2 / 4.1.3: training parameters from a Latin hypercube over the
admissible set P, validation and test parameters uniformly at random from P.
"""

from __future__ import annotations

import numpy as np


def _bounds(bounds) -> np.ndarray:
    b = np.asarray(bounds, dtype=np.float64)
    if b.ndim != 2 or b.shape[1] != 2:
        raise ValueError(f"bounds must have shape (n_params, 2), got {b.shape}")
    if not np.isfinite(b).all():
        raise ValueError("bounds must be finite")
    bad = np.flatnonzero(b[:, 1] < b[:, 0])
    if bad.size:
        raise ValueError(f"bounds row {int(bad[0])}: upper {b[bad[0], 1]} < lower {b[bad[0], 0]}")
    return b


def latin_hypercube(n: int, bounds, seed: int) -> np.ndarray:
    """Latin-hypercube sample of a box.

    Each parameter's range is cut into ``n`` equal strata; every stratum of every parameter
    holds exactly one sample (uniform inside its stratum); the strata are paired by independent
    random permutations.

    Parameters
    ----------
    n : int
        Number of samples.
    bounds : array_like, shape (n_params, 2)
        ``[lower, upper]`` per parameter (SI units).
    seed : int
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    theta : ndarray, shape (n, n_params)
    """
    b = _bounds(bounds)
    if int(n) < 1:
        raise ValueError(f"number of samples must be >= 1, got {n}")
    n = int(n)
    rng = np.random.default_rng(seed)
    p = b.shape[0]
    # u_ij = (perm_j(i) + U(0,1)) / n : one point per stratum and parameter
    perm = np.argsort(rng.random((n, p)), axis=0)
    u = (perm + rng.random((n, p))) / n
    return b[:, 0] + u * (b[:, 1] - b[:, 0])


def uniform(n: int, bounds, seed: int) -> np.ndarray:
    """``n`` independent uniform samples of the box (validation/test sets), shape (n, n_params)."""
    b = _bounds(bounds)
    if int(n) < 1:
        raise ValueError(f"number of samples must be >= 1, got {n}")
    rng = np.random.default_rng(seed)
    return b[:, 0] + rng.random((int(n), b.shape[0])) * (b[:, 1] - b[:, 0])


def widen(bounds, fraction: float) -> np.ndarray:
    """Box widened by ``fraction`` of its width on both sides (extrapolation test, Sect. 4.3.2)."""
    b = _bounds(bounds)
    w = b[:, 1] - b[:, 0]
    return np.stack([b[:, 0] - fraction * w, b[:, 1] + fraction * w], axis=1)
