"""``vsense-offline place MODEL.toml -n N -o PLACED.toml``: choose N of the model file's
``[[placement.candidates]]``, print the predicted errors, write PLACED.toml (docs/placement.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from offline.model import load_model_file
from offline.placement import place, placement_model
from offline.placement.fisher import place_calibration
from offline.placement.report import summary, write_report
from offline.placement.write import write_placed


def run_place(model_path, n: int, out, *, target: str = "estimation", report=None,
              screen: int = 6, passes: int = 3, progress: bool = True, say=print,
              figures: bool = True) -> dict:
    """Run the placement and write ``out``; returns the result fields (for tests).

    ``target``: ``estimation`` (forces and outputs, the smoother's predicted NRMSE) or
    ``calibration`` (the ``[[parameters]]``, E-criterion, :mod:`offline.placement.fisher`).
    ``figures``: draw the estimation report's figures (the command always does).
    """
    spec = load_model_file(model_path)
    if spec.placement is None or not spec.placement.candidates:
        raise ValueError(f"{spec.where('[[placement.candidates]]')}: no candidates to place "
                         "(none given, or all of them are [[sensors]] already)")
    ps = spec.placement
    if target == "calibration":
        res = place_calibration(spec, n, budget=ps.budget, progress=progress)
        say(res["summary"])
        names = res["names"]
    else:
        pm = placement_model(spec, progress=progress)
        w = np.array([ps.weights.get(t, 1.0) for t in pm.targets])
        pl = place(pm, n, weights=w, budget=ps.budget, linear=ps.criterion == "linear",
                   screen=screen, passes=passes, progress=progress)
        every = pm.nrmse(range(len(pm.candidates)))
        blind = {t: float(v) for t, v in zip(pm.targets, every) if v > 0.95}
        say(summary(pm, pl, blind))
        note = estimator_note(spec)
        if note:
            say(note)
        names = [pm.candidates[i] for i in pl.order]
        res = {"pm": pm, "placement": pl, "blind": blind, "names": names}
        if figures:
            rdir = Path(report) if report is not None else Path(out).parent
            write_report(pm, pl, blind, rdir)
            say(f"figures in {rdir}: placement_curve.png, placement_layout.png")
    if len(names) < n:
        say(f"the budget {ps.budget:g} allowed {len(names)} of the {n} sensors asked for")

    comment = (f"sensors added by vsense-offline place ({target}), in the order chosen: "
               + ", ".join(names))
    # in [[placement.candidates]] order: the channels' order (with the multiplexer cycling,
    # their conversion instants) that the criterion scored (offline/placement/chained.py)
    cands = [c.name for c in ps.candidates]
    write_placed(spec.path, out, sorted(names, key=cands.index), comment)
    say(f"wrote {out}")
    return res


def estimator_note(spec) -> str:
    """What the build of PLACED.toml ships against what was predicted (the smoother): a note
    when ``[estimator] method`` lets the build choose another estimator (docs/placement.md)."""
    method = spec.estimator.method if spec.estimator is not None else "auto"
    if method == "smoother":
        return ""
    if method == "tikhonov":
        return ("note: the predictions are the Kalman smoother's; [estimator] method = "
                "\"tikhonov\" builds a Tikhonov estimator, whose errors may differ")
    return ("note: the predictions are the Kalman smoother's; with [estimator] method = "
            "\"auto\" the build may ship a Tikhonov estimator instead (lower mean error on "
            "its calibration runs, some target possibly above the prediction); write method "
            "= \"smoother\" to ship the estimator predicted")
