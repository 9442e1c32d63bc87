"""The bundle's schema: every array field once, with its version, and the validation.

The one definition of the format, assembled here from its parts: the tables
(:data:`FIELDS`, the smoother's :data:`KF_ARRAYS` and :data:`KF_OPTIONAL`) are written once
in :mod:`edge.bundle_fields`, the checks of the arrays' contents in
:mod:`edge.bundle_validate`. :mod:`edge.bundle` writes and reads by the tables,
:func:`validate` checks a file against them, and :func:`field_table` renders them for
docs/bundle.md (a test keeps that page equal to it).

Versions: 1 Tikhonov only; 2 adds the smoother (``kf_*``, ``meta["estimator"]``); 3 moves
``discretization`` and ``regularization`` from meta (where 1 and 2 kept them, with defaults)
into their own fields, so an older edge refuses a bundle whose mathematics it would get wrong;
4 adds the smoother's load-level tracking (``kf_level_*``: gains for a grid of load levels,
switched on the device from the innovations) and the lower model-check threshold
(``kf_nis_threshold_low``), both optional; 5 adds the hybrid twin (``kf_hy_*``: a neural
correction of the smoother's model as ONNX, where it enters the state, the channels and the
outputs, and its trained envelope), optional; 6 adds ``kf_hy_direct``, the weights of the
correction's values held over the steps after and before a sample in its direct terms (the
channels' ``Dg`` and the outputs' ``Cqg``): a schema-5 hybrid bundle is read with ``(1, 0)``,
the mathematics it was written with; 7 adds the measurement chain (``chain_*``: converter, data
rate, mode, each channel's conversion instant; :mod:`edge.acquisition`), which a smoother
models with a few states per channel when it is not ``ideal``: a bundle of schema <= 6 is read
as ``ideal`` (point samples), the mathematics it was written with; 8 adds each sensor's own
dynamics before the converter (``chain_highpass_hz``, ``chain_average_s``, ``chain_drift``: a
high-pass, a moving average, a drifting offset; :mod:`edge.acquisition`), none in a bundle of
schema <= 7; and the steady filter of an
alternative measurement chain (``kf_alt_*``, optional: :mod:`edge.estimator.chain_check`); 9
adds each force's and output's model-error factor of the stated std (``kf_std_scale``); 10 adds
``kf_hy_guard``, what the hybrid twin does outside its trained envelope (1: the network's input
held at the envelope's bound; 0: the correction off, as a hybrid bundle of schema <= 9 is read),
and ``chain_markov``: 1 makes the Tikhonov estimators' Markov parameters the conversions'
(:mod:`edge.estimator.chain_window`), a bundle of schema <= 9 is read with 0 (point samples),
the mathematics it was written with.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

from edge import __version__
from edge.acquisition import chain_of, validate_chain  # noqa: F401 (re-exported)
from edge.archive import BundleError, max_bundle_bytes  # noqa: F401 (re-exported)
from edge.bundle_fields import (EXTRAS_DOC, FIELDS, KF_ARRAYS,  # noqa: F401 (re-exported)
                                KF_FIELDS, KF_OPTIONAL, MAX_NIS_WINDOW_S, MAX_STARTUP_ROWS,
                                MAX_WINDOW, Field, required)
from edge.bundle_validate import check_meta, check_model, check_smoother
from edge.kinds import DISCRETIZATIONS, REGULARIZATIONS

SCHEMA_VERSION = 10
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)


def field_table() -> str:
    """Markdown table of every bundle field (embedded in docs/ARCHITECTURE.md)."""
    rows = ["| field | dtype | shape | since | meaning |", "| --- | --- | --- | --- | --- |"]
    kinds = {"i": "int64", "f": "float64", "U": "str"}
    for f in FIELDS:
        rows.append(f"| `{f.name}` | {kinds[f.dtype]} | {f.shape} | {f.since} | {f.doc} |")
    for f in KF_ARRAYS:
        rows.append(f"| `kf_{f.name}` | {kinds[f.dtype]} | {f.shape} | {f.since} | "
                    f"smoother only: {f.doc} |")
    lv = [f for f in KF_OPTIONAL if f.name.startswith(("level_", "track_"))]
    hy = [f for f in KF_OPTIONAL if f.name.startswith("hy_")]
    alt = [f for f in KF_OPTIONAL if f.name.startswith("alt_")]
    for f in KF_OPTIONAL:
        if f not in lv and f not in hy and f not in alt:
            rows.append(f"| `kf_{f.name}` | {kinds[f.dtype]} | {f.shape} | {f.since} | "
                        f"smoother, optional: {f.doc} |")
    rows.append(f"| `kf_level_*`, `kf_track_*` | float64 | (nl, ...) | {lv[0].since} | smoother, "
                f"optional: gains of a grid of nl load levels ({', '.join(f.name for f in lv)}; "
                f"`edge/bundle_schema.py` `KF_OPTIONAL`; "
                f"{', '.join(f.name + ' since ' + str(f.since) for f in lv if f.since > lv[0].since)}) |")
    rows.append(f"| `kf_hy_*` | float64, uint8 | ... | {hy[0].since} | smoother, optional: the "
                f"hybrid twin's correction network (ONNX bytes) and where it acts "
                f"({', '.join(f.name[3:] for f in hy)}; `KF_OPTIONAL`; "
                f"{', '.join(f.name[3:] + ' since ' + str(f.since) for f in hy if f.since > hy[0].since)}) |")
    rows.append(f"| `kf_alt_*` | float64 | ... | {alt[0].since} | smoother, optional: the "
                f"steady filter of an alternative measurement chain, the chain check's "
                f"({', '.join(f.name[4:] for f in alt)}; `edge/estimator/chain_check.py`) |")
    rows.append(f"| `x_<name>` | any | any | 1 | {EXTRAS_DOC} |")
    return "\n".join(rows) + "\n"


def content_hash(arrays: dict) -> str:
    """sha256 over every array except ``content_hash``, in sorted name order."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        if name == "content_hash":
            continue
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode())
        h.update(str(a.dtype.str).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def settings(a: dict, meta: dict) -> tuple[str, str]:
    """(discretization, regularization) of a validated bundle: its fields from schema 3 on,
    ``meta`` (with defaults) in schema 1 and 2."""
    if int(a["schema_version"]) >= 3:
        return str(a["discretization"]), str(a["regularization"])
    return meta.get("discretization", "newmark"), meta.get("regularization", "tikhonov0")


def validate(a: dict, path: str) -> dict:
    """Check a bundle's arrays against :data:`FIELDS`; return its meta.

    Raises :class:`BundleError` naming the file and the field."""

    def fail(field_name, msg):
        raise BundleError(f"{path}: field {field_name!r}: {msg}")

    if "schema_version" not in a:
        fail("schema_version", "missing")
    try:
        version = int(a["schema_version"])
    except (TypeError, ValueError):
        fail("schema_version", "not an integer")
    if version not in READABLE_VERSIONS:
        fail("schema_version", f"{version} is not supported by this vsense ({__version__} "
                               f"reads schema {', '.join(map(str, READABLE_VERSIONS))}); "
                               "rebuild the bundle with this vsense")
    for f in required(version):
        if f.name not in a:
            fail(f.name, "missing")
        arr = np.asarray(a[f.name])
        if arr.dtype.kind not in f.dtype:
            fail(f.name, f"dtype {arr.dtype} (expected kind {f.dtype!r})")
        if arr.ndim != f.ndim:
            fail(f.name, f"has {arr.ndim} dimensions, expected {f.ndim}")
    expected = content_hash(a)
    if str(a["content_hash"]) != expected:
        fail("content_hash", "does not match the contents (file corrupted or edited)")
    try:
        meta = json.loads(str(a["meta"]))
    except (ValueError, RecursionError) as exc:
        fail("meta", f"not valid JSON ({exc})")
    if not isinstance(meta, dict):
        fail("meta", "must be a JSON object")
    disc, reg = settings(a, meta)
    where = "discretization" if version >= 3 else "meta"
    if disc not in DISCRETIZATIONS:
        fail(where, f"discretization {disc!r} is not {' or '.join(DISCRETIZATIONS)}")
    where = "regularization" if version >= 3 else "meta"
    if reg not in REGULARIZATIONS:
        fail(where, f"regularization {reg!r} is not {' or '.join(REGULARIZATIONS)}")
    check_model(a, fail)
    n, nch, nf, nout = (a["M"].shape[0], a["channel_dof"].shape[0], a["force_dof"].shape[0],
                        a["output_kind"].shape[0])
    check_meta(meta, nch, nf, nout, fail)
    nk = validate_chain(a, version, nch, fail)
    check_smoother(a, meta, version, n, nch, nf + nout, fail, nk)
    return meta
