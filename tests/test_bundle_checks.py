"""Issue 40 item 9: smoother bundle checks beyond shapes and finiteness. Each case writes a
crafted bundle (a valid NumPy-designed smoother bundle, tests/helpers.py, with one field
edited) and checks the refusal names the field: every load level's gain stability-checked
like kf_K, finite but absurd gains refused against the bundle's own scales
(edge.estimator.smoother_checks), kf_nis_window bounded (1e9 was a MemoryError)."""

import numpy as np
import pytest

from edge.bundle import Bundle, BundleError, content_hash
from edge.bundle_schema import MAX_NIS_WINDOW_S
from edge.cli import main
from edge.estimator import Estimator, EstimatorError
from edge.estimator.smoother_checks import ABSURD
from tests.helpers import numpy_smoother_bundle


def _levels(b, grid=(0.5, 1.0, 2.0)):
    """``b`` with load levels whose gains are the design's (a valid schema-4 group)."""
    kf = dict(b.kf)
    nl = len(grid)
    kf.update({"level_grid": np.array(grid), "level_nis": np.ones((nl, nl)),
               **{f"level_{k}": np.stack([kf[k]] * nl)
                  for k in ("K", "G", "Sinv", "Wt", "std")}})
    return b.replace(kf=kf)


def _edit(tmp_path, **fields):
    """The bundle with levels, ``fields`` (kf names without the prefix -> function of the
    array) applied, saved and loaded again."""
    b = _levels(numpy_smoother_bundle())
    kf = dict(b.kf)
    for k, f in fields.items():
        kf[k] = f(np.array(kf[k]))
    p = tmp_path / "crafted.npz"
    b.replace(kf=kf).save(p)
    return p


def test_the_untouched_bundle_with_levels_loads(tmp_path):
    est = Estimator(Bundle.load(_edit(tmp_path)))
    assert len(est._levels) == 3


def _scale_level(lv, by):
    def f(a):
        a[lv] *= by
        return a
    return f


@pytest.mark.parametrize("field, lv, by, words", [
    # x20 leaves the level's gain finite and below the absurd factor, but unstable
    ("level_K", 2, 20.0, ["kf_level_K[2]", "load level 2", "not stable"]),
    # x1e200: all NaN in the daemon before (issue 40)
    ("level_K", 1, 1e200, ["kf_level_K[1]", "more than"]),
    ("level_G", 0, 1e15, ["kf_level_G[0]", "more than"]),
    ("level_Sinv", 2, 1e15, ["kf_level_Sinv[2]", "more than"]),
])
def test_level_gains_are_checked_with_the_level_named(tmp_path, capsys, field, lv, by, words):
    p = _edit(tmp_path, **{field: _scale_level(lv, by)})
    with pytest.raises(EstimatorError) as e:
        Estimator(Bundle.load(p))
    for w in words:
        assert w in str(e.value)
    csv = tmp_path / "m.csv"
    csv.write_text("time,y0\n" + "".join(f"{i * 1e-3:.6f},0\n" for i in range(20)))
    assert main(["replay", str(csv), "--bundle", str(p), "-o", str(tmp_path / "e.csv")]) == 3
    assert words[0] in capsys.readouterr().err


@pytest.mark.parametrize("field", ["G", "Cq"])
def test_absurd_output_gains_are_refused(tmp_path, field):
    """kf_G x 1e300 gave estimates of 2.8e300 with flag 0 (issue 40); x1e3 is accepted
    (within the absurd factor: a design may differ by that much)."""
    Estimator(Bundle.load(_edit(tmp_path, **{field: lambda a: a * 1e3})))
    with pytest.raises(EstimatorError) as e:
        Estimator(Bundle.load(_edit(tmp_path, **{field: lambda a: a * 1e300})))
    assert f"kf_{field}" in str(e.value) and f"{ABSURD:g}" in str(e.value)


def test_nis_window_is_bounded(tmp_path):
    """1e9 samples: a MemoryError traceback before; now refused at load, the maximum (10
    minutes of samples) named."""
    dt = numpy_smoother_bundle().dt
    w_max = int(MAX_NIS_WINDOW_S / dt)
    Estimator(Bundle.load(_edit(tmp_path, nis_window=lambda a: np.array(w_max))))
    p = _edit(tmp_path)
    with np.load(p, allow_pickle=False) as z:  # written past Bundle.save's own check
        a = {k: z[k] for k in z.files}
    a["kf_nis_window"] = np.array(10 ** 9)
    a["content_hash"] = np.array(content_hash(a))
    np.savez(p, **a)
    with pytest.raises(BundleError) as e:
        Bundle.load(p)
    assert "kf_nis_window" in str(e.value) and str(w_max) in str(e.value)
