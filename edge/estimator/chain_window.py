"""The Tikhonov window of a converted channel: exact Markov parameters through the chain.

A conversion of channel c at row r is the taps-weighted mean of the continuous output over
its window, ending ``offset_c`` before the row's time stamp (:mod:`edge.acquisition`)::

    y_r,c = sum_m h_m y_c(t_r - s_m),      s_m = offset_c + m spacing

Each instant lies in a sample interval ``p_m = floor(s_m / dt)`` back, at ``sigma_m = (p_m + 1)
dt - s_m`` after its start ``t_j`` (``j = r - p_m - 1``). Through the continuous modal model
with the force linear over the interval (the exact first-order hold), from the grid state
``xi_j`` of the bundle's discretisation::

    [x; p; p'](sigma) = exp(Maug sigma) [xi_j; f_j; (f_j+1 - f_j) / dt],
    Maug = [[Ac, Bc, 0], [0, 0, I], [0, 0, 0]]                 (as edge.estimator.expm)
    y_c(t_j + sigma) = S_xi,c x(sigma) + S_f,c p(sigma)

so ``y_r = sum_p C_p xi_(r-p-1) + D0_p f_(r-p-1) + D1_p f_(r-p)`` over the ``W`` intervals a
conversion spans. A window reaching back before the estimator's step k needs the grid
states and forces before it: the estimator's state keeps the last ``W`` of each (each mode's
block ``[xi_k, .., xi_(k-W+1)]``, a shift register, still block diagonal; the forces ``f_(k-W+1),
.., f_k``, the previous force still the last ``nf`` states), never propagated backwards (a
stiff, damped mode would blow up). Stacking the next
L conversions gives ``Y = O z_k + J F`` exactly; for point samples (taps ``[1]``, offset 0) it
is the point-sample window of :func:`edge.estimator.tikhonov.window_matrices`.

Sensor dynamics (high-pass, moving average, drift) are not modelled here: only the Kalman
smoother models them.
"""

from __future__ import annotations

import numpy as np

from edge.estimator.expm import expm
from edge.estimator.modal_conversion import modal_conversion_rows


def tap_grid(chain, dt: float, nch: int):
    """``(h, spacing, W, p, sigma)``: the taps and their spacing (``chain.taps()``), the
    sample intervals ``W`` a conversion spans, and each channel's tap ``m`` in interval
    ``p[c, m] = floor(s_m / dt)`` back at ``sigma[c, m] = (p + 1) dt - s_m`` after its start,
    ``s_m = offset_c + m spacing`` (shapes (nch, taps))."""
    h, spacing = chain.taps()
    off = chain.offsets_for(nch)
    W = int(np.max(np.floor((off + (h.size - 1) * spacing) / dt + 1e-12))) + 1
    s = off[:, None] + np.arange(h.size)[None, :] * spacing
    p = np.floor(s / dt + 1e-12).astype(int)
    return h, spacing, W, p, (p + 1) * dt - s


def conversion_rows(chain, dt: float, Ac, Bc, S_xi, S_f):
    """``(C, D0, D1)``, shapes ``(W, nch, ns)``, ``(W, nch, nf)`` twice: each channel's
    conversion as ``y_r = sum_p C_p xi_(r-p-1) + D0_p f_(r-p-1) + D1_p f_(r-p)``.

    ``Ac (ns, ns)``, ``Bc (ns, nf)``: the continuous model ``x' = Ac x + Bc f``; ``S_xi (nch,
    ns)``, ``S_f (nch, nf)``: each channel's point sample ``y = S_xi x + S_f f``.
    """
    nch, ns = S_xi.shape
    nf = Bc.shape[1]
    h, spacing, W, pp, ss = tap_grid(chain, dt, nch)
    m = ns + 2 * nf
    Maug = np.zeros((m, m))
    Maug[:ns, :ns] = Ac
    Maug[:ns, ns:ns + nf] = Bc
    Maug[ns:ns + nf, ns + nf:] = np.eye(nf)
    C, D0, D1 = np.zeros((W, nch, ns)), np.zeros((W, nch, nf)), np.zeros((W, nch, nf))
    Ef = expm(Maug * spacing) if spacing > 0 else np.eye(m)  # one tap on: sigma + spacing
    for c in range(nch):
        row = np.concatenate([S_xi[c], S_f[c], np.zeros(nf)])
        p, sigma = pp[c], ss[c]
        acc = np.zeros((W, m))
        R = None
        for i in range(h.size - 1, -1, -1):
            # R(sigma_i) = row exp(Maug sigma_i), stepped forward in time tap by tap inside an
            # interval (forward: a stiff, damped mode decays instead of growing)
            if i == h.size - 1 or p[i] != p[i + 1]:
                R = row @ expm(Maug * sigma[i])
            else:
                R = R @ Ef
            acc[p[i]] += h[i] * R
        C[:, c] = acc[:, :ns]
        # [x; p; p'] from [xi; f_j; (f_j+1 - f_j) / dt]: f_j weight b - c / dt, f_j+1 c / dt
        D0[:, c] = acc[:, ns:ns + nf] - acc[:, ns + nf:] / dt
        D1[:, c] = acc[:, ns + nf:] / dt
    return C, D0, D1


def chain_window(C, D0, D1, A2, G0, G1, L: int, cols):
    """``(O, J)``: the next L conversions ``Y = O z_k + J F``, ``F = [f_(k+1), .., f_(k+L)]``
    (``(L nch, L nf)``), ``z_k`` the state of :func:`augment` (``cols[q]``: the columns of
    ``xi_(k-q)`` in it, ``q < W``; its last ``W nf``: ``f_(k-W+1), .., f_k``); the grid step
    ``xi_(j+1) = A2 xi_j + G0 f_j + G1 f_(j+1)``."""
    W, nch, ns = C.shape
    nf = G0.shape[1]
    nz = W * (ns + nf)
    nv = nz + L * nf

    def fmap(j):  # force f_(k+j), j in [1 - W, L], as a row block over [z_k; F]
        out = np.zeros((nf, nv))
        col = W * ns + (j + W - 1) * nf if j <= 0 else nz + (j - 1) * nf
        out[:, col:col + nf] = np.eye(nf)
        return out

    xi = {}
    for q in range(W):  # the grid states kept in the state: a selection
        xi[-q] = np.zeros((ns, nv))
        xi[-q][np.arange(ns), cols[q]] = 1.0
    for j in range(1, L + 1):  # xi_(j) = A2 xi_(j-1) + G0 f_(j-1) + G1 f_j
        xi[j] = A2 @ xi[j - 1] + G0 @ fmap(j - 1) + G1 @ fmap(j)
    rows = np.zeros((L * nch, nv))
    for i in range(1, L + 1):  # y_(k+i) = sum_p C_p xi_(i-p-1) + D0_p f_(i-p-1) + D1_p f_(i-p)
        blk = rows[(i - 1) * nch:i * nch]
        for p in range(W):
            blk += C[p] @ xi[i - p - 1] + D0[p] @ fmap(i - p - 1) + D1[p] @ fmap(i - p)
    return np.ascontiguousarray(rows[:, :nz]), np.ascontiguousarray(rows[:, nz:])


def augment(real, W: int, nf: int):
    """The two-state realisation (:func:`edge.estimator.operator._two_state_realisation`)
    with the last ``W`` grid states and forces: each diagonal block of the modes becomes
    ``[xi_b,k, xi_b,k-1, .., xi_b,k-W+1]`` (a shift register below the block, still block
    diagonal), the previous force's block ``[f_(k-W+1), .., f_k]`` (``f_k`` still the last
    ``nf`` states). Returns ``(real, cols)``, ``cols[q]`` the columns of ``xi_(k-q)`` (in the
    realisation's order)."""
    blk_ptr, dat_ptr, A_data, Acoup, Gamma, S, E, P, Pinv = real
    ns0 = Gamma.shape[0] - nf  # modal states
    nb = len(blk_ptr) - 2  # modal blocks (the last block is the previous force's)
    nblk, ndat, data, now = [0], [0], [], []
    cols = [[] for _ in range(W)]
    for b in range(nb):
        s0, m = int(blk_ptr[b]), int(blk_ptr[b + 1] - blk_ptr[b])
        Ab = A_data[dat_ptr[b]:dat_ptr[b] + m * m].reshape(m, m)
        big = np.eye(W * m, k=-m)  # xi_(k-q) <- xi_(k-q+1)
        big[:m, :m] = Ab
        data.append(big.ravel())
        base = nblk[-1]
        now.append((base, s0, m))
        for q in range(W):
            cols[q].extend(range(base + q * m, base + (q + 1) * m))
        nblk.append(base + W * m)
        ndat.append(ndat[-1] + (W * m) ** 2)
    nt = W * nf
    data.append(np.eye(nt, k=nf).ravel())  # [f_(k-W+1), .., f_k] -> [.., f_k, 0] (+ Gamma f)
    nblk.append(nblk[-1] + nt)
    ndat.append(ndat[-1] + nt * nt)
    ns = nblk[-1]
    old = np.zeros(ns, dtype=int) - 1  # new state -> old state (-1: none)
    for base, s0, m in now:
        old[base:base + m] = np.arange(s0, s0 + m)
    old[ns - nf:] = np.arange(ns0, ns0 + nf)
    keep = old >= 0

    def cols_of(X):
        out = np.zeros((X.shape[0], ns))
        out[:, keep] = X[:, old[keep]]
        return out

    def rows_of(X):
        out = np.zeros((ns, X.shape[1]))
        out[keep] = X[old[keep]]
        return out

    new = (np.array(nblk, dtype=np.int64), np.array(ndat, dtype=np.int64), np.concatenate(data),
           rows_of(Acoup), rows_of(Gamma), cols_of(S), cols_of(E), cols_of(P), rows_of(Pinv))
    return new, [np.array(c) for c in cols]


def models_chain(bundle) -> bool:
    """The bundle's Tikhonov estimator models its converter (``chain.markov``, schema 10;
    point samples for ``ideal`` and for older bundles)."""
    chain = getattr(bundle, "chain", None)
    return chain is not None and not chain.ideal and bool(getattr(chain, "markov", False))


def chain_realisation(bundle, real, A, w2, Ct, PhiB, L: int, modal: bool = False):
    """``(real, O, J)``: the realisation with the older forces the conversions need
    (:func:`augment`) and the window of the next L conversions (:func:`chain_window`).
    ``A``: the dense state matrix of ``real``; ``w2``, ``Ct``, ``PhiB``: the modal model.
    ``modal``: ``Ct`` is diagonal (proportional damping): the conversions' rows mode by mode
    (:mod:`edge.estimator.modal_conversion`), else through the whole model
    (:func:`conversion_rows`)."""
    n, nf = len(w2), PhiB.shape[1]
    S, Gamma, Acoup = real[5], real[4], real[3]
    if modal:  # 2x2 per mode
        C, D0, D1 = modal_conversion_rows(tap_grid(bundle.chain, bundle.dt, S.shape[0]),
                                          bundle.dt, w2, np.diag(Ct), PhiB, S[:, :2 * n],
                                          S[:, 2 * n:])
    else:
        perm = np.arange(2 * n).reshape(2, n).T.ravel()  # [q; qd] -> per mode [q_i, qd_i]
        # x' = Ac x + Bc f, x = [q; qd]: q'' + Ct q' + diag(w2) q = PhiB f
        Ac = np.block([[np.zeros((n, n)), np.eye(n)], [-np.diag(w2), -Ct]])[np.ix_(perm, perm)]
        Bc = np.vstack([np.zeros((n, nf)), PhiB])[perm]
        C, D0, D1 = conversion_rows(bundle.chain, bundle.dt, Ac, Bc, S[:, :2 * n], S[:, 2 * n:])
    big, cols = augment(real, C.shape[0], nf)
    O, J = chain_window(C, D0, D1, A[:2 * n, :2 * n], Acoup[:2 * n], Gamma[:2 * n], L, cols)
    return big, O, J


def history_columns(op, W: int) -> list:
    """The state columns of ``xi_(k-q)``, ``q < W``, of an operator whose realisation keeps
    the last ``W`` grid states (:func:`augment`: each modal block ``[xi_b,k, .., xi_b,k-W+1]``,
    the last block the forces)."""
    ptr = op.blk_ptr
    cols = [[] for _ in range(W)]
    for b in range(len(ptr) - 2):
        s, m = int(ptr[b]), int(ptr[b + 1] - ptr[b]) // W
        for q in range(W):
            cols[q].extend(range(s + q * m, s + (q + 1) * m))
    return [np.array(c, dtype=np.int64) for c in cols]


def carry_history(old, x_old, new, x_new) -> None:
    """Carry the older grid states a converter's window reaches back to (``xi_(k-q)``, ``q =
    1 .. W-1``) over a swap of ``old`` for ``new`` (``x_new`` in place), through the physical
    coordinates as the current state: ``[u; v]_(k-q) = P_uv xi_(k-q)`` in the old model's
    modes, ``xi_(k-q) = Pinv_uv [u; v]_(k-q)`` in the new one's. Nothing for point samples
    (``W = 1``) or operators that keep different histories."""
    W = old.info.get("force_tail", 0) // max(old.n_forces, 1)
    if W < 2 or new.info.get("force_tail", 0) != W * new.n_forces:
        return
    co, cn = history_columns(old, W), history_columns(new, W)
    n2 = 2 * (old.P.shape[0] // 3)  # rows u and v of the physical state [u; v; a]
    Puv, Pinv_uv = old.P[:n2, co[0]], new.Pinv[cn[0], :n2]
    for q in range(1, W):
        x_new[cn[q]] = Pinv_uv @ (Puv @ x_old[co[q]])
