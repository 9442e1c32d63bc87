"""The model file's one schema (offline/model/schema.py): every key a parser reads is declared
(by construction: reading an undeclared key raises) and every declared key is read by a parser
(here, over files that use every table); every example still parses; the updating and hybrid
tables fail with the same error type as the rest; the reference page is the generated one."""

from __future__ import annotations

import copy
import glob
import re
import tomllib
from pathlib import Path

import pytest

from offline.model import ModelFileError, load_model_file, spec_from_dict
from offline.model import table as T
from offline.model.schema import SCHEMA, TOP_TABLES, reference_markdown, section

ROOT = Path(__file__).resolve().parents[1]

_AT = {"at": [1.0, 0.0, 0.0]}
#: a beam model file with every table and (nearly) every key; the element variants below
#: cover the rest (docs/modelfile-reference.md)
KITCHEN = {
    "name": "kitchen", "type": "beam", "description": "every table",
    "materials": {"steel": {"E": 210e9, "nu": 0.3, "rho": 7850.0}},
    "beam": {"theory": "timoshenko", "nodes": [[1, 0.0, 0.0, 0.0], [2, 1.0, 0.0, 0.0]],
             "sections": {
                 "r": {"material": "steel", "rectangle": {"b": 0.04, "h": 0.01},
                       "shear_factor": 0.85},
                 "t": {"material": "steel", "tube": {"d": 0.05, "t": 0.004}},
                 "g": {"material": "steel", "A": 1e-4, "Iy": 1e-8, "Iz": 1e-8, "J": 2e-8}},
             "members": [{"name": "a", "section": "r", "orientation": [0.0, 0.0, 1.0],
                          "line": {"start": [0.0, 0.0, 0.0], "end": [1.0, 0.0, 0.0], "n": 10}},
                         {"section": "g", "elements": [[1, 2]]}]},
    "boundary": [{"select": {"at": [0.0, 0.0, 0.0], "tol": 1e-3}, "dofs": ["ux", "uz"]}],
    "spring": [{"select": {"nodes": [1]}, "dof": "uz", "k": 1e3, "name": "root"}],
    "mass": [{"select": {"box": [[0.9, -1, -1], [1.1, 1, 1]], "tol": 0.0}, "m": 0.1,
              "name": "tip"}],
    "damping": {"ratios": [[10.0, 0.01], [100.0, 0.02]]},
    "reduction": {"method": "cb", "modes": 4, "n_report": 10, "masters": [
        {"select": {"group": "g", "cylinder": {"point": [0, 0, 0], "axis": [1, 0, 0],
                                               "radius": 0.01, "tol": 1e-3, "range": [0, 1]}},
         "dofs": ["uz"]}]},
    "estimator": {"rate": 1000.0, "beta": 0.25, "gamma": 0.5, "alpha": 1e-6, "window": 5,
                  "discretization": "newmark", "regularization": "tikhonov1",
                  "max_delay": 0.02, "method": "smoother", "lag": 4, "model_error": 0.1,
                  "check_window_s": 8.0, "check_false_alarm": 0.01},
    "acquisition": {"converter": "daq", "mode": "cycle", "drate": 2000.0,
                    "offsets": [0.0, 0.0, 0.0], "cutoff": 500.0, "group_delay": 0.001},
    "sensors": [
        {"name": "d1", "select": _AT, "dof": "uz", "kind": "displacement", "unit": "m",
         "noise": 0.01, "noise_std": 1e-6, "highpass_hz": 0.5, "average_s": 1e-3,
         "drift": 0.0},
        {"name": "g1", "kind": "strain", "at": [0.5, 0.0, 0.005], "unit": "microstrain",
         "surface": "top", "direction": [1.0, 0.0, 0.0], "noise": 0.01},
        {"name": "g2", "kind": "strain", "row": [[1, "ux", 1.0]], "noise_std": 1e-6}],
    "forces": [{"name": "F", "select": _AT, "dof": "uz", "scale": 2.0,
                "model": {"kind": "bandpass", "band": [1.0, 100.0], "rms": 1.0, "order": 2}}],
    "outputs": [
        {"name": "o1", "select": {"at": [0.5, 0, 0]}, "dof": "uz", "kind": "velocity",
         "unit": "m/s"},
        {"name": "s1", "kind": "stress", "at": [0.5, 0.0, 0.005], "unit": "MPa",
         "surface": "top", "direction": [1.0, 0.0, 0.0]},
        {"name": "s2", "kind": "strain", "row": [[2, "ux", 1.0]]}],
    "design_load": {"duration": 1.0, "seed": 1, "seeds": 2, "warmup": 0.5,
                    "load": [{"type": "random", "band": [5.0, 100.0], "rms": 1.0,
                              "force": "F"}]},
    "placement": {"weights": {"o1": 1.0}, "budget": 3.0, "criterion": "linear",
                  "noise": "absolute", "candidates": [
                      {"name": "c1", "select": {"at": [0.3, 0, 0]}, "dof": "uz",
                       "kind": "acceleration", "noise": 0.01, "noise_std": 1e-3, "cost": 1.0},
                      {"name": "c2", "kind": "strain", "at": [0.2, 0.0, 0.005], "cost": 1.0},
                      {"name": "c3", "kind": "strain", "row": [[2, "ux", 1.0]]}]},
    "parameters": [
        {"name": "E", "kind": "modulus", "material": "steel", "bounds": [200e9, 220e9],
         "nominal": 210e9},
        {"name": "zeta", "kind": "damping_ratio", "bounds": [0.005, 0.03], "modes": [1, 3]},
        {"name": "k", "kind": "spring", "spring": "root", "bounds": [1e2, 1e4]},
        {"name": "m", "kind": "mass", "mass": "tip", "bounds": [0.0, 0.2]},
        {"name": "w", "kind": "damage", "region": {"box": [[0, -1, -1], [0.5, 1, 1]]},
         "bounds": [0.0, 0.5]}],
    "damage": [{"name": "z", "region": {"box": [[0, -1, -1], [0.5, 1, 1]]}, "omega": 0.2}],
    "bayes": {"noise": "one", "offsets": ["d1"], "autocorrelation": False,
              "prior": {"E": {"transform": "log", "median": 210e9, "log_std": 0.05},
                        "k": {"transform": "identity", "mean": 1e3, "std": 100.0},
                        "m": {"transform": "logit", "median": 0.1, "logit_std": 1.0}},
              "data": {"filter_hz": 200.0, "decimate": 2, "outlier_k": 8.0, "max_bad": 0.01,
                       "delays": {"d1": 0.0}, "skip_s": 0.1},
              "substeps": 8, "tol": 1e-3, "max_iter": 20, "step_tol": 0.01,
              "multistart": False, "draws": 1, "screen_iter": 10, "screen_s": 1.0,
              "identifiability": False},
    "experiment": {"excitation": {"type": "chirp", "amplitude": 1.0, "at": "F", "width": 0.002,
                                  "f0": 1.0, "f1": 100.0},
                   "initial": "rest", "duration": 0.5, "rate": 1000.0, "channels": ["d1"],
                   "noise": 0.01, "substeps": 4},
    "inverse": {"samples": 10, "test_samples": 5, "validation_samples": 5,
                "features": {"kind": "fft_ri_bins+time_extrema", "n_samples": 8,
                             "n_extrema": 4, "prominence": 0.05, "bins": [1, 2]},
                "map": "gp", "seed": 1, "hidden": [8], "max_epochs": 10, "patience": 5,
                "margin_bins": 2, "batch_size": 10, "learning_rate": 1e-3},
    "hybrid": {"select": _AT, "dofs": ["uz"], "modes": 2, "max_hz": 50.0,
               "inputs": ["displacement"], "linear_kept": False, "hidden": 8, "layers": 1,
               "epochs": 10, "optimizer": "adam", "learning_rate": 1e-3, "horizon": 10,
               "stride": 5, "patience": 5, "margin": 0.1, "seed": 2, "restarts": 2},
}

_PLATE = {"material": "steel", "thickness": 0.004, "formulation": "mitc3",
          "shear_factor": 0.8}
#: (type, element table, other edits): the element tables and the branches KITCHEN lacks
VARIANTS = [
    ("plate", {**_PLATE, "rectangle": {"length": 1.0, "width": 0.5, "nx": 4, "ny": 2,
                                       "origin": [0.0, 0.0], "pattern": "alternate"}},
     {"damping": {"rayleigh": [0.1, 1e-5]},
      "design_load": {"load": {"type": "sine", "freq": 10.0, "amplitude": 1.0}}}),
    ("plate", {**_PLATE, "nodes": [[1, 0, 0], [2, 1, 0], [3, 0, 1]], "triangles": [[1, 2, 3]]},
     {"design_load": {"load": {"type": "chirp", "band": [1.0, 50.0], "amplitude": 1.0}}}),
    ("solid", {"mesh": "part.msh", "material": "steel", "scale": 1e-3, "mesh_size": 0.01,
               "order": 2, "spiders": [{"name": "hole", "select": {"group": "h"},
                                        "center": [0, 0, 0]}]}, {}),
    ("matrices", {"mass": "M.mtx", "stiffness": "K.mtx", "damping": "C.mtx",
                  "dofs": "dofs.csv", "symmetry_rtol": 1e-8}, {}),
]


def _variant(mtype, table, edits) -> dict:
    raw = copy.deepcopy(KITCHEN)
    del raw["beam"]
    return {**raw, "type": mtype, mtype: table, **edits}


def test_every_declared_key_is_read_by_a_parser():
    """The reverse of the construction (an undeclared key cannot be read): a key declared but
    read by no parser is drift, found here."""
    T.READ.clear()
    for raw in [KITCHEN] + [_variant(*v) for v in VARIANTS]:
        spec = spec_from_dict(copy.deepcopy(raw), "kitchen.toml")
        spec.element()
    declared = {(s.name, k.name) for s in SCHEMA for k in s.keys}
    assert declared - T.READ == set()
    assert T.READ <= declared


def test_reading_an_undeclared_key_is_a_programming_error():
    t = T.Table({}, "x.toml: [hybrid]", section("[hybrid]"))
    with pytest.raises(KeyError, match="schema drift.*'hiden' of \\[hybrid\\]"):
        t.get("hiden")


def test_a_list_default_is_the_caller_s_own():
    sec = section("[reduction]")
    T.Table({}, "x.toml: [reduction]", sec).get("masters").append("edited")
    assert T.Table({}, "x.toml: [reduction]", sec).get("masters") == []
    assert sec.key("masters").default == []


def test_the_top_level_tables_are_the_schema_s():
    tops = {re.match(r"\[\[?(\w+)", s.name)[1] for s in SCHEMA if s.name.startswith("[")}
    assert tops == set(TOP_TABLES)
    for name, array in TOP_TABLES.items():
        assert any(s.name.startswith(f"[[{name}]]" if array else f"[{name}") for s in SCHEMA)


def test_constants_equal_the_edge_s():
    """offline/model/schema_update.py does not import edge.inverse (numba) for its two lists."""
    from edge.inverse.parametric import EXCITATIONS, PARAM_KINDS
    from offline.model import schema_update as su
    assert su.PARAM_KINDS == PARAM_KINDS and su.EXCITATIONS == EXCITATIONS


MODEL_FILES = sorted(p for p in glob.glob(str(ROOT / "examples" / "*.toml"))
                     + glob.glob(str(ROOT / "benchmarks" / "load_user" / "*.toml"))
                     if "type" in tomllib.loads(Path(p).read_text()))  # not daemon configs


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: Path(p).name)
def test_every_example_parses(path):
    raw = tomllib.loads(Path(path).read_text())
    spec = load_model_file(path)
    assert spec.name == raw.get("name", Path(path).stem) and spec.type == raw["type"]
    assert spec.element().where == f"{Path(path).name}: [{spec.type}]"


@pytest.mark.parametrize("table, edit, msg", [
    ("hybrid", {"hidden": 0}, r"^beam\.toml: \[hybrid\]\.hidden: expected an integer >= 1, "
     r"got 0$"),
    ("bayes", {"noise": "all"}, r"^beam\.toml: \[bayes\]\.noise: expected one of 'channel', "
     r"'one', got 'all'$"),
    ("bayes", {"prior": {"E": {"transform": "log", "median": 1.0}}},
     r"^beam\.toml: \[bayes\]\.prior\.E\.log_std: missing$"),
    ("bayes", {"data": {"decimate": 0}}, r"^beam\.toml: \[bayes\]\.data\.decimate: expected an "
     r"integer >= 1, got 0$"),
    ("inverse", {"samples": 1}, r"^beam\.toml: \[inverse\]\.samples: expected an integer >= "
     r"2, got 1$"),
    ("inverse", {"features": "fft"}, r"^beam\.toml: \[inverse\]\.features: 'fft' is not a "
     r"feature kind"),
    ("experiment", {"channels": ["d9"]}, r"^beam\.toml: \[experiment\]\.channels\[0\]: 'd9' is "
     r"not a \[\[sensors\]\] name"),
    ("experiment", {"rate": 0.0}, r"^beam\.toml: \[experiment\]\.rate: 0\.0 is out of range "
     r"\(must be > 0\)"),
    ("parameters", [{"name": "E", "kind": "modulus", "material": "steel", "bounds": [1, 2],
                     "modes": [1, 2]}], r"^beam\.toml: \[\[parameters\]\]\[0\]\.modes: unknown "
     r"key"),
    ("parameters", [{"name": "k", "kind": "spring", "spring": "clamp", "bounds": [1, 2]}],
     r"^beam\.toml: \[\[parameters\]\]\[0\]\.spring: parameter 'k': no \[\[spring\]\] named "
     r"'clamp' \(have: root\)$"),
    ("damage", [{"region": {"box": [[0, 0, 0], [1, 1, 1]]}, "omega": 1.5}],
     r"^beam\.toml: \[\[damage\]\]\[0\]\.omega: 1\.5 is out of range \(must be < 1\)$"),
])
def test_updating_tables_fail_like_the_rest(tmp_path, table, edit, msg):
    """Written as a user would: a model file with one bad value, read by the public loader."""
    raw = copy.deepcopy(KITCHEN)
    raw[table] = {**raw[table], **edit} if isinstance(edit, dict) else edit
    path = tmp_path / "beam.toml"
    path.write_text(_toml(raw))
    with pytest.raises(ModelFileError, match=msg):
        load_model_file(path)


def _toml(v, key="") -> str:
    """A minimal TOML writer for the dicts above (tables, arrays of tables, values)."""
    if not isinstance(v, dict):
        raise TypeError(key)
    scal = {k: x for k, x in v.items() if not isinstance(x, dict)
            and not (isinstance(x, list) and x and all(isinstance(e, dict) for e in x))}
    out = [f"{k} = {_val(x)}" for k, x in scal.items()]
    for k, x in v.items():
        name = f"{key}.{k}" if key else k
        if isinstance(x, dict):
            out += [f"[{name}]", _toml(x, name)]
        elif k not in scal:
            for e in x:
                out += [f"[[{name}]]", _toml(e, name)]
    return "\n".join(out) + "\n"


def _val(x) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, str):
        return '"' + x + '"'
    if isinstance(x, list):
        return "[" + ", ".join(_val(e) for e in x) + "]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k} = {_val(e)}" for k, e in x.items()) + "}"
    return repr(float(x)) if isinstance(x, float) else str(x)


def test_the_toml_writer_round_trips():
    assert tomllib.loads(_toml(KITCHEN)) == KITCHEN


def test_reference_page_is_the_generated_one():
    page = (ROOT / "docs" / "modelfile-reference.md").read_text()
    assert page == reference_markdown() + "\n", \
        "docs/modelfile-reference.md is stale: run python docs/make_readme.py"
    assert "modelfile-reference.md" in (ROOT / "docs" / "modelfile.md").read_text()


def test_the_former_name_calibration_reads_with_a_warning(tmp_path):
    """``[calibration]`` declares the design load: it is read as ``[design_load]``, with a
    FutureWarning naming the new name; the two together are an error."""
    new = spec_from_dict(copy.deepcopy(KITCHEN), "k.toml")
    old = {("calibration" if k == "design_load" else k): v
           for k, v in copy.deepcopy(KITCHEN).items()}
    with pytest.warns(FutureWarning, match=r"k\.toml: \[calibration\] is now called "
                      r"\[design_load\]"):
        spec = spec_from_dict(old, "k.toml")
    assert spec.calibration == new.calibration and spec.calibration.seeds == 2
    assert "design_load" in spec.raw and "calibration" not in spec.raw
    with pytest.raises(ModelFileError, match=r"^k\.toml: \[calibration\]: the former name of "
                       r"\[design_load\], which the file also has"):
        spec_from_dict({**copy.deepcopy(KITCHEN), "calibration": old["calibration"]}, "k.toml")
