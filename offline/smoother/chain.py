"""The measurement chain in the smoother's model: exact discretisation of a conversion.

A converter (:mod:`edge.acquisition`) returns for channel ``c`` at row ``k`` the taps-weighted
mean of the continuous output ``C_c z(t)`` over the modulator instants of a window ending
``o_c`` before the row's time stamp ``t_k``::

    y_k,c = sum_i h_i C_c z(t_k - o_c - i d) + v_k,c          (d = 1 / F_MOD)

The window ``o_c + (len(h) - 1) d`` spans at most ``W`` sample intervals
(:meth:`edge.acquisition.Chain.intervals`, at least 2: 1.13 ms at DRATE 1000 and 1 kHz), so
conversion ``k`` lies in ``[t_k-W, t_k]``. Split it at the sample instants: its part in
``[t_k-q-1, t_k-q]`` (``q = 0 .. W-1``) is a linear functional ``L_q`` of the trajectory over
that interval, evaluated when the interval has elapsed. ``W`` states per channel carry the
conversions in progress, ``a_q,k`` = the part of conversion ``k + q`` up to ``t_k``::

    z_k       = A z_k-1 + w_z                       (modes and force models, Van Loan)
    a_W-1,k   = L_W-1 z_k-1 + w_W-1                 (the oldest part of conversion k+W-1)
    a_q,k     = L_q z_k-1 + a_q+1,k-1 + w_q         (q = W-2 .. 0: this interval's part plus
                                                     the parts stored before)
    y_k       = a_0,k + v_k                         (H = [0, .., 0, I])

With ``W = 2`` this is ``p_k = P z_k-1 + w_p`` (``P = L_1``: conversion k+1's part within
``[t_k-1, t_k)``), ``m_k = M z_k-1 + p_k-1 + w_m`` (``M = L_0``), ``y_k = m_k + v_k``. With ``s``
the time since ``t_k-1`` and ``z(s) = e^{Ac s} z_k-1 + int_0^s e^{Ac (s-u)} dw(u)``,
``L_q = sum h_i C e^{Ac s_i}`` over the taps of ``s_i = dt - o_c - i d + q dt`` in ``[0, dt]``.
The ``w`` come from the same white noise over the interval; their joint covariance is summed
exactly over the sub-steps between consecutive tap instants (:func:`chain_model`): on the grid
``0 = s_0 < .. < s_N = dt`` with ``z_j = E_j z_j-1 + e_j`` (``E_j, Q_j = van_loan(Ac, Qc,
s_j - s_j-1)``, the ``e_j`` independent), a functional ``L = sum_j W_j z_j`` is ``G_0 z_0 +
sum_{j>=1} G_j e_j`` with the backward recursion ``G_N = W_N``, ``G_j-1 = W_j-1 + G_j E_j``;
likewise ``z_N = Phi_0 z_0 + sum Phi_j e_j`` with ``Phi_N = I``, ``Phi_j-1 = Phi_j E_j``. Hence
``A = Phi_0``, ``L = G_0`` and ``cov[w_z; w_W-1; ..; w_0] = sum_j [Phi_j; G_j] Q_j [Phi_j;
G_j]^T``. The state is ``[z, a_W-1, .., a_1, a_0]`` (channels within each block).

Sensor dynamics (:func:`sensor_model`; :mod:`edge.acquisition`, schema 8) come before the
converter, each exact by state augmentation of the continuous system:

* a first-order high-pass ``s / (s + w_c)`` (IEPE): one state ``r_c`` per channel, ``r_c' =
  C_c z - w_c r_c``, the sensor's output ``u_c = C_c z - w_c r_c``;
* a random-walk offset: one state ``b_c`` per channel, ``b_c' = w_b``, ``E[w_b w_b] =
  drift_c^2 delta`` (``drift_c^2 dt`` over a row when nothing else is in the window), added
  to the sensor's output before the converter; never an output;
* a moving average over ``T_c``: ``(1 / T_c) int_{t - T_c}^{t} u_c``, through an integrator
  ``J_c' = u_c`` restarted at 0 at every sample instant (not a state of the model: within
  one interval it is a function of ``z_k-1`` and the interval's noise): the part of the
  window in interval ``q`` is ``J(s_hi) - J(s_lo)``, two more taps on the grid above with
  weights ``+- h_i / T_c`` (the converter's tap ``i`` applied to the average). The window
  adds ``T_c`` to ``W`` (an ideal converter with an average: a single tap at ``o_c``).

The augmented continuous state is ``[z, r, b, J]``; the model's ``[z, r, b, a_W-1 .. a_0]``
(``J`` dropped: 0 at ``s = 0``). Without a conversion window (ideal converter, no average)
the sample is the point ``y_k = C_c z_k - w_c r_c,k + b_c,k``, the model ``[z, r, b]``
discretised by Van Loan over ``dt``. The offsets' noise is returned apart (``Qd``, the
load levels keep it at its declared intensity).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from edge.acquisition import conversion_intervals
from edge.estimator.operator import EstimatorError
from offline.smoother.van_loan import van_loan


#: more sample intervals per conversion than this: refused (W states per channel)
MAX_INTERVALS = 16


def _tap_grid(pt, box, dt, W, nch):
    """Sorted instants ``s`` in [0, dt] (time since ``t_k-1``) and the weighted taps there
    of the functionals ``L_q`` (row ``(W - 1 - q) nch + c``: the state order), as ``(s
    (N+1,), [(point, row, weight (nx,))])``. ``pt``: point taps ``(lag, channel, weight)``
    (the value ``weight @ x`` at ``t_k - lag``); ``box``: ``(lag_lo, lag_hi, channel,
    weight)``, the integral of ``weight @ x`` over lags ``[lag_lo, lag_hi]`` as the local
    integrator's difference (``weight`` on ``J``, restarted at each interval's start)."""
    tol = 1e-9 * dt
    pts, ent = [0.0, dt], []

    def put(s_in, q, c, w):
        assert q < W, (q, W)
        pts.append(min(max(s_in, 0.0), dt))
        ent.append(((W - 1 - q) * nch + c, w))

    for lag, c, w in pt:
        s = dt - lag                                   # conversion k, since t_k-1
        # q: the interval [t_k-q-1, t_k-q] of the tap (q = 0: the one just elapsed)
        q = 0 if s >= -tol else int(np.ceil(-s / dt - 1e-9))
        put(s + q * dt, q, c, w)
    for lo, hi, c, w in box:
        q0, q1 = int(np.floor(lo / dt + 1e-9)), int(np.ceil(hi / dt - 1e-9)) - 1
        for q in range(q0, max(q0, q1) + 1):
            # its part in lags [q dt, (q + 1) dt]: J(s_hi) - J(s_lo), s = (q + 1) dt - lag
            a, b = max(lo, q * dt), min(hi, (q + 1) * dt)
            if b - a > tol:
                put((q + 1) * dt - a, q, c, w)
                put((q + 1) * dt - b, q, c, -w)
    key = np.round(np.asarray(pts) / tol).astype(np.int64)
    uniq, inv = np.unique(key, return_inverse=True)
    s = uniq * tol
    s[0], s[-1] = 0.0, dt
    return s, [(int(inv[2 + j]), r, w) for j, (r, w) in enumerate(ent)]


def _check_window(W, span, offsets, dt, average=None):
    if W > MAX_INTERVALS:
        avg = "" if average is None or not np.any(average) else (
            f" + moving average up to {np.max(average) * 1e3:.4g} ms ([[sensors]] average_s)")
        raise EstimatorError(f"a conversion window ({span * 1e3:.4g} ms{avg} + offset up to "
                             f"{np.max(offsets, initial=0.0) * 1e3:.4g} ms) spans {W} sample "
                             f"intervals of {dt * 1e3:.4g} ms (at most {MAX_INTERVALS}): raise "
                             f"the converter's data rate, shorten the average or lower the "
                             f"estimator's rate")


def _check_offsets(offsets, dt):
    for c, o in enumerate(offsets):
        if not 0.0 <= o < dt:
            raise EstimatorError(f"chain offset of channel {c} is {o:.6g} s: must be in "
                                 f"[0, dt = {dt:.6g} s)")


#: the last Van Loan discretisations (:func:`_van_loan_memo`)
_MEMO: OrderedDict = OrderedDict()
_MEMO_SIZE = 32


def _van_loan_memo(Ac, Qc, d):
    """``van_loan(Ac, Qc, d)``, remembered for the last :data:`_MEMO_SIZE` distinct
    arguments (equal arrays, the step to 1e-15 s): placement discretises the same
    continuous system for layout after layout (offline/placement/chained.py)."""
    key = (Ac.shape, hash(Ac.tobytes()), hash(Qc.tobytes()), round(d * 1e15))
    hit = _MEMO.get(key)
    if hit is not None and np.array_equal(hit[0], Ac) and np.array_equal(hit[1], Qc):
        _MEMO.move_to_end(key)
        return hit[2]
    out = van_loan(Ac, Qc, d)
    _MEMO[key] = (Ac.copy(), Qc.copy(), out)
    while len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)
    return out


def _augmented(Ac, Qcs, npers, s, idx, nk, nch):
    """The backward recursion of the module docstring on the continuous system ``(Ac,
    Qcs)`` (``Qcs``: noise intensities whose discrete covariances are wanted apart) whose
    first ``npers`` states persist (the rest: local integrators, 0 at ``s = 0``), with the
    functionals ``idx`` on the grid ``s``. Returns ``(F, [Qa], Ha)`` of ``[x_pers, a]``.

    Only the ``nk`` functionals' rows ``G_j`` are carried per sub-step (``nk x nx``, not the
    state's ``Phi_j``): the persisting block is Van Loan over ``dt`` (``Phi_0 = e^{Ac dt}``,
    ``sum_j Phi_j Q_j Phi_j^T`` its covariance: they do not depend on the integrators), and
    the cross covariance ``sum_j G_j Q_j Phi_j^T`` is the forward sum ``S_1 = G_1 Q_1``,
    ``S_j = S_j-1 E_j^T + G_j Q_j`` (``Phi_j^T = E_j+1^T .. E_N^T``), ``S_N``'s persisting
    columns."""
    nx = Ac.shape[0]
    N = len(s) - 1
    Wrow = {}                     # point -> (nk, nx) weights on x(s_j), rows in state order
    for j, r, w in idx:
        Wj = Wrow.setdefault(j, np.zeros((nk, nx)))
        Wj[r] += w
    cache = {}

    def step(j):
        # E_j, Q_j = van_loan(Ac, Qc, s_j - s_j-1)          (one sub-step, cached by length)
        d = s[j] - s[j - 1]
        key = round(d * 1e15)
        if key not in cache:
            EQ = [_van_loan_memo(Ac, Qc, d) for Qc in Qcs]
            cache[key] = EQ[0][0], [q for _, q in EQ]
        return cache[key]

    G = np.zeros((N + 1, nk, nx))
    G[N] = Wrow.get(N, 0.0)                # G_N = W_N
    for j in range(N, 0, -1):              # G_j-1 = W_j-1 + G_j E_j
        G[j - 1] = G[j] @ step(j)[0]
        if j - 1 in Wrow:
            G[j - 1] += Wrow[j - 1]
    S = [np.zeros((nk, nx)) for _ in Qcs]
    GG = [np.zeros((nk, nk)) for _ in Qcs]
    for j in range(1, N + 1):
        E, Qj = step(j)
        for m, Qjm in enumerate(Qj):
            GQ = G[j] @ Qjm
            S[m] = S[m] @ E.T + GQ         # S_j = S_j-1 E_j^T + G_j Q_j
            GG[m] += GQ @ G[j].T           # sum_j G_j Q_j G_j^T
    pp = [_van_loan_memo(Ac[:npers, :npers], Qc[:npers, :npers], s[-1] - s[0]) for Qc in Qcs]
    nz = npers + nk
    Qa = []
    for (_, Qp), Sm, GGm in zip(pp, S, GG):
        Qm = np.zeros((nz, nz))
        Qm[:npers, :npers] = Qp
        Qm[npers:, :npers] = Sm[:, :npers]
        Qm[:npers, npers:] = Sm[:, :npers].T
        Qm[npers:, npers:] = GGm
        Qa.append(0.5 * (Qm + Qm.T))
    F = np.zeros((nz, nz))
    # x_k = A x_k-1;  a_q,k = L_q x_k-1 (+ a_q+1,k-1 for q < W-1);  J_k-1 = 0: dropped
    F[:npers, :npers] = pp[0][0]
    F[npers:, :npers] = G[0][:, :npers]
    F[npers + nch:, npers:nz - nch] = np.eye(nk - nch)
    Ha = np.zeros((nch, nz))
    Ha[:, nz - nch:] = np.eye(nch)          # y_k = a_0,k + v_k
    return F, Qa, Ha


def chain_model(Ac, Qc, C, dt, taps, spacing, offsets):
    """Augmented one-step model of the state ``[z, a_W-1, .., a_0]`` (module docstring).

    Parameters
    ----------
    Ac, Qc : (ns, ns)   continuous system and white-noise intensity
    C : (nch, ns)       channel rows (the continuous output)
    dt : float          sample interval [s]
    taps : (nt,)        one conversion's taps, ``taps[0]`` at the window's end
    spacing : float     their spacing [s]
    offsets : (nch,)    each channel's window end before the row's time stamp [s]

    Returns ``(F, Qa, Ha)``: ``x_k = F x_k-1 + w (Qa)``, ``y_k = Ha x_k + v``; ``W nch``
    chain states (:func:`edge.acquisition.conversion_intervals`).
    """
    taps, offsets = np.asarray(taps, float), np.asarray(offsets, float)
    F, Qa, Ha = _conversions(Ac, [Qc], C, np.zeros_like(C), dt, taps, float(spacing),
                             offsets, np.zeros(len(offsets)), Ac.shape[0])
    return F, Qa[0], Ha


def _conversions(Ac, Qcs, Cu, Cb, dt, taps, spacing, offsets, average, npers):
    """The conversions of ``u = Cu x`` averaged over ``average`` [s] (0: none) plus the
    offsets ``Cb x``, by :func:`_augmented` on ``x`` extended with one local integrator per
    averaged channel (``J_c' = Cu_c x``). ``x``'s first ``npers`` states persist."""
    nch, nx0 = Cu.shape
    _check_offsets(offsets, dt)
    span = (len(taps) - 1) * spacing
    W = conversion_intervals(offsets + average, span, dt)
    _check_window(W, span, offsets, dt, average)
    avg = np.flatnonzero(average > 0)
    nx = nx0 + avg.size
    A2 = np.zeros((nx, nx))
    A2[:nx0, :nx0] = Ac
    A2[nx0:, :nx0] = Cu[avg]                  # J_c' = u_c
    Q2 = [np.pad(Q, ((0, avg.size), (0, avg.size))) for Q in Qcs]
    pt, box = [], []
    lags = np.arange(len(taps)) * spacing
    for c in range(nch):
        wu = np.pad(Cu[c], (0, avg.size))
        wb = np.pad(Cb[c], (0, avg.size))
        wj = np.zeros(nx)
        if average[c] > 0:
            wj[nx0 + int(np.searchsorted(avg, c))] = 1.0 / average[c]
        for lag, h in zip(offsets[c] + lags, taps):
            if average[c] > 0:   # (1/T) int over [t - lag - T, t - lag], and the offset
                box.append((lag, lag + average[c], c, h * wj))
                if np.any(wb):
                    pt.append((lag, c, h * wb))
            else:
                pt.append((lag, c, h * (wu + wb)))
    s, idx = _tap_grid(pt, box, dt, W, nch)
    return _augmented(A2, Q2, npers, s, idx, W * nch, nch)


def sensor_model(Ac, Qc, C, dt, chain, nch):
    """The smoother's model of a chain with sensor dynamics (module docstring): ``(F, Q, Qd,
    H)``, ``Qd`` the offsets' share of ``Q``; state ``[z, r, b, a_W-1, .., a_0]`` (``a``
    only with a conversion window: a converter or a moving average)."""
    ns = Ac.shape[0]
    wc = 2 * np.pi * chain.highpass_for(nch)
    drift = chain.drift_for(nch)
    hp, dr = np.flatnonzero(wc > 0), np.flatnonzero(drift > 0)
    nr, nb = hp.size, dr.size
    npers = ns + nr + nb
    # continuous [z, r, b]: r_c' = C_c z - w_c r_c;  b_c' = w_b
    A2 = np.zeros((npers, npers))
    A2[:ns, :ns] = Ac
    A2[ns + np.arange(nr), :ns] = C[hp]
    A2[ns + np.arange(nr), ns + np.arange(nr)] = -wc[hp]
    Cu = np.zeros((nch, npers))                # u_c = C_c z - w_c r_c
    Cu[:, :ns] = C
    Cu[hp, ns + np.arange(nr)] = -wc[hp]
    Cb = np.zeros((nch, npers))                # + b_c
    Cb[dr, ns + nr + np.arange(nb)] = 1.0
    Ql = np.pad(Qc, ((0, nr + nb), (0, nr + nb)))
    Qb = np.zeros_like(Ql)
    Qb[ns + nr + np.arange(nb), ns + nr + np.arange(nb)] = drift[dr] ** 2
    Qcs = [Ql, Qb] if nb else [Ql]
    if chain.intervals(dt, nch):
        taps, spacing = chain.taps()
        F, Qs, H = _conversions(A2, Qcs, Cu, Cb, dt, np.asarray(taps, float),
                                float(spacing), chain.offsets_for(nch),
                                chain.average_for(nch), npers)
    else:  # point samples of u + b
        EQ = [van_loan(A2, Q, dt) for Q in Qcs]
        F, Qs, H = EQ[0][0], [q for _, q in EQ], Cu + Cb
    # exact zeros: the model does not depend on r, b; r not on b; b_k = b_k-1 + w
    F[:ns, ns:npers] = 0.0
    F[ns:ns + nr, ns + nr:npers] = 0.0
    F[ns + nr:npers] = 0.0
    F[ns + nr + np.arange(nb), ns + nr + np.arange(nb)] = 1.0
    Qd = Qs[1] if nb else np.zeros_like(Qs[0])
    Q = Qs[0] + Qd
    return F, 0.5 * (Q + Q.T), Qd, H
