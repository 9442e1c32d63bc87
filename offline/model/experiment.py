"""Model-file tables of the inverse maps and the hybrid twin, validated with the rest of the
file (errors are :class:`ModelFileError` naming the file and the key path): ``[experiment]``
(the known experiment), ``[inverse]`` (the maps' training) and ``[hybrid]`` (the neural
correction's settings; :class:`offline.hybrid.spec.HybridSpec` holds them).

``noise`` of ``[experiment]`` is the standard deviation of the additive Gaussian measurement
noise as a fraction of the channel's peak ``|y|`` at the nominal parameters (paper 000, Sect.
4.1.1: about 0.5-2 % of the maximum magnitude). ``excitation.at`` names the ``[[forces]]``
entry where the rig applies the excitation; without it the model's first force is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edge.features import FeatureConfig
from edge.features import KINDS as FEATURE_KINDS
from offline.model.schema_update import EXCITATION, EXPERIMENT, FEATURES, HYBRID, INVERSE
from offline.model.selection import parse_selection
from offline.model.table import ModelFileError, Table, check, dof_name


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


def _excitation(d, w: str, rate: float) -> dict:
    """``[experiment].excitation``: checked; returned as written (the bundle keeps it)."""
    t = Table(d, w, EXCITATION)
    typ = t.get("type")
    t.get("amplitude")
    t.get("at")
    if typ == "pulse":
        t.get("width")
    elif t.has("width"):
        t.get("width", default=None)
    t.get("f0")
    f1 = t.get("f1", default=rate / 4)
    t.done()
    if typ == "chirp" and f1 >= rate / 2:
        raise ModelFileError(f"{w}.f1: {f1:g} Hz is not below the Nyquist frequency "
                             f"{rate / 2:g} Hz")
    return dict(d)


def parse_experiment(raw: dict, f: str, sensors=None, forces=None) -> Experiment | None:
    """``[experiment]`` -> :class:`Experiment` (None when the file has none); ``sensors`` and
    ``forces`` (names), when given, are what ``channels`` and ``excitation.at`` may name."""
    if "experiment" not in raw:
        return None
    w = f"{f}: [experiment]"
    t = Table(raw["experiment"], w, EXPERIMENT)
    duration, rate = t.get("duration"), t.get("rate")
    exc = _excitation(t.get("excitation"), f"{w}.excitation", rate)
    ch = t.get("channels")
    if not ch:
        raise ModelFileError(f"{w}.channels: expected a non-empty list of [[sensors]] names")
    ch = tuple(check(c, f"{w}.channels[{i}]", "str") for i, c in enumerate(ch))
    for i, c in enumerate(ch):
        if sensors is not None and c not in sensors:
            raise ModelFileError(f"{w}.channels[{i}]: {c!r} is not a [[sensors]] name (have "
                                 f"{', '.join(sensors) or 'none'})")
    at = exc.get("at")
    if forces is not None and at is not None and at not in forces:
        raise ModelFileError(f"{w}.excitation.at: {at!r} is not a [[forces]] name (have "
                             f"{', '.join(forces) or 'none'})")
    e = Experiment(excitation=exc, duration=duration, rate=rate, channels=ch,
                   noise=t.get("noise"), initial=t.get("initial"), substeps=t.get("substeps"))
    t.done()
    if e.n < 16:
        raise ModelFileError(f"{w}: duration * rate = {e.n} samples; at least 16 are needed")
    return e


def _features(v, w: str) -> FeatureConfig:
    """``[inverse] features``: a kind (``a+b`` joins kinds) or an ``[inverse.features]``
    table."""
    t = Table({"kind": v} if isinstance(v, str) else v, w, FEATURES)
    d = {k: t.get(k) for k in FEATURES.names if t.has(k)}
    t.done()
    kind = d.get("kind", FEATURES.key("kind").default)
    bad = [k for k in kind.split("+") if k not in FEATURE_KINDS]
    if bad:
        raise ModelFileError(f"{w}{'' if isinstance(v, str) else '.kind'}: {bad[0]!r} is not "
                             f"a feature kind (one of {', '.join(FEATURE_KINDS)}, or several "
                             "joined by '+')")
    if "bins" in d:
        d["bins"] = [check(b, f"{w}.bins[{i}]", "int", lo=0) for i, b in enumerate(d["bins"])]
    return FeatureConfig.from_dict(d, where=w)


def parse_inverse(raw: dict, f: str) -> InverseSettings:
    """``[inverse]`` -> :class:`InverseSettings` (defaults when the table is absent)."""
    w = f"{f}: [inverse]"
    t = Table(raw.get("inverse", {}), w, INVERSE)
    kw = {k: t.get(k) for k in INVERSE.names}
    t.done()
    kw["features"] = _features(kw["features"], f"{w}.features")
    h = kw["hidden"]
    if not h:
        raise ModelFileError(f"{w}.hidden: expected a non-empty list of layer sizes")
    kw["hidden"] = tuple(check(x, f"{w}.hidden[{i}]", "int", lo=1) for i, x in enumerate(h))
    return InverseSettings(**kw)


def parse_hybrid(raw: dict, f: str) -> dict:
    """``[hybrid]`` -> the keyword arguments of :class:`offline.hybrid.spec.HybridSpec`
    (defaults for keys not given; ``select`` stays the table, checked)."""
    w = f"{f}: [hybrid]"
    t = Table(raw.get("hybrid", {}), w, HYBRID, strict=True)
    kw = {k: t.get(k) for k in HYBRID.names}
    if kw["select"] is None and t.has("dofs"):
        raise ModelFileError(f"{t.key('dofs')}: needs a select (where the correction acts)")
    if kw["select"] is not None:
        parse_selection(kw["select"], f"{w}.select")
    dofs = kw["dofs"]
    dofs = [dofs] if isinstance(dofs, str) else check(dofs, t.key("dofs"), "list")
    kw["dofs"] = tuple(dof_name(d, f"{w}.dofs[{i}]") for i, d in enumerate(dofs))
    inputs = kw["inputs"]
    if not inputs or len(set(map(str, inputs))) != len(inputs):
        raise ModelFileError(f"{t.key('inputs')}: a non-empty list of distinct "
                             f"\"displacement\", \"velocity\" (got {inputs!r})")
    kw["inputs"] = tuple(check(x, f"{w}.inputs[{i}]", "str", choices=HYBRID.key("inputs").choices)
                         for i, x in enumerate(inputs))
    return kw
