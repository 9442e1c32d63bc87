"""Schema of the model file's signal tables: ``[[sensors]]``, ``[[forces]]`` (and their
``model``), ``[[outputs]]``, ``[design_load]`` (and its ``load``), ``[placement]`` and its
``[[placement.candidates]]`` (:mod:`offline.model.schema` gathers every table)."""

from __future__ import annotations

from edge.kinds import SIGNAL_KINDS
from offline.fem.strain import SURFACES
from offline.forcing.force_model import FORCE_MODELS
from offline.model.table import REQUIRED, Key, Section

LOAD_TYPES = ("random", "sine", "chirp")
#: How the targets' predicted errors are combined (docs/placement.md "Criterion").
CRITERIA = ("log", "linear")
#: What a sensor's relative ``noise`` is relative to (docs/placement.md).
NOISE_MODELS = ("relative", "absolute")


def _signal(what: str, kinds=SIGNAL_KINDS) -> tuple:
    """The keys every signal shares: name, place (select + dof, or at/row for strain and
    stress), kind and unit."""
    return (
        Key("name", "str", REQUIRED, f"{what} name: a CSV column (unique across sensors, "
            "forces and outputs; not `time`, `flags` or `*_std`)."),
        Key("select", "table", REQUIRED, "The node (`select` table); not for strain/stress.",
            default_text="required (not strain/stress)"),
        Key("dof", "str", REQUIRED, "DOF name (ux uy uz rx ry rz); not for strain/stress.",
            default_text="required (not strain/stress)"),
        Key("kind", "str", "displacement", "What the signal is.", choices=kinds),
        Key("unit", "str", REQUIRED, "Unit of the signal: strain/microstrain, Pa/kPa/MPa for "
            "strain/stress.", default_text="m, m/s, m/s^2 (rad for rotations); strain; Pa"),
        Key("at", "list", REQUIRED, "Strain/stress: the point `[x, y, z]` (member surface "
            "or plate mid-surface).", "m", default_text="strain/stress: this or row"),
        Key("row", "list", REQUIRED, "Strain/stress of imported matrices: the recovery row "
            "`[[node, \"dof\", coefficient], ...]` (instead of `at`).",
            default_text="strain/stress: this or at"),
        Key("surface", "str", None, "Strain/stress of a plate: the surface.",
            choices=tuple(SURFACES)),
        Key("direction", "list", None, "Strain/stress: in-plane direction `[x, y, z]` (not "
            "zero)."),
    )


_NOISE = (
    Key("noise", "num", 0.0, "Measurement noise std relative to the signal's std.", lo=0.0),
    Key("noise_std", "num", None, "Absolute measurement noise std (wins over `noise`).",
        "unit", lo=0.0, lo_open=True),
)

_DYNAMICS = (
    Key("highpass_hz", "num", 0.0, "First-order high-pass corner of the sensor (an IEPE "
        "sensor's; 0: none).", "Hz", lo=0.0, lo_open=True),
    Key("average_s", "num", 0.0, "Moving-average window of the sensor (a laser sensor's; "
        "0: none).", "s", lo=0.0, lo_open=True),
    Key("drift", "num", 0.0, "Random-walk offset intensity (a DC path's drift; 0: none).",
        "unit/sqrt(s)", lo=0.0),
)

SENSORS = Section("[[sensors]]", "Measured channels, in the order of the edge's channels "
                  "(kind displacement, velocity, acceleration or strain).", (
    *_signal("Sensor"), *_NOISE, *_DYNAMICS))

FORCES = Section("[[forces]]", "Forces to identify.", (
    *_signal("Force")[:3],
    Key("scale", "num", 1.0, "Typical RMS size of the force (calibration runs, "
        "regularisation).", "N or N m", lo=0.0, lo_open=True),
    Key("model", "table", None, "The smoother's force model (its own table below)."),
))

FORCE_MODEL = Section("[[forces]].model", "The Kalman smoother's model of the force.", (
    Key("kind", "str", "bandpass", "Force model.", choices=FORCE_MODELS),
    Key("band", "list", None, "Band `[f_low, f_high]`, both > 0.", "Hz"),
    Key("rms", "num", None, "RMS of the force.", "N", lo=0.0, lo_open=True),
    Key("order", "int", None, "Model order (None: the build chooses).", lo=1, hi=32),
))

OUTPUTS = Section("[[outputs]]", "Virtual outputs (estimated, not measured).",
                  _signal("Output"))

CALIBRATION = Section("[design_load]", "The design load: the simulated runs the build "
                      "scores the estimators on (`[calibration]`, its former name, is read "
                      "with a deprecation warning).", (
    Key("duration", "num", 2.0, "Scored length of each run.", "s", lo=0.0, lo_open=True),
    Key("seed", "int", 0, "Seed of the first run.", lo=0),
    Key("seeds", "int", 3, "Independent runs.", lo=1, hi=20),
    Key("warmup", "num", 1.0, "Simulated before the scored part of each run.", "s", lo=0.0),
    Key("load", "any", REQUIRED, "The load: a table, or an array of tables (one per force, "
        "or one for all)."),
))

LOAD = Section("[design_load].load", "One load of the design load.", (
    Key("type", "str", "random", "Load type.", choices=LOAD_TYPES),
    Key("band", "list", REQUIRED, "random, chirp: `[f_low, f_high]` (at most Nyquist).", "Hz",
        default_text="required for random, chirp"),
    Key("rms", "num", REQUIRED, "random: RMS of the force.", "N", lo=0.0, lo_open=True,
        default_text="required for random"),
    Key("amplitude", "num", REQUIRED, "sine, chirp: amplitude.", "N", lo=0.0, lo_open=True,
        default_text="required for sine, chirp"),
    Key("freq", "num", REQUIRED, "sine: frequency (at most Nyquist).", "Hz", lo=0.0,
        lo_open=True, default_text="required for sine"),
    Key("force", "str", None, "The `[[forces]]` entry it drives (none: every force)."),
))

PLACEMENT = Section("[placement]", "Sensor placement (`vsense-offline place`).", (
    Key("weights", "table", {}, "Per force/output name, its weight >= 0 (a target not "
        "named weighs 1)."),
    Key("budget", "num", None, "Total cost the placed candidates may take.", lo=0.0,
        lo_open=True),
    Key("criterion", "str", "log", "How the targets' errors are combined.", choices=CRITERIA),
    Key("noise", "str", "relative", "What a relative `noise` is relative to.",
        choices=NOISE_MODELS),
    Key("candidates", "list", [], "The `[[placement.candidates]]` entries."),
))

CANDIDATES = Section("[[placement.candidates]]", "A sensor `place` may add: the keys of a "
                     "`[[sensors]]` entry and its cost (its `highpass_hz`, `average_s`, `drift` and "
                     "the `[acquisition]` chain are scored as the build designs them).", (
    *_signal("Sensor"), *_NOISE, *_DYNAMICS,
    Key("cost", "num", 1.0, "Cost against `[placement] budget`.", lo=0.0),
))

SECTIONS = (SENSORS, FORCES, FORCE_MODEL, OUTPUTS, CALIBRATION, LOAD, PLACEMENT, CANDIDATES)
