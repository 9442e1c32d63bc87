"""Compiled encoders of the ``estimates`` payloads (layouts: :mod:`edge.daemon.payloads`).

:func:`_encode_into` writes either layout into a preallocated byte buffer in one call (JSON
byte for byte as ``json.dumps(..., separators=(",", ":"))``, floats as ``repr`` through
:mod:`edge.daemon.floatrepr`); :func:`_batch_take` is the publisher's batching and encoding
in one call. Their plain twin is the ``json.dumps``/``struct`` encoder in the tests
(``tests/test_mqtt.py``). Kept apart from :mod:`edge.daemon.payloads` so that reading
payloads (the monitor, ``--help``) does not load numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from edge.daemon.floatrepr import _put_float, _put_int
from edge.daemon.payloads import BIN_HEADER, BIN_MAGIC

# byte strings the JSON layout is made of (module constants: frozen into the kernels)
_J_SEQ, _J_N, _J_T, _J_V, _J_F, _J_S, _J_NULL = (
    np.frombuffer(b, np.uint8).copy() for b in (
        b'{"seq":', b',"n":', b',"t_ns":[', b'],"v":[', b',"flags":[', b',"s":[', b"null"))
_MAGIC = np.frombuffer(BIN_MAGIC, np.uint8).copy()


def std_rows(std, ncol: int) -> np.ndarray:
    """``std`` as the 2-D float64 array :func:`_encode_into` takes: ``(1, ncol)`` for one
    value per column, ``(n, ncol)`` per value, ``(0, ncol)`` for none."""
    if std is None:
        return np.zeros((0, ncol))
    S = np.asarray(std, dtype=np.float64)
    return np.ascontiguousarray(S.reshape(1, ncol) if S.ndim == 1 else S)


def payload_capacity(n: int, ncol: int, has_std: bool, binary: bool) -> int:
    """Bytes that always hold the payload of ``n`` rows of ``ncol`` values: a float takes
    at most 24 characters in JSON (``-2.2250738585072014e-308``), an int64 20."""
    k = 2 if has_std else 1
    if binary:
        return BIN_HEADER.size + n * (9 + 8 * ncol * k)
    return 96 + n * (26 + k * (3 + 25 * ncol))


@njit(cache=True)
def _put(out, p, lit):
    for i in range(lit.shape[0]):
        out[p + i] = lit[i]
    return p + lit.shape[0]


@njit(cache=True)
def _put_le(out, p, v, nbytes):
    """``v`` (int) as ``nbytes`` little-endian bytes (two's complement)."""
    for i in range(nbytes):
        out[p + i] = (v >> (8 * i)) & 0xFF
    return p + nbytes


@njit(cache=True)
def _put_rows(out, p, V, n, S, std):
    """JSON rows ``[a,b],[c,d]`` (without the outer brackets) of ``V[:n]``, or of the
    standard deviations ``S`` (row 0 for every row when it has one) where ``V`` is finite;
    ``null`` for non-finite numbers."""
    ncol = V.shape[1]
    for i in range(n):
        if i:
            out[p] = 44  # ','
            p += 1
        out[p] = 91  # '['
        p += 1
        for j in range(ncol):
            if j:
                out[p] = 44
                p += 1
            x = V[i, j]
            if std and np.isfinite(x):
                x = S[i if S.shape[0] > 1 else 0, j]
            if np.isfinite(x):
                p = _put_float(out, p, x)
            else:
                p = _put(out, p, _J_NULL)
        out[p] = 93  # ']'
        p += 1
    return p


@njit(cache=True)
def _encode_into(out, binary, seq0, n, t, V, f, S, has_s, sc):
    """Write the payload of rows ``0 .. n-1`` of ``t (>= n,) int64``, ``V (>= n, ncol)
    float64``, ``f (>= n,) uint8`` (C-contiguous) with first sequence number ``seq0`` into
    ``out`` (:func:`payload_capacity` bytes); with ``has_s`` the standard deviations ``S``
    (:func:`std_rows`); ``sc (n ncol,)`` float64 scratch for the binary std block. Returns
    the payload's length in bytes. JSON as ``json.dumps(separators=(",", ":"))``; binary:
    the ``VSE1`` layout (little-endian host)."""
    ncol = V.shape[1]
    if binary:
        p = _put(out, 0, _MAGIC)
        p = _put_le(out, p, 2 if has_s else 1, 2)
        p = _put_le(out, p, ncol, 2)
        p = _put_le(out, p, n, 4)
        p = _put_le(out, p, 0, 4)
        p = _put_le(out, p, seq0, 8)
        tb = t.view(np.uint8)
        for i in range(8 * n):
            out[p + i] = tb[i]
        p += 8 * n
        vb = V.reshape(-1).view(np.uint8)
        for i in range(8 * n * ncol):
            out[p + i] = vb[i]
        p += 8 * n * ncol
        for i in range(n):
            out[p + i] = f[i]
        p += n
        if has_s:
            for i in range(n):
                r = i if S.shape[0] > 1 else 0
                for j in range(ncol):
                    sc[i * ncol + j] = S[r, j] if np.isfinite(V[i, j]) else np.nan
            sb = sc.view(np.uint8)
            for i in range(8 * n * ncol):
                out[p + i] = sb[i]
            p += 8 * n * ncol
        return p
    p = _put(out, 0, _J_SEQ)
    p = _put_int(out, p, seq0)
    p = _put(out, p, _J_N)
    p = _put_int(out, p, n)
    p = _put(out, p, _J_T)
    for i in range(n):
        if i:
            out[p] = 44
            p += 1
        p = _put_int(out, p, t[i])
    p = _put(out, p, _J_V)
    p = _put_rows(out, p, V, n, S, False)
    out[p] = 93
    p = _put(out, p + 1, _J_F)
    for i in range(n):
        if i:
            out[p] = 44
            p += 1
        p = _put_int(out, p, np.int64(f[i]))
    out[p] = 93
    p += 1
    if has_s:
        p = _put(out, p, _J_S)
        p = _put_rows(out, p, V, n, S, True)
        out[p] = 93
        p += 1
    out[p] = 125  # '}'
    return p + 1


@njit(cache=True)
def _put_publish_header(out, o0, m, topic):
    """MQTT 3.1.1 PUBLISH fixed and variable header (QoS 0, no retain: ``0x30``, remaining
    length as a varint, topic length u2 big endian, the topic's UTF-8 bytes ``topic``) that
    ends at ``out[o0]``, where an ``m``-byte payload starts; returns where the packet
    starts (``o0`` leaves room for it: 1 + 4 + 2 + len(topic) bytes at least)."""
    nt = topic.shape[0]
    rem = 2 + nt + m
    nv = 1
    r = rem >> 7
    while r:
        nv += 1
        r >>= 7
    a = o0 - nt - 2 - nv - 1
    out[a] = 0x30
    p = a + 1
    r = rem
    for _ in range(nv):
        b = r & 0x7F
        r >>= 7
        out[p] = b | 0x80 if r else b
        p += 1
    out[p] = nt >> 8
    out[p + 1] = nt & 0xFF
    _put(out, p + 2, topic)
    return a


@njit(cache=True)
def _batch_take(i, seq, t, V, f, bt, bv, bf, st, out, o0, topic, binary, S, has_s, sc):
    """The publisher's batching and encoding in one call: append rows ``i ..`` of ``seq,
    t, V, f`` to the batch ``bt, bv, bf`` (capacity = their length) while their sequence
    numbers follow on; when the batch is full or the next row does not follow on, encode it
    at ``out[o0:]`` (:func:`_encode_into`) behind a QoS 0 PUBLISH header for ``topic``
    (:func:`_put_publish_header`) and empty it. ``st``: int64 state ``[rows in the batch,
    seq of its first row, rows in the encoded payload]``. Returns ``(next row, payload length
    or 0, start of the packet)``: the payload is ``out[o0:o0+m]``, the packet
    ``out[start:o0+m]``."""
    n = seq.shape[0]
    cap = bt.shape[0]
    ncol = bv.shape[1]
    k = st[0]
    while i < n and k < cap:
        if k == 0:
            st[1] = seq[i]
        elif seq[i] != st[1] + k:
            break  # a gap: the layout needs consecutive sequence numbers
        bt[k] = t[i]
        for j in range(ncol):
            bv[k, j] = V[i, j]
        bf[k] = f[i]
        k += 1
        i += 1
    st[0] = k
    if k == cap or (i < n and k > 0):
        m = _encode_into(out[o0:], binary, st[1], k, bt, bv, bf, S, has_s, sc)
        st[2] = k
        st[0] = 0
        return i, m, _put_publish_header(out, o0, m, topic)
    return i, 0, 0
