"""Bounds on what loading a bundle archive may allocate (checked before decompression).

A crafted ``.npz`` can declare members that inflate to gigabytes (a 2 MB file took 3.97 GB
for 13.6 s, issue 12) or ``.npy`` headers with huge shapes. :func:`check_archive` reads only
the zip directory and each member's header and raises :class:`edge.bundle.BundleError`.
"""

from __future__ import annotations

import os
import zipfile

import numpy as np



class BundleError(ValueError):
    """A bundle file is missing, malformed, inconsistent or tampered with."""

def max_bundle_bytes() -> int:
    """Cap on a bundle's total uncompressed size [bytes]: ``VSENSE_MAX_BUNDLE_MB`` (default
    512 MB; a reduced model with maps is a few MB)."""
    try:
        mb = float(os.environ.get("VSENSE_MAX_BUNDLE_MB", "512"))
    except ValueError:
        mb = 512.0
    return int(mb * 1e6)


def check_archive(path: str) -> None:
    """Bound what loading ``path`` may allocate: declared member sizes and ``.npy`` headers
    (shape x itemsize) against :func:`max_bundle_bytes`, object arrays refused. Reads only
    the central directory and each member's first bytes."""
    cap = max_bundle_bytes()
    total = 0
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        if len(infos) > 10_000:
            raise BundleError(f"{path}: {len(infos)} members; not a bundle")
        for info in infos:
            total += info.file_size
            if total > cap:
                raise BundleError(f"{path}: uncompressed size exceeds {cap / 1e6:g} MB at "
                                  f"member {info.filename!r} (VSENSE_MAX_BUNDLE_MB)")
            if not info.filename.endswith(".npy"):
                continue
            with zf.open(info) as f:
                try:
                    version = np.lib.format.read_magic(f)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
                    else:
                        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
                except (ValueError, SyntaxError, TypeError) as exc:
                    raise BundleError(f"{path}: field {info.filename[:-4]!r}: bad .npy "
                                      f"header ({exc})") from None
            if dtype.hasobject:
                raise BundleError(f"{path}: field {info.filename[:-4]!r}: object arrays are "
                                  "not allowed")
            nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if nbytes > info.file_size:
                raise BundleError(f"{path}: field {info.filename[:-4]!r}: header claims "
                                  f"{nbytes} bytes, the member holds {info.file_size}")


def save_npz_atomic(path, arrays: dict, sync_dir: bool = False) -> None:
    """Write ``arrays`` as an ``.npz`` at ``path`` atomically: a temporary file beside it,
    ``fsync``, ``os.replace`` onto ``path`` (atomic on POSIX); ``sync_dir``: also ``fsync``
    the directory, so that the rename itself survives a power cut."""
    from pathlib import Path

    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    if sync_dir:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
