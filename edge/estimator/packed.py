"""The Tikhonov estimator's operator and state packed into three typed arrays.

A compiled call pays for each array argument (numba's type check and unboxing, several us
for the kernel's 16 arrays after a 1 ms sleep has cooled the caches). :class:`Packed` holds a
copy of the operator (read-only) and the estimator's state in one float64, one int64 and one
uint8 array; :class:`edge.estimator.Estimator` uses its views as its state, so the kernel
sees the same numbers whichever way it is called. :func:`_process_packed` is
:func:`edge.estimator.kernel._process` on the packed arrays (three arguments instead of 16);
its NumPy twin is the reference estimator (``tests/test_estimator.py``).

Layout: ``i8[0:8]`` sizes (``P_*``), ``i8[8 + field]`` the element offset of each field.

numba's on-disk cache of :func:`_process_packed` holds the kernel compiled into it and is
keyed to this file only: after a change of :mod:`edge.estimator.kernel` in a working tree,
clear ``edge/estimator/__pycache__/packed.*.nb*`` (an install rewrites every file, which
invalidates it).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from edge.estimator.kernel import _process
from edge.packing import OFF, pack

# int64 header: sizes
P_NS, P_NF, P_NOUT, P_NCH, P_L, P_NC, P_NBLK = range(7)
_OFF = OFF  # edge.packing layout
# fields: float64 | int64 | uint8
(A_DATA, ACOUP, GAMMA, KX, KY, E, X, XN, FS, ZS, YBUF, LAST,
 BLK_PTR, DAT_PTR, COUNTERS,
 FBUF) = range(16)
_N = 16


class Packed:
    """Operator copy and zeroed state of :class:`edge.estimator.operator.StepOperator` ``op``
    in three arrays (:attr:`args`); :meth:`view` gives each field as a NumPy view."""

    def __init__(self, op):
        ns, nf, nout, nch, L = (op.n_state, op.n_forces, op.n_outputs, op.n_channels,
                                op.window)
        nc = op.Acoup.shape[1]
        nblk = op.blk_ptr.shape[0] - 1
        fields = {  # field: (array, shape, initial value or None)
            A_DATA: ("f8", op.A_data.shape, op.A_data), ACOUP: ("f8", (ns, nc), op.Acoup),
            GAMMA: ("f8", (ns, nf), op.Gamma), KX: ("f8", (nf, ns), op.Kx),
            KY: ("f8", (nf, L * nch), op.Ky), E: ("f8", (nout, ns), op.E),
            X: ("f8", (ns,), None), XN: ("f8", (ns,), None), FS: ("f8", (nf,), None),
            ZS: ("f8", (nout,), None), YBUF: ("f8", (L, nch), None),
            LAST: ("f8", (nch,), None),
            BLK_PTR: ("i8", (nblk + 1,), op.blk_ptr), DAT_PTR: ("i8", (nblk + 1,), op.dat_ptr),
            COUNTERS: ("i8", (1,), None), FBUF: ("u8", (L,), None),
        }
        self.f8, self.i8, self.u8, views = pack([fields[k] for k in range(_N)],
                                                (ns, nf, nout, nch, L, nc, nblk))
        self._views = dict(enumerate(views))

    def view(self, field: int) -> np.ndarray:
        return self._views[field]

    @property
    def args(self) -> tuple:
        """``(f8, i8, u8)``: the arguments of :func:`_process_packed`."""
        return self.f8, self.i8, self.u8


@njit(cache=True, nogil=True)
def _process_packed(Y, F, Z, flags, f8, i8, u8):  # pragma: no cover - compiled
    """:func:`edge.estimator.kernel._process` on a :class:`Packed` estimator ``f8, i8, u8``.

    Parameters
    ----------
    Y : float64 (nb, nch)  measurements; F (nb, nf), Z (nb, nout), flags uint8 (nb,): out
    """
    ns, nf, nout, nch = i8[P_NS], i8[P_NF], i8[P_NOUT], i8[P_NCH]
    L, nc, nblk = i8[P_L], i8[P_NC], i8[P_NBLK]
    a, b = i8[_OFF + A_DATA], i8[_OFF + A_DATA + 1]  # A_data: up to the next field
    o = i8[_OFF:_OFF + _N]
    _process(Y, F, Z, flags, i8[o[BLK_PTR]:o[BLK_PTR] + nblk + 1],
             i8[o[DAT_PTR]:o[DAT_PTR] + nblk + 1], f8[a:b],
             f8[o[ACOUP]:o[ACOUP] + ns * nc].reshape((ns, nc)),
             f8[o[GAMMA]:o[GAMMA] + ns * nf].reshape((ns, nf)),
             f8[o[KX]:o[KX] + nf * ns].reshape((nf, ns)),
             f8[o[KY]:o[KY] + nf * L * nch].reshape((nf, L * nch)),
             f8[o[E]:o[E] + nout * ns].reshape((nout, ns)),
             f8[o[X]:o[X] + ns], f8[o[XN]:o[XN] + ns], f8[o[FS]:o[FS] + nf],
             f8[o[ZS]:o[ZS] + nout], f8[o[YBUF]:o[YBUF] + L * nch].reshape((L, nch)),
             u8[o[FBUF]:o[FBUF] + L], f8[o[LAST]:o[LAST] + nch],
             i8[o[COUNTERS]:o[COUNTERS] + 1])


@njit(cache=True, nogil=True)
def _reset_packed(f8, i8, u8):  # pragma: no cover - compiled
    """:meth:`edge.estimator.Estimator.reset` on a :class:`Packed` estimator: state, window,
    held values and the sample count to zero (the structure at rest)."""
    o = i8[_OFF:_OFF + _N]
    ns, nch, L = i8[P_NS], i8[P_NCH], i8[P_L]
    f8[o[X]:o[X] + ns] = 0.0
    f8[o[YBUF]:o[YBUF] + L * nch] = 0.0
    u8[o[FBUF]:o[FBUF] + L] = 0
    f8[o[LAST]:o[LAST] + nch] = 0.0
    i8[o[COUNTERS]] = 0
