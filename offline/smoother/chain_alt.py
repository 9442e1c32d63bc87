"""The chain check's alternative (bundle fields ``kf_alt_*``, schema 8;
:mod:`edge.estimator.chain_check`): the steady Kalman filter of the same model and load under
another measurement chain, and the records check of ``build --record`` with it.

The alternative of a converter (``ads1256``, ``daq``) is point samples; that of point samples
is the ADS1256 at the data rate that gives the bundle's row rate (continuous for one channel,
the multiplexer cycling with the datasheet's instants for several; none when no ADS1256 rate
gives it)."""

from __future__ import annotations

import numpy as np

from edge.acquisition import Chain
from edge.bundle import Bundle
from edge.estimator.chain_check import LLR_MAX, Filter, chain_name, llr
from edge.estimator.operator import EstimatorError
from offline.chain import plan_chain
from offline.forcing.component import Component
from offline.forcing.force_model import ForceModel
from offline.smoother.gains import design_smoother


def alternative_chain(chain: Chain, rate: float, nch: int) -> Chain | None:
    """The chain the check compares ``chain`` with (module docstring), or None. Only the
    converter changes: any other field of ``chain`` is kept (``dataclasses.replace``)."""
    from dataclasses import replace

    if not chain.ideal:
        return replace(chain, converter="ideal", drate=0.0, mode="continuous", offsets=(),
                       cutoff=0.0, group_delay=0.0)

    try:
        plan = plan_chain("ads1256", rate, nch)
    except ValueError:  # no ADS1256 rate gives this row rate
        return None
    return replace(chain, converter="ads1256", drate=float(plan.drate), mode=plan.mode,
                   offsets=tuple(-np.asarray(plan.offsets)))


#: |LLR| on the build's calibration runs (through the declared chain) below which the two
#: chains count as not separable with these channels: a wrong chain would stay as far below
#: LLR_MAX (one tip laser converted continuously: within +-0.001; two channels cycled:
#: 0.095-0.33, module docstring of :mod:`edge.estimator.chain_check`); the records check's
#: "about equally" (:func:`records_chain_check`)
SEPARABLE = 0.1 * LLR_MAX

#: what no check can notice, said with point samples and a generic DAQ declared: a linear
#: filter applied to every channel alike commutes with the structure (``G (H f) = H (G f)``),
#: so the records are those of the declared structure under the load ``G f`` (the plate of
#: benchmarks/chain.py, three channels through one FIR of 2 ms group delay replayed with the
#: point-sample bundle: NIS/dof 0.95, no warning, d_out 23x worse)
COMMON_FILTER = ("a delay or filter common to every channel (a DAQ's anti-alias filter) is "
                 "not noticed by any check: the records then look like the structure's "
                 "response to the load that much earlier; take its cut-off and group delay "
                 "from the data sheet into [acquisition]")


def runs_llr(bundle: Bundle, kf: dict, runs, burn_s: float = 0.25) -> float | None:
    """The log-likelihood ratio alternative / bundle [nats per sample and channel] of the
    build's calibration runs (:class:`offline.calibration_runs.CalRun`: the noisy ``Y``
    through the declared chain, from each run's ``start``, at least ``burn_s``), both
    filters from ``kf`` started at 0; None without rows."""
    own = Filter(kf["A"], kf["H"], kf["K"], kf["Sinv"])
    alt = Filter(kf["alt_A"], kf["alt_H"], kf["alt_K"], kf["alt_Sinv"])
    num = den = 0.0
    for r in runs:
        Y = np.ascontiguousarray(r.Y, dtype=float)
        s0 = max(int(r.start), int(round(burn_s / bundle.dt)))
        n = (Y.shape[0] - s0) * Y.shape[1]
        if n > 0:
            num += llr(own, alt, Y, 0, s0) * n
            den += n
    return num / den if den else None


def with_chain_alternative(bundle: Bundle, runs=None) -> Bundle:
    """A copy of a smoother ``bundle`` with the steady filter of :func:`alternative_chain`
    (``kf_alt_A``, ``_H``, ``_K``, ``_Sinv``; ``meta["chain_check"]``), designed from the
    bundle's own load model (``meta["estimator"]``); unchanged when there is no alternative
    or its design fails, and without the filter when the build's calibration ``runs`` cannot
    tell the two chains apart (:data:`SEPARABLE`: the device's check would cost 2-3 us per
    row and never flag), each said in ``meta["chain_check"]["note"]``; with point samples or
    a generic DAQ declared the note also says what no check notices (:data:`COMMON_FILTER`)."""
    out = _with_alternative(bundle, runs)
    if bundle.chain.ideal or bundle.chain.converter == "daq":  # timing the user declares
        cc = dict(out.meta["chain_check"])
        cc["note"] = "; ".join(filter(None, (cc.get("note"), COMMON_FILTER)))
        out = out.replace(meta={**out.meta, "chain_check": cc})
    return out


def _with_alternative(bundle: Bundle, runs) -> Bundle:
    """:func:`with_chain_alternative` before the note on a common filter."""
    alt = alternative_chain(bundle.chain, bundle.rate, len(bundle.channels))
    meta = dict(bundle.meta)
    if alt is None:
        meta["chain_check"] = {"alternative": None, "note": "no ADS1256 data rate gives "
                               f"{bundle.rate:g} rows/s with {len(bundle.channels)} "
                               "channel(s): the chain is not checked"}
        return bundle.replace(meta=meta)
    e = bundle.meta["estimator"]
    fms = [ForceModel.from_dict(d) for d in e["force_models"]]
    corr = None if e.get("force_corr") is None else np.array(e["force_corr"], dtype=float)
    comps = [Component.from_dict(c) for c in e.get("force_components", [])]
    try:  # the lag does not change the innovations: 0
        d = design_smoother(bundle, fms, 0, float(e.get("model_error", 0.0)), corr=corr,
                            components=comps, chain=alt, blind_ok=True)
    except (EstimatorError, ValueError, np.linalg.LinAlgError) as exc:
        meta["chain_check"] = {"alternative": alt.as_dict(),
                               "note": f"the alternative's filter failed: {exc}"}
        return bundle.replace(meta=meta)
    kf = dict(bundle.kf)
    kf.update({"alt_A": d.A, "alt_H": d.H, "alt_K": d.K, "alt_Sinv": d.Sinv})
    v = None if not runs else runs_llr(bundle, kf, runs)
    v = None if v is None else float(v)
    if v is not None and abs(v) < SEPARABLE:
        meta["chain_check"] = {"alternative": None, "runs_llr": v, "note": (
            f"the build's calibration runs, converted as declared ({chain_name(bundle.chain)}),"
            f" fit {chain_name(alt)} as well ({v:+.2g} nats per sample and channel): with "
            "these channels a wrong chain would not be noticed, so the device does not "
            "check it")}
        return bundle.replace(meta=meta)
    meta["chain_check"] = {"alternative": alt.as_dict(),
                           **({} if v is None else {"runs_llr": v})}
    return bundle.replace(kf=kf, meta=meta)


def records_chain_check(bundle: Bundle, records, skip_s: float = 1.0,
                        max_s: float = 20.0) -> dict:
    """``{"llr", "ok", "text"}``: the log-likelihood ratio of the records (after ``skip_s``,
    at most ``max_s`` of each) under the alternative chain against the bundle's, per sample
    and channel (:func:`edge.estimator.chain_check.llr`); flagged above ``LLR_MAX``."""
    if "alt_A" not in bundle.kf:
        note = bundle.meta.get("chain_check", {}).get("note", "no alternative chain")
        return {"llr": None, "ok": True, "text": f"measurement chain not checked: {note}"}
    kf = bundle.kf
    own = Filter(kf["A"], kf["H"], kf["K"], kf["Sinv"])
    alt = Filter(kf["alt_A"], kf["alt_H"], kf["alt_K"], kf["alt_Sinv"])
    s0, s1 = int(round(skip_s / bundle.dt)), int(round((skip_s + max_s) / bundle.dt))
    num = den = 0.0
    for Y in records:
        Yr = np.ascontiguousarray(Y[:s1], dtype=float)
        n = (Yr.shape[0] - s0) * Yr.shape[1]
        if n <= 0:
            continue
        num += llr(own, alt, Yr, 0, s0) * n
        den += n
    if den == 0:
        return {"llr": None, "ok": True, "text": "measurement chain not checked: records "
                                                 f"shorter than {skip_s:g} s"}
    v = num / den
    decl = chain_name(bundle.chain)
    other = chain_name(bundle.meta["chain_check"]["alternative"])
    if v > LLR_MAX:
        return {"llr": v, "ok": False, "text": (
            f"WARNING: the measurement chain looks wrong: the records fit {other} better "
            f"than the declared {decl} (log-likelihood +{v:.3g} nats per sample and channel, "
            f"above {LLR_MAX:g}); the estimates would be biased by the conversion's delay "
            "and window: declare the converter the records came through in [acquisition] "
            "(converter, drate, mode) and rebuild")}
    text = (f"measurement chain: the records fit the declared {decl} ({v:+.3g} nats per "
            f"sample and channel for {other}; flagged above {LLR_MAX:g})")
    if abs(v) < 0.1 * LLR_MAX:
        text += ("; the two chains explain them about equally: with these channels the "
                 "records cannot tell them apart (one converted sensor: a conversion looks "
                 "like a delayed load), so a wrong [acquisition] would not be noticed")
    return {"llr": v, "ok": True, "text": text}
