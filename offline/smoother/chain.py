"""The measurement chain in the smoother's model: exact discretisation of a conversion.

A converter (:mod:`edge.acquisition`) returns for channel ``c`` at row ``k`` the taps-weighted
mean of the continuous output ``C_c z(t)`` over the modulator instants of a window ending
``o_c`` before the row's time stamp ``t_k``::

    y_k,c = sum_i h_i C_c z(t_k - o_c - i d) + v_k,c          (d = 1 / F_MOD)

The window ``W = o_c + (len(h) - 1) d`` spans at most two sample intervals (checked:
``W <= 2 dt``), so conversion ``k`` lies in ``[t_k-2, t_k]``. Split it at ``t_k-1``: its part
in ``[t_k-1, t_k]`` is a linear functional of the trajectory over the interval just elapsed,
its part in ``[t_k-2, t_k-1)`` one of the interval before. Two states per channel carry it::

    z_k = A z_k-1 + w_z                  (continuous system over one interval, Van Loan)
    p_k = P z_k-1 + w_p                  (conversion k+1's part within [t_k-1, t_k))
    m_k = M z_k-1 + p_k-1 + w_m          (conversion k: its part in [t_k-1, t_k] plus the
                                          tail stored one step ago)
    y_k = m_k + v_k                      (H = [0, 0, I])

With ``s`` the time since ``t_k-1`` and ``z(s) = e^{Ac s} z_k-1 + int_0^s e^{Ac (s-u)} dw(u)``,
``M = sum_{i: s_i >= 0} h_i C e^{Ac s_i}`` over ``s_i = dt - o_c - i d`` and ``P`` the same
sum over ``s_i + dt`` for the taps with ``s_i < 0``. ``(w_z, w_p, w_m)`` come from the same
white noise over the interval; their joint covariance is summed exactly over the sub-steps
between consecutive tap instants (:func:`chain_model`): on the grid ``0 = s_0 < .. < s_N =
dt`` with ``z_j = E_j z_j-1 + e_j`` (``E_j, Q_j = van_loan(Ac, Qc, s_j - s_j-1)``, the ``e_j``
independent), a functional ``L = sum_j W_j z_j`` is ``G_0 z_0 + sum_{j>=1} G_j e_j`` with the
backward recursion ``G_N = W_N``, ``G_j-1 = W_j-1 + G_j E_j``; likewise ``z_N = Phi_0 z_0 +
sum Phi_j e_j`` with ``Phi_N = I``, ``Phi_j-1 = Phi_j E_j``. Hence ``A = Phi_0``,
``[P; M] = G_0`` and ``cov[w_z; w_p; w_m] = sum_j [Phi_j; G_j] Q_j [Phi_j; G_j]^T``.
"""

from __future__ import annotations

import numpy as np

from edge.estimator.operator import EstimatorError
from offline.smoother.van_loan import van_loan


def _tap_grid(taps, spacing, offsets, dt):
    """Sorted instants ``s`` in [0, dt] (time since ``t_k-1``) and the weights of each
    channel's ``P`` (rows 0..nch-1) and ``M`` (rows nch..2 nch-1) functionals there, as
    ``(s (N+1,), idx list of (point, row, weight))``."""
    nch = len(offsets)
    tol = 1e-9 * dt
    span = (len(taps) - 1) * spacing
    pts, ent = [0.0, dt], []
    for c, o in enumerate(offsets):
        if not 0.0 <= o < dt:
            raise EstimatorError(f"chain offset of channel {c} is {o:.6g} s: must be in "
                                 f"[0, dt = {dt:.6g} s)")
        if o + span > 2 * dt + tol:
            raise EstimatorError(
                f"the conversion window of channel {c} ({span * 1e3:.4g} ms, ending "
                f"{o * 1e3:.4g} ms before the row) spans more than two sample intervals "
                f"(2 dt = {2e3 * dt:.4g} ms): raise the converter's data rate or lower the "
                f"estimator's rate")
        s = dt - o - np.arange(len(taps)) * spacing
        for si, hi in zip(s, taps):
            if si >= -tol:      # conversion k, part in [t_k-1, t_k]      -> M
                pts.append(max(si, 0.0))
                ent.append((pts[-1], nch + c, hi))
            else:               # conversion k+1's part in [t_k-1, t_k)   -> P
                pts.append(min(max(si + dt, 0.0), dt))
                ent.append((pts[-1], c, hi))
    key = np.round(np.asarray(pts) / tol).astype(np.int64)
    uniq, inv = np.unique(key, return_inverse=True)
    s = uniq * tol
    s[0], s[-1] = 0.0, dt
    idx = [(int(inv[2 + j]), r, h) for j, (_, r, h) in enumerate(ent)]
    return s, idx


def chain_model(Ac, Qc, C, dt, taps, spacing, offsets):
    """Augmented one-step model of the state ``[z, p, m]`` (module docstring).

    Parameters
    ----------
    Ac, Qc : (ns, ns)   continuous system and white-noise intensity
    C : (nch, ns)       channel rows (the continuous output)
    dt : float          sample interval [s]
    taps : (nt,)        one conversion's taps, ``taps[0]`` at the window's end
    spacing : float     their spacing [s]
    offsets : (nch,)    each channel's window end before the row's time stamp [s]

    Returns ``(F, Qa, Ha)``: ``x_k = F x_k-1 + w (Qa)``, ``y_k = Ha x_k + v``.
    """
    ns, nch = Ac.shape[0], C.shape[0]
    s, idx = _tap_grid(np.asarray(taps, float), float(spacing), np.asarray(offsets, float), dt)
    N = len(s) - 1
    Wrow = {}                     # point -> (2 nch, ns) weights on z(s_j)
    for j, r, h in idx:
        Wj = Wrow.setdefault(j, np.zeros((2 * nch, ns)))
        Wj[r] += h * C[r % nch]
    cache = {}

    def step(j):
        # E_j, Q_j = van_loan(Ac, Qc, s_j - s_j-1)          (one sub-step, cached by length)
        d = s[j] - s[j - 1]
        key = round(d * 1e15)
        if key not in cache:
            cache[key] = van_loan(Ac, Qc, d)
        return cache[key]

    nz = ns + 2 * nch
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
    # z_k = A z_k-1;  p_k = P z_k-1;  m_k = M z_k-1 + p_k-1
    F[:, :ns] = T
    F[ns + nch:, ns:ns + nch] = np.eye(nch)
    Ha = np.zeros((nch, nz))
    Ha[:, ns + nch:] = np.eye(nch)          # y_k = m_k + v_k
    return F, 0.5 * (Qa + Qa.T), Ha
