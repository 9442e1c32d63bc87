"""Every payload the monitor consumes, decoded and checked in one place.

A device (or anything else allowed to publish under the topic root) is not trusted: what
``status``, ``meta``, ``health``, ``cmd/reply`` and ``estimates`` carry is checked against
:data:`SCHEMAS` (the keys the views read and the type each must have; other keys are
allowed and ignored) before a view stores it. :func:`decode` returns the checked object or
raises :class:`PayloadError` with the reason; the views count it and show
``malformed payload from <topic>: <reason>``, they never raise on a message (a retained
``status`` that raised would crash the monitor again on every start).

:func:`clean` makes any text printable on a terminal: control characters (C0, DEL, C1, and
the Unicode format characters such as bidi overrides) become ``?``, so a payload cannot send
escape sequences to the terminal; long text is cut.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np

from edge.daemon.mqtt import BIN_HEADER, BIN_MAGIC

#: most columns (forces + outputs) and longest name a meta/estimates payload may carry
MAX_COLUMNS = 4096
MAX_NAME = 256
#: most samples in one estimates message
MAX_ROWS = 1 << 20

_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e"
                      "\u2066-\u2069\ufeff]")


class PayloadError(ValueError):
    """A message does not have the layout of its topic; the text is the reason."""


def clean(text, limit: int = 200) -> str:
    """``text`` (any value, as ``str``) without control characters (``?`` instead), at most
    ``limit`` characters (cut with ``…``). Newlines are kept only when ``limit`` is None."""
    s = str(text)
    if limit is not None and len(s) > limit:
        s = s[:limit] + "…"
    s = _CONTROL.sub("?", s)
    return s if limit is None else s.replace("\n", "?")


def csv_name(name: str) -> str:
    """A column name from a device for a CSV header: one starting with ``= + - @``, a tab or
    CR gets a leading ``'`` (a spreadsheet would run it as a formula); quoting is the csv
    module's (RFC 4180)."""
    return "'" + name if name[:1] in ("=", "+", "-", "@", "\t", "\r") else name


# ----------------------------------------------------------------------- the schema
# A spec is one of: "str", "num" (finite real), "int", "bool", "any", ("?", spec) (None
# allowed), ("list", spec, max_len), {"key": spec, ...} (an object; keys optional).

NAMED = {"name": "str", "unit": "str", "kind": "str"}
NUMS = {k: ("?", "num") for k in ("p50", "p99", "p999", "max", "n")}

SCHEMAS = {
    "status": {"state": "str", "t": "num", "device": "str", "bundle": "str",
               "faulty_channels": ("list", "str", MAX_COLUMNS), "exit_code": "int",
               "error": ("?", "str"), "reason": ("?", "str")},
    "meta": {"bundle_id": "str", "bundle_hash": "str", "estimator": "str",
             "channels": ("list", NAMED, MAX_COLUMNS), "forces": ("list", NAMED, MAX_COLUMNS),
             "outputs": ("list", NAMED, MAX_COLUMNS), "columns": ("list", "str", MAX_COLUMNS),
             "std_columns": ("list", "str", MAX_COLUMNS), "rate": "num",
             "delay_samples": "int", "delay_s": "num", "format": "str", "batch": "int",
             "raw_decimation": "int", "method": "any"},
    "health": {"t": "num", "state": "str", "uptime_s": "num", "samples": "int",
               "estimates": "int", "latency_us": NUMS, "latency_ring_us": NUMS,
               "missed_conversions": "int", "overruns": "int", "lost_samples": "int",
               "ring_depth": "int", "ring_capacity": "int", "bad_samples": "int",
               "estimator_resets": "int", "cpu_percent": ("?", "num"),
               "rss_mb": ("?", "num"), "cpu_temp_c": ("?", "num"),
               "publish": {k: "num" for k in (
                   "queue_depth", "drops_messages", "drops_samples", "published")},
               "recorder": {k: "num" for k in (
                   "queue_depth", "files", "bytes", "write_errors")},
               "model_check": ("?", {
                   "ratio": ("?", "num"), "suspect": "bool", "window_s": "num",
                   "load_level": ("?", "num"), "reasons": ("list", "str", 64),
                   "bands": ("list", {"f_hz": ("list", "num", 3), "ratio": ("?", "num")},
                             256)}),
               "degraded": ("?", "str")},
    "cmd/reply": {},
}


def _kind(x) -> str:
    return "null" if x is None else type(x).__name__


def check(value, spec, where: str) -> None:
    """Raise :class:`PayloadError` naming ``where`` unless ``value`` matches ``spec``."""
    if isinstance(spec, tuple) and spec[0] == "?":
        if value is not None:
            check(value, spec[1], where)
        return
    if spec == "any":
        return
    if spec == "str":
        if not isinstance(value, str):
            raise PayloadError(f"{where}: expected text, got {_kind(value)}")
        if len(value) > 64 * MAX_NAME:
            raise PayloadError(f"{where}: text of {len(value)} characters")
    elif spec == "bool":
        if not isinstance(value, bool):
            raise PayloadError(f"{where}: expected true/false, got {_kind(value)}")
    elif spec in ("num", "int"):
        ok = isinstance(value, int) if spec == "int" else isinstance(value, (int, float))
        if not ok or isinstance(value, bool):
            raise PayloadError(f"{where}: expected {'an integer' if spec == 'int' else 'a number'}"
                               f", got {_kind(value)}")
        if not (math.isfinite(value) if isinstance(value, float) else abs(value) < 2**63):
            raise PayloadError(f"{where}: {clean(value, 40)} is out of range")
    elif isinstance(spec, tuple):  # ("list", item spec, max length)
        if not isinstance(value, list):
            raise PayloadError(f"{where}: expected a list, got {_kind(value)}")
        if len(value) > spec[2]:
            raise PayloadError(f"{where}: {len(value)} items (at most {spec[2]})")
        for i, x in enumerate(value):
            check(x, spec[1], f"{where}[{i}]")
    elif isinstance(spec, dict):
        if not isinstance(value, dict):
            raise PayloadError(f"{where}: expected an object, got {_kind(value)}")
        for k, sub in spec.items():
            if k in value:
                check(value[k], sub, f"{where}.{k}" if where else k)


def _json(payload: bytes):
    try:
        return json.loads(payload.decode("utf-8"))
    except UnicodeDecodeError:
        raise PayloadError("not UTF-8 text") from None
    except (ValueError, RecursionError) as e:
        raise PayloadError(f"not JSON ({clean(e, 80)})") from None


def decode(sub: str, payload: bytes, ncol: int | None = None):
    """The checked content of a message on topic ``<base>/<device>/<sub>``: a dict for the
    JSON topics (None for an empty, i.e. cleared, retained message), the arrays of
    :func:`decode_estimates` for ``estimates``. ``ncol``: the column count ``meta`` gave
    (estimates with another count are refused). Raises :class:`PayloadError`."""
    payload = bytes(payload)
    if sub == "estimates":
        return decode_estimates(payload, ncol)
    if sub not in SCHEMAS:
        raise PayloadError(f"unknown topic {clean(sub, 60)}")
    if not payload:
        return None
    obj = _json(payload)
    check(obj, SCHEMAS[sub], "")
    if sub == "meta":
        _check_meta(obj)
    return obj


def _check_meta(m: dict) -> None:
    for key in ("channels", "forces", "outputs"):
        for i, c in enumerate(m.get(key, ())):
            if "name" not in c:
                raise PayloadError(f"{key}[{i}]: no 'name'")
    for key in ("columns", "std_columns"):
        for i, c in enumerate(m.get(key, ())):
            if len(c) > MAX_NAME:
                raise PayloadError(f"{key}[{i}]: a name of {len(c)} characters")
    if "rate" in m and not 0 < m["rate"] < 1e7:
        raise PayloadError(f"rate: {m['rate']!r} samples/s")


def decode_estimates(payload: bytes, ncol: int | None = None) -> dict:
    """Estimates in either layout (:mod:`edge.daemon.payloads`), every size checked
    against the payload's length before anything is allocated."""
    if payload[:4] == BIN_MAGIC:
        out = _binary(payload)
    else:
        out = _json_estimates(_json(payload))
    k = out["v"].shape[1]
    if ncol is not None and k != ncol and out["v"].shape[0]:
        raise PayloadError(f"{k} columns, meta.columns has {ncol}")
    return out


def _binary(b: bytes) -> dict:
    if len(b) < BIN_HEADER.size:
        raise PayloadError(f"binary estimates: {len(b)} bytes, shorter than the header")
    _, ver, ncol, n, _, seq0 = BIN_HEADER.unpack_from(b)
    if ver not in (1, 2):
        raise PayloadError(f"binary estimates: unsupported version {ver}")
    if ncol > MAX_COLUMNS or n > MAX_ROWS:
        raise PayloadError(f"binary estimates: {n} rows of {ncol} columns")
    want = BIN_HEADER.size + n * (9 + 8 * ncol * ver)
    if len(b) != want:
        raise PayloadError(f"binary estimates: {len(b)} bytes, the header (n {n}, ncol "
                           f"{ncol}, version {ver}) says {want}")
    if seq0 < 0 or seq0 + n >= 2**63:
        raise PayloadError(f"binary estimates: seq {seq0} out of range")
    o = BIN_HEADER.size
    t = np.frombuffer(b, "<i8", n, o).astype(np.int64)
    o += 8 * n
    v = np.frombuffer(b, "<f8", n * ncol, o).reshape(n, ncol).astype(np.float64)
    o += 8 * n * ncol
    out = {"seq": seq0 + np.arange(n, dtype=np.int64), "t_ns": t, "v": v,
           "flags": np.frombuffer(b, "u1", n, o).astype(np.uint8)}
    if ver == 2:
        out["s"] = np.frombuffer(b, "<f8", n * ncol, o + n).reshape(n, ncol).astype(np.float64)
    return out


_NUM_OR_NULL = (int, float, type(None))


def _rows(rows, n: int, what: str) -> np.ndarray:
    if not isinstance(rows, list) or len(rows) != n:
        raise PayloadError(f"{what}: not a list of n = {n} rows")
    if not all(type(r) is list for r in rows):
        raise PayloadError(f"{what}: rows must be lists")
    width = len(rows[0]) if rows else 0
    if width > MAX_COLUMNS or any(len(r) != width for r in rows):
        raise PayloadError(f"{what}: rows of different lengths or more than {MAX_COLUMNS}")
    if not all(type(x) in _NUM_OR_NULL for r in rows for x in r):  # bool is not a number
        raise PayloadError(f"{what}: a value that is not a number or null")
    try:
        return np.array(rows, dtype=float).reshape(n, width)  # null -> NaN
    except (OverflowError, ValueError):
        raise PayloadError(f"{what}: a value out of range") from None


def _ints(x, n: int, what: str, lo: int, hi: int) -> np.ndarray:
    if not isinstance(x, list) or len(x) != n or not all(type(i) is int for i in x):
        raise PayloadError(f"'{what}' must be a list of n = {n} integers")
    if n and (min(x) < lo or max(x) > hi):
        raise PayloadError(f"'{what}' outside {lo}..{hi}")
    return np.array(x, np.int64)


def _json_estimates(d) -> dict:
    if not isinstance(d, dict):
        raise PayloadError("not a JSON object")
    check(d, {"seq": "int", "n": "int"}, "")
    for k in ("seq", "n", "t_ns", "v", "flags"):
        if k not in d:
            raise PayloadError(f"'{k}' missing")
    n, seq = d["n"], d["seq"]
    if not 0 <= n <= MAX_ROWS or seq < 0 or seq + n >= 2**63:
        raise PayloadError(f"seq {seq}, n {n} out of range")
    t = _ints(d["t_ns"], n, "t_ns", -2**63, 2**63 - 1)
    flags = _ints(d["flags"], n, "flags", 0, 255).astype(np.uint8)
    v = _rows(d["v"], n, "v")
    out = {"seq": seq + np.arange(n, dtype=np.int64), "t_ns": t, "v": v, "flags": flags}
    if d.get("s") is not None:
        s = _rows(d["s"], n, "s")
        if s.shape != v.shape:
            raise PayloadError(f"'s' is {s.shape[0]} x {s.shape[1]}, 'v' {n} x {v.shape[1]}")
        out["s"] = s
    return out


def span(payload: bytes) -> tuple[int, int]:
    """``(seq of the first sample, n)`` of a checked estimates message."""
    d = decode_estimates(payload)
    n = int(d["seq"].shape[0])
    return (int(d["seq"][0]) if n else 0), n


