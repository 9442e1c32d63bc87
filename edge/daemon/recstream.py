"""The recorder's chunk buffers: one preallocated chunk of records per stream (the record
layout of :func:`edge.daemon.vsr.record_dtype`), filled by :meth:`_Stream.put`;
:mod:`edge.daemon.recorder` ships them."""

from __future__ import annotations

import numpy as np

from edge.daemon.vsr import record_dtype


class _Stream:
    """Chunk buffer for one kind; filled by the loop thread, shipped to the writer."""

    def __init__(self, kind: str, columns: list[str], units: list[str], chunk: int):
        self.kind = kind
        self.columns = list(columns)
        self.units = list(units)
        self.dtype = record_dtype(len(columns))
        self.buf = np.zeros(chunk, self.dtype)
        self.fill = 0
        self.first_t = 0.0
        self.count = 0

    def put(self, seq, t_ns, values, flags, i0: int, k: int) -> None:
        """Records ``fill .. fill+k-1`` from rows ``i0 .. i0+k-1`` of ``seq (n,) int64``,
        ``t_ns (n,) int64``, ``values (n, ncol) float64``, ``flags (n,) uint8``."""
        b = self.buf[self.fill:self.fill + k]
        b["seq"], b["t_ns"] = seq[i0:i0 + k], t_ns[i0:i0 + k]
        b["v"], b["flags"] = values[i0:i0 + k], flags[i0:i0 + k]
        self.fill += k
