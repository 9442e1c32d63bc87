"""A hybrid smoother bundle: the correction network trained on force-and-response records
(``vsense-offline build MODEL.toml --hybrid RUN.csv``) and its ``kf_hy_*`` arrays."""

from __future__ import annotations

import numpy as np

from edge.bundle import Bundle
from edge.estimator.operator import EstimatorError
from offline.calibration.data import read_record
from offline.hybrid.discrete import DIRECT, HybridModel, hybrid_model
from offline.hybrid.network import export_onnx
from offline.hybrid.spec import parse_hybrid
from offline.hybrid.train import Trained, train
from offline.model import resolve_dofs
from offline.reduction import recover


def read_runs(paths, bundle: Bundle) -> list:
    """``[(U (nt, nf), Y (nt, nch)), ...]`` of force-and-response CSV records (columns named
    after the forces and channels, :func:`offline.calibration.data.read_record`), checked to be
    sampled at the bundle's rate."""
    out = []
    for p in paths:
        rec = read_record(p, [f.name for f in bundle.forces], [c.name for c in bundle.channels])
        if abs(rec.dt - bundle.dt) > 1e-6 * bundle.dt:
            raise ValueError(f"{p}: sampled every {rec.dt:g} s, the bundle every "
                             f"{bundle.dt:g} s (record at the estimator's rate)")
        out.append((rec.F, rec.Y))
    return out


def model_of(bundle: Bundle, rm, spec) -> HybridModel:
    """The discrete hybrid model of a smoother ``bundle`` (``[hybrid]`` of ``spec``, reduced
    model ``rm``) on the smoother's own step matrix ``kf_A``."""
    hs = parse_hybrid(spec)
    rows = None
    if hs.select is not None:
        dofs = resolve_dofs(rm.model, hs.select, hs.dofs, spec.where("[hybrid].select"))
        rows = recover(rm.reduction.T, dofs)
    hm = hybrid_model(bundle, rows, hs.modes, hs.inputs, f_max=max_hz(bundle, hs))
    return hm


def max_hz(bundle: Bundle, hs) -> float:
    """``[hybrid] max_hz``, default a quarter of the rate (``omega dt <= pi / 2``: the modes
    a correction held over a step still drives faithfully; a nonlinearity's harmonics lie
    above the forces' band, so the band is not the limit)."""
    if hs.max_hz is not None:
        return float(hs.max_hz)
    return bundle.rate / 4


def hybrid_arrays(bundle: Bundle, hm: HybridModel, tr: Trained, onnx: bytes) -> dict:
    """The ``kf_hy_*`` arrays (edge/bundle_schema.py) in the smoother's full state."""
    ns = np.asarray(bundle.kf["A"]).shape[0]
    m = hm.A.shape[0]
    nf = len(bundle.forces)
    S = np.zeros((hm.n_inputs, ns))
    S[:, :m] = hm.S
    Bg = np.zeros((ns, hm.n_g))
    Bg[:m] = hm.Bg
    Cqg = np.vstack([np.zeros((nf, hm.n_g)), hm.Dzg])
    return {"hy_onnx": np.frombuffer(onnx, dtype=np.uint8).copy(), "hy_S": S, "hy_Bg": Bg,
            "hy_Dg": hm.Dg.copy(), "hy_Cqg": Cqg, "hy_lo": tr.lo.copy(), "hy_hi": tr.hi.copy(),
            "hy_direct": np.array(DIRECT, dtype=float)}


def attach_hybrid(bundle: Bundle, rm, spec, paths, progress: bool = True):
    """A copy of the smoother ``bundle`` with the correction trained on the records ``paths``
    (``meta["hybrid"]``: where it acts, network, training). Returns ``(bundle, model,
    trained)``."""
    if bundle.method != "smoother":
        raise EstimatorError(f"{spec.where('[estimator]')}: --hybrid needs the Kalman "
                             "smoother (method = \"smoother\"): the correction enters its "
                             "state as a known input")
    hs = parse_hybrid(spec)
    hm = model_of(bundle, rm, spec)
    runs = read_runs(paths, bundle)
    say = (lambda s: print(f"hybrid: {s}", flush=True)) if progress else None
    tr = train(hm, runs, [c.weight for c in bundle.channels], hs, progress=say)
    onnx = export_onnx(tr.params, tr.mu, tr.sig, tr.gs, tr.linear_kept)
    kf = dict(bundle.kf)
    kf.update(hybrid_arrays(bundle, hm, tr, onnx))
    meta = dict(bundle.meta)
    h = tr.history
    meta["hybrid"] = {
        "acts_on": hm.where, "select": hs.select, "dofs": list(hs.dofs) if hs.select else None,
        "modes": None if hs.select else hm.n_g, "inputs": hm.n_inputs,
        "max_hz": max_hz(bundle, hs) if hs.select else None,
        "input_kinds": list(hs.inputs), "outputs": hm.n_g,
        "hidden": hs.hidden, "layers": hs.layers, "activation": "tanh",
        "linear_kept": hs.linear_kept, "optimizer": hs.optimizer,
        "records": [str(p) for p in paths], "epochs": tr.info["epochs"],
        "best_epoch": h["best_epoch"], "loss_linear_val": h["linear_val"],
        "loss_best_val": h["best_val"], "loss_linear_train": h["linear_train"],
        "train_seconds": round(tr.info["seconds"], 2), "horizon": hs.horizon,
        "stride": hs.stride, "learning_rate": hs.learning_rate,
        "restarts": hs.restarts, "seed": h["seed"],
        "envelope": [tr.lo.tolist(), tr.hi.tolist()],
        "jacobian": "not used: the correction is a known input from the filtered state"}
    return bundle.replace(kf=kf, meta=meta), hm, tr
