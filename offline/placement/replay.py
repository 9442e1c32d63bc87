"""Simulated errors of a placed layout, to set against the prediction: the model file built
(``offline.build.build``), the truth from the FULL FE model by sparse Newmark (average
acceleration) on finer steps -- not the estimator's reduced model nor its exact
discretisation -- under a sample path of each force's declared force model (or the
``[design_load]`` ideal-band random load), relative sensor noise, and the bundle's estimator
run over the record. The sensors' rows are what the bundle's converter returns
(:func:`offline.calibration_runs.sensor_rows`: each conversion's window over the response),
the outputs' truth point values."""

from __future__ import annotations

import numpy as np

from edge.estimator import Estimator
from offline.build import build
from offline.calibration_runs import sensor_rows
from offline.chain import MIN_STEPS_PER_ROW, refine_grid
from offline.simulate import load_profile, simulate_sparse
from offline.smoother import ForceModel, van_loan


def force_path(fm: ForceModel, dt: float, nt: int, seed: int) -> np.ndarray:
    """A sample path (nt,) of the force model, exact discretisation on ``dt``."""
    Af, Bf, Cf, qc = fm.realise()
    Ad, Qd = van_loan(Af, qc * Bf @ Bf.T, dt)
    lam, V = np.linalg.eigh(Qd)
    Lq = V * np.sqrt(np.clip(lam, 0.0, None))
    W = np.random.default_rng(seed).standard_normal((nt, Af.shape[0])) @ Lq.T
    x = np.zeros(Af.shape[0])
    f = np.zeros(nt)
    for k in range(nt):
        # xi_{k+1} = Ad xi_k + w_k,  f_k = Cf xi_k
        f[k] = Cf[0] @ x
        x = Ad @ x + W[k]
    return f


def replay(placed_path, *, duration: float = 20.0, oversample: int = 10, seed: int = 0,
           noise: float = 0.01, skip: float = 2.0, load: str = "model", result=None):
    """Simulated normalised RMS error (nq,) of each force and output (forces first).

    Parameters
    ----------
    placed_path : model file with ``[[sensors]]`` (e.g. written by ``place``)
    duration : s of scored record after ``skip`` s of start-up
    load : "model" (a sample path of each force model, seed + 1000 i) or "band" (the ideal
        band-limited random load of the force model's band and rms, as the build's
        calibration runs)
    result : a :class:`offline.build.BuildResult` of ``placed_path`` (built when None)
    """
    res = result if result is not None else build(placed_path, progress=False, limit=False,
                                                  maps=False)
    b, m, fd = res.bundle, res.model, res.full_dofs
    dt = b.dt / oversample
    nt = int(round((duration + skip) * b.rate)) * oversample + 1
    cols = []
    # the smoother's force models, else (a Tikhonov bundle) the build's load model
    fmd = (b.meta.get("estimator") or {}).get("force_models") or \
        b.meta["load_model"]["forces"]
    for i, d in enumerate(fmd):
        fm = ForceModel.from_dict(d)
        if load == "model":
            cols.append(force_path(fm, dt, nt, seed + 1000 * i))
        else:
            cols.append(load_profile("random", np.arange(nt) * dt, band=fm.band, rms=fm.rms,
                                     seed=seed + 1000 * i))
    F = np.column_stack(cols)
    code = {"displacement": 0, "velocity": 1, "acceleration": 2}
    probes = [(d, code[c.kind]) for d, c in zip(fd["channels"], b.channels)] + \
        [(d, code[o.kind]) for d, o in zip(fd["outputs"], b.outputs)]
    C = m.damping_matrix()
    nch = len(b.channels)
    chain = b.chain
    if chain.point:
        Y = simulate_sparse(m.M, C, m.K, np.array(fd["forces"]), F, dt, oversample, probes,
                            progress=False)
    else:  # the converter's windows: every fine step, linear between them (offline/chain.py)
        Yf = simulate_sparse(m.M, C, m.K, np.array(fd["forces"]), F, dt, 1, probes,
                             progress=False)
        ref = max(1, -(-MIN_STEPS_PER_ROW // oversample))
        ns = (nt - 1) // oversample + 1
        Y = np.column_stack([sensor_rows(refine_grid(Yf[:, :nch], ref), dt / ref,
                                         oversample * ref, ns, chain),
                             Yf[::oversample, nch:][:ns]])
    rng = np.random.default_rng(seed + 1)
    # sigma = noise x std(y) per channel (paper eq. 28)
    Yn = Y[:, :nch] + noise * np.std(Y[:, :nch], axis=0) * rng.standard_normal((len(Y), nch))
    est = Estimator(b)
    Fe, Ze, _ = est.run(Yn)
    L = est.delay
    n = len(Fe) - L
    k0 = int(round(skip * b.rate))
    truth = np.column_stack([F[::oversample][:n], Y[:n, nch:]])[k0:]
    e = np.column_stack([Fe[L:], Ze[L:]])[k0:] - truth
    return np.sqrt(np.mean(e ** 2, axis=0)) / np.std(truth, axis=0)
