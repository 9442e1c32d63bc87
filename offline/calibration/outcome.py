"""What ``vsense-offline calibrate`` makes of a posterior: its exit codes, the lines it
prints, the bounds check, and the calibrated model's bundle (both routes: force-and-response
records, :mod:`offline.calibration.command`; operational records,
:mod:`offline.calibration.operational_cli`)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from offline.build import build
from offline.calibration import discretisation
from offline.calibration.tomlout import dumps
from offline.calibration.vb import MAX_HALVINGS

#: the model family failed the inadequacy test (the outputs are still written)
EXIT_INADEQUATE = 4
#: the calibration did not converge, or a posterior mean is outside its parameter's bounds
EXIT_NOT_CONVERGED = 5


def say_posterior(info: dict, say) -> None:
    """Each parameter (NOT DETERMINED ones with their 95 % interval, not as a finding), what
    the records do not determine, the free energy and the cost."""
    for n, m, s, iv in zip(info["names"], info["mean"], info["std"], info["interval95"]):
        say(f"  {n}: {m:.6g} +- {s:.3g} (nonlinearity {info['nonlinearity'][n]:.3g})"
            + ("" if info["determined"].get(n, True) else
               f" NOT DETERMINED alone by these records (95 % interval {iv[0]:.3g} .. "
               f"{iv[1]:.3g}): not a finding"))
    for u in info["identifiability"]["undetermined"]:
        say(f"  NOT DETERMINED: {u['text']}")
    if info.get("discretisation"):
        say("  " + discretisation.summary(info["discretisation"], info["names"]))
    say(f"  free energy {info['free_energy']:.6g}, {info['model_evaluations']} model runs, "
        f"{info['seconds']:.2f} s")


def not_converged_reason(info: dict, settings) -> str:
    """Why VB stopped, with the limit that stopped it (``VBResult.stop``)."""
    it, F = info["iterations"], info["free_energy"]
    if info.get("stop") == "backtrack":
        return (f"the calibration stopped after {it} iterations (free energy {F:.6g}): no step "
                f"raised the free energy after {MAX_HALVINGS} halvings of the step, so the "
                f"linearised posterior points nowhere better; more iterations would not help "
                f"([bayes] max_iter is {settings.max_iter}, not reached). Typical causes: "
                f"parameters the records cannot separate (NOT DETERMINED above), or a prior "
                f"or damping the records contradict")
    return (f"the calibration did not converge in {it} iterations, the [bayes] max_iter limit "
            f"(free energy {F:.6g}). Raise [bayes] max_iter, or check the records and priors")


def outside_bounds(info: dict, parameters) -> list:
    """``"name = mean outside [lo, hi]"`` for each posterior mean outside its parameter's
    ``bounds`` (a damping ratio of 17.8 for [0.003, 0.05] from a force column in mN)."""
    out = []
    for p, m in zip(parameters, info["mean"]):
        lo, hi = (float(b) for b in p.bounds)
        if not lo <= m <= hi:
            out.append(f"{p.name} = {m:.6g} outside [{lo:g}, {hi:g}]")
    return out


def calibrated_bundle(args, raw, head, info, failed, say):
    """Build the calibrated model next to the original (relative mesh paths keep working)."""
    src = Path(args.model).resolve()
    fd, tmp = tempfile.mkstemp(suffix=".toml", prefix=f".{src.stem}.calibrated.", dir=src.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(dumps(raw, head))
        res = build(tmp, progress=not args.quiet, maps=False)
    finally:
        Path(tmp).unlink(missing_ok=True)
    meta = dict(res.bundle.meta)
    meta["calibration"] = {k: info[k] for k in ("names", "kinds", "mean", "std", "correlation",
                                                "noise_std", "free_energy", "nonlinearity",
                                                "converged", "determined", "interval95",
                                                "model_sha256") if k in info}
    meta["calibration"]["undetermined"] = [u["text"] for u in
                                           info.get("identifiability", {}).get("undetermined", [])]
    meta["calibration"]["data"] = [d["sha256"] for d in info["data"]]
    if "inadequacy" in info:
        meta["calibration"]["inadequacy"] = {"passed": info["inadequacy"]["passed"],
                                             "p_min": info["inadequacy"]["p_min"],
                                             "p_family": info["inadequacy"]["p_family"],
                                             "alpha": info["inadequacy"]["alpha"]}
    meta["calibration"]["model_inadequate"] = bool(failed)
    res.bundle.replace(meta=meta).save(args.bundle)
    say(f"wrote {args.bundle}")
