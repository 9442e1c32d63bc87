"""Model-file sections of the signals: ``[[sensors]]``, ``[[forces]]``, ``[[outputs]]`` and the
``[design_load]`` load(s) that drive the forces.
"""

from __future__ import annotations

from dataclasses import dataclass

from edge.kinds import FIELD_KINDS, SIGNAL_KINDS  # noqa: F401
from offline.fem.strain import UNITS as FIELD_UNITS
from offline.model.schema_signals import (CALIBRATION, FORCE_MODEL, FORCES, LOAD,  # noqa: F401
                                          LOAD_TYPES, OUTPUTS, SENSORS)
from offline.model.sections import EstimatorSpec
from offline.model.selection import Selection, parse_selection
from offline.model.table import ModelFileError, Table, check, dof_name, entries, point



@dataclass(frozen=True)
class Force:
    """Identified force; ``scale``: its typical RMS size in its unit (N or N m), used by the
    calibration run (multiplies the calibration load) and to scale the regularisation."""

    name: str
    select: Selection
    dof: str
    where: str = ""
    scale: float = 1.0
    model: dict | None = None  # smoother force model {kind, band, rms, order} (validated)


@dataclass(frozen=True)
class Output:
    """A signal at a physical DOF: ``kind`` displacement, velocity or acceleration in ``unit``
    (virtual outputs are estimated; :class:`Sensor` adds measurement noise)."""

    name: str
    select: Selection
    dof: str
    kind: str = "displacement"
    unit: str = "m"
    where: str = ""


@dataclass(frozen=True)
class FieldOutput(Output):
    """A strain or stress output at the point ``at`` [m] (``kind`` strain/stress, ``unit``
    strain/microstrain or Pa/kPa/MPa, ``scale`` from SI to it); plates: ``surface`` top or
    bottom and the in-plane ``direction`` (offline.fem.strain). ``select``/``dof`` are unused
    (the nearest node, for messages)."""

    at: tuple = (0.0, 0.0, 0.0)
    surface: str | None = None
    direction: tuple | None = None
    scale: float = 1.0
    row: tuple | None = None  # user recovery row ((node, dof name, coefficient), ...)


@dataclass(frozen=True)
class Sensor(Output):
    """Measured channel; ``noise`` is the relative std of the signal (paper eq. 28),
    ``noise_std`` (optional) the absolute std in the channel's unit, which then wins; the
    sensor's own dynamics before the converter (:mod:`edge.acquisition`, 0 = none):
    ``highpass_hz`` (first-order high-pass corner, an IEPE sensor's), ``average_s`` (moving
    average window, a laser sensor's), ``drift`` (random-walk offset intensity [unit /
    sqrt(s)], a DC path's slow drift)."""

    noise: float = 0.0
    noise_std: float | None = None
    highpass_hz: float = 0.0
    average_s: float = 0.0
    drift: float = 0.0


@dataclass(frozen=True)
class FieldSensor(Sensor):
    """A strain gauge: a :class:`Sensor` whose value is the strain at ``at`` (the element's
    recovery, as :class:`FieldOutput`) or the user's recovery ``row`` (imported matrices)."""

    at: tuple | None = None
    surface: str | None = None
    direction: tuple | None = None
    scale: float = 1.0
    row: tuple | None = None


@dataclass(frozen=True)
class LoadSpec:
    """Calibration excitation: random (band [Hz], rms [N]), sine (freq, amplitude), chirp."""

    type: str = "random"
    band: tuple | None = None
    rms: float | None = None
    freq: float | None = None
    amplitude: float | None = None
    force: str | None = None


@dataclass(frozen=True)
class Calibration:
    """Calibration runs: ``load`` (the first entry; ``loads`` all of them, one per force or
    one for all), ``seeds`` independent runs starting at ``seed``."""

    load: LoadSpec
    duration: float = 2.0
    seed: int = 0
    loads: tuple = ()
    seeds: int = 3
    warmup: float = 1.0  # [s] simulated before the scored part of each run

    def load_for(self, force: str) -> LoadSpec | None:
        """The load entry that drives ``force`` (its own entry first, then one for all)."""
        for ld in self.loads or (self.load,):
            if ld.force == force:
                return ld
        for ld in self.loads or (self.load,):
            if ld.force is None:
                return ld
        return None


# --------------------------------------------------------------------------- parsing
def _recovery_row(v, where: str) -> tuple:
    """``row = [[node, "dof", coefficient], ...]``: a strain recovery row given by the user
    (imported matrices); each entry checked here, the nodes and DOFs against the model when
    it is built (:func:`offline.fem.strain.user_probe`)."""
    check(v, where, "list")
    if not v:
        raise ModelFileError(f"{where}: empty row (give [[node, \"dof\", coefficient], ...])")
    out = []
    for i, e in enumerate(v):
        w = f"{where}[{i}]"
        if not (isinstance(e, list) and len(e) == 3):
            raise ModelFileError(f"{w}: expected [node, \"dof\", coefficient] (3 items), "
                                 f"got {e!r}")
        node = check(e[0], f"{w}[0] (node)", "int")
        out.append((int(node), dof_name(e[1], f"{w}[1] (dof)"), check(e[2], f"{w}[2] (coefficient)")))
    keys = [(n, d) for n, d, _ in out]
    if len(set(keys)) != len(keys):
        raise ModelFileError(f"{where}: a (node, dof) appears twice")
    return tuple(out)


def _field_output(t: Table, where: str, kind: str, sensor: bool = False):
    """``[[outputs]]`` of kind strain/stress (or a ``[[sensors]]`` strain gauge): name, ``at``
    (or a user ``row``), unit, surface, direction; a sensor also its noise and dynamics."""
    name = t.get("name")
    t.get("kind")
    if not name.strip():
        raise ModelFileError(f"{where}.name: empty name")
    for k in ("select", "dof"):
        if t.has(k):
            raise ModelFileError(f"{where}.{k}: a {kind} {'gauge' if sensor else 'output'} is "
                                 f"placed with at = [x, y, z] (a point on the member's surface "
                                 f"or the plate's mid-surface) or a recovery row, not {k}")
    if t.has("at") == t.has("row"):
        raise ModelFileError(f"{where}.at: give at = [x, y, z] (beam, plate, solid models) or "
                             "row = [[node, \"dof\", coefficient], ...] (imported matrices), "
                             "one of the two")
    row = _recovery_row(t.get("row"), f"{where}.row") if t.has("row") else None
    at = point(t.get("at"), f"{where}.at") if row is None else None
    units = FIELD_UNITS[kind]
    unit = t.get("unit", default=next(iter(units)), choices=tuple(units))
    surface = t.get("surface")
    d = t.get("direction")
    direction = None if d is None else point(d, f"{where}.direction")
    if direction is not None and not any(direction):
        raise ModelFileError(f"{where}.direction: must not be the zero vector")
    if row is not None and (surface is not None or direction is not None):
        raise ModelFileError(f"{where}.row: a recovery row is the whole strain; remove "
                             "surface/direction")
    sel = Selection((("at", at if at is not None else (0.0, 0.0, 0.0)),), float("inf"),
                    f"{where}.at")
    if not sensor:
        t.done()
        return FieldOutput(name, sel, "", kind, unit, where, at, surface, direction,
                           units[unit], row)
    noise, noise_abs = t.get("noise"), t.get("noise_std")
    dyn = _sensor_dynamics(t, where, name)
    t.done()
    return FieldSensor(name, sel, "", kind, unit, where, noise, noise_abs, *dyn, at=at,
                       surface=surface, direction=direction, scale=units[unit], row=row)


def _signal_common(t, where, with_kind):
    name = t.get("name")
    if not name.strip():
        raise ModelFileError(f"{where}.name: empty name")
    select = parse_selection(t.get("select"), f"{where}.select")
    dof = dof_name(t.get("dof"), f"{where}.dof")
    if not with_kind:
        return name, select, dof, None, None
    kind = t.get("kind")
    if kind in FIELD_KINDS:  # a strain sensor is parsed by _field_output
        raise ModelFileError(f"{where}.kind: {kind!r} is an output kind; a measured gauge "
                             "is kind = \"strain\"")
    rot = dof in ("rx", "ry", "rz")
    base = "rad" if rot else "m"
    dflt = {"displacement": base, "velocity": f"{base}/s", "acceleration": f"{base}/s^2"}[kind]
    unit = t.get("unit", default=dflt)
    return name, select, dof, kind, unit


#: column names of the measurement, truth and estimates CSVs that a signal may not take
RESERVED_NAMES = ("time", "flags")


def _sensor_dynamics(t: Table, w: str, name: str) -> tuple:
    """``(highpass_hz, average_s, drift)`` of a ``[[sensors]]`` entry (0: none); a corner or
    window must be > 0 and finite, a drift >= 0 and finite; errors name key and sensor."""
    out = []
    for key in ("highpass_hz", "average_s", "drift"):
        try:
            out.append(float(t.get(key)))
        except ModelFileError as exc:
            raise ModelFileError(f"{exc} (sensor {name!r})") from None
    return tuple(out)


def parse_signals(raw, f) -> tuple[list, list, list]:
    """``[[sensors]]``, ``[[forces]]``, ``[[outputs]]``; names unique across all three."""
    sensors, forces, outputs = [], [], []
    signal_names = {}
    for key, sec in (("sensors", SENSORS), ("forces", FORCES), ("outputs", OUTPUTS)):
        for e, w in entries(raw, key, f):
            t = Table(e, w, sec)
            if key == "outputs" and isinstance(e, dict) and e.get("kind") in FIELD_KINDS:
                fo = _field_output(t, w, e["kind"])
                name = fo.name
            elif key == "sensors" and isinstance(e, dict) and e.get("kind") in FIELD_KINDS:
                if e["kind"] != "strain":
                    raise ModelFileError(f"{w}.kind: {e['kind']!r} is an output kind; a "
                                         "measured gauge is kind = \"strain\"")
                fo = _field_output(t, w, "strain", sensor=True)
                name = fo.name
            else:
                fo = None
                name, sel, dof, kind, unit = _signal_common(t, w, key != "forces")
            if name in signal_names:
                raise ModelFileError(f"{w}.name: {name!r} already used by {signal_names[name]} "
                                     f"(sensor, force and output names share the CSV header)")
            if name in RESERVED_NAMES or name.endswith("_std"):
                raise ModelFileError(f"{w}.name: {name!r} is reserved: the CSV files have the "
                                     f"columns {', '.join(RESERVED_NAMES)} and <name>_std")
            signal_names[name] = w
            if isinstance(fo, FieldSensor):
                sensors.append(fo)
            elif fo is not None:
                outputs.append(fo)
            elif key == "sensors":
                noise, noise_abs = t.get("noise"), t.get("noise_std")
                dyn = _sensor_dynamics(t, w, name)
                t.done()
                sensors.append(Sensor(name, sel, dof, kind, unit, w, noise, noise_abs, *dyn))
            elif key == "forces":
                scale, fmod = t.get("scale"), t.get("model")
                t.done()
                if fmod is not None:
                    fmod = parse_force_model(fmod, f"{w}.model")
                forces.append(Force(name, sel, dof, w, scale, fmod))
            else:
                t.done()
                outputs.append(Output(name, sel, dof, kind, unit, w))

    return sensors, forces, outputs


def _load_entry(lt: Table, lw: str, forces: list, estimator: EstimatorSpec | None) -> LoadSpec:
    """One calibration load table (random: band, rms; sine: freq, amplitude; chirp)."""
    typ = lt.get("type")
    band = rms = freq = amp = None
    if typ in ("random", "chirp"):
        b = lt.get("band")
        if len(b) != 2:
            raise ModelFileError(f"{lw}.band: expected [f_low, f_high] in Hz")
        band = tuple(check(x, f"{lw}.band[{i}]", lo=0.0) for i, x in enumerate(b))
        if not band[0] < band[1]:
            raise ModelFileError(f"{lw}.band: f_low must be below f_high")
    if typ == "random":
        rms = lt.get("rms")
    else:
        amp = lt.get("amplitude")
    if typ == "sine":
        freq = lt.get("freq")
    force = lt.get("force")
    lt.done()
    if force is not None and force not in {fo.name for fo in forces}:
        raise ModelFileError(f"{lw}.force: no [[forces]] entry named {force!r}")
    if estimator is not None:
        nyq = estimator.rate / 2
        top = band[1] if band else freq
        if top > nyq:
            raise ModelFileError(f"{lw}: {top:g} Hz is above the Nyquist frequency "
                                 f"{nyq:g} Hz of [estimator].rate")
    return LoadSpec(typ, band, rms, freq, amp, force)


def parse_calibration(raw, f, forces: list, estimator: EstimatorSpec | None,
                      name: str = "design_load") -> Calibration | None:
    """``[design_load]``: duration, seeds, warm-up and one load per force or one for all;
    ``name``: the table's name in errors (``calibration``, its former name, when the file
    uses that)."""
    if "design_load" not in raw:
        return None
    w = f"{f}: [{name}]"
    t = Table(raw["design_load"], w, CALIBRATION)
    duration, seed, seeds = t.get("duration"), t.get("seed"), t.get("seeds")
    warmup, raw_load = t.get("warmup"), t.get("load")
    t.done()
    entries = raw_load if isinstance(raw_load, list) else [raw_load]
    if not entries:
        raise ModelFileError(f"{w}.load: empty array (give a table or tables)")
    loads = []
    for i, e in enumerate(entries):
        lw = f"{w}.load" + (f"[{i}]" if isinstance(raw_load, list) else "")
        loads.append(_load_entry(Table(e, lw, LOAD), lw, forces, estimator))
    targets = [ld.force for ld in loads]
    if len(set(targets)) != len(targets):
        raise ModelFileError(f"{w}.load: two entries drive the same force "
                             f"({'all forces' if None in targets else targets})")
    return Calibration(loads[0], duration, seed, tuple(loads), seeds, warmup)


def parse_force_model(d: dict, where: str) -> dict:
    """Validate a ``[[forces]] model = {kind, band, rms, order}`` table (errors name the key)."""
    t = Table(d, where, FORCE_MODEL)
    kind = t.get("kind")
    band = t.get("band")
    if band is not None:
        if len(band) != 2:
            raise ModelFileError(f"{where}.band: expected [f_low, f_high] in Hz")
        band = tuple(check(x, f"{where}.band[{i}]", lo=0.0, lo_open=True)
                     for i, x in enumerate(band))
        if not band[0] < band[1]:
            raise ModelFileError(f"{where}.band: f_low must be below f_high")
    rms = t.get("rms")
    # None: not given (the build chooses the order; a given order is always kept)
    order = t.get("order")
    t.done()
    return {"kind": kind, "band": band, "rms": rms, "order": order}
