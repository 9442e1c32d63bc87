"""The Tikhonov solution of the fixed-lag window (paper 004 eq. 20-24), NumPy only.

Stacking the next L measurements ``Y = O x_k + J F`` (observability rows ``O_i = S A^(i+1)``,
block-Toeplitz Markov parameters ``J_ij = S A^(i-j) Gamma``), the penalised least-squares
forces are ``F = (J^T W J + alpha R^T R)^-1 J^T W (Y - O x_k)``; :func:`tikhonov_gain` returns
the first nf rows of that gain, which :func:`edge.estimator.operator.derive_operator` turns
into the step operator.
"""

from __future__ import annotations

import numpy as np


class EstimatorError(ValueError):
    """The estimator cannot be built from these matrices/settings (with the reason)."""


def window_matrices(A, Gamma, S, L):
    """Observability rows O (L nch, ns) and block-Toeplitz Markov matrix J (L nch, L nf)."""
    nch, nf = S.shape[0], Gamma.shape[1]
    O = np.zeros((L * nch, A.shape[0]))
    markov = []  # S A^i Gamma, i = 0..L-1
    SAi = S.copy()  # S A^i
    for i in range(L):
        markov.append(SAi @ Gamma)
        SAi = SAi @ A
        O[i * nch:(i + 1) * nch] = SAi  # S A^(i+1)
    J = np.zeros((L * nch, L * nf))
    for i in range(L):
        for j in range(i + 1):
            J[i * nch:(i + 1) * nch, j * nf:(j + 1) * nf] = markov[i - j]
    return O, J


def force_scales(bundle) -> np.ndarray:
    """Scale of each force (``Force.scale``, 1 when absent), shape (nf,); validated > 0."""
    s = np.array([float(getattr(f, "scale", 1.0)) for f in bundle.forces])
    bad = [f.name for f, v in zip(bundle.forces, s) if not (np.isfinite(v) and v > 0)]
    if bad:
        raise EstimatorError(f"force scale must be finite and > 0: {', '.join(bad)}")
    return s


def first_difference(L: int, nf: int) -> np.ndarray:
    """R with ``R F = [f_1; f_2 - f_1; ...; f_L - f_(L-1)]`` (the ``f_1 - f_0`` term's
    ``f_0``, the previous force, is added by the caller), shape (L nf, L nf)."""
    return np.eye(L * nf) - np.eye(L * nf, k=-nf)


def tikhonov_gain(J, wbar, alpha, nf, bundle=None, R=None):
    """First nf rows of ``(J^T W J + alpha R^T R)^-1 J^T W``, of the inverse itself, and the
    condition of J^T W J (``R = I``: zeroth-order Tikhonov, eq. 24).

    Raises EstimatorError naming the forces that the channels cannot see, or when alpha = 0
    leaves the window problem singular.
    """
    sw = np.sqrt(wbar)[:, None]
    # structural identifiability: the responses of all channels over the window to a force
    # at the first window step (first block column of J) must separate the nf forces
    first = sw * J[:, :nf]
    scale = float(np.max(np.abs(sw * J))) if J.size else 0.0
    colnorm = np.linalg.norm(first, axis=0)
    blind = [j for j in range(nf) if colnorm[j] <= 1e-12 * max(scale, 1e-300)]
    sv1 = np.linalg.svd(first, compute_uv=False)
    if blind or scale == 0.0 or sv1[-1] <= 1e-10 * sv1[0]:
        names = [bundle.forces[j].name for j in blind] if bundle is not None else blind
        who = f" (not seen by any channel: {', '.join(map(str, names))})" if names else \
            " (two or more forces produce the same channel responses)"
        raise EstimatorError(
            f"forces are not identifiable from the sensors{who}. Add a sensor at or near each "
            "force, identify fewer forces than channels, or use a longer window.")
    Jw = J * wbar[:, None]
    JtWJ = J.T @ Jw
    sv = np.linalg.svd(sw * J, compute_uv=False)
    cond = float(sv[0] / sv[-1]) ** 2 if sv[-1] > 0 else float("inf")
    if alpha == 0.0 and not cond < 1e14:
        raise EstimatorError(
            f"alpha = 0 leaves the windowed problem singular (cond(J^T W J) = {cond:.2e}); "
            "use alpha > 0 (e.g. from the L-curve).")
    # F = (J^T W J + alpha R^T R)^-1 J^T W (Y - O x)    (R = I: eq. 24)
    RtR = np.eye(JtWJ.shape[0]) if R is None else R.T @ R
    Hinv = np.linalg.inv(JtWJ + alpha * RtR)
    G = Hinv @ Jw.T
    return np.ascontiguousarray(G[:nf]), np.ascontiguousarray(Hinv[:nf]), cond
