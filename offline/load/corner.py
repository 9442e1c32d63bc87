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
there unless the records' bins above ``f_min`` say otherwise.
"""

from __future__ import annotations


def lowest_corner(f_min: float, declared_lo: float) -> float:
    """The lowest band corner [Hz] of a force declared from ``declared_lo`` [Hz] in a fit of
    records whose lowest bin is ``f_min`` [Hz] (module docstring)."""
    # f_lo >= min(f_min, f_lo,declared)
    return min(float(f_min), float(declared_lo))
