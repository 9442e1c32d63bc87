"""Parsing and validation of the model file's ``[[parameters]]``, ``[experiment]``, ``[inverse]``.

The FE loader passes these sections through untouched in ``spec.raw``; this module turns them
into typed settings, with errors that name the file and the offending key::

    [[parameters]]  name = "E"      kind = "modulus"        material = "aluminium"  bounds = [60e9, 78e9]
    [[parameters]]  name = "zeta"   kind = "damping_ratio"  bounds = [0.005, 0.03]   modes = [1, 2]
    [[parameters]]  name = "k_root" kind = "spring"         spring = "root"         bounds = [20.0, 200.0]
    [[parameters]]  name = "m_tip"  kind = "mass"           mass = "tip"            bounds = [0, 0.005]
    [experiment]    excitation = { type = "pulse", amplitude = 1.0, width = 0.002, at = "f_tip" }
                    initial = "rest"  duration = 0.5  rate = 1000.0  channels = ["d110"]  noise = 0.01
    [inverse]       samples = 1000  test_samples = 1000  features = "fft_bins"  map = "mlp"  seed = 0

``noise`` is the standard deviation of the additive Gaussian measurement noise as a fraction of
the channel's peak ``|y|`` at the nominal parameters (paper 000, Sect. 4.1.1: about 0.5-2 % of the
maximum magnitude). ``at`` names the load (a ``[[force]]``/``[[load]]`` of the model file) where the
rig applies the excitation; without it the model's first load is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edge.features import KINDS as FEATURE_KINDS, FeatureConfig
from edge.inverse import EXCITATIONS, PARAM_KINDS
from offline.model.damage import parse_box

_TARGET = {"modulus": "material", "spring": "spring", "mass": "mass", "damping_ratio": None,
           "damage": None}
MAPS = ("mlp", "gp")


@dataclass(frozen=True)
class ParameterSpec:
    """One updating parameter: name, kind, admissible bounds [SI], what it acts on."""

    name: str
    kind: str
    bounds: tuple
    target: str | None = None     # material / spring / mass name
    nominal: float | None = None  # defaults to the box centre
    modes: tuple = (1, 2)         # damping_ratio only: 1-based modes with ratio ζ
    region: tuple | None = None   # damage only: box ((x0, y0, z0), (x1, y1, z1)) [m]

    @property
    def theta0(self) -> float:
        return float(self.nominal) if self.nominal is not None else 0.5 * (self.bounds[0] + self.bounds[1])


@dataclass(frozen=True)
class Experiment:
    """The known experiment: excitation from a known initial state, sampled channels."""

    excitation: dict
    duration: float
    rate: float
    channels: tuple
    noise: float = 0.01
    initial: str = "rest"
    substeps: int = 4

    @property
    def n(self) -> int:
        """Samples per window, t = 0 .. duration (exclusive end)."""
        return int(round(self.duration * self.rate))

    def to_dict(self) -> dict:
        return {"excitation": dict(self.excitation), "duration": self.duration, "rate": self.rate,
                "channels": list(self.channels), "noise": self.noise, "initial": self.initial,
                "substeps": self.substeps}


@dataclass(frozen=True)
class InverseSettings:
    """Training settings of the inverse map ([inverse] table)."""

    samples: int = 1000
    test_samples: int = 1000
    validation_samples: int = 500
    features: FeatureConfig = field(default_factory=FeatureConfig)
    map: str = "mlp"
    seed: int = 0
    hidden: tuple = (64, 64)
    max_epochs: int = 400
    patience: int = 40
    margin_bins: int = 3
    batch_size: int = 100
    learning_rate: float = 2e-3


def _num(v, where, positive=False, nonneg=False, integer=False):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"{where} must be a number, got {v!r}")
    if integer and int(v) != v:
        raise ValueError(f"{where} must be an integer, got {v!r}")
    if not np.isfinite(v):
        raise ValueError(f"{where} must be finite, got {v!r}")
    if positive and not v > 0:
        raise ValueError(f"{where} must be > 0, got {v!r}")
    if nonneg and v < 0:
        raise ValueError(f"{where} must be >= 0, got {v!r}")
    return int(v) if integer else float(v)


def parse_parameters(raw: dict, where: str = "model") -> list[ParameterSpec]:
    """``[[parameters]]`` -> list of :class:`ParameterSpec` (at least one)."""
    items = raw.get("parameters")
    if not items:
        raise ValueError(f"{where}: no [[parameters]] table: the inverse maps need updating parameters")
    if not isinstance(items, list):
        raise ValueError(f"{where}: 'parameters' must be an array of tables ([[parameters]])")
    out, seen = [], set()
    for i, it in enumerate(items):
        w = f"{where}: [[parameters]][{i}]"
        if not isinstance(it, dict):
            raise ValueError(f"{w} must be a table")
        name = it.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{w}.name is missing or not a string")
        w = f"{where}: [[parameters]] {name!r}"
        if name in seen:
            raise ValueError(f"{w}: duplicate parameter name")
        seen.add(name)
        kind = it.get("kind")
        if kind not in PARAM_KINDS:
            raise ValueError(f"{w}.kind must be one of {PARAM_KINDS}, got {kind!r}")
        known = ({"name", "kind", "bounds", "nominal", "modes"} | ({_TARGET[kind]} - {None})
                 | ({"region"} if kind == "damage" else set()))
        extra = sorted(set(it) - known)
        if extra:
            raise ValueError(f"{w}: unknown key(s) {extra} for kind {kind!r}; allowed {sorted(known)}")
        b = it.get("bounds")
        if not (isinstance(b, (list, tuple)) and len(b) == 2):
            raise ValueError(f"{w}.bounds must be [lower, upper], got {b!r}")
        lo, hi = _num(b[0], f"{w}.bounds[0]"), _num(b[1], f"{w}.bounds[1]")
        if not hi > lo:
            raise ValueError(f"{w}.bounds: upper {hi} must exceed lower {lo}")
        if kind in ("modulus", "spring") and lo <= 0:
            raise ValueError(f"{w}.bounds: a {kind} must be > 0, got lower {lo}")
        if kind == "mass" and lo < 0:
            raise ValueError(f"{w}.bounds: a mass must be >= 0, got lower {lo}")
        if kind == "damage" and not hi < 1:
            raise ValueError(f"{w}.bounds: a damage variable must stay below 1 (E = (1 - omega) E), "
                             f"got upper {hi}")
        region = None
        if kind == "damage":
            region = tuple(map(tuple, parse_box(it.get("region"), w).tolist()))
        if kind == "damping_ratio" and not (0 <= lo and hi < 1):
            raise ValueError(f"{w}.bounds: a damping ratio must lie in [0, 1), got [{lo}, {hi}]")
        target = None
        if _TARGET[kind]:
            target = it.get(_TARGET[kind])
            if not isinstance(target, str) or not target:
                raise ValueError(f"{w}: kind {kind!r} needs '{_TARGET[kind]} = \"<name>\"'")
        nominal = it.get("nominal")
        if nominal is not None:
            nominal = _num(nominal, f"{w}.nominal")
        modes = it.get("modes", [1, 2])
        if kind != "damping_ratio" and "modes" in it:
            raise ValueError(f"{w}.modes only applies to kind 'damping_ratio'")
        if not (isinstance(modes, (list, tuple)) and len(modes) == 2
                and all(isinstance(m, int) and m >= 1 for m in modes) and modes[0] != modes[1]):
            raise ValueError(f"{w}.modes must be two different 1-based mode numbers, got {modes!r}")
        out.append(ParameterSpec(name=name, kind=kind, bounds=(lo, hi), target=target,
                                 nominal=nominal, modes=tuple(modes), region=region))
    if sum(p.kind == "damping_ratio" for p in out) > 1:
        raise ValueError(f"{where}: at most one [[parameters]] of kind 'damping_ratio'")
    return out


def parse_experiment(raw: dict, where: str = "model") -> Experiment:
    """``[experiment]`` -> :class:`Experiment`."""
    ex = raw.get("experiment")
    w = f"{where}: [experiment]"
    if not isinstance(ex, dict):
        raise ValueError(f"{w} table is missing: the inverse maps need the known experiment")
    known = {"excitation", "initial", "duration", "rate", "channels", "noise", "substeps"}
    extra = sorted(set(ex) - known)
    if extra:
        raise ValueError(f"{w}: unknown key(s) {extra}; allowed {sorted(known)}")
    exc = ex.get("excitation")
    if not isinstance(exc, dict):
        raise ValueError(f"{w}.excitation must be a table {{ type = \"pulse\"|\"step\"|\"chirp\", ... }}")
    if exc.get("type") not in EXCITATIONS:
        raise ValueError(f"{w}.excitation.type must be one of {EXCITATIONS}, got {exc.get('type')!r}")
    allowed = {"type", "amplitude", "at", "width", "f0", "f1"}
    extra = sorted(set(exc) - allowed)
    if extra:
        raise ValueError(f"{w}.excitation: unknown key(s) {extra}; allowed {sorted(allowed)}")
    _num(exc.get("amplitude", 1.0), f"{w}.excitation.amplitude")
    if exc["type"] == "pulse":
        _num(exc.get("width"), f"{w}.excitation.width", positive=True)
    initial = ex.get("initial", "rest")
    if initial != "rest":
        raise ValueError(f"{w}.initial: only \"rest\" is supported, got {initial!r}")
    duration = _num(ex.get("duration"), f"{w}.duration", positive=True)
    rate = _num(ex.get("rate"), f"{w}.rate", positive=True)
    if exc["type"] == "chirp":
        f1 = _num(exc.get("f1", rate / 4), f"{w}.excitation.f1", positive=True)
        if f1 >= rate / 2:
            raise ValueError(f"{w}.excitation.f1 = {f1} Hz is not below the Nyquist frequency {rate / 2} Hz")
    ch = ex.get("channels")
    if not (isinstance(ch, list) and ch and all(isinstance(c, str) for c in ch)):
        raise ValueError(f"{w}.channels must be a non-empty list of channel names, got {ch!r}")
    noise = _num(ex.get("noise", 0.01), f"{w}.noise", nonneg=True)
    sub = _num(ex.get("substeps", 4), f"{w}.substeps", positive=True, integer=True)
    e = Experiment(excitation=dict(exc), duration=duration, rate=rate, channels=tuple(ch),
                   noise=noise, initial=initial, substeps=sub)
    if e.n < 16:
        raise ValueError(f"{w}: duration * rate = {e.n} samples; at least 16 are needed")
    return e


def parse_inverse(raw: dict, where: str = "model") -> InverseSettings:
    """``[inverse]`` -> :class:`InverseSettings` (defaults when the table is absent)."""
    inv = raw.get("inverse", {})
    w = f"{where}: [inverse]"
    if not isinstance(inv, dict):
        raise ValueError(f"{w} must be a table")
    known = {"samples", "test_samples", "validation_samples", "features", "map", "seed", "hidden",
             "max_epochs", "patience", "margin_bins", "batch_size", "learning_rate"}
    extra = sorted(set(inv) - known)
    if extra:
        raise ValueError(f"{w}: unknown key(s) {extra}; allowed {sorted(known)}")
    d = InverseSettings()
    kw = {}
    for key, lo in (("samples", 2), ("test_samples", 1), ("validation_samples", 1),
                    ("max_epochs", 1), ("patience", 1), ("margin_bins", 0)):
        if key in inv:
            v = _num(inv[key], f"{w}.{key}", integer=True)
            if v < lo:
                raise ValueError(f"{w}.{key} must be >= {lo}, got {v}")
            kw[key] = v
    if "batch_size" in inv:
        kw["batch_size"] = _num(inv["batch_size"], f"{w}.batch_size", positive=True, integer=True)
    if "learning_rate" in inv:
        kw["learning_rate"] = _num(inv["learning_rate"], f"{w}.learning_rate", positive=True)
    if "seed" in inv:
        kw["seed"] = _num(inv["seed"], f"{w}.seed", integer=True, nonneg=True)
    if "map" in inv:
        if inv["map"] not in MAPS:
            raise ValueError(f"{w}.map must be one of {MAPS}, got {inv['map']!r}")
        kw["map"] = inv["map"]
    if "hidden" in inv:
        h = inv["hidden"]
        if not (isinstance(h, list) and h and all(isinstance(x, int) and x > 0 for x in h)):
            raise ValueError(f"{w}.hidden must be a list of positive layer sizes, got {h!r}")
        kw["hidden"] = tuple(h)
    if "features" in inv:
        f = inv["features"]
        if isinstance(f, str):
            f = {"kind": f}
        if not isinstance(f, dict) or not isinstance(f.get("kind"), str) or any(
                k not in FEATURE_KINDS for k in f["kind"].split("+")):
            raise ValueError(f"{w}.features must be one of {FEATURE_KINDS}, or several joined by '+' "
                             f"(or a table with 'kind'), "
                             f"got {inv['features']!r}")
        kw["features"] = FeatureConfig.from_dict(f, where=f"{w}.features")
    return InverseSettings(**{**d.__dict__, **kw})


def parse(raw: dict, where: str = "model"):
    """All three sections: (parameters, experiment, settings)."""
    return parse_parameters(raw, where), parse_experiment(raw, where), parse_inverse(raw, where)
