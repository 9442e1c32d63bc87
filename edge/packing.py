"""Many fields in three typed arrays, the layout the compiled calls take as arguments.

Shared by the daemon's per-sample state (:mod:`edge.daemon.arena`) and the estimator's packed
operator and state (:mod:`edge.estimator.packed`): ``i8[0:OFF]`` holds a header of sizes,
``i8[OFF + k]`` the element offset of field ``k`` in its array (``f8``, ``i8`` or ``u8``);
the fields of one kind follow each other in field order, the ``i8`` ones after the offsets.
"""

from __future__ import annotations

import numpy as np

#: i8[OFF + field] = offset of the field in its array; i8[0:OFF] = the header.
OFF = 8

_DTYPES = {"f8": np.float64, "i8": np.int64, "u8": np.uint8}


def pack(fields, header) -> tuple:
    """Allocate and lay out ``fields``.

    Parameters
    ----------
    fields : sequence of (kind, shape, init)
        Field ``k``: ``kind`` one of ``"f8"``, ``"i8"``, ``"u8"``; ``shape`` of its view;
        ``init`` an array copied into it, or None (zeros).
    header : sequence of int, at most :data:`OFF` values for ``i8[0:len(header)]``.

    Returns
    -------
    f8, i8, u8 : ndarray
        The three arrays.
    views : list of ndarray
        Field ``k`` as a view of its array, in its shape.
    """
    n = len(fields)
    size = {"f8": 0, "i8": OFF + n, "u8": 0}
    offset = []
    for kind, shape, _ in fields:
        offset.append(size[kind])
        size[kind] += int(np.prod(shape))
    arrays = {k: np.zeros(size[k], _DTYPES[k]) for k in size}
    i8 = arrays["i8"]
    i8[:len(header)] = header
    views = []
    for k, (kind, shape, init) in enumerate(fields):
        o = offset[k]
        i8[OFF + k] = o
        v = arrays[kind][o:o + int(np.prod(shape))].reshape(shape)
        if init is not None:
            v[...] = init
        views.append(v)
    return arrays["f8"], i8, arrays["u8"], views
