"""Calling a numba kernel without its per-call type dispatch."""

from __future__ import annotations

from numba import typeof


def direct(dispatcher, args: tuple):
    """The compiled entry point of ``dispatcher`` for exactly the types of ``args``, or the
    dispatcher itself where numba does not expose one.

    A numba dispatcher works out the type of every argument on each call to choose the
    compiled version (about 2.5 us of the 3.5 us a 6-array call costs after a 1 ms sleep on
    the development VM; ``benchmarks/daemon_costs.py``). The entry point skips that choice,
    not the unboxing: it must only be called with arguments of the same types as ``args``
    (the daemon's argument tuples are built once, from arrays of fixed dtype and ndim).
    """
    sig = tuple(typeof(a) for a in args)
    try:
        dispatcher.compile(sig)  # loaded from numba's cache, or compiled, once
        ep = dispatcher.overloads[sig].entry_point
    except (AttributeError, KeyError, TypeError):  # another numba: the plain call
        return dispatcher
    return ep if callable(ep) else dispatcher
