"""Bundle format: round trip, hash, and a clear error naming the field for each defect."""

import json
import zipfile

import numpy as np
import pytest

from edge.bundle import Bundle, BundleError, content_hash
from tests.helpers import chain_bundle


def _rewrite(path, **changes):
    """Rewrite a saved bundle with some arrays changed, re-hashing unless told not to."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    rehash = changes.pop("_rehash", True)
    arrays.update(changes)
    for k in [k for k, v in changes.items() if v is None]:
        del arrays[k]
    if rehash:
        arrays["content_hash"] = np.array(content_hash(arrays))
    np.savez(path, **arrays)


def test_round_trip(tmp_path):
    b = chain_bundle(window=3)
    b.extras["blob"] = np.frombuffer(b"onnx-bytes", dtype=np.uint8)
    h = b.save(tmp_path / "b.npz")
    c = Bundle.load(tmp_path / "b.npz")
    assert c.content_hash == h and len(h) == 64
    np.testing.assert_array_equal(c.K, b.K)  # exact: stored as float64
    assert [ch.name for ch in c.channels] == ["y0"]
    assert c.window == 3 and c.forces[0].dof == b.forces[0].dof
    assert bytes(c.extras["blob"]) == b"onnx-bytes"
    np.testing.assert_array_equal(c.outputs[1].row, b.outputs[1].row)
    assert c.outputs[1].kind == "acceleration"
    assert c.bundle_id.startswith("chain-")


@pytest.mark.parametrize("field,value,message", [
    ("K", np.triu(np.ones((8, 8))), "not symmetric"),
    ("M", -np.eye(8), "not positive definite"),
    ("C", np.full((8, 8), np.nan), "NaN"),
    ("dt", np.array(-1.0), "must be > 0"),
    ("alpha", np.array(-1.0), ">= 0"),
    ("channel_dof", np.array([99]), "out of range"),
    ("schema_version", np.array(99), "not supported"),
    ("meta", np.array("{not json"), "not valid JSON"),
    ("window", np.array(0), ">= 1"),
    ("beta", np.array(0.1), "unconditionally stable"),
    ("K", None, "missing"),
    ("channel_weight", np.array([0.0]), "> 0"),
    ("C", np.eye(3), "shape"),
])
def test_bad_field_is_named(tmp_path, field, value, message):
    path = tmp_path / "b.npz"
    chain_bundle().save(path)
    _rewrite(path, **{field: value})
    with pytest.raises(BundleError, match=message) as err:
        Bundle.load(path)
    assert f"'{field}'" in str(err.value) and str(path) in str(err.value)


def test_tampering_breaks_the_hash(tmp_path):
    path = tmp_path / "b.npz"
    chain_bundle().save(path)
    with np.load(path) as z:
        K = z["K"].copy()
    _rewrite(path, K=K * 1.01, _rehash=False)
    with pytest.raises(BundleError, match="content_hash"):
        Bundle.load(path)


def test_meta_must_match_arrays(tmp_path):
    path = tmp_path / "b.npz"
    chain_bundle().save(path)
    with np.load(path) as z:
        meta = json.loads(str(z["meta"]))
    meta["channels"] = []
    _rewrite(path, meta=np.array(json.dumps(meta)))
    with pytest.raises(BundleError, match="'channels' must list 1"):
        Bundle.load(path)


def test_not_a_bundle(tmp_path):
    p = tmp_path / "x.npz"
    p.write_bytes(b"garbage")
    with pytest.raises(BundleError, match="not a readable"):
        Bundle.load(p)
    with pytest.raises(BundleError, match="does not exist"):
        Bundle.load(tmp_path / "missing.npz")
    with zipfile.ZipFile(tmp_path / "empty.npz", "w"):
        pass
    with pytest.raises(BundleError, match="missing"):
        Bundle.load(tmp_path / "empty.npz")


def test_no_pickles(tmp_path):
    # an object array would need pickle: the loader refuses it instead of executing anything
    path = tmp_path / "b.npz"
    chain_bundle().save(path)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["x_evil"] = np.array([{"a": 1}], dtype=object)
    np.savez(path, **arrays)
    with pytest.raises(BundleError):
        Bundle.load(path)


def _as_written_by_schema(b, version):
    """The arrays of ``b`` as the schema-1/2 writer stored them: ``discretization`` and
    ``regularization`` in meta (git show 586bd19:edge/bundle.py, ``to_arrays``), no array
    fields for them; schema 1 had no ``meta["estimator"]``."""
    a = b.to_arrays()
    del a["discretization"], a["regularization"]
    meta = json.loads(str(a["meta"]))
    meta["discretization"], meta["regularization"] = b.discretization, b.regularization
    if version == 1:
        meta.pop("estimator", None)
    a["meta"] = np.array(json.dumps(meta, sort_keys=True))
    a["schema_version"] = np.array(version, dtype=np.int64)
    a["content_hash"] = np.array(content_hash(a))
    return a


def test_schema3_stores_the_estimator_settings_as_fields(tmp_path):
    from edge.bundle import SCHEMA_VERSION
    b = chain_bundle(window=4)
    b.discretization, b.regularization = "foh", "tikhonov1"
    b.save(tmp_path / "b.npz")
    with np.load(tmp_path / "b.npz") as z:
        assert int(z["schema_version"]) == SCHEMA_VERSION == 10
        assert str(z["discretization"]) == "foh" and str(z["regularization"]) == "tikhonov1"
        meta = json.loads(str(z["meta"]))
    assert "discretization" not in meta and "regularization" not in meta
    c = Bundle.load(tmp_path / "b.npz")
    assert (c.discretization, c.regularization) == ("foh", "tikhonov1")


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("disc,reg", [("foh", "tikhonov1"), ("newmark", "tikhonov0")])
def test_older_schemas_are_read_with_their_settings(tmp_path, version, disc, reg):
    from edge.estimator import Estimator
    # a stable setting for every discretisation/penalty (as test_estimator's tikhonov1 test)
    b = chain_bundle(n=6, window=4, alpha=100.0).replace(discretization=disc,
                                                         regularization=reg)
    old = Bundle.from_arrays(_as_written_by_schema(b, version), f"v{version}.npz")
    assert (old.discretization, old.regularization) == (disc, reg)
    # same mathematics as the schema-3 bundle: identical estimates (same code path, exact)
    rng = np.random.default_rng(3)
    Y = rng.standard_normal((40, 1)) * 1e-6
    out = []
    v3 = b.to_arrays()
    v3["content_hash"] = np.array(content_hash(v3))
    for bb in (old, Bundle.from_arrays(v3)):
        est = Estimator(bb)
        F, Z, fl = np.zeros((40, 1)), np.zeros((40, 2)), np.zeros(40, np.uint8)
        est.process(Y, F, Z, fl)
        out.append(np.concatenate([F, Z], axis=1))
    np.testing.assert_array_equal(out[0], out[1])
    # schema 1-2 without the meta keys: the documented defaults
    a = _as_written_by_schema(b, version)
    meta = json.loads(str(a["meta"]))
    del meta["discretization"], meta["regularization"]
    a["meta"] = np.array(json.dumps(meta))
    a["content_hash"] = np.array(content_hash(a))
    d = Bundle.from_arrays(a)
    assert (d.discretization, d.regularization) == ("newmark", "tikhonov0")


def test_unknown_schema_and_bad_settings_are_named(tmp_path):
    path = tmp_path / "b.npz"
    chain_bundle().save(path)
    _rewrite(path, schema_version=np.array(11, dtype=np.int64))
    with pytest.raises(BundleError, match=r"b\.npz: field 'schema_version': 11 is not supported.*"
                                          r"reads schema 1, 2, 3, 4, 5, 6, 7, 8, 9, 10"):
        Bundle.load(path)
    chain_bundle().save(path)
    _rewrite(path, discretization=np.array("rk4"))
    with pytest.raises(BundleError, match=r"field 'discretization': discretization 'rk4'"):
        Bundle.load(path)
    chain_bundle().save(path)
    _rewrite(path, regularization=None)
    with pytest.raises(BundleError, match=r"field 'regularization': missing"):
        Bundle.load(path)
    a = _as_written_by_schema(chain_bundle(), 2)
    meta = json.loads(str(a["meta"]))
    meta["regularization"] = "lasso"
    a["meta"] = np.array(json.dumps(meta))
    a["content_hash"] = np.array(content_hash(a))
    with pytest.raises(BundleError, match=r"old\.npz: field 'meta': regularization 'lasso'"):
        Bundle.from_arrays(a, "old.npz")
