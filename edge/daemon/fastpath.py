"""Compiled per-sample path of the daemon: sequence alignment and the fused estimation step.

Alignment (:func:`_align`), the one place where an estimate row meets the sample it
describes: the estimator's output row for the k-th sample fed to it (k counted from the
daemon's start, resets included) describes fed sample ``k - delay``. A circular history of
the last ``delay + 1`` fed samples' ``seq, t_ns, flags`` holds what the row needs; rows with
``k < delay`` predate the stream and describe nothing. The row, its ``seq``/``t_ns`` and its
flags (estimator flags | saturated, gap of the described sample) go to the ring slot of the
sample whose arrival completed it (``edge.daemon.loop``: published from there in blocks).

:func:`_step` is the whole per-sample work of the default configuration (``[bundle] block =
1``, estimation in the acquisition thread) in one compiled call: check the ring slot (a gap
or a non-finite channel returns 0 and leaves everything untouched: the Python path then
handles faults and resets), run the Tikhonov kernel (:func:`edge.estimator.kernel._process`)
on it and align the row. Nothing is allocated; no Python object is created per sample.

NumPy twins: ``tests/test_fastpath.py`` (the loop's former Python alignment).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from edge.estimator.estimator import Estimator
from edge.estimator.kernel import _process
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


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _step(i, rv, rseq, rt, rf, F1, Z1, ef1,
          blk_ptr, dat_ptr, A_data, Acoup, Gamma, Kx, Ky, E, x, xn, fs, zs, ybuf, fbuf,
          last, counters,
          hseq, ht, hf, hcount, sV, sseq, st, sf, sok, delay):  # pragma: no cover - compiled
    """Estimate and align ring slot ``i`` if it is a clean sample.

    Returns -1 (untouched: the slot carries the gap flag or a non-finite channel, the caller
    takes the general path) or the number of estimate rows attached (0 in warm-up, else 1).
    Arguments: the ring's arrays ``rv (capacity, nch)``, ``rseq, rt, rf``; one-row outputs
    ``F1 (1, nf), Z1 (1, nout), ef1 (1,)``; the estimator kernel's operator and state
    (:func:`edge.estimator.kernel._process`); the alignment state (:func:`_align`).
    """
    if rf[i] & _GAP:
        return -1
    for c in range(rv.shape[1]):
        if not np.isfinite(rv[i, c]):
            return -1
    _process(rv[i:i + 1], F1, Z1, ef1, blk_ptr, dat_ptr, A_data, Acoup, Gamma, Kx, Ky, E,
             x, xn, fs, zs, ybuf, fbuf, last, counters)
    return _align(F1, Z1, ef1, rseq[i:i + 1], rt[i:i + 1], rf[i:i + 1], i, hseq, ht, hf,
                  hcount, sV, sseq, st, sf, sok, delay)


def kernel_args(est) -> tuple | None:
    """The Tikhonov kernel's operator and state arrays of ``est`` in :func:`_step`'s order,
    or None when ``est`` is not the Tikhonov :class:`edge.estimator.Estimator` (the
    smoother has its own kernel: the daemon then calls ``est.process``)."""
    if type(est) is not Estimator:
        return None
    op = est.op
    return (op.blk_ptr, op.dat_ptr, op.A_data, op.Acoup, op.Gamma, op.Kx, op.Ky, op.E,
            est._x, est._xn, est._fs, est._zs, est._ybuf, est._fbuf, est._last,
            est._counters)
