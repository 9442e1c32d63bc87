"""The ratio to the accuracy limit: one definition for ``build``, ``limit --bundle`` and the
demo (docs/glossary.md, "Ratio to the limit").

    ratio = (normalised RMS error of the bundle's estimator on the build's calibration runs)
            / (MMSE limit at the estimator's delay, under the bundle's own load model)

Both errors are normalised alike, by the truth's STATIONARY std under that load (the limit's
own normaliser, :func:`stationary_std`), not by the std of each short run: a run of a
lightly damped structure started from rest has a std biased low and scattered (the plate of
docs/benchmarks.md, first mode 9.6 Hz at 1 % damping: its near-clamp strain read a std of
44-88 microstrain on the 2 s runs against 89 stationary), which inflated the plate's ratio
from 2.0x to 3.3x although the estimator's error was the same.

Both figures rest on the same load: the one the bundle was built for (learned from records
with ``build --record``, else the model file's ``[design_load]`` declaration) and the same
sensor noise. The delay is the estimator's (the smoother's lag, a Tikhonov window's L - 1
samples); the limit at that delay is the exact (IIR) one where the spectral factorisation is
verified, else the FIR upper bound (:func:`offline.limit.model.model_limit`), the same in
both commands. 1.00 cannot be
beaten; a non-causal limit would flatter a causal estimator's ratio.
"""

from __future__ import annotations

import math

import numpy as np

from edge.estimator import Estimator
from offline.limit.model import model_limit
from offline.load.model import LoadModel
from offline.calibration_score import score_estimator
from offline.chain import with_walks

#: One line said wherever a ratio is printed.
RATIO_DEFINITION = ("ratio = estimator's normalised RMS error on the calibration runs / "
                    "accuracy limit at the estimator's delay, same load model, both over the "
                    "truth's stationary std (docs/glossary.md)")


def stationary_std(lim: dict):
    """``(nf + nout,)`` stationary std of each force and output under the limit's load
    (``ModelLimit.info``), the normaliser of its errors; None for a table without it."""
    if "force_std" not in lim or "output_std" not in lim:
        return None
    return np.asarray(list(lim["force_std"]) + list(lim["output_std"]), dtype=float)


def bundle_delay_s(bundle) -> float:
    """The estimator's delay [s]: ``(window - 1) * dt`` (the smoother's lag)."""
    return (int(bundle.window) - 1) * float(bundle.dt)


def bundle_load_model(bundle):
    """The load model a bundle was built for, as the build used it: the learned
    :class:`offline.load.LoadModel` of a ``build --record`` bundle (``meta["load_model"]``,
    with its absolute sensor noise), or None for a declared one (then the model file's
    ``[design_load]`` loads and relative noise, as the build's limit and calibration runs)."""
    lm = bundle.meta.get("load_model")
    if not lm or lm.get("source", "declared") == "declared":
        return None
    return LoadModel.from_meta(lm)


def limit_at(lim: dict, name: str, delay_ms: float) -> tuple[float, float] | None:
    """``(limit, delay used [ms])`` of ``name`` in a limit table (``ModelLimit.as_dict``) at
    the largest tabulated delay not above ``delay_ms``; None when there is none."""
    names = lim["force_names"] + lim["output_names"]
    if name not in names:
        return None
    i = names.index(name)
    rows = [list(f) + list(o) for f, o in zip(lim["lag_force_nrmse"], lim["lag_output_nrmse"])]
    ok = [k for k, d in enumerate(lim["delays_ms"]) if d <= delay_ms + 1e-9]
    if not ok:
        return None
    return float(rows[ok[-1]][i]), float(lim["delays_ms"][ok[-1]])


def ratios(lim: dict, nrmse: dict, delay_ms: float) -> dict:
    """``{"delay_ms", "rows": [{"name", "nrmse", "limit", "limit_delay_ms", "ratio"}]}`` for
    every name of ``nrmse`` the limit table has."""
    rows = []
    for name, v in nrmse.items():
        at = limit_at(lim, name, delay_ms)
        if at is None:
            continue
        rows.append({"name": name, "nrmse": float(v), "limit": at[0], "limit_delay_ms": at[1],
                     "ratio": float(v) / at[0] if at[0] > 0 else float("inf")})
    return {"delay_ms": float(delay_ms), "rows": rows}


def format_ratios(acc: dict) -> str:
    """One line: ``ratio to the accuracy limit at the estimator's delay (20 ms): F07 1.07x
    (0.647 / 0.606), ...``."""
    parts = [f"{r['name']} {r['ratio']:.2f}x ({r['nrmse']:.3g} / {r['limit']:.3g}"
             + (f" at {r['limit_delay_ms']:g} ms" if abs(r["limit_delay_ms"] - acc["delay_ms"])
                > 1e-9 else "") + ")" for r in acc["rows"]]
    return (f"ratio to the accuracy limit at the estimator's delay ({acc['delay_ms']:g} ms): "
            + ", ".join(parts))


def build_accuracy(bundle, runs, spec, model, mm, loads) -> dict | None:
    """The build's ratios (:func:`ratios`): the final bundle's estimator on the calibration
    runs over the limit at its delay, computed as ``limit`` computes it (exact where the
    spectral factorisation is verified, else the FIR upper bound, on the same grid; the
    build's limit table holds the FIR bounds only, which can lie several % above). A
    sensor's drifting offset is in the limit (noise of its channel), so the runs scored here
    carry it too (:func:`offline.chain.with_walks`): an error without the walk over a limit
    with it read 0.6x on a drifting laser. None without a limit in ``bundle.meta`` or when
    the estimator diverges."""
    import time

    if not bundle.meta.get("limit"):
        return None
    t0 = time.perf_counter()
    delay = bundle_delay_s(bundle)
    lim = model_limit(spec, model, delays=[delay], mm=mm, loads=loads,
                      chain=bundle.chain).as_dict()
    r = score_estimator(Estimator(bundle), with_walks(runs, bundle.chain),
                        scale=stationary_std(lim))
    if r is None:
        return None
    names = [f.name for f in bundle.forces] + [o.name for o in bundle.outputs]
    out = ratios(lim, dict(zip(names, r["nrmse"])), delay * 1e3)
    out["seconds"] = time.perf_counter() - t0
    for warn in filter(None, (zero_warning(out, bundle.method == "tikhonov"),
                              delay_warning(bundle.meta["limit"], out))):
        bundle.meta.setdefault("warnings", []).append(warn)
    return out


def delay_warning(table: dict, acc: dict) -> str | None:
    """The targets a longer delay would estimate far better, or None: the limit at the
    estimator's delay is poor (>= 0.3) and the build's table (``ModelLimit.as_dict``) has a
    longer delay whose limit is at most half of it (an FIR upper bound there: the gain is
    real). A force reached only through slow, lightly damped modes is such a case (an
    acceptance test's shear frame: 0.787 at 19.4 ms, 0.059 at 100 ms)."""
    longest = max(table["delays_ms"])
    bad = []
    for r in acc["rows"]:
        far = limit_at(table, r["name"], longest)
        if far is not None and far[1] > acc["delay_ms"] and r["limit"] >= 0.3 \
                and far[0] <= 0.5 * r["limit"]:
            bad.append(f"{r['name']} {r['limit']:.3g} at {acc['delay_ms']:.3g} ms, "
                       f"{far[0]:.3g} at {far[1]:.3g} ms")
    if not bad:
        return None
    return ("the accuracy limit falls steeply with the estimate's delay: " + "; ".join(bad)
            + f": set [estimator] max_delay = {math.ceil(longest) / 1e3:g} (seconds) or more "
            "to let the build choose a longer delay, if the application can wait that long")


def zero_warning(acc: dict, tikhonov: bool = False) -> str | None:
    """The targets the estimator gets no better than an estimate of zero (normalised RMS error
    >= 1 on the calibration runs), or None. Through the ADS1256 the per-step Tikhonov estimator
    (``window = 1``) of examples/cantilever_params.toml is such a case: its L-curve alpha (62)
    estimates d60 at 1.15 (docs/inverse.md; the example declares ``window = 2``)."""
    bad = [r for r in acc["rows"] if not r["nrmse"] < 1.0]
    if not bad:
        return None
    hint = ("; try a longer [estimator] window (2 or more) or method = \"auto\"" if tikhonov
            else "; a sensor nearer to it or a record of the real load (build --record) may help")
    return (", ".join(f"{r['name']} {r['nrmse']:.3g}" for r in bad) + ": the estimator's "
            "normalised RMS error on the calibration runs is no better than an estimate of zero "
            "(1.0)" + hint)
