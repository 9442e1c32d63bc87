"""Model-file tables of model updating, validated with the rest of the file (errors are
:class:`ModelFileError` naming the file and the key path): ``[[parameters]]``, ``[[damage]]``
and ``[bayes]`` (its priors and data preparation). Their semantics stay with their users:
:mod:`offline.calibration` (priors on the transform's scale, the records' preparation),
:mod:`offline.inverse`, :mod:`offline.model.damage` (the zones' assembly).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offline.model.schema_update import BAYES, DAMAGE, DATA, PARAMETERS, PRIOR, REGION
from offline.model.table import ModelFileError, Table, check, entries

#: the parameter kinds whose default prior is log-normal (calibration)
POSITIVE = ("modulus", "spring", "damping_ratio")
#: kind -> the key naming what the parameter acts on
TARGET = {"modulus": "material", "spring": "spring", "mass": "mass", "damping_ratio": None,
          "damage": None}


@dataclass(frozen=True)
class ParameterSpec:
    """One updating parameter: name, kind, admissible bounds [SI], what it acts on."""

    name: str
    kind: str
    bounds: tuple
    target: str | None = None     # material / spring / mass name
    nominal: float | None = None  # defaults to the box centre
    modes: tuple = (1, 2)         # damping_ratio only: 1-based modes with ratio zeta
    region: tuple | None = None   # damage only: box ((x0, y0, z0), (x1, y1, z1)) [m]

    @property
    def theta0(self) -> float:
        return float(self.nominal) if self.nominal is not None else \
            0.5 * (self.bounds[0] + self.bounds[1])


def parse_region(region, where: str) -> np.ndarray:
    """``region = {box = [[x0, y0, z0], [x1, y1, z1]]}`` (``where``: the key path of the
    region) -> (2, 3) [m]."""
    t = Table(region, where, REGION)
    b = t.get("box")
    t.done()
    if not (len(b) == 2 and all(isinstance(p, list) and len(p) == 3 for p in b)):
        raise ModelFileError(f"{where}.box: expected two points [[x0, y0, z0], [x1, y1, z1]], "
                             f"got {b!r}")
    return np.array([[check(c, f"{where}.box[{i}][{j}]") for j, c in enumerate(p)]
                     for i, p in enumerate(b)])


def parse_damage(raw: dict, f: str) -> list:
    """``[[damage]]`` -> [(name or None, box (2, 3) [m], omega)]; E_z = (1 - omega) E."""
    out = []
    for e, w in entries(raw, "damage", f):
        t = Table(e, w, DAMAGE)
        name = t.get("name")
        box = parse_region(t.get("region"), f"{w}.region")
        omega = t.get("omega")
        t.done()
        out.append((name, box, omega))
    return out


def _bounds(t: Table, w: str, kind: str) -> tuple:
    b = t.get("bounds")
    if len(b) != 2:
        raise ModelFileError(f"{w}.bounds: expected [lower, upper], got {b!r}")
    lo, hi = (check(x, f"{w}.bounds[{i}]") for i, x in enumerate(b))
    if not hi > lo:
        raise ModelFileError(f"{w}.bounds: upper {hi:g} must exceed lower {lo:g}")
    if kind in ("modulus", "spring") and lo <= 0:
        raise ModelFileError(f"{w}.bounds: a {kind} must be > 0, got lower {lo:g}")
    if kind == "mass" and lo < 0:
        raise ModelFileError(f"{w}.bounds: a mass must be >= 0, got lower {lo:g}")
    if kind == "damage" and not hi < 1:
        raise ModelFileError(f"{w}.bounds: a damage variable must stay below 1 "
                             f"(E = (1 - omega) E), got upper {hi:g}")
    if kind == "damping_ratio" and not (0 <= lo and hi < 1):
        raise ModelFileError(f"{w}.bounds: a damping ratio must lie in [0, 1), got "
                             f"[{lo:g}, {hi:g}]")
    return lo, hi


def _parameter(t: Table, w: str) -> ParameterSpec:
    name = t.get("name")
    if not name:
        raise ModelFileError(f"{w}.name: empty name")
    kind = t.get("kind")
    lo, hi = _bounds(t, w, kind)
    region = None
    if kind == "damage":
        region = tuple(map(tuple, parse_region(t.get("region"), f"{w}.region").tolist()))
    target, key = None, TARGET[kind]
    if key is not None:
        if not t.has(key):
            raise ModelFileError(f"{t.key(key)}: missing (kind {kind!r} needs {key} = "
                                 f"\"<name>\")")
        target = t.get(key)
        if not target:
            raise ModelFileError(f"{t.key(key)}: empty name")
    nominal = t.get("nominal")
    modes = (1, 2)
    if kind == "damping_ratio":
        modes = t.get("modes")
        if not (len(modes) == 2 and modes[0] != modes[1]):
            raise ModelFileError(f"{w}.modes: expected two different 1-based mode numbers, "
                                 f"got {modes!r}")
        modes = tuple(check(m, f"{w}.modes[{i}]", "int", lo=1) for i, m in enumerate(modes))
    t.done()
    return ParameterSpec(name, kind, (lo, hi), target, nominal, modes, region)


def parse_parameters(raw: dict, f: str) -> list:
    """``[[parameters]]`` -> [:class:`ParameterSpec`] (none when the file has none)."""
    out, seen = [], {}
    for e, w in entries(raw, "parameters", f):
        p = _parameter(Table(e, w, PARAMETERS), w)
        if p.name in seen:
            raise ModelFileError(f"{w}.name: {p.name!r} already used by {seen[p.name]}")
        seen[p.name] = w
        out.append(p)
    if sum(p.kind == "damping_ratio" for p in out) > 1:
        raise ModelFileError(f"{f}: [[parameters]]: at most one entry of kind "
                             "'damping_ratio'")
    return out


def _prior(d, w: str, p: ParameterSpec) -> dict:
    """One ``[bayes.prior.<name>]`` table -> {transform, centre, std} (centre: median of
    log and logit, mean of identity)."""
    t = Table(d, w, PRIOR)
    tk = t.get("transform", default="log" if p.kind in POSITIVE else "identity")
    if tk == "log":
        out = {"centre": t.get("median", lo=0.0, lo_open=True), "std": t.get("log_std")}
    elif tk == "identity":
        out = {"centre": t.get("mean"), "std": t.get("std")}
    else:
        lo, hi = p.bounds
        out = {"centre": t.get("median", default=p.theta0, lo=lo, hi=hi, lo_open=True,
                               hi_open=True), "std": t.get("logit_std")}
    t.done()
    return {"transform": tk, **out}


def parse_data(d, where: str) -> dict:
    """``[bayes.data]`` -> the keyword arguments of :class:`offline.calibration.data.Prep`
    (only the keys given)."""
    t = Table({} if d is None else d, where, DATA)
    out = {k: t.get(k) for k in DATA.names if t.has(k)}
    t.done()
    if "delays" in out:
        out["delays"] = {c: check(v, f"{where}.delays.{c}") for c, v in out["delays"].items()}
    return out


def parse_bayes(raw: dict, f: str, parameters: list, sensors=None) -> dict:
    """``[bayes]`` -> its values (defaults for keys not given): ``priors`` {parameter name:
    :func:`_prior`}, ``data`` (:func:`parse_data`), ``offsets`` a tuple; ``sensors`` (names),
    when given, are what ``offsets`` may name."""
    w = f"{f}: [bayes]"
    t = Table(raw.get("bayes", {}), w, BAYES)
    out = {k: t.get(k) for k in BAYES.names}
    t.done()
    byname = {p.name: p for p in parameters}
    unknown = sorted(set(out["prior"]) - set(byname))
    if unknown:
        raise ModelFileError(f"{w}.prior.{unknown[0]}: not a [[parameters]] name (have "
                             f"{', '.join(byname) or 'none'})")
    out["prior"] = {n: _prior(d, f"{w}.prior.{n}", byname[n]) for n, d in out["prior"].items()}
    out["data"] = parse_data(out["data"], f"{w}.data")
    offs = tuple(check(o, f"{w}.offsets[{i}]", "str") for i, o in enumerate(out["offsets"]))
    if sensors is not None:
        bad = [o for o in offs if o not in sensors]
        if bad:
            raise ModelFileError(f"{w}.offsets: {bad[0]!r} is not a [[sensors]] name (have "
                                 f"{', '.join(sensors) or 'none'})")
    out["offsets"] = offs
    return out
