"""The bundle's schema: every array field once, with its version, and the validation.

:data:`FIELDS` is the single table of the format: :mod:`edge.bundle` writes and reads by it,
:func:`validate` checks a file against it, and :func:`field_table` renders it for
docs/ARCHITECTURE.md (a test keeps that page equal to it).

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
alternative measurement chain (``kf_alt_*``, optional: :mod:`edge.estimator.chain_check`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np

from edge import DOF_NAMES, __version__
from edge.archive import BundleError, max_bundle_bytes  # noqa: F401 (re-exported)
from edge.acquisition import chain_of, validate_chain  # noqa: F401 (re-exported)
from edge.kinds import DISCRETIZATIONS, ESTIMATOR_METHODS, REGULARIZATIONS, SIGNAL_KINDS

SCHEMA_VERSION = 9
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6, 7, 8, 9)
#: Largest window accepted: the estimator's window matrices grow with L^2.
MAX_WINDOW = 512
#: Most start-up rows accepted (``kf_startup_var``): 30 s at 10 kHz.
MAX_STARTUP_ROWS = 300_000
#: Longest model-check window (``kf_nis_window``) in seconds: its rings are allocated at load
MAX_NIS_WINDOW_S = 600.0


@dataclass(frozen=True)
class Field:
    """One array of the ``.npz``: name, dtype kind(s), shape, first schema version, meaning."""

    name: str
    dtype: str
    shape: str
    since: int
    doc: str

    @property
    def ndim(self) -> int:
        return 0 if self.shape == "()" else self.shape.count(",") + (
            0 if self.shape.endswith(",)") else 1)


def _table(text: str) -> tuple:
    """Fields from rows ``name | dtype kinds | shape | since | meaning``."""
    rows = (line.split("|", 4) for line in text.strip().splitlines())
    return tuple(Field(n.strip(), d.strip(), sh.strip(), int(v), doc.strip())
                 for n, d, sh, v, doc in rows)


#: Required fields (n reduced DOFs, nch channels, nf forces, nout outputs, nr report rows);
#: dtype kinds: i integer, f float, U string.
FIELDS = _table("""
schema_version       | i | ()        | 1 | format version (`SCHEMA_VERSION`)
meta                 | U | ()        | 1 | JSON: names, units, nodes, DOFs of channels/forces/outputs, ...
M                    | f | (n, n)    | 1 | reduced mass, measured first (paper eq. 8-11) [kg]
C                    | f | (n, n)    | 1 | reduced damping [N s/m]
K                    | f | (n, n)    | 1 | reduced stiffness [N/m]
dt                   | f | ()        | 1 | sample interval [s]
beta                 | f | ()        | 1 | Newmark beta
gamma                | f | ()        | 1 | Newmark gamma
alpha                | f | ()        | 1 | Tikhonov parameter (paper eq. 20-24)
window               | i | ()        | 1 | fixed-lag window L (smoother: lag + 1)
discretization       | U | ()        | 3 | `newmark` or `foh` (schema 1-2: meta, default newmark)
regularization       | U | ()        | 3 | `tikhonov0` or `tikhonov1` (schema 1-2: meta, default tikhonov0)
channel_dof          | i | (nch,)    | 1 | reduced coordinate each channel measures
channel_kind         | i | (nch,)    | 1 | index in `edge.kinds.SIGNAL_KINDS`
channel_weight       | f | (nch,)    | 1 | least-squares weight (1 / noise variance)
force_dof            | i | (nf,)     | 1 | reduced coordinate each identified force acts on
output_rows          | f | (nout, n) | 1 | virtual output = row @ (u, v or a)
output_kind          | i | (nout,)   | 1 | index in `edge.kinds.SIGNAL_KINDS`
report_freqs_full    | f | (nr,)     | 1 | reduction report: full-model frequencies [Hz]
report_freqs_reduced | f | (nr,)     | 1 | reduction report: reduced-model frequencies [Hz]
report_eig_error     | f | (nr,)     | 1 | reduction report: eigenvalue error [%]
chain_converter      | U | ()        | 7 | measurement chain: `ideal` (point samples), `ads1256` or `daq`; schema <= 6: ideal
chain_drate          | f | ()        | 7 | the converter's data rate [SPS] (0 for ideal)
chain_mode           | U | ()        | 7 | `continuous` or `cycle` (multiplexer cycling over the channels)
chain_offset         | f | (nch,)    | 7 | each channel's conversion window ends this long before the row's time stamp [s]
chain_filter         | f | (2,)      | 7 | `daq`: cut-off [Hz] and group delay [s] of its linear-phase anti-alias FIR ([0, 0] otherwise)
chain_highpass_hz    | f | (nch,)    | 8 | each sensor's first-order high-pass corner [Hz] before the converter (0: none; schema <= 7: none)
chain_average_s      | f | (nch,)    | 8 | each sensor's moving-average window [s] (0: none)
chain_drift          | f | (nch,)    | 8 | each sensor's random-walk offset intensity [unit/sqrt(s)] (0: none)
content_hash         | U | ()        | 1 | sha256 over every other array (name, dtype, shape, bytes)
""")

#: Smoother gains (schema >= 2, only when ``meta["estimator"]["method"] == "smoother"``),
#: stored as ``kf_<name>``; ns states, nq = nf + nout, nb model-check bands.
KF_ARRAYS = _table("""
A              | f | (ns, ns)     | 2 | state transition
H              | f | (nch, ns)    | 2 | measurement matrix
K              | f | (ns, nch)    | 2 | steady-state filter gain
Cq             | f | (nq, ns)     | 2 | forces and outputs from the state
G              | f | (L, nq, nch) | 2 | fixed-lag smoother gains
Sinv           | f | (nch, nch)   | 2 | inverse innovation covariance
std            | f | (nq,)        | 2 | standard deviation of each force and output [SI]
nis_window     | i | ()           | 2 | model check window [samples], at most 10 min
nis_threshold  | f | ()           | 2 | model check threshold
Wt             | f | (nch, nch)   | 2 | innovation whitening
band_ba        | f | (nb, 5)      | 2 | model-check band filters
band_gain      | f | (nb,)        | 2 | model-check band gains
band_threshold | f | (nb,)        | 2 | model-check band thresholds
band_hz        | f | (nb, 2)      | 2 | model-check band edges [Hz]
""")
#: Optional smoother arrays (schema >= 4): the load-level grid (nl levels) and the lower
#: model-check threshold. A smoother bundle without them runs at its design level and flags
#: only too large innovations.
KF_OPTIONAL = _table("""
nis_threshold_low | f | ()                | 4 | model check lower threshold (too small innovations)
level_grid        | f | (nl,)             | 4 | load levels: factors of the designed force RMS, increasing
level_K           | f | (nl, ns, nch)     | 4 | filter gain at each level
level_G           | f | (nl, L, nq, nch)  | 4 | fixed-lag gains at each level
level_Sinv        | f | (nl, nch, nch)    | 4 | inverse innovation covariance at each level
level_Wt          | f | (nl, nch, nch)    | 4 | innovation whitening at each level
level_std         | f | (nl, nq)          | 4 | standard deviation of each force and output at each level
level_nis         | f | (nl, nl)          | 4 | mean NIS per channel at level a when the load is at level b (schema 4-6: tr(S_a^-1 S_b) / nch; 7: exact)
startup_var       | f | (N, nq)           | 7 | start-up: each row's error variance above the steady std^2 (from the first sample and a reset, until within 1 %)
std_scale         | f | (nq,)             | 9 | each force's and output's stated std is multiplied by it (>= 1): the model's own error, measured on the build's full-model calibration runs (schema <= 8: 1)
track_innov       | f | (nl, 4)           | 7 | load levels that set the load-to-noise ratio (noise a property of the sensor): the innovations at level a per unit load power and per unit noise, mean NIS (tq, tr) and lag-1 product (cq, cr) per channel; the device tracks the noise scale too
track_var         | f | (nl, 2, nq)       | 7 | with track_innov: error variance of each force and output under the gains of level a, per unit load power and per unit noise
alt_A             | f | (na, na)          | 8 | chain check: the state transition of the steady filter of an alternative measurement chain (ideal for a converter, the ADS1256 for point samples; meta chain_check names it)
alt_H             | f | (nch, na)         | 8 | chain check: its measurement matrix
alt_K             | f | (na, nch)         | 8 | chain check: its steady filter gain
alt_Sinv          | f | (nch, nch)        | 8 | chain check: its inverse innovation covariance
hy_onnx           | u | (nbytes,)         | 5 | hybrid: the correction network g (ONNX, float64, input `s` (1, ni), output `g` (1, ng))
hy_S              | f | (ni, ns)          | 5 | hybrid: network input s = S x (state x_k|k-1)
hy_Bg             | f | (ns, ng)          | 5 | hybrid: x_k+1 += Bg g (zero-order hold)
hy_Dg             | f | (nch, ng)         | 5 | hybrid: channels y_k -= Dg g (acceleration channels)
hy_Cqg            | f | (nq, ng)          | 5 | hybrid: forces and outputs += Cqg g
hy_lo             | f | (ni,)             | 5 | hybrid: trained envelope of s, lower bound
hy_hi             | f | (ni,)             | 5 | hybrid: trained envelope of s, upper bound
hy_direct         | f | (2,)              | 6 | hybrid: direct terms see w0 g_k + w1 g_k-1 (schema 5: (1, 0))
""")
#: ``{name: ndim}`` of the smoother arrays (without the ``kf_`` prefix)
KF_FIELDS = {f.name: f.ndim for f in KF_ARRAYS + KF_OPTIONAL}
#: Optional arrays stored as ``x_<name>`` (covered by the hash).
EXTRAS_DOC = "extras: inverse maps (ONNX bytes), parametric parts, ... (`Bundle.extras`)"


def required(version: int) -> tuple:
    """The required fields of schema ``version``."""
    return tuple(f for f in FIELDS if f.since <= version)


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
    _validate_model(a, fail)
    n, nch, nf, nout = (a["M"].shape[0], a["channel_dof"].shape[0], a["force_dof"].shape[0],
                        a["output_kind"].shape[0])
    _validate_meta(meta, nch, nf, nout, fail)
    nk = validate_chain(a, version, nch, fail)
    _validate_kf(a, meta, version, n, nch, nf + nout, fail, nk)
    return meta



def _validate_model(a: dict, fail) -> None:
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


def _validate_meta(meta: dict, nch: int, nf: int, nout: int, fail) -> None:
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


def _validate_kf(a: dict, meta: dict, version: int, n: int, nch: int, nq: int, fail,
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
        if not np.all(sc >= 1.0):
            fail("kf_std_scale", "factors must be >= 1")
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
    """The optional ``kf_hy_*`` arrays of schema 5 (all or none; ``hy_direct`` from 6)."""
    if not _group_present(a, "hy_", fail, version):
        return
    if a["kf_hy_onnx"].dtype != np.uint8 or a["kf_hy_onnx"].size == 0:
        fail("kf_hy_onnx", "must be the non-empty uint8 bytes of an ONNX model")
    ni, ng = a["kf_hy_S"].shape[0], a["kf_hy_Bg"].shape[-1]
    shapes = {"hy_S": (ni, ns), "hy_Bg": (ns, ng), "hy_Dg": (nch, ng), "hy_Cqg": (nq, ng),
              "hy_lo": (ni,), "hy_hi": (ni,)}
    if version >= 6:
        shapes["hy_direct"] = (2,)
    for name, shape in shapes.items():
        if a[f"kf_{name}"].shape != shape:
            fail(f"kf_{name}", f"shape {a[f'kf_{name}'].shape}, expected {shape}")
    if ni < 1 or ng < 1 or np.any(a["kf_hy_lo"] > a["kf_hy_hi"]):
        fail("kf_hy_lo", "the envelope needs lo <= hi and at least one input and output")
