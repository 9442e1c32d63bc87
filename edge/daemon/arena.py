"""The daemon's per-sample state packed into three typed arrays (float64, int64, uint8).

A compiled call pays for every array argument it is given (numba's type check and unboxing,
several times dearer after a 1 ms sleep has cooled the caches: 3-7 us for 6 arrays, 9-12 us
for 27 on the development VM). The ring, the alignment history, the estimate rows by slot, the
two latency windows and the counters are therefore fields of three arrays, and
:func:`edge.daemon.fastpath._sample` receives three arguments for all of them. Python sees
every field as an ordinary NumPy view (:attr:`Arena.view`), made once; compiled code takes
the same view with :func:`edge.daemon.fastpath._field`.

Layout: ``i8[0:_OFF]`` holds the sizes (``H_*``), ``i8[_OFF + field]`` the element offset of
each field in its array (:func:`edge.packing.pack`).
"""

from __future__ import annotations

import numpy as np

from edge.packing import OFF, pack

# int64 header: sizes
H_CAP, H_NCH, H_NF, H_NOUT, H_BLOCK, H_DELAY, H_LATW = range(7)
_OFF = OFF  # i8[_OFF + field] = offset of the field in its array (edge.packing)

# fields (float64 | int64 | uint8)
(VALUES, F, Z, SV,
 RSTATE, T_NS, SEQ, STAMP, HSEQ, HT, HCOUNT, SSEQ, ST, LAT_D, LAT_DS, LAT_R, LAT_RS, COUNT, TS,
 FLAGS, EF, HF, SF, SOK) = range(24)
_N_FIELDS = 24
#: the fields' names as attributes of an :class:`Arena` (in field order)
NAMES = ("values", "F", "Z", "sV", "rstate", "t_ns", "seq", "stamp", "hseq", "ht", "hcount",
         "sseq", "st", "lat_d", "lat_ds", "lat_r", "lat_rs", "count", "ts", "flags", "ef", "hf",
         "sf", "sok")

# RSTATE: the ring's producer/consumer state (edge.daemon.ring.Ring)
HEAD, TAIL, ADC, GAP_PENDING, LOST, OVERRUNS = range(6)
# LAT_DS, LAT_RS: a latency window's state (edge.daemon.health.LatencyStats)
LAT_N, LAT_MAX = range(2)
# COUNT: the daemon's counters and the DRDY clock offset
PROCESSED, ESTIMATES, T_OFF, T_OFF_KNOWN, RESETS = range(5)


class Arena:
    """The three arrays and their named views.

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
        cap, h, w = int(capacity), int(delay) + 1, int(latency_window)
        ncol = nf + nout
        shapes = {  # field: (array, shape)
            VALUES: ("f8", (cap, nch)), F: ("f8", (block, nf)), Z: ("f8", (block, nout)),
            SV: ("f8", (cap, ncol)),
            RSTATE: ("i8", (6,)), T_NS: ("i8", (cap,)), SEQ: ("i8", (cap,)),
            STAMP: ("i8", (cap,)), HSEQ: ("i8", (h,)), HT: ("i8", (h,)), HCOUNT: ("i8", (1,)),
            SSEQ: ("i8", (cap,)), ST: ("i8", (cap,)), LAT_D: ("i8", (w,)),
            LAT_DS: ("i8", (2,)), LAT_R: ("i8", (w,)), LAT_RS: ("i8", (2,)),
            COUNT: ("i8", (5,)), TS: ("i8", (2,)),
            FLAGS: ("u8", (cap,)), EF: ("u8", (block,)), HF: ("u8", (h,)), SF: ("u8", (cap,)),
            SOK: ("u8", (cap,)),
        }
        self.f8, self.i8, self.u8, views = pack(
            [(*shapes[f], None) for f in range(_N_FIELDS)], (cap, nch, nf, nout, block, delay, w))
        self._views = dict(enumerate(views))
        self.capacity, self.nch, self.nf, self.nout = cap, nch, nf, nout
        self.block, self.delay, self.latency_window = block, delay, w
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
