"""Model file -> trained inverse map(s) -> bundle extras: the whole offline pipeline.

``offline.build`` (or the CLI) calls :func:`attach` after building a bundle from a model file
that has ``[[parameters]]``; :func:`train` is the same without a bundle.
"""

from __future__ import annotations

import time

import numpy as np

from edge import features
from edge.inverse import matrices
from offline.inverse import chained, dataset, evaluate, export, parametric as P, sampling
from offline.inverse.fromfile import ModelFileSetup, from_model_file
from offline.inverse.gp import train_gp
from offline.inverse.mlp import train_mlp


def train(setup: ModelFileSetup, cache_dir=None, n_jobs: int = 1, progress: bool = True) -> dict:
    """Data, map, export for one model file. Returns arrays, meta, metrics and timings."""
    pm, ex, st = setup.pm, setup.experiment, setup.settings
    t0 = time.perf_counter()
    Xtr = sampling.latin_hypercube(st.samples, pm.bounds, st.seed)
    Xva = sampling.uniform(st.validation_samples, pm.bounds, st.seed + 1)
    Xte = sampling.uniform(st.test_samples, pm.bounds, st.seed + 2)
    meas = setup.measurement  # the device's conversions of the window (None: point samples)
    sigma = dataset.noise_sigma(pm, ex, meas)
    Ytr, Yva, Yte = (dataset.generate(pm, ex, X, seed=st.seed + 10 + i, sigma=sigma, cache_dir=cache_dir,
                                      n_jobs=n_jobs, progress=progress, desc=d, measurement=meas)
                     for i, (X, d) in enumerate(((Xtr, "train"), (Xva, "validation"), (Xte, "test"))))
    t_data = time.perf_counter() - t0
    cfg = st.features
    if any(k in ("fft_bins", "fft_ri_bins", "fft_mp_bins") for k in cfg.kind.split("+")) and not cfg.bins:
        bands = P.frequency_bands(pm, ex.rate / 2)
        bins = features.bins_of_interest(bands, ex.n, ex.rate, st.margin_bins)
        cfg = features.FeatureConfig(**{**cfg.to_dict(), "bins": tuple(int(b) for b in bins)})
    Ftr, Fva, Fte = (features.extract_batch(cfg.kind, Y, ex.rate, cfg) for Y in (Ytr, Yva, Yte))
    t1 = time.perf_counter()
    if st.map == "mlp":
        tm = train_mlp(Ftr, Xtr, Fva, Xva, hidden=st.hidden, max_epochs=st.max_epochs,
                       patience=st.patience, seed=st.seed, batch_size=st.batch_size,
                       learning_rate=st.learning_rate, progress=progress)
    else:
        tm = train_gp(Ftr, Xtr, Fva, Xva, seed=st.seed)
    t_train = time.perf_counter() - t1
    arrays, meta = export.artifact(tm, st.map, Fte, pm.names, pm.bounds, cfg, ex.to_dict(), ex.n,
                                   len(ex.channels), Ftr, sigma)
    pa, pmeta = pm.parts.to_extras()
    m = evaluate.metrics(tm.predict(Fte), Xte)
    meta["chain"] = chained.describe(meas)   # what the windows were (None: point samples)
    meta["test_metrics"] = {k: np.asarray(v).tolist() for k, v in m.items()}
    return {"arrays": {**arrays, **pa}, "meta": {"maps": {st.map: meta}, "parts": pmeta, "default": st.map},
            "metrics": m, "timings": {"data_s": t_data, "train_s": t_train}, "map": tm}


def attach(bundle, model_path, cache_dir=None, n_jobs: int = 1, progress: bool = True,
           reduced=None):
    """Bundle with the inverse map and parametric parts of ``model_path`` added.

    ``reduced``: the bundle's :class:`~offline.reduced.ReducedModel` (its reduction basis is
    reused instead of reducing the model again). Checks that the parts at their nominal point
    reproduce the bundle's M, K (same reduced coordinates); raises ValueError otherwise.
    """
    setup = from_model_file(model_path, progress=progress, reduced=reduced)
    parts = setup.pm.parts
    if parts.n != bundle.M.shape[0]:
        raise ValueError(f"{model_path}: parametric model has {parts.n} DOFs, the bundle {bundle.M.shape[0]}")
    M, _, K = matrices(parts, parts.theta0)
    for lab, A, B in (("K", K, bundle.K), ("M", M, bundle.M)):
        err = np.abs(A - B).max() / np.abs(B).max()
        if err > 1e-8:
            raise ValueError(f"{model_path}: parametric {lab} at the nominal parameters differs from the "
                             f"bundle's by {err:.2e} (different reduced coordinates)")
    # the windows through the chain the device records with (setup.chain: the file's, the
    # ADS1256 by default), the chain the estimator models too
    res = train(setup, cache_dir=cache_dir, n_jobs=n_jobs, progress=progress)
    extras = {**bundle.extras, **res["arrays"]}
    meta = {**bundle.meta, "inverse": res["meta"]}
    warn = chain_warning(setup.chain, setup.experiment.channels, setup.chain_reason)
    if warn:
        meta["warnings"] = [*meta.get("warnings", []), warn]
    return bundle.replace(extras=extras, meta=meta), res


def chain_warning(chain, channels, reason: str | None) -> str | None:
    """The maps learn from the windows the device records: the conversions of the model
    file's chain (``chain``: :class:`edge.acquisition.Chain`;
    :func:`chained.experiment_measurement`).
    Where the chain cannot be modelled (``reason``: an experiment at another rate than the
    chain's, drifting offsets) they learn from point samples, while the device identifies
    from the conversions: measured on examples/cantilever_params.toml (one laser, the ADS1256
    at 1,000 SPS), point-sample maps biased E by -31 % of its range (RMS 0.36 against 0.076)
    and k_root by +11 %. The warning says so; None when the windows are modelled or are point
    samples."""
    if chain is None or chain.point or reason is None:
        return None
    what = chain.converter + (f" at {chain.drate:g} SPS" if not chain.ideal else "") + (
        " and the sensors' dynamics" if chain.dynamic else "")
    return (f"inverse maps: trained on point samples of {', '.join(channels)}, while the "
            f"device identifies from the conversions of the declared chain ({what}): "
            f"{reason}; maps that do not model the chain are biased (on "
            "examples/cantilever_params.toml's laser at 1,000 SPS: E by -31 % of its range); "
            'treat them as indicative (docs/inverse.md "The measurement chain")')
