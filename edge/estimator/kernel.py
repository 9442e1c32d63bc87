"""Compiled estimator kernel (numba): the fixed-lag Tikhonov filter on preallocated arrays.

Per input sample (see :mod:`edge.estimator.operator` for the derivation)::

    window  <- y (non-finite channels hold their last finite value; flag bit 0)
    f       = Ky @ window - Kx @ x          (Tikhonov force of the oldest window step)
    x       = A x + Gamma f                 (A block diagonal + coupling to the last states)
    z       = E x                           (virtual outputs)

Nothing is allocated, logged or locked per sample; ``nogil=True`` lets the daemon run it beside
its I/O threads. The NumPy twin is :class:`edge.estimator.reference.ReferenceEstimator`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

FLAG_HELD = 1       # an input used by this estimate was non-finite and held at its last value
FLAG_WARMUP = 2     # no estimate yet (window not full): row is NaN
FLAG_SATURATED = 4  # set by the acquisition layer, passed through


@njit(cache=True, nogil=True)
def _process(Y, F, Z, flags, blk_ptr, dat_ptr, A_data, Acoup, Gamma, Kx, Ky, E,
             x, xn, ybuf, fbuf, last, counters):  # pragma: no cover - compiled
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
        flag = np.uint8(0)
        for c in range(nch):
            val = Y[j, c]
            if np.isfinite(val):
                last[c] = val
            else:
                flag |= FLAG_HELD
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
        # f = Ky @ window - Kx @ x
        for i in range(nf):
            acc = 0.0
            for p in range(L):
                s = (oldest + p) % L
                base = p * nch
                for c in range(nch):
                    acc += Ky[i, base + c] * ybuf[s, c]
            for k in range(ns):
                acc -= Kx[i, k] * x[k]
            F[j, i] = acc
        # xn = A x  (block diagonal)
        for b in range(nblk):
            s0 = blk_ptr[b]
            m = blk_ptr[b + 1] - s0
            d0 = dat_ptr[b]
            for r in range(m):
                acc = 0.0
                row = d0 + r * m
                for cc in range(m):
                    acc += A_data[row + cc] * x[s0 + cc]
                xn[s0 + r] = acc
        # xn += Acoup x[tail]  (FOH: the previous force)
        for k in range(ns):
            acc = 0.0
            for c in range(nc):
                acc += Acoup[k, c] * x[ns - nc + c]
            xn[k] += acc
        # x = xn + Gamma f
        for k in range(ns):
            acc = xn[k]
            for i in range(nf):
                acc += Gamma[k, i] * F[j, i]
            x[k] = acc
        # z = E x
        for o in range(nout):
            acc = 0.0
            for k in range(ns):
                acc += E[o, k] * x[k]
            Z[j, o] = acc
        flags[j] = wflag
