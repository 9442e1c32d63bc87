"""The daemon's per-sample state: one object, its fields in three typed arrays (float64, int64,
uint8).

A compiled call pays for every array argument it is given (numba's type check and unboxing,
several times dearer after a 1 ms sleep has cooled the caches: 3-7 us for 6 arrays, 9-12 us
for 27 on the development VM). The ring, the alignment history, the estimate rows by slot, the
two latency windows and the counters are therefore fields of three arrays, and
:func:`edge.daemon.fastpath._sample` receives three arguments for all of them.

:data:`FIELDS` is the one table of the fields: name, array, shape. A shape names sizes of
the header (:data:`SIZES`: ring capacity, channels, ...) or the length of a small record
whose items are named here too (:data:`RSTATE_ITEMS`, :data:`COUNT_ITEMS`,
:data:`LAT_ITEMS`, :data:`TIMESPEC_ITEMS`). Python sees every field as a named attribute of
:class:`Arena` (``arena.values``, ``arena.sV``...), an ordinary NumPy view made once;
compiled code takes the same view with :func:`edge.daemon.fastpath._field`, whose length it
reads from the arrays themselves (the ``lengths`` field), never from a literal.

Layout (:func:`edge.packing.pack`): ``i8[0:len(SIZES)]`` holds the sizes, ``i8[_OFF +
field]`` the element offset of each field in its array, the ``lengths`` field the element
count of every field.
"""

from __future__ import annotations

import numpy as np

from edge.packing import OFF, pack

#: the header: sizes the shapes below name, in ``i8[0:len(SIZES)]``
SIZES = ("cap", "nch", "nf", "nout", "block", "delay", "latw")
H_CAP, H_NCH, H_NF, H_NOUT, H_BLOCK, H_DELAY, H_LATW = range(len(SIZES))
_OFF = OFF  # i8[_OFF + field] = offset of the field in its array (edge.packing)

#: RSTATE: the ring's producer/consumer state (edge.daemon.ring.Ring)
RSTATE_ITEMS = ("head", "tail", "adc", "gap_pending", "lost", "overruns")
HEAD, TAIL, ADC, GAP_PENDING, LOST, OVERRUNS = range(len(RSTATE_ITEMS))
#: LAT_DS, LAT_RS: a latency window's state (edge.daemon.health.LatencyStats)
LAT_ITEMS = ("n", "max")
LAT_N, LAT_MAX = range(len(LAT_ITEMS))
#: COUNT: the daemon's counters and the DRDY clock offset
COUNT_ITEMS = ("processed", "estimates", "t_off", "t_off_known", "resets")
PROCESSED, ESTIMATES, T_OFF, T_OFF_KNOWN, RESETS = range(len(COUNT_ITEMS))
#: TS: a ``struct timespec`` (seconds, nanoseconds) the compiled clock fills
TIMESPEC_ITEMS = ("tv_sec", "tv_nsec")

#: The fields: (attribute name, array, shape). Shape entries name a size of :data:`SIZES`
#: (``h`` = delay + 1 samples of alignment history, ``ncol`` = nf + nout) or are lengths.
FIELDS = (
    ("values", "f8", ("cap", "nch")),         # ring: samples [channel units]
    ("F", "f8", ("block", "nf")),             # estimator output: forces of one block
    ("Z", "f8", ("block", "nout")),           # estimator output: virtual outputs
    ("sV", "f8", ("cap", "ncol")),            # estimate rows by ring slot
    ("rstate", "i8", (len(RSTATE_ITEMS),)),   # ring state (RSTATE_ITEMS)
    ("t_ns", "i8", ("cap",)),                 # ring: DRDY time [ns]
    ("seq", "i8", ("cap",)),                  # ring: ADC sample number
    ("stamp", "i8", ("cap",)),                # ring: time.monotonic_ns at ring entry
    ("hseq", "i8", ("h",)),                   # alignment history: seq
    ("ht", "i8", ("h",)),                     # alignment history: t_ns
    ("hcount", "i8", (1,)),                   # alignment: samples fed so far
    ("sseq", "i8", ("cap",)),                 # rows by slot: seq of the described sample
    ("st", "i8", ("cap",)),                   # rows by slot: its t_ns
    ("lat_d", "i8", ("latw",)),               # latency window DRDY -> ready [ns]
    ("lat_ds", "i8", (len(LAT_ITEMS),)),      # its state (LAT_ITEMS)
    ("lat_r", "i8", ("latw",)),               # latency window ring entry -> ready [ns]
    ("lat_rs", "i8", (len(LAT_ITEMS),)),      # its state
    ("count", "i8", (len(COUNT_ITEMS),)),     # counters (COUNT_ITEMS)
    ("ts", "i8", (len(TIMESPEC_ITEMS),)),     # the compiled clock's timespec
    ("flags", "u8", ("cap",)),                # ring: flags
    ("ef", "u8", ("block",)),                 # estimator output: flags
    ("hf", "u8", ("h",)),                     # alignment history: flags
    ("sf", "u8", ("cap",)),                   # rows by slot: flags
    ("sok", "u8", ("cap",)),                  # rows by slot: row ready (bool)
    ("lengths", "i8", ("nfields",)),          # element count of every field
)
(VALUES, F, Z, SV, RSTATE, T_NS, SEQ, STAMP, HSEQ, HT, HCOUNT, SSEQ, ST, LAT_D, LAT_DS, LAT_R,
 LAT_RS, COUNT, TS, FLAGS, EF, HF, SF, SOK, LENGTHS) = range(len(FIELDS))
#: the fields' names in field order (the attributes of an :class:`Arena`)
NAMES = tuple(name for name, _, _ in FIELDS)


class Arena:
    """The three arrays and their named views (attributes named as in :data:`FIELDS`).

    Parameters
    ----------
    capacity : int      ring slots
    nch, nf, nout : int channels, forces, virtual outputs
    block : int         estimator block (``[bundle] block``)
    delay : int         samples between a measurement and its estimate
    latency_window : int  latencies kept per window
    """

    def __init__(self, capacity: int, nch: int, nf: int, nout: int, block: int, delay: int,
                 latency_window: int):
        header = (int(capacity), int(nch), int(nf), int(nout), int(block), int(delay),
                  int(latency_window))
        size = dict(zip(SIZES, header), h=header[H_DELAY] + 1, ncol=nf + nout,
                    nfields=len(FIELDS))
        shapes = [tuple(size[d] if isinstance(d, str) else d for d in shape)
                  for _, _, shape in FIELDS]
        self.f8, self.i8, self.u8, views = pack(
            [(kind, shp, None) for (_, kind, _), shp in zip(FIELDS, shapes)], header)
        views[LENGTHS][:] = [int(np.prod(s)) for s in shapes]
        self._views = dict(enumerate(views))
        (self.capacity, self.nch, self.nf, self.nout, self.block, self.delay,
         self.latency_window) = header
        for f, name in enumerate(NAMES):  # named views: arena.values, arena.sV, ...
            setattr(self, name, self.view(f))

    def view(self, field: int) -> np.ndarray:
        """The NumPy view of ``field`` (:data:`SOK` as bool)."""
        v = self._views[field]
        return v.view(bool) if field == SOK else v

    @property
    def args(self) -> tuple:
        """``(f8, i8, u8)``: the arguments of the compiled calls."""
        return self.f8, self.i8, self.u8
