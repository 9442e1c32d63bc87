"""The daemon's memory release after start-up (edge.daemon.realtime) and the single-threaded
math libraries of ``vsense-edge run`` (edge.cli)."""

import os
import subprocess
import sys

import numpy as np

from edge.daemon import realtime
from helpers import chain_bundle

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: a hand-written /proc/PID/smaps: one mapping of each kind the release must tell apart
SMAPS = """\
00400000-00500000 r-xp 00000000 08:01 11 /usr/lib/libclean.so
Rss:                  64 kB
Anonymous:             0 kB
Private_Dirty:         0 kB
Swap:                  0 kB
00500000-00600000 r--p 00100000 08:01 11 /usr/lib/libclean.so
Rss:                  16 kB
Anonymous:             8 kB
Private_Dirty:         8 kB
Swap:                  0 kB
00600000-00700000 rw-p 00200000 08:01 11 /usr/lib/libclean.so
Rss:                   4 kB
Anonymous:             0 kB
Private_Dirty:         0 kB
Swap:                  0 kB
00700000-00800000 r--s 00000000 08:01 12 /usr/lib/shared.dat
Rss:                   4 kB
Anonymous:             0 kB
Swap:                  0 kB
00800000-00900000 r--p 00000000 00:05 13 /dev/gpiomem
Rss:                   4 kB
Anonymous:             0 kB
Swap:                  0 kB
00900000-00a00000 r--p 00000000 08:01 14 /usr/lib/old.so (deleted)
Rss:                   4 kB
Anonymous:             0 kB
Swap:                  0 kB
00a00000-00b00000 r--p 00000000 08:01 15 /opt/my dir/libspace.so
Rss:                   4 kB
Anonymous:             0 kB
Swap:                  0 kB
00b00000-00c00000 rw-p 00000000 00:00 0
Rss:                 400 kB
Anonymous:           400 kB
00c00000-00d00000 r--p 00000000 08:01 16 /usr/lib/swapped.so
Rss:                   0 kB
Anonymous:             0 kB
Swap:                  4 kB
"""


def test_clean_ranges_tells_mappings_apart(tmp_path):
    f = tmp_path / "smaps"
    f.write_text(SMAPS)
    mb = 0x100000
    # one library: only its read-only private mapping without private pages (the RELRO
    # mapping holds relocated, i.e. anonymous, pages; the data mapping is writable)
    assert realtime._clean_ranges("libclean.so", str(f)) == [(0x400000, 0x400000 + mb)]
    # every file: not the shared mapping, the device, the deleted file, the anonymous
    # memory, the swapped-out pages; a path with a space is one path
    assert realtime._clean_ranges(None, str(f)) == [(0x400000, 0x500000),
                                                    (0xa00000, 0xb00000)]
    assert realtime._clean_ranges("libspace.so", str(f)) == [(0xa00000, 0xb00000)]


def _status(key: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def test_release_of_every_file_keeps_the_process_working():
    from edge.estimator import Estimator

    b = chain_bundle(window=3, kinds=("displacement",))
    Y = np.sin(np.arange(200) * 0.05)[:, None] * 1e-4
    ref = Estimator(b).run(Y)[0]
    a = np.arange(64.0).reshape(8, 8)
    prod = a @ a.T  # OpenBLAS
    clean = sum(hi - lo for lo, hi in realtime._clean_ranges(None, "/proc/self/smaps"))
    assert clean > 0  # the interpreter's own text is a clean file mapping
    file_before = _status("RssFile")
    done = realtime.release_library_pages(None)
    file_after = _status("RssFile")
    # advised: the clean ranges found a moment before (the count may differ by mappings
    # created in between, e.g. by a lazily loaded extension: within 10 %)
    assert abs(done - clean) <= 0.1 * clean
    # some of the file pages left (what start-up and the other tests touched); those the
    # calls below need come back from the page cache
    assert file_after < file_before
    np.testing.assert_array_equal(Estimator(b).run(Y)[0], ref)  # same compiled kernel
    np.testing.assert_array_equal(a @ a.T, prod)


def test_release_after_startup_follows_the_config(monkeypatch):
    calls = []
    monkeypatch.setattr(realtime, "release_library_pages",
                        lambda name="libllvmlite.so", smaps=None: calls.append(name) or 0)
    monkeypatch.setattr(realtime, "trim_heap", lambda: calls.append("trim") or True)
    rt = {"mlockall": False, "release_startup_memory": True}
    realtime.release_after_startup(rt)
    assert calls == ["libllvmlite.so", "trim", None]  # LLVM, the heap, every other file
    calls.clear()
    realtime.release_after_startup(dict(rt, release_startup_memory=False))
    assert calls == []
    # locked memory: nothing is dropped (it could not be, and must not fault back)
    assert realtime.release_after_startup(dict(rt, mlockall=True)) == 0
    assert calls == []


def test_run_asks_for_single_threaded_math():
    from edge import cli

    env = {"OMP_NUM_THREADS": "4"}
    # NumPy is loaded in this process: too late, nothing is set
    assert cli.single_threaded_math(env) is False and env == {"OMP_NUM_THREADS": "4"}
    # a fresh interpreter, as `vsense-edge run` starts: set before NumPy, no OpenBLAS pool
    # (without it OpenBLAS starts one thread per extra core), an operator's value kept
    # (through main: its parser imports NumPy, so the order inside main matters). Threads are
    # counted against the interpreter's own at start: under qemu-user emulation (tests/arm64.sh)
    # every process has one more, qemu's RCU helper thread, so an absolute count reads 2
    code = ("import os; n0 = len(os.listdir('/proc/self/task'))\n"
            "import contextlib, io, sys; from edge import cli\n"
            "with contextlib.redirect_stdout(io.StringIO()): cli.main(['config-reference'])\n"
            "import numpy; print(len(os.listdir('/proc/self/task')) - n0, "
            "os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'])")
    env = {k: v for k, v in os.environ.items() if k not in cli.SINGLE_THREAD_ENV}
    env["OMP_NUM_THREADS"] = "3"
    env["PYTHONPATH"] = ROOT
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout.split()
    assert out == ["0", "1", "3"]
