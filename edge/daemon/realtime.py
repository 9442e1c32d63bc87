"""Optional real-time settings; each fails gracefully with a logged warning."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import os
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


def gc_setup() -> None:
    """Collect once, then ``gc.freeze()``: the objects of start-up (numba's, the bundle's)
    are not scanned again by every later collection (each would hold the GIL for tens of ms
    while the acquisition thread waits for it)."""
    gc.collect()
    gc.freeze()


MADV_DONTNEED = 4


#: mappings never advised: devices (e.g. /dev/gpiomem registers), shared memory, memfd
_NOT_FILES = ("/dev/", "/SYSV", "/memfd:", "/dev/shm/")


def _is_plain_file(path: str) -> bool:
    return path.startswith("/") and not path.startswith(_NOT_FILES) and \
        not path.endswith("(deleted)")


def _clean_ranges(name: str | None, smaps: str) -> list[tuple[int, int]]:
    """Address ranges of ``name``'s mappings (``None``: of every mapped regular file) that
    are private, not writable and hold no private (copy-on-write) pages: every resident
    page equals the file's content."""
    out, cur = [], None
    with open(smaps) as f:
        for line in f:
            p = line.split()
            if p and "-" in p[0] and not p[0].endswith(":"):
                cur = None
                path = " ".join(p[5:]) if len(p) >= 6 else ""
                if path and "w" not in p[1] and p[1].endswith("p") and (
                        path.rsplit("/", 1)[-1] == name if name is not None
                        else _is_plain_file(path)):
                    a, b = (int(x, 16) for x in p[0].split("-"))
                    cur = [a, b, True]
                    out.append(cur)
            elif cur is not None and p[0] in ("Anonymous:", "Private_Dirty:", "Swap:") \
                    and int(p[1]) > 0:
                cur[2] = False  # relocated (RELRO) or otherwise written: keep it
    return [(a, b) for a, b, clean in out if clean]


def release_library_pages(name: str | None = "libllvmlite.so",
                          smaps: str = "/proc/self/smaps") -> int:
    """Drop this process's resident pages of a shared library's clean read-only mappings
    (``madvise(MADV_DONTNEED)``); ``name=None``: of every mapped regular file (shared
    libraries, Python extension modules, the interpreter). Return the bytes of address
    space advised (0 when nothing matches or the call fails; never raises).

    Used after start-up for the LLVM compiler inside llvmlite: once the estimator kernel is
    compiled or loaded from the numba cache (``Estimator`` warms it up), the ~70 MB of LLVM
    code and read-only data pages it touched are not used by the running kernel (machine
    code in its own anonymous pages). Only mappings without a single private page are
    advised (not the relocated RELRO segment), so every dropped page is an unmodified copy
    of the file: if LLVM runs again (e.g. a kernel of a new signature) the pages fault back
    in from the page cache. ``MADV_PAGEOUT`` would leave pages that another process also
    maps (another Python using the same venv), ``MADV_DONTNEED`` unmaps them from this
    process regardless. With ``None`` the same holds for every library: what start-up
    touched (imports, OpenBLAS and OpenSSL initialisation) leaves; what the running daemon
    uses comes back as minor faults (no disk read while the page cache holds the file)
    during its first samples and stays resident. Devices (``/dev/...``, e.g. GPIO
    registers), shared memory and deleted files are never advised.
    """
    what = name or "every mapped file"
    try:
        ranges = _clean_ranges(name, smaps)
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (OSError, AttributeError, ValueError) as e:
        log.warning("realtime: cannot release %s pages (%s); continuing", what, e)
        return 0
    done = 0
    refused = None
    for a, b in ranges:
        if madvise(a, b - a, MADV_DONTNEED) == 0:
            done += b - a
        else:
            refused = os.strerror(ctypes.get_errno())
    if refused is not None:
        log.warning("realtime: madvise(MADV_DONTNEED) on %s refused for some mappings (%s); "
                    "continuing", what, refused)
    if done:  # the caller reports the total once (start-up calls this twice)
        log.debug("released the resident pages of %s (%.0f MB of clean mappings)", what,
                  done / 1e6)
    return done


def rss_bytes(status: str = "/proc/self/status") -> int:
    """Resident set size of this process [bytes] (``VmRSS``; 0 where not available)."""
    try:
        with open(status) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def release_after_startup(rt: dict) -> int:
    """Once every kernel is compiled or loaded, before the first sample, with ``[realtime]
    release_startup_memory``: give back what start-up used and the running daemon does not
    need (LLVM's library pages, the C heap's free memory, every other library's clean
    pages). Nothing with ``mlockall`` (locked pages cannot be dropped and must not fault
    back). Return the RSS given back [bytes] (logged)."""
    if rt["mlockall"] or not rt["release_startup_memory"]:
        return 0
    before = rss_bytes()
    release_library_pages("libllvmlite.so")
    trim_heap()
    release_library_pages(None)
    after = rss_bytes()
    log.info("start-up memory released: resident %.1f MB -> %.1f MB", before / 1e6,
             after / 1e6)
    return max(0, before - after)


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


def apply(rt: dict) -> dict:
    """Apply the process-wide part of ``[realtime]``; return what took effect."""
    return {"cpu_affinity": set_affinity(rt["cpu_affinity"]),
            "mlockall": lock_memory() if rt["mlockall"] else False}
