"""Model-file specification: plain dataclasses and their validation from a parsed TOML dict.

Every error is a :class:`ModelFileError` whose message starts with the file name and the key
path, e.g. ``cantilever.toml: [[boundary]][1].select.box: expected two points``. List entries
(``[[boundary]]`` etc.) are numbered from 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from edge import DOF_NAMES

#: Model types and the section that describes their mesh.
MODEL_TYPES = ("beam", "plate", "solid", "matrices")
#: Top-level sections owned by other parts, accepted without validation (kept in ``spec.raw``).
PASSTHROUGH = ("parameters", "experiment", "inverse", "bayes", "damage")
TOP_KEYS = {"name", "type", "description", "materials", "boundary", "spring", "mass", "damping",
            "reduction", "estimator", "sensors", "forces", "outputs", "calibration",
            *MODEL_TYPES, *PASSTHROUGH}
SIGNAL_KINDS = ("displacement", "velocity", "acceleration")
REDUCTION_METHODS = ("gmr+", "cb", "guyan")
ALPHA_RULES = ("auto", "lcurve", "gcv", "discrepancy")
LOAD_TYPES = ("random", "sine", "chirp")
_REQ = object()


class ModelFileError(ValueError):
    """Invalid model file; the message names the file and the key path."""


# --------------------------------------------------------------------- table reader
class Table:
    """A TOML table being validated: typed reads with defaults/limits and unknown-key checks.

    Parameters
    ----------
    d : object
        The parsed value (must be a dict).
    where : str
        Key path of ``d`` including the file name, e.g. ``"x.toml: [plate]"``.
    """

    def __init__(self, d, where: str):
        if not isinstance(d, dict):
            raise ModelFileError(f"{where}: expected a table, got {_tname(d)}")
        self.d, self.where, self.seen = d, where, set()

    def key(self, k: str) -> str:
        return f"{self.where}.{k}"

    def has(self, k: str) -> bool:
        return k in self.d

    def get(self, k, kind="num", default=_REQ, lo=None, hi=None, lo_open=False, hi_open=False,
            choices=None):
        """Read key ``k`` of ``kind`` (num, int, str, bool, list, table, any)."""
        self.seen.add(k)
        if k not in self.d:
            if default is _REQ:
                raise ModelFileError(f"{self.key(k)}: missing")
            return default
        return check(self.d[k], self.key(k), kind, lo, hi, lo_open, hi_open, choices)

    def done(self):
        """Raise on keys that were never read (typos must not pass silently)."""
        extra = sorted(set(self.d) - self.seen)
        if extra:
            raise ModelFileError(f"{self.key(extra[0])}: unknown key (allowed here: "
                                 f"{', '.join(sorted(self.seen)) or 'none'})")


def _tname(v) -> str:
    return {dict: "a table", list: "an array", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(v), type(v).__name__)


def check(v, where, kind="num", lo=None, hi=None, lo_open=False, hi_open=False, choices=None):
    """Validate one value; returns it converted (num -> float)."""
    if kind == "num":
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ModelFileError(f"{where}: expected a number, got {_tname(v)} {v!r}")
        v = float(v)
        if not math.isfinite(v):
            raise ModelFileError(f"{where}: expected a finite number, got {v!r}")
    elif kind == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            raise ModelFileError(f"{where}: expected an integer, got {_tname(v)} {v!r}")
    elif kind == "str":
        if not isinstance(v, str):
            raise ModelFileError(f"{where}: expected a string, got {_tname(v)} {v!r}")
    elif kind == "bool":
        if not isinstance(v, bool):
            raise ModelFileError(f"{where}: expected true or false, got {_tname(v)} {v!r}")
    elif kind == "list":
        if not isinstance(v, list):
            raise ModelFileError(f"{where}: expected an array, got {_tname(v)}")
    elif kind == "table":
        if not isinstance(v, dict):
            raise ModelFileError(f"{where}: expected a table, got {_tname(v)}")
    if choices is not None and v not in choices:
        raise ModelFileError(f"{where}: expected one of {', '.join(map(repr, choices))}, got {v!r}")
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise ModelFileError(f"{where}: {v!r} is out of range (must be {'>' if lo_open else '>='} {lo:g})")
    if hi is not None and (v >= hi if hi_open else v > hi):
        raise ModelFileError(f"{where}: {v!r} is out of range (must be {'<' if hi_open else '<='} {hi:g})")
    return v


def _point(v, where):
    if not (isinstance(v, list) and len(v) == 3):
        raise ModelFileError(f"{where}: expected a point [x, y, z]")
    return tuple(check(c, f"{where}[{i}]") for i, c in enumerate(v))


def _dof(v, where):
    check(v, where, "str")
    if v not in DOF_NAMES:
        raise ModelFileError(f"{where}: unknown DOF {v!r} (expected one of {', '.join(DOF_NAMES)})")
    return v


def _dofs(v, where):
    check(v, where, "list")
    if not v:
        raise ModelFileError(f"{where}: empty DOF list")
    out = tuple(_dof(x, f"{where}[{i}]") for i, x in enumerate(v))
    if len(set(out)) != len(out):
        raise ModelFileError(f"{where}: repeated DOF")
    return out


def _entries(raw, key, where_file):
    v = raw.get(key, [])
    if not isinstance(v, list) or not all(isinstance(e, dict) for e in v):
        raise ModelFileError(f"{where_file}: [[{key}]]: expected an array of tables ([[{key}]])")
    return [(e, f"{where_file}: [[{key}]][{i}]") for i, e in enumerate(v)]


# ---------------------------------------------------------------------- dataclasses
@dataclass(frozen=True)
class Material:
    """Linear elastic isotropic material: E [Pa], nu [-], rho [kg/m^3]."""

    name: str
    E: float
    nu: float
    rho: float


@dataclass(frozen=True)
class Selection:
    """A node selection: ``kind`` in nodes|box|group|at; resolved against a model later.

    ``value``: tuple of ids (nodes), ((x0,y0,z0),(x1,y1,z1)) (box), str (group), (x,y,z) (at).
    ``tol`` [m]: distance tolerance of ``at`` and ``box`` (None: 1e-6 of the model size).
    ``where``: key path for error messages.
    """

    kind: str
    value: object
    tol: float | None = None
    where: str = ""


@dataclass(frozen=True)
class Boundary:
    select: Selection
    dofs: tuple | None  # None: every DOF the model carries
    where: str = ""


@dataclass(frozen=True)
class Spring:
    """Grounded spring ``k`` [N/m or N m/rad] on ``dof``, split equally over selected nodes."""

    select: Selection
    dof: str
    k: float
    name: str | None = None
    where: str = ""


@dataclass(frozen=True)
class PointMass:
    """Lumped mass ``m`` [kg] on the translations, split equally over selected nodes."""

    select: Selection
    m: float
    name: str | None = None
    where: str = ""


@dataclass(frozen=True)
class Damping:
    """Rayleigh damping, given directly ``(a [1/s], b [s])`` or as two ``(f [Hz], zeta)``."""

    rayleigh: tuple | None = None
    ratios: tuple | None = None

    def coefficients(self) -> tuple[float, float]:
        """``(a, b)`` of ``C = a M + b K``.

        From two ratios, ``zeta_i = a / (2 w_i) + b w_i / 2``, ``w_i = 2 pi f_i``, i = 1, 2.
        """
        if self.rayleigh is not None:
            return self.rayleigh
        (f1, z1), (f2, z2) = self.ratios
        w1, w2 = 2 * math.pi * f1, 2 * math.pi * f2
        # [1/(2 w1), w1/2; 1/(2 w2), w2/2] [a; b] = [z1; z2]
        det = w2 / (4 * w1) - w1 / (4 * w2)
        a = (z1 * w2 / 2 - z2 * w1 / 2) / det
        b = (z2 / (2 * w1) - z1 / (2 * w2)) / det
        return a, b


@dataclass(frozen=True)
class Masters:
    select: Selection
    dofs: tuple
    where: str = ""


@dataclass(frozen=True)
class ReductionSpec:
    method: str = "gmr+"
    modes: int = 50
    masters: tuple = ()
    n_report: int = 30


@dataclass(frozen=True)
class EstimatorSpec:
    """Newmark-beta estimator settings: rate [Hz], beta, gamma, alpha (float or rule), window."""

    rate: float = 1000.0
    beta: float = 0.25
    gamma: float = 0.5
    alpha: float | str = "auto"
    window: int | str = "auto"
    discretization: str = "newmark"
    regularization: str = "tikhonov0"
    max_delay: float = 0.02  # [s] bound on the delay of the automatic choice
    method: str = "tikhonov"          # or "smoother" (offline/smoother.py)
    lag: int | None = None            # smoother lag [samples]; None: 20 ms
    model_error: float = 0.0          # smoother process noise for model error
    check_window_s: float = 8.0       # model check window [s]
    check_false_alarm: float = 0.01   # model check false-alarm probability per window


@dataclass(frozen=True)
class Sensor:
    """Measured channel; ``noise`` is the relative std of the signal (paper eq. 28)."""

    name: str
    select: Selection
    dof: str
    kind: str = "displacement"
    unit: str = "m"
    noise: float = 0.0
    where: str = ""


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
    name: str
    select: Selection
    dof: str
    kind: str = "displacement"
    unit: str = "m"
    where: str = ""


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


@dataclass
class ModelSpec:
    """A validated model file.

    ``raw`` is the whole parsed TOML dict (sections of other parts such as ``[[parameters]]``,
    ``[experiment]``, ``[inverse]`` are only available there); ``section`` is the table of the
    model type (``[plate]`` etc.), handed unparsed to the element builder.
    """

    path: Path
    raw: dict
    name: str
    type: str
    materials: dict
    section: dict
    boundary: list = field(default_factory=list)
    springs: list = field(default_factory=list)
    masses: list = field(default_factory=list)
    damping: Damping | None = None
    reduction: ReductionSpec | None = None
    estimator: EstimatorSpec | None = None
    sensors: list = field(default_factory=list)
    forces: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    calibration: Calibration | None = None

    @property
    def base_dir(self) -> Path:
        return Path(self.path).parent

    def where(self, key: str) -> str:
        """Key path with the file name, e.g. ``spec.where("[plate]")``."""
        return f"{Path(self.path).name}: {key}"


# --------------------------------------------------------------------------- parsing
def parse_selection(v, where) -> Selection:
    """``{nodes=[ids]}``, ``{box=[[x0,y0,z0],[x1,y1,z1]], tol=..}``, ``{group="x0"}``,
    ``{at=[x,y,z], tol=..}``."""
    t = Table(v, where)
    forms = [k for k in ("nodes", "box", "group", "at") if k in v]
    if len(forms) != 1:
        raise ModelFileError(f"{where}: give exactly one of nodes, box, group, at")
    kind = forms[0]
    tol = None
    if kind == "nodes":
        ids = t.get("nodes", "list")
        if not ids:
            raise ModelFileError(f"{where}.nodes: empty list")
        value = tuple(check(n, f"{where}.nodes[{i}]", "int") for i, n in enumerate(ids))
    elif kind == "box":
        b = t.get("box", "list")
        if len(b) != 2:
            raise ModelFileError(f"{where}.box: expected two points [[x0,y0,z0],[x1,y1,z1]]")
        p0, p1 = _point(b[0], f"{where}.box[0]"), _point(b[1], f"{where}.box[1]")
        if any(a > c for a, c in zip(p0, p1)):
            raise ModelFileError(f"{where}.box: first point must be the lower corner")
        value = (p0, p1)
        tol = t.get("tol", "num", None, lo=0.0)
    elif kind == "group":
        value = t.get("group", "str")
    else:
        value = _point(t.get("at", "list"), f"{where}.at")
        tol = t.get("tol", "num", None, lo=0.0, lo_open=True)
    t.done()
    return Selection(kind, value, tol, where)


def _materials(raw, f):
    mats = {}
    mt = raw.get("materials", {})
    if not isinstance(mt, dict):
        raise ModelFileError(f"{f}: [materials]: expected a table of [materials.<name>]")
    for name, d in mt.items():
        t = Table(d, f"{f}: [materials.{name}]")
        E = t.get("E", lo=0.0, lo_open=True)
        nu = t.get("nu", lo=-1.0, hi=0.5, lo_open=True, hi_open=True)
        rho = t.get("rho", lo=0.0, lo_open=True)
        t.done()
        mats[name] = Material(name, E, nu, rho)
    return mats


def _signal_common(t, where, with_kind):
    name = t.get("name", "str")
    if not name.strip():
        raise ModelFileError(f"{where}.name: empty name")
    select = parse_selection(t.get("select", "table"), f"{where}.select")
    dof = _dof(t.get("dof", "str"), f"{where}.dof")
    if not with_kind:
        return name, select, dof, None, None
    kind = t.get("kind", "str", "displacement", choices=SIGNAL_KINDS)
    rot = dof in ("rx", "ry", "rz")
    base = "rad" if rot else "m"
    dflt = {"displacement": base, "velocity": f"{base}/s", "acceleration": f"{base}/s^2"}[kind]
    unit = t.get("unit", "str", dflt)
    return name, select, dof, kind, unit


def _load_entry(lt: Table, lw: str, spec: ModelSpec) -> LoadSpec:
    """One calibration load table (random: band, rms; sine: freq, amplitude; chirp)."""
    typ = lt.get("type", "str", "random", choices=LOAD_TYPES)
    band = rms = freq = amp = None
    if typ in ("random", "chirp"):
        b = lt.get("band", "list")
        if len(b) != 2:
            raise ModelFileError(f"{lw}.band: expected [f_low, f_high] in Hz")
        band = tuple(check(x, f"{lw}.band[{i}]", lo=0.0) for i, x in enumerate(b))
        if not band[0] < band[1]:
            raise ModelFileError(f"{lw}.band: f_low must be below f_high")
    if typ == "random":
        rms = lt.get("rms", "num", lo=0.0, lo_open=True)
    else:
        amp = lt.get("amplitude", "num", lo=0.0, lo_open=True)
    if typ == "sine":
        freq = lt.get("freq", "num", lo=0.0, lo_open=True)
    force = lt.get("force", "str", None)
    lt.done()
    if force is not None and force not in {fo.name for fo in spec.forces}:
        raise ModelFileError(f"{lw}.force: no [[forces]] entry named {force!r}")
    if spec.estimator is not None:
        nyq = spec.estimator.rate / 2
        top = band[1] if band else freq
        if top > nyq:
            raise ModelFileError(f"{lw}: {top:g} Hz is above the Nyquist frequency "
                                 f"{nyq:g} Hz of [estimator].rate")
    return LoadSpec(typ, band, rms, freq, amp, force)


def spec_from_dict(raw: dict, path) -> ModelSpec:
    """Validate a parsed model file (e.g. an edited copy of ``spec.raw``) into a ModelSpec.

    Parameters
    ----------
    raw : dict
        Parsed TOML (as from :func:`tomllib.load`).
    path : str or Path
        The file it came from (for error messages and relative paths); need not exist.
    """
    path = Path(path)
    f = path.name
    if not isinstance(raw, dict):
        raise ModelFileError(f"{f}: expected a TOML document (table)")
    extra = sorted(set(raw) - TOP_KEYS)
    if extra:
        raise ModelFileError(f"{f}: {extra[0]}: unknown top-level key (allowed: "
                             f"{', '.join(sorted(TOP_KEYS))})")
    name = check(raw.get("name", path.stem), f"{f}: name", "str")
    if "description" in raw:
        check(raw["description"], f"{f}: description", "str")
    if "type" not in raw:
        raise ModelFileError(f"{f}: type: missing (one of {', '.join(MODEL_TYPES)})")
    mtype = check(raw["type"], f"{f}: type", "str", choices=MODEL_TYPES)
    for other in MODEL_TYPES:
        if other != mtype and other in raw:
            raise ModelFileError(f"{f}: [{other}]: section does not match type = {mtype!r}")
    if mtype not in raw:
        raise ModelFileError(f"{f}: [{mtype}]: missing (required by type = {mtype!r})")
    section = check(raw[mtype], f"{f}: [{mtype}]", "table")
    materials = _materials(raw, f)

    spec = ModelSpec(path=path, raw=raw, name=name, type=mtype, materials=materials,
                     section=section)

    for e, w in _entries(raw, "boundary", f):
        t = Table(e, w)
        sel = parse_selection(t.get("select", "table"), f"{w}.select")
        dofs = _dofs(t.get("dofs", "list"), f"{w}.dofs") if t.has("dofs") else None
        t.done()
        spec.boundary.append(Boundary(sel, dofs, w))
    names = {}

    def unique(n, w, kind):
        if n is None:
            return
        if (kind, n) in names:
            raise ModelFileError(f"{w}.name: {n!r} already used by {names[(kind, n)]}")
        names[(kind, n)] = w

    for e, w in _entries(raw, "spring", f):
        t = Table(e, w)
        sel = parse_selection(t.get("select", "table"), f"{w}.select")
        dof = _dof(t.get("dof", "str"), f"{w}.dof")
        k = t.get("k", lo=0.0)
        n = t.get("name", "str", None)
        unique(n, w, "spring")
        t.done()
        spec.springs.append(Spring(sel, dof, k, n, w))
    for e, w in _entries(raw, "mass", f):
        t = Table(e, w)
        sel = parse_selection(t.get("select", "table"), f"{w}.select")
        m = t.get("m", lo=0.0)
        n = t.get("name", "str", None)
        unique(n, w, "mass")
        t.done()
        spec.masses.append(PointMass(sel, m, n, w))

    if "damping" in raw:
        w = f"{f}: [damping]"
        t = Table(raw["damping"], w)
        if t.has("rayleigh") == t.has("ratios"):
            raise ModelFileError(f"{w}: give exactly one of rayleigh = [a, b] or ratios = [[f1, z1], [f2, z2]]")
        if t.has("rayleigh"):
            r = t.get("rayleigh", "list")
            if len(r) != 2:
                raise ModelFileError(f"{w}.rayleigh: expected [a, b]")
            ab = tuple(check(x, f"{w}.rayleigh[{i}]", lo=0.0) for i, x in enumerate(r))
            spec.damping = Damping(rayleigh=ab)
        else:
            r = t.get("ratios", "list")
            if len(r) != 2:
                raise ModelFileError(f"{w}.ratios: expected two pairs [[f1, zeta1], [f2, zeta2]]")
            pairs = []
            for i, p in enumerate(r):
                if not (isinstance(p, list) and len(p) == 2):
                    raise ModelFileError(f"{w}.ratios[{i}]: expected [f_Hz, zeta]")
                pairs.append((check(p[0], f"{w}.ratios[{i}][0]", lo=0.0, lo_open=True),
                              check(p[1], f"{w}.ratios[{i}][1]", lo=0.0, hi=1.0, hi_open=True)))
            if pairs[0][0] == pairs[1][0]:
                raise ModelFileError(f"{w}.ratios: the two frequencies must differ")
            spec.damping = Damping(ratios=tuple(pairs))
        t.done()
        a, b = spec.damping.coefficients()
        if a < 0 or b < 0:
            raise ModelFileError(f"{w}.ratios: give negative Rayleigh coefficients a={a:.4g}, "
                                 f"b={b:.4g} (zeta would be negative between the frequencies)")

    if "reduction" in raw:
        w = f"{f}: [reduction]"
        t = Table(raw["reduction"], w)
        method = t.get("method", "str", "gmr+", choices=REDUCTION_METHODS)
        modes = t.get("modes", "int", 0 if method == "guyan" else 50, lo=0)
        n_report = t.get("n_report", "int", 30, lo=1)
        mlist = t.get("masters", "list", [])
        t.done()
        masters = []
        for i, e in enumerate(mlist):
            mw = f"{f}: [[reduction.masters]][{i}]"
            mt = Table(e, mw)
            sel = parse_selection(mt.get("select", "table"), f"{mw}.select")
            dofs = _dofs(mt.get("dofs", "list"), f"{mw}.dofs")
            mt.done()
            masters.append(Masters(sel, dofs, mw))
        if not masters:
            raise ModelFileError(f"{w}.masters: at least one [[reduction.masters]] entry is needed")
        if method == "guyan" and modes:
            raise ModelFileError(f"{w}.modes: guyan reduction keeps no modes (got {modes})")
        spec.reduction = ReductionSpec(method, modes, tuple(masters), n_report)

    if "estimator" in raw:
        w = f"{f}: [estimator]"
        t = Table(raw["estimator"], w)
        rate = t.get("rate", lo=0.0, lo_open=True)
        beta = t.get("beta", "num", 0.25, lo=0.0, hi=0.5, lo_open=True)
        gamma = t.get("gamma", "num", 0.5, lo=0.5, hi=1.0)
        alpha = t.get("alpha", "any", "auto")
        if isinstance(alpha, str):
            check(alpha, f"{w}.alpha", "str", choices=ALPHA_RULES)
        else:
            alpha = check(alpha, f"{w}.alpha", "num", lo=0.0)
        window = t.get("window", "any", "auto")
        if isinstance(window, str):
            check(window, f"{w}.window", "str", choices=("auto",))
        else:
            window = check(window, f"{w}.window", "int", lo=1, hi=200)
        disc = t.get("discretization", "str", "newmark", choices=("newmark", "foh"))
        reg = t.get("regularization", "str", "tikhonov0", choices=("tikhonov0", "tikhonov1"))
        max_delay = t.get("max_delay", "num", 0.02, lo=0.0)
        meth = t.get("method", "str", "tikhonov", choices=("tikhonov", "smoother"))
        lag = t.get("lag", "int", None, lo=0, hi=511)  # window = lag + 1 <= MAX_WINDOW
        merr = t.get("model_error", "num", 0.0, lo=0.0)
        cws = t.get("check_window_s", "num", 8.0, lo=0.0, lo_open=True)
        cfa = t.get("check_false_alarm", "num", 0.01, lo=0.0, hi=0.5, lo_open=True)
        t.done()
        spec.estimator = EstimatorSpec(rate, beta, gamma, alpha, window, disc, reg, max_delay,
                                       meth, lag, merr, cws, cfa)

    signal_names = {}
    for key, cls in (("sensors", Sensor), ("forces", Force), ("outputs", Output)):
        for e, w in _entries(raw, key, f):
            t = Table(e, w)
            name, sel, dof, kind, unit = _signal_common(t, w, key != "forces")
            if name in signal_names:
                raise ModelFileError(f"{w}.name: {name!r} already used by {signal_names[name]} "
                                     f"(sensor, force and output names share the CSV header)")
            signal_names[name] = w
            if key == "sensors":
                noise = t.get("noise", "num", 0.0, lo=0.0)
                t.done()
                spec.sensors.append(Sensor(name, sel, dof, kind, unit, noise, w))
            elif key == "forces":
                scale = t.get("scale", "num", 1.0, lo=0.0, lo_open=True)
                fmod = t.get("model", "table", None)
                t.done()
                if fmod is not None:
                    from offline.smoother import parse_force_model

                    fmod = parse_force_model(fmod, f"{w}.model")
                spec.forces.append(Force(name, sel, dof, w, scale, fmod))
            else:
                t.done()
                spec.outputs.append(Output(name, sel, dof, kind, unit, w))

    if "calibration" in raw:
        w = f"{f}: [calibration]"
        t = Table(raw["calibration"], w)
        duration = t.get("duration", "num", 2.0, lo=0.0, lo_open=True)
        seed = t.get("seed", "int", 0, lo=0)
        seeds = t.get("seeds", "int", 3, lo=1, hi=20)
        warmup = t.get("warmup", "num", 1.0, lo=0.0)
        raw_load = t.get("load", "any")
        t.done()
        entries = raw_load if isinstance(raw_load, list) else [raw_load]
        if not entries:
            raise ModelFileError(f"{w}.load: empty array (give a table or tables)")
        loads = []
        for i, e in enumerate(entries):
            lw = f"{w}.load" + (f"[{i}]" if isinstance(raw_load, list) else "")
            loads.append(_load_entry(Table(e, lw), lw, spec))
        targets = [ld.force for ld in loads]
        if len(set(targets)) != len(targets):
            raise ModelFileError(f"{w}.load: two entries drive the same force "
                                 f"({'all forces' if None in targets else targets})")
        spec.calibration = Calibration(loads[0], duration, seed, tuple(loads), seeds, warmup)

    # [[parameters]], [experiment], [inverse]: accepted as they are, available in spec.raw
    return spec
