"""The demo's comparison of the estimates received over MQTT with the full-model truth
(:mod:`offline.demo`, step 6): the estimates on the truth's rows, the longest run of usable
ones, and per force and output the FDE (paper eq. 33) in the load band and over the full
spectrum, the normalised RMS error against the accuracy limit, and the stated std against the
actual RMS error; then the run's record (``run.json``).

Sample ``k`` of the measurement is the ADC sample with ``seq = k``, and an estimate carries
the ``seq`` of the sample it describes, so estimate ``seq = k`` is compared with truth row ``k``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from offline.limit.model import model_limit
from offline.limit.transfer import ForceSpectrum
from offline.metrics import fde
from offline.report import limit_at, nrmse_full_band


@dataclass
class Aligned:
    """The estimates on the truth's rows (NaN where none arrived) and the longest run
    ``[a, b)`` of consecutive usable rows (FDE needs a uniform record)."""
    est: np.ndarray      # (ns, ncols)
    received: int        # estimates received with a seq inside the record
    usable: int          # rows with every column finite
    a: int
    b: int


def align(view, ns: int, where) -> Aligned:
    """The estimates of ``view`` (:class:`edge.monitor.DeviceView`) on ``ns`` truth rows."""
    seq, _t_ns, V, _flags = view.arrays()
    keep = (seq >= 0) & (seq < ns)
    seq, V = seq[keep], V[keep]
    est = np.full((ns, len(view.columns)), np.nan)
    est[seq] = V
    ok = np.all(np.isfinite(est), axis=1)
    idx = np.flatnonzero(ok)
    if idx.size < 16:
        raise RuntimeError(f"only {idx.size} usable estimates received of {ns} "
                           f"(see {where})")
    # longest run of consecutive usable samples (FDE needs a uniform record)
    breaks = np.flatnonzero(np.diff(idx) != 1)
    starts = np.r_[idx[0], idx[breaks + 1]]
    ends = np.r_[idx[breaks], idx[-1]] + 1
    j = int(np.argmax(ends - starts))
    return Aligned(est=est, received=int(len(seq)), usable=int(idx.size), a=int(starts[j]),
                   b=int(ends[j]))


def truth_columns(truth) -> dict:
    """``{name: true history}`` of every force and output of the truth."""
    return {**{n: truth.F[:, i] for i, n in enumerate(truth.force_names)},
            **{n: truth.Z[:, i] for i, n in enumerate(truth.output_names)}}


def stated_std(view, bundle):
    """The standard deviation the device stated last (it follows the load's level); the
    bundle's for a smoother that stated none, None for a Tikhonov estimator."""
    if view.last_std is not None:
        return view.last_std
    return bundle.kf["std"] if bundle.method == "smoother" else None


def score(s, res, view, al: Aligned, ref: dict, dt: float, stated) -> dict:
    """Per force and output compared: FDE in the band and over the full spectrum, normalised
    RMS error and the accuracy limit at the device's delay, RMS error and stated std."""
    delay_ms = (view.meta or {}).get("delay_samples", 0) * dt * 1e3
    # the accuracy limit with the truth's own spectrum (the build's is that of the load it
    # learned or was declared)
    true_limit = {"limit": model_limit(res.spec, res.model, loads=[
        ForceSpectrum("random", tuple(s.band), s.rms) for _ in res.spec.forces],
        noise=s.noise, delays=(0.0, delay_ms / 1e3), exact=False).as_dict()}
    a, b, est = al.a, al.b, al.est
    scores = {}
    for i, n in enumerate(view.columns):
        if n in ref:
            scores[n] = {"band": fde(est[a:b, i], ref[n][a:b], dt, band=s.band),
                         "full": fde(est[a:b, i], ref[n][a:b], dt),
                         "nrmse": nrmse_full_band(est[a:b, i], ref[n][a:b]),
                         "limit": limit_at(true_limit, n, delay_ms),
                         "rms": float(np.sqrt(np.mean((est[a:b, i] - ref[n][a:b]) ** 2))),
                         "std": None if stated is None else float(stated[i])}
    return scores


def step_time_summary(step_us: np.ndarray, dt: float) -> dict:
    """Mean, median, 99th percentile and maximum per-sample time [us], and the samples over
    the sample interval ``dt``."""
    return {"mean": float(step_us.mean()), "p50": float(np.median(step_us)),
            "p99": float(np.percentile(step_us, 99)), "max": float(step_us.max()),
            "over_budget": int(np.sum(step_us > dt * 1e6))}


def run_record(s, *, broker, code: int, truth, al: Aligned, view, scores: dict, timings: dict,
               bundle, cfg_path, sensitivity: float, step_us: np.ndarray) -> dict:
    """The run's record, ``run.json``: settings, broker, counts, FDE, nRMSE and limit, stated
    std, step times."""
    ns = truth.Y.shape[0]
    return {
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(s).items()},
        "broker": f"{broker.kind} ({broker.address})", "device": s.device,
        "exit_code": code, "samples": ns, "received": al.received,
        "usable": al.usable, "compared": [al.a, al.b], "rate": 1.0 / bundle.dt,
        "delay_samples": (view.meta or {}).get("delay_samples"),
        "sensitivity_V_per_m": sensitivity, "truth_info": truth.info,
        "snr_db": dict(zip(truth.channel_names, map(float, truth.snr_db()))),
        "health": view.health, "n_health": view.n_health, "duplicates": view.n_duplicates,
        "timings": timings, "bundle_id": bundle.bundle_id, "columns": view.columns,
        "config_path": str(cfg_path),
        "units": view.units(),
        "fde": {n: {"band": float(v["band"].value), "full": float(v["full"].value),
                    "band_label": v["band"].label, "full_label": v["full"].label}
                for n, v in scores.items()},
        "stated_std": {n: {"std": v["std"], "rms_error": v["rms"]} for n, v in scores.items()},
        "nrmse": {n: {"value": v["nrmse"],
                      "limit": None if v["limit"] is None else v["limit"][0],
                      "limit_delay_ms": None if v["limit"] is None else v["limit"][1]}
                  for n, v in scores.items()},
        "step_time_us": step_time_summary(step_us, bundle.dt),
    }
