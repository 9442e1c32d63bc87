"""Sensor placement for calibration (``place --for calibration``): the E-criterion on the
Fisher information of the records (paper 001, Sect. 3).

For a layout J (the sensors kept plus candidates), the Gauss-Newton covariance of the
parameters in the calibration's transformed variables ``xi`` (offline/calibration: log for
moduli and springs, the damage sigmoid, ...), with the calibration prior's precision
``Lambda_0`` added (the posterior's Laplace approximation; the paper's ``C_GN`` when the
prior is vague)::

    F_c = sum_k (dy_c,k / dxi)^T (dy_c,k / dxi) / sigma_c^2          (one candidate, p x p)
    C_J = (sum_{c in J} F_c + Lambda_0)^-1                              (paper eq. 7-8)
    Psi_E(C_J) = lambda_max(C_J) = 1 / lambda_min(sum F_c + Lambda_0)   (E-criterion)

``dy/dxi`` are the calibration forward model's exact sensitivities
(:class:`offline.calibration.forward.TimeModel`, Newmark with ``[bayes] substeps``) at the
nominal parameters under the declared ``[design_load]`` load (a random load of its band and
rms, ``duration`` s), ``sigma_c = noise_c std(y_c)``. The paper relaxes the binary sensor
weights and solves with gradients; here the weights stay binary and are chosen greedily (each
step the candidate that raises ``lambda_min`` most), then exchanged while that improves.
"""

from __future__ import annotations

import copy

import numpy as np

from offline._deps import progress as _progress
from offline.calibration.calibrate import settings_from_raw
from offline.calibration.forward import TimeModel
from offline.calibration.setup import from_model_file
from offline.placement.criterion import NOISE_FLOOR
from offline.simulate import load_profile


def fisher_blocks(spec, seed: int = 0, progress: bool = True):
    """Per-sensor Fisher blocks of the sensors kept and of every candidate.

    Returns
    -------
    F : (ns + nc, p, p)       in the transformed variables xi
    L0 : (p, p)               prior precision of xi
    dth : (p,)                d theta / d xi at the nominal point (posterior std in theta units)
    names : list of str       sensors then candidates
    params : list of str
    """
    raw = spec.raw
    if not raw.get("parameters"):
        raise ValueError(f"{spec.where('[[parameters]]')}: --for calibration needs "
                         "[[parameters]] to calibrate")
    cands = [c for c in spec.placement.candidates]
    by = {c["name"]: c for c in raw["placement"]["candidates"]}
    keys = ("name", "select", "dof", "kind", "unit", "noise")
    extra = {"sensors": copy.deepcopy(list(raw.get("sensors", [])))
             + [{k: copy.deepcopy(by[c.name][k]) for k in keys if k in by[c.name]}
                for c in cands]}
    setup = from_model_file(spec.path, progress=progress, extra=extra)
    settings = settings_from_raw(setup.spec.raw, setup.parameters, setup.where)
    rate = spec.estimator.rate if spec.estimator is not None else 1000.0
    cal = spec.calibration
    duration = cal.duration if cal is not None else 2.0
    nt = int(round(duration * rate)) + 1
    t = np.arange(nt) / rate
    F = np.zeros((nt, len(spec.forces)))
    for i, f in enumerate(spec.forces):
        ld = cal.load_for(f.name) if cal is not None else None
        band = ld.band if ld is not None and ld.band else (1.0, 0.4 * rate)
        rms = ld.rms if ld is not None and ld.rms else 1.0
        F[:, i] = load_profile("random", t, band=band, rms=rms, seed=seed + 1000 * i) * f.scale
    tm = TimeModel(setup.pm.parts, setup.B, setup.out_rows, setup.out_kind, 1.0 / rate,
                   settings.substeps)
    # at the prior's centre (where the calibration starts)
    tr = [p.transform for p in settings.priors]
    xi0 = np.array([p.mean for p in settings.priors])
    theta0 = np.array([t_.to_theta(x) for t_, x in zip(tr, xi0)])
    Y, dY = tm.run(theta0, F, jac=True)                   # (nt, nch), (p, nt, nch)
    dth = np.array([t_.dtheta_dxi(x) for t_, x in zip(tr, xi0)])
    J = dY * dth[:, None, None]                           # dy/dxi (chain rule)
    lev = np.array([max(s.noise, NOISE_FLOOR) for s in setup.spec.sensors])
    sig = lev * Y.std(axis=0)
    # F_c = J_c^T J_c / sigma_c^2
    Fb = np.einsum("ptc,qtc->cpq", J, J) / sig[:, None, None] ** 2
    L0 = np.diag(1.0 / np.array([p.std for p in settings.priors]) ** 2)
    return Fb, L0, dth, list(setup.sensors), [p.name for p in setup.parameters]


def e_value(Fsum, L0) -> float:
    """lambda_min(F + Lambda_0) (the E-criterion maximises it)."""
    return float(np.linalg.eigvalsh(0.5 * (Fsum + Fsum.T) + L0)[0])


def posterior_std(Fsum, L0, dth) -> np.ndarray:
    """Std (p,) of the parameters (theta units) from C = (F + Lambda_0)^-1."""
    C = np.linalg.inv(0.5 * (Fsum + Fsum.T) + L0)
    return np.sqrt(np.clip(np.diag(C), 0.0, None)) * np.abs(dth)


def choose(Fb, L0, nfix: int, n: int, cost=None, budget=None, passes: int = 3):
    """Greedy E-optimal choice of ``n`` of the candidate blocks ``Fb[nfix:]``, then exchange
    passes. Returns candidate indices (0-based among the candidates) in the order chosen."""
    base = Fb[:nfix].sum(axis=0)
    nc = Fb.shape[0] - nfix
    cost = np.ones(nc) if cost is None else np.asarray(cost, float)
    budget = np.inf if budget is None else float(budget)

    def val(lay):
        return e_value(base + Fb[nfix + np.asarray(lay, int)].sum(axis=0), L0) if lay else \
            e_value(base, L0)

    chosen = []
    for _ in range(n):
        left = budget - cost[chosen].sum()
        pool = [j for j in range(nc) if j not in chosen and cost[j] <= left * (1 + 1e-12)]
        if not pool:
            break
        now = val(chosen)
        gain = [(val(chosen + [j]) - now) / (max(cost[j], 1e-12) if np.isfinite(budget) else 1)
                for j in pool]
        chosen.append(pool[int(np.argmax(gain))])
    for _ in range(passes):
        changed = False
        for pos in range(len(chosen)):
            now = val(chosen)
            rest = chosen[:pos] + chosen[pos + 1:]
            left = budget - cost[rest].sum()
            pool = [j for j in range(nc) if j not in chosen and cost[j] <= left * (1 + 1e-12)]
            if not pool:
                continue
            vals = [val(rest + [j]) for j in pool]
            k = int(np.argmax(vals))
            if vals[k] > now * (1 + 1e-9):
                chosen[pos] = pool[k]
                changed = True
        if not changed:
            break
    order = []
    for _ in range(len(chosen)):
        rest = [j for j in chosen if j not in order]
        order.append(rest[int(np.argmax([val(order + [j]) for j in rest]))])
    return order


def place_calibration(spec, n: int, budget=None, progress: bool = True) -> dict:
    """``place --for calibration``: the order chosen, the predicted posterior std per
    parameter for 0..N added sensors, and the summary text."""
    bar = _progress(total=2, desc="calibration sensitivities", enable=progress)
    Fb, L0, dth, names, params = fisher_blocks(spec, progress=False)
    bar.update()
    nfix = len(spec.sensors)
    cands = list(spec.placement.candidates)
    if n > len(cands):
        raise ValueError(f"-n {n}: only {len(cands)} candidates")
    if n < 1:  # as place()
        raise ValueError(f"-n must be >= 1, got {n}")
    order = choose(Fb, L0, nfix, n, [c.cost for c in cands], budget)
    bar.update()
    bar.close()
    base = Fb[:nfix].sum(axis=0)
    rows = []
    for k in range(len(order) + 1):
        Fs = base + Fb[nfix + np.asarray(order[:k], int)].sum(axis=0) if k else base
        rows.append((posterior_std(Fs, L0, dth), e_value(Fs, L0)))
    w = max(10, *(len(p) + 2 for p in params))
    lines = ["predicted posterior std of the [[parameters]] (Gauss-Newton with the calibration "
             f"prior; sensors kept: {', '.join(names[:nfix]) or 'none'})",
             f"{'k':>3}  {'added':<14}{'lambda_min':>12}  " + "".join(f"{p:>{w}}" for p in params)]
    for k, (sd, lam) in enumerate(rows):
        add = cands[order[k - 1]].name if k else "-"
        lines.append(f"{k:>3}  {add:<14}{lam:>12.4g}  " + "".join(f"{v:>{w}.4g}" for v in sd))
    return {"names": [cands[i].name for i in order], "order": order,
            "std": np.array([r[0] for r in rows]), "lambda_min": np.array([r[1] for r in rows]),
            "params": params, "summary": "\n".join(lines), "blocks": (Fb, L0, dth)}
