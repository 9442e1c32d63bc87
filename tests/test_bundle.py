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
