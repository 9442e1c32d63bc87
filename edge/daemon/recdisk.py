"""The recorder's disk budget (mixed into :class:`edge.daemon.recorder.Recorder`): the
directory's size, the ``max_disk_mb`` cap and, on a full disk, reclaiming space from earlier
runs' files (never this run's)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from edge.daemon.vsr import SUFFIX

log = logging.getLogger("vsense.recorder")


class DiskBudget:
    """Methods of :class:`edge.daemon.recorder.Recorder` that delete files (writer thread)."""

    def _sync_dir(self) -> None:
        """fsync the directory (a new file's name survives a power cut)."""
        try:
            fd = os.open(self.dir, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError as e:
            log.error("recorder: fsync of %s failed: %s", self.dir, e)
        finally:
            os.close(fd)

    def _unlink(self, path: Path) -> None:
        try:
            size = path.stat().st_size
            path.unlink()
            self._dir_bytes -= size
            self._own.discard(path.name)
        except OSError:
            pass

    def _scan_bytes(self) -> int:
        try:
            return sum(f.stat().st_size for f in self.dir.iterdir() if f.name.endswith(SUFFIX))
        except OSError:
            return 0

    def _closed_files(self) -> list[Path]:
        """Closed recording files, oldest first (by the UTC stamp and counter in the name)."""
        open_paths = {fo[1] for fo in self.files.values()}
        files = [f for f in self.dir.iterdir() if f.name.endswith(SUFFIX)
                 and f not in open_paths]
        return sorted(files, key=lambda f: f.name.split("-", 1)[-1])

    def _reclaim(self, need: int) -> bool:
        """Disk full: delete the oldest closed files of earlier runs (never one this
        recorder wrote) until ``2 * need`` bytes (at least one file) are freed; True if
        anything was deleted."""
        try:
            files = [f for f in self._closed_files() if f.name not in self._own]
        except OSError as e:
            log.error("recorder: cannot list %s: %s", self.dir, e)
            return False
        freed = 0
        for f in files:
            if freed >= 2 * need:
                break
            try:
                size = f.stat().st_size
                f.unlink()
            except OSError as e:
                log.error("recorder: cannot delete %s: %s", f, e)
                continue
            freed += size
            self._dir_bytes -= size
            self.stats["files_deleted"] += 1
            log.warning("recorder: disk full: deleted %s of an earlier run (%d bytes)",
                        f.name, size)
        return freed > 0

    def _enforce_cap(self) -> None:
        """Keep the directory under ``max_disk_mb``: delete the oldest closed files."""
        try:
            self._dir_bytes = self._scan_bytes()
            files = self._closed_files()
        except OSError as e:
            log.error("recorder: cannot list %s: %s", self.dir, e)
            return
        for f in files:
            if self._dir_bytes <= self.max_disk_bytes:
                break
            try:
                size = f.stat().st_size
                f.unlink()
                self._dir_bytes -= size
                self._own.discard(f.name)
                self.stats["files_deleted"] += 1
                log.info("recorder: disk cap: deleted %s", f.name)
            except OSError as e:
                log.error("recorder: cannot delete %s: %s", f, e)
