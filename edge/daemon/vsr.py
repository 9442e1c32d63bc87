"""The ``.vsr`` recording format: constants, header, and the readers (validated).

Layout and header keys: :mod:`edge.daemon.recorder`. Every error is a
:class:`RecordingError` naming the file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edge.flags import FLAG_HELD, FLAG_SATURATED

MAGIC = b"VSREC01\n"
SUFFIX = ".vsr"
BAD_FLAGS = np.uint8(FLAG_HELD | FLAG_SATURATED)  # non-finite or saturated
MAX_HEADER_BYTES = 1 << 20


class RecordingError(ValueError):
    """A recording file or directory is unreadable or malformed; the message names it."""


def record_dtype(ncol: int) -> np.dtype:
    """Packed record dtype with ``ncol`` float64 values."""
    return np.dtype([("seq", "<i8"), ("t_ns", "<i8"), ("v", "<f8", (ncol,)), ("flags", "u1")])


def _header_bytes(header: dict) -> bytes:
    h = json.dumps(header, sort_keys=True).encode("utf-8")
    pad = (-(len(MAGIC) + 4 + len(h))) % 8
    h += b" " * pad
    return MAGIC + len(h).to_bytes(4, "little") + h


@dataclass
class Recording:
    """Content of one or more recording files of one kind, concatenated in order."""

    header: dict
    seq: np.ndarray  # (n,) int64
    t_ns: np.ndarray  # (n,) int64 [ns]
    values: np.ndarray  # (n, ncol) float64
    flags: np.ndarray  # (n,) uint8
    columns: list[str]
    truncated_bytes: int = 0


def read_file(path: str | os.PathLike) -> Recording:
    """Read one ``.vsr`` file (a trailing partial record is ignored and reported)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as e:
        raise RecordingError(f"{p}: cannot read recording: {e.strerror or e}") from None
    if data[:8] != MAGIC:
        raise RecordingError(f"{p}: not a vsense recording (bad magic {data[:8]!r})")
    if len(data) < 12:
        raise RecordingError(f"{p}: truncated header")
    hl = int.from_bytes(data[8:12], "little")
    if hl > min(len(data) - 12, MAX_HEADER_BYTES):
        raise RecordingError(f"{p}: header length {hl} exceeds the file "
                             f"({len(data) - 12} bytes after the length field)")
    try:
        header = json.loads(data[12:12 + hl].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise RecordingError(f"{p}: header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise RecordingError(f"{p}: header is not a JSON object")
    if header.get("format") != "vsense-recording" or header.get("version") != 1:
        raise RecordingError(f"{p}: unsupported format/version "
                             f"{header.get('format')!r:.40}/{header.get('version')!r:.40}")
    cols = header.get("columns")
    if (not isinstance(cols, list) or not cols or len(cols) > 4096
            or not all(isinstance(c, str) for c in cols)):
        raise RecordingError(f"{p}: header field 'columns' missing or not a non-empty list "
                             "of names")
    dt = record_dtype(len(cols))
    rs = header.get("record_size")
    if rs != dt.itemsize or isinstance(rs, bool):
        raise RecordingError(f"{p}: header field 'record_size' is {rs!r:.40}, but "
                             f"{len(cols)} columns make {dt.itemsize}-byte records")
    body = memoryview(data)[12 + hl:]
    n = len(body) // dt.itemsize
    rec = np.frombuffer(body[:n * dt.itemsize], dtype=dt)
    return Recording(header, rec["seq"].copy(), rec["t_ns"].copy(),
                     rec["v"].reshape(n, len(cols)).copy(), rec["flags"].copy(), cols,
                     len(body) - n * dt.itemsize)


def recording_files(path: str | os.PathLike, kind: str = "raw") -> list[Path]:
    """The ``kind`` files of a recording directory in time order (or ``[path]`` for a file)."""
    p = Path(path)
    if p.is_dir():
        prefix = "raw-" if kind == "raw" else "est-"
        files = sorted(f for f in p.iterdir() if f.name.startswith(prefix)
                       and f.name.endswith(SUFFIX))
        if not files:
            raise RecordingError(f"{p}: no {prefix}*{SUFFIX} files in this directory")
        return files
    if not p.exists():
        raise RecordingError(f"{p}: no such recording file or directory")
    return [p]


def read_recording_full(path: str | os.PathLike, kind: str = "raw") -> Recording:
    """All ``kind`` records of a file or directory, concatenated and sorted by ``seq``."""
    files = recording_files(path, kind)
    parts = [read_file(f) for f in files]
    cols = parts[0].columns
    for f, r in zip(files, parts):
        if r.columns != cols:
            raise RecordingError(f"{f}: columns {r.columns} differ from {cols}")
    seq = np.concatenate([r.seq for r in parts])
    order = np.argsort(seq, kind="stable")
    return Recording(parts[0].header, seq[order],
                     np.concatenate([r.t_ns for r in parts])[order],
                     np.concatenate([r.values for r in parts])[order],
                     np.concatenate([r.flags for r in parts])[order], cols,
                     sum(r.truncated_bytes for r in parts))


def read_recording(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Raw samples for ``vsense-edge replay``: ``(t (n,) [s], Y (n, nch), channel names)``.

    Samples flagged non-finite or saturated (bit0/bit2) are returned as NaN, which is what
    the daemon handed to the estimator, so a replay reproduces the live estimates.
    ``t`` is ``t_ns * 1e-9`` (the sample clock; see the header's ``clock``).
    """
    r = read_recording_full(path, "raw")
    Y = r.values.copy()
    Y[(r.flags & BAD_FLAGS) != 0] = np.nan
    return r.t_ns * 1e-9, Y, r.columns
