"""The recorder's chunk buffers: one preallocated chunk of packed records per stream, filled
by one compiled call per append (:func:`_pack`); :mod:`edge.daemon.recorder` ships them."""

from __future__ import annotations

import numpy as np
from numba import njit

from edge.daemon.vsr import record_dtype


@njit(cache=True)
def _pack(u8, rs, fill, seq, t, V, f, i0, k):
    """Records ``fill .. fill+k-1`` of the packed buffer ``u8`` (``rs`` bytes each, layout
    :func:`edge.daemon.vsr.record_dtype`, little endian) from rows ``i0 .. i0+k-1`` of
    ``seq (n,) int64``, ``t (n,) int64``, ``V (n, ncol) float64``, ``f (n,) uint8``.
    Plain twin: the structured-array field assignments in ``tests/test_recorder.py``."""
    nc = V.shape[1]
    for r in range(k):
        o = (fill + r) * rs
        a = seq[i0 + r]
        b = t[i0 + r]
        for q in range(8):
            u8[o + q] = (a >> (8 * q)) & 0xFF
            u8[o + 8 + q] = (b >> (8 * q)) & 0xFF
        for j in range(nc):
            bits = np.float64(V[i0 + r, j]).view(np.uint64)
            oo = o + 16 + 8 * j
            for q in range(8):
                u8[oo + q] = (bits >> np.uint64(8 * q)) & np.uint64(0xFF)
        u8[o + 16 + 8 * nc] = f[i0 + r]
    return fill + k


class _Stream:
    """Chunk buffer for one kind; filled by the loop thread, shipped to the writer."""

    def __init__(self, kind: str, columns: list[str], units: list[str], chunk: int):
        self.kind = kind
        self.columns = list(columns)
        self.units = list(units)
        self.dtype = record_dtype(len(columns))
        self.buf = np.zeros(chunk, self.dtype)
        self.u8 = self.buf.view(np.uint8)  # the records' bytes (edge.daemon.recorder._pack)
        self.rs = self.dtype.itemsize
        self.fill = 0
        self.first_t = 0.0
        self.count = 0
        # load (or compile) the kernel now, before the daemon's release after start-up: a
        # first load at the first chunk would fault LLVM's pages back in (~10 MB resident)
        # after the release; no rows, no side effect
        z = np.zeros(0, np.int64)
        _pack(self.u8, self.rs, 0, z, z, np.zeros((0, len(columns))), np.zeros(0, np.uint8),
              0, 0)
