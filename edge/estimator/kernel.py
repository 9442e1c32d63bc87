"""Compiled estimator kernel (numba): the fixed-lag Tikhonov filter on preallocated arrays.

Per input sample (see :mod:`edge.estimator.operator` for the derivation)::

    window  <- y (non-finite channels hold their last finite value; flag bit 0)
    f       = Ky @ window - Kx @ x          (Tikhonov force of the oldest window step)
    x       = A x + Gamma f                 (A block diagonal + coupling to the last states)
    z       = E x                           (virtual outputs)
    flag    |= FLAG_OVERFLOW if any f or z is not finite

Nothing is allocated, logged or locked per sample; ``nogil=True`` lets the daemon run it beside
its I/O threads. The NumPy twin is :class:`edge.estimator.reference.ReferenceEstimator`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from edge.estimator.hold import _hold_row
from edge.flags import (FLAG_HELD, FLAG_OVERFLOW, FLAG_SATURATED,  # noqa: F401 (re-exported)
                        FLAG_WARMUP)


# reassociation and FMA contraction let LLVM vectorise the dot products; no "nnan"/"ninf"
# (the NaN test below must stay a real test)
_FASTMATH = {"reassoc", "contract"}


@njit(cache=True, nogil=True, fastmath=_FASTMATH)
def _process(Y, F, Z, flags, blk_ptr, dat_ptr, A_data, Acoup, Gamma, Kx, Ky, E,
             x, xn, fs, zs, ybuf, fbuf, last, counters):  # pragma: no cover - compiled
    """Run the estimator over a block of samples.

    Parameters
    ----------
    Y : float64 (nb, nch)            measurements, one row per sample
    F : float64 (nb, nf)             out: identified forces (NaN during warm-up)
    Z : float64 (nb, nout)           out: virtual outputs (NaN during warm-up)
    flags : uint8 (nb,)              out: FLAG_* bits of each estimate
    blk_ptr, dat_ptr, A_data         block-diagonal part of A (see StepOperator)
    Acoup : (ns, nc)                 A's coupling to the last nc states (0 columns: none)
    Gamma : (ns, nf), Kx : (nf, ns), Ky : (nf, L*nch), E : (nout, ns)
    x, xn : float64 (ns,)            state (in/out) and scratch
    fs : float64 (nf,), zs : float64 (nout,)   scratch
    ybuf : float64 (L, nch)          measurement ring; fbuf : uint8 (L,) its flags
    last : float64 (nch,)            last finite value per channel
    counters : int64 (1,)            number of samples seen so far
    """
    nb, nch = Y.shape
    nf = Gamma.shape[1]
    ns = x.shape[0]
    nout = E.shape[0]
    L = ybuf.shape[0]
    nblk = blk_ptr.shape[0] - 1
    nc = Acoup.shape[1]
    for j in range(nb):
        count = counters[0]
        slot = count % L
        flag = _hold_row(Y, j, last)
        for c in range(nch):
            ybuf[slot, c] = last[c]
        fbuf[slot] = flag
        count += 1
        counters[0] = count
        if count < L:
            for i in range(nf):
                F[j, i] = np.nan
            for i in range(nout):
                Z[j, i] = np.nan
            flags[j] = FLAG_WARMUP | flag
            continue
        oldest = count % L
        wflag = np.uint8(0)
        for p in range(L):
            wflag |= fbuf[(oldest + p) % L]
        # pass 1: f = Ky @ window - Kx @ x
        for i in range(nf):
            acc = 0.0
            for p in range(L):
                s = (oldest + p) % L
                base = p * nch
                for c in range(nch):
                    acc += Ky[i, base + c] * ybuf[s, c]
            for k in range(ns):
                acc -= Kx[i, k] * x[k]
            fs[i] = acc
            F[j, i] = acc
        # pass 2, block by block: xn = A x + Acoup x[tail] + Gamma f, and z = E xn on the fly
        for o in range(nout):
            zs[o] = 0.0
        for b in range(nblk):
            s0 = blk_ptr[b]
            m = blk_ptr[b + 1] - s0
            d0 = dat_ptr[b]
            for r in range(m):
                k = s0 + r
                acc = 0.0
                row = d0 + r * m
                for cc in range(m):
                    acc += A_data[row + cc] * x[s0 + cc]
                for c in range(nc):
                    acc += Acoup[k, c] * x[ns - nc + c]
                for i in range(nf):
                    acc += Gamma[k, i] * fs[i]
                xn[k] = acc
                for o in range(nout):
                    zs[o] += E[o, k] * acc
        for k in range(ns):
            x[k] = xn[k]
        bad = False  # a non-finite estimate always carries a flag
        for o in range(nout):
            Z[j, o] = zs[o]
            bad |= not math.isfinite(zs[o])
        for i in range(nf):
            bad |= not math.isfinite(fs[i])
        flags[j] = wflag
        if bad:
            flags[j] |= FLAG_OVERFLOW
