"""A hybrid smoother bundle: the correction network trained on force-and-response records
(``vsense-offline build MODEL.toml --hybrid RUN.csv``) and its ``kf_hy_*`` arrays."""

from __future__ import annotations

import numpy as np

from edge.bundle import Bundle
from edge.estimator.operator import EstimatorError
from offline.calibration.data import ABS_MAX as DATA_ABS_MAX
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
    check_levels(paths, out, [f.name for f in bundle.forces] + [c.name for c in bundle.channels])
    check_distinct(paths, out)
    return out


#: largest magnitude of a record's value (the records' own check, read_record, refuses more;
#: the training squares variances of products of the columns, which overflow float64 from
#: about 1e77 on)
ABS_MAX = DATA_ABS_MAX
#: largest ratio of one column's RMS between two records: the levels of a hybrid training
#: differ by 10x or so (docs/hybrid.md, 0.7 and 7 mN); 1e6 is a column in another unit or a
#: corrupted record, and it would leave the smaller record's loss at round-off
LEVEL_RATIO_MAX = 1e6


def check_levels(paths, runs, columns) -> None:
    """Every column's values below :data:`ABS_MAX` in magnitude and its RMS within
    :data:`LEVEL_RATIO_MAX` over the records; ``ValueError`` naming the file(s) and column."""
    rms = np.zeros((len(runs), len(columns)))
    for i, (U, Y) in enumerate(runs):
        for j, (c, x) in enumerate(zip(columns, np.column_stack([U, Y]).T)):
            top = float(np.max(np.abs(x)))
            if not top <= ABS_MAX:
                raise ValueError(f"{paths[i]}: column {c!r}: values up to {top:.3g} (more "
                                 f"than {ABS_MAX:g}): not a physical value in SI units")
            rms[i, j] = np.sqrt(np.mean(x ** 2))
    for j, c in enumerate(columns):
        hi, lo = int(np.argmax(rms[:, j])), int(np.argmin(rms[:, j]))
        if rms[hi, j] > LEVEL_RATIO_MAX * rms[lo, j]:
            raise ValueError(f"column {c!r}: RMS {rms[hi, j]:.3g} in {paths[hi]} but "
                             f"{rms[lo, j]:.3g} in {paths[lo]} (more than {LEVEL_RATIO_MAX:g} "
                             "times): a column in another unit or a corrupted record")


def check_distinct(paths, runs) -> None:
    """No record may repeat another's data (forces and channels sample for sample): a repeated
    training record only weighs it twice, and a validation record equal to a training one
    measures nothing (the early stopping and the loss ratio would be the training's).
    ``ValueError`` naming both files."""
    for j in range(len(runs)):
        for i in range(j):
            (Ui, Yi), (Uj, Yj) = runs[i], runs[j]
            if Ui.shape == Uj.shape and np.array_equal(Ui, Uj) and np.array_equal(Yi, Yj):
                last = j == len(runs) - 1 and len(runs) >= 3
                raise ValueError(
                    f"{paths[j]}: the same data as {paths[i]} (forces and channels sample for "
                    "sample)" + (": the validation record (the last --hybrid) must be a "
                                 "record the network is not trained on" if last else
                                 ": give each record once"))


#: the improvement a shipped network must show: this many standard errors of the validation
#: loss ratio below 1 (one-sided: about 16 % of networks no better than linear would pass by
#: chance; 2 refused the test suite's 0.892 network of a real cubic spring, whose 1.5 s
#: validation record gives a standard error of 0.097)
SHIP_SIGMAS = 1.0
#: and at least this much below 1, whatever the spread: a network that has barely moved from
#: the linear model improves every window in proportion, so its standard error is tiny, but a
#: 0.999 is not worth a network's failure modes (envelope, non-finite outputs)
MIN_GAIN = 0.01


def check_quality(tr: Trained, hs, spec) -> None:
    """Refuse a trained network that is not better than the linear model on the validation
    data beyond the validation loss's own sampling spread or a documented margin (loss ratio
    >= 1 - max(MIN_GAIN, SHIP_SIGMAS * se), se :func:`offline.hybrid.train.val_spread`; a
    ratio of 0.999 is refused), a ratio
    that is not finite, or a training that completed no iteration: ``EstimatorError``
    (``vsense-offline build``: exit 3), naming the ratio, the margin and the keys."""
    h = tr.history
    where = spec.where("[hybrid]")
    if not h["val"]:
        raise EstimatorError(
            f"{where}: the training completed no iteration ({h.get('message') or 'no epoch'}; "
            f"epochs = {hs.epochs}, optimizer = \"{hs.optimizer}\"): the network is not "
            "trained; check the records' units and the [hybrid] settings")
    ratio = h["best_val"] / h["linear_val"]
    se = float(h.get("val_se", 0.0)) / h["linear_val"]
    if not (np.isfinite(ratio) and ratio < 1.0):
        raise EstimatorError(
            f"{where}: the trained network's validation loss is {h['best_val']:.4g} against "
            f"the linear model's {h['linear_val']:.4g} (ratio {ratio:.4g}, must be below 1) "
            f"after {len(h['val'])} epoch(s) (epochs = {hs.epochs}): the network does not "
            "improve on the linear model and is not shipped. Build without --hybrid for the "
            "linear smoother, or give training records that span the validation record's "
            "levels, more epochs or restarts")
    margin = max(MIN_GAIN, SHIP_SIGMAS * se)
    if not (np.isfinite(se) and ratio < 1.0 - margin):
        raise EstimatorError(
            f"{where}: the trained network's validation loss ratio {ratio:.4g} is within the "
            f"validation noise of the linear model's (it must be below {1.0 - margin:.4g}: "
            f"1 - the larger of {MIN_GAIN:g} and {SHIP_SIGMAS:g} x the ratio's standard error "
            f"{se:.3g} over the validation record's windows): the network's improvement is "
            "not measurable and it is not shipped. Build without --hybrid for the linear "
            "smoother, or give a longer validation record")


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
    """``[hybrid] max_hz``, default half the rate (``omega dt <= pi``: the modes within the
    sampled band; a nonlinearity's harmonics lie above the forces' band, so the band is not
    the limit). A quarter of the rate (the default before) left the plate of
    ``benchmarks/hybrid_structures.py`` 1.45x / 1.42x the linear twin (force / d_o), half of
    it 1.27x / 1.21x; the cantilever 1.72x / 1.60x against 1.54x / 1.40x (one start each)."""
    if hs.max_hz is not None:
        return float(hs.max_hz)
    return bundle.rate / 2


def hybrid_arrays(bundle: Bundle, hm: HybridModel, tr: Trained, onnx: bytes, hs) -> dict:
    """The ``kf_hy_*`` arrays (edge/bundle_schema.py) in the smoother's full state."""
    ns = np.asarray(bundle.kf["A"]).shape[0]
    m = hm.A.shape[0] - hm.nk
    nf = len(bundle.forces)
    # the hybrid's [x, a] in the smoother's [x, force-model states, a] (the chain last)
    at = np.r_[np.arange(m), np.arange(ns - hm.nk, ns)]
    S = np.zeros((hm.n_inputs, ns))
    S[:, at] = hm.S
    Bg = np.zeros((ns, hm.n_g))
    Bg[at] = hm.Bg
    Cqg = np.vstack([np.zeros((nf, hm.n_g)), hm.Dzg])
    return {"hy_onnx": np.frombuffer(onnx, dtype=np.uint8).copy(), "hy_S": S, "hy_Bg": Bg,
            "hy_Dg": hm.Dg.copy(), "hy_Cqg": Cqg, "hy_lo": tr.lo.copy(), "hy_hi": tr.hi.copy(),
            "hy_direct": np.array(DIRECT, dtype=float),
            "hy_guard": np.array(1 if hs.outside == "saturate" else 0, dtype=np.int64)}


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
    tr = train(hm, runs, [c.weight for c in bundle.channels], hs, progress=say,
               names=[str(p) for p in paths])
    check_quality(tr, hs, spec)
    onnx = export_onnx(tr.params, tr.mu, tr.sig, tr.gs, tr.linear_kept)
    kf = dict(bundle.kf)
    kf.update(hybrid_arrays(bundle, hm, tr, onnx, hs))
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
        "envelope": [tr.lo.tolist(), tr.hi.tolist()], "margin": hs.margin,
        "outside": hs.outside,
        "jacobian": "not used: the correction is a known input from the filtered state"}
    return bundle.replace(kf=kf, meta=meta), hm, tr
