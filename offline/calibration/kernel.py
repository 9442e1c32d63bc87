"""Compiled kernel of the calibration's forward model: the state recursion x_{k+1} = Φ x_k + U_k.

Stumpy style: :func:`offline.calibration.forward.propagate` validates and reshapes once and
calls the ``_``-prefixed numba kernel; :func:`offline.calibration.forward.propagate_loop` is the
plain NumPy twin (``tests/test_calibration_forward.py`` compares them).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _propagate(Phi, U, X):  # pragma: no cover - compiled; twin: forward.propagate_loop
    """X[0] = 0, X[k+1] = Φ X[k] + U[k] for every column q.

    Phi : (m, m) ; U : (nt-1, m, q) ; X : (nt, m, q) preallocated output."""
    nt1, m, nq = U.shape
    for i in range(m):
        for q in range(nq):
            X[0, i, q] = 0.0
    for k in range(nt1):
        for i in range(m):
            for q in range(nq):
                # x_{k+1} = Φ x_k + u_k
                acc = U[k, i, q]
                for j in range(m):
                    acc += Phi[i, j] * X[k, j, q]
                X[k + 1, i, q] = acc


def warm() -> None:
    """Compile (or load from the numba cache) before a timed run."""
    _propagate(np.eye(1), np.zeros((1, 1, 1)), np.zeros((2, 1, 1)))
