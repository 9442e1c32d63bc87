"""The counter's state through restarts and power cuts (edge/fatigue/persist.py).

Reference: the uninterrupted count of the same record (and fatpack's whole-record count,
tests/test_fatigue_rainflow.py shows the two are equal)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import fatpack
import numpy as np
import pytest

from edge.fatigue import HistogramBins, Hotspot, RainflowCounter, curve
from edge.fatigue import reference as twin
from edge.fatigue.rainflow import I_NLOG
from edge.fatigue.persist import (FatigueStateError, PeriodicSaver, load_state, replay_since,
                                  restore, samples_counted, save_state)
from tests.fatigue_signals import cuts, record

ROOT = Path(__file__).resolve().parents[1]
BINS = HistogramBins(200.0, -100.0, 200.0)


def _counter(log_cap=0, names=("a", "b")):
    return RainflowCounter([Hotspot(n, curve(c), 2.0, BINS)
                            for n, c in zip(names, ("EN-71", "DNV-F-cp"))],
                           residue_cap=4096, log_cap=log_cap)


def _state(c):
    """The persisted state (the cycle log's fill level is a test aid, not state)."""
    ist = c.istate.copy()
    ist[:, I_NLOG] = 0
    return [c.stack.copy(), ist, c.fstate.copy(), c.hist.copy()]


def test_save_restore_at_random_points_equals_uninterrupted_and_fatpack(tmp_path):
    n = 1_000_000
    y = np.column_stack([record(n, seed=41), record(n, seed=42)])
    whole = _counter(log_cap=n)
    b = cuts(n, seed=7)
    for i0, i1 in zip(b[:-1], b[1:]):
        whole.update(y[i0:i1])
    rng = np.random.default_rng(8)
    restarts = set(rng.choice(len(b) - 1, size=25, replace=False).tolist())
    path = tmp_path / "fatigue.state"
    c = _counter()
    for k, (i0, i1) in enumerate(zip(b[:-1], b[1:])):
        c.update(y[i0:i1])
        if k in restarts:                     # save, drop the object, restore into a new one
            save_state(path, c)
            c = _counter()
            assert restore(path, c) == "restored"
    for a, w in zip(_state(c), _state(whole)):
        np.testing.assert_array_equal(a, w)   # bit for bit
    # and the count is fatpack's (whole record, gaps removed; last sample a reversal)
    for h in range(2):
        yy = y[:, h][np.isfinite(y[:, h])]
        cyc_ref, res_ref = fatpack.find_rainflow_cycles(twin.reversals(yy))
        end_cyc, end_res = whole.finish(h)
        np.testing.assert_array_equal(np.vstack([whole.cycle_log(h)[:, :2], end_cyc]),
                                      cyc_ref)
        np.testing.assert_array_equal(end_res, res_ref)


_CHILD = r"""
import sys, numpy as np
sys.path.insert(0, {root!r})
from tests.test_fatigue_persist import _counter
from tests.fatigue_signals import cuts, record
from edge.fatigue.persist import restore, save_state, samples_counted
n = {n}
y = np.column_stack([record(n, seed=51), record(n, seed=52)])
c = _counter()
restore({path!r}, c)
start = samples_counted(c)
b = cuts(n, seed=3, max_block=2000)
for k, (i0, i1) in enumerate(zip(b[:-1], b[1:])):
    if i1 <= start:
        continue
    c.update(np.ascontiguousarray(y[max(i0, start):i1]))
    if k % 7 == 0:
        save_state({path!r}, c)
        print("saved", i1, flush=True)
save_state({path!r}, c)
print("done", flush=True)
"""


def test_power_cut_kills_at_random_points(tmp_path):
    """A real process, SIGKILLed at random points (after a random number of saves, while it
    keeps counting and writing): each restart restores the last save and the recorder's
    samples since then are replayed; the damage equals the uninterrupted run's exactly (no
    cycle lost or counted twice) and no state file is ever torn."""
    n = 300_000
    path = tmp_path / "fatigue.state"
    script = _CHILD.format(root=str(ROOT), n=n, path=str(path))
    rng = np.random.default_rng(13)
    kills = 0
    for _ in range(4):
        p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                             text=True, cwd=ROOT)
        target = int(rng.integers(1, 12))
        for _ in range(target):
            line = p.stdout.readline()
            if not line or line.startswith("done"):
                break
        if p.poll() is None:
            p.kill()
            kills += 1
        p.wait()
        p.stdout.close()
        c = _counter()
        assert restore(path, c) == "restored"  # never torn, whatever the moment
    assert kills >= 2
    # finish: restore the last save, replay the recorder's samples since then
    y = np.column_stack([record(n, seed=51), record(n, seed=52)])
    c = _counter()
    restore(path, c)
    seen = samples_counted(c)
    assert replay_since(c, y[seen - 100:], seen - 100) == n - seen
    whole = _counter()
    whole.update(y)
    for a, w in zip(_state(c), _state(whole)):
        np.testing.assert_array_equal(a, w)
    assert c.summary(1)["damage"] == whole.summary(1)["damage"] > 0
    with pytest.raises(FatigueStateError, match="missing"):
        replay_since(_counter(), y[10:], 10)


def _saved(tmp_path) -> tuple[Path, RainflowCounter]:
    c = _counter()
    c.update(np.column_stack([record(20_000, seed=61), record(20_000, seed=62)]))
    path = tmp_path / "f.state"
    save_state(path, c)
    return path, c


def _rewrite(path, **changes):
    with np.load(path, allow_pickle=False) as z:
        d = {k: z[k] for k in z.files}
    d.update(changes)
    with open(path, "wb") as fh:
        np.savez(fh, **d)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "version", "nan", "checksum",
                                    "config", "range"])
def test_bad_state_files_are_named_never_a_crash(tmp_path, caplog, damage):
    path, c = _saved(tmp_path)
    raw = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        path.write_bytes(b"not a state file")
    elif damage == "version":
        _rewrite(path, version=np.array(99))
    elif damage == "nan":
        st = c.fstate.copy()
        st[0, 1] = np.nan
        _rewrite(path, fstate=st)
    elif damage == "checksum":
        h = c.hist.copy()
        h[0, 0, 0] += 1
        _rewrite(path, hist=h)
    elif damage == "config":
        path2 = tmp_path / "other.state"
        save_state(path2, _counter(names=("x", "y")))
        os.replace(path2, path)
    elif damage == "range":
        ist = c.istate.copy()
        ist[0, 0] = 10 ** 6
        _rewrite(path, istate=ist)
    fresh = _counter()
    with pytest.raises(FatigueStateError, match=str(path)):
        load_state(path, fresh)
    with caplog.at_level(logging.WARNING, logger="vsense.fatigue"):
        assert restore(path, fresh) == "bad"
    assert str(path) in caplog.text and "starting fresh" in caplog.text
    assert not path.exists() and path.with_name("f.state.bad").exists()
    assert fresh.summary()["samples"] == 0


def test_missing_file_is_a_fresh_start_and_saver_ticks(tmp_path):
    c = _counter()
    assert restore(tmp_path / "none.state", c) == "fresh"
    t = [0.0]
    s = PeriodicSaver(tmp_path / "p.state", c, every_s=10.0, clock=lambda: t[0])
    assert not s.tick()
    t[0] = 10.0
    assert s.tick() and (tmp_path / "p.state").exists()
    assert not (tmp_path / "p.state.tmp").exists()
    # a save that fails (directory gone) raises once and is retried every_s later, not at
    # every tick
    bad = PeriodicSaver(tmp_path / "gone" / "p.state", c, every_s=10.0, clock=lambda: t[0])
    t[0] = 20.0
    with pytest.raises(OSError):
        bad.tick()
    assert not bad.tick()
    t[0] = 30.0
    with pytest.raises(OSError):
        bad.tick()
