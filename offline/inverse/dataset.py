"""Training/validation/test data: simulated experiments with measurement noise, cached on disk.

Each sample s (paper 000, Fig. 2): parameters θ_s -> simulated experiment -> noisy response
window. Windows (not features) are cached, so every feature type of the Table-5 comparison is
extracted from the same responses. The cache file name is a SHA-256 of everything the windows
depend on (model arrays, experiment, parameters, noise, seed, code version, the measurement
chain).

With a ``measurement`` (:func:`offline.inverse.chained.experiment_measurement`) the windows
are what the device records: the chain's conversions of the response, then the noise::

    Y_s = Measurement(y(theta_s)) + v,    v ~ N(0, sigma^2)

the chain applied on the simulation's grid (:func:`offline.inverse.chained.windows`).
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from offline._deps import progress as _progress
from offline.inverse.chained import windows
from offline.inverse.parametric import ParametricModel
from offline.inverse.spec import Experiment

CACHE_VERSION = "inverse-dataset-1"


def noise_sigma(pm: ParametricModel, experiment: Experiment, measurement=None) -> np.ndarray:
    """Noise standard deviation per channel [SI]: ``noise * max|y|`` of the recorded window
    (the conversions when ``measurement`` is given) at the nominal point, (nch,)."""
    y = windows(pm, pm.parts.theta0[None], experiment.excitation, experiment.n, experiment.rate,
                experiment.substeps, measurement)[0]
    return experiment.noise * np.abs(y).max(axis=0)


def _chain_entry(measurement) -> dict:
    """The cache key's entry of the chain: none for point samples (their keys unchanged)."""
    if measurement is None or measurement.identity:
        return {}
    # "grid": the chain applied on the simulation's substep grid (chained.windows)
    return {"chain": measurement.chain.as_dict(), "chain_dt": measurement.dt,
            "chain_nch": measurement.nch, "chain_grid": "substeps"}


def cache_key(pm: ParametricModel, experiment: Experiment, thetas: np.ndarray, seed: int,
              sigma: np.ndarray, measurement=None) -> str:
    h = hashlib.sha256(CACHE_VERSION.encode())
    p = pm.parts
    for a in (p.M0, p.K0, p.dM, p.dK, p.theta0, pm.out_rows, pm.out_kind, pm.force,
              np.asarray(thetas, np.float64), np.asarray(sigma, np.float64)):
        a = np.ascontiguousarray(a)
        h.update(str(a.shape).encode() + str(a.dtype).encode())
        h.update(a.tobytes())
    h.update(json.dumps({"exp": experiment.to_dict(), "seed": int(seed), "kinds": list(p.kinds),
                         "zeta0": p.zeta0, "modes": list(p.modes),
                         "rayleigh": None if p.rayleigh is None else list(p.rayleigh),
                        **_chain_entry(measurement)}, sort_keys=True).encode())
    return h.hexdigest()


def _work(args):
    pm, th, exc, n, rate, sub, meas = args
    # many small eigh/matmul calls: one BLAS thread is much faster than contended threads
    # (2,500 windows of the 82-DOF cantilever: 3 s instead of 60 s on a loaded 2-core box)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - comes with scikit-learn
        return windows(pm, th, exc, n, rate, sub, meas)
    with threadpool_limits(limits=1, user_api="blas"):
        return windows(pm, th, exc, n, rate, sub, meas)


def generate(pm: ParametricModel, experiment: Experiment, thetas, seed: int, sigma=None,
             cache_dir=None, n_jobs: int = 1, chunk: int = 200, progress: bool = True,
             desc: str = "simulating", measurement=None) -> np.ndarray:
    """Noisy response windows for a set of parameter vectors.

    Parameters
    ----------
    thetas : array_like, shape (S, np)
    seed : int
        Seed of the measurement noise (``numpy.random.default_rng``).
    sigma : array_like, shape (nch,), optional
        Noise standard deviation per channel [SI]; default :func:`noise_sigma`.
    cache_dir : path, optional
        Directory of the on-disk cache (created); None disables caching.
    n_jobs : int
        Worker processes (1: in this process).
    measurement : offline.calibration.measurement.Measurement, optional
        The chain of the experiment's channels: the windows are its conversions of the
        response (before the noise); None: point samples.

    Returns
    -------
    Y : ndarray, shape (S, n, nch)
    """
    thetas = np.atleast_2d(np.asarray(thetas, dtype=np.float64))
    if thetas.shape[1] != len(pm.names):
        raise ValueError(f"thetas has {thetas.shape[1]} columns, the model has parameters {list(pm.names)}")
    if not np.isfinite(thetas).all():
        raise ValueError("thetas contains non-finite values")
    sigma = noise_sigma(pm, experiment, measurement) if sigma is None \
        else np.asarray(sigma, np.float64)
    path = None
    if cache_dir is not None:
        key = cache_key(pm, experiment, thetas, seed, sigma, measurement)
        path = Path(cache_dir) / f"inverse-{key[:24]}.npz"
        if path.exists():
            with np.load(path, allow_pickle=False) as z:
                if z["key"].item() == key:
                    return z["Y"]
    n, rate, sub = experiment.n, experiment.rate, experiment.substeps
    S = thetas.shape[0]
    jobs = [(pm, thetas[i:i + chunk], experiment.excitation, n, rate, sub, measurement)
            for i in range(0, S, chunk)]
    bar = _progress(total=S, desc=desc, enable=progress)
    parts = []
    if n_jobs > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=n_jobs) as ex:
            for job, Y in zip(jobs, ex.map(_work, jobs)):
                parts.append(Y); bar.update(job[1].shape[0])
    else:
        for job in jobs:
            parts.append(_work(job)); bar.update(job[1].shape[0])
    bar.close()
    # what the device records (chained.windows: the chain's conversions), then the noise
    Y = np.concatenate(parts, axis=0)
    rng = np.random.default_rng(seed)
    Y = Y + rng.standard_normal(Y.shape) * sigma
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, Y=Y, key=np.array(key))
        os.replace(tmp, path)
    return Y
