"""Spectral radius of the estimator's closed loop ``A_cl = A - Gamma Kx`` from a smaller matrix
with the same nonzero eigenvalues.

A converter's window keeps older grid states and forces in the state (:mod:`edge.estimator.
chain_window`): nothing in A reads them (their columns of A are zero) and no force enters
them (their rows of Gamma are zero), only the gain does. With ``h`` those states and ``y``
the others, ``A_cl[:, h] = -Gamma Kx[:, h]`` and ``A_cl[h, h] = 0``, so::

    A_cl = [[A_yy, Gamma_y], [A_hy, 0]] [[I, 0], [0, c]],        c = -Kx[:, h]

and, as ``PQ`` and ``QP`` have the same nonzero eigenvalues, ``A_cl`` has those of::

    R = [[A_yy, Gamma_y], [c A_hy, 0]]                            (|y| + nf square)

(``A_yy = A_cl[y, y]``, ``A_hy = A_cl[h, y]``): the spectral radius from an eigenproblem of
about half the size (an eighth of the work).
"""

from __future__ import annotations

import numpy as np


def history_states(A, Gamma) -> np.ndarray:
    """Indices of the states no column of A reads and no force enters (bool mask)."""
    return ~np.any(A != 0, axis=0) & ~np.any(Gamma != 0, axis=1)


def reduced_closed_loop(A, Gamma, Kx) -> np.ndarray:
    """``R`` of the module docstring (``A - Gamma Kx`` itself when no state is history)."""
    Acl = A - Gamma @ Kx
    h = history_states(A, Gamma)
    if not np.any(h):
        return Acl
    y = ~h
    nf = Gamma.shape[1]
    ny = int(np.count_nonzero(y))
    R = np.zeros((ny + nf, ny + nf))
    R[:ny, :ny] = Acl[np.ix_(y, y)]
    R[:ny, ny:] = Gamma[y]
    # c A_hy, c = -Kx[:, h]
    R[ny:, :ny] = -Kx[:, h] @ Acl[np.ix_(h, y)]
    return R


def spectral_radius(A, Gamma, Kx, reduced: bool = True) -> float:
    """``max |eig(A - Gamma Kx)|``, from :func:`reduced_closed_loop` unless not ``reduced``."""
    M = reduced_closed_loop(A, Gamma, Kx) if reduced else A - Gamma @ Kx
    return float(np.max(np.abs(np.linalg.eigvals(M)))) if M.size else 0.0
