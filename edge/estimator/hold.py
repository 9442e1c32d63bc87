"""Hold of non-finite samples, shared by the compiled estimator kernels (numba).

A non-finite channel value (NaN, inf: a dead or saturated sensor, a lost conversion) is
replaced by that channel's last finite value and the estimate is flagged
:data:`edge.flags.FLAG_HELD`. The NumPy twins (``edge.estimator.reference``,
``edge.estimator.smoother_reference``) do the same with ``np.where``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from edge.flags import FLAG_HELD


@njit(cache=True, nogil=True)
def _hold_row(Y, j, last):  # pragma: no cover - compiled
    """Update ``last`` (nch,) with the finite values of row ``j`` of ``Y`` (nb, nch).

    Returns ``FLAG_HELD`` (uint8) when a channel was non-finite (its last value is kept),
    else 0.
    """
    flag = np.uint8(0)
    for c in range(Y.shape[1]):
        val = Y[j, c]
        if np.isfinite(val):
            last[c] = val
        else:
            flag |= FLAG_HELD
    return flag
