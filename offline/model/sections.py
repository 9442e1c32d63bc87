"""Model-file sections of the model itself: materials, boundaries, springs, masses, damping,
reduction and estimator settings (one parse function per section, on :class:`Table`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from edge.acquisition import Chain
from edge.hw.ads1256_filter import num_ave
from edge.hw.ads1256_spec import row_rates
from edge.kinds import DEFAULT_REDUCTION_METHOD, DEFAULT_REDUCTION_MODES, REDUCTION_METHODS  # noqa: F401
from offline.chain import plan_chain, row_offsets
from offline.model.schema_model import (ACQUISITION, ALPHA_RULES, BOUNDARY,  # noqa: F401
                                        DAMPING, ESTIMATOR, ESTIMATOR_CHOICES, MASS, MASTERS,
                                        MATERIAL, REDUCTION, SPRING)
from offline.model.selection import Selection, parse_selection
from offline.model.table import ModelFileError, Table, check, dof_name, dof_names, entries

@dataclass(frozen=True)
class Material:
    """Linear elastic isotropic material: E [Pa], nu [-], rho [kg/m^3]."""

    name: str
    E: float
    nu: float
    rho: float


@dataclass(frozen=True)
class Boundary:
    select: Selection
    dofs: tuple | None  # None: every DOF the model carries
    where: str = ""


@dataclass(frozen=True)
class Spring:
    """Grounded spring ``k`` [N/m or N m/rad] on ``dof``, split equally over selected nodes
    (parallel springs summing to ``k``); ``name`` lets a parameter address it."""

    select: Selection
    dof: str
    k: float
    name: str | None = None
    where: str = ""


@dataclass(frozen=True)
class PointMass:
    """Lumped mass ``m`` [kg] on every translation the model carries, split equally over the
    selected nodes."""

    select: Selection
    m: float  # total [kg]
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
    method: str = DEFAULT_REDUCTION_METHOD
    modes: int = DEFAULT_REDUCTION_MODES
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
    method: str = "auto"              # or "tikhonov", "smoother" (ESTIMATOR_CHOICES)
    lag: int | None = None            # smoother lag [samples]; None: window - 1 or max_delay
    model_error: float | None = None  # smoother model-error noise; None: 0 or 0.1, scored
    check_window_s: float = 8.0       # model check window [s]
    check_false_alarm: float = 0.01   # model check false-alarm probability per window


# --------------------------------------------------------------------------- parsing
def parse_materials(raw, f) -> dict:
    """``[materials.<name>]`` -> {name: Material}."""
    mats = {}
    mt = raw.get("materials", {})
    if not isinstance(mt, dict):
        raise ModelFileError(f"{f}: [materials]: expected a table of [materials.<name>]")
    for name, d in mt.items():
        t = Table(d, f"{f}: [materials.{name}]", MATERIAL)
        E, nu, rho = t.get("E"), t.get("nu"), t.get("rho")
        t.done()
        mats[name] = Material(name, E, nu, rho)
    return mats


def parse_boundary(raw, f) -> list:
    """``[[boundary]]`` -> [Boundary]."""
    out = []
    for e, w in entries(raw, "boundary", f):
        t = Table(e, w, BOUNDARY)
        sel = parse_selection(t.get("select"), f"{w}.select")
        dofs = dof_names(t.get("dofs"), f"{w}.dofs") if t.has("dofs") else None
        t.done()
        out.append(Boundary(sel, dofs, w))
    return out


def parse_springs_masses(raw, f) -> tuple[list, list]:
    """``[[spring]]``, ``[[mass]]`` -> ([Spring], [PointMass]); names unique per kind."""
    springs, masses = [], []
    names = {}

    def unique(n, w, kind):
        if n is None:
            return
        if (kind, n) in names:
            raise ModelFileError(f"{w}.name: {n!r} already used by {names[(kind, n)]}")
        names[(kind, n)] = w

    for e, w in entries(raw, "spring", f):
        t = Table(e, w, SPRING)
        sel = parse_selection(t.get("select"), f"{w}.select")
        dof = dof_name(t.get("dof"), f"{w}.dof")
        k = t.get("k")
        n = t.get("name")
        unique(n, w, "spring")
        t.done()
        springs.append(Spring(sel, dof, k, n, w))
    for e, w in entries(raw, "mass", f):
        t = Table(e, w, MASS)
        sel = parse_selection(t.get("select"), f"{w}.select")
        m = t.get("m")
        n = t.get("name")
        unique(n, w, "mass")
        t.done()
        masses.append(PointMass(sel, m, n, w))
    return springs, masses


def parse_damping(raw, f) -> Damping | None:
    """``[damping]``: Rayleigh coefficients or two modal ratios."""
    if "damping" not in raw:
        return None
    w = f"{f}: [damping]"
    t = Table(raw["damping"], w, DAMPING)
    if t.has("rayleigh") == t.has("ratios"):
        raise ModelFileError(f"{w}: give exactly one of rayleigh = [a, b] or "
                             "ratios = [[f1, z1], [f2, z2]]")
    if t.has("rayleigh"):
        r = t.get("rayleigh")
        if len(r) != 2:
            raise ModelFileError(f"{w}.rayleigh: expected [a, b]")
        ab = tuple(check(x, f"{w}.rayleigh[{i}]", lo=0.0) for i, x in enumerate(r))
        damping = Damping(rayleigh=ab)
    else:
        r = t.get("ratios")
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
        damping = Damping(ratios=tuple(pairs))
    t.done()
    a, b = damping.coefficients()
    if a < 0 or b < 0:
        raise ModelFileError(f"{w}.ratios: give negative Rayleigh coefficients a={a:.4g}, "
                             f"b={b:.4g} (zeta would be negative between the frequencies)")
    return damping


def parse_reduction(raw, f) -> ReductionSpec | None:
    """``[reduction]`` and its ``[[reduction.masters]]``."""
    if "reduction" not in raw:
        return None
    w = f"{f}: [reduction]"
    t = Table(raw["reduction"], w, REDUCTION)
    method = t.get("method")
    modes = t.get("modes", default=0 if method == "guyan" else DEFAULT_REDUCTION_MODES)
    n_report = t.get("n_report")
    mlist = t.get("masters")
    t.done()
    masters = []
    for i, e in enumerate(mlist):
        mw = f"{f}: [[reduction.masters]][{i}]"
        mt = Table(e, mw, MASTERS)
        sel = parse_selection(mt.get("select"), f"{mw}.select")
        dofs = dof_names(mt.get("dofs"), f"{mw}.dofs")
        mt.done()
        masters.append(Masters(sel, dofs, mw))
    if not masters:
        raise ModelFileError(f"{w}.masters: at least one [[reduction.masters]] entry is needed")
    if method == "guyan" and modes:
        raise ModelFileError(f"{w}.modes: guyan reduction keeps no modes (got {modes})")
    return ReductionSpec(method, modes, tuple(masters), n_report)


def parse_estimator(raw, f) -> EstimatorSpec | None:
    """``[estimator]``: rate, Newmark parameters, alpha/window rules, smoother settings."""
    if "estimator" not in raw:
        return None
    w = f"{f}: [estimator]"
    t = Table(raw["estimator"], w, ESTIMATOR)
    rate, beta, gamma = t.get("rate"), t.get("beta"), t.get("gamma")
    alpha = t.get("alpha")
    if isinstance(alpha, str):
        check(alpha, f"{w}.alpha", "str", choices=ALPHA_RULES)
    else:
        alpha = check(alpha, f"{w}.alpha", "num", lo=0.0)
    window = t.get("window")
    if isinstance(window, str):
        check(window, f"{w}.window", "str", choices=("auto",))
    else:
        k = ESTIMATOR.key("window")
        window = check(window, f"{w}.window", "int", lo=k.lo, hi=k.hi)
    disc, reg = t.get("discretization"), t.get("regularization")
    max_delay, meth = t.get("max_delay"), t.get("method")
    lag = t.get("lag")  # window = lag + 1 <= MAX_WINDOW
    merr = t.get("model_error")
    cws, cfa = t.get("check_window_s"), t.get("check_false_alarm")
    t.done()
    return EstimatorSpec(rate, beta, gamma, alpha, window, disc, reg, max_delay, meth, lag, merr,
                         cws, cfa)


@dataclass(frozen=True)
class AcquisitionSpec:
    """``[acquisition]``: what one sample of a channel is (:mod:`edge.acquisition`): the
    converter, its data rate [SPS] (None: the estimator's rate), its mode and each channel's
    conversion window end before the row's time stamp [s] (``()``: all 0); a ``daq``'s FIR
    cut-off [Hz] and group delay [s]."""

    converter: str = "ideal"
    drate: float | None = None
    mode: str = "continuous"
    offsets: tuple = ()
    cutoff: float = 0.0
    group_delay: float = 0.0

    def chain(self, rate: float):
        """The :class:`edge.acquisition.Chain` at the estimator's ``rate`` [Hz]."""
        if self.converter == "ideal":
            return Chain()
        drate = float(rate) if self.drate is None else float(self.drate)
        return Chain(self.converter, drate, self.mode, self.offsets, self.cutoff,
                     self.group_delay)


def default_chain(rate: float, n_sensors: int):
    """The chain of a model file without ``[acquisition]``: the ADS1256 that the edge reads,
    converting as ``vsense-offline simulate`` does by default
    (:func:`offline.chain.plan_chain`: one sensor in continuous mode, several by multiplexer
    cycling, at the data rate that gives ``rate`` rows/s); ``ideal`` point samples when no
    ADS1256 data rate gives that row rate (such a bundle cannot run on the chip anyway)."""
    try:
        ch = plan_chain("ads1256", rate, n_sensors)
    except ValueError:
        return Chain()
    return Chain("ads1256", float(ch.drate), ch.mode, tuple(float(-o) for o in ch.offsets))


def point_sample_warning(spec) -> str | None:
    """The warning of a model file without ``[acquisition]`` whose rate no ADS1256 data rate
    gives for its sensors (:func:`default_chain` then falls back to point samples): the
    build's figures are for an ideal converter the device's chip cannot be; None otherwise."""
    if spec.acquisition is not None or not spec.sensors or not spec.chain().ideal:
        return None
    n = len(spec.sensors)
    mode = "continuous" if n == 1 else "cycle"
    rate = spec.estimator.rate if spec.estimator is not None else EstimatorSpec().rate
    near = sorted(row_rates(n, mode).items(), key=lambda dr: abs(dr[1] - rate))[:3]
    opts = ", ".join(f"{r:.6g} ({d:g} SPS)" for d, r in sorted(near, key=lambda dr: -dr[1]))
    return (f"{spec.where('[estimator] rate')}: no ADS1256 data rate gives {rate:g} rows/s "
            f"with {n} sensor(s) in {mode} mode, so without [acquisition] the bundle is built "
            "for point samples (converter \"ideal\"), which the device's ADS1256 cannot "
            f"deliver (vsense-edge check-config refuses the pair): set rate to a row rate "
            f"nearby, {opts}, or declare the converter you use in [acquisition]")


def near_row_rate(f, estimator, n_sensors: int) -> None:
    """Refuse an ``[estimator] rate`` a rounding away from an ADS1256 row rate (docs/modelfile.md
    prints 1,014.33 for 3043 / 3 rows/s): without ``[acquisition]`` it matches no data rate
    (to 1e-6, :func:`offline.chain.plan_chain`), so the bundle would be built for point
    samples without a word and refused by the device."""
    if estimator is None or n_sensors < 1:
        return
    rate = float(estimator.rate)
    mode = "continuous" if n_sensors == 1 else "cycle"
    for drate, r in row_rates(n_sensors, mode).items():
        off = abs(r - rate) / r
        if 1e-6 < off <= 1e-3:
            raise ModelFileError(
                f"{f}: [estimator].rate = {rate!r} is {off:.2g} (relative) from the ADS1256's "
                f"row rate {r!r} rows/s ({drate:g} SPS, {n_sensors} channel(s) in {mode} "
                f"mode), which a file without [acquisition] is built for (matched to 1e-6): "
                f"write rate = {r!r}, or declare [acquisition] converter = \"ideal\" for "
                "point samples")


def parse_acquisition(raw, f, estimator, n_sensors: int) -> AcquisitionSpec | None:
    """``[acquisition]``: converter ``ads1256`` (default), ``ideal`` or ``daq``, ``mode``
    ``continuous`` or ``cycle`` (default: continuous for one ADS1256 sensor, cycle for
    several), ``drate`` (an ADS1256 rate; default the one giving ``[estimator] rate`` rows/s in
    that mode, :func:`offline.chain.plan_chain`), ``offsets`` (one per ``[[sensors]]`` entry, in [0, 1 / rate) s;
    an ADS1256 cycling defaults to the datasheet's: the row's time is its last channel's
    conversion, :func:`offline.chain.row_offsets`); ``daq`` only: ``cutoff`` in (0, drate / 2] Hz and
    ``group_delay`` > 0 s of its linear-phase anti-alias FIR (both required)."""
    if "acquisition" not in raw:
        near_row_rate(f, estimator, n_sensors)
        return None
    w = f"{f}: [acquisition]"
    t = Table(raw["acquisition"], w, ACQUISITION)
    conv = t.get("converter")
    auto = "cycle" if conv == "ads1256" and n_sensors > 1 else "continuous"
    mode = t.get("mode", default=auto)
    drate = t.get("drate")
    rate = estimator.rate if estimator is not None else 1000.0
    if conv == "ads1256" and drate is None:  # the data rate that gives `rate` rows/s
        try:
            drate = plan_chain("ads1256", rate, max(n_sensors, 1), None, mode).drate
        except ValueError as exc:
            raise ModelFileError(f"{w}.drate (default: the data rate giving [estimator] "
                                 f"rate = {rate:g} rows/s): {exc}") from None
    elif conv == "ads1256":
        try:
            num_ave(drate)
        except ValueError as exc:
            raise ModelFileError(f"{w}.drate: {exc}") from None
    offsets = t.get("offsets")
    if offsets is None:
        if conv == "daq" and mode == "cycle":
            raise ModelFileError(f"{w}.offsets: missing (required with a daq cycling its "
                                 f"channels: each channel's conversion end before the row's "
                                 f"time stamp [s])")
        offsets = ()
        if conv == "ads1256" and mode == "cycle":  # the datasheet's cycling (Table 14)
            offsets = tuple(float(-o) for o in row_offsets(drate, mode, n_sensors))
    else:
        if len(offsets) != n_sensors:
            raise ModelFileError(f"{w}.offsets: {len(offsets)} values for {n_sensors} "
                                 f"[[sensors]] entries")
        offsets = tuple(check(o, f"{w}.offsets[{i}]", "num", lo=0.0, hi=1.0 / rate,
                              hi_open=True) for i, o in enumerate(offsets))
    fc = tau = 0.0
    if conv == "daq":
        fs = drate if drate is not None else rate
        fc = t.get("cutoff", hi=0.5 * fs)
        tau = t.get("group_delay")
    t.done()
    return AcquisitionSpec(conv, None if drate is None else float(drate), mode, offsets,
                           float(fc), float(tau))
