"""Issue 26 item 1: a full disk must not eat the current run's recording.

On a real 1 MiB tmpfs (mounted for the test; root only) another process fills the disk while
the recorder writes. Before the fix the writer deleted the file it was writing (it counted as
closed and, with no older file, as the oldest): 67 % of a run's raw samples deleted, status
``running``, ``dropped_samples`` 0. The policy now: a full disk deletes only earlier runs'
files; past that new data is dropped and counted, ``problem`` names the reason and the
daemon's status is ``degraded`` while it lasts. (tests/test_harden_daemon.py injects ENOSPC
through the same write path without root.)
"""

import errno
import json
import os
import subprocess
import threading

import numpy as np
import pytest

from edge.daemon.app import build_daemon
from edge.daemon.config import config_from_dict
from edge.daemon.recorder import Recorder, read_file
from helpers import chain_bundle


@pytest.fixture
def small_disk(tmp_path):
    """A fresh tmpfs of 1 MiB (``size`` may be overridden by the test's parametrisation)."""
    d = tmp_path / "disk"
    d.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (test_harden_daemon.py injects ENOSPC)")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    yield d
    subprocess.run(["umount", "-l", str(d)], check=True)


def fill(path):
    """Another process's file taking every free byte of the file system; returns its size."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    n = 0
    try:
        while True:
            n += os.write(fd, b"\0" * 65536)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return n


def _data(n, nch=3, seed=0):
    rng = np.random.default_rng(seed)
    seq = np.arange(n, dtype=np.int64)
    return seq, seq * 1_000_000, rng.standard_normal((n, nch)), np.zeros(n, np.uint8)


def test_full_tmpfs_keeps_this_runs_files_drops_and_counts_new_data(small_disk):
    seq, t, v, f = _data(14_000)
    earlier = Recorder(small_disk, ["a", "b", "c"], ["m"] * 3, device="earlier")
    earlier.append_raw(seq[:3000], t[:3000], v[:3000], f[:3000])  # 123 kB, one file
    earlier.close()
    r = Recorder(small_disk, ["a", "b", "c"], ["m"] * 3, device="this", rotate_mb=0.05,
                 chunk=100, retry_s=0.0)

    def append(a, b):
        for i in range(a, b, 100):
            r.append_raw(seq[i:i + 100], t[i:i + 100], v[i:i + 100], f[i:i + 100])
            r.flush()
            assert r.idle.wait(10)  # the writer has taken the chunk (written or dropped)

    append(0, 3000)
    assert fill(small_disk / "filler1") > 0  # another process takes the rest of the disk
    append(3000, 3100)  # ENOSPC: the earlier run's file goes, the chunk is retried
    assert r.stats["files_deleted"] == 1 and r.stats["dropped_raw"] == 0
    assert fill(small_disk / "filler2") > 0  # ... and takes the space freed as well
    append(3100, 9000)
    assert r.stats["dropped_raw"] > 0
    assert "No space left" in r.degraded_reason()  # what makes the status `degraded`
    os.unlink(small_disk / "filler1")
    os.unlink(small_disk / "filler2")
    append(9000, 14_000)
    r.close()

    files = sorted(small_disk.glob("*.vsr"))
    parts = [read_file(p) for p in files]
    assert all(p.header["device"] == "this" for p in parts)  # the earlier file is gone
    assert r.stats["files_deleted"] == 1  # nothing of this run was deleted
    got = np.concatenate([p.seq for p in parts])
    # every appended row is on the disk or counted (reference: the 14,000 rows appended)
    assert got.size + r.stats["dropped_raw"] == 14_000
    assert r.stats["raw_samples"] == got.size
    # the head written before the disk filled and the tail after it was freed are whole
    np.testing.assert_array_equal(got[:3100], np.arange(3100))
    np.testing.assert_array_equal(got[-5000:], np.arange(9000, 14_000))
    np.testing.assert_array_equal(np.concatenate([p.values for p in parts]), v[got])
    assert all(p.truncated_bytes == 0 for p in parts)


@pytest.fixture(scope="module")
def bundle_path(tmp_path_factory):
    b = chain_bundle(window=3, kinds=("displacement", "acceleration"))
    p = tmp_path_factory.mktemp("bundle") / "chain.npz"
    b.save(p)
    return p


def test_full_tmpfs_makes_the_daemon_degraded_while_it_lasts(small_disk, bundle_path,
                                                             mosquitto, subscriber):
    dev = "fulldisk"
    cfg = config_from_dict({
        "device": {"id": dev}, "bundle": {"path": str(bundle_path)},
        "channels": [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0, "unit": "m"},
                     {"name": "y1", "pin": "AIN1", "sensitivity": 0.01}],
        "mqtt": {"host": "127.0.0.1", "port": mosquitto.port, "health_interval_s": 0.2},
        "recorder": {"dir": str(small_disk), "fsync_interval_s": 0.2},
        "simulate": {"clock": "real", "duration_s": 0.0, "seed": 3, "level": "signal"}})
    sub = subscriber([f"vsense/{dev}/status", f"vsense/{dev}/health"], "s-fulldisk")

    def states():
        return [json.loads(p) for p, _ in sub.get(f"vsense/{dev}/status")]

    def health():
        return [json.loads(p) for p, _ in sub.get(f"vsense/{dev}/health")]

    d = build_daemon(cfg, simulate=True)
    d.pub.start()
    code = []
    th = threading.Thread(target=lambda: code.append(d.run()))
    th.start()
    try:
        assert sub.wait(lambda: any(h["recorder"]["bytes"] > 50_000 for h in health()), 30)
        fill(small_disk / "filler")
        assert sub.wait(lambda: any(s["state"] == "degraded" for s in states()), 30)
        n_deg = len(states())
        os.unlink(small_disk / "filler")
        assert sub.wait(lambda: any(s["state"] == "running" for s in states()[n_deg:]), 30)
    finally:
        d.stop()
        th.join(30)
    assert code == [0]
    deg = next(s for s in states() if s["state"] == "degraded")
    assert "No space left" in deg["reason"]
    st = d.rec.stats
    assert st["dropped_raw"] > 0 and st["files_deleted"] == 0
    raw = [read_file(p) for p in sorted(small_disk.glob("raw-*.vsr"))]
    got = np.concatenate([p.seq for p in raw])
    # every raw sample is on the disk or counted as dropped (reference: samples processed),
    # each once, from the run's first sample on (the head written before the fill is kept)
    assert got.size + st["dropped_raw"] == d.processed
    assert got[0] == 0 and np.all(np.diff(got) > 0)
