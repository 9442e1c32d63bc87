"""Fuzz tier, binary and tabular inputs: bundle loader (+ estimator build), recordings
(.vsr), replay CSV; ``VSENSE_FUZZ_EXAMPLES`` cases each (tests/fuzz.py). The only acceptable
outcomes are the loader's own error naming the file, or a result that satisfies the format's
invariants: no other exception, no silent acceptance of what the format forbids."""

import io
import json
import tempfile
from pathlib import Path

import numpy as np
import pytest

from edge.bundle import Bundle, BundleError, content_hash
from edge.csvio import CsvError, read_table
from edge.daemon.recorder import RecordingError, _header_bytes, read_file, record_dtype
from fuzz import N_EXAMPLES, run_cases
from helpers import chain_bundle

pytestmark = pytest.mark.fuzz

# /dev/shm when there is one: the cases write and read ~10,000 small files
_SHM = "/dev/shm" if Path("/dev/shm").is_dir() else None
_DIR = Path(tempfile.mkdtemp(prefix="vsense-fuzz-", dir=_SHM))
_GOOD = chain_bundle(window=2, kinds=("displacement", "acceleration"))
_GOOD_BYTES = _GOOD.to_bytes()
with np.load(io.BytesIO(_GOOD_BYTES), allow_pickle=False) as _z:
    _ARRAYS = {k: _z[k] for k in _z.files}
_GOOD1 = chain_bundle(window=2, kinds=("displacement",))


def _array(d):
    k = d.int(0, 10)
    if k == 0:
        return np.array(d.number())
    if k == 1:
        return np.array(d.int(-2**63, 2**63 - 1))
    if k == 2:
        return np.array(d.text(30))
    if k == 3:
        return np.zeros((d.int(0, 5), d.int(0, 5)))
    if k == 4:
        return np.arange(d.int(0, 5))
    if k == 5:
        return np.array(json.dumps(d.json()))
    if k == 6:
        return np.asarray([d.uniform(-10, 10) for _ in range(d.int(0, 4))], np.float16)
    if k == 7:
        return np.eye(8).astype(np.complex128)
    if k == 8:
        return np.array(10**6)
    if k == 9:
        return np.array(True)
    return np.full((8, 8), d.number())


def _bundle_bytes(d) -> bytes:
    """A valid bundle with 1..3 fields replaced/removed/added (content hash recomputed, so
    validation goes past the hash check), a meta entry mutated, or raw bytes mutated."""
    kind = d.choice(["fields", "fields", "meta", "bytes"])
    if kind == "bytes":
        return d.mutated_bytes(_GOOD_BYTES)
    a = dict(_ARRAYS)
    if kind == "fields":
        for _ in range(d.int(1, 3)):
            name = d.choice(sorted(a) + ["x_extra"])
            if d.bool() and name in a:
                del a[name]
            else:
                a[name] = _array(d)
    else:
        meta = json.loads(str(a["meta"]))
        key = d.choice(["channels", "forces", "outputs", "discretization", "regularization",
                        "inverse", "name"])
        items = meta.get(key)
        if isinstance(items, list) and items and d.bool():
            i = d.int(0, len(items) - 1)
            items[i] = dict(items[i], **{d.choice(["name", "unit", "node", "dof"]): d.json()})
        else:
            meta[key] = d.json()
        a["meta"] = np.array(json.dumps(meta))
    if "content_hash" in a and d.int(0, 9):
        a["content_hash"] = np.array(content_hash(a))
    buf = io.BytesIO()
    np.savez(buf, **a)
    return buf.getvalue()


def test_fuzz_bundle_loader():
    from edge.estimator import Estimator

    p = _DIR / "b.npz"

    def case(d):
        p.write_bytes(_bundle_bytes(d))
        try:
            b = Bundle.load(p)
        except BundleError as e:
            assert str(p) in str(e)
            return "refused"
        # accepted: the invariants the estimator relies on hold
        n = b.M.shape[0]
        assert b.C.shape == b.K.shape == (n, n) and b.dt > 0 and 1 <= b.window <= 512
        assert b.channels and b.forces and all(0 <= c.dof < n for c in b.channels)
        try:
            Estimator(b)
        except (ValueError, ArithmeticError, np.linalg.LinAlgError):
            return "estimator refused"  # exit code 3 in edge.daemon.app.load_estimator
        return "accepted"

    counts = run_cases("bundle", case)
    assert counts.get("refused", 0) > N_EXAMPLES // 4 and counts.get("accepted", 0) > 0


_VSR_HEADER = {"format": "vsense-recording", "version": 1, "kind": "raw",
               "columns": ["a", "b"], "units": ["m", "m"], "device": "d", "bundle_hash": "",
               "rate": 1000.0, "clock": "monotonic", "t0_unix_ns": 0, "record_size": 33}


def test_fuzz_recording_reader():
    p = _DIR / "r.vsr"

    def case(d):
        h = dict(_VSR_HEADER)
        for _ in range(d.int(0, 3)):
            k = d.choice(sorted(h) + ["extra"])
            if d.bool():
                h.pop(k, None)
            else:
                h[k] = d.json()
        cols = h.get("columns")
        ncol = len(cols) if isinstance(cols, list) and cols else 1
        rec = np.zeros(d.int(0, 20), record_dtype(ncol))
        data = _header_bytes(h) + rec.tobytes()
        if d.bool():
            data = d.mutated_bytes(data)
        p.write_bytes(data)
        try:
            r = read_file(p)
        except RecordingError as e:
            assert str(p) in str(e)
            return "refused"
        assert isinstance(r.columns, list) and all(isinstance(c, str) for c in r.columns)
        assert r.header["record_size"] == record_dtype(len(r.columns)).itemsize
        assert r.values.shape == (r.seq.shape[0], len(r.columns))
        assert 0 <= r.truncated_bytes < r.header["record_size"]
        return "accepted"

    counts = run_cases("vsr", case)
    assert counts.get("refused", 0) > 0 and counts.get("accepted", 0) > 0


_CELLS = ["0", "1.5", "-2e-3", "nan", "inf", "-inf", "", " ", "x", "1e999", "0x10", "1_000",
          "\u00e9", '"1"', "1,2", "\x00", "1e308", "-1e308", "1.7976931348623157e308",
          "5e-324"]


def _csv_bytes(d) -> bytes:
    """Half the cases: a valid ``time,y0[,y1]`` table with 0..2 cells replaced; the others:
    random headers, names, cell values and field counts; 1 in 6 also byte-mutated."""
    if d.bool():
        names = ["y0"] + (["y1"] if d.bool() else [])
        rows = [[repr(k * 1e-3)] + [repr(d.uniform(-1, 1)) for _ in names]
                for k in range(d.int(1, 12))]
        for _ in range(d.int(0, 2)):
            r = d.choice(rows)
            r[d.int(0, len(r) - 1)] = d.choice(_CELLS)
        lines = [",".join(["time"] + names)] + [",".join(r) for r in rows]
    else:
        ncol = d.int(0, 4)
        header = d.choice(["time", "time", "time", "t", "", "time,time"])
        names = [d.choice(["y0", "y0", "y1", "", "time"]) for _ in range(ncol)]
        lines = [",".join([header] + names)]
        t = 0.0
        for _ in range(d.int(0, 12)):
            t += 1e-3
            cells = [repr(t) if d.int(0, 4) else d.choice(_CELLS)]
            cells += [d.choice(_CELLS) if d.int(0, 3) == 0 else "0.5"
                      for _ in range(d.int(max(0, ncol - 1), ncol + 1))]
            lines.append(",".join(cells))
    data = "\n".join(lines).encode()
    return d.mutated_bytes(data) if d.int(0, 5) == 0 else data


def test_fuzz_replay_csv():
    from edge.replay import ReplayError, run_replay

    p = _DIR / "m.csv"

    def case(d):
        p.write_bytes(_csv_bytes(d))
        try:
            t, Y, names = read_table(p)
        except CsvError as e:
            assert str(p) in str(e)
            return "refused"
        assert np.isfinite(t).all() and Y.shape == (t.size, len(names))
        try:
            _, F, Z, fl = run_replay(_GOOD1, t, Y, names, source=str(p))
        except ReplayError as e:
            assert str(p) in str(e)
            return "replay refused"
        assert F.shape[0] == Z.shape[0] <= t.size
        # a non-finite estimate always carries a flag (a 1e308 cell overflowed unflagged)
        bad = ~(np.isfinite(F).all(1) & np.isfinite(Z).all(1))
        assert np.all(fl[bad] != 0)
        return "accepted non-finite" if bad.any() else "accepted"

    counts = run_cases("csv", case)
    assert counts.get("refused", 0) > 0 and counts.get("accepted", 0) > 0
