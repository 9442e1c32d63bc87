"""A second start of the load fit from the declaration's shape, before its joint stage.

The penalised Whittle likelihood (:mod:`offline.load.whittle`) of a force's band corners,
tilt and roll-off orders has local optima, and the staged fit of :mod:`offline.load.learn`
can end in one. On the plate of ``benchmarks/load_user`` (one force, flat 10-250 Hz with a
source resonance at 140 Hz, 5 x its floor) stage 3 has no peak yet and matches the
resonance's power by moving the upper corner onto it and tilting the band up to its bound
(4.3-136 Hz, tilt -2); the peak found in stage 5 does not take the tilt back, and the joint
fit stays there: 10x too little force at 8-20 Hz, where the accelerometers see nothing
above their noise, so the stated std of the force was 1.3-1.5x too narrow (1-sigma coverage
53-58 %). The same records give the true spectrum 157 nats more likelihood. On the clamped
beam (two forces) the fit without source components ended 660 nats short of the start
below, with a flat spectrum down to 1 Hz.

So once the fit's peaks (or source components) are in, it starts again from the
declaration's corners and tilt, keeping each force's fitted level, peaks and roll-off
orders, and once more with the declaration's orders as well; the noise, correlation and
components stay as fitted. Every parameter is free in these starts; the one of lowest
penalised ``-log L``, the fit's own result included, goes on to the joint fit (plate: band
9.0-254 Hz, tilt +0.13, the peak at 140.3 Hz).
"""

from __future__ import annotations

from dataclasses import replace

from offline.load.corner import start_in_records


def declared_shapes(models, prior_models) -> list:
    """The trial force models of the restart: ``[(models), ...]``, each force at its fitted
    level and peaks with the declaration's band and tilt, first with its fitted roll-off
    orders, then with the declared ones (left out where they are the same). A force whose
    declaration is not a band-pass model (a random walk) keeps its fitted shape."""
    def shaped(m, p, orders):
        if p.kind != "bandpass":
            return m
        o = orders if orders is not None else p
        return replace(m, band=tuple(p.band), tilt=p.tilt, order=o.order,
                       hp_order=o.hp_order, lp_order=o.lp_order)
    own = [shaped(m, p, m) for m, p in zip(models, prior_models)]
    declared = [shaped(m, p, None) for m, p in zip(models, prior_models)]
    same = all(a.orders == b.orders for a, b in zip(own, declared))
    return [own] if same else [own, declared]


def restart_from_declaration(fit, optimise, say) -> None:
    """Module docstring: ``fit`` (:class:`offline.load.learn._Fit`) takes the best of its own
    state and the joint optimisations (``optimise(W, L, theta) -> (theta, nll)``) from
    :func:`declared_shapes`."""
    say("the shape again from the declaration's")
    best = (fit.nll, fit.theta, fit.L)
    for trial in declared_shapes(fit.models, fit.prior_models):
        Lt, tt = fit.relayout(trial, fit.noise, fit.corr, fit.comps)
        # from the records' band: a declared corner below it is tried alone (corner.py)
        tt, v = optimise(fit.W, Lt, start_in_records(Lt, tt, fit.f_min))
        if v < best[0]:  # (a NaN or an overflow, inf, is not kept)
            best = (v, tt, Lt)
    fit.take(*best)
