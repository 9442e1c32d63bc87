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
    if not data:
        raise RecordingError(f"{p}: empty file (0 bytes: cut before its header was written)")
    if len(data) < 12 and MAGIC.startswith(data[:8]):
        raise RecordingError(f"{p}: truncated header ({len(data)} bytes)")
    if data[:8] != MAGIC:
        raise RecordingError(f"{p}: not a vsense recording (bad magic {data[:8]!r})")
    hl = int.from_bytes(data[8:12], "little")
    if hl > len(data) - 12:
        raise RecordingError(f"{p}: header length {hl} exceeds the file ({len(data) - 12} "
                             "bytes after the length field: a truncated header)")
    if hl > MAX_HEADER_BYTES:
        raise RecordingError(f"{p}: header length {hl} exceeds {MAX_HEADER_BYTES} bytes")
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
    if not str(path):  # Path("") is "." (a directory)
        raise RecordingError("the recording's file name is empty")
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


@dataclass
class Run:
    """The files of one recorder run (one daemon start) of one kind, read and in order."""

    index: int  # 1, 2, ... in time order
    files: list[Path]
    recording: Recording

    def describe(self) -> str:
        r = self.recording
        names = self.files[0].name + (f" .. {self.files[-1].name}" if len(self.files) > 1
                                      else "")
        return f"run {self.index} ({names}: {len(r.seq)} samples)"


def _read_tolerant(files: list[Path], warn) -> list[tuple[Path, Recording]]:
    """Every readable file; an empty one, a cut header or a partial last record (a power cut
    or a kill while it was written) is reported through ``warn`` naming the file."""
    out = []
    for f in files:
        try:
            r = read_file(f)
        except RecordingError as e:
            warn(f"{e}; file skipped")
            continue
        if r.truncated_bytes:
            warn(f"{f}: the last {r.truncated_bytes} bytes are a partial record (cut while "
                 "written); ignored")
        out.append((f, _trim_tail(f, r, warn)))
    return out


def _trim_tail(f: Path, r: Recording, warn) -> Recording:
    """A file's records follow on in ``seq``; from the first that does not (e.g. blocks of
    zeros a file system left after a power cut) the rest is dropped with a warning."""
    bad = np.flatnonzero(np.diff(r.seq) <= 0)
    if r.seq.size and r.seq[0] < 0:
        bad = np.array([-1])
    if bad.size == 0:
        return r
    k = int(bad[0]) + 1
    warn(f"{f}: the last {len(r.seq) - k} of {len(r.seq)} records do not follow on in seq "
         "(left by a power cut?); ignored")
    return Recording(r.header, r.seq[:k], r.t_ns[:k], r.values[:k], r.flags[:k], r.columns,
                     r.truncated_bytes)


def _run_key(prev: tuple | None, r: Recording) -> bool:
    """True when ``r`` starts a new run after ``prev`` (``(run id, columns, last seq)``):
    another ``run`` id in the header, other columns, or (files written before the header
    had ``run``) a sequence number that starts again."""
    if prev is None:
        return True
    run, cols, last = prev
    if run is not None or r.header.get("run") is not None:
        return r.header.get("run") != run or r.columns != cols
    return r.columns != cols or (len(r.seq) > 0 and last is not None and r.seq[0] <= last)


def read_runs(path: str | os.PathLike, kind: str = "raw", warn=None) -> list[Run]:
    """The runs of a recording directory (or file), oldest first: a daemon that restarted
    into the same directory leaves one run per start, each with sequence numbers from 0.
    Files of one run are concatenated in ``seq`` order; runs are never mixed. Unreadable
    files (empty, cut header) are skipped and partial last records dropped, each reported
    through ``warn(text)`` (default: ignored) naming the file; a single file that is
    unreadable is an error. RecordingError when nothing readable is left."""
    warn = warn or (lambda text: None)
    files = recording_files(path, kind)
    if len(files) == 1 and not Path(path).is_dir():
        r = read_file(files[0])
        if r.truncated_bytes:
            warn(f"{files[0]}: the last {r.truncated_bytes} bytes are a partial record (cut "
                 "while written); ignored")
        parts = [(files[0], _trim_tail(files[0], r, warn))]
    else:
        parts = _read_tolerant(files, warn)
    if not parts:
        raise RecordingError(f"{path}: no readable {kind} recording file ({len(files)} "
                             "skipped)")
    groups: list[list[tuple[Path, Recording]]] = []
    prev = None
    for f, r in parts:
        if _run_key(prev, r):
            groups.append([])
        groups[-1].append((f, r))
        last = r.seq[-1] if len(r.seq) else (prev[2] if prev else None)
        prev = (r.header.get("run"), r.columns, last)
    return [Run(i + 1, [f for f, _ in g], _concat(g)) for i, g in enumerate(groups)]


def _concat(group: list[tuple[Path, Recording]]) -> Recording:
    parts = [r for _, r in group]
    seq = np.concatenate([r.seq for r in parts])
    order = np.argsort(seq, kind="stable")
    return Recording(parts[0].header, seq[order],
                     np.concatenate([r.t_ns for r in parts])[order],
                     np.concatenate([r.values for r in parts])[order],
                     np.concatenate([r.flags for r in parts])[order], parts[0].columns,
                     sum(r.truncated_bytes for r in parts))


def read_recording_full(path: str | os.PathLike, kind: str = "raw", run: int | None = None,
                        warn=None) -> Recording:
    """The ``kind`` records of one run (:func:`read_runs`) sorted by ``seq``: ``run`` (1 =
    the oldest), or the only one. A directory holding several runs without ``run`` is a
    RecordingError that lists them (their sequence numbers overlap: never mixed)."""
    runs = read_runs(path, kind, warn)
    if run is None and len(runs) > 1:
        raise RecordingError(f"{path}: {len(runs)} runs ({'; '.join(r.describe() for r in runs)})"
                             ": choose one (run=K, `replay --run K`)")
    k = 1 if run is None else run
    if not 1 <= k <= len(runs):
        raise RecordingError(f"{path}: no run {k} (it holds {len(runs)} runs)")
    return runs[k - 1].recording


def replay_input(rec: Recording) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(t (n,) [s], Y (n, nch), channel names)`` of raw records, flagged samples as NaN."""
    Y = rec.values.copy()
    Y[(rec.flags & BAD_FLAGS) != 0] = np.nan
    return rec.t_ns * 1e-9, Y, rec.columns


def read_recording(path: str | os.PathLike, run: int | None = None,
                   warn=None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Raw samples of one run for ``vsense-edge replay``: ``(t (n,) [s], Y (n, nch), channel
    names)`` (``run`` as :func:`read_recording_full`).

    Samples flagged non-finite or saturated (bit0/bit2) are returned as NaN, which is what
    the daemon handed to the estimator, so a replay reproduces the live estimates.
    ``t`` is ``t_ns * 1e-9`` (the sample clock; see the header's ``clock``).
    """
    return replay_input(read_recording_full(path, "raw", run, warn))
