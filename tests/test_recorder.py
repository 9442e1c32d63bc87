"""Recorder: exact round trip, rotation, disk cap, fsync interval, truncated files, errors."""

import os
import time

import numpy as np
import pytest

from edge.daemon.recorder import (MAGIC, Recorder, RecordingError, read_file, read_recording,
                                  read_recording_full, record_dtype)


def _data(n, nch, seed):
    rng = np.random.default_rng(seed)
    seq = np.arange(n, dtype=np.int64)
    t = seq * 1_000_000
    v = rng.standard_normal((n, nch))
    f = np.zeros(n, np.uint8)
    return seq, t, v, f


def _rec(tmp_path, **kw):
    kw.setdefault("chunk", 64)
    return Recorder(tmp_path, ["a", "b", "c"], ["m", "m/s", "m/s^2"], ["F", "u"], ["N", "m"],
                    rate=1000.0, device="d1", bundle_hash="abc", **kw)


def test_round_trip_is_exact_and_in_order(tmp_path):
    seq, t, v, f = _data(1000, 3, seed=1)
    r = _rec(tmp_path)
    for i in range(0, 1000, 37):  # uneven appends across chunk boundaries
        r.append_raw(seq[i:i + 37], t[i:i + 37], v[i:i + 37], f[i:i + 37])
    r.append_estimates(seq[:10], t[:10], v[:10, :2], f[:10])
    r.close()
    tt, Y, names = read_recording(tmp_path)
    assert names == ["a", "b", "c"]
    # reference: the arrays written above, bit for bit
    np.testing.assert_array_equal(Y, v)
    np.testing.assert_allclose(tt, t * 1e-9, rtol=0, atol=1e-15)  # ns -> s conversion only
    full = read_recording_full(tmp_path, "estimates")
    np.testing.assert_array_equal(full.values, v[:10, :2])
    assert full.columns == ["F", "u"] and full.header["units"] == ["N", "m"]
    assert full.header["device"] == "d1" and full.header["bundle_hash"] == "abc"
    assert r.stats["raw_samples"] == 1000 and r.stats["estimate_samples"] == 10


def test_bad_samples_read_back_as_nan(tmp_path):
    seq, t, v, f = _data(10, 3, seed=2)
    f[3] = 1  # non-finite
    f[5] = 4  # saturated: value kept in the file, NaN for replay
    v[3, 1] = np.nan
    r = _rec(tmp_path)
    r.append_raw(seq, t, v, f)
    r.close()
    _, Y, _ = read_recording(tmp_path)
    assert np.isnan(Y[3]).all() and np.isnan(Y[5]).all()
    np.testing.assert_array_equal(np.delete(Y, [3, 5], 0), np.delete(v, [3, 5], 0))
    raw = read_recording_full(tmp_path)
    np.testing.assert_array_equal(raw.values[5], v[5])
    np.testing.assert_array_equal(raw.flags, f)


def test_rotation_by_size_keeps_everything(tmp_path):
    seq, t, v, f = _data(20000, 3, seed=3)
    rec_size = record_dtype(3).itemsize  # 16 + 24 + 1 = 41 bytes
    assert rec_size == 41
    r = _rec(tmp_path, rotate_mb=0.1, chunk=256)  # ~2400 records per file
    r.append_raw(seq, t, v, f)
    r.close()
    files = sorted(tmp_path.glob("raw-*.vsr"))
    assert len(files) >= 7
    _, Y, _ = read_recording(tmp_path)
    np.testing.assert_array_equal(Y, v)


def test_disk_cap_deletes_oldest_files_and_counts(tmp_path):
    seq, t, v, f = _data(40000, 3, seed=4)
    r = _rec(tmp_path, rotate_mb=0.1, max_disk_mb=0.35, chunk=256)
    r.append_raw(seq, t, v, f)
    r.close()
    total = sum(p.stat().st_size for p in tmp_path.glob("*.vsr"))
    # cap 0.35 MB enforced at each rotation, plus at most one open file of 0.1 MB
    assert total <= 0.35e6 + 0.11e6
    assert r.stats["files_deleted"] > 0
    rec = read_recording_full(tmp_path)
    # what is left is the newest, contiguous tail
    assert rec.seq[-1] == 39999
    np.testing.assert_array_equal(rec.seq, np.arange(rec.seq[0], 40000))


def test_data_reaches_the_disk_within_the_fsync_interval(tmp_path):
    seq, t, v, f = _data(100, 3, seed=5)
    r = _rec(tmp_path, fsync_interval_s=0.05, chunk_age_s=0.0)
    r.append_raw(seq, t, v, f)
    r.poll()  # ships the partial chunk
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        files = list(tmp_path.glob("raw-*.vsr"))
        if files and r.stats["fsyncs"] >= 1 and \
                read_file(files[0]).values.shape[0] == 100:
            break
        time.sleep(0.02)
    # the file is still open, yet readable and complete on disk
    assert read_file(files[0]).values.shape[0] == 100
    r.close()


def test_truncated_file_ignores_the_partial_record(tmp_path):
    seq, t, v, f = _data(50, 3, seed=6)
    r = _rec(tmp_path)
    r.append_raw(seq, t, v, f)
    r.close()
    p = next(tmp_path.glob("raw-*.vsr"))
    os.truncate(p, p.stat().st_size - 7)  # power cut in the middle of the last record
    rec = read_file(p)
    assert rec.values.shape == (49, 3) and rec.truncated_bytes == 41 - 7
    np.testing.assert_array_equal(rec.values, v[:49])


def test_errors_name_the_file(tmp_path):
    bad = tmp_path / "raw-x.vsr"
    bad.write_bytes(b"garbage!" + b"\0" * 20)
    with pytest.raises(RecordingError, match=r"raw-x\.vsr: not a vsense recording"):
        read_recording(bad)
    hdr = tmp_path / "raw-y.vsr"
    hdr.write_bytes(MAGIC + (5).to_bytes(4, "little") + b"{nope")
    with pytest.raises(RecordingError, match=r"raw-y\.vsr: header is not JSON"):
        read_file(hdr)
    with pytest.raises(RecordingError, match="no raw-\\*\\.vsr files"):
        read_recording(tmp_path / "empty") if (tmp_path / "empty").mkdir() is None else None
    with pytest.raises(RecordingError, match="no such recording"):
        read_recording(tmp_path / "missing")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    if os.access(ro, os.W_OK):  # running as root: permissions are not enforced
        ro.chmod(0o700)
        (ro / "file").write_text("x")
        with pytest.raises(RecordingError, match="cannot create recording directory"):
            Recorder(ro / "file" / "sub", ["a"], ["m"])
    else:
        with pytest.raises(RecordingError, match="not writable"):
            Recorder(ro, ["a"], ["m"])


def test_one_poll_ships_every_stream_as_one_item(tmp_path):
    """The writer wakes once per poll that ships, not once per chunk or stream: raw and
    estimate chunks of one poll share one queue item."""
    seq, t, v, f = _data(30, 3, seed=9)
    r = _rec(tmp_path, chunk_age_s=0.0, chunk=64)
    r._stop = True  # keep the writer out of the way: inspect the queue
    r.q.put(())  # ... it takes this, sees _stop and ends
    r._thread.join(5)
    r.append_raw(seq, t, v, f)
    r.append_estimates(seq, t, v[:, :2], f)
    assert r.q.empty()  # appends do no hand-over
    r.poll()
    item = r.q.get_nowait()
    assert [(kind, n) for kind, _, n in item] == [("raw", 30), ("estimates", 30)]
    assert r.q.empty()
