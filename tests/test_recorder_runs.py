"""Recordings after restarts and power cuts (issue 40 item 6): a directory is a sequence of
runs (one per daemon start, never mixed), files cut short are skipped or trimmed with a
warning naming them, and a recorder killed with SIGKILL at seeded random points loses at most
one chunk, its files readable and the directory replayable. The recording-file fuzz class
runs 2,000+ cases in the reliability tier and a sample in the normal tier."""

from __future__ import annotations

import contextlib
import io
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from fuzz import run_cases, tier_cases
from helpers import chain_bundle

from edge.cli import main
from edge.daemon.recorder import Recorder
from edge.daemon.vsr import (RecordingError, _header_bytes, read_file, read_recording_full,
                             read_runs)

ROOT = Path(__file__).resolve().parents[1]
DELAY = 2  # window 3: the first 2 rows of each run are warm-up, not written by replay


@pytest.fixture(scope="module")
def bundle_path(tmp_path_factory):
    p = tmp_path_factory.mktemp("bundle") / "chain1.npz"
    chain_bundle(window=3, kinds=("displacement",)).save(p)
    return p


def _value(seq):
    return np.sin(seq * 0.01) * 1e-4


def _run(directory, n, chunk=64, seq0=0):
    """One recorder run (a daemon start): n raw samples from seq0, closed cleanly."""
    r = Recorder(directory, ["y0"], ["m"], rate=1000.0, device="d", chunk=chunk)
    seq = np.arange(seq0, seq0 + n, dtype=np.int64)
    r.append_raw(seq, seq * 1_000_000, _value(seq)[:, None], np.zeros(n, np.uint8))
    r.close()
    return r.run_id


def _replay_rows(capsys, args):
    code = main(["replay", *map(str, args)])
    cap = capsys.readouterr()
    rows = [ln for ln in cap.out.splitlines()[1:] if ln]
    return code, rows, cap.err


def test_a_directory_of_three_runs_is_three_runs_in_order(tmp_path, bundle_path, capsys):
    ids = [_run(tmp_path, n) for n in (300, 500, 400)]
    runs = read_runs(tmp_path)
    assert [r.recording.header["run"] for r in runs] == ids
    for r, n in zip(runs, (300, 500, 400)):  # never interleaved: each seq 0..n-1 once
        np.testing.assert_array_equal(r.recording.seq, np.arange(n))
        np.testing.assert_array_equal(r.recording.values[:, 0], _value(np.arange(n)))
    with pytest.raises(RecordingError, match=r"3 runs \(run 1 \(raw-.*300 samples\).*choose"):
        read_recording_full(tmp_path)
    assert len(read_recording_full(tmp_path, run=2).seq) == 500
    code, rows, err = _replay_rows(capsys, [tmp_path, "--bundle", bundle_path])
    assert code == 0, err
    # each run through its own estimator: its warm-up rows again, its times from 0 again
    assert len(rows) == 1200 - 3 * DELAY
    t = np.array([float(r.split(",")[0]) for r in rows])
    assert np.count_nonzero(np.diff(t) < 0) == 2
    assert "3 runs replayed one after another" in err
    code, rows2, err = _replay_rows(capsys, [tmp_path, "--bundle", bundle_path, "--run", "2"])
    assert code == 0 and rows2 == rows[298:298 + 498]
    code, _, err = _replay_rows(capsys, [tmp_path, "--bundle", bundle_path, "--run", "4"])
    assert code == 6 and "--run 4: it holds 3 run(s)" in err


def test_runs_written_before_run_ids_are_split_where_seq_starts_again(tmp_path):
    for n in (200, 300):
        _run(tmp_path, n, chunk=50)
    for f in tmp_path.glob("raw-*.vsr"):  # strip "run" from the headers (older daemons)
        rec = read_file(f)
        body = f.read_bytes()[-len(rec.seq) * 25:]
        f.write_bytes(_header_bytes({k: v for k, v in rec.header.items() if k != "run"}) + body)
    runs = read_runs(tmp_path)
    assert all("run" not in r.recording.header for r in runs)
    assert [len(r.recording.seq) for r in runs] == [200, 300]


def test_cut_files_are_skipped_or_trimmed_with_a_warning_naming_them(tmp_path, bundle_path,
                                                                    capsys):
    _run(tmp_path, 400, chunk=100)
    _run(tmp_path, 300, chunk=100)
    files = sorted(tmp_path.glob("raw-*.vsr"))
    os.truncate(files[-1], files[-1].stat().st_size - 5)   # partial last record
    with open(files[0], "ab") as fh:  # blocks of zeros a file system left after a power cut
        fh.write(bytes(3 * 25))
    (tmp_path / "raw-29991231T235959-000000.vsr").write_bytes(b"")     # killed after open
    (tmp_path / "raw-29991231T235959-000001.vsr").write_bytes(b"VSREC01\n\x40\0")  # cut header
    code, rows, err = _replay_rows(capsys, [tmp_path, "--bundle", bundle_path])
    assert code == 0, err
    assert len(rows) == 400 + 299 - 2 * DELAY
    assert f"warning: {files[-1]}: the last 20 bytes are a partial record" in err
    assert f"warning: {files[0]}: the last 3 of 403 records do not follow on in seq" in err
    assert "raw-29991231T235959-000000.vsr: empty file (0 bytes" in err
    assert "raw-29991231T235959-000001.vsr: truncated header (10 bytes)" in err
    with pytest.raises(RecordingError, match="empty file"):  # a single file: an error
        read_runs(tmp_path / "raw-29991231T235959-000000.vsr")


def test_the_header_is_on_the_disk_before_any_data(tmp_path):
    """A new file is fsynced with its header (and the directory with its name) when it is
    created, and again after its first chunk: observable as fsyncs counted by the OS? Not
    portably, so: the file is complete and readable as soon as the writer says idle."""
    r = Recorder(tmp_path, ["y0"], ["m"], rate=1000.0, chunk=64, chunk_age_s=0.0)
    seq = np.arange(10, dtype=np.int64)
    r.append_raw(seq, seq, _value(seq)[:, None], np.zeros(10, np.uint8))
    r.poll()
    assert r.idle.wait(10)
    (f,) = tmp_path.glob("raw-*.vsr")
    rec = read_runs(f)[0].recording
    assert rec.header["run"] == r.run_id and len(rec.seq) == 10
    r.close()


# --------------------------------------------------------------------- power cuts
def _lines(proc, timeout):
    """Lines of ``proc``'s stdout as they come, until ``timeout`` s pass (then TimeoutError)."""
    deadline, buf = time.monotonic() + timeout, b""
    fd = proc.stdout.fileno()
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or proc.poll() is not None and not select.select([fd], [], [], 0)[0]:
            raise TimeoutError(f"writer: no progress (exit {proc.poll()})")
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                raise TimeoutError(f"writer: output closed (exit {proc.wait(5)})")
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                yield line.decode()


def _kill_at(directory, target):
    """Start the writer, SIGKILL it once it reports ``target`` samples appended; returns
    (run id, chunk rows, samples it reported appended before the kill)."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "powercut_writer.py"),
                             str(directory)], stdout=subprocess.PIPE, cwd=ROOT)
    try:
        lines = _lines(proc, 60)
        _, run_id, _, chunk = next(lines).split()
        done = 0
        while done < target:
            done = int(next(lines))
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()
    return run_id, int(chunk), done


def _power_cuts(tmp_path, targets, capsys, bundle_path):
    lost = []
    for target in targets:
        run_id, chunk, done = _kill_at(tmp_path, target)
        warnings = []
        for kind in ("raw", "estimates"):
            try:
                runs = {x.recording.header["run"]: x
                        for x in read_runs(tmp_path, kind, warnings.append)}
            except RecordingError:  # killed before any file of this kind had its header
                prefix = "raw" if kind == "raw" else "est"
                assert not any(f.stat().st_size > 0 for f in tmp_path.glob(f"{prefix}-*.vsr"))
                runs = {}
            for w in warnings:
                assert ".vsr: " in w  # every warning names its file
            r = runs.get(run_id)
            n = 0 if r is None else len(r.recording.seq)
            if r is not None:  # what is there is exact and contiguous from 0
                np.testing.assert_array_equal(r.recording.seq, np.arange(n))
                np.testing.assert_array_equal(r.recording.values[:, 0],
                                              _value_writer(np.arange(n)))
            assert done - n <= chunk, (f"target {target}: {kind}: {n} of {done} samples on "
                                       f"disk, more than one chunk ({chunk}) lost")
            if kind == "raw":
                lost.append(done - n)
        assert len(runs) <= len(targets)
    code, rows, err = _replay_rows(capsys, [tmp_path, "--bundle", bundle_path])
    assert code == 0, err
    kept = [len(r.recording.seq) for r in read_runs(tmp_path)]
    assert len(rows) == sum(max(0, n - DELAY) for n in kept)
    with capsys.disabled():
        print(f"\npower cuts: {len(targets)} SIGKILLs, samples lost per run: max {max(lost)}, "
              f"mean {np.mean(lost):.0f} (one chunk: {chunk}); {len(kept)} runs replayed")
    return lost


def _value_writer(seq):
    sys.path.insert(0, str(ROOT / "tests"))
    from powercut_writer import value
    return value(seq)


def test_power_cut_sample(tmp_path, bundle_path, capsys):
    """A few SIGKILLs in the normal tier, among them the audit's 0.55 s after the start."""
    _power_cuts(tmp_path, [550, 0, 1230], capsys, bundle_path)


def test_power_cut_random_kills(tmp_path, bundle_path, capsys, request):
    """SIGKILLs at seeded random points (0 to 2.5 s of data; 50 in the reliability tier, 3
    in the normal tier), every run into the same directory like a daemon restarted by
    systemd."""
    rng = random.Random("powercut:0")
    targets = [rng.choice([0, rng.randint(0, 600), rng.randint(0, 2500),
                           rng.randint(0, 2500)]) for _ in range(tier_cases(request, 3, 50))]
    _power_cuts(tmp_path, targets, capsys, bundle_path)


# --------------------------------------------------------------------- fuzz class
def test_fuzz_recording_files(tmp_path, bundle_path, request, capsys):
    """Mutated .vsr files (bytes flipped, cut, inserted, headers rewritten) in a directory
    beside an intact run: reading gives runs or a RecordingError naming a file, replay exits
    0 or 6 naming it; never a traceback."""
    good = tmp_path / "good"
    _run(good, 120, chunk=40)
    _run(good, 80, chunk=40)
    originals = [f.read_bytes() for f in sorted(good.glob("raw-*.vsr"))]

    def case(d):
        work = tmp_path / "case"
        work.mkdir(exist_ok=True)
        for f in work.iterdir():
            f.unlink()
        for i, data in enumerate(originals):
            if d.random() < 0.6:
                data = d.mutated_bytes(data) if d.bool() else data[:d.int(0, len(data))]
            (work / f"raw-20260101T000000-{i:06d}.vsr").write_bytes(data)
        try:
            runs = read_runs(work, "raw", lambda w: None)
            assert all(len(r.recording.seq) == len(r.recording.values) for r in runs)
        except RecordingError as e:
            assert str(work) in str(e)
            return "refused"
        with contextlib.redirect_stderr(io.StringIO()) as buf:
            code = main(["replay", str(work), "--bundle", str(bundle_path), "-o",
                         str(tmp_path / "out.csv")])
        err = buf.getvalue()
        assert code in (0, 6) and "Traceback" not in err, err
        assert code == 0 or str(work) in err, err  # a refusal names the file or directory
        return "replayed" if code == 0 else "refused by replay"

    with capsys.disabled():  # the count of each outcome is reported
        counts = run_cases("recording-files", case, tier_cases(request))
    assert counts.get("replayed", 0) > 0 and counts.get("refused", 0) + counts.get(
        "refused by replay", 0) > 0
