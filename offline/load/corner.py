"""The lowest corner a load fit may move a force's band to.

The Whittle likelihood (:mod:`offline.load.whittle`) has bins from the records' lowest
usable frequency ``f_min`` on (the fourth Welch bin: 3.9 Hz for segments of 1.024 s, i.e. an
8 s record whose first 70 % is fitted for the held-out choice). Below ``f_min`` it sees a
force only through its spectrum's tail above ``f_min``: there the declaration (the fit's
prior) decides, not the records. The corner used to be bounded at ``f_min``, which cut the
declaration's own band where it starts below ``f_min``, and the fit ended on that bound
with no power below it. On the frame of ``benchmarks/load_user`` (declared 2-100 Hz; the
truth pink from 2 Hz, most of its force power below 4 Hz) an 8 s record learned a band from
3.94 Hz: the smoother designed for it stated a std blind to the 2-4 Hz force, 1.4-1.6x too
narrow on the force and the drift (1-sigma coverage 42-46 %).

So a corner may go down to the lower of ``f_min`` and the declared corner::

    f_lo >= min(f_min, f_lo,declared)

where the records reach below the declared corner, nothing changes (``f_min`` is the bound);
where they do not, the declaration's corner stays reachable and the prior keeps the fit
there unless the records' bins above ``f_min`` say otherwise. The operational calibration
(:mod:`offline.calibration.operational`) bounds its load model's corners at ``f_min``
(``declared_below=False``): there the load is a nuisance below the records' band, and with
the declared corner reachable its damping moved by 2.5 of its std on the cycled strip of
tests/test_operational_chain.py (0.1 std with the bound at ``f_min``).

The fit's starts (the declaration's, and the second one of :mod:`offline.load.restart`) put
such a corner at ``f_min`` as before (:func:`start_in_records`); the declared corner is then
tried on its own (:func:`keep_declared_corners`). Started at the declared corner, the staged
fit of the step test's frame (tests/test_level_step.py: a flat 2-100 Hz load, 8 s record) ended
18.9 nats short of the same fit with the corner held at 2 Hz, orders 4/4 instead of 8/4,
and the held-out choice shipped the declared shape at the records' level (held-out
log-likelihood +6.88 per sample and channel for the learned model against +7.54 started at
``f_min``): its innovations correlated (0.59), the level tracker read the misfit as steps
and the stated std flipped between neighbouring levels (0.74 / 1.29) at a steady load.
"""

from __future__ import annotations

import numpy as np


def lowest_corner(f_min: float, declared_lo: float) -> float:
    """The lowest band corner [Hz] of a force declared from ``declared_lo`` [Hz] in a fit of
    records whose lowest bin is ``f_min`` [Hz] (module docstring)."""
    # f_lo >= min(f_min, f_lo,declared)
    return min(float(f_min), float(declared_lo))


def start_in_records(L, theta, f_min: float) -> np.ndarray:
    """``theta`` with each force's lower corner raised to the records' lowest bin ``f_min``
    [Hz] where it starts below (the span kept, as the layout's clip did before the bound went
    below ``f_min``): the staged fit starts where the records see (module docstring). ``L``
    an :class:`offline.load.whittle.Layout`."""
    th = np.array(theta, dtype=float)
    for j in range(L.nf):
        i = L.index(f"ln_flo{j}")
        # ln f_lo,start = max(ln f_lo, ln f_min)
        th[i] = max(th[i], np.log(f_min) + 1e-9)
    return th


#: half the 95 % point of chi-square with one degree of freedom [nats]: the likelihood-ratio
#: test of one parameter that the records must pass to move a corner they hardly see
LR_KEEP = 0.5 * 3.841


def keep_declared_corners(fit, optimise, say) -> None:
    """For each force whose declared corner lies below the records' lowest bin, the fit again
    with that corner held at the declaration (its upper corner where the fit put it, every
    other parameter free); kept when its penalised ``-log L`` is within :data:`LR_KEEP` of the
    fit's: the records do not reject the declared corner, so it stays (the declaration is the
    prior), held by the layout's bounds through the fit's joint stage (freed, it went back to
    3.27 Hz on the frame). ``fit`` is :class:`offline.load.learn._Fit`, ``optimise(W, L, theta, free) ->
    (theta, nll)``.

    On the frame's 8 s record the likelihood is flat there: started at the declared corner, the
    fit ended at 3.26 Hz, where the tilt's pole-zero sections (one every half decade from the
    lower corner) drop one, and the declared 2 Hz with the rest refitted was 0.90 nats behind
    (the truth's corner, 2 Hz); started at ``f_min`` the frame's coverage is the same."""
    L = fit.L
    for j, p in enumerate(fit.prior_models):
        i = L.index(f"ln_flo{j}")
        if p.kind != "bandpass" or not p.band[0] < fit.f_min \
                or abs(fit.theta[i] - np.log(p.band[0])) < 1e-6:
            continue
        s = L.index(f"ln_span{j}")
        th = fit.theta.copy()
        # ln f_hi = ln f_lo + ln span kept; ln f_lo = the declaration's
        th[s], th[i] = th[i] + th[s] - np.log(p.band[0]), np.log(p.band[0])
        th, v = optimise(fit.W, L, th, [k for k in range(L.size) if k != i])
        if v < fit.nll + LR_KEEP:
            say(f"force {j + 1}: the declared corner {p.band[0]:.3g} Hz kept ({v - fit.nll:+.2f} "
                "nats against the fit's; the records do not tell it)")
            L.lo[i] = L.hi[i] = th[i]  # held there through the joint fit (fixed by its bounds)
            fit.take(v, th, L)
