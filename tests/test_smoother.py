"""Kalman fixed-lag smoother: design (offline) against independent computations, the compiled
kernel against its NumPy twin, the bundle contract (schema 2, schema 1 still read)."""

import io

import numpy as np
import pytest

from edge.bundle import Bundle, BundleError, content_hash
from edge.estimator import Estimator, EstimatorError
from edge.estimator.chi2 import chi2_sf, nis_threshold
from edge.estimator.smoother import SmootherEstimator
from edge.estimator.smoother_reference import ReferenceSmoother
from edge.flags import FLAG_HELD, FLAG_MODEL_SUSPECT, FLAG_WARMUP
from offline.smoother import ForceModel, attach_smoother, design_smoother, van_loan
from tests.helpers import chain_bundle


def _smoother_bundle(kinds=("displacement",), lag=10, window_s=0.5, n=6, order=2, dashpot=0.0,
                     **kw):
    b = chain_bundle(n=n, kinds=kinds)
    b.C[0, 0] += dashpot  # a dashpot at the fixed end: damping no longer proportional
    fm = [ForceModel("bandpass", (5.0, 80.0), 1.0, order)]
    d = design_smoother(b, fm, lag=lag)
    return attach_smoother(b, d, fm, 0.0, nis_window_s=window_s, bands=[(20, 22), (22, 24)],
                           **kw)


def _reload(b: Bundle) -> Bundle:
    z = np.load(io.BytesIO(b.to_bytes()))
    return Bundle.from_arrays({k: z[k] for k in z.files})


def test_van_loan_scalar_closed_form_including_stiff():
    # x' = -a x + w, E[w w] = q delta: Ad = exp(-a dt), Qd = q (1 - exp(-2 a dt)) / (2 a)
    q, dt = 3.0, 1e-3
    for a in (5.0, 2e3, 1e7):  # a dt = 1e4: Van Loan's exp(+a dt) would overflow undoubled
        Ad, Qd = van_loan(np.array([[-a]]), np.array([[q]]), dt)
        assert Ad[0, 0] == pytest.approx(np.exp(-a * dt), rel=1e-10, abs=1e-300)
        assert Qd[0, 0] == pytest.approx(q * (1 - np.exp(-2 * a * dt)) / (2 * a), rel=1e-9)


def test_force_model_variance_is_rms_squared():
    # independent route: stationary covariance of the Van Loan discretisation, X = sum_k
    # Ad^k Qd Ad^kT summed by doubling (X_2m = X_m + Ad^m X_m Ad^mT), not a Lyapunov solver
    for order in (1, 2, 4, 8, 16):
        fm = ForceModel("bandpass", (5.0, 160.0), 2.5, order)
        Af, Bf, Cf, qc = fm.realise()
        Ad, X = van_loan(Af, qc * Bf @ Bf.T, 1e-3)
        for _ in range(40):  # 2^40 steps: the 5 Hz pole has decayed completely
            X = X + Ad @ X @ Ad.T
            Ad = Ad @ Ad
        assert (Cf @ X @ Cf.T).item() == pytest.approx(2.5 ** 2, rel=1e-6)


def test_force_model_shape_is_the_butterworth_closed_form():
    # |H(jw)|^2 of the cascade realisation against the closed form of a Butterworth
    # high-pass times low-pass, 1 / (1 + (w_lo/w)^2n) / (1 + (w/w_hi)^2n), both normalised
    # at the band's geometric centre; 1e-8 relative (round-off of the state-space solve)
    lo, hi = 5.0, 80.0
    f = np.array([1.0, 4.0, 5.0, 6.0, 20.0, 60.0, 80.0, 100.0, 300.0])
    for order in (2, 4, 8, 16):
        Af, Bf, Cf, qc = ForceModel("bandpass", (lo, hi), 1.0, order).realise()

        def power(fr):
            return qc * abs((Cf @ np.linalg.solve(2j * np.pi * fr * np.eye(len(Af)) - Af,
                                                  Bf)).item()) ** 2

        def closed(fr):
            return 1.0 / (1 + (lo / fr) ** (2 * order)) / (1 + (fr / hi) ** (2 * order))

        fc = np.sqrt(lo * hi)
        got = np.array([power(x) for x in f]) / power(fc)
        want = closed(f) / closed(fc)
        assert np.allclose(got, want, rtol=1e-8, atol=1e-12 * want.max())


def test_steady_state_gain_matches_iterated_riccati():
    # independent: the time-varying Kalman covariance recursion iterated to convergence
    b = chain_bundle(n=4, kinds=("displacement", "acceleration"))
    fm = [ForceModel("bandpass", (5.0, 80.0), 1.0, 2)]
    d = design_smoother(b, fm, lag=5)
    A, H, Q, R = d.A, d.H, d.Q, d.R
    P = np.eye(A.shape[0]) * 1e-6
    for _ in range(20000):
        S = H @ P @ H.T + R
        Kp = P @ H.T @ np.linalg.inv(S)
        P = A @ (P - Kp @ H @ P) @ A.T + Q
        P = 0.5 * (P + P.T)
    Kf = P @ H.T @ np.linalg.inv(H @ P @ H.T + R)
    assert np.max(np.abs(Kf - d.K)) / np.max(np.abs(d.K)) < 1e-6


def test_smoothed_std_is_the_monte_carlo_error_of_the_model_itself():
    # simulate the discrete model (its own Q, R): the empirical error std of the smoothed
    # force and outputs equals kf_std within the sampling error of 40k samples (~1 %; 5 %
    # allowed) -- a check of the smoother covariance formula, not of the physics
    b = _smoother_bundle(kinds=("displacement",), lag=10)
    d = design_smoother(b.replace(kf={}, meta={}), [ForceModel("bandpass", (5.0, 80.0),
                                                               1.0, 2)], lag=10)
    rng = np.random.default_rng(4)
    nt = 40_000
    ns = d.A.shape[0]
    lam, V = np.linalg.eigh(d.Q)  # Q has rank nf: a square root from its eigenvectors
    Lq = V * np.sqrt(np.clip(lam, 0.0, None))
    x = np.zeros(ns)
    X = np.zeros((nt, ns))
    for k in range(nt):
        X[k] = x
        x = d.A @ x + Lq @ rng.standard_normal(ns)
    Y = X @ d.H.T + rng.standard_normal((nt, 1)) * np.sqrt(np.diag(d.R))
    est = Estimator(b)
    F, Z, _ = est.run(Y)
    L = est.delay
    truth = X @ d.Cq.T
    err = np.hstack([F, Z])[L:] - truth[:nt - L]
    emp = np.std(err[2000:], axis=0)
    np.testing.assert_allclose(emp, b.kf["std"], rtol=0.05)


@pytest.mark.parametrize("kinds,order,n,dashpot", [(("displacement",), 2, 6, 0.0),
                                                   (("displacement", "acceleration"), 2, 6, 0.0),
                                                   (("velocity", "acceleration"), 2, 6, 0.0),
                                                   (("displacement", "acceleration"), 16, 30, 0.0),
                                                   (("displacement",), 8, 2, 0.0),
                                                   (("displacement", "acceleration"), 2, 6, 5.0)])
def test_kernel_matches_numpy_twin(kinds, order, n, dashpot):
    # order 16 on 30 modes: the kernel's coupling is factored to its numerical rank; order 8
    # on 2 modes: unfactored (full rank 4), more force-model states (16) than modal ones (4):
    # Cl = AcT^T, Cr = I, so that Cl xi has 4 values (the kernel keeps them in the modal
    # slots of its scratch); a dashpot of 5 N s/m at the fixed end (Rayleigh's C[0, 0] is
    # 2.1): non-proportional damping, the kernel's dense modal path (Ad)
    b = _reload(_smoother_bundle(kinds=kinds, lag=7, order=order, n=n, dashpot=dashpot))
    if dashpot:
        from edge.estimator.smoother_operator import derive_smoother

        assert derive_smoother(b).Ad.shape == (2 * n, 2 * n)  # the dense path is the one tested
    if order >= 8:
        from edge.estimator.smoother_operator import derive_smoother

        op = derive_smoother(b)
        assert op.Cl.shape[0] < op.Cl.shape[1]  # the low-rank path is the one tested
        assert op.Cl.shape[0] <= 2 * n
    rng = np.random.default_rng(5)
    scale = {"displacement": 1e-4, "velocity": 5e-3, "acceleration": 0.3}
    nt = 3000
    t = np.arange(nt) * b.dt
    Y = np.column_stack([scale[k] * (np.sin(2 * np.pi * 21 * t) + 0.3 * rng.standard_normal(nt))
                         for k in kinds])
    Y[700, 0] = np.nan
    Y[1500, -1] = np.inf
    est = Estimator(b)
    assert isinstance(est, SmootherEstimator) and est.delay == 7
    F, Z, fl = est.run(Y)
    ref = ReferenceSmoother(b)
    Fr, Zr, flr = ref.run(Y)
    # the lag-1 products of the last window (the level tracker's second statistic): the
    # kernel's ring against the twin's, same arithmetic in another order (1e-9 relative)
    W = ref.W
    ring = np.roll(est._lag1ring, -(nt % W))
    np.testing.assert_allclose(ring, np.array(ref.lag1), rtol=1e-9,
                               atol=1e-9 * np.max(np.abs(ref.lag1)))
    # same arithmetic in another order: agreement to 1e-9 of the largest value
    for a, r in ((F, Fr), (Z, Zr)):
        ok = np.isfinite(r)
        assert np.array_equal(ok, np.isfinite(a))
        assert np.max(np.abs(a[ok] - r[ok])) <= 1e-9 * np.max(np.abs(r[ok]))
    np.testing.assert_array_equal(fl, flr)
    # warm-up: the 7 NaN rows, then the start-up rows whose std has not converged (values)
    nw = est.n_warm
    assert np.all(fl[:7 + nw] & FLAG_WARMUP) and not np.any(fl[7 + nw:] & FLAG_WARMUP)
    assert np.all(np.isfinite(F[7:]))
    held = set(np.flatnonzero(fl & FLAG_HELD))
    # row j describes sample j - 7 from inputs j - 7 .. j: rows 700..707 used sample 700
    assert held == set(range(700, 708)) | set(range(1500, 1508))
    # the signal is not the model's: the 21 Hz line lands in the check band pair
    assert np.any(fl & FLAG_MODEL_SUSPECT)
    mc = est.model_check()
    assert mc["suspect"] and mc["dof"] == 500 * len(kinds) and mc["bands"][0]["ratio"] > 1


def test_block_processing_equals_sample_processing():
    b = _smoother_bundle(lag=4)
    rng = np.random.default_rng(6)
    Y = 1e-4 * rng.standard_normal((400, 1))
    F1, Z1, f1 = Estimator(b).run(Y)
    est = Estimator(b)
    F2, Z2, f2 = np.empty_like(F1), np.empty_like(Z1), np.empty_like(f1)
    for i in range(0, 400, 37):
        j = min(i + 37, 400)
        est.process(Y[i:j], F2[i:j], Z2[i:j], f2[i:j])
    np.testing.assert_array_equal(F1, F2)
    np.testing.assert_array_equal(f1, f2)
    est.reset()
    F3, _, _ = est.run(Y)
    np.testing.assert_array_equal(F1, F3)


def test_chi_square_helpers_against_scipy():
    from scipy.stats import chi2

    for dof in (500, 2000, 8000):
        for p in (1e-2, 1e-4):
            # Wilson-Hilferty: quantile within 0.2 % for dof >= 500 (scipy exact)
            assert nis_threshold(dof, p) == pytest.approx(chi2.isf(p, dof), rel=2e-3)
        x = chi2.isf(0.05, dof)
        assert chi2_sf(x, dof) == pytest.approx(0.05, abs=2e-3)


def test_bundle_round_trip_and_schema_versions():
    b = _smoother_bundle()
    b2 = _reload(b)
    assert b2.method == "smoother" and set(b2.kf) == set(b.kf)
    np.testing.assert_array_equal(b2.kf["G"], b.kf["G"])
    assert b2.window == b.kf["G"].shape[0]
    # a schema-1 (Tikhonov) bundle is still read
    a = chain_bundle().to_arrays()
    a["schema_version"] = np.array(1, dtype=np.int64)
    a["content_hash"] = np.array(content_hash(a))
    assert Bundle.from_arrays(a).method == "tikhonov"
    # unknown version refused with a message naming the field and the readable ones
    a["schema_version"] = np.array(11, dtype=np.int64)
    a["content_hash"] = np.array(content_hash(a))
    with pytest.raises(BundleError, match="schema_version.*reads schema 1, 2, 3, 4, 5, 6, 7, 8, 9, 10"):
        Bundle.from_arrays(a)


@pytest.mark.parametrize("field,value,msg", [
    ("kf_G", np.zeros((3, 4, 1)), "kf_G.*shape"),
    ("kf_std", None, "kf_std.*missing"),
    ("kf_K", "nan", "kf_K.*NaN"),
])
def test_malformed_smoother_fields_are_named(field, value, msg):
    a = _smoother_bundle().to_arrays()
    if value is None:
        del a[field]
    elif isinstance(value, str):
        a[field] = a[field].copy()
        a[field][0, 0] = np.nan
    else:
        a[field] = value
    a["content_hash"] = np.array(content_hash(a))
    with pytest.raises(BundleError, match=msg):
        Bundle.from_arrays(a)


def test_smoother_refuses_tikhonov_overrides_and_swap():
    b = _smoother_bundle()
    with pytest.raises(EstimatorError, match="alpha/window"):
        Estimator(b, alpha=1.0)
    with pytest.raises(EstimatorError, match="computed offline from the model"):
        Estimator(b).swap(None)


def test_unobservable_designs_are_refused_with_the_reason():
    b = chain_bundle(n=4, kinds=("acceleration",))
    with pytest.raises(EstimatorError, match="random-walk.*acceleration"):
        design_smoother(b, [ForceModel("randomwalk", (5.0, 80.0), 1.0)], lag=5)
    # a force no channel sees: its smoothed std stays its prior RMS
    from edge.bundle import SensorChannel

    far = b.replace(channels=[SensorChannel("y", dof=0, kind="displacement", weight=1e12)])
    Kd = far.K.copy()
    Kd[0, 1] = Kd[1, 0] = 0.0  # node 0 decoupled from the rest: it cannot see the force
    with pytest.raises(EstimatorError, match="not seen by any channel: F"):
        design_smoother(far.replace(K=Kd, C=1e-3 * Kd + 0.1 * far.M), [ForceModel()], lag=2)
