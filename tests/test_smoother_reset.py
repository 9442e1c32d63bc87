"""The plain Kalman smoother resets itself when its state becomes non-finite (an input of
1e308 overflows ``(A K) e``): the row of that sample carries the overflow flag, the
estimator starts again from rest (warm-up rows), the reset is counted in ``self_resets``
and ``model_check()["resets"]`` (the daemon's health carries model_check), and the compiled
kernel agrees with its NumPy twin throughout."""

import numpy as np
import pytest

from edge.estimator import Estimator
from edge.estimator.smoother_reference import ReferenceSmoother
from edge.flags import FLAG_OVERFLOW, FLAG_WARMUP
from tests.test_smoother import _reload, _smoother_bundle

LAG = 7


@pytest.fixture(scope="module")
def bundle():
    return _reload(_smoother_bundle(lag=LAG))


def _record(nt=3000, bad=(1000,)):
    rng = np.random.default_rng(7)
    Y = 1e-4 * rng.standard_normal((nt, 1))
    for k in bad:
        Y[k] = 1e308
    return Y


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the twin's overflow, by design
def test_1e308_input_resets_the_smoother_like_its_numpy_twin(bundle):
    Y = _record(bad=(1000, 2000))
    est = Estimator(bundle)
    assert est.self_resets == 0 and est.model_check()["resets"] == 0
    F, Z, fl = est.run(Y)
    ref = ReferenceSmoother(bundle)
    Fr, Zr, flr = ref.run(Y)
    # measured: a 1e308 sample overflows the state at once, one reset per such sample
    assert est.self_resets == ref.resets == 2
    mc = est.model_check()
    assert mc["resets"] == 2 and any("reset 2 time(s)" in r for r in mc["reasons"])
    np.testing.assert_array_equal(fl, flr)
    # same arithmetic in another order: agreement to 1e-9 of the largest finite value (as
    # tests/test_smoother.py test_kernel_matches_numpy_twin)
    for a, r in ((F, Fr), (Z, Zr)):
        ok = np.isfinite(r)
        assert np.array_equal(ok, np.isfinite(a))
        assert np.max(np.abs(a[ok] - r[ok])) <= 1e-9 * np.max(np.abs(r[ok]))
    # the row of the bad sample carries the overflow flag; the next LAG rows are warm-up NaN
    for k in (1000, 2000):
        assert fl[k] & FLAG_OVERFLOW
        assert np.all(np.isnan(F[k + 1:k + 1 + LAG])) and np.all(fl[k + 1:k + 1 + LAG] &
                                                                   FLAG_WARMUP)
    # after the last reset: exactly a fresh estimator's estimates of the rest of the record
    # (bitwise: the same kernel on the same state; 0 tolerance)
    Ff, _, ff = Estimator(bundle).run(Y[2001:])
    np.testing.assert_array_equal(F[2001:], Ff)
    np.testing.assert_array_equal(fl[2001:], ff)
    assert np.all(np.isfinite(F[2001 + LAG + est.n_warm:]))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_reset_within_blocks_equals_the_whole_record(bundle):
    """Blocks of 37 samples (the reset falls inside one): the same rows and flags as one call,
    including the warm-up flags of the start-up rows after the reset."""
    Y = _record(bad=(1000,))
    F1, Z1, f1 = Estimator(bundle).run(Y)
    est = Estimator(bundle)
    F2, Z2, f2 = np.empty_like(F1), np.empty_like(Z1), np.empty_like(f1)
    for i in range(0, Y.shape[0], 37):
        j = min(i + 37, Y.shape[0])
        est.process(Y[i:j], F2[i:j], Z2[i:j], f2[i:j])
    np.testing.assert_array_equal(F1, F2)
    np.testing.assert_array_equal(f1, f2)
    assert est.self_resets == 1
