"""The ONNX inverse maps of a bundle at run time: sessions, check sets, capture, identify.

IMPU method (paper file 000, Sect. 2.2.3): the rig applies a known excitation from a known
initial state; the response window is turned into features (:mod:`edge.features`); an inverse
map trained offline (MLP or Gaussian process, exported to ONNX with the input/output
normalisation inside the graph) returns the physical parameters. ``onnxruntime`` is imported
where a session is created.
"""

from __future__ import annotations

import hashlib
import time

import numpy as np

from edge import features as _features
from edge.inverse.parametric import InverseMapError, Parts, RejectedUpdate, excitation_signal

CHECK_TOL = 1e-5


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
        # what identify uses at run time, checked here (a crafted value passed the load and
        # then failed in the command: int(inf) substeps)
        sub = self.experiment.get("substeps", 1)
        if not (np.isfinite(self.rate) and self.rate > 0 and self.n > 0 and self.nch > 0
                and isinstance(sub, (int, float)) and not isinstance(sub, bool)
                and np.isfinite(sub) and sub == int(sub) and 1 <= sub <= 1000):
            raise InverseMapError(f"inverse map {name!r}: experiment rate {self.rate!r}, n "
                                  f"{self.n}, nch {self.nch}, substeps {sub!r}: rate must be "
                                  "finite > 0, n and nch > 0, substeps an integer in 1..1000")
        if "excitation" in self.experiment:  # the simulated rig's force (identify)
            try:
                excitation_signal(self.experiment["excitation"], 2, self.rate, int(sub))
            except (AttributeError, KeyError, TypeError, ValueError) as e:
                raise InverseMapError(f"inverse map {name!r}: experiment.excitation: {e}") \
                    from None
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


