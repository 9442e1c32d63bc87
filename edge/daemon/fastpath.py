"""Compiled per-sample path of the daemon: sequence alignment and the per-sample call.

Alignment (:func:`_align`), the one place where an estimate row meets the sample it
describes: the estimator's output row for the k-th sample fed to it (k counted from the
daemon's start, resets included) describes fed sample ``k - delay``. A circular history of
the last ``delay + 1`` fed samples' ``seq, t_ns, flags`` holds what the row needs; rows with
``k < delay`` predate the stream and describe nothing. The row, its ``seq``/``t_ns`` and its
flags (estimator flags | saturated, gap of the described sample) go to the ring slot of the
sample whose arrival completed it (``edge.daemon.loop``: published from there in blocks).

:func:`_sample` is the whole per-sample work of a clean sample in one compiled call: stage,
estimate (the Tikhonov kernel on the estimator's packed arrays), align, the two latency
stores, publish. Nothing is allocated; no Python object is created per sample.
:func:`_sample_smooth` is the same for the Kalman smoother: its estimate is the smoother's
own compiled step (:func:`edge.estimator.smoother_pack._fast_step`, the kernel
:func:`edge.estimator.smoother_kernel._smooth` on its packed state, the one place of its
per-sample rules), and it returns -2 to the general path wherever the smoother's Python side
is due (a countdown the smoother keeps in its arrays). :func:`fast_call` picks one of them.

NumPy twins: ``tests/test_fastpath.py``.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np
from numba import njit, types

from edge.daemon.arena import (_OFF, ADC, COUNT, EF, ESTIMATES, F, FLAGS, GAP_PENDING, H_CAP,
                               H_DELAY, H_NCH, H_NF, H_NOUT, HCOUNT, HEAD, HF, HSEQ, HT, LAT_D,
                               LAT_DS, LAT_MAX, LAT_N, LAT_R, LAT_RS, LENGTHS, PROCESSED, RESETS,
                               RSTATE, SEQ, SF, SOK, SSEQ, ST, STAMP, SV, T_NS, T_OFF,
                               T_OFF_KNOWN, TAIL, TS, VALUES, Z)
from edge.estimator.estimator import Estimator
from edge.estimator.packed import _process_packed, _reset_packed
from edge.estimator.smoother import SmootherEstimator
from edge.estimator.smoother_pack import BUDGET as _BUDGET
from edge.estimator.smoother_pack import TICK as _TICK
from edge.estimator.smoother_pack import _fast_step
from edge.flags import FLAG_GAP, FLAG_SATURATED

_SAT_GAP = np.uint8(FLAG_SATURATED | FLAG_GAP)
_GAP = np.uint8(FLAG_GAP)


@njit(cache=True, nogil=True)
def _align(F, Z, ef, seq, t_ns, fl, slot0, hseq, ht, hf, hcount, sV, sseq, st, sf, sok,
           delay):  # pragma: no cover - compiled
    """Attach estimate rows to the samples they describe (in place; returns rows attached).

    Parameters
    ----------
    F : float64 (n, nf), Z : float64 (n, nout), ef : uint8 (n,)
        Estimator output rows of the n samples just fed (in feeding order).
    seq, t_ns : int64 (n,), fl : uint8 (n,)
        Sequence number, DRDY time [ns] and flags of those samples.
    slot0 : int
        Ring slot of the first of them (row j goes to slot ``slot0 + j``).
    hseq, ht : int64 (delay + 1,), hf : uint8 (delay + 1,)
        Circular history of fed samples (in/out).
    hcount : int64 (1,)
        Samples fed so far (in/out).
    sV : float64 (capacity, nf + nout), sseq, st : int64 (capacity,), sf : uint8, sok : bool
        Out: estimate rows by ring slot.
    delay : int
        Samples between a measurement and its estimate.
    """
    n = F.shape[0]
    nf = F.shape[1]
    nout = Z.shape[1]
    H = hseq.shape[0]
    k = hcount[0]
    m = 0
    for j in range(n):
        p = k % H
        hseq[p] = seq[j]
        ht[p] = t_ns[j]
        hf[p] = fl[j]
        if k >= delay:
            # row of fed sample k describes fed sample k - delay
            q = (k - delay) % H
            s = slot0 + j
            for c in range(nf):
                sV[s, c] = F[j, c]
            for c in range(nout):
                sV[s, nf + c] = Z[j, c]
            # eflags = estimator flags | (saturated, gap) of the described sample
            sf[s] = ef[j] | (hf[q] & _SAT_GAP)
            sseq[s] = hseq[q]
            st[s] = ht[q]
            sok[s] = True
            m += 1
        k += 1
    hcount[0] = k
    return m


def packed_args(est) -> tuple | None:
    """The Tikhonov estimator's packed operator and state ``(f8, i8, u8)`` (the last three
    arguments of :func:`_sample`), or None (not the Tikhonov estimator)."""
    return est.packed.args if type(est) is Estimator else None


def fast_call(est) -> tuple:
    """``(call, estimator arrays)``: the compiled per-sample call that serves ``est`` and its
    last three arguments (:func:`_sample` for the Tikhonov estimator, :func:`_sample_smooth`
    for the Kalman smoother), or ``(None, None)`` (another estimator: the general path)."""
    if type(est) is Estimator:
        return _sample, est.packed.args
    if type(est) is SmootherEstimator:
        return _sample_smooth, est.pack.args
    return None, None


# ----------------------------------------------------------------- one compiled call per sample
#: the compiled clock reads CLOCK_MONOTONIC (what ``time.monotonic_ns`` reads on Linux) into a
#: ``struct timespec`` of two C longs: available where those are int64 (64-bit Linux)
CLOCK_OK = sys.platform.startswith("linux") and ctypes.sizeof(ctypes.c_long) == 8
_CLOCK_MONOTONIC = 1  # <linux/time.h>
# resolved by name when the kernel is loaded (libc is in the process), so numba's cache keeps it
_clock_gettime = types.ExternalFunction("clock_gettime", types.int32(types.int32, types.intp))


@njit(cache=True)
def _field(a, i8, field):  # pragma: no cover - compiled
    """Arena field ``field`` (:mod:`edge.daemon.arena`) in its array ``a`` (``f8``, ``i8`` or
    ``u8``), as a flat view: offset ``i8[_OFF + field]``, length from the arena's ``lengths``
    field (:data:`edge.daemon.arena.LENGTHS`)."""
    o = i8[_OFF + field]
    return a[o:o + i8[i8[_OFF + LENGTHS] + field]]


@njit(cache=True)
def _now_ns(ts):  # pragma: no cover - compiled
    """``time.monotonic_ns()`` from compiled code; ``ts``: int64 (2,), the ``timespec``."""
    _clock_gettime(_CLOCK_MONOTONIC, ts.ctypes.data)
    return ts[0] * 1_000_000_000 + ts[1]


@njit(cache=True)
def _lat_add(buf, state, lat):  # pragma: no cover - compiled
    """:meth:`edge.daemon.health.LatencyStats.add` of one latency ``lat`` [ns]: window
    ``buf`` (w,), ``state`` ``(n, max)`` (:data:`LAT_N`, :data:`LAT_MAX`)."""
    n = state[LAT_N]
    buf[n % buf.shape[0]] = lat
    if lat > state[LAT_MAX]:
        state[LAT_MAX] = lat
    state[LAT_N] = n + 1


@njit(cache=True)
def _done(f8, i8, u8, i, n, now):  # pragma: no cover - compiled
    """The end of the per-sample work of ring slots ``i .. i+n-1`` (estimated and aligned at
    ``now`` [ns], ``time.monotonic_ns``), on both paths: the two latency stores
    (:func:`_lat_add`: ring entry -> now and, once the DRDY clock offset is known, DRDY ->
    now) and the ``processed`` counter. ``f8, i8, u8``: the daemon's arena."""
    count = _field(i8, i8, COUNT)
    stamp, t_ns = _field(i8, i8, STAMP), _field(i8, i8, T_NS)
    lat_r, lat_rs = _field(i8, i8, LAT_R), _field(i8, i8, LAT_RS)
    lat_d, lat_ds = _field(i8, i8, LAT_D), _field(i8, i8, LAT_DS)
    for s in range(i, i + n):
        _lat_add(lat_r, lat_rs, now - stamp[s])
        if count[T_OFF_KNOWN] != 0:
            _lat_add(lat_d, lat_ds, now - (t_ns[s] + count[T_OFF]))
    count[PROCESSED] += n


@njit(cache=True)  # the GIL stays held: the loop thread never sees a half-written slot
def _sample(f8, i8, u8, ef8, ei8, eu8):  # pragma: no cover - compiled
    """The whole per-sample work of the default configuration on the sample just read into
    the ring's next slot (``head % capacity``), in place.

    Stage (``seq`` = ADC sample number, ``stamp_ns`` = ring entry), estimate
    (:func:`edge.estimator.kernel._process`), align (:func:`_align`), the latencies and
    ``processed`` (:func:`_done`, as the general path), then publish (``head += 1``). ``f8, i8, u8``: the daemon's
    :class:`edge.daemon.arena.Arena`; ``ef8, ei8, eu8``: the Tikhonov estimator's operator
    and state (:class:`edge.estimator.packed.Packed`). Six array arguments: numba's
    dispatch costs per argument.

    A gap (the sample's flag, or samples lost before it: the ring's pending gap) resets the
    estimator before the sample, as the general path does (``resets`` counted).

    Returns
    -------
    int
        -2: a non-finite channel (the general path counts faults): nothing was changed.
        Else the sample is published and the result is the next sample's slot, or -1 when
        the ring is full.
    """
    i = _clean(f8, i8)
    if i < 0:
        return -2
    t0 = _now_ns(_field(i8, i8, TS))
    nf, nout = i8[H_NF], i8[H_NOUT]
    ring = _field(i8, i8, RSTATE)  # head, tail, ADC count, gap pending, ...
    count = _field(i8, i8, COUNT)
    flags = _field(u8, i8, FLAGS)
    if ring[GAP_PENDING] != 0:  # samples were lost before this one (Ring.stage)
        flags[i] |= _GAP
        ring[GAP_PENDING] = 0
    if flags[i] & _GAP:  # the stream is discontinuous: estimator reset before the sample
        _reset_packed(ef8, ei8, eu8)
        count[RESETS] += 1
    _stage(i8, i, t0)
    # the first row of the block-sized estimator outputs
    Fv = _field(f8, i8, F)[:nf].reshape((1, nf))
    Zv = _field(f8, i8, Z)[:nout].reshape((1, nout))
    ef = _field(u8, i8, EF)[:1]
    _process_packed(_row(f8, i8, i), Fv, Zv, ef, ef8, ei8, eu8)
    return _publish(f8, i8, u8, i, Fv, Zv, ef, t0)


@njit(cache=True)
def _clean(f8, i8):  # pragma: no cover - compiled
    """The ring's next slot (``head % capacity``), or -1 when a channel of its sample is not
    finite (the general path counts faults)."""
    cap, nch = i8[H_CAP], i8[H_NCH]
    i = _field(i8, i8, RSTATE)[HEAD] % cap
    y = _field(f8, i8, VALUES)[i * nch:(i + 1) * nch]
    for c in range(nch):
        if not np.isfinite(y[c]):
            return -1
    return i


@njit(cache=True)
def _row(f8, i8, i):  # pragma: no cover - compiled
    """The sample of ring slot ``i`` as a (1, nch) view."""
    nch = i8[H_NCH]
    return _field(f8, i8, VALUES)[i * nch:(i + 1) * nch].reshape((1, nch))


@njit(cache=True)
def _stage(i8, i, t0):  # pragma: no cover - compiled
    """Stage slot ``i`` (:meth:`edge.daemon.ring.Ring.stage` of a clean sample): ``seq`` =
    the ADC sample number, ``stamp_ns`` = ``t0``, its ring entry [ns]."""
    ring = _field(i8, i8, RSTATE)
    _field(i8, i8, SEQ)[i] = ring[ADC]
    ring[ADC] += 1
    _field(i8, i8, STAMP)[i] = t0


@njit(cache=True)
def _publish(f8, i8, u8, i, Fv, Zv, ef, t0):  # pragma: no cover - compiled
    """The end of the compiled per-sample call of slot ``i`` whose estimator row is ``Fv,
    Zv, ef``: align (:func:`_align`), the latencies and ``processed`` (:func:`_done`),
    ``estimates``, publish (``head += 1``). Returns the next sample's slot, or -1 when the
    ring is full."""
    cap, nf, nout = i8[H_CAP], i8[H_NF], i8[H_NOUT]
    ring = _field(i8, i8, RSTATE)
    seq, t_ns, flags = _field(i8, i8, SEQ), _field(i8, i8, T_NS), _field(u8, i8, FLAGS)
    m = _align(Fv, Zv, ef, seq[i:i + 1], t_ns[i:i + 1], flags[i:i + 1], i,
               _field(i8, i8, HSEQ), _field(i8, i8, HT), _field(u8, i8, HF),
               _field(i8, i8, HCOUNT), _field(f8, i8, SV).reshape((cap, nf + nout)),
               _field(i8, i8, SSEQ), _field(i8, i8, ST), _field(u8, i8, SF),
               _field(u8, i8, SOK), i8[H_DELAY])
    # estimated and aligned: the latency of this sample ends now
    _done(f8, i8, u8, i, 1, _now_ns(_field(i8, i8, TS)))
    _field(i8, i8, COUNT)[ESTIMATES] += m
    head = ring[HEAD] + 1
    ring[HEAD] = head  # published: the slot was complete before head moved
    if head - ring[TAIL] < cap:
        return head % cap
    return -1


@njit(cache=True)  # the GIL stays held: the loop thread never sees a half-written slot
def _sample_smooth(f8, i8, u8, sf8, si8, su8):  # pragma: no cover - compiled
    """:func:`_sample` for the Kalman smoother: ``sf8, si8, su8`` its
    :class:`edge.estimator.smoother_pack.SmootherPack`. The estimate is the smoother's own
    compiled step (:func:`edge.estimator.smoother_pack._fast_step`: the kernel on the packed
    state, the level tracker's count, the chain check's ring); it runs while the
    smoother's budget of samples without a Python decision lasts.

    Returns -2 with nothing changed when the sample needs the general path: a non-finite
    channel, a gap (the smoother's reset is Python), or the budget spent (the level tracker,
    the start-up std, the chain check or a pending reset is due). Else as :func:`_sample`."""
    i = _clean(f8, i8)
    if i < 0 or _field(si8, si8, _TICK)[_BUDGET] <= 0:
        return -2
    if _field(i8, i8, RSTATE)[GAP_PENDING] != 0 or _field(u8, i8, FLAGS)[i] & _GAP:
        return -2
    t0 = _now_ns(_field(i8, i8, TS))
    _stage(i8, i, t0)
    nf, nout = i8[H_NF], i8[H_NOUT]
    Fv = _field(f8, i8, F)[:nf].reshape((1, nf))
    Zv = _field(f8, i8, Z)[:nout].reshape((1, nout))
    ef = _field(u8, i8, EF)[:1]
    Q = _fast_step(_row(f8, i8, i), sf8, si8, su8, ef)
    for c in range(nf):  # the smoother's row: forces then outputs
        Fv[0, c] = Q[0, c]
    for c in range(nout):
        Zv[0, c] = Q[0, nf + c]
    return _publish(f8, i8, u8, i, Fv, Zv, ef, t0)
