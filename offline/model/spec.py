"""Model-file specification: the validated model file (:class:`ModelSpec`) from a parsed TOML dict.

Each section family is parsed once, in its own module, into typed specs: :mod:`.table` (the
:class:`ModelFileError`, :class:`Table`, :func:`check`), :mod:`.selection` (node selections),
:mod:`.sections` (materials, boundaries, springs, masses, damping, reduction, estimator,
acquisition),
:mod:`.signals` (sensors, forces, outputs, calibration), :mod:`.elements` (the ``[beam]``,
``[plate]``, ``[solid]``, ``[matrices]`` tables). A new section is one spec class and its parse
function there, plus one line here. Names are re-exported here for callers.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

from offline.model.elements import parse_element
from offline.model.sections import (ALPHA_RULES, REDUCTION_METHODS,  # noqa: F401
                                    AcquisitionSpec, Boundary, Damping, EstimatorSpec, Masters,
                                    Material, PointMass, ReductionSpec, Spring,
                                    default_chain, parse_acquisition, parse_boundary, parse_damping,
                                    parse_estimator, parse_materials, parse_reduction,
                                    parse_springs_masses)
from offline.model.selection import Selection, parse_selection  # noqa: F401
from offline.model.signals import (LOAD_TYPES, SIGNAL_KINDS, Calibration, Force,  # noqa: F401
                                   LoadSpec, Output, Sensor, parse_calibration, parse_signals)
from offline.model.experiment import Experiment, InverseSettings, parse_experiment, parse_inverse
from offline.model.experiment import parse_hybrid as parse_hybrid_table
from offline.model.placement import PlacementSpec, parse_placement
from offline.model.schema import RENAMED, TOP_TABLES
from offline.model.schema_model import MODEL_TYPES, TOP
from offline.model.update import TARGET, parse_bayes, parse_damage, parse_parameters
from offline.model.table import READ, ModelFileError, Table, check  # noqa: F401

TOP_KEYS = {*TOP.names, *TOP_TABLES, *RENAMED}


@dataclass
class ModelSpec:
    """A validated model file.

    ``raw`` is the whole parsed TOML dict; ``section`` is the raw table of the model type
    (``[plate]`` etc.); :meth:`element` is its typed spec
    (:mod:`offline.model.elements`), parsed when the FE model is built (it may read mesh or
    matrix files) and handed to the element builder.
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
    calibration: Calibration | None = None  # [design_load] (formerly [calibration])
    placement: PlacementSpec | None = None  # [placement] (offline/placement, `place`)
    acquisition: AcquisitionSpec | None = None  # [acquisition] (edge/acquisition.py)
    # the tables of model updating and the hybrid twin, validated (offline/model/update.py,
    # offline/model/experiment.py); their users read them from ``raw`` with the same parsers
    parameters: list = field(default_factory=list)  # [[parameters]]: ParameterSpec
    damage: list = field(default_factory=list)      # [[damage]]: (name, box, omega)
    bayes: dict | None = None                       # [bayes]
    experiment: Experiment | None = None            # [experiment]
    inverse: InverseSettings | None = None          # [inverse]
    hybrid: dict | None = None                      # [hybrid]

    def chain(self):
        """The measurement chain (:class:`edge.acquisition.Chain`) of ``[acquisition]`` at
        the estimator's rate; when the file declares none, the ADS1256 the edge reads
        (:func:`default_chain`: as ``simulate`` converts by default), or ``ideal`` point
        samples when no ADS1256 data rate gives the rate."""
        rate = self.estimator.rate if self.estimator is not None else EstimatorSpec().rate
        chain = default_chain(rate, len(self.sensors)) if self.acquisition is None \
            else self.acquisition.chain(rate)
        # each sensor's own dynamics before the converter ([[sensors]] highpass_hz, ...)
        dyn = {k: tuple(float(getattr(s, a)) for s in self.sensors) for k, a in (
            ("highpass", "highpass_hz"), ("average", "average_s"), ("drift", "drift"))}
        return replace(chain, **dyn)

    @property
    def base_dir(self) -> Path:
        return Path(self.path).parent

    def element(self):
        """The typed spec of the ``[<type>]`` table (:func:`.elements.parse_element`)."""
        return parse_element(self.type, self.section, self.materials, self.base_dir,
                             self.where(f"[{self.type}]"))

    def where(self, key: str) -> str:
        """Key path with the file name, e.g. ``spec.where("[plate]")``."""
        return f"{Path(self.path).name}: {key}"


# --------------------------------------------------------------------------- parsing
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
    cal = "calibration" if "calibration" in raw else "design_load"  # as errors name it
    raw = _renamed(raw, f)
    extra = sorted(set(raw) - TOP_KEYS)
    if extra:
        raise ModelFileError(f"{f}: {extra[0]}: unknown top-level key (allowed: "
                             f"{', '.join(sorted(TOP_KEYS))})")
    READ.update((TOP.name, k) for k in TOP.names)
    name = check(raw.get("name", path.stem), f"{f}: name", TOP.key("name").kind)
    if "description" in raw:
        check(raw["description"], f"{f}: description", TOP.key("description").kind)
    if "type" not in raw:
        raise ModelFileError(f"{f}: type: missing (one of {', '.join(MODEL_TYPES)})")
    mtype = check(raw["type"], f"{f}: type", "str", choices=TOP.key("type").choices)
    for other in MODEL_TYPES:
        if other != mtype and other in raw:
            raise ModelFileError(f"{f}: [{other}]: section does not match type = {mtype!r}")
    if mtype not in raw:
        raise ModelFileError(f"{f}: [{mtype}]: missing (required by type = {mtype!r})")
    section = check(raw[mtype], f"{f}: [{mtype}]", "table")
    materials = parse_materials(raw, f)
    boundary = parse_boundary(raw, f)
    springs, masses = parse_springs_masses(raw, f)
    damping, reduction = parse_damping(raw, f), parse_reduction(raw, f)
    estimator = parse_estimator(raw, f)
    sensors, forces, outputs = parse_signals(raw, f)
    calibration = parse_calibration(raw, f, forces, estimator, cal)
    placement = parse_placement(raw, f, sensors, forces, outputs)
    acquisition = parse_acquisition(raw, f, estimator, len(sensors))
    upd = _updating(raw, f, sensors, forces, {"material": set(materials),
                                              "spring": {s.name for s in springs if s.name},
                                              "mass": {m.name for m in masses if m.name}})
    return ModelSpec(path=path, raw=raw, name=name, type=mtype, materials=materials,
                     section=section, boundary=boundary, springs=springs,
                     masses=masses, damping=damping, reduction=reduction, estimator=estimator,
                     sensors=sensors, forces=forces, outputs=outputs, calibration=calibration,
                     placement=placement, acquisition=acquisition, **upd)


def _updating(raw: dict, f: str, sensors: list, forces: list, targets: dict) -> dict:
    """The tables of model updating and the hybrid twin (:class:`ModelSpec` fields);
    ``targets``: the names a parameter may act on, per kind of target."""
    parameters = parse_parameters(raw, f)
    _targets(parameters, f, targets)
    sn, fn = [s.name for s in sensors], [s.name for s in forces]
    return {"parameters": parameters, "damage": parse_damage(raw, f),
            "bayes": parse_bayes(raw, f, parameters, sn) if "bayes" in raw else None,
            "experiment": parse_experiment(raw, f, sn, fn),
            "inverse": parse_inverse(raw, f) if "inverse" in raw else None,
            "hybrid": parse_hybrid_table(raw, f) if "hybrid" in raw else None}


def _renamed(raw: dict, f: str) -> dict:
    """``raw`` with former table names (:data:`RENAMED`) under their names now, each with a
    FutureWarning (shown on the command line, unlike a DeprecationWarning) naming the new
    name; both names at once are an error."""
    old = [k for k in RENAMED if k in raw]
    for k in old:
        new = RENAMED[k]
        if new in raw:
            raise ModelFileError(f"{f}: [{k}]: the former name of [{new}], which the file "
                                 f"also has; keep [{new}] only")
        warnings.warn(f"{f}: [{k}] is now called [{new}] (it declares the design load, not "
                      f"a calibration); rename the table", FutureWarning, stacklevel=3)
    if not old:
        return raw
    return {(RENAMED.get(k, k)): v for k, v in raw.items()}


def _targets(parameters: list, f: str, have: dict) -> None:
    """Each ``[[parameters]]`` entry's material, spring or mass exists (by name)."""
    for i, p in enumerate(parameters):
        key = TARGET[p.kind]
        if key is not None and p.target not in have[key]:
            what = "[materials.<name>]" if key == "material" else f"[[{key}]]"
            raise ModelFileError(f"{f}: [[parameters]][{i}].{key}: parameter {p.name!r}: no "
                                 f"{what} named {p.target!r} (have: "
                                 f"{', '.join(sorted(have[key])) or 'none'})")
