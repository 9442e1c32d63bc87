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
"""

from __future__ import annotations

import numpy as np

from edge.acquisition import conversion_intervals
from edge.estimator.operator import EstimatorError
from offline.smoother.van_loan import van_loan


#: more sample intervals per conversion than this: refused (W states per channel)
MAX_INTERVALS = 16


def _tap_grid(taps, spacing, offsets, dt, W):
    """Sorted instants ``s`` in [0, dt] (time since ``t_k-1``) and the weights of each
    functional ``L_q`` of channel ``c`` there (row ``(W - 1 - q) nch + c``: the state order),
    as ``(s (N+1,), idx list of (point, row, weight))``."""
    nch = len(offsets)
    tol = 1e-9 * dt
    pts, ent = [0.0, dt], []
    for c, o in enumerate(offsets):
        if not 0.0 <= o < dt:
            raise EstimatorError(f"chain offset of channel {c} is {o:.6g} s: must be in "
                                 f"[0, dt = {dt:.6g} s)")
        s = dt - o - np.arange(len(taps)) * spacing       # conversion k, since t_k-1
        # q: the interval [t_k-q-1, t_k-q] of each tap (q = 0: the one just elapsed)
        q = np.where(s >= -tol, 0, np.ceil(-s / dt - 1e-9)).astype(int)
        sq = np.clip(s + q * dt, 0.0, dt)
        assert q.max() < W, (q.max(), W)
        for si, qi, hi in zip(sq, q, taps):
            pts.append(si)
            ent.append(((W - 1 - qi) * nch + c, hi))
    key = np.round(np.asarray(pts) / tol).astype(np.int64)
    uniq, inv = np.unique(key, return_inverse=True)
    s = uniq * tol
    s[0], s[-1] = 0.0, dt
    idx = [(int(inv[2 + j]), r, h) for j, (r, h) in enumerate(ent)]
    return s, idx


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
    ns, nch = Ac.shape[0], C.shape[0]
    taps, offsets = np.asarray(taps, float), np.asarray(offsets, float)
    W = conversion_intervals(offsets, (len(taps) - 1) * spacing, dt)
    if W > MAX_INTERVALS:
        raise EstimatorError(f"a conversion window ({(len(taps) - 1) * spacing * 1e3:.4g} ms "
                             f"+ offset up to {np.max(offsets) * 1e3:.4g} ms) spans {W} "
                             f"sample intervals of {dt * 1e3:.4g} ms (at most "
                             f"{MAX_INTERVALS}): raise the converter's data rate or lower the "
                             f"estimator's rate")
    s, idx = _tap_grid(taps, float(spacing), offsets, dt, W)
    N, nk = len(s) - 1, W * nch
    Wrow = {}                     # point -> (nk, ns) weights on z(s_j), rows in state order
    for j, r, h in idx:
        Wj = Wrow.setdefault(j, np.zeros((nk, ns)))
        Wj[r] += h * C[r % nch]
    cache = {}

    def step(j):
        # E_j, Q_j = van_loan(Ac, Qc, s_j - s_j-1)          (one sub-step, cached by length)
        d = s[j] - s[j - 1]
        key = round(d * 1e15)
        if key not in cache:
            cache[key] = van_loan(Ac, Qc, d)
        return cache[key]

    nz = ns + nk
    T = np.zeros((nz, ns))
    T[:ns] = np.eye(ns)                    # Phi_N = I
    T[ns:] = Wrow.get(N, 0.0)              # G_N = W_N
    Qa = np.zeros((nz, nz))
    for j in range(N, 0, -1):
        E, Qj = step(j)
        # cov += [Phi_j; G_j] Q_j [Phi_j; G_j]^T
        Qa += T @ Qj @ T.T
        # Phi_j-1 = Phi_j E_j;  G_j-1 = W_j-1 + G_j E_j
        T = T @ E
        if j - 1 in Wrow:
            T[ns:] += Wrow[j - 1]
    F = np.zeros((nz, nz))
    # z_k = A z_k-1;  a_q,k = L_q z_k-1 (+ a_q+1,k-1 for q < W-1)
    F[:, :ns] = T
    F[ns + nch:, ns:nz - nch] = np.eye(nk - nch)
    Ha = np.zeros((nch, nz))
    Ha[:, nz - nch:] = np.eye(nch)          # y_k = a_0,k + v_k
    return F, 0.5 * (Qa + Qa.T), Ha
