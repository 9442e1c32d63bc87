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
import time

import numpy as np
import orjson

BIN_HEADER = struct.Struct("<4sHHIIq")
BIN_MAGIC = b"VSE1"

_JSON_OPT = orjson.OPT_SERIALIZE_NUMPY


def std_values(std, values: np.ndarray) -> np.ndarray:
    """``std`` (``(ncol,)`` per column or ``(n, ncol)`` per value) as ``(n, ncol)`` float64,
    NaN where ``values`` is not finite (a missing value has no standard deviation)."""
    S = np.broadcast_to(np.asarray(std, dtype=np.float64), values.shape)
    return np.where(np.isfinite(values), S, np.nan)


def encode_estimates(seq0: int, t_ns: np.ndarray, values: np.ndarray, flags: np.ndarray,
                     fmt: str = "json", std: np.ndarray | None = None) -> bytes:
    """Encode ``n`` consecutive estimates (``seq0 .. seq0+n-1``).

    ``t_ns (n,) int64`` time of the sample each row describes [ns], ``values (n, ncol)``
    forces then outputs [SI], ``flags (n,) uint8``, ``std`` None or the standard deviation
    of each column ``(ncol,)`` (or of each value, ``(n, ncol)``). JSON (orjson with
    ``OPT_SERIALIZE_NUMPY``): ``{"seq", "n", "t_ns", "v", "flags"}`` (+ ``"s"``), non-finite
    values as ``null``, floats in orjson's shortest round-trip text (``float(text)`` gives
    the value back exactly). Binary: the ``VSE1`` layout above (``struct`` and
    ``ndarray.tobytes``).
    """
    V = np.ascontiguousarray(values, dtype="<f8")
    if V.ndim != 2:
        raise ValueError(f"estimates: values must be (n, ncol), got shape {V.shape}")
    t = np.ascontiguousarray(t_ns, dtype="<i8")
    f = np.ascontiguousarray(flags, dtype=np.uint8)
    n, ncol = V.shape
    if t.shape != (n,) or f.shape != (n,):
        raise ValueError(f"estimates: t_ns {t.shape} and flags {f.shape} must be ({n},)")
    S = None if std is None else std_values(std, V)
    if fmt == "binary":
        parts = [BIN_HEADER.pack(BIN_MAGIC, 1 if S is None else 2, ncol, n, 0, int(seq0)),
                 t.tobytes(), V.tobytes(), f.tobytes()]
        if S is not None:
            parts.append(S.astype("<f8").tobytes())
        return b"".join(parts)
    d = {"seq": int(seq0), "n": n, "t_ns": t, "v": V, "flags": f}
    if S is not None:
        d["s"] = S
    return orjson.dumps(d, option=_JSON_OPT)


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


class Batch:
    """Consecutive rows collected in preallocated arrays until ``capacity`` rows or a gap.

    Parameters
    ----------
    capacity : int   rows per message
    ncol : int       values per row
    """

    def __init__(self, capacity: int, ncol: int):
        self.t = np.zeros(capacity, np.int64)
        self.v = np.zeros((capacity, ncol))
        self.f = np.zeros(capacity, np.uint8)
        self.n = 0  # rows in the open batch
        self.seq0 = 0  # seq of its first row
        self.start = 0.0  # time.monotonic() of its first row [s]

    def add(self, seq: np.ndarray, t_ns: np.ndarray, values: np.ndarray, flags: np.ndarray,
            emit) -> None:
        """Append rows ``seq (n,) int64``, ``t_ns (n,)``, ``values (n, ncol)``, ``flags
        (n,)``; ``emit(seq0, t, V, f)`` gets every batch that is full or that the next row
        does not follow on from (the layouts need consecutive sequence numbers)."""
        i, n, cap = 0, seq.shape[0], self.t.shape[0]
        while i < n:
            k = self.n
            if k == 0:
                self.seq0, self.start = int(seq[i]), time.monotonic()
            m = min(cap - k, n - i)
            # rows that follow on: seq0 + k, seq0 + k + 1, ...
            bad = seq[i:i + m] - (self.seq0 + k) != np.arange(m)
            if bad.any():
                m = int(np.argmax(bad))
            self.t[k:k + m] = t_ns[i:i + m]
            self.v[k:k + m] = values[i:i + m]
            self.f[k:k + m] = flags[i:i + m]
            self.n = k + m
            i += m
            if self.n == cap or i < n:
                self.flush(emit)

    def flush(self, emit) -> None:
        """``emit`` the open batch (if any) and empty it."""
        k = self.n
        if k:
            self.n = 0
            emit(self.seq0, self.t[:k], self.v[:k], self.f[:k])
