"""Optional real-time settings; each fails gracefully with a logged warning."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
import sys
import threading

log = logging.getLogger("vsense.realtime")

MCL_CURRENT, MCL_FUTURE = 1, 2


def set_fifo(priority: int, tid: int | None = None) -> bool:
    """SCHED_FIFO ``priority`` for thread ``tid`` (default: the calling thread)."""
    if priority <= 0:
        return False
    tid = threading.get_native_id() if tid is None else tid
    try:
        os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
        log.info("SCHED_FIFO priority %d for thread %d", priority, tid)
        return True
    except (OSError, AttributeError) as e:
        log.warning("realtime: SCHED_FIFO priority %d not permitted (%s); continuing with "
                    "normal scheduling (systemd: LimitRTPRIO=)", priority, e)
        return False


def set_fifo_threads(priority: int, skip: set[int] = frozenset()) -> int:
    """SCHED_FIFO ``priority`` for every thread of this process except the native ids in
    ``skip``; return how many were set (0 and one warning when not permitted)."""
    if priority <= 0:
        return 0
    n = 0
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        tids = [threading.get_native_id()]
    for tid in tids:
        if tid in skip:
            continue
        try:
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(priority))
            n += 1
        except ProcessLookupError:
            continue
        except (OSError, AttributeError) as e:
            log.warning("realtime: SCHED_FIFO priority %d for the other threads not "
                        "permitted (%s); continuing", priority, e)
            return n
    log.info("SCHED_FIFO priority %d for %d other threads", priority, n)
    return n


PR_SET_TIMERSLACK = 29


def set_timer_slack(ns: int) -> bool:
    """Timer slack of the calling thread [ns] (``prctl(PR_SET_TIMERSLACK)``; 0: leave it)."""
    if ns <= 0:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(int(ns)), 0, 0, 0) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return True
    except (OSError, AttributeError) as e:
        log.warning("realtime: timer slack %d ns not set (%s); continuing", ns, e)
        return False


def set_affinity(cpus: list[int]) -> bool:
    """Pin the process to ``cpus`` (empty: leave as is)."""
    if not cpus:
        return False
    try:
        os.sched_setaffinity(0, set(cpus))
        log.info("CPU affinity %s", sorted(cpus))
        return True
    except (OSError, AttributeError, ValueError) as e:
        log.warning("realtime: CPU affinity %s not possible (%s); continuing", cpus, e)
        return False


def lock_memory() -> bool:
    """``mlockall(MCL_CURRENT | MCL_FUTURE)``."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.mlockall(MCL_CURRENT | MCL_FUTURE) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        log.info("mlockall: memory locked")
        return True
    except (OSError, AttributeError) as e:
        log.warning("realtime: mlockall not permitted (%s); continuing (systemd: "
                    "LimitMEMLOCK=infinity)", e)
        return False


def gc_setup(mode: str) -> None:
    """``normal``: nothing; ``freeze``: ``gc.freeze()``; ``disable``: freeze + disable."""
    if mode in ("freeze", "disable"):
        gc.collect()
        gc.freeze()
    if mode == "disable":
        gc.disable()


def gc_restore(mode: str) -> None:
    if mode == "disable":
        gc.enable()


MADV_DONTNEED = 4


def _clean_ranges(name: str, smaps: str) -> list[tuple[int, int]]:
    """Address ranges of ``name``'s mappings that are not writable and hold no private
    (copy-on-write) pages: every resident page equals the file's content."""
    out, cur = [], None
    with open(smaps) as f:
        for line in f:
            p = line.split()
            if p and "-" in p[0] and not p[0].endswith(":"):
                cur = None
                if len(p) >= 6 and p[5].rsplit("/", 1)[-1] == name and "w" not in p[1]:
                    a, b = (int(x, 16) for x in p[0].split("-"))
                    cur = [a, b, True]
                    out.append(cur)
            elif cur is not None and p[0] in ("Anonymous:", "Private_Dirty:", "Swap:") \
                    and int(p[1]) > 0:
                cur[2] = False  # relocated (RELRO) or otherwise written: keep it
    return [(a, b) for a, b, clean in out if clean]


def release_library_pages(name: str = "libllvmlite.so", smaps: str = "/proc/self/smaps") -> int:
    """Drop this process's resident pages of a shared library's clean read-only mappings
    (``madvise(MADV_DONTNEED)``); return the bytes of address space advised (0 when the
    library is not mapped or the call fails; never raises).

    Used after start-up for the LLVM compiler inside llvmlite: once the estimator kernel is
    compiled or loaded from the numba cache (``Estimator`` warms it up), the ~70 MB of LLVM
    code and read-only data pages it touched are not used by the running kernel (machine
    code in its own anonymous pages). Only mappings without a single private page are
    advised (not the relocated RELRO segment), so every dropped page is an unmodified copy
    of the file: if LLVM runs again (e.g. a kernel of a new signature) the pages fault back
    in from the page cache. ``MADV_PAGEOUT`` would leave pages that another process also
    maps (another Python using the same venv), ``MADV_DONTNEED`` unmaps them from this
    process regardless.
    """
    try:
        ranges = _clean_ranges(name, smaps)
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (OSError, AttributeError, ValueError) as e:
        log.warning("realtime: cannot release %s pages (%s); continuing", name, e)
        return 0
    done = 0
    for a, b in ranges:
        if madvise(a, b - a, MADV_DONTNEED) == 0:
            done += b - a
        else:
            e = ctypes.get_errno()
            log.warning("realtime: madvise(MADV_DONTNEED) on %s refused (%s); continuing",
                        name, os.strerror(e))
            return done
    if done:
        log.info("released the resident pages of %s (%.0f MB of clean mappings)", name,
                 done / 1e6)
    return done


def trim_heap() -> bool:
    """Give the C heap's free memory back to the system (glibc ``malloc_trim(0)``); False
    where there is no such function (another libc). Used once after start-up: compiling or
    loading the kernels and importing numba leave freed but resident arenas behind."""
    try:
        fn = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_size_t]
    return bool(fn(0))


def set_switch_interval(us: float) -> None:
    """``sys.setswitchinterval``: a thread waiting for the GIL asks the holder to drop it
    after ``us`` microseconds (Python's default 5000)."""
    sys.setswitchinterval(us * 1e-6)


def apply(rt: dict) -> dict:
    """Apply the process-wide part of ``[realtime]``; return what took effect."""
    set_switch_interval(rt["switch_interval_us"])
    return {"cpu_affinity": set_affinity(rt["cpu_affinity"]),
            "mlockall": lock_memory() if rt["mlockall"] else False}
