"""The vsense bundle: one versioned, hashed ``.npz`` file from ``offline`` to ``edge``.

This module and :mod:`edge.bundle_schema` (the table of fields, :data:`FIELDS`, and the
validation) are the single definition of the format; ``offline`` writes bundles only through
:meth:`Bundle.save`. Loading uses ``allow_pickle=False`` and checks presence, dtype, shape,
finiteness, symmetry, definiteness, index ranges and the content hash; every failure raises
:class:`BundleError` with a message that names the file and the field.

Names, units and the physical node/DOF of channels, forces and outputs live in the meta JSON;
everything that changes the estimator's mathematics is an array field (schema 3:
``discretization`` and ``regularization`` too). Schema 1 and 2 bundles are still read.
"""

from __future__ import annotations

import io
import json
import os
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edge import __version__
from edge.acquisition import Chain
from edge.archive import check_archive, max_bundle_bytes, save_npz_atomic  # noqa: F401 (re-exported)
from edge.bundle_schema import (FIELDS, KF_ARRAYS, KF_FIELDS,  # noqa: F401 (re-exported)
                                MAX_WINDOW, READABLE_VERSIONS, SCHEMA_VERSION, BundleError,
                                chain_of, content_hash, required, settings, validate)
from edge.kinds import ESTIMATOR_METHODS, SIGNAL_KINDS, kind_code  # noqa: F401 (re-exported)

KINDS = SIGNAL_KINDS
#: ``{name: (dtype kinds, ndim)}`` of the fields this code writes (a view of ``FIELDS``)
_REQUIRED = {f.name: (f.dtype, f.ndim) for f in required(SCHEMA_VERSION)}


@dataclass
class SensorChannel:
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
class IdentifiedForce:
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
class VirtualOutput:
    """A virtual output: ``row @ u`` (or of v, a by ``kind``) over the reduced coordinates; a
    ``strain`` or ``stress`` row reads u (:data:`edge.kinds.KIND_ORDER`)."""

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
        :class:`SensorChannel`, :class:`IdentifiedForce`, :class:`VirtualOutput` definitions.
    alpha : float
        Tikhonov regularisation parameter (>= 0).
    beta, gamma : float
        Newmark parameters (average acceleration: 1/4, 1/2).
    window : int
        Fixed-lag window L (1 = the paper's per-step estimator).
    discretization : {"newmark", "foh"}
        Time discretisation of the reduced model: Newmark-beta (paper) or the exact
        matrix exponential with a first-order hold on the force (bundle field, schema 3).
    regularization : {"tikhonov0", "tikhonov1"}
        Penalty on the forces (``alpha ||F||^2``, paper eq. 20) or on their increments
        (``alpha ||f_k - f_(k-1)||^2``, first-order Tikhonov); bundle field (schema 3).
    meta : dict
        Free JSON metadata (name, reduction summary, alpha selection, ...).
    report : dict of ndarray
        ``freqs_full``, ``freqs_reduced``, ``eig_error`` of the reduction report.
    extras : dict of ndarray
        Additional named arrays (stored as ``x_<name>``), covered by the hash.
    kf : dict of ndarray
        Steady-state smoother gains (stored as ``kf_<name>``, :data:`edge.bundle_schema.KF_ARRAYS`) when
        ``meta["estimator"]["method"] == "smoother"``; empty for the Tikhonov estimator.
    chain : edge.acquisition.Chain
        The measurement chain the bundle is built for (fields ``chain_*``, schema 7;
        ``ideal`` point samples by default and for older bundles).
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
    chain: Chain = field(default_factory=Chain)
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
        meta.pop("discretization", None)  # schema 3: array fields, not meta
        meta.pop("regularization", None)
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
            "discretization": np.array(str(self.discretization)),
            "regularization": np.array(str(self.regularization)),
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
        arrays["chain_converter"] = np.array(self.chain.converter)
        arrays["chain_drate"] = np.array(float(self.chain.drate), dtype=np.float64)
        arrays["chain_mode"] = np.array(self.chain.mode)
        arrays["chain_offset"] = self.chain.offsets_for(len(self.channels))
        arrays["chain_filter"] = np.array([self.chain.cutoff, self.chain.group_delay],
                                          dtype=np.float64)
        nch = len(self.channels)
        arrays["chain_highpass_hz"] = self.chain.highpass_for(nch)
        arrays["chain_average_s"] = self.chain.average_for(nch)
        arrays["chain_drift"] = self.chain.drift_for(nch)
        arrays["chain_markov"] = np.array(int(self.chain.markov), dtype=np.int64)
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
        validate(arrays, str(path))
        path = Path(path)
        save_npz_atomic(path, arrays)
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
        if not path:
            raise BundleError("the bundle file name is empty")
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
            meta = validate(arrays, path)
            return cls._from_valid(arrays, meta, path)
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError,
                np.linalg.LinAlgError) as exc:
            if isinstance(exc, BundleError):
                raise
            raise BundleError(f"{path}: malformed bundle: {type(exc).__name__}: "
                              f"{str(exc)[:200]}") from None

    @classmethod
    def _from_valid(cls, arrays: dict, meta: dict, path: str) -> "Bundle":
        disc, reg = settings(arrays, meta)
        meta = {k: v for k, v in meta.items() if k not in ("discretization", "regularization")}
        ch_meta = meta.get("channels", [])
        channels = [
            SensorChannel(name=m["name"], dof=int(d), kind=KINDS[int(k)], unit=m.get("unit", ""),
                    weight=float(w), node=int(m.get("node", -1)), dof_name=m.get("dof", ""))
            for m, d, k, w in zip(ch_meta, arrays["channel_dof"], arrays["channel_kind"],
                                  arrays["channel_weight"])]
        forces = [
            IdentifiedForce(name=m["name"], dof=int(d), unit=m.get("unit", "N"),
                  node=int(m.get("node", -1)), dof_name=m.get("dof", ""),
                  scale=float(m.get("scale", 1.0)))
            for m, d in zip(meta.get("forces", []), arrays["force_dof"])]
        for i, f in enumerate(forces):
            if not (np.isfinite(f.scale) and f.scale > 0):
                raise BundleError(f"{path}: meta.forces[{i}].scale ({f.name}): must be a "
                                  f"finite number > 0, got {f.scale!r}")
        outputs = [
            VirtualOutput(name=m["name"], row=np.array(r), kind=KINDS[int(k)], unit=m.get("unit", ""),
                   node=int(m.get("node", -1)), dof_name=m.get("dof", ""))
            for m, r, k in zip(meta.get("outputs", []), arrays["output_rows"],
                               arrays["output_kind"])]
        report = {key: np.array(arrays[f"report_{key}"])
                  for key in ("freqs_full", "freqs_reduced", "eig_error")}
        extras = {k[2:]: np.array(v) for k, v in arrays.items() if k.startswith("x_")}
        kf = {k[3:]: np.array(v) for k, v in arrays.items() if k.startswith("kf_")}
        if "hy_onnx" in kf and "hy_direct" not in kf:  # schema 5: direct terms from g_k alone
            kf["hy_direct"] = np.array([1.0, 0.0])
        if "hy_onnx" in kf and "hy_guard" not in kf:  # schema <= 9: the correction off outside
            kf["hy_guard"] = np.array(0, dtype=np.int64)
        return cls(
            M=np.array(arrays["M"]), C=np.array(arrays["C"]), K=np.array(arrays["K"]),
            dt=float(arrays["dt"]), channels=channels, forces=forces, outputs=outputs,
            alpha=float(arrays["alpha"]), beta=float(arrays["beta"]),
            gamma=float(arrays["gamma"]), window=int(arrays["window"]),
            discretization=disc, regularization=reg, meta=meta,
            report=report, extras=extras, kf=kf, chain=chain_of(arrays),
            content_hash=str(arrays["content_hash"]), path=path)

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


def _kind_code(kind: str, what: str) -> int:
    try:
        return kind_code(kind, what)
    except ValueError as exc:
        raise BundleError(str(exc)) from None
