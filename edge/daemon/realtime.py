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


def apply(rt: dict) -> dict:
    """Apply the process-wide part of ``[realtime]``; return what took effect."""
    return {"cpu_affinity": set_affinity(rt["cpu_affinity"]),
            "mlockall": lock_memory() if rt["mlockall"] else False}
