"""The counter's state on disk: saved atomically, restored at start, through power cuts.

**What is saved.** Per hotspot the residue, the partial extremum and direction, the
histogram, the damage and cycle sums and the sample count (``istate``, ``fstate``, ``stack``,
``hist`` of :class:`edge.fatigue.rainflow.RainflowCounter`), with the configuration they were
counted with (hotspot names, curve rows, bins, sizes) and a SHA-256 over every array.

**How.** ``np.savez`` into ``NAME.tmp`` in the same directory, ``fsync`` the file,
``os.replace`` it onto ``NAME`` (atomic on POSIX), ``fsync`` the directory so the rename is
on disk. A power cut leaves either the old or the new file, never a mix.

**What a restart gives.** The state as of the last save: the counter resumes exactly there
(same residue, same partial extremum), so a cycle counted before the save is never counted
again and one that closes after the restart is counted once. The samples between the last
save and the cut are not in the state; when the recorder kept them, :func:`replay_since`
feeds the ones the state has not seen (by the saved sample count) and the count equals the
uninterrupted one. Without them, what is lost is bounded by what those samples held (at most
``save_every`` seconds of cycles).

**Bad files.** :func:`load_state` raises :class:`FatigueStateError` naming the file (unreadable,
truncated, wrong version, another configuration, checksum mismatch, non-finite or out-of-range
values); :func:`restore` turns that into a fresh start with a warning naming the file and moves
the bad file aside (``NAME.bad``) so it is not overwritten.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import zipfile
from pathlib import Path

import numpy as np

from edge.archive import save_npz_atomic
from edge.fatigue.rainflow import (I_DIR, I_N, I_NLOG, I_SAMPLES, I_STARTED,
                                   RainflowCounter)

STATE_VERSION = 1
_ARRAYS = ("stack", "istate", "fstate", "hist")
log = logging.getLogger("vsense.fatigue")


class FatigueStateError(ValueError):
    """A state file that cannot be restored (the message names the file)."""


def _config(counter: RainflowCounter) -> str:
    return json.dumps({"hotspots": [h.name for h in counter.hotspots],
                       "sn": counter.sn.round(12).tolist(),
                       "bins": counter.hbins.round(12).tolist(),
                       "n_range": counter.n_range, "n_mean": counter.n_mean,
                       "residue_cap": counter.residue_cap}, sort_keys=True)


def _digest(arrays: dict) -> str:
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save_state(path, counter: RainflowCounter) -> None:
    """Write the counter's state to ``path`` atomically (temp file, fsync, rename, fsync of
    the directory)."""
    path = Path(path)
    arrays = {k: getattr(counter, k) for k in _ARRAYS}
    arrays["config"] = np.array(_config(counter))
    arrays["version"] = np.array(STATE_VERSION, dtype=np.int64)
    arrays["sha256"] = np.array(_digest(arrays))
    save_npz_atomic(path, arrays, sync_dir=True)


def _read(path: Path) -> dict:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise FatigueStateError(f"{path}: not a readable fatigue state file "
                                f"({type(exc).__name__}: {exc})") from None


def load_state(path, counter: RainflowCounter) -> None:
    """Restore ``counter`` from ``path`` (all checks before anything is changed)."""
    path = Path(path)
    d = _read(path)
    missing = sorted({"version", "config", "sha256", *_ARRAYS} - set(d))
    if missing:
        raise FatigueStateError(f"{path}: missing fields {missing}")
    if d["version"].shape != () or int(d["version"]) != STATE_VERSION:
        raise FatigueStateError(f"{path}: state version {d['version']!r}, this code reads "
                                f"{STATE_VERSION}")
    if str(d["config"]) != _config(counter):
        raise FatigueStateError(f"{path}: written for another configuration (hotspots, "
                                f"curves, bins or sizes changed): {str(d['config'])[:200]}")
    body = {k: d[k] for k in (*_ARRAYS, "config", "version")}
    if str(d["sha256"]) != _digest(body):
        raise FatigueStateError(f"{path}: checksum mismatch (the file was altered or "
                                "damaged)")
    for k in _ARRAYS:
        want = getattr(counter, k)
        if d[k].shape != want.shape or d[k].dtype != want.dtype:
            raise FatigueStateError(f"{path}: {k} has {d[k].dtype} {d[k].shape}, expected "
                                    f"{want.dtype} {want.shape}")
    ist, fst = d["istate"], d["fstate"]
    if not (np.all(np.isfinite(d["stack"])) and np.all(np.isfinite(fst))
            and np.all(np.isfinite(d["hist"]))):
        raise FatigueStateError(f"{path}: non-finite values in the state")
    counts = np.delete(ist, I_DIR, axis=1)
    if (np.any(counts < 0) or np.any(ist[:, I_N] > counter.residue_cap)
            or np.any(np.abs(ist[:, I_DIR]) > 1) or np.any(ist[:, I_STARTED] > 1)
            or np.any(fst[:, 1:] < 0) or np.any(d["hist"] < 0)):
        raise FatigueStateError(f"{path}: values out of range in the state")
    for k in _ARRAYS:
        getattr(counter, k)[...] = d[k]
    counter.istate[:, I_NLOG] = 0  # the cycle log is not persisted


def restore(path, counter: RainflowCounter) -> str:
    """Restore at start: ``"restored"``, ``"fresh"`` (no file) or ``"bad"`` (a warning
    naming the file, the file moved to ``NAME.bad``, the counter fresh)."""
    path = Path(path)
    try:
        load_state(path, counter)
    except FileNotFoundError:
        counter.reset()
        return "fresh"
    except FatigueStateError as exc:
        counter.reset()
        bad = path.with_name(path.name + ".bad")
        try:
            os.replace(path, bad)
        except OSError:
            bad = path
        log.warning("fatigue state %s not restored, starting fresh (kept as %s): %s",
                    path, bad, exc)
        return "bad"
    return "restored"


def samples_counted(counter: RainflowCounter) -> int:
    """Samples (gaps included) the counter has seen since its start or reset."""
    return int(counter.istate[0, I_SAMPLES])


def replay_since(counter: RainflowCounter, samples: np.ndarray, first_index: int) -> int:
    """Feed the samples of a record ``samples[i]`` = sample ``first_index + i`` that the
    counter has not seen (index >= :func:`samples_counted`); returns how many were fed.
    A record that starts after the saved count leaves a hole: refused."""
    seen = samples_counted(counter)
    if first_index > seen:
        raise FatigueStateError(f"record starts at sample {first_index}, the state ends at "
                                f"{seen}: {first_index - seen} samples missing")
    rest = samples[seen - first_index:]
    if len(rest):
        counter.update(np.ascontiguousarray(rest, dtype=np.float64))
    return len(rest)


class PeriodicSaver:
    """Save every ``every_s`` seconds (called from an I/O tick, not the sample path)."""

    def __init__(self, path, counter: RainflowCounter, every_s: float = 60.0,
                 clock=time.monotonic):
        self.path, self.counter, self.every_s, self.clock = Path(path), counter, every_s, clock
        self.last = clock()

    def tick(self) -> bool:
        """Save when due; a failed save (OSError, raised) is retried ``every_s`` later, not
        at every tick."""
        now = self.clock()
        if now - self.last < self.every_s:
            return False
        self.last = now
        self.save()
        return True

    def save(self) -> None:
        save_state(self.path, self.counter)
        self.last = self.clock()
