"""The vsense bundle: one versioned, hashed ``.npz`` file from ``offline`` to ``edge``.

This module is the single definition of the format; ``offline`` writes bundles only through
:meth:`Bundle.save`. Loading uses ``allow_pickle=False`` and checks presence, dtype, shape,
finiteness, symmetry, definiteness, index ranges and the content hash; every failure raises
:class:`BundleError` with a message that names the file and the field.

Arrays (n = reduced DOFs, nch channels, nf forces, nout virtual outputs)::

    schema_version  int64 ()        format version (SCHEMA_VERSION)
    meta            str ()          JSON: name, created, vsense version, channels, forces,
                                    outputs (names, nodes, DOFs, units), reduction info, ...
    M, C, K         float64 (n, n)  reduced matrices, measured-first ordering (paper eq. 8-11)
    dt              float64 ()      sample interval [s]
    beta, gamma     float64 ()      Newmark parameters
    alpha           float64 ()      Tikhonov parameter (paper eq. 20-24)
    window          int64 ()        fixed-lag window L (1 = per-step estimator of the paper)
    channel_dof     int64 (nch,)    reduced coordinate measured by each channel
    channel_kind    int64 (nch,)    0 displacement, 1 velocity, 2 acceleration
    channel_weight  float64 (nch,)  least-squares weight (1 / noise variance in channel units)
    force_dof       int64 (nf,)     reduced coordinate each identified force acts on
    output_rows     float64 (nout, n) virtual output = row @ (u, v or a) of the reduced model
    output_kind     int64 (nout,)   0 displacement, 1 velocity, 2 acceleration
    report_freqs_full, report_freqs_reduced, report_eig_error   float64 (nr,)
    x_<name>        any             extras (inverse maps as ONNX bytes, parametric parts, ...)
    kf_<name>       float64         smoother gains (schema 2, only when meta["estimator"]
                                    ["method"] == "smoother"; ns states, nq = nf + nout):
                    kf_A (ns, ns) step, kf_H (nch, ns), kf_K (ns, nch) filter gain,
                    kf_Cq (nq, ns), kf_G (L+1, nq, nch) smoother gains, kf_Sinv (nch, nch)
                    inverse innovation covariance, kf_std (nq,) standard deviation of each
                    force and output [SI], kf_nis_window int64 () [samples],
                    kf_nis_threshold () model-check threshold, kf_Wt (nch, nch) whitening,
                    kf_band_ba (nb, 5), kf_band_gain (nb,), kf_band_threshold (nb,),
                    kf_band_hz (nb, 2) model-check bands (see edge.estimator.smoother)
    content_hash    str ()          sha256 over every other array (name, dtype, shape, bytes)
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edge import DOF_NAMES, __version__
from edge.archive import check_archive, max_bundle_bytes  # noqa: F401 (re-exported)

SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)  # 1: Tikhonov only (no kf_* arrays, no meta["estimator"])
ESTIMATOR_METHODS = ("tikhonov", "smoother")
KF_FIELDS = {  # name: ndim (shapes checked in _validate_kf)
    "A": 2, "H": 2, "K": 2, "Cq": 2, "G": 3, "Sinv": 2, "std": 1, "nis_window": 0,
    "nis_threshold": 0, "Wt": 2, "band_ba": 2, "band_gain": 1, "band_threshold": 1,
    "band_hz": 2,
}
KINDS = ("displacement", "velocity", "acceleration")


class BundleError(ValueError):
    """A bundle file is missing, malformed, inconsistent or tampered with."""


@dataclass
class Channel:
    """A physical sensor channel.

    ``dof`` is the reduced coordinate it measures; ``node``/``dof_name`` the physical DOF.
    """

    name: str
    dof: int
    kind: str = "displacement"
    unit: str = "m"
    weight: float = 1.0
    node: int = -1
    dof_name: str = "uz"


@dataclass
class Force:
    """An identified force acting on reduced coordinate ``dof`` (a master DOF).

    ``scale``: its typical size in its unit (N, N m); the Tikhonov penalty is on ``f / scale``
    so one alpha serves forces of different units and sizes (stored in ``meta["forces"]``
    like the other force fields; 1.0 when absent).
    """

    name: str
    dof: int
    unit: str = "N"
    node: int = -1
    dof_name: str = "uz"
    scale: float = 1.0


@dataclass
class Output:
    """A virtual output: ``row @ u`` (or of v, a by ``kind``) over the reduced coordinates."""

    name: str
    row: np.ndarray
    kind: str = "displacement"
    unit: str = "m"
    node: int = -1
    dof_name: str = ""


@dataclass
class Bundle:
    """Everything the edge estimator needs, in one object.

    Parameters
    ----------
    M, C, K : ndarray, shape (n, n)
        Reduced mass, damping and stiffness matrices (symmetric; M positive definite).
    dt : float
        Sample interval [s].
    channels, forces, outputs : list
        :class:`Channel`, :class:`Force`, :class:`Output` definitions.
    alpha : float
        Tikhonov regularisation parameter (>= 0).
    beta, gamma : float
        Newmark parameters (average acceleration: 1/4, 1/2).
    window : int
        Fixed-lag window L (1 = the paper's per-step estimator).
    discretization : {"newmark", "foh"}
        Time discretisation of the reduced model: Newmark-beta (paper) or the exact
        matrix exponential with a first-order hold on the force (stored in ``meta``).
    regularization : {"tikhonov0", "tikhonov1"}
        Penalty on the forces (``alpha ||F||^2``, paper eq. 20) or on their increments
        (``alpha ||f_k - f_(k-1)||^2``, first-order Tikhonov); stored in ``meta``.
    meta : dict
        Free JSON metadata (name, reduction summary, alpha selection, ...).
    report : dict of ndarray
        ``freqs_full``, ``freqs_reduced``, ``eig_error`` of the reduction report.
    extras : dict of ndarray
        Additional named arrays (stored as ``x_<name>``), covered by the hash.
    kf : dict of ndarray
        Steady-state smoother gains (stored as ``kf_<name>``, see the module docstring) when
        ``meta["estimator"]["method"] == "smoother"``; empty for the Tikhonov estimator.
    """

    M: np.ndarray
    C: np.ndarray
    K: np.ndarray
    dt: float
    channels: list
    forces: list
    outputs: list = field(default_factory=list)
    alpha: float = 0.0
    beta: float = 0.25
    gamma: float = 0.5
    window: int = 1
    discretization: str = "newmark"
    regularization: str = "tikhonov0"
    meta: dict = field(default_factory=dict)
    report: dict = field(default_factory=dict)
    extras: dict = field(default_factory=dict)
    kf: dict = field(default_factory=dict)
    content_hash: str = ""
    path: str = ""

    # ----------------------------------------------------------------- derived
    @property
    def n(self) -> int:
        return int(self.M.shape[0])

    @property
    def method(self) -> str:
        """``"tikhonov"`` (paper estimator) or ``"smoother"`` (Kalman fixed-lag smoother)."""
        return str(self.meta.get("estimator", {}).get("method", "tikhonov"))

    @property
    def rate(self) -> float:
        """Sample rate [Hz]."""
        return 1.0 / self.dt

    @property
    def bundle_id(self) -> str:
        """Short id: model name and the first 12 hex digits of the content hash."""
        return f"{self.meta.get('name', 'bundle')}-{self.content_hash[:12]}"

    # ------------------------------------------------------------- array form
    def to_arrays(self) -> dict:
        """The bundle as the dict of arrays that is written to the ``.npz`` (without hash)."""
        meta = dict(self.meta)
        meta.setdefault("name", "bundle")
        meta.setdefault("created", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        meta.setdefault("vsense_version", __version__)
        meta["discretization"] = self.discretization
        meta["regularization"] = self.regularization
        meta["channels"] = [
            {"name": c.name, "kind": c.kind, "unit": c.unit, "node": int(c.node),
             "dof": c.dof_name} for c in self.channels]
        meta["forces"] = [
            {"name": f.name, "unit": f.unit, "node": int(f.node), "dof": f.dof_name,
             "scale": float(f.scale)}
            for f in self.forces]
        meta["outputs"] = [
            {"name": o.name, "kind": o.kind, "unit": o.unit, "node": int(o.node),
             "dof": o.dof_name} for o in self.outputs]
        n = self.n
        arrays = {
            "schema_version": np.array(SCHEMA_VERSION, dtype=np.int64),
            "meta": np.array(json.dumps(meta, sort_keys=True)),
            "M": np.asarray(self.M, dtype=np.float64),
            "C": np.asarray(self.C, dtype=np.float64),
            "K": np.asarray(self.K, dtype=np.float64),
            "dt": np.array(self.dt, dtype=np.float64),
            "beta": np.array(self.beta, dtype=np.float64),
            "gamma": np.array(self.gamma, dtype=np.float64),
            "alpha": np.array(self.alpha, dtype=np.float64),
            "window": np.array(self.window, dtype=np.int64),
            "channel_dof": np.array([c.dof for c in self.channels], dtype=np.int64),
            "channel_kind": np.array([_kind_code(c.kind, f"channel {c.name!r}")
                                      for c in self.channels], dtype=np.int64),
            "channel_weight": np.array([c.weight for c in self.channels], dtype=np.float64),
            "force_dof": np.array([f.dof for f in self.forces], dtype=np.int64),
            "output_rows": (np.array([np.asarray(o.row, dtype=np.float64) for o in self.outputs])
                            if self.outputs else np.zeros((0, n))),
            "output_kind": np.array([_kind_code(o.kind, f"output {o.name!r}")
                                     for o in self.outputs], dtype=np.int64),
        }
        for key in ("freqs_full", "freqs_reduced", "eig_error"):
            arrays[f"report_{key}"] = np.asarray(self.report.get(key, np.zeros(0)), dtype=np.float64)
        for key, val in self.extras.items():
            arrays[f"x_{key}"] = np.asarray(val)
        for key, val in self.kf.items():
            arrays[f"kf_{key}"] = np.asarray(val)
        return arrays

    def save(self, path) -> str:
        """Validate and write the bundle atomically; returns the content hash."""
        arrays = self.to_arrays()
        arrays["content_hash"] = np.array(content_hash(arrays))
        _validate(arrays, str(path))
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        self.content_hash = str(arrays["content_hash"])
        self.path = str(path)
        return self.content_hash

    @classmethod
    def load(cls, path) -> "Bundle":
        """Read and fully validate a bundle file (raises :class:`BundleError`).

        Before anything is decompressed, every member's declared size and ``.npy`` header
        are checked against :func:`max_bundle_bytes` (a crafted archive cannot make the
        loader allocate more than that)."""
        path = str(path)
        if not os.path.exists(path):
            raise BundleError(f"{path}: bundle file does not exist")
        try:
            check_archive(path)
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, KeyError,
                NotImplementedError, RuntimeError) as exc:
            if isinstance(exc, BundleError):
                raise
            raise BundleError(f"{path}: not a readable .npz bundle ({exc})") from None
        return cls.from_arrays(arrays, path)

    @classmethod
    def from_arrays(cls, arrays: dict, path: str = "<arrays>") -> "Bundle":
        """Build a bundle from its array dict (validates, including the hash)."""
        try:
            _validate(arrays, path)
            return cls._from_valid(arrays, path)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError,
                np.linalg.LinAlgError) as exc:
            if isinstance(exc, BundleError):
                raise
            raise BundleError(f"{path}: malformed bundle: {type(exc).__name__}: "
                              f"{str(exc)[:200]}") from None

    @classmethod
    def _from_valid(cls, arrays: dict, path: str) -> "Bundle":
        meta = json.loads(str(arrays["meta"]))
        ch_meta = meta.get("channels", [])
        channels = [
            Channel(name=m["name"], dof=int(d), kind=KINDS[int(k)], unit=m.get("unit", ""),
                    weight=float(w), node=int(m.get("node", -1)), dof_name=m.get("dof", ""))
            for m, d, k, w in zip(ch_meta, arrays["channel_dof"], arrays["channel_kind"],
                                  arrays["channel_weight"])]
        forces = [
            Force(name=m["name"], dof=int(d), unit=m.get("unit", "N"),
                  node=int(m.get("node", -1)), dof_name=m.get("dof", ""),
                  scale=float(m.get("scale", 1.0)))
            for m, d in zip(meta.get("forces", []), arrays["force_dof"])]
        for i, f in enumerate(forces):
            if not (np.isfinite(f.scale) and f.scale > 0):
                raise BundleError(f"{path}: meta.forces[{i}].scale ({f.name}): must be a "
                                  f"finite number > 0, got {f.scale!r}")
        outputs = [
            Output(name=m["name"], row=np.array(r), kind=KINDS[int(k)], unit=m.get("unit", ""),
                   node=int(m.get("node", -1)), dof_name=m.get("dof", ""))
            for m, r, k in zip(meta.get("outputs", []), arrays["output_rows"],
                               arrays["output_kind"])]
        report = {key: np.array(arrays[f"report_{key}"])
                  for key in ("freqs_full", "freqs_reduced", "eig_error")}
        extras = {k[2:]: np.array(v) for k, v in arrays.items() if k.startswith("x_")}
        kf = {k[3:]: np.array(v) for k, v in arrays.items() if k.startswith("kf_")}
        return cls(
            M=np.array(arrays["M"]), C=np.array(arrays["C"]), K=np.array(arrays["K"]),
            dt=float(arrays["dt"]), channels=channels, forces=forces, outputs=outputs,
            alpha=float(arrays["alpha"]), beta=float(arrays["beta"]),
            gamma=float(arrays["gamma"]), window=int(arrays["window"]),
            discretization=meta.get("discretization", "newmark"),
            regularization=meta.get("regularization", "tikhonov0"), meta=meta,
            report=report, extras=extras, kf=kf, content_hash=str(arrays["content_hash"]), path=path)

    def replace(self, **changes) -> "Bundle":
        """A copy with some fields changed (hash cleared: it is recomputed on save)."""
        from dataclasses import replace as _replace

        return _replace(self, content_hash="", **changes)

    def to_bytes(self) -> bytes:
        """The ``.npz`` bytes of this bundle (for tests and transfers)."""
        arrays = self.to_arrays()
        arrays["content_hash"] = np.array(content_hash(arrays))
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()


# --------------------------------------------------------------------- helpers
#: Largest window accepted: the estimator's window matrices grow with L^2.
MAX_WINDOW = 512


def _kind_code(kind: str, what: str) -> int:
    if kind not in KINDS:
        raise BundleError(f"{what}: kind {kind!r} is not one of {', '.join(KINDS)}")
    return KINDS.index(kind)


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


_REQUIRED = {
    # name: (dtype kind(s), ndim)
    "schema_version": ("i", 0), "meta": ("U", 0), "M": ("f", 2), "C": ("f", 2), "K": ("f", 2),
    "dt": ("f", 0), "beta": ("f", 0), "gamma": ("f", 0), "alpha": ("f", 0), "window": ("i", 0),
    "channel_dof": ("i", 1), "channel_kind": ("i", 1), "channel_weight": ("f", 1),
    "force_dof": ("i", 1), "output_rows": ("f", 2), "output_kind": ("i", 1),
    "report_freqs_full": ("f", 1), "report_freqs_reduced": ("f", 1), "report_eig_error": ("f", 1),
    "content_hash": ("U", 0),
}


def _validate(a: dict, path: str) -> None:
    """Check a bundle's arrays; raise BundleError naming the field."""

    def fail(field_name, msg):
        raise BundleError(f"{path}: field {field_name!r}: {msg}")

    for name, (kinds, ndim) in _REQUIRED.items():
        if name not in a:
            fail(name, "missing")
        arr = np.asarray(a[name])
        if arr.dtype.kind not in kinds:
            fail(name, f"dtype {arr.dtype} (expected kind {kinds!r})")
        if arr.ndim != ndim:
            fail(name, f"has {arr.ndim} dimensions, expected {ndim}")
    version = int(a["schema_version"])
    if version not in READABLE_VERSIONS:
        fail("schema_version", f"{version} is not supported by this vsense ({__version__} "
                               f"reads schema {', '.join(map(str, READABLE_VERSIONS))}); "
                               "rebuild the bundle with this vsense")
    expected = content_hash(a)
    if str(a["content_hash"]) != expected:
        fail("content_hash", "does not match the contents (file corrupted or edited)")
    try:
        meta = json.loads(str(a["meta"]))
    except (ValueError, RecursionError) as exc:
        fail("meta", f"not valid JSON ({exc})")
    if not isinstance(meta, dict):
        fail("meta", "must be a JSON object")
    if meta.get("discretization", "newmark") not in ("newmark", "foh"):
        fail("meta", f"discretization {meta.get('discretization')!r} is not newmark or foh")
    if meta.get("regularization", "tikhonov0") not in ("tikhonov0", "tikhonov1"):
        fail("meta", f"regularization {meta.get('regularization')!r} is not tikhonov0 or "
                     "tikhonov1")
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
    if np.any((a["channel_kind"] < 0) | (a["channel_kind"] > 2)):
        fail("channel_kind", "kinds must be 0 (displacement), 1 (velocity) or 2 (acceleration)")
    w = a["channel_weight"]
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        fail("channel_weight", "weights must be finite and > 0")
    nout = a["output_kind"].shape[0]
    if a["output_rows"].shape != (nout, n):
        fail("output_rows", f"shape {a['output_rows'].shape}, expected ({nout}, {n})")
    if not np.all(np.isfinite(a["output_rows"])):
        fail("output_rows", "contains NaN or inf")
    if np.any((a["output_kind"] < 0) | (a["output_kind"] > 2)):
        fail("output_kind", "kinds must be 0, 1 or 2")
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
    _validate_kf(a, meta, version, n, nch, nf + nout, fail)
    names = [m["name"] for key in ("channels", "forces", "outputs") for m in meta[key]]
    dup = {x for x in names if names.count(x) > 1}
    if dup:
        fail("meta", f"duplicate names {sorted(dup)} among channels, forces and outputs")


def _validate_kf(a: dict, meta: dict, version: int, n: int, nch: int, nq: int, fail) -> None:
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
    for name, ndim in KF_FIELDS.items():
        key = f"kf_{name}"
        if key not in a:
            fail(key, "missing (needed by the smoother)")
        arr = np.asarray(a[key])
        if arr.ndim != ndim or arr.dtype.kind not in ("i" if name == "nis_window" else "f"):
            fail(key, f"dtype {arr.dtype}, {arr.ndim} dimensions (expected {ndim})")
        if not np.all(np.isfinite(arr)):
            fail(key, "contains NaN or inf")
    ns = a["kf_A"].shape[0]
    if ns < 2 * n:
        fail("kf_A", f"{ns} states for {n} reduced DOFs (needs >= {2 * n})")
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
    if int(a["kf_nis_window"]) < 1:
        fail("kf_nis_window", f"must be >= 1, got {int(a['kf_nis_window'])}")
    if float(a["kf_nis_threshold"]) <= 0:
        fail("kf_nis_threshold", "must be > 0")
    if np.any(a["kf_band_gain"] <= 0) or np.any(a["kf_band_threshold"] <= 0):
        fail("kf_band_gain", "band gains and thresholds must be > 0")
