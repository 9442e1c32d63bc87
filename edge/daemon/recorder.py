"""Recorder: raw samples and estimates to rotating local files; never drops.

File format (``*.vsr``, "vsense recording", little endian)::

    bytes 0..7   magic b"VSREC01\\n"
    bytes 8..11  uint32 header length H
    bytes 12..   H bytes of UTF-8 JSON header (space padded so records start 8-aligned)
    then         fixed-size packed records, numpy dtype
                 [("seq","<i8"), ("t_ns","<i8"), ("v","<f8",(ncol,)), ("flags","u1")]

Header keys: ``format`` ("vsense-recording"), ``version`` (1), ``kind`` ("raw" | "estimates"),
``columns`` (names), ``units``, ``device``, ``bundle_hash``, ``rate`` [samples/s],
``clock`` ("monotonic" | "virtual": what ``t_ns`` counts), ``t0_unix_ns`` (wall clock when the
file was opened), ``record_size`` [bytes].

* raw files (``raw-<UTC>-<seq>.vsr``): ``seq`` = ADC sample number (lost samples leave a gap),
  ``t_ns`` = sample time, ``v`` = channel values in physical units after calibration (a
  saturated sample keeps its measured value), ``flags`` bit0 non-finite, bit2 saturated,
  bit3 samples lost just before this one.
* estimate files (``est-<UTC>-<seq>.vsr``): ``seq``/``t_ns`` = the sample the estimate
  describes, ``v`` = forces then outputs, ``flags`` as the estimator returned them.

A file cut short by a power loss ends in a partial record; readers ignore it. Files are
flushed and fsynced at least every ``fsync_interval_s``. When the directory grows past
``max_disk_mb`` the oldest closed files are deleted (counted as ``files_deleted``).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger("vsense.recorder")

MAGIC = b"VSREC01\n"
SUFFIX = ".vsr"
BAD_FLAGS = np.uint8(1 | 4)  # non-finite or saturated


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
    try:
        header = json.loads(data[12:12 + hl].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RecordingError(f"{p}: header is not JSON: {e}") from None
    if header.get("format") != "vsense-recording" or header.get("version") != 1:
        raise RecordingError(f"{p}: unsupported format/version "
                             f"{header.get('format')!r}/{header.get('version')!r}")
    cols = list(header["columns"])
    dt = record_dtype(len(cols))
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
    parts = [read_file(f) for f in recording_files(path, kind)]
    cols = parts[0].columns
    for f, r in zip(recording_files(path, kind), parts):
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


class Recorder:
    """Background writer of raw samples and estimates.

    The loop thread calls :meth:`append_raw` / :meth:`append_estimates` (copies into a chunk
    buffer, no I/O); full or old chunks go through a bounded queue to the writer thread. The
    queue holds ``queue_s`` seconds of data; if the disk stalls longer, ``put`` blocks the
    loop (back-pressure) instead of dropping: acquisition keeps running and any samples it
    then cannot place are counted as lost in the ring.
    """

    def __init__(self, directory: str | os.PathLike, channels: list[str], units: list[str],
                 est_columns: list[str] | None = None, est_units: list[str] | None = None,
                 rate: float = 1000.0, device: str = "", bundle_hash: str = "",
                 clock: str = "monotonic", rotate_s: float = 3600.0, rotate_mb: float = 64.0,
                 fsync_interval_s: float = 1.0, max_disk_mb: float = 2048.0,
                 queue_s: float = 60.0, chunk: int = 256, chunk_age_s: float = 0.1):
        self.dir = Path(directory)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RecordingError(f"{self.dir}: cannot create recording directory: "
                                 f"{e.strerror or e}") from None
        if not os.access(self.dir, os.W_OK):
            raise RecordingError(f"{self.dir}: recording directory is not writable")
        self.meta = {"device": device, "bundle_hash": bundle_hash, "rate": rate,
                     "clock": clock}
        self.rotate_s, self.rotate_bytes = rotate_s, int(rotate_mb * 1e6)
        self.fsync_interval_s = fsync_interval_s
        self.max_disk_bytes = int(max_disk_mb * 1e6)
        self.chunk_age_s = chunk_age_s
        self.streams = {"raw": _Stream("raw", channels, units, chunk)}
        if est_columns is not None:
            self.streams["estimates"] = _Stream("estimates", est_columns,
                                                est_units or [""] * len(est_columns), chunk)
        nq = max(4, int(queue_s * rate / chunk) * len(self.streams))
        self.q: queue.Queue = queue.Queue(maxsize=nq)
        self.files: dict[str, tuple] = {}  # kind -> (file, path, opened_monotonic, bytes)
        self.stats = {"raw_samples": 0, "estimate_samples": 0, "bytes": 0, "files": 0,
                      "files_deleted": 0, "fsyncs": 0, "write_errors": 0, "blocked_puts": 0}
        self._last_sync = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="vsense-recorder", daemon=True)
        self._stop = False
        self._thread.start()

    # -- loop-thread side ---------------------------------------------------------------
    def append_raw(self, seq, t_ns, values, flags) -> None:
        """Append ``n`` raw samples: ``seq (n,)``, ``t_ns (n,)``, ``values (n,nch)``,
        ``flags (n,)``."""
        self._append(self.streams["raw"], seq, t_ns, values, flags)

    def append_estimates(self, seq, t_ns, values, flags) -> None:
        """Append ``n`` estimate rows (``values (n, nf+nout)``)."""
        s = self.streams.get("estimates")
        if s is not None:
            self._append(s, seq, t_ns, values, flags)

    def _append(self, s: _Stream, seq, t_ns, values, flags) -> None:
        n = len(seq)
        i = 0
        while i < n:
            if s.fill == 0:
                s.first_t = time.monotonic()
            k = min(n - i, s.buf.shape[0] - s.fill)
            b = s.buf[s.fill:s.fill + k]
            b["seq"] = seq[i:i + k]
            b["t_ns"] = t_ns[i:i + k]
            b["v"] = values[i:i + k]
            b["flags"] = flags[i:i + k]
            s.fill += k
            i += k
            if s.fill == s.buf.shape[0]:
                self._ship(s)

    def poll(self) -> None:
        """Ship chunks older than ``chunk_age_s`` (call regularly from the loop)."""
        now = time.monotonic()
        for s in self.streams.values():
            if s.fill and now - s.first_t >= self.chunk_age_s:
                self._ship(s)

    def _ship(self, s: _Stream) -> None:
        item = (s.kind, s.buf[:s.fill].tobytes(), s.fill)
        s.fill = 0
        try:
            self.q.put_nowait(item)
        except queue.Full:
            self.stats["blocked_puts"] += 1
            self.q.put(item)  # back-pressure, never drop

    def flush(self) -> None:
        """Ship all partial chunks (no waiting for the disk)."""
        for s in self.streams.values():
            if s.fill:
                self._ship(s)

    def close(self, timeout: float = 30.0) -> None:
        """Ship everything, let the writer write and fsync it, close the files."""
        self.flush()
        self._stop = True
        self.q.put(None)
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.error("recorder: writer did not finish within %.0f s", timeout)

    def queue_depth(self) -> int:
        return self.q.qsize()

    # -- writer thread ------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            try:
                item = self.q.get(timeout=min(0.2, self.fsync_interval_s))
            except queue.Empty:
                item = False
            if item is None:
                break
            if item:
                self._write(*item)
            if time.monotonic() - self._last_sync >= self.fsync_interval_s:
                self._sync()
        self._sync()
        for kind in list(self.files):
            self._close_file(kind)

    def _write(self, kind: str, data: bytes, n: int) -> None:
        while True:
            try:
                f = self._file_for(kind)
                f.write(data)
                fo = self.files[kind]
                self.files[kind] = (fo[0], fo[1], fo[2], fo[3] + len(data))
                self.stats["bytes"] += len(data)
                self.stats["raw_samples" if kind == "raw" else "estimate_samples"] += n
                return
            except OSError as e:  # disk full/removed: retry, never drop
                self.stats["write_errors"] += 1
                log.error("recorder: write failed (%s); retrying in 1 s", e)
                self._enforce_cap()
                time.sleep(1.0)
                if self._stop and self.stats["write_errors"] > 30:
                    log.error("recorder: giving up at shutdown; %d samples not written", n)
                    return

    def _file_for(self, kind: str):
        fo = self.files.get(kind)
        now = time.monotonic()
        if fo is not None and (now - fo[2] >= self.rotate_s or fo[3] >= self.rotate_bytes):
            self._close_file(kind)
            fo = None
            self._enforce_cap()
        if fo is None:
            s = self.streams[kind]
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
            prefix = "raw" if kind == "raw" else "est"
            path = self.dir / f"{prefix}-{stamp}-{self.stats['files']:06d}{SUFFIX}"
            header = dict(self.meta, format="vsense-recording", version=1, kind=kind,
                          columns=s.columns, units=s.units, t0_unix_ns=time.time_ns(),
                          record_size=s.dtype.itemsize)
            f = open(path, "wb")
            f.write(_header_bytes(header))
            self.files[kind] = fo = (f, path, now, 0)
            self.stats["files"] += 1
        return fo[0]

    def _close_file(self, kind: str) -> None:
        f = self.files.pop(kind)[0]
        try:
            f.flush()
            os.fsync(f.fileno())
        finally:
            f.close()

    def _sync(self) -> None:
        for fo in self.files.values():
            try:
                fo[0].flush()
                os.fsync(fo[0].fileno())
            except OSError as e:
                self.stats["write_errors"] += 1
                log.error("recorder: fsync failed: %s", e)
        self.stats["fsyncs"] += 1
        self._last_sync = time.monotonic()

    def _enforce_cap(self) -> None:
        open_paths = {fo[1] for fo in self.files.values()}
        try:
            files = sorted((f for f in self.dir.iterdir() if f.name.endswith(SUFFIX)),
                           key=lambda f: f.name.split("-", 1)[1])
            sizes = {f: f.stat().st_size for f in files}
        except OSError as e:
            log.error("recorder: cannot list %s: %s", self.dir, e)
            return
        total = sum(sizes.values())
        for f in files:
            if total <= self.max_disk_bytes:
                break
            if f in open_paths:
                continue
            try:
                f.unlink()
                total -= sizes[f]
                self.stats["files_deleted"] += 1
                log.info("recorder: disk cap: deleted %s", f.name)
            except OSError as e:
                log.error("recorder: cannot delete %s: %s", f, e)
