"""Schema of the model file's tables of the model itself: the top level, materials,
boundaries, springs, masses, damping, reduction, estimator, acquisition and node selections
(:mod:`offline.model.schema` gathers every table; the parse functions read through these)."""

from __future__ import annotations

from edge.acquisition import CONVERTERS, MODES
from edge.kinds import (DEFAULT_REDUCTION_METHOD, DEFAULT_REDUCTION_MODES, DISCRETIZATIONS,
                        ESTIMATOR_METHODS, REDUCTION_METHODS, REGULARIZATIONS)
from offline.model.table import REQUIRED, Key, Section

#: Model types and the section that describes their mesh.
MODEL_TYPES = ("beam", "plate", "solid", "matrices")
#: ``[estimator] method``: ``auto`` (every estimator scored on the calibration runs, the Kalman
#: smoother preferred within a margin; offline/estimator_choice.py), ``tikhonov`` or ``smoother``
ESTIMATOR_CHOICES = ("auto",) + tuple(ESTIMATOR_METHODS)
ALPHA_RULES = ("auto", "lcurve", "gcv", "discrepancy")

TOP = Section("top level", "Keys outside any table.", (
    Key("name", "str", REQUIRED, "Model name (bundle meta, reports).",
        default_text="the file name without .toml"),
    Key("type", "str", REQUIRED, "Model type; the table of that name describes the mesh.",
        choices=MODEL_TYPES),
    Key("description", "str", "", "Free text."),
))

MATERIAL = Section("[materials.<name>]", "A linear elastic isotropic material; the element "
                   "tables refer to it by name.", (
    Key("E", "num", REQUIRED, "Young's modulus.", "Pa", lo=0.0, lo_open=True),
    Key("nu", "num", REQUIRED, "Poisson's ratio.", "", lo=-1.0, hi=0.5, lo_open=True,
        hi_open=True),
    Key("rho", "num", REQUIRED, "Density.", "kg/m^3", lo=0.0, lo_open=True),
))

SELECT = Section("select", "A node selection (every `select` table): `nodes`, `group`, "
                 "`box` and `cylinder` may be combined (the nodes matching all), `at` stands "
                 "alone.", (
    Key("nodes", "list", REQUIRED, "Node ids, in the given order.", default_text="one form required"),
    Key("group", "str", REQUIRED, "A node group (mesh physical group, spider master).",
        default_text="one form required"),
    Key("box", "list", REQUIRED, "Nodes inside the box `[[x0, y0, z0], [x1, y1, z1]]` "
        "enlarged by `tol`.", "m", default_text="one form required"),
    Key("at", "list", REQUIRED, "The node nearest `[x, y, z]`, which must lie within `tol`.",
        "m", default_text="one form required"),
    Key("cylinder", "table", REQUIRED, "Nodes on a cylinder surface (its own table below).",
        default_text="one form required"),
    Key("tol", "num", None, "Distance tolerance of `box` (>= 0) and `at` (> 0).", "m", lo=0.0,
        default_text="1e-6 of the model's bounding-box diagonal"),
))

CYLINDER = Section("select.cylinder", "Nodes at distance `radius` +- `tol` from the axis line.", (
    Key("point", "list", REQUIRED, "A point `[x, y, z]` on the axis.", "m"),
    Key("axis", "list", REQUIRED, "Axis direction `[x, y, z]` (not zero).", ""),
    Key("radius", "num", REQUIRED, "Cylinder radius.", "m", lo=0.0, lo_open=True),
    Key("tol", "num", REQUIRED, "Radial tolerance.", "m", lo=0.0, lo_open=True,
        default_text="0.01 radius"),
    Key("range", "list", None, "Axial range `[s0, s1]` of s = (x - point) . axis.", "m"),
))

BOUNDARY = Section("[[boundary]]", "Fixed DOFs.", (
    Key("select", "table", REQUIRED, "The nodes (`select` table)."),
    Key("dofs", "list", None, "DOF names fixed at the nodes (ux uy uz rx ry rz).",
        default_text="every DOF the model carries"),
))

SPRING = Section("[[spring]]", "A grounded spring, split equally over the selected nodes.", (
    Key("select", "table", REQUIRED, "The nodes (`select` table)."),
    Key("dof", "str", REQUIRED, "DOF name the spring acts on."),
    Key("k", "num", REQUIRED, "Total stiffness.", "N/m or N m/rad", lo=0.0),
    Key("name", "str", None, "Name a `[[parameters]]` entry refers to (unique)."),
))

MASS = Section("[[mass]]", "A lumped mass on every translation, split over the selected "
               "nodes.", (
    Key("select", "table", REQUIRED, "The nodes (`select` table)."),
    Key("m", "num", REQUIRED, "Total mass.", "kg", lo=0.0),
    Key("name", "str", None, "Name a `[[parameters]]` entry refers to (unique)."),
))

DAMPING = Section("[damping]", "Rayleigh damping C = a M + b K: exactly one of the two "
                  "keys.", (
    Key("rayleigh", "list", REQUIRED, "`[a, b]`, both >= 0.", "[1/s, s]",
        default_text="this or ratios"),
    Key("ratios", "list", REQUIRED, "`[[f1, zeta1], [f2, zeta2]]`: two modal damping ratios "
        "(f > 0 Hz, 0 <= zeta < 1, f1 != f2).", "[Hz, -]", default_text="this or rayleigh"),
))

REDUCTION = Section("[reduction]", "Model reduction to master DOFs.", (
    Key("method", "str", DEFAULT_REDUCTION_METHOD, "Reduction method (auto: GMR+, or cb+r "
        "where the build finds GMR+ off at a sensor or an output).",
        choices=REDUCTION_METHODS),
    Key("modes", "int", DEFAULT_REDUCTION_MODES, "Kept modes (guyan: 0).", lo=0,
        default_text=f"{DEFAULT_REDUCTION_MODES}; 0 for guyan"),
    Key("n_report", "int", 30, "Modes listed in the build report.", lo=1),
    Key("masters", "list", [], "The `[[reduction.masters]]` entries (at least one)."),
))

MASTERS = Section("[[reduction.masters]]", "Master DOFs of the reduction.", (
    Key("select", "table", REQUIRED, "The nodes (`select` table)."),
    Key("dofs", "list", REQUIRED, "DOF names kept at the nodes."),
))

ESTIMATOR = Section("[estimator]", "The edge estimator's settings.", (
    Key("rate", "num", REQUIRED, "Sample rate of the estimator.", "Hz", lo=0.0, lo_open=True),
    Key("beta", "num", 0.25, "Newmark beta.", lo=0.0, hi=0.5, lo_open=True),
    Key("gamma", "num", 0.5, "Newmark gamma.", lo=0.5, hi=1.0),
    Key("alpha", "any", "auto", "Regularisation parameter (a number >= 0) or the rule that "
        "chooses it.", choices=ALPHA_RULES),
    Key("window", "any", "auto", "Window length (an integer 1-200) or `auto`.",
        "samples", lo=1, hi=200),
    Key("discretization", "str", "newmark", "Time discretisation.", choices=DISCRETIZATIONS),
    Key("regularization", "str", "tikhonov0", "Regulariser.", choices=REGULARIZATIONS),
    Key("max_delay", "num", 0.02, "Largest delay of the automatic window choice.", "s", lo=0.0),
    Key("method", "str", "auto", "Estimator: scored (`auto`), Tikhonov only or Kalman "
        "smoother only.", choices=ESTIMATOR_CHOICES),
    Key("lag", "int", None, "Smoother lag.", "samples", lo=0, hi=511,
        default_text="window - 1 or from max_delay"),
    Key("model_error", "num", None, "Smoother model-error noise.", lo=0.0,
        default_text="0 or 0.1, scored"),
    Key("check_window_s", "num", 8.0, "Model-check window.", "s", lo=0.0, lo_open=True),
    Key("check_false_alarm", "num", 0.01, "Model-check false-alarm probability per window.",
        lo=0.0, hi=0.5, lo_open=True),
))

ACQUISITION = Section("[acquisition]", "What one sample of a channel is (the converter "
                      "chain, edge/acquisition.py).", (
    Key("converter", "str", "ads1256", "Converter.", choices=CONVERTERS),
    Key("mode", "str", "continuous", "Channel mode.", choices=MODES,
        default_text="cycle for an ADS1256 with several sensors, else continuous"),
    Key("drate", "num", None, "Converter data rate (an ADS1256 rate).", "samples/s", lo=0.0,
        lo_open=True, default_text="the rate giving [estimator] rate rows/s"),
    Key("offsets", "list", None, "Each `[[sensors]]` channel's conversion end before the "
        "row's time stamp, in [0, 1/rate).", "s",
        default_text="0; an ADS1256 cycling: the datasheet's"),
    Key("cutoff", "num", REQUIRED, "`daq` only: anti-alias FIR cut-off, in (0, drate/2].",
        "Hz", lo=0.0, lo_open=True, default_text="required for daq"),
    Key("group_delay", "num", REQUIRED, "`daq` only: the FIR's group delay.", "s", lo=0.0,
        lo_open=True, default_text="required for daq"),
))

SECTIONS = (TOP, MATERIAL, SELECT, CYLINDER, BOUNDARY, SPRING, MASS, DAMPING, REDUCTION,
            MASTERS, ESTIMATOR, ACQUISITION)
