"""Recorder: raw samples and estimates to rotating local files; never stalls the loop.

File format (``*.vsr``, "vsense recording", little endian)::

    bytes 0..7   magic b"VSREC01\\n"
    bytes 8..11  uint32 header length H
    bytes 12..   H bytes of UTF-8 JSON header (space padded so records start 8-aligned)
    then         fixed-size packed records, numpy dtype
                 [("seq","<i8"), ("t_ns","<i8"), ("v","<f8",(ncol,)), ("flags","u1")]

Header keys: ``format`` ("vsense-recording"), ``version`` (1), ``kind`` ("raw" | "estimates"),
``columns`` (names), ``units``, ``device``, ``bundle_hash``, ``rate`` [samples/s],
``clock`` ("monotonic" | "virtual": what ``t_ns`` counts), ``run`` (one id per recorder, i.e.
per daemon start: readers keep the runs of a directory apart, :func:`edge.daemon.vsr.read_runs`),
``t0_unix_ns`` (wall clock when the file was opened), ``record_size`` [bytes].

* raw files (``raw-<UTC>-<seq>.vsr``): ``seq`` = ADC sample number (lost samples leave a gap),
  ``t_ns`` = sample time, ``v`` = channel values in physical units after calibration (a
  saturated sample keeps its measured value), ``flags`` bit0 non-finite, bit2 saturated,
  bit3 samples lost just before this one.
* estimate files (``est-<UTC>-<seq>.vsr``): ``seq``/``t_ns`` = the sample the estimate
  describes, ``v`` = forces then outputs, ``flags`` as the estimator returned them.

A new file's header is fsynced (with the directory) before any data, and its first chunk
right after it is written. A file cut short by a power loss or a kill ends in a partial
record (or is empty); readers skip or trim it with a warning naming it. Rows reach the
writer within ``min(chunk_age_s, fsync_interval_s / 2)`` and the disk (fsync) within
``fsync_interval_s`` after that. When the directory grows past ``max_disk_mb`` the oldest
closed files are deleted (counted as ``files_deleted``). A full disk never deletes this
run's files: only earlier runs' files are reclaimed; past that, new data is dropped and
counted (``dropped_samples``, :attr:`Recorder.problem`, status ``degraded``).
"""

from __future__ import annotations

import errno
import logging
import math
import os
import queue
import threading
import time
import uuid
from pathlib import Path

from edge.daemon.recdisk import DiskBudget
from edge.daemon.recstream import _Stream
from edge.daemon.vsr import (BAD_FLAGS, MAGIC, MAX_HEADER_BYTES, SUFFIX,  # noqa: F401
                             Recording, RecordingError, _header_bytes, read_file,
                             read_recording, read_recording_full, record_dtype,
                             recording_files)

log = logging.getLogger("vsense.recorder")


class Recorder(DiskBudget):
    """Background writer of raw samples and estimates; degrades, never stalls the loop.

    The loop thread calls :meth:`append_raw` / :meth:`append_estimates` (a copy of the rows
    into a preallocated chunk, no I/O) and :meth:`poll`; full chunks, and all chunks once
    the oldest row is ``min(chunk_age_s, fsync_interval_s / 2)`` old, go together, as one
    item, through a bounded queue (``queue_s`` seconds of data) to the writer thread, which
    wakes once per item (and for a due fsync), not per chunk or on a timer. The default
    chunk holds twice that age at ``rate``: the age ships it. Nothing here blocks the
    loop:

    * queue full (the disk cannot keep up): the chunk is **dropped and counted**
      (``dropped_samples``, ``dropped_chunks``), :attr:`problem` names the reason;
    * write fails (disk full, removed, read-only): the partial file is cut back to its last
      whole chunk and closed; the writer reclaims space by deleting the oldest closed files
      of *earlier runs* (files this recorder did not write) and retries once. It never
      deletes this run's data to make room: when nothing of an earlier run is left, the
      chunk is dropped and counted, :attr:`problem` names the reason (the daemon's status
      is ``degraded`` while it lasts) and writes are retried after ``retry_s``;
    * the directory is kept under ``max_disk_mb`` (open file included: files are rotated
      at ``min(rotate_mb, max_disk_mb / 4)``): this budget, the one the user set, is the
      only thing that deletes this run's oldest files (``files_deleted``);
    * :meth:`close` returns within its ``timeout`` whatever the disk does (what is not
      written by then is counted as dropped).
    """

    def __init__(self, directory: str | os.PathLike, channels: list[str], units: list[str],
                 est_columns: list[str] | None = None, est_units: list[str] | None = None,
                 rate: float = 1000.0, device: str = "", bundle_hash: str = "",
                 clock: str = "monotonic", rotate_s: float = 3600.0, rotate_mb: float = 64.0,
                 fsync_interval_s: float = 1.0, max_disk_mb: float = 2048.0,
                 queue_s: float = 60.0, chunk: int | None = None, chunk_age_s: float = 0.5,
                 retry_s: float = 1.0, problem_hold_s: float = 5.0):
        self.dir = Path(directory)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise RecordingError(f"{self.dir}: cannot create recording directory: "
                                 f"{e.strerror or e}") from None
        if not os.access(self.dir, os.W_OK):
            raise RecordingError(f"{self.dir}: recording directory is not writable")
        # ``run``: one id per recorder (daemon start), in every header, so that readers
        # keep the runs of a directory apart (each has sequence numbers from 0)
        self.run_id = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:12]}"
        self.meta = {"device": device, "bundle_hash": bundle_hash, "rate": rate,
                     "clock": clock, "run": self.run_id}
        self.max_disk_bytes = int(max_disk_mb * 1e6)
        self.rotate_s = rotate_s
        self.rotate_bytes = max(1, min(int(rotate_mb * 1e6), self.max_disk_bytes // 4))
        self.fsync_interval_s = fsync_interval_s
        self.chunk_age_s = min(chunk_age_s, fsync_interval_s / 2)
        if chunk is None:
            chunk = max(64, math.ceil(2 * rate * self.chunk_age_s))
        self.retry_s = retry_s
        self.problem_hold_s = problem_hold_s
        self.streams = {"raw": _Stream("raw", channels, units, chunk)}
        if est_columns is not None:
            self.streams["estimates"] = _Stream("estimates", est_columns,
                                                est_units or [""] * len(est_columns), chunk)
        # an item holds what one poll ships: up to chunk_age_s (or one chunk) of each stream
        item_s = max(1e-3, min(self.chunk_age_s, chunk / rate)) if self.chunk_age_s > 0 \
            else chunk / rate
        self.q: queue.Queue = queue.Queue(maxsize=max(4, math.ceil(queue_s / item_s)))
        self._outbox: list[tuple] = []  # chunks shipped since the last poll
        self._ship_at = math.inf  # monotonic time the oldest open chunk is due
        # kind -> (file, path, opened_monotonic, data bytes, header bytes)
        self.files: dict[str, tuple] = {}
        self._own: set[str] = set()  # names of the files this recorder wrote (this run)
        self.stats = {"raw_samples": 0, "estimate_samples": 0, "bytes": 0, "files": 0,
                      "files_deleted": 0, "fsyncs": 0, "write_errors": 0,
                      "dropped_samples": 0, "dropped_chunks": 0, "dropped_raw": 0,
                      "dropped_estimates": 0}
        self.problem: str | None = None  # last reason data was dropped
        self._problem_t = -math.inf  # monotonic time of the last drop
        self._retry_at = 0.0  # after a failed write: drop until then
        self._last_log = -math.inf
        self._dir_bytes = self._scan_bytes()
        self._last_sync = time.monotonic()
        self._dirty = False  # written since the last fsync
        self._deadline = math.inf
        #: set when the writer has taken every queued chunk (tests, shutdown diagnostics)
        self.idle = threading.Event()
        self.idle.set()
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
        cap = s.buf.shape[0]
        while i < n:
            if s.fill == 0:
                s.first_t = time.monotonic()
                self._ship_at = min(self._ship_at, s.first_t + self.chunk_age_s)
            k = min(n - i, cap - s.fill)
            s.put(seq, t_ns, values, flags, i, k)
            i += k
            if s.fill == cap:
                self._ship(s)

    def poll(self) -> None:
        """Ship every partial chunk once the oldest is ``chunk_age_s`` old, and hand what
        was shipped since the last call to the writer as one item (call regularly from
        the loop)."""
        if time.monotonic() >= self._ship_at:
            self._ship_at = math.inf
            for s in self.streams.values():
                if s.fill:
                    self._ship(s)
        if self._outbox:
            self._post()

    def _ship(self, s: _Stream) -> None:
        self._outbox.append((s.kind, s.buf[:s.fill].tobytes(), s.fill))
        s.fill = 0
        if len(self._outbox) >= 8:  # appends without a poll in between: bounded
            self._post()

    def _post(self) -> None:
        item = tuple(self._outbox)
        self._outbox.clear()
        self.idle.clear()  # before the put: the writer may take the item and set it at once
        try:
            self.q.put_nowait(item)
        except queue.Full:  # the disk cannot keep up: drop, count, say so; never block
            for kind, _, n in item:
                self._dropped(kind, n, "recorder queue full (disk too slow or stalled)")

    def _dropped(self, kind: str, n: int, reason: str) -> None:
        self.stats["dropped_samples"] += n
        self.stats["dropped_chunks"] += 1
        self.stats["dropped_raw" if kind == "raw" else "dropped_estimates"] += n
        self.problem = reason
        now = time.monotonic()
        self._problem_t = now
        if now - self._last_log >= 10.0:  # at most one line per 10 s
            self._last_log = now
            log.error("recorder: %s; %d samples dropped so far", reason,
                      self.stats["dropped_samples"])

    def degraded_reason(self) -> str | None:
        """The reason data was dropped within the last ``problem_hold_s``, else None."""
        if time.monotonic() - self._problem_t <= self.problem_hold_s:
            return self.problem
        return None

    def flush(self) -> None:
        """Ship all partial chunks (no waiting for the disk)."""
        for s in self.streams.values():
            if s.fill:
                self._ship(s)
        if self._outbox:
            self._post()

    def close(self, timeout: float = 10.0) -> None:
        """Ship everything, let the writer write and fsync it within ``timeout`` s, close
        the files. Returns within about ``timeout`` whatever the disk does; what was not
        written is counted in ``dropped_samples``."""
        self.flush()
        self._deadline = time.monotonic() + timeout
        self._stop = True
        try:
            self.q.put_nowait(())  # wakes the writer (it waits for items, not on a timer)
        except queue.Full:  # it has work: it sees _stop after the next item
            pass
        self._thread.join(timeout + 0.5)
        if self._thread.is_alive():
            n = sum(c[2] for item in list(self.q.queue) for c in item)
            log.error("recorder: writer blocked in the file system for %.0f s; giving up "
                      "(%d queued samples not written)", timeout, n)

    def queue_depth(self) -> int:
        return self.q.qsize()

    # -- writer thread ------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            if self._stop and (self.q.empty() or time.monotonic() > self._deadline):
                break
            # asleep until an item comes, or until written data is due for its fsync
            wait = None
            if self._dirty:
                wait = max(0.0, self._last_sync + self.fsync_interval_s - time.monotonic())
            try:
                item = self.q.get(timeout=wait)
            except queue.Empty:
                item = None
            for kind, data, n in item or ():
                self._write(kind, data, n)
            if self.q.empty():
                self.idle.set()
            # due, or due before the next item would come: sync now rather than wake for it
            early = self.chunk_age_s / 2 if item else 0.0
            if self._dirty and \
                    time.monotonic() - self._last_sync >= self.fsync_interval_s - early:
                self._sync()
        while True:  # past the shutdown deadline: count what is left
            try:
                item = self.q.get_nowait()
            except queue.Empty:
                break
            for kind, _, n in item:
                self._dropped(kind, n, "shutdown deadline reached before the disk took the "
                              "data")
        self._sync()
        for kind in list(self.files):
            self._close_file(kind)

    def _write(self, kind: str, data: bytes, n: int) -> None:
        if time.monotonic() < self._retry_at:
            self._dropped(kind, n, self.problem or "recording disk failing")
            return
        for attempt in (0, 1):
            try:
                self._write_once(kind, data)
                self.stats["raw_samples" if kind == "raw" else "estimate_samples"] += n
                return
            except OSError as e:
                self.stats["write_errors"] += 1
                reason = f"write to {self.dir} failed: {e.strerror or e}"
                if e.errno == errno.ENOSPC:
                    reason += " (new data dropped; this run's files are kept)"
                self._abandon_file(kind)
                if attempt == 0 and self._reclaim(len(data)):
                    continue  # space freed: try once more
                self._retry_at = time.monotonic() + self.retry_s
                self._dropped(kind, n, reason)
                return

    def _write_once(self, kind: str, data: bytes) -> None:
        f = self._file_for(kind)
        fo = self.files[kind]
        k = f.write(data)
        if k != len(data):  # unbuffered file: a short write means the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # the same reason text
        if fo[3] == 0:  # a new file's first chunk: on the disk now, not at the next fsync
            os.fsync(f.fileno())
        self.files[kind] = (fo[0], fo[1], fo[2], fo[3] + k, fo[4])
        self._dirty = True
        self.stats["bytes"] += k
        self._dir_bytes += k
        if self._dir_bytes > self.max_disk_bytes:
            self._enforce_cap()

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
            header = dict(self.meta, format="vsense-recording", version=1, kind=kind,
                          columns=s.columns, units=s.units, t0_unix_ns=time.time_ns(),
                          record_size=s.dtype.itemsize)
            hb = _header_bytes(header)
            n = self.stats["files"]
            while True:  # exclusive: a run restarted within the second never overwrites
                path = self.dir / f"{prefix}-{stamp}-{n:06d}{SUFFIX}"
                try:
                    f = open(path, "xb", buffering=0)
                    break
                except FileExistsError:
                    n += 1
            try:
                if f.write(hb) != len(hb):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # the same reason text
                os.fsync(f.fileno())  # the header and the file's name on the disk first:
                self._sync_dir()      # a power cut then leaves a readable file
            except OSError:
                f.close()
                self._unlink(path)
                raise
            self._dir_bytes += len(hb)
            self._own.add(path.name)
            self.files[kind] = fo = (f, path, now, 0, len(hb))
            self.stats["files"] += 1
        return fo[0]

    def _abandon_file(self, kind: str) -> None:
        """After a failed write: cut the file back to the end of the last chunk written
        in full (no partial chunk: a retry writes the whole chunk again), close it."""
        fo = self.files.pop(kind, None)
        if fo is None:
            return
        f, path, _, nbytes, hlen = fo
        try:
            end = f.seek(0, os.SEEK_END)
            good = hlen + nbytes
            if good < end:
                os.ftruncate(f.fileno(), good)
                self._dir_bytes -= end - good
        except OSError as e:
            log.error("recorder: cannot truncate %s: %s", path.name, e)
        try:
            f.close()
        except OSError:
            pass

    def _close_file(self, kind: str) -> None:
        f = self.files.pop(kind)[0]
        try:
            os.fsync(f.fileno())
        except OSError as e:
            self.stats["write_errors"] += 1
            log.error("recorder: fsync failed: %s", e)
        finally:
            f.close()

    def _sync(self) -> None:
        for fo in self.files.values():
            try:
                os.fsync(fo[0].fileno())
            except OSError as e:
                self.stats["write_errors"] += 1
                log.error("recorder: fsync failed: %s", e)
        self.stats["fsyncs"] += 1
        self._last_sync = time.monotonic()
        self._dirty = False
