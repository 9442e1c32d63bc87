"""Fuzz class of the command line: the public commands (``vsense-offline inspect / build /
simulate / score / limit / place / calibrate / fatigue``, ``vsense-edge check-config /
replay``) with fuzzed argv and fuzzed small input files (the mutators of tests/fuzz.py and
tests/test_fuzz_surfaces.py), each case through the command's entry function in-process
(:func:`offline.cli.main`, :func:`edge.cli.main`; ``SystemExit`` caught, stdout and stderr
captured), and a sample as real subprocesses with the same exit code and the same last line
of stderr (the in-process path is the same code).

The rule (docs/cli.md): exit 0 with finite output (the written files read back finite, no
``nan``/``inf`` in what is printed), or the command's documented exit code with a message on
the last line of stderr naming a file or option of the command line; never a Python
traceback (an exception escaping the entry function, or ``Traceback`` on stderr), never a
case slower than ``CASE_LIMIT_S`` (a hang).

Inputs stay tiny: the 4-element strip of tests/test_fuzz_placement.py and a small smoother
bundle (tests/helpers.py). A valid build or limit of the strip still computes the MMSE
accuracy limit (an FIR bound of 2,500 samples, ~1-20 s by the host's load), so those commands
mostly get mutated files; a case whose command line and input files repeat an earlier case
byte for byte is not run again (its outcome is counted again).

``tests/run.sh --reliability``: 2,000 cases and 20 subprocesses; the normal tier 40 and 2.
"""

import contextlib
import hashlib
import io
import json
import logging
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from edge.daemon.config import DEFAULT_PATH
from fuzz import EXTREMES, run_cases, tier_cases
from test_fuzz_placement import HEAD, PARAMETERS
from test_fuzz_surfaces import _arrays, _mutated_bundle, _save

pytestmark = pytest.mark.fuzz

#: a case slower than this is a hang (a valid build of the strip: ~1-40 s by the host's load)
CASE_LIMIT_S = 120.0

ROOT = Path(__file__).resolve().parents[1]
_SHM = "/dev/shm" if Path("/dev/shm").is_dir() else None

SENSOR = """[[sensors]]
name = "dz170"
select = { at = [0.17, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
noise = 0.01
"""
CANDIDATES = """[placement]
[[placement.candidates]]
name = "dz42"
select = { at = [0.0425, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
noise = 0.01
[[placement.candidates]]
name = "az127"
select = { at = [0.1275, 0.0, 0.0] }
dof = "uz"
kind = "acceleration"
noise = 0.01
"""

#: exit codes each command documents (docs/cli.md); argparse's usage errors are 2
CODES = {"inspect": {2, 3}, "build": {2, 3}, "simulate": {2, 3}, "score": {2},
         "limit": {2, 3}, "place": {2, 3}, "calibrate": {2, 4, 5}, "fatigue": {2},
         "check-config": {2, 3}, "replay": {2, 3, 6}}
EDGE = ("check-config", "replay")


@pytest.fixture(scope="module")
def ws():
    """The workspace: model files, a bundle, its edge config, a measurement CSV, a
    force-and-response record, estimates and truth CSVs (each written once)."""
    from helpers import numpy_smoother_bundle

    d = Path(tempfile.mkdtemp(prefix="vsense-fuzz-cli-", dir=_SHM))
    rng = np.random.default_rng(0)
    (d / "model.toml").write_text(HEAD + SENSOR + CANDIDATES)
    (d / "params.toml").write_text(HEAD + SENSOR + PARAMETERS)
    b = numpy_smoother_bundle()
    b.save(d / "b.npz")
    ch = [c.name for c in b.channels]
    t = np.arange(600) * b.dt
    y = 1e-5 * rng.standard_normal((t.size, len(ch)))
    _csv(d / "meas.csv", ["time"] + ch, np.column_stack([t, y]))
    F = rng.standard_normal(t.size)
    resp = 1e-4 * np.convolve(F, np.exp(-np.arange(30) / 5.0))[:t.size]
    _csv(d / "rec.csv", ["time", "F", "dz170"], np.column_stack([t, F, resp]))
    E = F + 0.1 * rng.standard_normal(t.size)
    _csv(d / "est.csv", ["time", "F", "F_std", "flags"],
         np.column_stack([t, E, 0.1 + 0 * t, 0 * t]))
    _csv(d / "truth.csv", ["time", "F"], np.column_stack([t, F]))
    cfg = (ROOT / "examples" / "my_beam_edge.toml").read_text()
    cfg = cfg.replace('path = "my_beam.npz"', f'path = "{d / "b.npz"}"')
    cfg = cfg.replace('name = "d_tip"', f'name = "{ch[0]}"')
    cfg = cfg.replace('dir = "recordings"', f'dir = "{d / "rec"}"')
    (d / "edge.toml").write_text(cfg)
    return d


def _csv(p: Path, head, rows) -> None:
    p.write_text(",".join(head) + "\n" + "\n".join(",".join(repr(float(v)) for v in r)
                                                   for r in rows) + "\n")


def _templates(w: Path) -> dict:
    """argv of each command on the workspace's valid inputs (``@`` marks an output path)."""
    m, p = str(w / "model.toml"), str(w / "params.toml")
    return {
        "inspect": ["inspect", m, "--modes", "3"],
        "build": ["build", m, "-o", "@b.npz", "--quiet", "--no-maps"],
        "simulate": ["simulate", m, "-o", "@sim", "--duration", "0.3", "--quiet",
                     "--load", "random", "--band", "5", "160", "--chain", "ideal"],
        "score": ["score", str(w / "est.csv"), str(w / "truth.csv"), "--band", "1", "100"],
        "limit": ["limit", m, "--quiet", "--delay", "0"],
        "place": ["place", m, "-n", "1", "-o", "@placed.toml", "--quiet"],
        "calibrate": ["calibrate", p, "--data", str(w / "rec.csv"), "-o", "@cal", "--quiet",
                      "--no-kfold"],
        "fatigue": ["fatigue", str(w / "est.csv"), "--column", "F", "--curve", "EN-71",
                    "--unit", "MPa", "-o", "@fat"],
        "check-config": ["check-config", str(w / "edge.toml"), "--bundle"],
        "replay": ["replay", str(w / "meas.csv"), "--bundle", str(w / "b.npz"), "-o",
                   "@est.csv"],
    }


#: commands whose valid run is expensive (the accuracy limit, a calibration, figures):
#: chosen less often, and their input file is always mutated
HEAVY = ("build", "limit", "place", "calibrate", "fatigue")
_WEIGHTS = {"inspect": 3, "simulate": 3, "score": 3, "check-config": 3, "replay": 3,
            "build": 2, "limit": 1, "place": 1, "calibrate": 1, "fatigue": 1}
_CMDS = [c for c, k in _WEIGHTS.items() for _ in range(k)]

_NUM = [repr(float(x)) for x in EXTREMES] + ["0", "-1", "10", "1e9", "x", "", "1", "3", "0.5"]
_OPTS = ["--colour", "-x", "--", "-", "--quiet", "--help", "--version", "-o", "--bundle"]


def _mutated_file(d, src: Path, dst: Path, w: Path) -> None:
    """``dst``: a mutated copy of ``src`` (model/config text, CSV, bundle)."""
    if src.suffix == ".npz":
        from edge.bundle import Bundle

        _save(_mutated_bundle(d, _arrays(Bundle.load(src))), dst)
    elif src.suffix == ".csv":
        text = d.mutated_text(src.read_text(), _NUM + [",,", "nan,nan"])
        if d.int(0, 3) == 0:
            text = d.mutated_bytes(text.encode()).decode("utf-8", "replace")
        dst.write_text(text)
    else:
        dst.write_text(d.mutated_text(src.read_text()))


def mutate(d, w: Path, cmd: str, out: Path) -> list:
    """The argv of one case: the template of ``cmd``, 1..3 of its tokens or input files
    mutated (a heavy command's input file always)."""
    argv = [a.replace("@", str(out) + "/") if a.startswith("@") else a
            for a in _templates(w)[cmd]]
    inputs = [i for i, a in enumerate(argv) if a.startswith(str(w)) and _is_file(a)]
    ops = ["file"] if cmd in HEAVY and inputs else []
    ops += [d.choice(["file", "value", "value", "drop", "dup", "opt", "swap", "path"])
            for _ in range(d.int(0, 2))]  # none: the valid command line
    for op in ops:
        i = d.int(1, len(argv) - 1)
        inputs = [k for k, a in enumerate(argv) if a.startswith(str(w)) and _is_file(a)]
        if op == "file" and inputs:
            j = d.choice(inputs)
            src = Path(argv[j])
            dst = out / f"in{src.suffix}"
            _mutated_file(d, src, dst, w)
            argv[j] = str(dst)
        elif op == "value":
            argv[i] = d.choice(_NUM) if d.bool() else d.absurd()
        elif op == "drop" and len(argv) > 1:
            del argv[i]
        elif op == "dup":
            argv.insert(i, argv[i])
        elif op == "opt":
            argv.insert(i, d.choice(_OPTS))
        elif op == "swap" and len(argv) > 2:
            k = d.int(1, len(argv) - 1)
            argv[i], argv[k] = argv[k], argv[i]
        elif op == "path":
            # no /dev or /proc path: a command run as root may write there (an output
            # renamed over /dev/null made it a regular file)
            argv[i] = d.choice([str(out / "missing.toml"), str(out), str(w / "b.npz"),
                                str(w / "meas.csv"), str(w / "edge.toml"), ""])
    return [a.replace("\x00", "") for a in argv]  # execve takes no NUL in an argument


def run_inprocess(argv: list, cwd: Path) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of one command run by its entry function."""
    from edge.cli import main as edge_main
    from offline.cli import main as offline_main

    main = edge_main if argv and argv[0] in EDGE else offline_main
    so, se = io.StringIO(), io.StringIO()
    # a relative path of a mutated command line lands in the case directory
    with contextlib.chdir(cwd), contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        try:
            rc = main(list(argv))
        except SystemExit as e:  # argparse (usage errors 2, --help/--version 0)
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return int(rc or 0), so.getvalue(), se.getvalue()


_NONFINITE = re.compile(r"(?<![\w.])[-+]?(nan|inf)(?![\w.])", re.IGNORECASE)


def check_outcome(cmd: str, argv: list, rc: int, out: str, err: str, odir: Path) -> str:
    """The rule of the module docstring; the outcome label."""
    assert "Traceback" not in err, f"{argv}: a traceback on stderr:\n{err[-2000:]}"
    if rc == 0:
        if "--help" in argv or "--version" in argv or "-h" in argv:
            return f"{cmd} exit 0 (help)"
        # "0 NaN": score's count of rows with NaN; a score of NaN where no row was usable
        # (score's table says "0 scored")
        # (an output path named "nan" is printed as given)
        text = re.sub(r"\b\d+ NaN\b", "", out)
        for a in sorted(argv[1:], key=len, reverse=True):
            text = text.replace(a, "") if a.strip() else text
        if not (cmd == "score" and re.search(r"\b0 scored\b", out)):
            assert not _NONFINITE.search(text), f"{argv}: non-finite output:\n{out[-2000:]}"
        _check_files(cmd, odir)
        return f"{cmd} exit 0"
    assert rc in CODES[cmd], f"{argv}: exit {rc}, not one of {sorted(CODES[cmd])}:\n{err[-2000:]}"
    last = err.strip().splitlines()[-1] if err.strip() else ""
    # a file of the command line, the default config (check-config without a path), an option
    named = [x for a in argv[1:] if a.strip() for x in (a, Path(a).name)] + [
        str(DEFAULT_PATH), "argument", "option", "usage"]
    if "" in argv[1:]:  # an empty file name: said so, or (where not yet) named "." (Path(""))
        named += ["file name is empty", ".:"]
    # a blank or empty name, as given (known weakness: an empty one shows as nothing)
    named += [f"{x}: {a}: " for a in argv[1:] if not a.strip() for x in ("error", cmd)]
    # (a name with a line break in it spreads the message over the lines it ends)
    assert last and any(n and (n in last or "\n" in n and n in err) for n in named), \
        f"{argv}: exit {rc} without a message naming a file or option: {last!r}"
    return f"{cmd} exit {rc}"


def _check_files(cmd: str, odir: Path) -> None:
    """The files an accepted command wrote read back finite."""
    from edge.bundle import Bundle

    for p in odir.rglob("*"):
        if p.name.startswith("in.") or not p.is_file() or p.parent.name == "w":
            continue
        if p.suffix == ".npz":
            Bundle.load(p)
        elif p.suffix == ".csv":
            a = np.genfromtxt(p, delimiter=",", names=True)
            cols = [c for c in a.dtype.names if c not in ("flags",)]
            if "flags" in a.dtype.names:  # estimates: a non-finite value carries a flag
                bad = ~np.all([np.isfinite(a[c]) for c in cols], axis=0)
                assert np.all(a["flags"][bad] != 0), f"{p}: non-finite estimates unflagged"
            else:
                assert all(np.isfinite(a[c]).all() for c in cols), f"{p}: non-finite values"
        elif p.suffix == ".json":
            json.loads(p.read_text(), parse_constant=_no_constant)


def _no_constant(c):
    raise AssertionError(f"{c} in a JSON file written")


@pytest.fixture(scope="module", autouse=True)
def _quiet():
    """Refusals log by design; one BLAS thread (the strip's matrices are small)."""
    import scipy.linalg  # noqa: F401 - loads its own BLAS first: the limit covers the
    from threadpoolctl import threadpool_limits  # libraries loaded when it is entered

    logging.disable(logging.CRITICAL)
    with threadpool_limits(limits=1, user_api="blas"):
        yield
    logging.disable(logging.NOTSET)


def _is_file(a: str) -> bool:
    try:  # a name longer than NAME_MAX raises
        return bool(a) and not a.startswith(("/proc", "/dev")) and Path(a).is_file()
    except OSError:
        return False


def _case_key(argv: list) -> str:
    h = hashlib.sha256("\0".join(argv).encode())
    for a in argv:
        if _is_file(a):
            h.update(Path(a).read_bytes())
    return h.hexdigest()


@pytest.mark.timeout(5400)  # 2,000 cases: ~0.5-1 s each on a busy 2-core host
def test_fuzz_cli_in_process(request):
    """Fuzzed argv and input files through the entry functions, in-process."""
    base = Path(tempfile.mkdtemp(prefix="vsense-fuzz-cli-run-", dir=_SHM))
    w = request.getfixturevalue("ws")
    seen: dict = {}

    def case(d):
        cmd = d.choice(_CMDS)
        out = base / "o"
        argv = mutate(d, _clean(out, w), cmd, out)
        key = _case_key(argv)
        if key in seen:
            return seen[key]
        rc, so, se = run_inprocess(argv, out)
        seen[key] = check_outcome(cmd, argv, rc, so, se, out)
        return seen[key]

    counts = run_cases("cli", case, tier_cases(request), limit_s=CASE_LIMIT_S)
    print(f"fuzz cli: {len(seen)} distinct command lines run")
    assert sum(v for k, v in counts.items() if k.endswith("exit 0")) > 0
    assert sum(v for k, v in counts.items() if k.endswith("exit 2")) > 0


def _clean(out: Path, w: Path) -> Path:
    """An empty case directory ``out`` with a fresh copy of the workspace ``w`` in
    ``out/w`` (a mutated command line may name an input as its output); the copy's path."""
    import shutil

    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(w, out / "w")
    return out / "w"


def test_fuzz_cli_subprocess_matches_in_process(request):
    """A sample of the class's cases as real processes (``python -m offline.cli`` /
    ``edge.cli``): the same exit code and last stderr line as in-process, no traceback."""
    w = request.getfixturevalue("ws")
    base = Path(tempfile.mkdtemp(prefix="vsense-fuzz-cli-sub-", dir=_SHM))
    n = tier_cases(request, sample=2, full=20)

    def case(d):
        cmd = d.choice([c for c in _CMDS if c not in HEAVY])
        out = base / "o"
        argv = mutate(d, _clean(out, w), cmd, out)
        rc, so, se = run_inprocess(argv, out)
        label = check_outcome(cmd, argv, rc, so, se, out)  # the same inputs for the process
        mod = "edge.cli" if argv[0] in EDGE else "offline.cli"
        r = subprocess.run([sys.executable, "-m", mod, *argv], capture_output=True,
                           text=True, timeout=CASE_LIMIT_S, cwd=str(out))
        assert "Traceback" not in r.stderr, r.stderr[-2000:]
        assert r.returncode == rc, f"{argv}: exit {r.returncode} as a process, {rc} in-process"
        last = (se.strip().splitlines() or [""])[-1]
        plast = (r.stderr.strip().splitlines() or [""])[-1]
        if rc:
            assert plast == last, f"{argv}: {plast!r} as a process, {last!r} in-process"
        return label

    counts = run_cases("cli_subprocess", case, n, limit_s=CASE_LIMIT_S)
    assert sum(counts.values()) == n


# ------------------------------------------------------------ regressions the class found
@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="Linux /proc")
@pytest.mark.parametrize("cmd", ["score", "replay"])
def test_a_file_that_opens_but_cannot_be_read_is_exit_2_or_6_naming_it(ws, tmp_path, cmd):
    """/proc/self/mem opens and fails on read (EIO, as a failing disk): score raised the
    OSError as a traceback."""
    argv = {"score": ["score", str(ws / "est.csv"), "/proc/self/mem"],
            "replay": ["replay", "/proc/self/mem", "--bundle", str(ws / "b.npz")]}[cmd]
    rc, out, err = run_inprocess(argv, tmp_path)
    assert rc == {"score": 2, "replay": 6}[cmd] and "Traceback" not in err
    assert "/proc/self/mem" in err.strip().splitlines()[-1], err


def test_replay_to_a_directory_is_exit_2_naming_it(ws, tmp_path):
    """``replay -o DIR`` raised IsADirectoryError from the final rename (a traceback); now
    exit 2 with the path, no partial file left."""
    rc, out, err = run_inprocess(["replay", str(ws / "meas.csv"), "--bundle",
                                  str(ws / "b.npz"), "-o", str(tmp_path)], tmp_path)
    assert rc == 2 and "Traceback" not in err
    assert f"-o {tmp_path}: cannot write the estimates" in err.strip().splitlines()[-1], err
    assert not Path(f"{tmp_path}.tmp").exists()


@pytest.mark.parametrize("band", [["160", "5"], ["5", "5.1"]])
def test_simulate_with_a_band_that_holds_no_frequency_is_exit_2(ws, tmp_path, band):
    """``--band 160 5`` wrote an all-zero load (SNR nan) with exit 0; a band narrower than
    the record's frequency step (0.3 s: 3.3 Hz) the same."""
    rc, out, err = run_inprocess(["simulate", str(ws / "model.toml"), "-o", str(tmp_path / "s"),
                                  "--duration", "0.3", "--quiet", "--band", *band, "--chain",
                                  "ideal"], tmp_path)
    last = err.strip().splitlines()[-1]
    assert rc == 2 and ("--band 160 5" in last or "band [5.0, 5.1] Hz holds no" in last), err
    assert not (tmp_path / "s_measurement.csv").exists()


def test_limit_with_a_delay_beyond_its_memory_names_the_option(ws, tmp_path):
    """``limit --delay 1e9`` was refused as "fixed-lag limit: need 0 <= lag < memory ..."
    without the option."""
    rc, out, err = run_inprocess(["limit", str(ws / "model.toml"), "--quiet", "--delay", "1e9"],
                                 tmp_path)
    assert rc == 2 and err.strip().splitlines()[-1].startswith(
        "vsense-offline limit: error: --delay 1e+09: fixed-lag limit"), err


def test_replay_to_dev_null_keeps_it_a_device(ws, tmp_path):
    """``replay -o /dev/null`` wrote /dev/null.tmp and renamed it over /dev/null: as root,
    /dev/null became a regular file (found by this class). A device is written directly."""
    null = Path("/dev/null")
    if not null.is_char_device():
        pytest.skip("no /dev/null device")
    rc, out, err = run_inprocess(["replay", str(ws / "meas.csv"), "--bundle",
                                  str(ws / "b.npz"), "-o", str(null)], tmp_path)
    assert rc == 0 and null.is_char_device() and not Path("/dev/null.tmp").exists(), err
