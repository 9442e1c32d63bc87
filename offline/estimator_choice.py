"""The automatic choice of estimator, window and alpha on the honest calibration runs.

The choice (:func:`select`) minimises the expected normalised RMS error
``RMS(estimate - truth) / std(truth)`` (full band), each force and output counted relative to
its MMSE limit (geometric mean of the ratios; mean over the runs of
:mod:`offline.calibration_runs`), among the candidates of :data:`CANDIDATES` within
``max_delay``; since every candidate is scored on the same runs, the one chosen is never worse
there than another one, but for the Kalman smoother, chosen within :data:`SMOOTHER_MARGIN` of
the best (it states its std, follows the load's level and checks its model both ways, and
the runs are drawn from a declaration that is only a guess). (Counting plain errors instead
lets a force that cannot be estimated anyway, error ~1, outweigh an output estimated 100x
better: measured on a 9-DOF strip, that choice gave up the output, 0.14 instead of 0.08.)

``[estimator] method`` picks the families scored (:func:`candidates_for`): ``auto`` all,
``tikhonov`` the Tikhonov ones, ``smoother`` the smoother alone. The smoother's rows are
bundles made by :func:`offline.smoother.smoother_bundle` from the build's
:class:`offline.smoother.SmootherSettings`, the one design path of every smoother; the chosen
one is returned as it was scored (:class:`Selection`). The score of one estimator on the runs
is :mod:`offline.calibration_score`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edge.estimator import Estimator, EstimatorError, derive_operator
from offline._deps import need, progress as _progress
from offline.calibration_score import evaluate, score_estimator
from offline.regularization import alpha_grid, choose_alpha
from offline.smoother import smoother_bundle
from offline.smoother.gains import accel_mode_variants, blind_forces


@dataclass
class Candidate:
    """The best setting of one estimator family: its row and the table of all tried."""

    name: str
    best: dict
    rows: list = field(default_factory=list)
    bundles: dict = field(default_factory=dict)  # row index -> a bundle the row made itself
    error: str = ""  # why a setting failed (named when no candidate works)


@dataclass
class Selection:
    """What :func:`select` chose.

    report : dict     JSON-able: ``chosen`` (family name), ``best`` (its row), ``candidates``
                      ({name: {"best", "rows"}}), ``max_delay_s``, ``windows``, ``targets``,
                      ``n_runs``, ``seeds``, ``score``; stored as the bundle's
                      ``meta["selection"]``
    bundle : Bundle or None   the bundle the chosen candidate designed itself and was scored
                      as (the smoother's, :func:`offline.smoother.smoother_bundle`); None for
                      a Tikhonov setting (``report["best"]``: window, alpha, ``changes``)
    """

    report: dict
    bundle: object = None

    @property
    def chosen(self) -> str:
        return self.report["chosen"]

    @property
    def best(self) -> dict:
        return self.report["best"]


def _alpha_search(bundle, runs, window, lo, hi, n=7, refine=2, reference=None):
    """Minimise the score over log alpha: a coarse grid, then ``refine`` finer passes."""
    tried = {}

    def score(a):
        if a not in tried:
            tried[a] = evaluate(bundle, runs, a, window, reference=reference)
        r = tried[a]
        return np.inf if r is None else r["score"]

    grid = np.logspace(np.log10(lo), np.log10(hi), n)
    for _ in range(refine + 1):
        s = [score(a) for a in grid]
        i = int(np.argmin(s))
        if not np.isfinite(s[i]):
            return None, tried
        step = np.log10(grid[1] / grid[0])
        c = np.log10(grid[i])
        grid = 10 ** np.linspace(c - step, c + step, 5)
    best = min((r for r in tried.values() if r is not None), key=lambda r: r["score"])
    return best, tried


def design_tikhonov(bundle, runs, windows, alpha_rule="auto", progress=False,
                    reference=None) -> Candidate:
    """Best (window, alpha) of the paper's Tikhonov estimator (L = 1: per step; L > 1:
    fixed lag) on the runs. ``alpha_rule``: "auto" (minimum calibration error), a number, or
    an L-curve/GCV/discrepancy rule applied to the first run."""
    rows = []
    prev = None  # (alpha, L) of the previous window: the next search starts around it
    for L in _progress(sorted(windows, reverse=True), desc="estimator choice",
                       enable=progress):
        if isinstance(alpha_rule, str) and alpha_rule == "auto":
            if prev is None:  # 12 decades around the one-step sensitivity, 3 passes
                g = alpha_grid(bundle, L, n=2, decades=(-9.0, 3.0))
                best, _ = _alpha_search(bundle, runs, L, g[0], g[-1], reference=reference)
            else:  # +/- 2 decades around the previous window's alpha (scaled by L), 2 passes
                c = prev[0] * L / prev[1]
                best, _ = _alpha_search(bundle, runs, L, c / 100, c * 100, n=5, refine=1,
                                        reference=reference)
            if best is not None:
                prev = (best["alpha"], L)
        elif isinstance(alpha_rule, str):
            try:
                a = choose_alpha(bundle, runs[0].Y, window=L, method=alpha_rule,
                                 progress=False).alpha
            except EstimatorError:
                continue
            best = evaluate(bundle, runs, a, L, reference=reference) if np.isfinite(a) \
                else None
            if best is not None:
                best["alpha_method"] = alpha_rule
        else:
            best = evaluate(bundle, runs, float(alpha_rule), L, reference=reference)
        if best is not None:
            rows.append(best)
    if not rows:
        return Candidate("tikhonov", {}, [])
    return Candidate("tikhonov", min(rows, key=lambda r: r["score"]), rows)


def _smoother(bundle, runs, windows, alpha_rule, progress=False, reference=None,
              smoother=None):
    """The joint input-state fixed-lag Kalman smoother (offline/smoother/) of the build's
    settings ``smoother`` (:class:`offline.smoother.SmootherSettings`: lag, model-error
    levels, model check, load model), one row per model-error level, each bundle made by
    :func:`offline.smoother.smoother_bundle`, the function that makes every smoother."""
    c = Candidate("Kalman smoother", {}, [])
    if smoother is None:
        return c
    for me, bv in ((me, bv) for bv in accel_mode_variants(bundle)
                   for me in smoother.model_errors):
        try:  # a force the sensors do not see is the prior's (zero): scored like the rest
            b = smoother_bundle(bv, smoother, me, blind_ok=True)
            r = score_estimator(Estimator(b), runs, reference)
        except (EstimatorError, ValueError, np.linalg.LinAlgError) as exc:
            c.error = str(exc)
            continue
        if r is None:
            c.error = f"model_error = {me:g}: an estimate on the calibration runs is not finite"
            continue
        r.update({"load_model": smoother.source, "model_error": float(me), "kind": "smoother",
                  "accel_modes": b.meta.get("reduction", {}).get("accel_modes", "exact"),
                  "blind": blind_forces(b, smoother.force_models, smoother.components,
                                        b.meta["estimator"]["std"])})
        c.bundles[len(c.rows)] = b
        c.rows.append(r)
    if c.rows:
        c.best = min(c.rows, key=lambda r: r["score"])
    return c


def _per_step(bundle, runs, windows, alpha_rule, progress=False, reference=None):
    c = design_tikhonov(bundle, runs, [1], alpha_rule, progress, reference)
    c.name = "per-step (paper)"
    return c


def _fixed_lag(bundle, runs, windows, alpha_rule, progress=False, reference=None):
    c = design_tikhonov(bundle, runs, [L for L in windows if L > 1], alpha_rule, progress,
                        reference)
    c.name = "Tikhonov fixed-lag"
    return c


def _fixed_lag_foh(bundle, runs, windows, alpha_rule, progress=False, reference=None):
    """The fixed lag on the exact (first-order-hold) discretisation instead of Newmark's."""
    changes = {"discretization": "foh"}
    c = design_tikhonov(bundle.replace(**changes), runs, [L for L in windows if L > 1],
                        alpha_rule, progress, reference)
    c.name = "Tikhonov fixed-lag, exact (FOH)"
    for r in c.rows:
        r["changes"] = changes
    return c


#: Estimator families: (name, design(bundle, runs, windows, alpha_rule, progress,
#: reference) -> Candidate whose rows may carry ``"changes"``, the bundle fields that make
#: that estimator, e.g. ``{"discretization": "foh"}``). A new estimator plugs in as one more
#: entry.
#: the smoother is chosen when its score is within this fraction of the best candidate's
#: (the frame of benchmarks/load_user: Tikhonov chosen for 11 % on the declared runs, 11.8x
#: its limit and no std under the real load, a 30x lower pink one; 10 % until then)
SMOOTHER_MARGIN = 0.25
#: ... but not when it estimates a target more than this many times worse (:func:`far_worse`)
FAR_WORSE = 10.0

CANDIDATES = [("per-step", _per_step), ("fixed-lag", _fixed_lag),
              ("fixed-lag FOH", _fixed_lag_foh), ("smoother", _smoother)]
#: ``[estimator] method`` -> the families it scores (``auto``: all of them, the smoother only
#: with ``alpha = "auto"``: a given alpha or rule asks for a Tikhonov estimator)
METHODS = ("auto", "tikhonov", "smoother")


def candidates_for(method: str, alpha_rule="auto") -> list:
    """The :data:`CANDIDATES` that ``[estimator] method`` asks for (:data:`METHODS`)."""
    tik = [c for c in CANDIDATES if c[0] != "smoother"]
    sm = [c for c in CANDIDATES if c[0] == "smoother"]
    if method == "tikhonov":
        return tik
    if method == "smoother":
        return sm
    if method != "auto":
        raise ValueError(f"[estimator] method: expected one of {', '.join(METHODS)}, "
                         f"got {method!r}")
    return tik + sm if isinstance(alpha_rule, str) and alpha_rule == "auto" else tik


def default_windows(max_lag: int) -> list[int]:
    """Windows tried within a delay bound of ``max_lag`` samples (window L: delay L - 1)."""
    base = [1, 2, 4, 8, 12, 16, 21, 31, 51, 101]
    out = [L for L in base if L - 1 <= max_lag]
    if max_lag + 1 not in out and max_lag + 1 <= 201:
        out.append(max_lag + 1)
    return out


def select(bundle, runs, max_delay: float, windows=None, alpha_rule="auto",
           candidates=None, progress=False, reference=None, smoother=None) -> Selection:
    """Choose the estimator with the lowest expected error on the runs (module docstring).

    ``candidates``: the families to score (default :data:`CANDIDATES`; see
    :func:`candidates_for`); ``smoother``: the build's
    :class:`offline.smoother.SmootherSettings` (without them the smoother is not a
    candidate). Returns a :class:`Selection`; raises EstimatorError if no candidate works.
    """
    max_lag = int(np.floor(max_delay / bundle.dt + 1e-9))
    windows = default_windows(max_lag) if windows is None else list(windows)
    cands, errors = {}, []
    for name, design in (CANDIDATES if candidates is None else candidates):
        kw = {"smoother": smoother} if "smoother" in design.__code__.co_varnames else {}
        c = design(bundle, runs, windows, alpha_rule, progress, reference, **kw)
        if c.best:
            cands[c.name] = c
        elif c.error:
            errors.append(f"{c.name}: {c.error}")
    chosen, best = _best_stable(bundle, cands)
    # the smoother states its std, follows the load's level and checks its model both ways;
    # the runs are drawn from the declaration, a guess, so a lead of another estimator
    # within SMOOTHER_MARGIN there does not carry over to the real load (docs/load.md)
    sm, note = cands.get("Kalman smoother"), ""
    if chosen is not None and chosen is not sm and sm is not None and sm.rows:
        r = min(sm.rows, key=lambda x: x["score"])
        s_sm, s_best = _informative(r, best, reference)
        if s_sm <= (1.0 + SMOOTHER_MARGIN) * s_best:
            note = far_worse(r, best, [f.name for f in bundle.forces]
                             + [o.name for o in bundle.outputs], chosen.name)
            if not note:
                chosen, best = sm, r
    if chosen is None:
        reason = "".join(f"; {e}" for e in errors)
        a = alpha_rule if not isinstance(alpha_rule, str) else 1.0
        if any(n != "smoother" for n, _ in (CANDIDATES if candidates is None else candidates)):
            try:  # the estimator's own diagnosis of one setting names the real cause
                derive_operator(bundle, alpha=float(a), window=windows[0])
            except EstimatorError as exc:
                reason += f"; e.g. L={windows[0]}, alpha={float(a):g}: {exc}"
        raise EstimatorError(f"no estimator setting is stable on the calibration runs "
                             f"(windows {windows}, alpha {alpha_rule!r}){reason}")
    for c in cands.values():  # each candidate's best is its best stable row
        ok = [r for r in c.rows if not r.get("unstable")]
        c.best = min(ok, key=lambda r: r["score"]) if ok else c.best
    targets = [f.name for f in bundle.forces] + [o.name for o in bundle.outputs]
    made = chosen.bundles.get(chosen.rows.index(best))
    if made is not None and best.get("blind"):
        note = (note + "; " if note else "") + blind_note(best["blind"])
    return Selection(bundle=made, report={
        "chosen": chosen.name, "best": best, "max_delay_s": float(max_delay),
        "windows": windows, "targets": targets, "n_runs": len(runs),
        "seeds": [r.seed for r in runs],
        "score": "geometric mean of nrmse / non-causal limit" if reference is not None
        else "mean nrmse", "note": note,
        "candidates": {n: {"best": c.best, "rows": c.rows} for n, c in cands.items()}})


def blind_note(names) -> str:
    """The chosen smoother's forces the sensors do not see, in words."""
    return (f"the sensors do not see {', '.join(names)} apart from the other loads: the Kalman "
            f"smoother's estimate of each is the declared load's mean (zero), its stated std "
            f"the declared size; add a sensor at or near each (docs/load.md)")


def _informative(a: dict, b: dict, reference) -> tuple:
    """The scores (:func:`offline.calibration_score.score_estimator`'s form, on the mean errors) of rows ``a`` and
    ``b`` over the targets not both estimate worse than zero (nrmse > 1), which say nothing
    about which is better (the frame of benchmarks/load_user: a1z 3.6 / 1.9, 1,600x / 830x
    its limit, put the smoother 35 % behind, 11 % on the rest); else the plain scores."""
    ea, eb = (np.asarray(r.get("nrmse", []), dtype=float) for r in (a, b))
    keep = (ea <= 1.0) | (eb <= 1.0) if ea.size and ea.shape == eb.shape else ea[:0] > 0
    if keep.all() or not keep.any():
        return a["score"], b["score"]
    if reference is None:
        return float(np.mean(ea[keep])), float(np.mean(eb[keep]))
    ref = np.asarray(reference, dtype=float)[keep]
    # geometric mean of nrmse / limit over the kept targets
    return tuple(float(np.exp(np.mean(np.log(e[keep] / ref)))) for e in (ea, eb))


def far_worse(a: dict, b: dict, names, b_name: str) -> str:
    """Why the smoother's row ``a``, within :data:`SMOOTHER_MARGIN` of the best row ``b``,
    is not preferred: a target it estimates more than :data:`FAR_WORSE` times worse (nrmse on
    the runs; "" if none). A preference for its std must not cost one target an order of
    magnitude (the frame of benchmarks/load_user: the smoother's a1z 36 against 2.5)."""
    ea, eb = (np.asarray(r.get("nrmse", []), dtype=float) for r in (a, b))
    if not ea.size or ea.shape != eb.shape:
        return ""
    names = list(names) + [f"target {i + 1}" for i in range(len(names), ea.size)]
    bad = [f"{n} {x:.3g} against {y:.3g}" for n, x, y in zip(names, ea, eb)
           if x > FAR_WORSE * y]
    if not bad:
        return ""
    return (f"the Kalman smoother, within {100 * SMOOTHER_MARGIN:.0f} % of the best score, "
            f"is not preferred to {b_name}: on the calibration runs it estimates "
            f"{', '.join(bad)} (normalised RMS error), more than {FAR_WORSE:g}x worse")


def _best_stable(bundle, cands):
    """The best row whose closed loop is stable (rows of every candidate, best first):
    (Candidate, row) or (None, None); an unstable row is marked ``"unstable"``."""
    ranked = sorted(((r["score"], n, i) for n, c in cands.items() for i, r in enumerate(c.rows)))
    for _, n, i in ranked:
        r = cands[n].rows[i]
        if i not in cands[n].bundles:  # (a bundle made by its candidate was checked there)
            try:
                derive_operator(bundle.replace(**r.get("changes", {})), alpha=r["alpha"],
                                window=r["window"])
            except EstimatorError:
                r["unstable"] = True
                continue
        return cands[n], r
    return None, None


def worse_than_zero(names, nrmse) -> str | None:
    """The targets whose estimate is worse than an estimate of zero on the calibration runs
    (normalised RMS error above 1), in words, or None. An estimator whose model describes the
    structure never is (the MMSE estimate's error is at most the signal's own std): the
    reduced model misses that target (its modes, or a master near it) or the sensors do not
    see it (e.g. a displacement from accelerometers only)."""
    bad = [f"{n} {v:.3g}" for n, v in zip(names, nrmse) if v > 1.0]
    if not bad:
        return None
    return (f"on the calibration runs the estimate of {', '.join(bad)} (normalised RMS error) "
            "is worse than an estimate of zero: the reduced model does not describe it (more "
            "[reduction] modes or a master near it; see the eigenvalue error within the band "
            "below) or the sensors do not see it")


def plot_selection(sel: dict, path, dt: float) -> str:
    """Expected normalised RMS error on the calibration runs per window, per estimator."""
    need("matplotlib").use("Agg")
    plt = need("matplotlib.pyplot")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for (name, c), mk in zip(sel["candidates"].items(), "osD^v<>"):
        rows = sorted(c["rows"], key=lambda r: r["delay"])
        ax.plot([r["delay"] * dt * 1e3 for r in rows], [r["score"] for r in rows], "-",
                marker=mk, mfc="none", label=name)  # open markers: coinciding lines show
    b = sel["best"]
    ax.plot([b["delay"] * dt * 1e3], [b["score"]], "*", ms=14, color="C3",
            label=f"chosen: {sel['chosen']}, L={b['window']}")
    ax.axvline(sel["max_delay_s"] * 1e3, color="0.5", ls=":", label="max_delay")
    ax.set_xlabel("delay [ms]")
    ax.set_ylabel("mean normalised RMS error")
    ax.set_yscale("log")  # the per-step estimator can be 10x the others
    ax.set_title("estimator choice on the calibration runs (full model)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def chain_policy(chain, est_spec, meta: dict, hybrid: bool, where: str) -> bool:
    """Whether a build must use the Kalman smoother for its measurement chain
    (:class:`edge.acquisition.Chain`). A converter (``ads1256``, ``daq``: its taps and each
    channel's offset) is modelled by every estimator: the Tikhonov estimators' Markov
    parameters are the conversions' (:mod:`edge.estimator.chain_window`), so the automatic
    choice scores every candidate on the same converted calibration runs. Sensor dynamics
    (``[[sensors]]`` highpass_hz, average_s, drift) only the smoother models: they make the
    build use it instead, with a warning in ``meta["warnings"]``. The hybrid twin models a
    converter (:mod:`offline.hybrid.conversion`), not the sensors' dynamics: refused
    (``where``)."""
    if chain.point:
        return False
    what = (f"[acquisition] converter = {chain.converter!r}" if not chain.dynamic else
            "[[sensors]] highpass_hz / average_s / drift")
    if hybrid and chain.dynamic:
        raise ValueError(f"{where}: the hybrid twin does not model the sensors' dynamics "
                         f"({what}) yet; build it for sensors without them (a converter, "
                         f"the ADS1256 or a DAQ, it models)")
    if not chain.dynamic:  # a converter: the Tikhonov estimators model it too
        return False
    if est_spec.method == "tikhonov":  # asked for by name; "auto" chooses among what fits
        meta.setdefault("warnings", []).append(
            f"{what}: the Tikhonov estimators do not model the sensors' dynamics; the Kalman "
            f"smoother, which models them exactly, is used instead ([estimator] method = "
            f"{est_spec.method!r})")
    return True
