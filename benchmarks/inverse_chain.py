"""Inverse maps through the measurement chain: the error of a map on point-sample windows and on
the windows the ADS1256 records, as a fraction of each parameter's range (bias and RMS).

    python benchmarks/inverse_chain.py                    # maps trained through the chain
    python benchmarks/inverse_chain.py --train point      # trained on point samples (before)
    python benchmarks/inverse_chain.py --samples 300 --max-epochs 200   # quick look

The maps are trained as ``vsense-offline build`` trains them (:func:`offline.inverse.pipeline.
train`, the model file's chain: the ADS1256 by default, :mod:`offline.inverse.chained`). The
test windows do not come from the training route: the response is simulated on a grid 32 times
finer than the rows (Newmark, one step per fine node) and converted in the time domain by the
chip's taps (:func:`offline.chain.conversions`, as ``vsense-offline simulate`` converts), the
point samples are that response at the rows; noise as in training (``[experiment] noise`` of
each window's nominal peak). ``--truth training``: the test windows of the training route
itself (Newmark at ``[experiment] substeps``, :class:`~offline.calibration.measurement.
Measurement`), as the point-sample maps were measured before the chain was modelled.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from edge import features as F  # noqa: E402
from offline.chain import MIN_STEPS_PER_ROW, conversions  # noqa: E402
from offline.inverse import chained, dataset, parametric as P, pipeline, sampling  # noqa: E402
from offline.inverse.fromfile import from_model_file  # noqa: E402

EXAMPLE = ROOT / "examples" / "cantilever_params.toml"
CACHE = Path(os.environ.get("VSENSE_CACHE", "~/.cache/vsense")).expanduser() / "inverse"


def fine_windows(pm, ex, thetas, chain, refine: int = MIN_STEPS_PER_ROW):
    """``(point, converted)`` windows (S, n, nch) of ``thetas``, noise-free: the response on a
    grid ``refine`` times finer than the rows, sampled at the rows and converted by ``chain``'s
    taps at each channel's window end (:func:`offline.chain.conversions`)."""
    yf = P.simulate(pm, thetas, ex.excitation, (ex.n - 1) * refine + 1, ex.rate * refine, 1)
    point = yf[:, ::refine]
    if chain is None or chain.ideal:
        return point, point
    off = -chain.offsets_for(len(ex.channels))  # window end relative to the row (<= 0)
    conv = np.stack([conversions(y, 1.0 / (ex.rate * refine), refine, ex.n, chain.drate, off,
                                 taps=None if chain.converter == "ads1256" else chain.taps())
                     for y in yf])
    return point, conv


def range_errors(p_hat, p_true, bounds) -> dict:
    """Error over each parameter's range: ``e = (p_hat - p) / (ub - lb)``; bias = mean(e),
    RMS = sqrt(mean(e^2)), per parameter."""
    e = (np.asarray(p_hat) - p_true) / (bounds[:, 1] - bounds[:, 0])
    return {"bias": e.mean(axis=0), "rms": np.sqrt((e ** 2).mean(axis=0))}


def training_windows(pm, ex, thetas, meas):
    """``(point, converted)`` windows of the training route itself (the last session's
    measurement): Newmark at ``[experiment] substeps``, converted by :class:`Measurement` on
    that grid (:func:`offline.inverse.chained.windows`)."""
    args = (pm, thetas, ex.excitation, ex.n, ex.rate, ex.substeps)
    return chained.windows(*args, None), chained.windows(*args, meas)


def run(model, train="chain", samples=None, max_epochs=None, test_samples=500, seed=7,
        cache=CACHE, substeps=None, truth="fine"):
    setup = from_model_file(model, progress=False)
    if substeps:  # the training simulation's Newmark steps per row ([experiment] substeps)
        setup.experiment = dataclasses.replace(setup.experiment, substeps=int(substeps))
    if setup.chain_reason:
        raise SystemExit(f"{model}: the chain cannot be modelled: {setup.chain_reason}")
    chip = setup.measurement
    chain = None if chip is None else chip.chain
    if train == "point":
        setup.measurement = None
    st = setup.settings
    over = {k: v for k, v in (("samples", samples), ("max_epochs", max_epochs)) if v}
    setup.settings = dataclasses.replace(st, **over)
    t0 = time.perf_counter()
    res = pipeline.train(setup, cache_dir=cache, progress=False)
    t_train = time.perf_counter() - t0
    meta = res["meta"]["maps"][setup.settings.map]
    cfg = F.FeatureConfig(**meta["features"])
    pm, ex = setup.pm, setup.experiment
    X = sampling.uniform(test_samples, pm.bounds, seed)
    point, conv = fine_windows(pm, ex, X, chain) if truth == "fine" else \
        training_windows(pm, ex, X, chip)
    rng = np.random.default_rng(seed + 1)
    rows = {}
    for label, Y, meas in (("point-sample windows", point, None),
                           ("ADS1256 windows", conv, setup.measurement)):
        sigma = dataset.noise_sigma(pm, ex, meas)
        Yn = Y + rng.standard_normal(Y.shape) * sigma
        rows[label] = range_errors(res["map"].predict(F.extract_batch(cfg.kind, Yn, ex.rate, cfg)),
                                   X, pm.bounds)
    return setup, rows, t_train


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default=str(EXAMPLE))
    p.add_argument("--train", choices=("chain", "point"), default="chain",
                   help="train through the model file's chain (default) or on point samples")
    p.add_argument("--samples", type=int, default=None, help="training windows (default: file)")
    p.add_argument("--max-epochs", type=int, default=None)
    p.add_argument("--test-samples", type=int, default=500)
    p.add_argument("--substeps", type=int, default=None,
                   help="Newmark steps per row of the training windows (default: the file's)")
    p.add_argument("--truth", choices=("fine", "training"), default="fine",
                   help="test windows: simulated 32x finer and converted by the taps (default), "
                        "or by the training route itself (the earlier measurement)")
    p.add_argument("--no-cache", action="store_true")
    a = p.parse_args(argv)
    setup, rows, t = run(a.model, a.train, a.samples, a.max_epochs, a.test_samples,
                         cache=None if a.no_cache else CACHE, substeps=a.substeps, truth=a.truth)
    print(f"model {Path(a.model).name}: maps trained on {a.train} windows "
          f"({setup.settings.samples} windows, {setup.experiment.substeps} substeps, "
          f"<= {setup.settings.max_epochs} epochs, "
          f"{t:.0f} s); {a.test_samples} test windows ({a.truth}); error over each "
          "parameter's range, "
          "bias / RMS")
    labels = list(rows)
    print("| parameter | " + " | ".join(labels) + " |")
    print("| --- " * (len(labels) + 1) + "|")
    for j, name in enumerate(setup.pm.names):
        print(f"| {name} | " + " | ".join(f"{rows[k]['bias'][j]:+.4f} / {rows[k]['rms'][j]:.3f}"
                                          for k in labels) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
