"""The smoother's state, its level operators and its per-sample bookkeeping in three typed
arrays (:func:`edge.packing.pack`), so that one compiled call can run a sample.

:class:`edge.estimator.smoother.SmootherEstimator` keeps its whole per-sample state here
(the kernel's state, the load level tracker's sample count, the chain check's ring) and runs
the kernel through :func:`_smooth_packed` on both paths: its block method
(:meth:`~edge.estimator.smoother.SmootherEstimator.process`) and the daemon's compiled
per-sample call (:func:`edge.daemon.fastpath._sample_smooth`, through :func:`_fast_step`).
The per-sample rules are those of :func:`edge.estimator.smoother_kernel._smooth`, written
once; this module only finds its arguments in the arrays.

The Python side of the smoother decides between samples: the load level tracker at the end
of its window, the start-up std (each row its own), the chain check's evaluation, a reset
after a non-finite state. :meth:`SmootherEstimator._set_budget` writes, after every block,
how many samples the compiled step may take before one of these is due (``TICK[BUDGET]``);
:func:`_fast_step` counts it down and the daemon's call returns to Python at 0.

Layout: header ``i8[0:4]`` = (state fields, fields per level, levels, nq); field ``k`` at
offset ``i8[OFF + k]``, its shape (up to three dimensions) in the ``DIMS`` field. Level
``l``'s operator field ``j`` is field ``NSTATE + l * NOP + j``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from edge.estimator.chain_check import _push
from edge.estimator.smoother_kernel import _smooth
from edge.packing import OFF, pack

# state fields (the kernel's state, its output row, the counters of the Python side)
(X, XN, E, ERING, ZRING, FRING, LAST, NISRING, NIS, COUNTERS, BSTATE, BRING, BSUM, EPS,
 LAG1RING, EPS_PREV, QROW, RESETS, TICK, CRING, CST, DIMS) = range(22)
NSTATE = 22
# fields of one level's operator
(AM, AD, CLT, CR, AFT, FTSPAN, AK, AKT, H, HSPAN, CQ, QSPAN, G, SINV, THR, WT, BAND_BA,
 BAND_GAIN, BAND_THR) = range(19)
NOP = 19
_OP_ATTR = ("Am", "Ad", "ClT", "Cr", "AfT", "fT_span", "Ak", "AKT", "H", "h_span", "Cq", "q_span",
            "G", "Sinv", None, "Wt", "band_ba", "band_gain", "band_threshold")
_OP_INT = (FTSPAN, HSPAN, QSPAN)
#: TICK: the level tracker's samples since its last decision, the compiled step's budget,
#: a reset pending after a non-finite state on the compiled step, the level, flags every row
#: carries (the chain check's verdict), whether the tracker counts samples
TICK_ITEMS = ("since", "budget", "pending", "level", "extra", "track")
SINCE, BUDGET, PENDING, LEVEL, EXTRA, TRACK = range(len(TICK_ITEMS))


class SmootherPack:
    """The arrays of a smoother with operators ``ops`` (one per load level, the same layout),
    ``nch`` channels, ``chain_n`` rows of chain-check ring (0: none). :meth:`view` gives each
    field as a NumPy view; :attr:`args` the three arrays."""

    def __init__(self, ops, chain_n: int = 0):
        op = ops[0]
        ns, nch, nq, Lp1 = op.n_state, op.n_channels, op.Cq.shape[0], op.lag + 1
        W, nb = op.nis_window, op.band_ba.shape[0]
        state = [("f8", (ns,)), ("f8", (ns,)), ("f8", (nch,)), ("f8", (Lp1, nch)),
                 ("f8", (Lp1, nq)), ("u8", (Lp1,)), ("f8", (nch,)), ("f8", (W,)),
                 ("f8", (2,)), ("i8", (3,)), ("f8", (nb, nch, 2)), ("f8", (W, nb)),
                 ("f8", (nb,)), ("f8", (nch,)), ("f8", (W,)), ("f8", (nch,)), ("f8", (1, nq)),
                 ("i8", (1,)), ("i8", (len(TICK_ITEMS),)), ("f8", (chain_n, nch)),
                 ("i8", (4,)), ("i8", ((NSTATE + NOP * len(ops)) * 3,))]
        fields = [(k, s, None) for k, s in state]
        for o in ops:
            for j, name in enumerate(_OP_ATTR):
                a = (np.array([o.nis_threshold, o.nis_threshold_low]) if j == THR
                     else np.asarray(getattr(o, name)))
                fields.append(("i8" if j in _OP_INT else "f8", a.shape, a))
        dims = np.ones((len(fields), 3), np.int64)
        for k, (_, s, _) in enumerate(fields):
            dims[k, :len(s)] = s
        self.f8, self.i8, self.u8, views = pack(fields, (NSTATE, NOP, len(ops), nq))
        views[DIMS][:] = dims.ravel()
        self._views = views

    def view(self, field: int) -> np.ndarray:
        return self._views[field]

    @property
    def args(self) -> tuple:
        """``(f8, i8, u8)``: the arguments of :func:`_smooth_packed` and :func:`_fast_step`."""
        return self.f8, self.i8, self.u8


@njit(cache=True)
def _d(i8, k):  # pragma: no cover - compiled
    """Offset and shape of field ``k``."""
    o = i8[OFF + DIMS] + 3 * k
    return i8[OFF + k], i8[o], i8[o + 1], i8[o + 2]


@njit(cache=True)
def _v1(a, i8, k):  # pragma: no cover - compiled
    o, d0, d1, d2 = _d(i8, k)
    return a[o:o + d0 * d1 * d2]


@njit(cache=True)
def _v2(a, i8, k):  # pragma: no cover - compiled
    o, d0, d1, _ = _d(i8, k)
    return a[o:o + d0 * d1].reshape((d0, d1))


@njit(cache=True)
def _v3(a, i8, k):  # pragma: no cover - compiled
    o, d0, d1, d2 = _d(i8, k)
    return a[o:o + d0 * d1 * d2].reshape((d0, d1, d2))


@njit(cache=True, nogil=True)
def _smooth_packed(Y, Q, flags, f8, i8, u8):  # pragma: no cover - compiled
    """:func:`edge.estimator.smoother_kernel._smooth` over the block ``Y`` (nb, nch) with the
    state and the current level's operator (``TICK[LEVEL]``) of a :class:`SmootherPack`;
    ``Q`` (nb, nq), ``flags`` (nb,) out. Returns what the kernel returns."""
    b = NSTATE + _v1(i8, i8, TICK)[LEVEL] * NOP
    thr = _v1(f8, i8, b + THR)
    return _smooth(Y, Q, flags, _v2(f8, i8, b + AM), _v2(f8, i8, b + AD),
                   _v2(f8, i8, b + CLT), _v2(f8, i8, b + CR), _v2(f8, i8, b + AFT),
                   _v2(i8, i8, b + FTSPAN), _v2(f8, i8, b + AK), _v2(f8, i8, b + AKT),
                   _v2(f8, i8, b + H), _v2(i8, i8, b + HSPAN), _v2(f8, i8, b + CQ),
                   _v2(i8, i8, b + QSPAN), _v3(f8, i8, b + G), _v2(f8, i8, b + SINV),
                   _v1(f8, i8, X), _v1(f8, i8, XN), _v1(f8, i8, E), _v2(f8, i8, ERING),
                   _v2(f8, i8, ZRING), _v1(u8, i8, FRING), _v1(f8, i8, LAST),
                   _v1(f8, i8, NISRING), _v1(f8, i8, NIS), thr[0], thr[1],
                   _v1(i8, i8, COUNTERS), _v2(f8, i8, b + WT), _v2(f8, i8, b + BAND_BA),
                   _v1(f8, i8, b + BAND_GAIN), _v1(f8, i8, b + BAND_THR),
                   _v3(f8, i8, BSTATE), _v2(f8, i8, BRING), _v1(f8, i8, BSUM),
                   _v1(f8, i8, EPS), _v1(f8, i8, LAG1RING), _v1(f8, i8, EPS_PREV))


@njit(cache=True, nogil=True)
def _fast_step(y, f8, i8, u8, ef):  # pragma: no cover - compiled
    """One sample ``y`` (1, nch) on the compiled path, when ``TICK[BUDGET] > 0``: what
    :meth:`edge.estimator.smoother.SmootherEstimator.process` does for a one-row block while
    none of its Python decisions is due. The kernel (:func:`_smooth_packed`) writes the
    forces and outputs to the ``QROW`` field (returned, (1, nq)) and the flags to ``ef``
    (1,); the tracker's sample count, the chain check's ring (:func:`edge.estimator.
    chain_check._push`) and the rows' extra flags follow. A non-finite state counts a reset
    and leaves it pending (``TICK[PENDING]``, budget 0): the estimator makes it at its next
    Python call, as its block method would have right after this row."""
    t = _v1(i8, i8, TICK)
    Q = _v2(f8, i8, QROW)
    stop = _smooth_packed(y, Q, ef, f8, i8, u8)
    t[BUDGET] -= 1
    if t[TRACK] != 0:
        t[SINCE] += 1
    ring = _v2(f8, i8, CRING)
    if ring.shape[0] > 0:
        _push(y, 0, ring, _v1(i8, i8, CST))
    if stop != 0:
        _v1(i8, i8, RESETS)[0] += 1
        t[PENDING] = 1
        t[BUDGET] = 0
    else:
        ef[0] = ef[0] | np.uint8(t[EXTRA])
    return Q
