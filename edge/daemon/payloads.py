"""Payloads of the ``estimates`` (and ``raw``) topics: encoding and decoding.

Binary ``estimates`` layout (``format = "binary"``, little endian)::

    0   4s   magic b"VSE1"
    4   u2   version (1; 2 = with the std block)
    6   u2   ncol (forces + outputs)
    8   u4   n (samples in this message)
    12  u4   reserved (0)
    16  i8   seq of the first sample
    24  n  x i8          t_ns of each sample
        n*ncol x f8      values, row major (sample by sample)
        n  x u1          flags
        n*ncol x f8      version 2 only: standard deviation of each value, row major

JSON ``estimates``: ``{"seq", "n", "t_ns", "v", "flags"}`` and, when the estimator states its
uncertainty (the smoother), ``"s"``: the standard deviation of each value, same shape as
``"v"`` (``null`` where the value is). ``meta`` then lists ``"std_columns"``
(``<column>_std``, same order as ``"columns"``).
"""

from __future__ import annotations

import json
import struct

import numpy as np

BIN_HEADER = struct.Struct("<4sHHIIq")
BIN_MAGIC = b"VSE1"

# ---------------------------------------------------------------------------- payloads
def encode_estimates(seq0: int, t_ns: np.ndarray, values: np.ndarray, flags: np.ndarray,
                     fmt: str = "json", std: np.ndarray | None = None) -> bytes:
    """Encode ``n`` consecutive estimates (``seq0 .. seq0+n-1``).

    ``t_ns (n,) int64`` time of the sample each row describes [ns], ``values (n, ncol)``
    forces then outputs [SI], ``flags (n,) uint8``, ``std`` None or the standard deviation
    of each column ``(ncol,)`` (or of each value, ``(n, ncol)``). JSON: ``{"seq", "n",
    "t_ns", "v", "flags"}`` (+ ``"s"``) with non-finite values as ``null``, byte for byte
    what ``json.dumps(..., separators=(",", ":"))`` writes; floats round-trip exactly.
    One compiled call (:func:`edge.daemon.encode._encode_into`) writes either layout.
    """
    from edge.daemon.encode import _encode_into, payload_capacity, std_rows  # numba

    V = np.ascontiguousarray(values, dtype=np.float64)
    if V.ndim != 2:
        raise ValueError(f"estimates: values must be (n, ncol), got shape {V.shape}")
    t = np.ascontiguousarray(t_ns, dtype=np.int64)
    f = np.ascontiguousarray(flags, dtype=np.uint8)
    n, ncol = V.shape
    if t.shape != (n,) or f.shape != (n,):
        raise ValueError(f"estimates: t_ns {t.shape} and flags {f.shape} must be ({n},)")
    S = std_rows(std, ncol)
    binary = fmt == "binary"
    out = np.empty(payload_capacity(n, ncol, S.shape[0] > 0, binary), np.uint8)
    sc = np.empty(n * ncol if binary and S.shape[0] else 0)
    m = _encode_into(out, binary, int(seq0), n, t, V, f, S, std is not None, sc)
    return out[:m].tobytes()


def decode_estimates(payload: bytes) -> dict:
    """Inverse of :func:`encode_estimates` (either format): ``{"seq": (n,) int64,
    "t_ns": (n,) int64, "v": (n, ncol) float64 (NaN for null), "flags": (n,) uint8}`` and
    ``"s": (n, ncol)`` when the message carries standard deviations (binary version 2)."""
    if payload[:4] == BIN_MAGIC:
        magic, ver, ncol, n, _, seq0 = BIN_HEADER.unpack_from(payload)
        if ver not in (1, 2):
            raise ValueError(f"estimates: unsupported binary version {ver}")
        o = BIN_HEADER.size
        t = np.frombuffer(payload, "<i8", n, o)
        o += 8 * n
        v = np.frombuffer(payload, "<f8", n * ncol, o).reshape(n, ncol)
        o += 8 * n * ncol
        f = np.frombuffer(payload, "u1", n, o)
        o += n
        out = {"seq": seq0 + np.arange(n, dtype=np.int64), "t_ns": t.astype(np.int64),
               "v": v.astype(np.float64), "flags": f.astype(np.uint8)}
        if ver == 2:
            out["s"] = np.frombuffer(payload, "<f8", n * ncol, o).reshape(n, ncol).astype(
                np.float64)
        return out
    d = json.loads(payload)
    v = _array(d["v"]).reshape(d["n"], -1)
    out = {"seq": d["seq"] + np.arange(d["n"], dtype=np.int64),
           "t_ns": np.asarray(d["t_ns"], np.int64), "v": v,
           "flags": np.asarray(d["flags"], np.uint8)}
    if "s" in d:
        out["s"] = _array(d["s"]).reshape(v.shape)
    return out


def _array(rows):
    return np.array([[np.nan if x is None else x for x in r] for r in rows], dtype=float)
