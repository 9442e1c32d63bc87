"""The checks of a bundle's arrays beyond dtype and dimensions (:func:`edge.bundle_schema.validate`
runs them): the model (:func:`check_model`), the names in meta (:func:`check_meta`) and the
smoother's ``kf_*`` arrays (:func:`check_smoother`). Each failure calls ``fail(field, message)``,
which raises the :class:`edge.archive.BundleError` naming the file and the field.
"""

from __future__ import annotations

import numpy as np

from edge import DOF_NAMES
from edge.archive import max_bundle_bytes
from edge.bundle_fields import KF_ARRAYS, KF_OPTIONAL, MAX_NIS_WINDOW_S, MAX_STARTUP_ROWS, MAX_WINDOW
from edge.kinds import ESTIMATOR_METHODS, SIGNAL_KINDS


def check_model(a: dict, fail) -> None:
    """Matrices, time step, Newmark and Tikhonov parameters, window, index arrays."""
    n = a["M"].shape[0]
    if n == 0:
        fail("M", "empty")
    for name in ("M", "C", "K"):
        A = a[name]
        if A.shape != (n, n):
            fail(name, f"shape {A.shape}, expected ({n}, {n})")
        if not np.all(np.isfinite(A)):
            fail(name, "contains NaN or inf")
        scale = max(float(np.max(np.abs(A))), 1e-300)
        asym = float(np.max(np.abs(A - A.T))) / scale
        if asym > 1e-9:
            fail(name, f"not symmetric (max |A - A^T| / max |A| = {asym:.2e})")
    try:
        np.linalg.cholesky(a["M"])
    except np.linalg.LinAlgError:
        fail("M", "not positive definite")
    for name in ("dt", "beta", "gamma", "alpha"):
        if not np.isfinite(a[name]):
            fail(name, "not finite")
    if float(a["dt"]) <= 0:
        fail("dt", f"must be > 0, got {float(a['dt'])}")
    if float(a["alpha"]) < 0:
        fail("alpha", f"must be >= 0, got {float(a['alpha'])}")
    beta, gamma = float(a["beta"]), float(a["gamma"])
    if not (gamma >= 0.5 and beta >= 0.25 * (0.5 + gamma) ** 2 - 1e-12):
        fail("beta", f"Newmark (beta={beta}, gamma={gamma}) is not unconditionally stable "
                     "(needs gamma >= 1/2 and beta >= (gamma + 1/2)^2 / 4)")
    window = int(a["window"])
    if window < 1:
        fail("window", f"must be >= 1, got {window}")
    if window > MAX_WINDOW:
        fail("window", f"must be <= {MAX_WINDOW}, got {window}")
    nch = a["channel_dof"].shape[0]
    nf = a["force_dof"].shape[0]
    if nch == 0:
        fail("channel_dof", "no channels")
    if nf == 0:
        fail("force_dof", "no forces")
    # the estimator's window matrix J is (L nch, L nf) float64: bound what it will allocate
    if (window * nch) * (window * nf) * 8 > max_bundle_bytes():
        fail("window", f"L = {window} with {nch} channels and {nf} forces needs a "
                       f"{window * nch} x {window * nf} window matrix: too large")
    for name, size in (("channel_kind", nch), ("channel_weight", nch)):
        if a[name].shape != (size,):
            fail(name, f"shape {a[name].shape}, expected ({size},)")
    for name in ("channel_dof", "force_dof"):
        idx = a[name]
        if np.any(idx < 0) or np.any(idx >= n):
            fail(name, f"index out of range 0..{n - 1}: {idx.tolist()}")
    if len(set(a["force_dof"].tolist())) != nf:
        fail("force_dof", "two forces act on the same DOF")
    nk = len(SIGNAL_KINDS)
    # a channel reads one reduced coordinate: displacement, velocity, acceleration or a strain
    # gauge (the offline build writes the reduction in a basis where the gauge's strain is a
    # coordinate, offline/gauge_basis.py); a stress is an output only
    if np.any((a["channel_kind"] < 0) | (a["channel_kind"] >= 4)):
        fail("channel_kind", "kinds must be 0 (displacement), 1 (velocity), 2 (acceleration) "
                             "or 3 (strain)")
    w = a["channel_weight"]
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        fail("channel_weight", "weights must be finite and > 0")
    nout = a["output_kind"].shape[0]
    if a["output_rows"].shape != (nout, n):
        fail("output_rows", f"shape {a['output_rows'].shape}, expected ({nout}, {n})")
    if not np.all(np.isfinite(a["output_rows"])):
        fail("output_rows", "contains NaN or inf")
    if np.any((a["output_kind"] < 0) | (a["output_kind"] >= nk)):
        fail("output_kind", f"kinds must be 0..{nk - 1} ({', '.join(SIGNAL_KINDS)})")


def check_meta(meta: dict, nch: int, nf: int, nout: int, fail) -> None:
    """``meta["channels" | "forces" | "outputs"]``: one entry per array row, typed, unique."""
    for key, size in (("channels", nch), ("forces", nf), ("outputs", nout)):
        items = meta.get(key)
        if not isinstance(items, list) or len(items) != size:
            fail("meta", f"'{key}' must list {size} entries")
        for i, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                fail("meta", f"'{key}'[{i}] needs a 'name'")
            for k, types in (("unit", str), ("dof", str), ("node", int)):
                if k in item and (not isinstance(item[k], types) or isinstance(item[k], bool)):
                    fail("meta", f"'{key}'[{i}].{k} must be a {types.__name__}, got "
                                 f"{type(item[k]).__name__}")
            dof = item.get("dof", "")
            if dof and dof not in DOF_NAMES:
                fail("meta", f"'{key}'[{i}].dof {dof!r} is not one of {', '.join(DOF_NAMES)}")
    names = [m["name"] for key in ("channels", "forces", "outputs") for m in meta[key]]
    dup = {x for x in names if names.count(x) > 1}
    if dup:
        fail("meta", f"duplicate names {sorted(dup)} among channels, forces and outputs")


def check_smoother(a: dict, meta: dict, version: int, n: int, nch: int, nq: int, fail,
                 nk: int = 0) -> None:
    """The estimator method and, for the smoother, the ``kf_*`` arrays (shapes, finiteness)."""
    est = meta.get("estimator", {"method": "tikhonov"})
    if not isinstance(est, dict) or est.get("method", "tikhonov") not in ESTIMATOR_METHODS:
        fail("meta", f"estimator method {est!r} is not one of {', '.join(ESTIMATOR_METHODS)}")
    present = sorted(k for k in a if k.startswith("kf_"))
    if est.get("method", "tikhonov") == "tikhonov":
        if present:
            fail(present[0], "smoother arrays in a bundle whose estimator is tikhonov")
        return
    if version < 2:
        fail("schema_version", "the smoother needs schema 2")
    for f in KF_ARRAYS:
        key = f"kf_{f.name}"
        if key not in a:
            fail(key, "missing (needed by the smoother)")
        arr = np.asarray(a[key])
        if arr.ndim != f.ndim or arr.dtype.kind not in f.dtype:
            fail(key, f"dtype {arr.dtype}, {arr.ndim} dimensions (expected {f.ndim})")
        if not np.all(np.isfinite(arr)):
            fail(key, "contains NaN or inf")
    ns = a["kf_A"].shape[0]
    if ns < 2 * n + nk:
        fail("kf_A", f"{ns} states for {n} reduced DOFs and {nk} chain states (needs >= "
                     f"{2 * n + nk})")
    lag = int(a["window"]) - 1
    nb = a["kf_band_ba"].shape[0]
    shapes = {"A": (ns, ns), "H": (nch, ns), "K": (ns, nch), "Cq": (nq, ns),
              "G": (lag + 1, nq, nch), "Sinv": (nch, nch), "std": (nq,), "Wt": (nch, nch),
              "band_ba": (nb, 5), "band_gain": (nb,), "band_threshold": (nb,),
              "band_hz": (nb, 2)}
    for name, shape in shapes.items():
        if a[f"kf_{name}"].shape != shape:
            fail(f"kf_{name}", f"shape {a[f'kf_{name}'].shape}, expected {shape}")
    if np.any(a["kf_std"] < 0):
        fail("kf_std", "standard deviations must be >= 0")
    w_max = int(MAX_NIS_WINDOW_S / float(a["dt"]))
    if not 1 <= int(a["kf_nis_window"]) <= w_max:
        fail("kf_nis_window", f"must be 1 .. {w_max} samples ({MAX_NIS_WINDOW_S:g} s at the "
                              f"bundle's rate), got {int(a['kf_nis_window'])}")
    if float(a["kf_nis_threshold"]) <= 0:
        fail("kf_nis_threshold", "must be > 0")
    if np.any(a["kf_band_gain"] <= 0) or np.any(a["kf_band_threshold"] <= 0):
        fail("kf_band_gain", "band gains and thresholds must be > 0")
    _validate_kf_levels(a, version, ns, nch, nq, lag, fail)
    if "kf_startup_var" in a:
        sv = np.asarray(a["kf_startup_var"])
        if sv.ndim != 2 or sv.shape[1] != nq or not 1 <= sv.shape[0] <= MAX_STARTUP_ROWS:
            fail("kf_startup_var", f"shape {sv.shape}, expected (N, {nq}) with 1 <= N <= "
                 f"{MAX_STARTUP_ROWS}")
        if np.any(sv < 0):
            fail("kf_startup_var", "variances must be >= 0")
    if "kf_std_scale" in a:
        sc = np.asarray(a["kf_std_scale"])
        if sc.shape != (nq,):
            fail("kf_std_scale", f"shape {sc.shape}, expected ({nq},)")
        if not np.all(np.isfinite(sc) & (sc > 0.0)):  # < 1: narrowed (build --record)
            fail("kf_std_scale", "factors must be finite and > 0")
    _validate_kf_hybrid(a, version, ns, nch, nq, fail)
    if _group_present(a, "alt_", fail):
        na = a["kf_alt_A"].shape[0]
        for name, shape in {"alt_A": (na, na), "alt_H": (nch, na), "alt_K": (na, nch),
                            "alt_Sinv": (nch, nch)}.items():
            if a[f"kf_{name}"].shape != shape:
                fail(f"kf_{name}", f"shape {a[f'kf_{name}'].shape}, expected {shape}")


def _validate_kf_levels(a: dict, version: int, ns: int, nch: int, nq: int, lag: int,
                        fail) -> None:
    """The optional ``kf_*`` arrays of schema 4 (all or none of the ``level_*``)."""
    opt = [f for f in KF_OPTIONAL if f"kf_{f.name}" in a]
    for f in opt:
        if version < f.since:
            fail(f"kf_{f.name}", f"needs schema {f.since}")
    for f in opt:
        arr = np.asarray(a[f"kf_{f.name}"])
        if arr.ndim != f.ndim or arr.dtype.kind not in f.dtype:
            fail(f"kf_{f.name}", f"dtype {arr.dtype}, {arr.ndim} dimensions (expected {f.ndim})")
        if not np.all(np.isfinite(arr)):
            fail(f"kf_{f.name}", "contains NaN or inf")
    if "kf_nis_threshold_low" in a and not (
            0.0 <= float(a["kf_nis_threshold_low"]) < float(a["kf_nis_threshold"])):
        fail("kf_nis_threshold_low", "must be >= 0 and below kf_nis_threshold")
    tracked = _group_present(a, "track_", fail)
    if not _group_present(a, "level_", fail):
        if tracked:
            fail("kf_track_innov", "needs the kf_level_* arrays")
        return
    grid = np.asarray(a["kf_level_grid"], dtype=float)
    nl = grid.size
    if nl < 1 or np.any(grid <= 0) or np.any(np.diff(grid) <= 0):
        fail("kf_level_grid", "must be positive and increasing")
    shapes = {"level_K": (nl, ns, nch), "level_G": (nl, lag + 1, nq, nch),
              "level_Sinv": (nl, nch, nch), "level_Wt": (nl, nch, nch), "level_std": (nl, nq),
              "level_nis": (nl, nl)}
    if tracked:
        shapes["track_innov"] = (nl, 4)
        shapes["track_var"] = (nl, 2, nq)
    for name, shape in shapes.items():
        if a[f"kf_{name}"].shape != shape:
            fail(f"kf_{name}", f"shape {a[f'kf_{name}'].shape}, expected {shape}")
    if tracked and np.any(a["kf_track_var"] < 0):
        fail("kf_track_var", "variances must be >= 0")
    if np.any(a["kf_level_std"] < 0) or np.any(a["kf_level_nis"] <= 0):
        fail("kf_level_std", "standard deviations must be >= 0 and NIS ratios > 0")


def _group_present(a: dict, prefix: str, fail, version: int | None = None) -> bool:
    """Whether the optional ``kf_<prefix>*`` arrays are in ``a``: all of them (of schema
    ``version``, default every one) or none (a partial group fails naming the first missing
    array)."""
    names = [f.name for f in KF_OPTIONAL if f.name.startswith(prefix)
             and (version is None or f.since <= version)]
    have = [n for n in names if f"kf_{n}" in a]
    if have and len(have) != len(names):
        fail(f"kf_{sorted(set(names) - set(have))[0]}", f"missing (the {prefix}* arrays come "
             "together)")
    return bool(have)


def _validate_kf_hybrid(a: dict, version: int, ns: int, nch: int, nq: int, fail) -> None:
    """The optional ``kf_hy_*`` arrays of schema 5 (all or none; ``hy_direct`` from 6,
    ``hy_guard`` from 10)."""
    if not _group_present(a, "hy_", fail, version):
        return
    if a["kf_hy_onnx"].dtype != np.uint8 or a["kf_hy_onnx"].size == 0:
        fail("kf_hy_onnx", "must be the non-empty uint8 bytes of an ONNX model")
    ni, ng = a["kf_hy_S"].shape[0], a["kf_hy_Bg"].shape[-1]
    shapes = {"hy_S": (ni, ns), "hy_Bg": (ns, ng), "hy_Dg": (nch, ng), "hy_Cqg": (nq, ng),
              "hy_lo": (ni,), "hy_hi": (ni,)}
    if version >= 6:
        shapes["hy_direct"] = (2,)
    if version >= 10:
        shapes["hy_guard"] = ()
    for name, shape in shapes.items():
        if a[f"kf_{name}"].shape != shape:
            fail(f"kf_{name}", f"shape {a[f'kf_{name}'].shape}, expected {shape}")
    if version >= 10 and int(a["kf_hy_guard"]) not in (0, 1):
        fail("kf_hy_guard", f"must be 0 (correction off outside the envelope) or 1 (input held "
             f"at its bound), got {np.asarray(a['kf_hy_guard']).tolist()!r}")
    if ni < 1 or ng < 1 or np.any(a["kf_hy_lo"] > a["kf_hy_hi"]):
        fail("kf_hy_lo", "the envelope needs lo <= hi and at least one input and output")
