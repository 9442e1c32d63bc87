"""Fuzz classes of the surfaces added by the hardening round (records, calibration records,
model files with ``[[parameters]]`` and ``[[placement.candidates]]``, every field of a real
small smoother bundle, hybrid networks and their ``kf_hy_*`` fields), each through the
library's public loader in-process (tests/fuzz.py: seeded cases, counts printed). The only
acceptable outcomes: the loader's own error naming the file, or a result that satisfies the
format's invariants (finite arrays of the declared shape; estimates finite or flagged). No
other exception, no case slower than ``CASE_LIMIT_S`` (a hang).

``tests/run.sh --reliability``: 2,000 cases per class (``VSENSE_FUZZ_EXAMPLES``); the normal
tier a sample of 40."""

import io
import logging
import tempfile
from pathlib import Path

import numpy as np
import pytest

from edge.bundle import Bundle, BundleError, content_hash
from edge.csvio import CsvError
from edge.estimator import Estimator, EstimatorError
from edge.flags import FLAG_WARMUP
from fuzz import EXTREMES, run_cases, tier_cases

pytestmark = pytest.mark.fuzz

#: a case slower than this is a hang (the slowest measured: see the printed counts)
CASE_LIMIT_S = 10.0

ROOT = Path(__file__).resolve().parents[1]
_SHM = "/dev/shm" if Path("/dev/shm").is_dir() else None
_DIR = Path(tempfile.mkdtemp(prefix="vsense-fuzz-surf-", dir=_SHM))


@pytest.fixture(scope="module", autouse=True)
def _quiet():
    logging.disable(logging.CRITICAL)
    yield
    logging.disable(logging.NOTSET)


def _named(e: BaseException, p: Path) -> bool:
    return str(p) in str(e) or p.name in str(e)


# ----------------------------------------------------------------- model files
_MODEL = (ROOT / "examples" / "my_beam.toml").read_text() + """
[[parameters]]
name = "E"
kind = "modulus"
material = "steel"
bounds = [180e9, 240e9]
[[parameters]]
name = "zeta"
kind = "damping_ratio"
bounds = [0.005, 0.05]
modes = [1, 2]
[[placement.candidates]]
name = "dz5"
select = { at = [0.5, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
noise = 0.01
cost = 1.0
"""


def test_fuzz_model_file_parameters_and_placement(request):
    """Model-file fields (every TOML value: tokens of tests/fuzz.py, numeric extremes), a
    ``[[parameters]]`` block and a ``[[placement.candidates]]`` entry, through
    :func:`offline.model.load_model_file` and :func:`offline.inverse.spec.parse_parameters`."""
    from offline.inverse.spec import parse_parameters
    from offline.model import load_model_file

    p = _DIR / "m.toml"
    p.write_text(_MODEL)
    spec = load_model_file(p)  # the base case is valid
    assert len(parse_parameters(spec.raw, str(p))) == 2 and spec.placement is not None
    tokens = ["0", "-1", "1e308", "-1e308", "5e-324", "nan", "inf", "-inf", '"x"', '""',
              "[]", "[1e308, 1e308]", "[nan, 1]", "[1, 0]", "{}", "true", "18446744073709551617",
              '["uz"]', "{ at = [nan, 0, 0] }", "{ at = [1e308, 0, 0] }", "[[1]]"]

    def case(d):
        p.write_text(d.mutated_text(_MODEL, tokens))
        try:
            spec = load_model_file(p)
            params = parse_parameters(spec.raw, str(p))
        except ValueError as e:  # ModelFileError is a ValueError
            assert _named(e, p), f"error without the file: {e}"
            return "refused"
        for q in params:
            lo, hi = q.bounds
            assert np.isfinite(lo) and np.isfinite(hi) and lo < hi, f"bounds {q.bounds}"
        return "accepted"

    counts = run_cases("model_file", case, tier_cases(request), limit_s=CASE_LIMIT_S)
    assert counts.get("refused", 0) > 0 and counts.get("accepted", 0) > 0


# ----------------------------------------------------------------- records
_DT = 0.01


def _record_text(d) -> str:
    """A valid ``time,F,d`` record of 4.5 s at 100 Hz, line-mutated (tokens: extremes)."""
    rng = np.random.default_rng(d.int(0, 10**6))
    nt = 450
    F = rng.standard_normal(nt)
    y = 1e-4 * np.convolve(F, np.exp(-np.arange(30) / 5.0))[:nt] + 1e-6 * rng.standard_normal(nt)
    lines = ["time,F,d"] + [f"{k * _DT!r},{float(F[k])!r},{float(y[k])!r}" for k in range(nt)]
    text = "\n".join(lines) + "\n"
    tokens = [repr(float(x)) for x in EXTREMES] + ["", "x", "1,2,3", "0x10"]
    for _ in range(d.int(0, 3)):
        k = d.int(1, nt)
        cells = lines[k].split(",")
        cells[d.int(0, 2)] = d.choice(tokens)
        lines[k] = ",".join(cells)
    text = "\n".join(lines) + "\n"
    if d.int(0, 3) == 0:
        text = d.mutated_text(text, tokens)
    if d.int(0, 5) == 0:
        text = d.mutated_bytes(text.encode()).decode("utf-8", "replace")
    if d.int(0, 7) == 0:  # a column in another unit, a dead column, a repeated time stamp
        j = d.int(0, 2)
        rows = [r.split(",") for r in text.splitlines()[1:]]
        for r in rows:
            if len(r) > j and r[j]:
                try:
                    r[j] = repr(float(r[j]) * d.choice([0.0, 1e3, 1e-300, -1.0]))
                except ValueError:
                    pass
        text = "\n".join([text.splitlines()[0]] + [",".join(r) for r in rows]) + "\n"
    return text


def test_fuzz_records_for_build_and_calibrate(request):
    """Records as ``build --record`` (:func:`offline.load.read_records`) and ``calibrate`` /
    ``build --hybrid`` (:func:`offline.calibration.data.read_record`) read them."""
    from offline.calibration.data import read_record
    from offline.load import read_records

    p = _DIR / "rec.csv"

    def case(d):
        p.write_text(_record_text(d))
        out = []
        try:
            Y = read_records([p], ["d"], _DT)[0]
            assert Y.ndim == 2 and Y.shape[1] == 1 and np.isfinite(Y).all()
            out.append("load ok")
        except (ValueError, CsvError) as e:
            assert _named(e, p), f"read_records error without the file: {e}"
            out.append("load refused")
        try:
            r = read_record(p, ["F"], ["d"])
            assert np.isfinite(r.F).all() and np.isfinite(r.Y).all() and r.dt > 0
            assert r.F.shape[0] == r.Y.shape[0] and r.used.size >= 8
            out.append("calibration ok")
        except (ValueError, CsvError) as e:
            assert _named(e, p), f"read_record error without the file: {e}"
            out.append("calibration refused")
        return ", ".join(out)

    counts = run_cases("records", case, tier_cases(request), limit_s=CASE_LIMIT_S)
    assert len(counts) >= 3


# ----------------------------------------------------------------- bundle fields
def _arrays(b: Bundle) -> dict:
    with np.load(io.BytesIO(b.to_bytes()), allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _field_value(d, v: np.ndarray):
    """One hostile replacement of a field: another dtype, another shape, NaN, huge, the
    float range's end, an empty array, a string, or the schema version off."""
    k = d.int(0, 9)
    if k == 0 and v.dtype.kind == "f":
        return v.astype(d.choice([np.float32, np.int64, np.complex128, np.float16]))
    if k == 1:
        return np.zeros(tuple(max(0, s + d.choice([-1, 1])) for s in v.shape) or (2,))
    if k == 2 and v.size and v.dtype.kind in "fc":
        w = v.copy()
        w.flat[d.int(0, v.size - 1)] = d.choice([np.nan, np.inf, -np.inf])
        return w
    if k == 3 and v.dtype.kind in "fiu":
        return (v * d.choice([1e200, -1e200, 1e-300, 0.0])).astype(v.dtype) \
            if v.dtype.kind == "f" else np.full(v.shape, d.choice([2**62, -1, 0]), np.int64)
    if k == 4:
        return np.full(v.shape, d.extreme(), dtype=float)
    if k == 5:
        return np.zeros((0,) + v.shape[1:], v.dtype)
    if k == 6:
        return np.array(d.absurd())
    if k == 7:
        return v.reshape(-1) if v.ndim > 1 else v.reshape(1, -1) if v.ndim == 1 else v[None]
    if k == 8:
        return np.array(d.extreme())
    return v.T.copy() if v.ndim == 2 else np.asarray(d.number())


def _mutated_bundle(d, arrays: dict) -> dict:
    a = dict(arrays)
    for _ in range(d.int(1, 2)):
        name = d.choice(sorted(a))
        if name == "content_hash":
            continue
        if name == "schema_version":
            a[name] = np.array(d.choice([0, 9, 99, -1, 2**62, 7]))
        elif d.int(0, 7) == 0:
            del a[name]
        else:
            a[name] = _field_value(d, np.asarray(a[name]))
    if "content_hash" in a and d.int(0, 9):
        a["content_hash"] = np.array(content_hash(a))
    return a


def _save(a: dict, p: Path) -> None:
    buf = io.BytesIO()
    np.savez(buf, **a)
    p.write_bytes(buf.getvalue())


def _run_estimator(p: Path) -> str:
    """Load ``p`` and run 64 samples: the outcome label; any non-finite estimate must be
    flagged."""
    try:
        b = Bundle.load(p)
    except BundleError as e:
        assert _named(e, p), f"BundleError without the file: {e}"
        return "refused (bundle)"
    try:
        est = Estimator(b)
    except (EstimatorError, ValueError, ArithmeticError, np.linalg.LinAlgError) as e:
        # the daemon's load_estimator: exit code 3 with this message, naming the bundle
        assert _named(e, p), f"estimator error without the file: {type(e).__name__}: {e}"
        return "refused (estimator)"
    nch = est.n_channels
    Y = 1e-5 * np.sin(np.arange(64 * nch, dtype=float)).reshape(64, nch)
    F, Z, fl = est.run(Y)
    bad = ~(np.isfinite(F).all(1) & np.isfinite(Z).all(1))
    assert np.all(fl[bad] != 0), "a non-finite estimate without a flag"
    # past the warm-up rows (NaN by design)
    return "accepted (non-finite flagged)" if np.any(bad & (fl & FLAG_WARMUP == 0)) \
        else "accepted"


def test_fuzz_smoother_bundle_fields(request):
    """Every field of a real small smoother bundle (``kf_*`` included) replaced by another
    dtype, shape, NaN, huge values, removed, or the schema version off, through
    :meth:`Bundle.load` and :class:`Estimator`, 64 samples run."""
    from tests.helpers import numpy_smoother_bundle

    base = _arrays(numpy_smoother_bundle())
    p = _DIR / "s.npz"

    def case(d):
        _save(_mutated_bundle(d, base), p)
        return _run_estimator(p)

    counts = run_cases("smoother_bundle", case, tier_cases(request), limit_s=CASE_LIMIT_S)
    assert counts.get("refused (bundle)", 0) > 0 and counts.get("accepted", 0) > 0


def test_fuzz_hybrid_networks_and_fields(request):
    """The hybrid bundle's network (``kf_hy_onnx``: bytes mutated, NaN weights, another input
    or output width, a graph that is not a network) and its ``kf_hy_*`` fields, through the
    bundle loader and the estimator (onnxruntime)."""
    pytest.importorskip("onnx")
    from tests.helpers import numpy_smoother_bundle
    from tests.test_hybrid_guard import _model, _nan_above
    from tests.test_hybrid_edge import _hybrid

    base = _arrays(_hybrid(numpy_smoother_bundle(), gain=0.05))
    good = base["kf_hy_onnx"].tobytes()
    crafted = [_model(ni=3, W1=np.ones((3, 4))), _nan_above(), _model(g="s0"),
               _model(W1=np.full((2, 4), np.nan)), _model(W1=np.full((2, 4), 1e308)), b"",
               b"\x00" * 64]
    p = _DIR / "h.npz"

    def case(d):
        a = dict(base)
        k = d.int(0, 3)
        if k == 0:
            net = d.mutated_bytes(good)
        elif k == 1:
            net = d.choice(crafted)
        else:
            net = good
        a["kf_hy_onnx"] = np.frombuffer(net, np.uint8).copy()
        if k >= 2:
            a = _mutated_bundle(d, {n: v for n, v in a.items()})
            hy = [n for n in a if n.startswith("kf_hy_")]
            if hy and k == 3:
                n = d.choice(hy)
                a[n] = _field_value(d, np.asarray(a[n]))
        a["content_hash"] = np.array(content_hash(a))
        _save(a, p)
        return _run_estimator(p)

    counts = run_cases("hybrid", case, tier_cases(request), limit_s=CASE_LIMIT_S)
    assert counts.get("refused (estimator)", 0) + counts.get("refused (bundle)", 0) > 0
    assert counts.get("accepted", 0) > 0




# ----------------------------------------------------------------- score
def _est_truth(d) -> tuple[str, str]:
    """An estimate file (``time,F,F_std,flags``) and its truth (``time,F``), 300 rows at
    1 kHz, each line-mutated half of the time (tokens: numeric extremes, blanks)."""
    rng = np.random.default_rng(d.int(0, 10**6))
    nt = 300
    T = rng.standard_normal(nt)
    E = T + 0.1 * rng.standard_normal(nt)
    est = ["time,F,F_std,flags"] + [f"{k * 1e-3!r},{float(E[k])!r},0.1,{2 if k < 5 else 0}"
                                    for k in range(nt)]
    tru = ["time,F"] + [f"{k * 1e-3!r},{float(T[k])!r}" for k in range(nt)]
    tokens = [repr(float(x)) for x in EXTREMES] + ["", "x", "nan"]
    est, tru = "\n".join(est) + "\n", "\n".join(tru) + "\n"
    if d.bool():
        est = d.mutated_text(est, tokens)
    if d.bool():
        tru = d.mutated_text(tru, tokens)
    return est, tru


def test_fuzz_score_inputs(request):
    """``vsense-offline score`` (:func:`offline.score.score`) on mutated estimate and truth
    files: its ScoreError naming one of them, or scores that are finite (or NaN where a
    column had no usable row, as the table states)."""
    from offline.score import ScoreError, score

    pe, pt = _DIR / "est.csv", _DIR / "truth.csv"

    def case(d):
        est, tru = _est_truth(d)
        pe.write_text(est)
        pt.write_text(tru)
        try:
            tab = score(pe, pt, band=(1.0, 100.0))
        except ScoreError as e:
            assert _named(e, pe) or _named(e, pt), f"ScoreError without a file: {e}"
            return "refused"
        for r in tab.rows:
            for v in (r.nrmse, r.rms, r.fde_full, r.fde_band):
                assert np.isfinite(v) or (np.isnan(v) and tab.n_used == 0), \
                    f"{r.name}: a score of {v} with {tab.n_used} rows used"
        return "accepted"

    counts = run_cases("score", case, tier_cases(request), limit_s=CASE_LIMIT_S)
    assert counts.get("refused", 0) > 0 and counts.get("accepted", 0) > 0
