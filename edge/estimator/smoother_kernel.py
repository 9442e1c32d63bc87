"""Compiled kernel (numba) of the steady-state joint input-state fixed-lag Kalman smoother.

Per input sample k (gains from the bundle, see :mod:`edge.estimator.smoother`)::

    y       <- measurement (non-finite channels hold their last finite value; flag bit 0)
    e_k     = y - H x                          (innovation; x = x_k|k-1, the prediction)
    zf_k    = Cq x + G_0 e_k                   (filtered forces and outputs, Cq x_k|k)
    z_k-L   = zf_k-L + sum_{j=1..L} G_j e_k-L+j   (fixed-lag smoothed, L = lag)
    x       = A x + (A K) e_k                  (update and predict in one: 2x2 modal blocks,
                                                the force-model block, coupling to it, and
                                                the measurement-chain rows, which depend on
                                                the whole previous state)
    nis     = sum over the last W samples of e^T S^-1 e   (model check, broadband, suspect
                                                when above or below its thresholds)
    eps     = Wt e                             (whitened innovation, eps^T eps = e^T S^-1 e)
    c_k     = eps_k^T eps_k-1 = e_k^T S^-1 e_k-1   (lag-1 product, per sample over the
                                                window: the load level tracker's second
                                                statistic; 0 when either sample is held)
    p_b     = sum_c biquad_b(eps_c)^2 / g_b    (band power just below / above each
                                                resonance, mean nch for a right model),
                                                summed over W samples; suspect when the
                                                ratio within a pair exceeds its threshold
    judged  once W samples from counters[2] on are in the window (the warm-up's end: before
            it the state leaves rest and the innovations carry the structure's own motion)

The state is stored permuted, ``[q_1..q_n, qd_1..qd_n, xi, a]`` (``a``: chain states) (see
:func:`edge.estimator.smoother.derive_smoother`), so that the 2x2 modal blocks, the coupling
(factored to its numerical rank: a sweep over the modes per rank) and ``(A K) e`` are unit-stride loops that the
compiler vectorises; rows of H and Cq are summed over their non-zero span only (a
displacement row has no velocity or force-state part, a force row only force states); the
force-model block and the coupling's ``Cl xi`` are summed by columns (``AfT``, ``ClT``: each
column added to all its rows' sums at once, not one short chain of additions per row).
A state that is no longer finite after the update (an input of 1e308 overflowing
``(A K) e``) ends the block at that sample; the estimator resets and counts it. Nothing is
allocated, logged or locked per sample. The NumPy twin is
:class:`edge.estimator.smoother_reference.ReferenceSmoother`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from edge.flags import FLAG_HELD, FLAG_MODEL_SUSPECT, FLAG_OVERFLOW, FLAG_WARMUP

_FASTMATH = {"reassoc", "contract"}


@njit(cache=True, nogil=True, fastmath=_FASTMATH)
def _smooth(Y, Q, flags, Am, Ad, ClT, Cr, AfT, fT_span, Ak, AKT, H, h_span, Cq, q_span, G, Sinv,
            x, xn, e, ering, zring, fring, last, nisring, nis_state, threshold,
            threshold_low, counters, Wt, band_ba, band_gain, band_thr, bstate, bring, bsum,
            eps, lag1ring, eps_prev):  # pragma: no cover - compiled
    """Run the smoother over a block of samples (state permuted: ``[q, qd, xi]``).

    Parameters
    ----------
    Y : float64 (nb, nch)      measurements in channel units (SI)
    Q : float64 (nb, nq)       out: smoothed forces, outputs of sample k - L (NaN: warm-up)
    flags : uint8 (nb,)        out: FLAG_* bits
    Am : (4, n)                2x2 modal blocks [a11, a12, a21, a22] per mode (n = 0 when
                               the modal part is dense: Ad)
    Ad : (2n, 2n)              dense modal part (non-proportional damping), else (0, 0)
    ClT : (nc, r), Cr : (r, 2n)   A's coupling of the modes to the nc force-model states,
                               transposed and factored, AcT = Cl^T Cr (r its numerical rank)
    AfT : (nc, nc)             force-model block of A, transposed (row c: column c of Af);
                               fT_span : int64 (nc, 2) the non-zero [start, stop) of each row
    Ak : (nk, ns)              rows of A of the nk measurement-chain states (the last nk;
                               :mod:`offline.smoother.chain`); (0, ns) for point samples
    AKT : (nch, ns)            (A K)^T: x_k+1|k = A x_k|k-1 + A K e_k
    H : (nch, ns), h_span : int64 (nch, 2)   rows and their non-zero [start, stop)
    Cq : (nq, ns), q_span : int64 (nq, 2)    rows and their non-zero [start, stop)
    G : (L+1, nq, nch)         fixed-lag gains (G_0 = Cq K); Sinv : (nch, nch)
    x : float64 (ns,)          prediction x_k|k-1, permuted (in/out); xn (ns,), e scratch
    ering : (L+1, nch), zring : (L+1, nq), fring : uint8 (L+1,)   innovation, filtered
                               estimate and flag rings
    last : (nch,)              last finite value per channel
    nisring : (W,)             NIS per sample over the window; nis_state : (2,) [window sum,
                               last windowed sum reported]
    threshold : float          windowed NIS above which the model is suspect (innovations
                               too large); threshold_low : below which (too small)
    counters : int64 (3,)      [samples seen, in the check's window, first of the window]
    Wt : (nch, nch)            whitening, Wt^T Wt = S^-1
    band_ba : (nb, 5)          biquads [b0, b1, b2, a1, a2] of the check bands
    band_gain : (nb,)          white-noise power gain of each biquad
    band_thr : (nb,)           band pairs (2i, 2i+1): suspect when the windowed power of
                               one band exceeds band_thr times the other's
    bstate : (nb, nch, 2)      biquad states (transposed direct form II)
    bring : (W, nb), bsum : (nb,)   band powers over the window and their running sums
    eps : (nch,) scratch; lag1ring : (W,)   lag-1 product c_k per sample (slots as nisring)
    eps_prev : (nch,)          whitened innovation of the previous sample (0 if held)

    Returns 0 when the whole block ran; ``j + 1`` when the state became non-finite at sample
    ``j`` (row ``j`` is written, the rest of the block is not): the caller resets and goes
    on with sample ``j + 1`` (:meth:`edge.estimator.smoother.SmootherEstimator._run`).
    """
    nb_band = band_ba.shape[0]
    nb, nch = Y.shape
    ns = x.shape[0]
    nq = Cq.shape[0]
    Lp1 = ering.shape[0]
    W = nisring.shape[0]
    nc = AfT.shape[0]
    nk = Ak.shape[0]          # measurement-chain states, last
    m2 = ns - nc - nk         # modal states
    nm = Am.shape[1]          # 2x2 blocks (0: dense modal part)
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
            acc = 0.0
            for s in range(h_span[c, 0], h_span[c, 1]):
                acc += H[c, s] * x[s]
            e[c] = last[c] - acc
            ering[slot, c] = e[c]
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
        # c_k = eps_k^T eps_k-1                                     (lag-1 product)
        lag1 = 0.0
        for a in range(nch):
            if flag == 0:
                lag1 += eps[a] * eps_prev[a]
                eps_prev[a] = eps[a]
            else:
                eps_prev[a] = 0.0
        lag1ring[ws] = lag1
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
        if count >= counters[2] and counters[1] < W:  # the check's window fills
            counters[1] += 1
        # zf = Cq x + G_0 e                                         (filtered Cq x_k|k)
        for q in range(nq):
            acc = 0.0
            for s in range(q_span[q, 0], q_span[q, 1]):
                acc += Cq[q, s] * x[s]
            for c in range(nch):
                acc += G[0, q, c] * e[c]
            zring[slot, q] = acc
        # x_k+1|k = A x_k|k-1 + (A K) e_k = A (x_k|k-1 + K e_k)    (update and predict)
        for r in range(nk):       # chain rows p = P z, m = M z + p_old: the whole old state
            acc = 0.0
            for c in range(ns):
                acc += Ak[r, c] * x[c]
            xn[ns - nk + r] = acc
        if nm > 0:                # 2x2 modal blocks: q' = a11 q + a12 qd, qd' = a21 q + a22 qd
            for i in range(nm):
                qi = x[i]
                vi = x[nm + i]
                x[i] = Am[0, i] * qi + Am[1, i] * vi
                x[nm + i] = Am[2, i] * qi + Am[3, i] * vi
        else:                     # dense modal part (non-proportional damping)
            for r in range(m2):
                acc = 0.0
                for c in range(m2):
                    acc += Ad[r, c] * x[c]
                xn[r] = acc
            for r in range(m2):
                x[r] = xn[r]
        nr = ClT.shape[1]         # xi' = Af xi and t = Cl xi from the old force states,
        for r in range(nc):       # by columns (independent sums, unit stride), t in xn[:r]
            xn[m2 + r] = 0.0      # (free after the modal step)
            if r < nr:
                xn[r] = 0.0
        for c in range(nc):
            xc = x[m2 + c]
            for r in range(fT_span[c, 0], fT_span[c, 1]):
                xn[m2 + r] += AfT[c, r] * xc
            for rr in range(nr):
                xn[rr] += ClT[c, rr] * xc
        for rr in range(nr):      # coupling to the old force states: x_modal += Cr^T t
            t = xn[rr]
            for k in range(m2):
                x[k] += Cr[rr, k] * t
        for r in range(nc + nk):
            x[m2 + r] = xn[m2 + r]
        for c in range(nch):      # + (A K) e
            ec = e[c]
            for s in range(ns):
                x[s] += AKT[c, s] * ec
        count += 1
        counters[0] = count
        blown = False  # a non-finite state (an input of 1e308): the caller resets
        for s in range(ns):
            blown |= not math.isfinite(x[s])
        susp = np.uint8(0)
        if counters[1] >= W:
            if nis_state[0] > threshold or nis_state[0] < threshold_low:
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
            if blown:
                return j + 1
            continue
        # z_k-L = zf_k-L + sum_{i=1..L} G_i e_k-L+i                  (fixed-lag smoother)
        old = count % Lp1  # slot of sample k - L
        wflag = fring[old]
        for q in range(nq):
            Q[j, q] = zring[old, q]
        for i in range(1, Lp1):
            s = old + i
            if s >= Lp1:
                s -= Lp1
            wflag |= fring[s]
            for q in range(nq):
                acc = 0.0
                for c in range(nch):
                    acc += G[i, q, c] * ering[s, c]
                Q[j, q] += acc
        bad = False  # a non-finite estimate always carries a flag
        for q in range(nq):
            bad |= not math.isfinite(Q[j, q])
        flags[j] = wflag | susp
        if bad:
            flags[j] |= FLAG_OVERFLOW
        if blown:
            return j + 1
    return 0
