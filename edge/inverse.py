"""Inverse maps on the edge: capture an experiment, extract features, infer parameters with
ONNX Runtime, update the estimator's model.

IMPU method (paper file 000, Sect. 2.2.3): the rig applies a known excitation from a known
initial state; the response window is turned into features (:mod:`edge.features`); an inverse
map trained offline (MLP or Gaussian process, exported to ONNX with the input/output
normalisation inside the graph) returns the physical parameters. The parametric reduced model
shipped in the bundle (``K̂(θ) = K̂0 + Σ_j (θ_j - θ0_j) K̂_j``, same for M̂; Rayleigh damping from
a ratio) is then rebuilt for the new parameters and swapped into the estimator.

NumPy only, plus ``onnxruntime`` imported lazily where a session is created. Never imports
:mod:`offline` or scipy.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass

import numpy as np

from edge import features as _features

#: parameter kinds a parametric model may carry
PARAM_KINDS = ("modulus", "damping_ratio", "spring", "mass", "damage")
#: names of the bundle extras written by offline.inverse.export (prefix ``x_``)
PARTS_KEYS = ("inv_M0", "inv_K0", "inv_dM", "inv_dK", "inv_theta0")
CHECK_TOL = 1e-5


class InverseMapError(ValueError):
    """An inverse map or parametric model in a bundle is missing, malformed or tampered with."""


class RejectedUpdate(ValueError):
    """Parameters that cannot be applied on the device (the message gives the reason)."""


# =========================================================================== parametric model
@dataclass(frozen=True)
class Parts:
    """Parametric reduced model, as stored in the bundle extras.

    Attributes
    ----------
    names : tuple of str, (np,)
        Parameter names.
    kinds : tuple of str, (np,)
        Parameter kinds (:data:`PARAM_KINDS`).
    theta0 : ndarray, shape (np,)
        Nominal parameter values (SI) at which ``M0``, ``K0`` were built.
    M0, K0 : ndarray, shape (n, n)
        Reduced mass [kg] and stiffness [N/m] at ``theta0``.
    dM, dK : ndarray, shape (np, n, n)
        Derivatives of M̂, K̂ with respect to each parameter (zero for damping ratios).
    zeta0 : float
        Damping ratio used when no parameter has kind ``damping_ratio``.
    modes : tuple of int, (2,)
        1-based mode numbers at which the Rayleigh damping has the ratio ζ.
    rayleigh : tuple (a [1/s], b [s]) or None
        Fixed Rayleigh coefficients of the model file's ``[damping]`` (C = a M + b K), used when
        no parameter has kind ``damping_ratio`` (then ``zeta0`` is unused).
    """

    names: tuple
    kinds: tuple
    theta0: np.ndarray
    M0: np.ndarray
    K0: np.ndarray
    dM: np.ndarray
    dK: np.ndarray
    zeta0: float = 0.01
    modes: tuple = (1, 2)
    rayleigh: tuple | None = None

    def __post_init__(self):
        n = self.M0.shape[0]
        p = len(self.names)
        shapes = {"M0": (self.M0.shape, (n, n)), "K0": (self.K0.shape, (n, n)),
                  "dM": (self.dM.shape, (p, n, n)), "dK": (self.dK.shape, (p, n, n)),
                  "theta0": (np.shape(self.theta0), (p,))}
        for key, (got, want) in shapes.items():
            if tuple(got) != want:
                raise InverseMapError(f"parametric model: {key} has shape {tuple(got)}, expected {want}")
        for k in self.kinds:
            if k not in PARAM_KINDS:
                raise InverseMapError(f"parametric model: unknown parameter kind {k!r}")
        if len(self.kinds) != p:
            raise InverseMapError("parametric model: names and kinds differ in length")
        if sum(k == "damping_ratio" for k in self.kinds) > 1:
            raise InverseMapError("parametric model: at most one damping_ratio parameter")

    @property
    def n(self) -> int:
        return int(self.M0.shape[0])

    def to_extras(self) -> tuple[dict, dict]:
        """(arrays, meta) for the bundle: arrays named without the ``x_`` prefix."""
        arrays = {"inv_M0": self.M0, "inv_K0": self.K0, "inv_dM": self.dM, "inv_dK": self.dK,
                  "inv_theta0": np.asarray(self.theta0, dtype=np.float64)}
        meta = {"names": list(self.names), "kinds": list(self.kinds), "zeta0": float(self.zeta0),
                "modes": [int(m) for m in self.modes]}
        if self.rayleigh is not None:
            meta["rayleigh"] = [float(c) for c in self.rayleigh]
        return arrays, meta

    @classmethod
    def from_extras(cls, arrays: dict, meta: dict) -> "Parts":
        missing = [k for k in PARTS_KEYS if k not in arrays]
        if missing:
            raise InverseMapError(f"bundle extras lack the parametric model array(s) {missing}")
        try:
            return cls(names=tuple(meta["names"]), kinds=tuple(meta["kinds"]),
                       theta0=np.asarray(arrays["inv_theta0"], dtype=np.float64),
                       M0=np.asarray(arrays["inv_M0"], dtype=np.float64),
                       K0=np.asarray(arrays["inv_K0"], dtype=np.float64),
                       dM=np.asarray(arrays["inv_dM"], dtype=np.float64),
                       dK=np.asarray(arrays["inv_dK"], dtype=np.float64),
                       zeta0=float(meta.get("zeta0", 0.01)), modes=tuple(meta.get("modes", (1, 2))),
                       rayleigh=tuple(meta["rayleigh"]) if meta.get("rayleigh") is not None else None)
        except KeyError as exc:
            raise InverseMapError(f"bundle meta 'inverse.parts' lacks {exc}") from None


def _theta(parts: Parts, theta) -> np.ndarray:
    th = np.asarray(theta, dtype=np.float64)
    if th.shape[-1] != len(parts.names):
        raise ValueError(f"theta has {th.shape[-1]} entries, the model has {len(parts.names)} "
                         f"parameters {list(parts.names)}")
    return th


def mass_stiffness(parts: Parts, theta) -> tuple[np.ndarray, np.ndarray]:
    """M̂(θ), K̂(θ), linear in the parameters.

    Parameters
    ----------
    theta : array_like, shape (np,) or (S, np)

    Returns
    -------
    M, K : ndarray, shape (n, n) or (S, n, n)
    """
    th = _theta(parts, theta)
    d = th - parts.theta0
    # K̂(θ) = K̂0 + Σ_j (θ_j - θ0_j) K̂_j ;  M̂(θ) = M̂0 + Σ_j (θ_j - θ0_j) M̂_j
    K = parts.K0 + np.tensordot(d, parts.dK, axes=([-1], [0]))
    M = parts.M0 + np.tensordot(d, parts.dM, axes=([-1], [0]))
    return M, K


def damping_ratio(parts: Parts, theta) -> np.ndarray:
    """ζ per sample: the damping_ratio parameter, or ``parts.zeta0``. Shape () or (S,)."""
    th = _theta(parts, theta)
    if "damping_ratio" in parts.kinds:
        return th[..., parts.kinds.index("damping_ratio")]
    return np.full(th.shape[:-1], parts.zeta0)


def rayleigh_ab(parts: Parts, theta, omega) -> tuple[np.ndarray, np.ndarray]:
    """Rayleigh (a [1/s], b [s]) per sample: the model's fixed ``parts.rayleigh`` when no
    parameter is a damping ratio, else ratio ζ(θ) at ``parts.modes``.

    Parameters
    ----------
    theta : array_like, shape (np,) or (S, np)
    omega : ndarray, shape (n,) or (S, n)   undamped natural frequencies [rad/s], ascending
    """
    th = _theta(parts, theta)
    if parts.rayleigh is not None and "damping_ratio" not in parts.kinds:
        a = np.full(th.shape[:-1], float(parts.rayleigh[0]))
        return a, np.full(th.shape[:-1], float(parts.rayleigh[1]))
    i, j = (int(m) - 1 for m in parts.modes)
    w = np.asarray(omega, float)
    return rayleigh_coefficients(damping_ratio(parts, th), w[..., i], w[..., j])


def modal(M: np.ndarray, K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Undamped modes of ``K φ = ω² M φ`` (stacks allowed), mass-normalised.

    Parameters
    ----------
    M, K : ndarray, shape (..., n, n), symmetric, M positive definite

    Returns
    -------
    omega2 : ndarray, shape (..., n)   ω² [rad²/s²], ascending
    Phi : ndarray, shape (..., n, n)   columns φ_i with Φᵀ M Φ = I
    """
    L = np.linalg.cholesky(M)
    Linv = np.linalg.inv(L)
    # A = L⁻¹ K L⁻ᵀ,  K φ = ω² M φ  <=>  A v = ω² v,  φ = L⁻ᵀ v
    A = Linv @ K @ np.swapaxes(Linv, -1, -2)
    A = 0.5 * (A + np.swapaxes(A, -1, -2))
    w2, V = np.linalg.eigh(A)
    Phi = np.swapaxes(Linv, -1, -2) @ V
    return w2, Phi


def rayleigh_coefficients(zeta, omega_i, omega_j) -> tuple[np.ndarray, np.ndarray]:
    """Rayleigh (a, b) giving damping ratio ζ at both ω_i and ω_j [rad/s].

    ζ(ω) = a/(2ω) + bω/2 = ζ at ω_i and ω_j  ⇒  a = 2ζ ω_i ω_j/(ω_i+ω_j), b = 2ζ/(ω_i+ω_j).
    """
    wi, wj = np.asarray(omega_i, float), np.asarray(omega_j, float)
    # a = 2 zeta w_i w_j / (w_i + w_j)
    a = 2.0 * zeta * wi * wj / (wi + wj)
    # b = 2 zeta / (w_i + w_j)
    b = 2.0 * zeta / (wi + wj)
    return a, b


def matrices(parts: Parts, theta) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """M̂, Ĉ, K̂ for parameters θ (Ĉ = a M̂ + b K̂, paper 004 eq. 7, :func:`rayleigh_ab`).

    Parameters
    ----------
    theta : array_like, shape (np,)

    Returns
    -------
    M, C, K : ndarray, shape (n, n)
    """
    th = _theta(parts, theta)
    if th.ndim != 1:
        raise ValueError(f"theta must have shape ({len(parts.names)},), got {th.shape}")
    M, K = mass_stiffness(parts, th)
    w2, _ = modal(M, K)
    a, b = (float(c) for c in rayleigh_ab(parts, th, np.sqrt(np.maximum(w2, 0.0))))
    # C = a M + b K   (paper 004 eq. 7)
    C = a * M + b * K
    return M, C, K


def check_parameters(parts: Parts, theta, names=None) -> np.ndarray:
    """Validate parameters for a model update; raise :class:`RejectedUpdate` with the reason.

    Accepts a full vector (np,) or a dict ``{name: value}`` (missing names keep ``theta0``).
    Rejects non-finite values, unknown names, negative moduli/springs/masses/ratios, ratios
    >= 1, and parameters for which M̂ is not positive definite or K̂ has a negative eigenvalue.
    """
    if isinstance(theta, dict):
        unknown = sorted(set(theta) - set(parts.names))
        if unknown:
            raise RejectedUpdate(f"parameter(s) {unknown} cannot be applied on this device: the "
                                 f"bundle's parametric model has {list(parts.names)}")
        th = np.array(parts.theta0, dtype=np.float64)
        for k, v in theta.items():
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise RejectedUpdate(f"parameter {k!r} must be a number, got "
                                     f"{type(v).__name__}")
            th[parts.names.index(k)] = float(v)
    else:
        th = np.asarray(theta, dtype=np.float64).reshape(-1)
        if th.size != len(parts.names):
            raise RejectedUpdate(f"got {th.size} parameter values, the model has "
                                 f"{len(parts.names)} {list(parts.names)}")
    for name, kind, v in zip(parts.names, parts.kinds, th):
        if not np.isfinite(v):
            raise RejectedUpdate(f"parameter {name!r} is not finite ({v})")
        if kind in ("modulus", "spring") and v <= 0:
            raise RejectedUpdate(f"parameter {name!r} ({kind}) must be > 0, got {v:g}")
        if kind == "mass" and v < 0:
            raise RejectedUpdate(f"parameter {name!r} (mass) must be >= 0, got {v:g}")
        if kind == "damage" and not v < 1.0:
            raise RejectedUpdate(f"parameter {name!r} (damage) must be < 1 (E = (1 - omega) E0), got {v:g}")
        if kind == "damping_ratio" and not (0.0 <= v < 1.0):
            raise RejectedUpdate(f"parameter {name!r} (damping ratio) must be in [0, 1), got {v:g}")
    M, K = mass_stiffness(parts, th)
    try:
        np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        raise RejectedUpdate(f"parameters {dict(zip(parts.names, th.tolist()))} give a mass "
                             "matrix that is not positive definite") from None
    w2, _ = modal(M, K)
    if w2[0] < -1e-8 * abs(w2[-1]):
        raise RejectedUpdate(f"parameters {dict(zip(parts.names, th.tolist()))} give a negative "
                             f"stiffness eigenvalue ({w2[0]:.3g})")
    return th


# =========================================================================== excitation
EXCITATIONS = ("pulse", "step", "chirp")


def excitation_signal(excitation: dict, n: int, rate: float, substeps: int = 1) -> np.ndarray:
    """Known excitation force of the experiment at ``t = k / (rate*substeps)``, k = 0..(n-1)*substeps.

    ``pulse``: half-sine ``amplitude * sin(pi t / width)`` for ``0 <= t <= width`` [N, s];
    ``step``: ``amplitude`` for t >= 0; ``chirp``: ``amplitude * sin(2 pi (f0 t + (f1-f0) t²/(2T)))``
    with T the experiment duration, ``f0``, ``f1`` [Hz].

    Returns
    -------
    f : ndarray, shape ((n-1)*substeps + 1,)   [N]
    """
    kind = excitation.get("type")
    if kind not in EXCITATIONS:
        raise ValueError(f"experiment.excitation.type must be one of {EXCITATIONS}, got {kind!r}")
    amp = float(excitation.get("amplitude", 1.0))
    t = np.arange((n - 1) * substeps + 1) / (rate * substeps)
    if kind == "pulse":
        width = float(excitation.get("width", 0.0))
        if not width > 0:
            raise ValueError(f"experiment.excitation.width must be > 0 s for a pulse, got {width}")
        return np.where(t <= width, amp * np.sin(np.pi * np.minimum(t, width) / width), 0.0)
    if kind == "step":
        return np.full(t.shape, amp)
    f0 = float(excitation.get("f0", 1.0))
    f1 = float(excitation.get("f1", rate / 4))
    T = (n - 1) / rate
    # f(t) = A sin(2π (f0 t + (f1 - f0) t² / (2T)))   (linear chirp)
    return amp * np.sin(2 * np.pi * (f0 * t + (f1 - f0) * t ** 2 / (2 * T)))


# =========================================================================== ONNX maps
def _ort():
    try:
        import onnxruntime
    except ImportError as exc:  # pragma: no cover - onnxruntime is a base dependency
        raise InverseMapError("onnxruntime is needed for the inverse maps: pip install onnxruntime") from exc
    return onnxruntime


def map_names(arrays: dict) -> list[str]:
    """Names of the inverse maps among bundle extras (keys ``inv_<name>_onnx``)."""
    return sorted(k[4:-5] for k in arrays if k.startswith("inv_") and k.endswith("_onnx"))


class InverseMap:
    """One ONNX inverse map: session created once, check set verified at load.

    Parameters
    ----------
    name : str
    arrays : dict
        Bundle extras (without the ``x_`` prefix): ``inv_<name>_onnx`` (uint8 ONNX bytes),
        ``_check_x`` (k, nf), ``_check_y`` (k, np), ``_feat_lo``/``_feat_hi`` (nf,).
    meta : dict
        ``meta["inverse"]["maps"][name]``: kind, names, bounds, features, experiment, n, nch.
    verify : bool
        Run the check set and raise :class:`InverseMapError` if any output differs from the
        stored reference by more than ``CHECK_TOL`` times the parameter range.
    """

    def __init__(self, name: str, arrays: dict, meta: dict, verify: bool = True):
        self.name = name
        key = f"inv_{name}_"
        need = ["onnx", "check_x", "check_y", "feat_lo", "feat_hi"]
        missing = [key + k for k in need if key + k not in arrays]
        if missing:
            raise InverseMapError(f"inverse map {name!r}: bundle extras lack {missing}")
        for k in ("kind", "names", "bounds", "features", "experiment", "n", "nch"):
            if k not in meta:
                raise InverseMapError(f"inverse map {name!r}: meta lacks {k!r}")
        self.meta = meta
        self.names = tuple(meta["names"])
        self.bounds = np.asarray(meta["bounds"], dtype=np.float64)
        self.features = _features.FeatureConfig.from_dict(meta["features"], where=f"map {name}.features")
        self.experiment = dict(meta["experiment"])
        self.rate = float(self.experiment["rate"])
        self.n, self.nch = int(meta["n"]), int(meta["nch"])
        self.feat_lo = np.asarray(arrays[key + "feat_lo"], dtype=np.float64)
        self.feat_hi = np.asarray(arrays[key + "feat_hi"], dtype=np.float64)
        blob = np.asarray(arrays[key + "onnx"], dtype=np.uint8).tobytes()
        self.model_sha256 = hashlib.sha256(blob).hexdigest()
        ort = _ort()
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        try:
            self.session = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - any ORT load failure means a bad model
            raise InverseMapError(f"inverse map {name!r}: ONNX model does not load ({exc})") from None
        ins, outs = self.session.get_inputs(), [o.name for o in self.session.get_outputs()]
        if len(ins) != 1 or outs[:2] != ["params", "std"]:
            raise InverseMapError(f"inverse map {name!r}: expected input 'features' and outputs "
                                  f"['params', 'std'], got {[i.name for i in ins]} -> {outs}")
        self._input = ins[0].name
        self.n_features = int(self.feat_lo.size)
        want = _features.n_features(self.features.kind, self.n, self.nch, self.features)
        if want != self.n_features:
            raise InverseMapError(f"inverse map {name!r}: feature settings give {want} features, "
                                  f"the map was trained on {self.n_features}")
        self._x = np.empty((1, self.n_features))
        if verify:
            self.verify(np.asarray(arrays[key + "check_x"], np.float64),
                        np.asarray(arrays[key + "check_y"], np.float64))

    def verify(self, Xc: np.ndarray, Yc: np.ndarray, tol: float = CHECK_TOL) -> float:
        """Largest deviation (in parameter ranges) of ONNX from the stored check set."""
        P, _ = self.infer(Xc)
        span = self.bounds[:, 1] - self.bounds[:, 0]
        if P.shape != Yc.shape:
            raise InverseMapError(f"inverse map {self.name!r}: check set shape {Yc.shape}, "
                                  f"model gives {P.shape}")
        dev = float(np.max(np.abs(P - Yc) / span)) if P.size else 0.0
        if not dev <= tol:
            raise InverseMapError(
                f"inverse map {self.name!r}: check set deviates by {dev:.3g} parameter ranges "
                f"(tolerance {tol:g}): the ONNX model was modified or runs differently here")
        return dev

    def infer(self, psi) -> tuple[np.ndarray, np.ndarray]:
        """Parameters and their standard deviation from feature vectors.

        Parameters
        ----------
        psi : array_like, shape (nf,) or (S, nf)

        Returns
        -------
        params, std : ndarray, shape (np,) or (S, np)   [SI]
        """
        x = np.asarray(psi, dtype=np.float64)
        one = x.ndim == 1
        X = x[None] if one else x
        if X.shape[1] != self.n_features:
            raise ValueError(f"map {self.name!r} takes {self.n_features} features, got {X.shape[1]}")
        P, S = self.session.run(None, {self._input: np.ascontiguousarray(X)})
        return (P[0], S[0]) if one else (P, S)

    def identify(self, window) -> dict:
        """Features of an experiment window, inference and range flags (payload for ``params``).

        Parameters
        ----------
        window : array_like, shape (n, nch)
            Response from the start of the excitation [SI].

        Returns
        -------
        dict with ``map``, ``names``, ``values``, ``std``, ``out_of_range`` (bool),
        ``param_out_of_range`` (per parameter), ``features_outside`` (fraction of features
        outside the training range), ``infer_ms``.
        """
        w = np.asarray(window, dtype=np.float64)
        if w.shape != (self.n, self.nch):
            raise ValueError(f"map {self.name!r} needs a window of shape ({self.n}, {self.nch}), "
                             f"got {w.shape}")
        t0 = time.perf_counter()
        psi = _features.extract(self.features.kind, w, self.rate, self.features)
        if not np.isfinite(psi).all():
            raise ValueError(f"map {self.name!r}: window gives non-finite features "
                             "(too few extrema for time_extrema?)")
        p, s = self.infer(psi)
        dt = (time.perf_counter() - t0) * 1e3
        return {"map": self.name, "kind": self.meta["kind"], "names": list(self.names),
                "values": p.tolist(), "std": s.tolist(),
                **range_flags(p, self.bounds, psi, self.feat_lo, self.feat_hi, std=s),
                "model_sha256": self.model_sha256[:16], "infer_ms": dt}


def range_flags(p, bounds, psi=None, feat_lo=None, feat_hi=None, margin: float = 0.1,
                std=None) -> dict:
    """Out-of-range flags (paper 000, Sect. 4.3.2: recognise extrapolation).

    A parameter is out of range when it leaves the training box by more than its standard
    deviation ``std`` (estimates of true values near a box edge scatter across it); the
    features are out of the training distribution when more than 5 % of them leave the
    training feature range widened by ``margin`` of its width on both sides.
    """
    p = np.asarray(p, np.float64)
    b = np.asarray(bounds, np.float64)
    tol = np.zeros_like(p) if std is None else np.abs(np.asarray(std, np.float64))
    par = (p < b[:, 0] - tol) | (p > b[:, 1] + tol)
    frac = 0.0
    if psi is not None:
        w = feat_hi - feat_lo
        out = (psi < feat_lo - margin * w) | (psi > feat_hi + margin * w)
        frac = float(out.mean())
    return {"out_of_range": bool(par.any() or frac > 0.05), "param_out_of_range": par.tolist(),
            "features_outside": frac}


# =========================================================================== capture
class WindowCapture:
    """Collects the experiment window from the live sample stream, block by block.

    :meth:`arm` starts a capture at the next sample pushed (the rig/simulator applies the known
    excitation from that sample on); :meth:`push` returns the complete ``(n, nch)`` window once
    ``n`` samples are in (later samples of that block are ignored), else None.
    """

    def __init__(self, n: int, nch: int):
        self.n, self.nch = int(n), int(nch)
        self._buf = np.empty((self.n, self.nch))
        self._k = 0
        self.armed = False
        self.start_at: int | None = None  # first sample (stream seq) of the window, if known

    def arm(self, start_at: int | None = None) -> None:
        self._k = 0
        self.armed = True
        self.start_at = start_at

    def push(self, Y, seq0: int | None = None) -> np.ndarray | None:
        """Add a block whose first row is stream sample ``seq0`` (rows before ``start_at``
        are skipped when both are known)."""
        if not self.armed:
            return None
        Y = np.asarray(Y, dtype=np.float64)
        if Y.ndim != 2 or Y.shape[1] != self.nch:
            raise ValueError(f"capture expects blocks of shape (nb, {self.nch}), got {Y.shape}")
        if self.start_at is not None and seq0 is not None and self._k == 0:
            skip = self.start_at - int(seq0)
            if skip >= Y.shape[0]:
                return None
            Y = Y[max(skip, 0):]
        take = min(self.n - self._k, Y.shape[0])
        self._buf[self._k:self._k + take] = Y[:take]
        self._k += take
        if self._k == self.n:
            self.armed = False
            return self._buf.copy()
        return None


# =========================================================================== runtime
class InverseRuntime:
    """All inverse maps of a bundle plus its parametric model; created once at start-up.

    Parameters
    ----------
    arrays : dict
        Bundle extras without the ``x_`` prefix (``Bundle.extras``).
    meta : dict
        Bundle meta; the ``"inverse"`` entry holds ``{"maps": {name: {...}}, "parts": {...},
        "default": name}``.
    """

    def __init__(self, arrays: dict, meta: dict, verify: bool = True):
        inv = meta.get("inverse")
        if not isinstance(inv, dict):
            raise InverseMapError("bundle meta has no 'inverse' entry (built without [[parameters]]?)")
        maps_meta = inv.get("maps", {})
        names = map_names(arrays)
        if sorted(maps_meta) != names:
            raise InverseMapError(f"inverse maps in meta {sorted(maps_meta)} and extras {names} differ")
        self.maps = {n: InverseMap(n, arrays, maps_meta[n], verify=verify) for n in names}
        self.default = inv.get("default", names[0] if names else None)
        if self.default is not None and self.default not in self.maps:
            raise InverseMapError(f"default inverse map {self.default!r} is not in the bundle")
        self.parts = Parts.from_extras(arrays, inv["parts"]) if "parts" in inv else None
        self.last: dict | None = None
        m = self.maps.get(self.default) if self.default else None
        self.capture = WindowCapture(m.n, m.nch) if m is not None else None

    @classmethod
    def from_bundle(cls, bundle, verify: bool = True) -> "InverseRuntime":
        return cls(bundle.extras, bundle.meta, verify=verify)

    def get(self, name: str | None = None) -> InverseMap:
        name = name or self.default
        if name not in self.maps:
            raise KeyError(f"no inverse map {name!r}; the bundle has {sorted(self.maps)}")
        return self.maps[name]

    def identify(self, window, name: str | None = None) -> dict:
        self.last = self.get(name).identify(window)
        return self.last

    def excitation(self, name: str | None = None, substeps: int = 1) -> np.ndarray:
        """Force history the rig must apply for the experiment of map ``name``
        ((n-1) substeps + 1,) [N], at ``substeps`` points per sample interval."""
        m = self.get(name)
        return excitation_signal(m.experiment["excitation"], m.n, m.rate, substeps)


def model_id(bundle_id: str, names, theta) -> str:
    """Identifier of an updated model: bundle id plus a short hash of the parameters."""
    h = hashlib.sha256(json.dumps([list(names), [float(v) for v in theta]]).encode()).hexdigest()
    return f"{bundle_id}+{h[:10]}"


def update_model(parts: Parts, bundle, theta, derive=None):
    """Rebuild M̂, Ĉ, K̂ for ``theta`` and derive the estimator's new step operator.

    Parameters
    ----------
    parts : Parts
    bundle : edge.bundle.Bundle
        The running bundle (its channels, forces, outputs, dt, alpha are kept).
    theta : array_like (np,) or dict {name: value}
    derive : callable bundle -> operator, optional
        Defaults to :func:`edge.estimator.derive_operator`.

    Returns
    -------
    op : step operator, new_bundle : Bundle (hash cleared), theta : ndarray (np,)

    Raises
    ------
    RejectedUpdate
        The parameters cannot be applied (reason in the message).
    """
    th = check_parameters(parts, theta)
    if parts.n != bundle.M.shape[0]:
        raise RejectedUpdate(f"parametric model has {parts.n} DOFs, the running bundle {bundle.M.shape[0]}")
    M, C, K = matrices(parts, th)
    if derive is None:
        from edge.estimator import derive_operator as derive
    nb = bundle.replace(M=M, C=C, K=K)
    try:
        op = derive(nb)
    except ValueError as exc:
        raise RejectedUpdate(f"the estimator cannot use the updated model: {exc}") from None
    return op, nb, th


# =========================================================================== daemon hook
class InverseHook:
    """Glue between the daemon loop and the inverse maps (created once at start-up).

    The daemon calls :meth:`attach` at start-up (sessions created, check sets verified) and
    :meth:`on_block` with every block of physical channel samples (nb, nch) on the loop
    thread; it returns the ``params`` payload when an armed capture completes (the hook also
    publishes it when the daemon has a publisher). ``auto_update`` (config) applies an accepted
    in-range identification to the estimator at once.
    """

    def __init__(self, runtime: InverseRuntime, auto_update: bool = False):
        self.rt = runtime
        self.auto_update = bool(auto_update)
        self.pending: str | None = None
        self.model_id: str | None = None
        self.base_id = "bundle"

    @classmethod
    def attach(cls, daemon, auto_update: bool = False) -> "InverseHook":
        b = daemon.est.bundle
        hook = cls(InverseRuntime.from_bundle(b), auto_update)
        hook.base_id = getattr(b, "bundle_id", "bundle")
        daemon.inverse = hook
        return hook

    def arm(self, daemon, name: str | None = None) -> dict:
        m = self.rt.get(name)
        if m.nch != getattr(daemon, "nch", m.nch):
            raise ValueError(f"map {m.name!r} expects {m.nch} channels, the daemon has {daemon.nch}")
        self.rt.capture = WindowCapture(m.n, m.nch)
        start = None
        src = getattr(getattr(daemon, "acq", None), "source", None)
        inject = getattr(src, "inject_excitation", None)
        if callable(inject):  # simulated rig: it applies the known excitation itself
            sub = int(m.experiment.get("substeps", 1))  # as the training data were simulated
            start = inject(self.rt.excitation(m.name, sub), substeps=sub)
        self.rt.capture.arm(start if isinstance(start, (int, np.integer)) else None)
        self.pending = m.name
        return {"map": m.name, "samples": m.n, "duration_s": m.n / m.rate}

    def on_block(self, daemon, Y, seq0: int | None = None) -> dict | None:
        if self.pending is None:
            return None
        w = self.rt.capture.push(Y, seq0)
        if w is None:
            return None
        name, self.pending = self.pending, None
        try:
            res = self.rt.identify(w, name)
        except ValueError as exc:
            res = {"map": name, "error": str(exc)}
        if self.auto_update and "values" in res and not res["out_of_range"]:
            try:
                res["model_id"] = self.apply(daemon, dict(zip(res["names"], res["values"])))
            except RejectedUpdate as exc:
                res["update_rejected"] = str(exc)
        _publish(daemon, "params", res)
        return res

    def apply(self, daemon, params) -> str:
        """Update the estimator's model between two blocks; publish the new model id on meta."""
        if self.rt.parts is None:
            raise RejectedUpdate("the bundle carries no parametric model: parameters cannot be applied")
        locked = getattr(daemon, "updates_locked", None)
        if locked:  # [bundle] public_key set and the bundle's signature did not verify
            raise RejectedUpdate(locked)
        t0 = time.perf_counter()
        th = check_parameters(self.rt.parts, params)
        check_bounds(self.rt, self.rt.parts.names, th)
        op, nb, th = update_model(self.rt.parts, daemon.est.bundle, th)
        daemon.est.swap(op)
        daemon.est.bundle = nb
        self.model_id = model_id(self.base_id, self.rt.parts.names, th)
        _publish(daemon, "meta", {"model_id": self.model_id,
                                  "params": dict(zip(self.rt.parts.names, th.tolist())),
                                  "update_ms": (time.perf_counter() - t0) * 1e3})
        return self.model_id


#: How far beyond the training box of the maps (fraction of its width) an update may go.
BOUNDS_MARGIN = 0.1


def parameter_bounds(rt: "InverseRuntime") -> dict:
    """``{name: (lo, hi)}``: the union of the training boxes of the bundle's maps [SI]."""
    out: dict = {}
    for m in rt.maps.values():
        for name, (lo, hi) in zip(m.names, np.asarray(m.bounds, np.float64).tolist()):
            a, b = out.get(name, (lo, hi))
            out[name] = (min(a, lo), max(b, hi))
    return out


def check_bounds(rt: "InverseRuntime", names, theta) -> None:
    """Refuse parameters outside the maps' training boxes widened by ``BOUNDS_MARGIN`` of
    their width (the bundle's admissible range; e.g. E = 1 Pa for aluminium)."""
    bounds = parameter_bounds(rt)
    for name, v in zip(names, np.asarray(theta, np.float64).tolist()):
        if name not in bounds:
            continue
        lo, hi = bounds[name]
        w = BOUNDS_MARGIN * (hi - lo)
        if not (lo - w <= v <= hi + w):
            raise RejectedUpdate(f"parameter {name!r} = {v:g} is outside the bundle's bounds "
                                 f"[{lo:g}, {hi:g}] (+/- {BOUNDS_MARGIN:.0%} of the width)")


def _publish(daemon, topic: str, obj: dict) -> None:
    pub = getattr(daemon, "pub", None)
    if pub is None:
        return
    pub.send(getattr(pub.topics, topic), json.dumps(obj).encode())


def _hook(daemon) -> InverseHook:
    hook = getattr(daemon, "inverse", None)
    if hook is None:
        try:
            hook = InverseHook.attach(daemon)
        except InverseMapError as exc:
            raise _command_error()(str(exc)) from None
    return hook


def _command_error():
    try:
        from edge.daemon.mqtt import CommandError
    except ImportError:  # pragma: no cover
        return ValueError
    return CommandError


def _cmd_identify(daemon, args: dict):
    try:
        return {"identify": _hook(daemon).arm(daemon, args.get("map"))}
    except (KeyError, ValueError) as exc:
        raise _command_error()(str(exc).strip("'\"")) from None


#: largest nonlinearity measure (paper 003 eq. 18) of a calibration applied without force=true
MAX_NONLINEARITY = 0.5


def calibration_params(calib: dict, max_nonlinearity: float = MAX_NONLINEARITY,
                       force: bool = False) -> tuple[dict, dict]:
    """Parameters to apply from a calibration posterior (``posterior.json`` of
    ``vsense-offline calibrate``, or a bundle's ``meta["calibration"]``).

    Returns ({name: median} without sensor offsets, {"std", "free_energy", "nonlinearity"}).
    Raises :class:`RejectedUpdate` naming the reason when the model family failed the
    inadequacy test, a nonlinearity measure exceeds ``max_nonlinearity`` (the Gaussian
    posterior is not trustworthy) or VB did not converge, unless ``force``.
    """
    try:
        names, mean, std = list(calib["names"]), list(calib["mean"]), list(calib["std"])
    except (KeyError, TypeError):
        raise RejectedUpdate("calibration: needs 'names', 'mean' and 'std' (posterior.json)") from None
    if not (len(names) == len(mean) == len(std)):
        raise RejectedUpdate("calibration: 'names', 'mean' and 'std' differ in length")
    kinds = list(calib.get("kinds") or [None] * len(names))
    nl = dict(calib.get("nonlinearity") or {})
    reasons = []
    inad = calib.get("inadequacy") or {}
    if inad.get("passed") is False or calib.get("model_inadequate"):
        reasons.append(f"the model family failed the inadequacy test (p_min {inad.get('p_min')})")
    worst = max(nl.items(), key=lambda kv: kv[1]) if nl else None
    if worst is not None and not worst[1] <= max_nonlinearity:
        reasons.append(f"nonlinearity measure of {worst[0]!r} is {worst[1]:.3g} > {max_nonlinearity}")
    if calib.get("converged") is False:
        reasons.append("the VB iteration did not converge")
    if reasons and not force:
        raise RejectedUpdate("calibration not applied: " + "; ".join(reasons)
                             + "; send force=true to apply it")
    keep = [i for i, k in enumerate(kinds) if k != "offset"]
    params = {names[i]: float(mean[i]) for i in keep}
    info = {"std": {names[i]: float(std[i]) for i in keep},
            "free_energy": calib.get("free_energy"), "nonlinearity": nl}
    return params, info


def _cmd_update_model(daemon, args: dict):
    calib = args.get("calibration")
    if calib is not None:
        try:
            params, info = calibration_params(calib, force=bool(args.get("force", False)))
            mid = _hook(daemon).apply(daemon, params)
        except RejectedUpdate as exc:
            raise _command_error()(str(exc)) from None
        # posterior std and free energy published with the applied values on `params`
        _publish(daemon, "params", {"source": "calibration", "model_id": mid,
                                    "names": list(params), "values": list(params.values()), **info})
        return {"model_id": mid}
    params = args.get("params")
    if params is None:
        hook = _hook(daemon)
        if hook.rt.last is None or "values" not in hook.rt.last:
            raise _command_error()("no identification result to apply; send 'params' or run 'identify'")
        if hook.rt.last["out_of_range"] and not args.get("force", False):
            raise _command_error()("the last identification is out of range; send force=true to apply it")
        params = dict(zip(hook.rt.last["names"], hook.rt.last["values"]))
    try:
        return {"model_id": _hook(daemon).apply(daemon, params)}
    except RejectedUpdate as exc:
        raise _command_error()(str(exc)) from None


def register_commands(registry) -> None:
    """Register ``identify`` and ``update_model`` on the daemon's command registry."""
    registry.register("identify", _cmd_identify, args={"map": str},
                      doc="capture the known experiment, infer parameters, publish on params")
    registry.register("update_model", _cmd_update_model,
                      args={"params": dict, "force": bool, "calibration": dict},
                      doc="apply parameters (default: the last identification, or a calibration "
                          "posterior) to the estimator; publishes the new model id on meta")
