"""Model files (TOML): parse, validate, build the constrained FE model, resolve selections.

Public API::

    spec = load_model_file(path)            # parse + validate -> ModelSpec (dataclasses)
    spec = spec_from_dict(raw, path)        # same from an (edited) parsed dict
    model = build_fe_model(spec, progress=True)   # constrained FEModel
    idx = resolve_dofs(model, select, dofs, where)  # indices into model DOFs

See docs/modelfile.md for the schema.
"""

from offline.model.modelfile import (BUILDERS, build_fe_model, build_unconstrained, fixed_mask,
                                     load_model_file, output_probe, resolve_dofs,
                                     sensor_probe,
                                     select_nodes)
from offline.model.spec import (Boundary, Calibration, Damping, EstimatorSpec, Force, LoadSpec,
                                Masters, Material, ModelFileError, ModelSpec, Output, PointMass,
                                ReductionSpec, Selection, Sensor, Spring, parse_selection,
                                spec_from_dict)

__all__ = [
    "load_model_file", "spec_from_dict", "build_fe_model", "build_unconstrained", "fixed_mask",
    "resolve_dofs", "output_probe", "sensor_probe", "select_nodes", "parse_selection", "BUILDERS", "ModelFileError", "ModelSpec",
    "Material", "Selection", "Boundary", "Spring", "PointMass", "Damping", "ReductionSpec",
    "Masters", "EstimatorSpec", "Sensor", "Force", "Output", "LoadSpec", "Calibration",
]
