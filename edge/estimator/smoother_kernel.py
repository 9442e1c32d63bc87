"""Compiled kernel (numba) of the steady-state joint input-state fixed-lag Kalman smoother.

Per input sample k (gains from the bundle, see :mod:`edge.estimator.smoother`)::

    y       <- measurement (non-finite channels hold their last finite value; flag bit 0)
    e_k     = y - H x                          (innovation; x = x_k|k-1, the prediction)
    zf_k    = Cq x + G_0 e_k                   (filtered forces and outputs, Cq x_k|k)
    z_k-L   = zf_k-L + sum_{j=1..L} G_j e_k-L+j   (fixed-lag smoothed, L = lag)
    x       = A (x + K e_k)                    (update, then predict: 2x2 modal blocks,
                                                the force-model block, coupling to it)
    nis     = sum over the last W samples of e^T S^-1 e   (model check, broadband)
    eps     = Wt e                             (whitened innovation, eps^T eps = e^T S^-1 e)
    p_b     = sum_c biquad_b(eps_c)^2 / g_b    (band power just below / above each
                                                resonance, mean nch for a right model),
                                                summed over W samples; suspect when the
                                                ratio within a pair exceeds its threshold

Nothing is allocated, logged or locked per sample. The NumPy twin is
:class:`edge.estimator.smoother_reference.ReferenceSmoother`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from edge.flags import FLAG_HELD, FLAG_MODEL_SUSPECT, FLAG_WARMUP

_FASTMATH = {"reassoc", "contract"}


@njit(cache=True, nogil=True, fastmath=_FASTMATH)
def _smooth(Y, Q, flags, blk_ptr, dat_ptr, A_data, Acoup, H, K, Cq, G, Sinv,
            x, xn, e, zf, ering, zring, fring, last, nisring, nis_state, threshold,
            counters, Wt, band_ba, band_gain, band_thr, bstate, bring, bsum,
            eps):  # pragma: no cover - compiled
    """Run the smoother over a block of samples.

    Parameters
    ----------
    Y : float64 (nb, nch)      measurements in channel units (SI)
    Q : float64 (nb, nq)       out: smoothed forces then outputs of sample k - L (NaN in
                               warm-up)
    flags : uint8 (nb,)        out: FLAG_* bits
    blk_ptr, dat_ptr, A_data   diagonal blocks of A (2x2 per mode, then the force block)
    Acoup : (ns, nc)           A's coupling of every state to the last nc (force) states
    H : (nch, ns), K : (ns, nch), Cq : (nq, ns), G : (L+1, nq, nch), Sinv : (nch, nch)
    x : float64 (ns,)          prediction x_k|k-1 (in/out); xn (ns,) scratch
    e : (nch,), zf : (nq,)     scratch
    ering : (L+1, nch), zring : (L+1, nq), fring : uint8 (L+1,)   innovation, filtered
                               estimate and flag rings
    last : (nch,)              last finite value per channel
    nisring : (W,)             NIS per sample over the window; nis_state : (2,) [window sum,
                               last windowed sum reported]
    threshold : float          windowed NIS above which the model is suspect
    counters : int64 (2,)      [samples seen, samples in the NIS window]
    Wt : (nch, nch)            whitening, Wt^T Wt = S^-1
    band_ba : (nb, 5)          biquads [b0, b1, b2, a1, a2] of the check bands
    band_gain : (nb,)          white-noise power gain of each biquad
    band_thr : (nb,)           band pairs (2i, 2i+1): suspect when the windowed power of
                               one band exceeds band_thr times the other's
    bstate : (nb, nch, 2)      biquad states (transposed direct form II)
    bring : (W, nb), bsum : (nb,)   band powers over the window and their running sums
    eps : (nch,)               scratch
    """
    nb_band = band_ba.shape[0]
    nb, nch = Y.shape
    ns = x.shape[0]
    nq = Cq.shape[0]
    Lp1 = ering.shape[0]
    W = nisring.shape[0]
    nblk = blk_ptr.shape[0] - 1
    nc = Acoup.shape[1]
    for j in range(nb):
        count = counters[0]
        slot = count % Lp1
        flag = np.uint8(0)
        # e = y - H x                                               (innovation)
        for c in range(nch):
            val = Y[j, c]
            if np.isfinite(val):
                last[c] = val
            else:
                flag |= FLAG_HELD
            acc = last[c]
            for s in range(ns):
                acc -= H[c, s] * x[s]
            e[c] = acc
            ering[slot, c] = acc
        fring[slot] = flag
        # NIS e^T S^-1 e over a sliding window of W samples (held inputs count nch)
        nis = 0.0
        if flag == 0:
            for a in range(nch):
                acc = 0.0
                for b in range(nch):
                    acc += Sinv[a, b] * e[b]
                nis += e[a] * acc
        else:
            nis = float(nch)
        ws = count % W
        if ws == 0:  # re-sum once per window: no drift of the running sum
            tot = 0.0
            for i in range(W):
                tot += nisring[i]
            nis_state[0] = tot
        nis_state[0] += nis - nisring[ws]
        nisring[ws] = nis
        # band powers of the whitened innovation (held inputs: their expectation, nch)
        for a in range(nch):
            acc = 0.0
            for b in range(nch):
                acc += Wt[a, b] * e[b]
            eps[a] = acc
        for bi in range(nb_band):
            pw = 0.0
            b0 = band_ba[bi, 0]
            b1 = band_ba[bi, 1]
            b2 = band_ba[bi, 2]
            a1 = band_ba[bi, 3]
            a2 = band_ba[bi, 4]
            for c in range(nch):
                # y = b0 u + s1;  s1 = b1 u - a1 y + s2;  s2 = b2 u - a2 y
                u = eps[c] if flag == 0 else 0.0
                yv = b0 * u + bstate[bi, c, 0]
                bstate[bi, c, 0] = b1 * u - a1 * yv + bstate[bi, c, 1]
                bstate[bi, c, 1] = b2 * u - a2 * yv
                pw += yv * yv
            pw = pw / band_gain[bi] if flag == 0 else float(nch)
            if ws == 0:
                tot = 0.0
                for i in range(W):
                    tot += bring[i, bi]
                bsum[bi] = tot
            bsum[bi] += pw - bring[ws, bi]
            bring[ws, bi] = pw
        if counters[1] < W:
            counters[1] += 1
        # zf = Cq x + G_0 e                                         (filtered Cq x_k|k)
        for q in range(nq):
            acc = 0.0
            for s in range(ns):
                acc += Cq[q, s] * x[s]
            for c in range(nch):
                acc += G[0, q, c] * e[c]
            zring[slot, q] = acc
        # x_k|k = x + K e, then x_k+1|k = A x_k|k, block by block
        for s in range(ns):
            acc = x[s]
            for c in range(nch):
                acc += K[s, c] * e[c]
            xn[s] = acc
        for b in range(nblk):
            s0 = blk_ptr[b]
            m = blk_ptr[b + 1] - s0
            d0 = dat_ptr[b]
            for r in range(m):
                k = s0 + r
                acc = 0.0
                row = d0 + r * m
                for cc in range(m):
                    acc += A_data[row + cc] * xn[s0 + cc]
                for c in range(nc):
                    acc += Acoup[k, c] * xn[ns - nc + c]
                x[k] = acc
        count += 1
        counters[0] = count
        susp = np.uint8(0)
        if counters[1] >= W:
            if nis_state[0] > threshold:
                susp = FLAG_MODEL_SUSPECT
            # band pairs (2i below, 2i+1 above a resonance): a shifted resonance moves
            # innovation power from one to the other; ratio beyond band_thr either way
            for bi in range(0, nb_band - 1, 2):
                lo_p = bsum[bi]
                hi_p = bsum[bi + 1]
                if lo_p > band_thr[bi] * hi_p or hi_p > band_thr[bi + 1] * lo_p:
                    susp = FLAG_MODEL_SUSPECT
        if count < Lp1:
            for q in range(nq):
                Q[j, q] = np.nan
            flags[j] = FLAG_WARMUP | flag | susp
            continue
        # z_k-L = zf_k-L + sum_{i=1..L} G_i e_k-L+i                  (fixed-lag smoother)
        old = count % Lp1  # slot of sample k - L
        wflag = np.uint8(0)
        for q in range(nq):
            Q[j, q] = zring[old, q]
        for i in range(Lp1):
            s = (old + i) % Lp1
            wflag |= fring[s]
            if i == 0:
                continue
            for q in range(nq):
                acc = 0.0
                for c in range(nch):
                    acc += G[i, q, c] * ering[s, c]
                Q[j, q] += acc
        flags[j] = wflag | susp
