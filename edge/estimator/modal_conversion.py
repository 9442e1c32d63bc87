"""A conversion's rows through a modal model with one 2x2 block per mode (proportional
damping): :func:`edge.estimator.chain_window.conversion_rows` mode by mode.

With ``Ac`` block diagonal the augmented matrix of the conversion (``Maug = [[Ac, Bc, 0], [0,
0, I], [0, 0, 0]]``) couples the modes only through the force rows, which no mode feeds: the
rows of mode ``b`` of ``exp(Maug sigma)`` are those of ``exp(M_b sigma)``, ``M_b = [[A_b, B_b,
0], [0, 0, I], [0, 0, 0]]`` of size ``2 + 2 nf``. A conversion's taps in one sample interval
lie at ``sigma_* + k spacing`` (``k = 0 .. T-1`` from the interval's last tap back), so their
weighted sum is::

    sum_k h_k exp(M_b (sigma_* + k spacing)) = exp(M_b sigma_*) P_b,
    P_b = sum_k h_k E_b^k,   E_b = exp(M_b spacing)

the same products the dense routine forms tap by tap, as one matrix polynomial per mode
(:func:`power_sum`), without T products of the full model. Each mode's exponential is scaled
for that mode and balanced (:func:`balance_stack`): 1e-13 of the rows' largest entry against a
40-digit reference on examples/cantilever_params.toml, where the whole model's exponential,
scaled for its stiffest mode, is off by 3.3e-6 (docs/inverse.md).
"""

from __future__ import annotations

import numpy as np

from edge.estimator.expm import expm_stack


def power_sum(X: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``P_b = sum_k w_k X_b^k`` (``k = 0 .. T-1``) of each matrix of a stack X (nb, m, m).

    Blocked Horner in ``Y = X^B`` (``B ~ sqrt(T)``): ``P = sum_a Y^a Q_a`` with ``Q_a =
    sum_j w_(aB+j) X^j``, so 2 sqrt(T) products of the stack instead of T.
    """
    w = np.asarray(w, dtype=float)
    T = w.size
    nb, m, _ = X.shape
    B = max(1, int(np.ceil(np.sqrt(T))))
    na = -(-T // B)
    pw = np.empty((B, nb, m, m))
    pw[0] = np.eye(m)
    for j in range(1, B):  # X^j
        pw[j] = pw[j - 1] @ X
    Y = pw[B - 1] @ X  # X^B
    wa = np.zeros(na * B)
    wa[:T] = w
    # Q_a = sum_j w_(aB+j) X^j
    Q = (wa.reshape(na, B) @ pw.reshape(B, -1)).reshape(na, nb, m, m)
    P = Q[na - 1]
    for a in range(na - 2, -1, -1):  # P = Q_a + Y P
        P = Y @ P + Q[a]
    return P


def balance_stack(A: np.ndarray, sweeps: int = 20) -> np.ndarray:
    """Powers of two ``d`` (k, m) with ``D^-1 A_i D`` (``D = diag(d_i)``) of balanced row and
    column norms (Parlett-Reinsch, as LAPACK's gebal without permutations): exact in
    floating point, so ``exp(A_i) = D exp(D^-1 A_i D) D^-1`` to the exponential's round-off
    relative to the balanced matrix (a mode's ``[q, qd]`` differ by ``omega`` in scale: without
    it the exponential of a stiff mode loses up to 1e-6 of its largest entry)."""
    B = np.array(A, dtype=float)
    k, m, _ = B.shape
    d = np.ones((k, m))
    off = 1.0 - np.eye(m)
    for _ in range(sweeps):
        moved = False
        for i in range(m):
            c = np.abs(B[:, :, i]) @ off[:, i]  # column norm without the diagonal
            r = np.abs(B[:, i, :]) @ off[i]  # row norm without the diagonal
            ok = (c > 0) & (r > 0)
            # f = 2^round(log2 sqrt(r / c)): column i times f, row i over f
            f = np.ones(k)
            f[ok] = 2.0 ** np.round(0.5 * np.log2(r[ok] / c[ok]))
            f[(c * f + r / f) >= 0.95 * (c + r)] = 1.0
            if np.any(f != 1.0):
                moved = True
                B[:, :, i] *= f[:, None]
                B[:, i, :] /= f[:, None]
                d[:, i] *= f
        if not moved:
            break
    return d


def mode_matrices(w2, c, PhiB) -> np.ndarray:
    """``M_b = [[A_b, B_b, 0], [0, 0, I], [0, 0, 0]]`` per mode, (n, 2 + 2 nf, 2 + 2 nf):
    ``A_b = [[0, 1], [-w2_b, -c_b]]``, ``B_b = [0; PhiB_b]`` (q'' + c q' + w2 q = PhiB f)."""
    n, nf = PhiB.shape
    M = np.zeros((n, 2 + 2 * nf, 2 + 2 * nf))
    M[:, 0, 1] = 1.0
    M[:, 1, 0] = -np.asarray(w2, dtype=float)
    M[:, 1, 1] = -np.asarray(c, dtype=float)
    M[:, 1, 2:2 + nf] = PhiB
    M[:, 2:2 + nf, 2 + nf:] = np.eye(nf)
    return M


def modal_conversion_rows(grid, dt: float, w2, c, PhiB, S_xi, S_f):
    """``(C, D0, D1)`` of :func:`edge.estimator.chain_window.conversion_rows` for the modal
    model ``q_b'' + c_b q_b' + w2_b q_b = PhiB_b f`` (``x`` per mode ``[q_b, qd_b]``, the
    columns of ``S_xi (nch, 2n)`` in that order; ``S_f (nch, nf)``); ``grid``: the taps
    ``(h, spacing, W, p, sigma)`` of :func:`edge.estimator.chain_window.tap_grid`."""
    nch = S_xi.shape[0]
    n, nf = PhiB.shape
    h, spacing, W, p, sigma = grid
    Mb = mode_matrices(w2, c, PhiB)
    m = Mb.shape[1]
    d = balance_stack(Mb)
    Mb = Mb * d[:, None, :] / d[:, :, None]  # D^-1 M_b D
    Ef = expm_stack(Mb * spacing) if spacing > 0 else np.broadcast_to(np.eye(m), Mb.shape)
    C, D0, D1 = np.zeros((W, nch, 2 * n)), np.zeros((W, nch, nf)), np.zeros((W, nch, nf))
    for ch in range(nch):
        s_b = S_xi[ch].reshape(n, 2)  # each mode's point-sample row over [q_b, qd_b]
        for pj in np.unique(p[ch]):
            idx = np.flatnonzero(p[ch] == pj)
            last = idx[-1]  # the interval's last tap: the smallest sigma
            wk = h[idx][::-1]  # weight of sigma_* + k spacing
            # the mode's x rows of sum_k h_k exp(M_b sigma_k) = exp(M_b sigma_*) P_b
            Q = expm_stack(Mb * sigma[ch, last]) @ power_sum(Ef, wk)
            Q = Q * d[:, :, None] / d[:, None, :]  # D Q D^-1
            r = np.einsum("bi,bij->bj", s_b, Q[:, :2, :])
            C[pj, ch] = r[:, :2].ravel()
            # force rows of exp(M sigma): [0, I, sigma I]: the point sample's S_f f(sigma)
            acc_f = r[:, 2:2 + nf].sum(axis=0) + S_f[ch] * wk.sum()
            acc_d = r[:, 2 + nf:].sum(axis=0) + S_f[ch] * (h[idx] @ sigma[ch, idx])
            # [x; p; p'] from [xi; f_j; (f_j+1 - f_j) / dt]: f_j weight b - c / dt, f_j+1 c / dt
            D0[pj, ch] = acc_f - acc_d / dt
            D1[pj, ch] = acc_d / dt
    return C, D0, D1
