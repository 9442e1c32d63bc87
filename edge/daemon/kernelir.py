"""The LLVM IR numba keeps of every loaded kernel, dropped after start-up (``[realtime]
release_kernel_ir``).

A kernel loaded from numba's on-disk cache is machine code (the cached object file, linked
into numba's in-process JIT) plus, for numba's own use, the kernel's LLVM IR parsed from the
cache file's bitcode (``CPUCodeLibrary._shared_module``). numba keeps that IR only to link
the kernel into another function compiled later that calls it (``_get_module_for_linking``);
running the kernel never reads it. The daemon's nine kernels hold about 7 MB of it in the C
heap (measured on x86-64 with numba 0.68, ``benchmarks/daemon.py --only memory``).
:func:`release_kernel_ir` replaces each such module by its bitcode (bytes, a few percent of
the parsed size) and parses it again on demand, so a later compilation that links one of
them (a new signature, another kernel calling it) still finds it.
"""

from __future__ import annotations

import logging
import sys

log = logging.getLogger("vsense.realtime")


def loaded_dispatchers(prefix: str = "") -> list:
    """numba dispatchers (``@njit`` functions) bound at module level in the imported
    modules whose name starts with ``prefix`` (all: ``""``), each once."""
    try:
        from numba.core.dispatcher import Dispatcher
    except ImportError:
        return []
    seen, out = set(), []
    for name, mod in list(sys.modules.items()):
        if mod is None or not name.startswith(prefix):
            continue
        try:
            values = list(vars(mod).values())
        except TypeError:
            continue
        for v in values:
            if isinstance(v, Dispatcher) and id(v) not in seen:
                seen.add(id(v))
                out.append(v)
    return out


def _relink(lib, bitcode: bytes):
    """``lib._get_module_for_linking`` after the release: the IR parsed again from its
    bitcode the first time a compilation links ``lib`` (then kept, as numba does)."""
    if lib._shared_module is None:
        import llvmlite.binding as ll

        lib._shared_module = ll.parse_bitcode(bitcode)
    return lib._shared_module


def release_kernel_ir(dispatchers=None) -> tuple[int, int]:
    """Drop the parsed linking IR of every loaded overload of ``dispatchers`` (default:
    :func:`loaded_dispatchers` of every imported module), keeping its bitcode to parse
    again on demand; return ``(modules dropped, bytes of bitcode newly kept)``. The memory
    goes back to the C heap (``malloc_trim`` then returns it to the system). Idempotent (a
    module parsed again since is dropped again); does nothing (a warning) where numba's
    code library lacks the attributes used."""
    if dispatchers is None:
        dispatchers = loaded_dispatchers()
    n = kept = 0
    for disp in dispatchers:
        for cres in list(disp.overloads.values()):
            lib = getattr(cres, "library", None)
            mod = getattr(lib, "_shared_module", None)
            if mod is None:
                continue  # nothing parsed, or released already
            if "_get_module_for_linking" not in vars(lib):  # else: parsed again since
                if not hasattr(type(lib), "_get_module_for_linking"):
                    log.warning("realtime: numba's code library not recognised (%s): the "
                                "kernels' IR stays", type(lib).__name__)
                    return n, kept
                bitcode = mod.as_bitcode()
                lib._get_module_for_linking = (lambda lib=lib, bc=bitcode: _relink(lib, bc))
                kept += len(bitcode)
            lib._shared_module = None
            del mod  # the last reference: llvmlite disposes of the module
            n += 1
    return n, kept
