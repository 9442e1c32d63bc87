"""Model-file section of sensor placement: ``[placement]`` (``weights``, ``budget``,
``criterion``) and its ``[[placement.candidates]]``, each with the keys of a ``[[sensors]]``
entry plus an optional ``cost``.

A candidate that repeats a ``[[sensors]]`` entry (same name, selection, DOF, kind and noise)
is already placed (a file written by ``vsense-offline place``) and is not offered again; a
candidate with a sensor's name that differs from it is an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from edge.kinds import FIELD_KINDS
from offline.model.signals import (
    RESERVED_NAMES,
    FieldSensor,
    Sensor,
    _field_output,
    _sensor_dynamics,
    _signal_common,
)
from offline.model.schema_signals import CANDIDATES, CRITERIA, NOISE_MODELS, PLACEMENT  # noqa: F401
from offline.model.table import ModelFileError, Table, check


@dataclass(frozen=True)
class Candidate(Sensor):
    """A sensor that ``place`` may add; ``cost`` counts against ``[placement] budget``."""

    cost: float = 1.0

    def as_sensor(self) -> Sensor:
        return Sensor(self.name, self.select, self.dof, self.kind, self.unit, self.where,
                      noise=self.noise, noise_std=self.noise_std, highpass_hz=self.highpass_hz,
                      average_s=self.average_s, drift=self.drift)


@dataclass(frozen=True)
class GaugeCandidate(FieldSensor):
    """A strain gauge that ``place`` may add (the keys of a gauge's ``[[sensors]]`` entry)."""

    cost: float = 1.0

    def as_sensor(self) -> FieldSensor:
        return FieldSensor(self.name, self.select, self.dof, self.kind, self.unit, self.where,
                           noise=self.noise, noise_std=self.noise_std,
                           highpass_hz=self.highpass_hz, average_s=self.average_s,
                           drift=self.drift, at=self.at,
                           surface=self.surface, direction=self.direction, scale=self.scale,
                           row=self.row)


def _gauge_candidate(ct, cw: str, kind: str, cost: float) -> GaugeCandidate:
    """A ``[[placement.candidates]]`` entry of kind strain, parsed as a gauge sensor."""
    if kind != "strain":
        raise ModelFileError(f"{cw}.kind: {kind!r} is an output kind; a gauge candidate is "
                             "kind = \"strain\"")
    g = _field_output(ct, cw, "strain", sensor=True)
    return GaugeCandidate(g.name, g.select, "", "strain", g.unit, cw, noise=g.noise,
                          noise_std=g.noise_std, highpass_hz=g.highpass_hz,
                          average_s=g.average_s, drift=g.drift, at=g.at, surface=g.surface,
                          direction=g.direction, scale=g.scale, row=g.row, cost=cost)


@dataclass(frozen=True)
class PlacementSpec:
    """``[placement]``: candidates (not yet placed), per-target weights, budget, criterion."""

    candidates: tuple = ()
    weights: dict = field(default_factory=dict)
    budget: float | None = None
    criterion: str = "log"
    placed: tuple = ()
    noise: str = "relative"  # names of candidates that are already [[sensors]] entries


def parse_placement(raw: dict, f: str, sensors: list, forces: list,
                    outputs: list) -> PlacementSpec | None:
    """Validate ``[placement]`` (errors name the key); None when the file has none."""
    if "placement" not in raw:
        return None
    w = f"{f}: [placement]"
    t = Table(raw["placement"], w, PLACEMENT)
    weights, budget, criterion = t.get("weights"), t.get("budget"), t.get("criterion")
    noise_model, cands = t.get("noise"), t.get("candidates")
    t.done()
    targets = {s.name for s in forces} | {o.name for o in outputs}
    wt = {}
    for k, v in weights.items():
        if k not in targets:
            raise ModelFileError(f"{w}.weights.{k}: no [[forces]] or [[outputs]] entry named "
                                 f"{k!r}")
        wt[k] = check(v, f"{w}.weights.{k}", lo=0.0)
    if targets and all(wt.get(k, 1.0) == 0 for k in targets):
        raise ModelFileError(f"{w}.weights: every force's and output's weight is 0 (a target "
                             "not named weighs 1)")
    by_sensor = {s.name: s for s in sensors}
    taken = targets
    out, placed, seen, costs = [], [], set(), []
    for i, e in enumerate(cands):
        cw = f"{f}: [[placement.candidates]][{i}]"
        ct = Table(e, cw, CANDIDATES)
        if isinstance(e, dict) and e.get("kind") in FIELD_KINDS:  # a strain gauge
            cost = ct.get("cost")
            g = _gauge_candidate(ct, cw, e["kind"], cost)
            name, sel, dof, kind, unit, noise = g.name, g.select, "", g.kind, g.unit, g.noise
        else:
            g = None
            name, sel, dof, kind, unit = _signal_common(ct, cw, True)
            noise, noise_std = ct.get("noise"), ct.get("noise_std")  # as a sensor's
            dyn = _sensor_dynamics(ct, cw, name)  # highpass_hz, average_s, drift
            cost = ct.get("cost")
            ct.done()
        if name in seen:
            raise ModelFileError(f"{cw}.name: {name!r} is already a candidate")
        seen.add(name)
        if name in taken:
            raise ModelFileError(f"{cw}.name: {name!r} is a force or output name (sensor, "
                                 f"force and output names share the CSV header)")
        if name in RESERVED_NAMES or name.endswith("_std"):  # as a [[sensors]] entry's
            raise ModelFileError(f"{cw}.name: {name!r} is reserved: the CSV files have the "
                                 f"columns {', '.join(RESERVED_NAMES)} and <name>_std")
        c = g if g is not None else Candidate(name, sel, dof, kind, unit, cw, noise=noise,
                                              noise_std=noise_std, highpass_hz=dyn[0],
                                              average_s=dyn[1], drift=dyn[2], cost=cost)
        costs.append(c.cost)
        if name in by_sensor:
            s = by_sensor[name]
            if ((s.select.forms, s.select.tol, s.dof, s.kind, s.unit, s.noise, s.noise_std,
                 getattr(s, "row", None), s.highpass_hz, s.average_s, s.drift)
                    != (sel.forms, sel.tol, dof, kind, unit, noise, c.noise_std,
                        getattr(c, "row", None), c.highpass_hz, c.average_s, c.drift)):
                raise ModelFileError(f"{cw}.name: {name!r} is a [[sensors]] entry with another "
                                     f"position, kind or noise")
            placed.append(name)
            continue
        out.append(c)
    # against every candidate, the placed ones included: in a file written by `place` the
    # budget may be spent (each candidate left costs more), and that file must read back
    if budget is not None and out and min(costs) > budget:
        raise ModelFileError(f"{w}.budget: {budget:g} is below the cheapest candidate's cost")
    return PlacementSpec(tuple(out), wt, budget, criterion, tuple(placed), noise_model)
