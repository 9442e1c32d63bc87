"""Compiled pieces (numba) of the hybrid twin's per-sample step around the smoother kernel
(:mod:`edge.estimator.hybrid`); NumPy twin: ``tests/test_hybrid_edge.py``. Nothing is
allocated per sample.

Per sample k, with the prediction ``x = x_k|k-1`` (permuted state)::

    s      = S (x + K (y - H x))                   (network input at the filtered state)
    out    = any(s < lo or s > hi)                 (outside the trained envelope)
    s      = min(max(s, lo), hi)                   (when saturating: kf_hy_guard = 1)
    g      = g_theta(s), or 0 when out and not saturating   (ONNX, between the calls here)
    g      = 0 when any(not |g_i| <= gmax_i)       (a non-finite or absurd output)
    gd     = w0 g + w1 g_k-1                       (the correction at the sample instant)
    y'     = y - Dg gd                             (the correction's part of the channels)
    ... smoother step on y' (edge.estimator.smoother_kernel._smooth) ...
    x     += Bg g                                  (x_k+1|k: the correction held over the step)
    z_k-L += Cqg gd_k-L                            (outputs' direct part, from a ring)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from edge.estimator.smoother_kernel import _smooth
from edge.flags import FLAG_ENVELOPE


@njit(cache=True, nogil=True)
def _hy_input(y, last, x, Sx, Sy, lo, hi, s, clip):  # pragma: no cover - compiled
    """``s[0] = Sx x + Sy y`` = ``S (x + K (y - H x))``, the network input at the filtered
    state (a non-finite channel at its last finite value); returns True when ``s`` is outside
    ``[lo, hi]`` (or not finite). ``clip``: an input outside is held at its bound (a
    non-finite one at the envelope's centre).

    y : (nch,) sample; last : (nch,) last finite values; x : (ns,) permuted prediction;
    Sx : (ni, ns), Sy : (ni, nch); lo, hi : (ni,); s : (1, ni) out."""
    out = False
    for i in range(Sx.shape[0]):
        acc = 0.0
        for j in range(Sx.shape[1]):
            acc += Sx[i, j] * x[j]
        for c in range(y.shape[0]):
            acc += Sy[i, c] * (y[c] if np.isfinite(y[c]) else last[c])
        if not (lo[i] <= acc <= hi[i]):
            out = True
            if clip:
                # s_i = min(max(s_i, lo_i), hi_i)
                acc = lo[i] if acc < lo[i] else hi[i] if acc > hi[i] else 0.5 * (lo[i] + hi[i])
        s[0, i] = acc
    return out


@njit(cache=True, nogil=True)
def _hy_channels(y, g, out, Dg, y1, gp, w):  # pragma: no cover - compiled
    """``gp[1] = w[0] g + w[1] gp[0]`` (the correction at the sample: the holds after and
    before it) and ``y1[0] = y - Dg gp[1]`` (``g`` zeroed first when ``out``). y : (nch,),
    g : (1, ng), Dg : (nch, ng), y1 : (1, nch) out, gp : (2, ng) [g_k-1, gd_k], w : (2,)."""
    ng = g.shape[1]
    if out:
        for i in range(ng):
            g[0, i] = 0.0
    for i in range(ng):
        # gd_k = w0 g_k + w1 g_k-1
        gp[1, i] = w[0] * g[0, i] + w[1] * gp[0, i]
    for c in range(y.shape[0]):
        acc = y[c]
        for i in range(ng):
            acc -= Dg[c, i] * gp[1, i]
        y1[0, c] = acc


@njit(cache=True, nogil=True)
def _hy_after(x, g, out, Bg, Cqg, gring, ering, counters, lag, q1, f1, gp):  # pragma: no cover
    """After the smoother step of sample k (``counters[0] = k + 1``): ``x += Bg g``, the ring
    slot of k gets ``Cqg gd_k`` and the envelope bit, and the estimate of sample k - L in
    ``q1`` (1, nq) gets ``Cqg gd_k-L`` and ``FLAG_ENVELOPE`` when any sample of its window
    was out; ``gp[0] = g`` for the next sample.

    gring : (L+1, nq) ring of ``Cqg gd``; ering : uint8 (L+1,) ring of envelope bits;
    gp : (2, ng) [g_k-1, gd_k]."""
    ng = g.shape[1]
    for s in range(x.shape[0]):
        acc = 0.0
        for i in range(ng):
            acc += Bg[s, i] * g[0, i]
        x[s] += acc
    count = counters[0]
    Lp1 = lag + 1
    slot = (count - 1) % Lp1
    nq = Cqg.shape[0]
    for q in range(nq):
        acc = 0.0
        for i in range(ng):
            acc += Cqg[q, i] * gp[1, i]
        gring[slot, q] = acc
    for i in range(ng):
        gp[0, i] = g[0, i]
    ering[slot] = FLAG_ENVELOPE if out else 0
    if count < Lp1:
        return
    old = count % Lp1
    flag = np.uint8(0)
    for i in range(Lp1):
        flag |= ering[i]
    for q in range(nq):
        q1[0, q] += gring[old, q]
    f1[0] |= flag


@njit(cache=True, nogil=True)
def _hy_sample(j, Y, Q, flags, g, out, Dg, y1, Am, Ad, ClT, Cr, AfT, fT_span, Ak, AKT, H, h_span,
               Cq, q_span, G, Sinv, x, xn, e, ering, zring, fring, last, nisring, nis_state,
               threshold, threshold_low, counters, Wt, band_ba, band_gain, band_thr, bstate,
               bring, bsum, eps, lag1ring, eps_prev, Bg, Cqg, gring, envring, lag, Sx, Sy,
               lo, hi, s, gp, w, gmax, hyc, clip):  # pragma: no cover - compiled
    """Sample ``j`` after the network call (``g`` holds ``g_theta(s)``; ``out``: the input
    was outside the envelope, where ``g`` is applied only when ``clip``, the input saturated):
    the output guard
    (:func:`_hy_guard`: a non-finite or absurd ``g`` is not applied, counted in ``hyc[0]``),
    the channels less the correction (:func:`_hy_channels`), the smoother step
    (:func:`edge.estimator.smoother_kernel._smooth`) on row ``j`` of ``Q``/``flags``,
    :func:`_hy_after`, then the next sample's network input (:func:`_hy_input`) when there
    is one. One compiled call per sample; returns 1 when the next input is outside the
    envelope, 0 when inside, 2 when the state has become non-finite (the caller resets)."""
    off = out and not clip
    if not off and _hy_guard(g, gmax):
        off = True
        out = True
        hyc[0] += 1
    _hy_channels(Y[j], g, off, Dg, y1, gp, w)
    q1 = Q[j:j + 1]
    f1 = flags[j:j + 1]
    _smooth(y1, q1, f1, Am, Ad, ClT, Cr, AfT, fT_span, Ak, AKT, H, h_span, Cq, q_span, G, Sinv, x,
            xn, e, ering, zring, fring, last, nisring, nis_state, threshold, threshold_low,
            counters, Wt, band_ba, band_gain, band_thr, bstate, bring, bsum, eps, lag1ring,
            eps_prev)
    _hy_after(x, g, out, Bg, Cqg, gring, envring, counters, lag, q1, f1, gp)
    for i in range(x.shape[0]):
        if not np.isfinite(x[i]):
            return 2
    if j + 1 < Y.shape[0]:
        return 1 if _hy_input(Y[j + 1], last, x, Sx, Sy, lo, hi, s, clip) else 0
    return 0


@njit(cache=True, nogil=True)
def _hy_guard(g, gmax):  # pragma: no cover - compiled
    """True when an output of the network is not finite or beyond its bound:
    ``not |g_i| <= gmax_i`` (NaN fails the comparison). g : (1, ng); gmax : (ng,)."""
    for i in range(g.shape[1]):
        if not abs(g[0, i]) <= gmax[i]:
            return True
    return False
