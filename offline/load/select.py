"""Which load model the build ships: candidates chosen by held-out likelihood.

Learning the load must never make the estimate worse. A learned model can be wrong where the
records say little (a weakly seen load, a family that does not hold the real spectrum), and
the Whittle fit's own likelihood cannot tell: it is the likelihood the fit maximised. So each
record is split: the candidates are learned on its first ``1 - HOLD_OUT`` and judged on the
rest, which no fit saw, by what the estimator itself makes of them: the one-step innovation
log-likelihood of the smoother designed with each candidate::

    l = 1 / (n nch) sum_k [ -1/2 |eps_k|^2 + ln |det Wt| - nch/2 ln 2 pi ],  eps_k = Wt e_k

(``Wt^T Wt = S^-1``, ``S`` the innovation covariance the candidate's design states; the
filter runs from the record's start, so the held-out innovations are true predictions of
samples it has not used). The candidates: the declaration (the model file's load and noise),
the declaration at the records' level and noise, the model learned without source components
and, when the fit found them, the one learned with them. Where the sensors see fewer load
combinations above their noise than there are loads (:mod:`offline.load.split`), the sensors'
likelihood cannot judge how a model splits their response between the loads, and the freely
learned models are left out: the third candidate is then the declaration's split with the
spectrum's level and shape learned from the records. The highest ``l`` among the candidates
whose held-out innovations pass the records check (:mod:`offline.load.check`: variance
0.8-1.25, whiteness) is shipped; when none passes, the highest ``l``, and the build says so.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from edge.estimator import EstimatorError
from offline.load.check import (
    COLOURED_MAX,
    COLOURED_MIN,
    PEAK_MAX,
    VARIANCE_RANGE,
    autocorrelation,
    innovations,
)
from offline.load.learn import MIN_RECORD_S, learn_load, whittle_of_records
from offline.load.model import LoadModel
from offline.load.split import declared_split_fit, weak_split
from offline.load.whittle import LN10
from offline.smoother import smoother_from_spec

#: share of each record held out for the choice (its end)
HOLD_OUT = 0.3
#: shortest held-out part [s]
MIN_HELD_S = 2.0
#: the candidate that learns only what the records tell where they cannot tell the split
SPLIT_LABEL = "declared split, the records' level and shape"


def split_records(records, dt: float, min_fit_s: float, share: float = HOLD_OUT):
    """``(fit parts, held-out starts)``: each record's first ``1 - share`` for the fit and the
    index where its held-out part begins; None when a part would be shorter than
    ``min_fit_s`` or :data:`MIN_HELD_S`."""
    fits, starts = [], []
    for Y in records:
        n_fit = Y.shape[0] - int(round(share * Y.shape[0]))
        if n_fit * dt < min_fit_s or (Y.shape[0] - n_fit) * dt < MIN_HELD_S:
            return None
        fits.append(Y[:n_fit])
        starts.append(n_fit)
    return fits, starts


def held_out_score(bundle, records, starts, lags: int = 50) -> dict:
    """The smoother ``bundle``'s innovations on the held-out rows (from ``starts[i]`` of each
    record): their log-likelihood per sample and channel (module docstring), variance,
    largest autocorrelation, share of coloured lags and whether they pass the records check
    (:func:`offline.load.check.innovation_check`'s limits)."""
    Wt = np.asarray(bundle.kf["Wt"], dtype=float)
    nch = Wt.shape[0]
    eps = np.vstack([innovations(bundle, Y)[s:] for Y, s in zip(records, starts)])
    _, logdet = np.linalg.slogdet(Wt)                 # ln |det Wt| = -1/2 ln det S
    q = np.sum(eps ** 2, axis=1)
    ll = float(np.mean(-0.5 * q + logdet) / nch - 0.5 * np.log(2 * np.pi))
    var = float(np.mean(q) / nch)
    band = max(1.96 / np.sqrt(eps.shape[0]), COLOURED_MIN)
    r = np.abs(np.array([autocorrelation(eps[:, c], lags) for c in range(nch)]))
    coloured, peak = float(np.mean(r > band)), float(r.max())
    ok = (VARIANCE_RANGE[0] <= var <= VARIANCE_RANGE[1] and coloured <= COLOURED_MAX
          and peak <= PEAK_MAX)
    return {"loglik": ll, "variance": var, "peak": peak, "coloured": coloured, "ok": bool(ok)}


def candidate_smoother(bundle, spec, est_spec, lm):
    """The smoother of load model ``lm`` on ``bundle``'s structure, its channel weights the
    model's noise (``1 / noise_std^2``)."""
    b = bundle.replace(channels=[replace(c, weight=float(1.0 / s ** 2))
                                 for c, s in zip(bundle.channels, lm.noise_std)])
    return smoother_from_spec(b, spec, est_spec, load_model=lm)


def choose(candidates, bundle, spec, est_spec, records, starts) -> dict:
    """Score each ``(label, LoadModel)`` of ``candidates`` on the held-out rows and pick the
    one to ship (module docstring). Returns ``{"chosen": index, "scores": [...], "reason":
    str}``; a candidate whose smoother cannot be designed scores ``-inf``."""
    scores = []
    for label, lm in candidates:
        try:
            s = held_out_score(candidate_smoother(bundle, spec, est_spec, lm), records, starts)
        except (EstimatorError, np.linalg.LinAlgError, ValueError) as exc:
            s = {"loglik": -np.inf, "variance": np.nan, "peak": np.nan, "coloured": np.nan,
                 "ok": False, "error": str(exc)}
        scores.append({"label": label, **s})
    ll = np.array([s["loglik"] for s in scores])
    passing = [i for i, s in enumerate(scores) if s["ok"]]
    best = int(np.argmax(ll))
    if passing:
        chosen = max(passing, key=lambda i: ll[i])
        reason = ("the highest held-out likelihood" if chosen == best else
                  f"the highest held-out likelihood among the candidates that pass the records "
                  f"check ({scores[best]['label']} scores higher but fails it)")
    else:
        chosen = best
        reason = ("the highest held-out likelihood; NO candidate passes the records check, "
                  "so the stated standard deviations are not to be trusted")
    return {"chosen": chosen, "scores": scores, "reason": reason}


def format_choice(choice: dict, fit_share: float) -> str:
    """The choice as the build prints it: one line per candidate and what was shipped."""
    lines = [f"load model chosen by held-out likelihood (learned on the first "
             f"{100 * fit_share:.0f} % of each record, scored on the rest):"]
    for i, s in enumerate(choice["scores"]):
        mark = "->" if i == choice["chosen"] else "  "
        if not np.isfinite(s["loglik"]):
            lines.append(f"  {mark} {s['label']}: no smoother ({s.get('error', '')})")
            continue
        lines.append(f"  {mark} {s['label']}: log-likelihood {s['loglik']:+.4f} per sample "
                     f"and channel, innovation variance {s['variance']:.3g}, largest "
                     f"autocorrelation {s['peak']:.2g}"
                     + ("" if s["ok"] else " (fails the records check)"))
    weak = choice.get("weak_split")
    if weak:
        lines.append(f"  not candidates: the models learned freely. The sensors see "
                     f"{weak['seen']} of the {weak['loads']} load combinations above their "
                     f"noise in {100 * weak['share']:.0f} % of the records' band, so no "
                     "record tells how the response splits between the loads (nor can the "
                     "held-out likelihood judge it): the declaration's split is kept, only "
                     "the level and shape the records tell are learned")
    lines.append(f"  shipped: {choice['scores'][choice['chosen']]['label']} ({choice['reason']})")
    return "\n".join(lines)


def learn_and_choose(mm, bundle, spec, est_spec, records, prior, progress=None):
    """Learn the candidates on the records' first parts and choose by held-out likelihood.

    Returns ``(fit, model, choice)``: the :class:`offline.load.LoadFit` of the learned model
    (the one shipped, else the best-scoring learned one, for the summary and the plots), the
    load model to ship (None: the declaration, the build then is the one without records)
    and ``choice`` (:func:`choose`'s, plus ``"text"``: what the build prints). Records too
    short to hold a part out: the model learned on all of them, unchosen (``choice`` says
    so). Where the records cannot tell the split of the loads (:func:`offline.load.split.
    weak_split`) the learned candidates give way to the declaration's split with the level
    and shape the records tell (:func:`offline.load.split.declared_split_fit`)."""
    dt, kinds = bundle.dt, [c.kind for c in bundle.channels]
    split = split_records(records, dt, MIN_RECORD_S)
    if split is None:
        fit = learn_load(mm, records, dt, prior, kinds, progress=progress, chain=bundle.chain)
        text = (f"load model: the records are too short to hold out {100 * HOLD_OUT:.0f} % "
                f"(the fit needs {MIN_RECORD_S:g} s, the choice {MIN_HELD_S:g} s): the model "
                "learned on all of them is shipped without a held-out choice")
        return fit, fit.model, {"text": text, "chosen": None, "scores": []}
    fits, starts = split
    # where the records cannot tell the split no learned shape is a candidate: the fit then
    # gives the noise and the records' likelihood only (no roll-off orders, peaks, components)
    weak = weak_split(whittle_of_records(mm, fits, dt, kinds, prior=prior,
                                         chain=bundle.chain)[0], prior)
    fit_c = learn_load(mm, fits, dt, prior, kinds, progress=progress, chain=bundle.chain,
                       **({} if weak is None else
                          {"fit_orders": False, "max_peaks": 0, "max_components": 0}))
    cands = [("declared", prior), ("declared, at the records' level and noise",
                                   declared_at_level(fit_c, prior))]
    if weak is None:
        learned = [("learned", fit_c)]
        if fit_c.model.components:  # the same family without them (roll-offs searched for <= 2)
            fit_n = learn_load(mm, fits, dt, prior, kinds, progress=progress,
                               chain=bundle.chain, max_components=0,
                               fit_orders=len(prior.forces) <= 2)
            learned = [("learned", fit_n), ("learned with source components", fit_c)]
        cands += [(lab, f.model) for lab, f in learned]
    else:
        shaped = declared_split_fit(fit_c, prior, progress)
        cands += [] if shaped is None else [(SPLIT_LABEL, shaped)]
    choice = choose(cands, bundle, spec, est_spec, records, starts)
    choice["weak_split"] = weak
    choice["text"] = format_choice(choice, 1.0 - HOLD_OUT)
    k = choice["chosen"]
    if weak is not None:   # the summary: the shipped declared split, else the learned model
        fit = fit_c if k == 0 else declared_split_summary(fit_c, cands[k][1])
    else:
        ll = [s["loglik"] for s in choice["scores"][2:]]
        fit = learned[k - 2][1] if k > 1 else learned[int(np.argmax(ll))][1]
    fit.info["data"] = records           # the build's check and plots: the whole records
    return fit, (None if k == 0 else cands[k][1]), choice


def declared_split_summary(fit, model):
    """``fit`` (a :class:`offline.load.LoadFit`) describing ``model``, a declared split at
    the records' level: no force's own level identified (its posterior std the prior's)."""
    nf = len(model.forces)
    ident = {**fit.identified, **{f"force {j}": False for j in range(nf)}}
    sd = {**fit.posterior_sd, **{f"force {j}": float(LN10) for j in range(nf)}}
    return replace(fit, model=model, identified=ident, posterior_sd=sd, info=dict(fit.info))


def declared_at_level(fit, prior):
    """The declaration's loads (shapes, relative sizes, correlation) times the one factor
    that maximises the records' Whittle likelihood with the noise ``fit`` learned: the
    declared split between the loads, at the records' level. A learned model may predict the
    sensors better and still split their response between weakly seen loads worse."""
    W, noise = fit.info["whittle"], fit.model.noise_std
    corr = prior.corr if prior.correlated else np.eye(len(prior.forces))

    def scaled(g):
        return [replace(fm, rms=fm.rms * g) for fm in prior.forces]
    grid = 10.0 ** np.arange(-3.0, 1.51, 0.05)
    v = [W.nll_of(W.expected(scaled(g), noise, corr, prior.components)) for g in grid]
    g = float(grid[int(np.argmin(v))])
    return LoadModel(forces=scaled(g), corr=prior.corr, noise_std=np.asarray(noise),
                     source="record", info={"declared_level": g},
                     components=[replace(c, v=tuple(g * x for x in c.v))
                                 for c in prior.components])


def choice_meta(choice: dict) -> dict:
    """The choice for ``meta["load_model"]["info"]["choice"]`` (JSON: no infinities)."""
    def num(x):
        return float(x) if np.isfinite(x) else None
    shipped = (None if choice.get("chosen") is None
               else choice["scores"][choice["chosen"]]["label"])
    return {"shipped": shipped, "reason": choice.get("reason", choice["text"]),
            "held_out_share": HOLD_OUT, "weak_split": choice.get("weak_split"),
            "candidates": [{"label": s["label"], "loglik": num(s["loglik"]),
                            "variance": num(s["variance"]), "peak": num(s["peak"]),
                            "passes_check": bool(s["ok"])} for s in choice["scores"]]}
