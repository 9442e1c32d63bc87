"""Schema of the model file's tables of model updating and the hybrid twin: ``[[parameters]]``,
``[[damage]]``, ``[bayes]`` (its priors and data preparation), ``[experiment]`` (its
excitation), ``[inverse]`` (its features) and ``[hybrid]`` (:mod:`offline.model.schema`
gathers every table; :mod:`offline.model.update` reads through these)."""

from __future__ import annotations

from edge.features import KINDS as FEATURE_KINDS
from offline.model.table import REQUIRED, Key, Section

#: edge.inverse.parametric's PARAM_KINDS and EXCITATIONS (not imported: edge.inverse loads the
#: estimator and numba, and every command reads a model file; a test checks they are equal)
PARAM_KINDS = ("modulus", "damping_ratio", "spring", "mass", "damage")
EXCITATIONS = ("pulse", "step", "chirp")

#: ``[inverse] map``
MAPS = ("mlp", "gp")
#: ``[bayes.prior.<parameter>] transform``
TRANSFORMS = ("log", "identity", "logit")
#: ``[hybrid] inputs``
HYBRID_INPUTS = ("displacement", "velocity")

PARAMETERS = Section("[[parameters]]", "Updating parameters of `calibrate` and the inverse "
                     "maps (docs/calibration.md, docs/inverse.md).", (
    Key("name", "str", REQUIRED, "Parameter name (unique)."),
    Key("kind", "str", REQUIRED, "What it changes.", choices=PARAM_KINDS),
    Key("bounds", "list", REQUIRED, "Admissible `[lower, upper]` (modulus, spring > 0; "
        "mass >= 0; damping ratio in [0, 1); damage < 1).", "SI"),
    Key("nominal", "num", None, "Nominal value.", "SI", default_text="the bounds' centre"),
    Key("modes", "list", [1, 2], "damping_ratio only: the two 1-based modes with ratio zeta."),
    Key("material", "str", REQUIRED, "modulus only: the `[materials.<name>]` name.",
        default_text="required for modulus"),
    Key("spring", "str", REQUIRED, "spring only: the `[[spring]]` name.",
        default_text="required for spring"),
    Key("mass", "str", REQUIRED, "mass only: the `[[mass]]` name.",
        default_text="required for mass"),
    Key("region", "table", REQUIRED, "damage only: `{box = [[x0, y0, z0], [x1, y1, z1]]}`, "
        "the elements whose centroid is inside.", "m", default_text="required for damage"),
))

DAMAGE = Section("[[damage]]", "Stiffness reduction E_z = (1 - omega) E of the elements in a "
                 "region (Titscher et al. 2023, eq. 23; not for `matrices`).", (
    Key("name", "str", None, "Zone name."),
    Key("region", "table", REQUIRED, "`{box = [[x0, y0, z0], [x1, y1, z1]]}`: the elements "
        "whose centroid is inside.", "m"),
    Key("omega", "num", REQUIRED, "Damage variable.", lo=None, hi=1.0, hi_open=True),
))

REGION = Section("region", "The region of a `[[damage]]` or damage `[[parameters]]` entry.", (
    Key("box", "list", REQUIRED, "Two finite points `[[x0, y0, z0], [x1, y1, z1]]`.", "m"),
))

BAYES = Section("[bayes]", "Settings of `vsense-offline calibrate` (docs/calibration.md).", (
    Key("noise", "str", "channel", "Noise groups: one per sensor or one for all.",
        choices=("channel", "one")),
    Key("offsets", "list", [], "`[[sensors]]` names whose offsets are calibrated too."),
    Key("autocorrelation", "bool", True, "Likelihood weights N_eff/N from the residual "
        "spectrum."),
    Key("prior", "table", {}, "Per parameter name, its `[bayes.prior.<name>]` table.",
        default_text="log-normal (positive kinds) or normal, bounds at +-2 sigma"),
    Key("data", "table", {}, "Record preparation (`[bayes.data]`)."),
    Key("substeps", "int", 16, "Integration sub-steps per record sample.", lo=1),
    Key("tol", "num", 1e-3, "Free-energy tolerance of the VB iteration.", lo=0.0,
        lo_open=True),
    Key("max_iter", "int", 40, "Largest number of VB iterations.", lo=1),
    Key("step_tol", "num", 0.01, "Stop when the mean's step is below this fraction of its "
        "std.", lo=0.0),
    Key("multistart", "bool", True, "Screen several starting points."),
    Key("draws", "int", 2, "Prior draws among the starting points.", lo=0),
    Key("screen_iter", "int", 20, "Model runs of each screening search.", lo=1),
    Key("screen_s", "num", 2.0, "Seconds of each record the screen fits.", "s", lo=0.0,
        lo_open=True),
    Key("identifiability", "bool", True, "Profile the weak directions."),
    Key("discretisation", "bool", True, "Add the shift of a refined forward model (4x the "
        "sub-steps, twice the modes) to the posterior covariance."),
))

PRIOR = Section("[bayes.prior.<parameter>]", "The Gaussian prior of one parameter on its "
                "transform's scale.", (
    Key("transform", "str", "log", "Transform of the parameter.", choices=TRANSFORMS,
        default_text="log for modulus, spring, damping_ratio; else identity"),
    Key("median", "num", REQUIRED, "log, logit: the prior median (log: > 0; logit: inside "
        "the bounds).", "SI", default_text="required for log; logit: the nominal value"),
    Key("log_std", "num", REQUIRED, "log: std of log(theta).", lo=0.0, lo_open=True,
        default_text="required for log"),
    Key("mean", "num", REQUIRED, "identity: the prior mean.", "SI",
        default_text="required for identity"),
    Key("std", "num", REQUIRED, "identity: the prior std.", "SI", lo=0.0, lo_open=True,
        default_text="required for identity"),
    Key("logit_std", "num", 1.0, "logit: std on the logit scale.", lo=0.0, lo_open=True),
))

DATA = Section("[bayes.data]", "Preparation of the calibration records "
               "(offline/calibration/data.py).", (
    Key("filter_hz", "num", None, "Zero-phase low-pass on forces and responses (none: off).",
        "Hz", lo=0.0, lo_open=True),
    Key("decimate", "int", 1, "Residual every n-th sample.", lo=1),
    Key("outlier_k", "num", 8.0, "Spike threshold in robust stds of the first difference.",
        lo=0.0, lo_open=True),
    Key("max_bad", "num", 0.01, "Largest fraction of repaired samples in a channel.", lo=0.0,
        hi=1.0, hi_open=True),
    Key("delays", "table", {}, "Per column name, its delay (sampled at t + delay).", "s"),
    Key("skip_s", "num", 0.0, "Start of each record left out of the residual.", "s", lo=0.0),
))

EXPERIMENT = Section("[experiment]", "The known experiment of the inverse maps "
                     "(docs/inverse.md).", (
    Key("excitation", "table", REQUIRED, "The excitation (its table below)."),
    Key("initial", "str", "rest", "Initial state.", choices=("rest",)),
    Key("duration", "num", REQUIRED, "Window length (duration * rate >= 16 samples).", "s",
        lo=0.0, lo_open=True),
    Key("rate", "num", REQUIRED, "Sample rate.", "Hz", lo=0.0, lo_open=True),
    Key("channels", "list", REQUIRED, "`[[sensors]]` names sampled (non-empty)."),
    Key("noise", "num", 0.01, "Measurement noise std relative to the channel's peak.", lo=0.0),
    Key("substeps", "int", 4, "Integration sub-steps per sample.", lo=1),
))

EXCITATION = Section("[experiment].excitation", "The known excitation the rig applies.", (
    Key("type", "str", REQUIRED, "Excitation.", choices=EXCITATIONS),
    Key("amplitude", "num", 1.0, "Amplitude.", "N"),
    Key("at", "str", None, "The `[[forces]]` name where it acts.",
        default_text="the first force"),
    Key("width", "num", REQUIRED, "pulse: half-sine width.", "s", lo=0.0, lo_open=True,
        default_text="required for pulse"),
    Key("f0", "num", 1.0, "chirp: start frequency.", "Hz"),
    Key("f1", "num", REQUIRED, "chirp: end frequency (below Nyquist).", "Hz", lo=0.0,
        lo_open=True, default_text="rate / 4"),
))

INVERSE = Section("[inverse]", "Training of the inverse maps (docs/inverse.md).", (
    Key("samples", "int", 1000, "Training samples.", lo=2),
    Key("test_samples", "int", 1000, "Test samples.", lo=1),
    Key("validation_samples", "int", 500, "Validation samples.", lo=1),
    Key("features", "any", "fft_ri_bins", "Feature kind (several joined by `+`), or a "
        "`[inverse.features]` table."),
    Key("map", "str", "mlp", "Map type.", choices=MAPS),
    Key("seed", "int", 0, "Random seed.", lo=0),
    Key("hidden", "list", [64, 64], "Hidden layer sizes (positive integers)."),
    Key("max_epochs", "int", 400, "Largest number of epochs.", lo=1),
    Key("patience", "int", 40, "Epochs without a better validation loss before stopping.",
        lo=1),
    Key("margin_bins", "int", 3, "FFT bins added on each side of the modes' bins.", lo=0),
    Key("batch_size", "int", 100, "Mini-batch size.", lo=1),
    Key("learning_rate", "num", 2e-3, "Adam step.", lo=0.0, lo_open=True),
))

FEATURES = Section("[inverse.features]", "Feature settings (edge/features.py).", (
    Key("kind", "str", "fft_ri_bins", "Feature kind, or several joined by `+`: "
        + ", ".join(f"`{k}`" for k in FEATURE_KINDS) + "."),
    Key("n_samples", "int", 32, "time_samples kinds: samples kept.", lo=1),
    Key("n_extrema", "int", 8, "extrema kinds: extrema kept.", lo=1),
    Key("prominence", "num", 0.05, "extrema kinds: prominence relative to the peak.",
        lo=0.0),
    Key("bins", "list", [], "`*_bins` kinds: FFT bin indices (integers >= 0).",
        default_text="from the modes"),
))

HYBRID = Section("[hybrid]", "The hybrid twin's neural correction (docs/hybrid.md).", (
    Key("select", "table", None, "Where the correction acts (`select` table, with `dofs`).",
        default_text="the `modes` lowest modes"),
    Key("dofs", "any", ["uz"], "DOF name(s) at the selected nodes (a name or a list)."),
    Key("modes", "int", 3, "Modal coordinates used without `select`.", lo=1),
    Key("max_hz", "num", None, "A correction at `select` loads the modes up to this "
        "frequency only.", "Hz", lo=0.0, lo_open=True, default_text="half the rate"),
    Key("inputs", "list", ["displacement", "velocity"], "The network's inputs (non-empty, "
        "distinct).", choices=HYBRID_INPUTS),
    Key("linear_kept", "bool", True, "Subtract the correction's value and slope at rest."),
    Key("hidden", "int", 16, "Neurons per hidden layer.", lo=1, hi=256),
    Key("layers", "int", 2, "Hidden layers.", lo=1, hi=4),
    Key("epochs", "int", 400, "Largest number of epochs.", lo=1),
    Key("optimizer", "str", "lbfgs", "Optimiser.", choices=("lbfgs", "adam")),
    Key("learning_rate", "num", 1e-3, "Adam step.", lo=0.0, lo_open=True),
    Key("horizon", "int", 100, "Open-loop prediction horizon of the loss.", "samples", lo=2),
    Key("stride", "int", 25, "Samples between the horizons' starts.", "samples", lo=1),
    Key("patience", "int", 40, "Epochs without a better validation loss before stopping.",
        lo=1),
    Key("margin", "num", 0.25, "Trained envelope: the input range widened by this fraction "
        "on each side.", lo=0.0),
    Key("outside", "str", "saturate", "Beyond the trained envelope: `saturate` holds each "
        "network input at the envelope's bound (the correction at its edge), `off` applies no "
        "correction (the linear estimate).", choices=("saturate", "off")),
    Key("seed", "int", 0, "Initial weights."),
    Key("restarts", "int", 1, "Trainings from seeds seed, seed + 1, ...; the best is kept.",
        lo=1, hi=20),
))

SECTIONS = (PARAMETERS, DAMAGE, REGION, BAYES, PRIOR, DATA, EXPERIMENT, EXCITATION, INVERSE,
            FEATURES, HYBRID)
