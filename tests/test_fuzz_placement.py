"""Fuzz class of the placement files: what ``vsense-offline place`` reads (the model file's
``[placement]`` and ``[[placement.candidates]]``, the ``[[sensors]]`` a candidate may repeat,
``-n`` and ``--for``) and the PLACED.toml it writes and reads back (tests/fuzz.py: seeded
cases, counts printed).

Each case mutates a small valid placement file of a 4-element strip (types, NaN/inf/huge,
empty, duplicates, unknown keys, points off the structure, DOFs that do not move, costs,
budgets, weights, wrong lengths, strain-gauge candidates, text-level damage) and runs
:func:`offline.placement.cli.run_place`, the code behind ``place``. The only acceptable
outcomes: a ``ValueError`` (the model file's error, the estimator's) whose message names the
file (or ``-n``), or a placement that is finite (every predicted NRMSE finite and >= 0, the
chosen names distinct candidates, within the budget) and whose PLACED.toml reads back with
the chosen sensors. No other exception, no case slower than ``CASE_LIMIT_S`` (a hang).

``tests/run.sh --reliability``: 2,000 cases (``VSENSE_FUZZ_EXAMPLES``); the normal tier 40.
"""

import logging
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest

from fuzz import EXTREMES, TOML_TOKENS, run_cases, tier_cases

pytestmark = pytest.mark.fuzz

#: a case slower than this is a hang (a placement on the strip takes ~0.2 s single-threaded)
CASE_LIMIT_S = 20.0

_SHM = "/dev/shm" if Path("/dev/shm").is_dir() else None
_DIR = Path(tempfile.mkdtemp(prefix="vsense-fuzz-place-", dir=_SHM))

# The paper's strip (170 x 13 x 1.2 mm aluminium) as 4 Euler-Bernoulli beams, clamped at
# x = 0 (nodes every 42.5 mm), one force, one output; point samples (placement does not model
# a measurement chain), a smoother with a 10-sample lag, no model-error level: one Riccati
# solution per layout.
HEAD = """name = "strip"
type = "beam"
[materials.aluminium]
E = 69e9
nu = 0.3
rho = 2700.0
[beam]
theory = "euler-bernoulli"
[beam.sections.strip]
material = "aluminium"
rectangle = { b = 0.013, h = 0.0012 }
[[beam.members]]
name = "strip"
section = "strip"
line = { start = [0.0, 0.0, 0.0], end = [0.17, 0.0, 0.0], n = 4 }
orientation = [0.0, 0.0, 1.0]
[acquisition]
converter = "ideal"
[[boundary]]
select = { at = [0.0, 0.0, 0.0] }
[[boundary]]
select = { box = [[0.001, -0.01, -0.01], [0.2, 0.01, 0.01]] }
dofs = ["ux", "uy", "rx", "rz"]
[damping]
ratios = [[34.0, 0.01], [600.0, 0.01]]
[reduction]
method = "gmr+"
modes = 3
[[reduction.masters]]
select = { at = [0.17, 0.0, 0.0] }
dofs = ["uz"]
[[forces]]
name = "F"
select = { at = [0.1275, 0.0, 0.0] }
dof = "uz"
[[outputs]]
name = "d"
select = { at = [0.085, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
[estimator]
rate = 1000.0
method = "smoother"
lag = 10
model_error = 0.0
[design_load]
load = { type = "random", band = [5.0, 160.0], rms = 1.0 }
duration = 1.0
"""

PARAMETERS = """
[[parameters]]
name = "E"
kind = "modulus"
material = "aluminium"
bounds = [60e9, 78e9]
"""


class Raw(str):
    """A TOML value written as is (a hostile token)."""


def toml(v) -> str:
    """One TOML value: Raw tokens as written, Python values as TOML."""
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) \
            else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, dict):
        return "{ " + ", ".join(f'"{k}" = {toml(x)}' for k, x in v.items()) + " }"
    return "[" + ", ".join(toml(x) for x in v) + "]"


def _cand(name, x, dof="uz", kind="displacement", cost=1.0, **kw) -> dict:
    return {"name": name, "select": {"at": [x, 0.0, 0.0]}, "dof": dof, "kind": kind,
            "noise": 0.01, "cost": cost, **kw}


def base_layout() -> tuple[dict, list, list]:
    """``[placement]`` keys, candidates, ``[[sensors]]`` of the valid base file."""
    placement = {"weights": {"F": 1.0, "d": 2.0}, "budget": 3.5}
    cands = [_cand("dz170", 0.17), _cand("az127", 0.1275, kind="acceleration", cost=2.0),
             _cand("dz42", 0.0425), _cand("ry85", 0.085, dof="ry", unit="rad", cost=0.5)]
    return placement, cands, []


def file_text(placement: dict, cands: list, sensors: list, parameters: bool) -> str:
    out = [HEAD, PARAMETERS if parameters else ""]
    for s in sensors:
        out.append("[[sensors]]\n" + "".join(f'"{k}" = {toml(v)}\n' for k, v in s.items()))
    out.append("[placement]\n" + "".join(f'"{k}" = {toml(v)}\n' for k, v in placement.items()))
    for c in cands:
        out.append("[[placement.candidates]]\n"
                   + "".join(f'"{k}" = {toml(v)}\n' for k, v in c.items()))
    return "\n".join(out)


_TOKENS = [Raw(t) for t in TOML_TOKENS] + [Raw(toml(float(x))) for x in EXTREMES]

#: hostile values per key, besides the generic tokens
_VALUES = {
    "select": [{"at": [0.0, 0.0, 0.0]},            # the clamped node: nothing moves
               {"at": [5.0, 0.0, 0.0]},            # off the structure
               {"at": [0.17, 0.0]}, {"at": []},    # wrong lengths
               {"at": [float("nan"), 0.0, 0.0]}, {"at": [1e308, 0.0, 0.0]},
               {"box": [[0.0, -1.0, -1.0], [1.0, 1.0, 1.0]]},   # every node
               {"box": [[2.0, 2.0, 2.0], [3.0, 3.0, 3.0]]},     # no node
               {"at": [0.17, 0.0, 0.0], "tol": 1e300}, {"at": [0.17, 0.0, 0.0], "x": 1}, {}],
    "dof": ["ux", "rz", "rx", "uy", "uz", "ry", "", "q", "UZ"],   # ux..rz: clamped everywhere
    "kind": ["velocity", "acceleration", "strain", "stress", "force", "", "x"],
    "unit": ["m", "", "rad", "microstrain", "furlong", "x" * 5000],
    "noise": [0.0, -1.0, 1e300, 1e-300, 5e-324, 1.0, 1e6],
    "noise_std": [0.0, 1e-300, 1e300, -1.0, 1e-3],
    "cost": [0.0, -1.0, 1e-300, 1e300, 3.5, 100.0],
    "name": ["", " ", "F", "d", "dz170", "time", "flags", "a,b", "x" * 300, "\u00e9"],
    "weights": [{}, {"F": 0.0, "d": 0.0}, {"F": 1.0}, {"G": 1.0}, {"F": -1.0},
                {"F": 1e300, "d": 1e-300}, {"d": 0.0}, [1.0, 2.0]],
    "budget": [0.0, -1.0, 1e-300, 0.5, 1.0, 1e300, 3.5],
    "criterion": ["log", "linear", "", "max"],
    "noise_model": ["relative", "absolute", "", "x"],
}


def _value(d, key):
    pool = _VALUES.get(key, [])
    return d.choice(pool) if pool and d.int(0, 2) else d.choice(_TOKENS)


def _gauge(d, name) -> dict:
    g = {"name": name, "kind": "strain", "at": [d.choice([0.02, 0.0425, 0.1, 0.0]), 0.0, 0.0],
         "unit": "microstrain", "noise": 0.01, "cost": 1.0}
    if d.bool():
        g["surface"] = d.choice(["top", "bottom", "", "x"])
    return g


def mutate(d) -> tuple[str, int, str, str]:
    """A mutated placement file: (text, n, target, what was mutated)."""
    placement, cands, sensors = base_layout()
    parameters, target, n, what = False, "estimation", 2, []
    for _ in range(d.int(1, 3)):
        op = d.choice(["cand", "cand", "cand", "delkey", "dup", "none", "placement",
                       "placement", "gauge", "sensor", "n", "calibration", "text"])
        what.append(op)
        c = d.choice(cands) if cands else None
        if op == "cand" and c is not None:
            key = d.choice(list(_VALUES)[:8] + ["colour"])
            c[key] = _value(d, key)
        elif op == "delkey" and c is not None:
            c.pop(d.choice(sorted(c)), None)
        elif op == "dup" and c is not None:
            cands.append(dict(c) if d.bool() else {**c, "name": f"{c.get('name', '')}b"})
        elif op == "none":
            cands.clear()
        elif op == "placement":
            key = d.choice(["weights", "budget", "criterion", "noise_model", "candidates",
                            "colour"])
            if key == "candidates":
                placement["candidates"] = d.choice([Raw("[]"), Raw('"x"'), Raw("1")])
            else:
                placement["noise" if key == "noise_model" else key] = _value(d, key)
        elif op == "gauge":
            g = _gauge(d, d.choice(["sg20", "dz42", "sg"]))
            if d.bool():
                key = d.choice(["at", "unit", "noise", "cost", "surface", "row", "colour"])
                g[key] = _value(d, key) if key != "at" else d.choice(_VALUES["select"])
            cands.append(g)
        elif op == "sensor" and c is not None:
            s = {k: v for k, v in c.items() if k != "cost"}
            if d.bool():
                s["noise"] = 0.02  # the same name, another noise: an error
            sensors.append(s)
        elif op == "n":
            n = d.choice([0, -1, 1, 3, 4, 5, 6, 10**9])
        elif op == "calibration":
            parameters, target = d.bool() or d.bool(), "calibration"
    text = file_text(placement, cands, sensors, parameters)
    if "text" in what:
        head, sep, tail = text.partition("[placement]")
        text = head + d.mutated_text(sep + tail, [str(t) for t in _TOKENS])
    return text, n, target, "+".join(what)


@pytest.fixture(scope="module", autouse=True)
def _quiet():
    """Placement logs nothing by design on refusal; one BLAS thread: the strip's matrices
    are 10 x 10, where threads only cost (0.11 s a placement instead of 3 s on a busy host)."""
    import scipy.linalg  # noqa: F401 - loads its own BLAS first: the limit covers the
    from threadpoolctl import threadpool_limits  # libraries loaded when it is entered

    logging.disable(logging.CRITICAL)
    with threadpool_limits(limits=1, user_api="blas"):
        yield
    logging.disable(logging.NOTSET)


def check_placed(res: dict, p: Path, out: Path, n: int, target: str) -> str:
    """The invariants of an accepted placement; its outcome label."""
    from offline.model import load_model_file

    spec = load_model_file(p)
    cands = {c.name: c for c in spec.placement.candidates}
    names = res["names"]
    assert len(set(names)) == len(names) <= n and set(names) <= set(cands), names
    budget = spec.placement.budget
    if budget is not None:
        assert sum(cands[x].cost for x in names) <= budget * (1 + 1e-9), (names, budget)
    if target == "calibration":
        assert np.isfinite(res["std"]).all() and (res["std"] >= 0).all(), res["std"]
    else:
        e = res["placement"].nrmse
        assert np.isfinite(e).all() and (e >= 0).all(), f"predicted NRMSE {e}"
        assert all(np.isfinite(v) for v in res["blind"].values()), res["blind"]
    back = load_model_file(out)
    assert {s.name for s in back.sensors} >= set(names)
    return f"placed ({target})" if names else f"nothing placed ({target}, budget)"


@pytest.mark.timeout(5400)  # 2,000 cases: ~0.2-1 s each on a busy 2-core host
def test_fuzz_placement_files(request):
    """The placement file, ``-n`` and ``--for`` through :func:`run_place` (the figures of
    every 25th case drawn: they cost ~1 s and read only the result checked here)."""
    from offline.placement.cli import run_place

    p, out = _DIR / "place.toml", _DIR / "placed.toml"
    p.write_text(file_text(*base_layout(), False))
    res = run_place(p, 2, out, progress=False, say=lambda *a: None, figures=False)
    assert check_placed(res, p, out, 2, "estimation") == "placed (estimation)"
    seen = []

    def case(d):
        text, n, target, what = mutate(d)
        p.write_text(text)
        out.unlink(missing_ok=True)
        figures = len(seen) % 25 == 0
        seen.append(what)
        try:
            res = run_place(p, n, out, target=target, progress=False, say=lambda *a: None,
                            figures=figures, report=_DIR)
        except ValueError as e:  # ModelFileError, EstimatorError: the CLI's exits 2 and 3
            msg = str(e)
            assert p.name in msg or msg.startswith("-n"), f"{what}: error without the file: {msg}"
            return "refused"
        return check_placed(res, p, out, n, target)

    counts = run_cases("placement", case, tier_cases(request), limit_s=CASE_LIMIT_S)
    assert counts.get("refused", 0) > 0 and counts.get("placed (estimation)", 0) > 0


# ------------------------------------------------------------ regressions the class found
def _write(tmp_path, placement=None, cands=None, sensors=(), parameters=False) -> Path:
    pl, cs, _ = base_layout()
    p = tmp_path / "m.toml"
    p.write_text(file_text(pl if placement is None else placement,
                           cs if cands is None else cands, list(sensors), parameters))
    return p


def test_placed_file_with_the_budget_spent_reads_back(tmp_path):
    """budget 0.5 buys only ry85 (cost 0.5): PLACED.toml's candidates left all cost more,
    which once made the written file unreadable ("budget below the cheapest candidate")."""
    from offline.model import load_model_file
    from offline.placement.cli import run_place

    p = _write(tmp_path, placement={"budget": 0.5})
    res = run_place(p, 2, tmp_path / "placed.toml", progress=False, say=lambda *a: None,
                    figures=False)
    assert res["names"] == ["ry85"]
    back = load_model_file(tmp_path / "placed.toml")
    assert [s.name for s in back.sensors] == ["ry85"] and back.placement.placed == ("ry85",)
    again = run_place(tmp_path / "placed.toml", 1, tmp_path / "again.toml", progress=False,
                      say=lambda *a: None, figures=False)
    assert again["names"] == []  # the budget is spent: nothing more, no error


@pytest.mark.parametrize("noise_std,msg", [
    (1e300, r"\[\[placement.candidates\]\]\[0\]: dz170: its noise variance \(noise_std "
            r"1e\+300, squared\) is inf"),
    (1e-300, r"\[\[placement.candidates\]\]\[0\]: dz170: its noise variance \(noise_std "
             r"1e-300, squared\) is 0"),
    (0.0, r"\[\[placement.candidates\]\]\[0\]\.noise_std: 0.0 is out of range "
          r"\(must be > 0\)")])
def test_a_noise_variance_that_is_not_finite_positive_is_refused(tmp_path, noise_std, msg):
    """noise_std 1e300 once gave NaN predicted errors (overflow), 1e-300 and 0 a candidate
    that "does not respond to the forces"."""
    from offline.placement.cli import run_place

    pl, cs, _ = base_layout()
    cs[0]["noise_std"] = noise_std
    p = _write(tmp_path, cands=cs)
    with pytest.raises(ValueError, match=msg) as e:
        run_place(p, 2, tmp_path / "o.toml", progress=False, say=lambda *a: None,
                  figures=False)
    assert p.name in str(e.value)


def test_noise_std_of_a_placed_candidate_is_written_and_matches(tmp_path):
    """The written sensor keeps the candidate's noise_std (it was dropped: the build then
    used the relative noise), and it still counts as placed when read back."""
    from offline.model import load_model_file
    from offline.placement.cli import run_place

    pl, cs, _ = base_layout()
    for c in cs:
        c["noise_std"] = 1e-6 if c["kind"] == "displacement" else 1e-2
    p = _write(tmp_path, cands=cs)
    res = run_place(p, 1, tmp_path / "placed.toml", progress=False, say=lambda *a: None,
                    figures=False)
    back = load_model_file(tmp_path / "placed.toml")
    (s,) = back.sensors
    assert s.name == res["names"][0] and s.noise_std == {c["name"]: c["noise_std"]
                                                         for c in cs}[s.name]
    assert back.placement.placed == (s.name,)


@pytest.mark.parametrize("edit,msg", [
    ({"name": "time"}, r"\[\[placement.candidates\]\]\[0\]\.name: 'time' is reserved"),
    ({"name": "dz_std"}, r"\[\[placement.candidates\]\]\[0\]\.name: 'dz_std' is reserved")])
def test_a_reserved_candidate_name_is_refused_when_read(tmp_path, edit, msg):
    """A candidate named like a CSV column was accepted and its PLACED.toml refused."""
    from offline.model import load_model_file
    from offline.model.spec import ModelFileError

    pl, cs, _ = base_layout()
    cs[0].update(edit)
    with pytest.raises(ModelFileError, match=msg):
        load_model_file(_write(tmp_path, cands=cs))


def test_every_weight_zero_is_refused_naming_the_file(tmp_path):
    from offline.model import load_model_file
    from offline.model.spec import ModelFileError

    p = _write(tmp_path, placement={"weights": {"F": 0.0, "d": 0.0}})
    with pytest.raises(ModelFileError, match=r"m\.toml: \[placement\]\.weights: every"):
        load_model_file(p)


def test_calibration_placement_needs_n_at_least_one(tmp_path):
    """``--for calibration -n 0`` once wrote PLACED.toml with nothing placed and exit 0."""
    from offline.placement.cli import run_place

    p = _write(tmp_path, parameters=True)
    with pytest.raises(ValueError, match=r"^-n must be >= 1, got 0"):
        run_place(p, 0, tmp_path / "o.toml", target="calibration", progress=False,
                  say=lambda *a: None)
    assert not (tmp_path / "o.toml").exists()
