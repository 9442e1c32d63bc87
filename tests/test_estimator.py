"""Compiled estimator kernel against its NumPy twin (paper 004, Table 1), and its contracts."""

import numpy as np
import pytest

from edge.bundle import IdentifiedForce, SensorChannel
from edge.estimator import FLAG_HELD, FLAG_WARMUP, Estimator, EstimatorError, derive_operator
from edge.estimator.kernel import _process
from edge.estimator.reference import ReferenceEstimator
from tests.helpers import chain_bundle, chain_matrices


def _signal(nt, dt, rng, nch=1, scale=(1e-4,)):
    t = np.arange(nt) * dt
    base = np.sin(2 * np.pi * 7 * t) + 0.5 * np.sin(2 * np.pi * 31 * t + 0.3)
    Y = np.column_stack([s * base for s in scale[:nch]])
    return Y + 0.01 * np.array(scale[:nch]) * rng.standard_normal(Y.shape)


def _rel(a, b):
    ok = np.isfinite(b)
    return np.max(np.abs(a[ok] - b[ok])) / np.max(np.abs(b[ok]))


def test_kernel_matches_reference_100k_steps():
    # issue requirement: compiled kernel == Table 1 reference to 1e-9 relative over 1e5 steps
    rng = np.random.default_rng(1)
    b = chain_bundle(n=6, window=1, alpha=1e-3)
    Y = _signal(100_000, b.dt, rng)
    F, Z, fl = Estimator(b).run(Y)
    Fr, Zr, flr = ReferenceEstimator(b).run(Y)
    assert _rel(F, Fr) < 1e-9 and _rel(Z, Zr) < 1e-9
    np.testing.assert_array_equal(fl, flr)


@pytest.mark.parametrize("window,kinds", [
    (1, ("displacement", "acceleration")),
    (4, ("displacement",)),
    (8, ("displacement", "velocity")),
])
def test_kernel_matches_reference_windows_and_mixed_kinds(window, kinds):
    rng = np.random.default_rng(2)
    b = chain_bundle(n=6, window=window, alpha=1e-2, kinds=kinds)
    scale = {"displacement": 1e-4, "velocity": 5e-3, "acceleration": 0.3}
    Y = _signal(3000, b.dt, rng, nch=len(kinds), scale=[scale[k] for k in kinds])
    Y[500, 0] = np.nan       # a dropped sample
    Y[900, -1] = np.inf      # a railed one
    F, Z, fl = Estimator(b).run(Y)
    Fr, Zr, flr = ReferenceEstimator(b).run(Y)
    assert _rel(F, Fr) < 1e-9 and _rel(Z, Zr) < 1e-9
    np.testing.assert_array_equal(fl, flr)
    # warm-up rows are NaN and flagged; held inputs flag every estimate whose window used them
    assert np.all(fl[: window - 1] & FLAG_WARMUP) and np.all(np.isnan(F[: window - 1]))
    assert np.all(np.isfinite(F[window - 1:])) and np.all(np.isfinite(Z[window - 1:]))
    held = np.flatnonzero(fl & FLAG_HELD)
    assert set(held) == set(range(500, 500 + window)) | set(range(900, 900 + window))


def test_non_proportional_damping_uses_dense_block():
    rng = np.random.default_rng(3)
    b = chain_bundle(n=5, window=2, alpha=1e-2)
    C = b.C.copy()
    C[0, 0] += 5.0  # a local dashpot: not Rayleigh any more
    b = b.replace(C=C)
    op = derive_operator(b)
    # one dense block of the modes plus the previous-force block
    assert not op.info["proportional_damping"] and op.info["n_blocks"] == 2
    Y = _signal(2000, b.dt, rng)
    F, Z, _ = Estimator(b).run(Y)
    Fr, Zr, _ = ReferenceEstimator(b).run(Y)
    assert _rel(F, Fr) < 1e-9 and _rel(Z, Zr) < 1e-9


def test_block_and_single_sample_identical():
    rng = np.random.default_rng(4)
    b = chain_bundle(n=6, window=3)
    Y = _signal(500, b.dt, rng)
    F1, Z1, f1 = Estimator(b).run(Y)
    est = Estimator(b)
    parts = [est.run(Y[i:i + 1]) for i in range(len(Y))]
    F2 = np.vstack([p[0] for p in parts])
    Z2 = np.vstack([p[1] for p in parts])
    np.testing.assert_array_equal(F1, F2)  # bitwise: same operations in the same order
    np.testing.assert_array_equal(Z1, Z2)
    mixed = Estimator(b)
    F3 = np.vstack([mixed.run(Y[:123])[0], mixed.run(Y[123:124])[0], mixed.run(Y[124:])[0]])
    np.testing.assert_array_equal(F1, F3)


def test_collocated_unregularised_reproduces_measurement():
    # alpha = 0, one collocated displacement: the state at the sensor DOF equals the measurement
    # (eq. 19 inverts H exactly), so the identified force reproduces the data to roundoff.
    rng = np.random.default_rng(5)
    b = chain_bundle(n=6, window=1, alpha=0.0)
    Y = _signal(2000, b.dt, rng)
    est = Estimator(b)
    for k in range(200):
        est.run(Y[k:k + 1])
        u, _, _ = est.physical_state()
        assert abs(u[b.channels[0].dof] - Y[k, 0]) <= 1e-9 * np.max(np.abs(Y))


def test_identifies_known_force():
    # forward-simulate the chain under a known force, identify it back (noise-free).
    from edge.estimator.newmark import newmark

    b = chain_bundle(n=6, window=1, alpha=0.0)
    nt = 3000
    t = np.arange(nt) * b.dt
    f = np.sin(2 * np.pi * 12 * t) * (1 - np.exp(-t / 0.05))
    Fn = np.zeros((nt, 6))
    Fn[:, 5] = f
    u, _, a = newmark(b.M, b.C, b.K, Fn, b.dt)
    F, Z, _ = Estimator(b).run(u[:, [5]])
    # exact inverse of the same discretisation: agreement to roundoff. The inversion divides
    # by H = Keff^-1[5,5] (~1e-5 m/N here), which amplifies the 1e-16 relative roundoff of u
    # by about cond = 1e7 at the marginally stable alpha = 0: 1e-6 of the peak bounds it.
    np.testing.assert_allclose(F[1:, 0], f[1:], atol=1e-6 * np.max(np.abs(f)))
    np.testing.assert_allclose(Z[:, 0], u[:, 3], atol=1e-8 * np.max(np.abs(u[:, 3])))
    np.testing.assert_allclose(Z[:, 1], a[:, 3], atol=1e-6 * np.max(np.abs(a[:, 3])))


def test_unstable_estimator_is_refused():
    # non-collocated displacement sensor, tiny alpha: non-minimum-phase zero dynamics
    b = chain_bundle(n=8, window=1, alpha=0.0)
    b = b.replace(channels=[SensorChannel("d3", dof=3, weight=1e12)])
    with pytest.raises(EstimatorError, match="unstable: spectral radius"):
        derive_operator(b)
    # heavy regularisation makes the same layout stable
    assert derive_operator(b, alpha=1.0).spectral_radius <= 1.0


def test_unidentifiable_force_is_named():
    b = chain_bundle(n=6)
    M, C, K = b.M.copy(), b.C.copy(), b.K.copy()
    # decouple DOF 0 from the rest: a force there is invisible at the free end
    K[0, 1] = K[1, 0] = 0.0
    C[0, 1] = C[1, 0] = 0.0
    b = b.replace(M=M, C=C, K=K, forces=b.forces + [IdentifiedForce("Fhidden", dof=0)])
    with pytest.raises(EstimatorError, match="Fhidden"):
        derive_operator(b)


def test_kernel_is_nogil_and_cached():
    assert _process.targetoptions.get("nogil") is True
    assert _process._cache.__class__.__name__ != "NullCache"


def test_swap_keeps_physical_state():
    rng = np.random.default_rng(6)
    b = chain_bundle(n=6, window=1)
    est = Estimator(b)
    est.run(_signal(300, b.dt, rng))
    u0, v0, a0 = est.physical_state()
    f_prev = est._x[-1]
    b2 = b.replace(K=b.K * 1.1, C=b.C * 1.1)
    est.swap(derive_operator(b2))
    u1, v1, a1 = est.physical_state()
    # displacement, velocity and the previous force carry over; the acceleration follows
    # from the new model's equilibrium M a = B f - C v - K u
    for x, y in ((u1, u0), (v1, v0)):
        np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-12 * np.max(np.abs(y)))
    assert est._x[-1] == f_prev
    fn = np.zeros(6)
    fn[b.forces[0].dof] = f_prev
    np.testing.assert_allclose(b2.M @ a1, fn - b2.C @ v1 - b2.K @ u1,
                               atol=1e-9 * np.max(np.abs(b2.K @ u1)))


def test_foh_per_step_displacement_inversion_is_refused():
    # The FOH-sampled force -> displacement map (relative degree 2) has a sampling zero at
    # -(2 + sqrt 3) = -3.732 (Astrom, Hagander & Sternby, Automatica 20 (1984), FOH variant):
    # inverting it one step at a time is unstable, and derive_operator must say so.
    b = chain_bundle(n=6, window=1, alpha=0.0).replace(discretization="foh")
    with pytest.raises(EstimatorError, match="unstable") as err:
        derive_operator(b)
    import re

    rho = float(re.search(r"operator is ([0-9.]+)", str(err.value)).group(1))
    assert abs(rho - (2 + np.sqrt(3))) < 0.05  # the sampling zero, up to the chain's dynamics


@pytest.mark.parametrize("window,kinds,prop", [
    (4, ("displacement",), True),
    (6, ("displacement", "acceleration"), True),
    (3, ("displacement", "velocity"), False),
])
def test_foh_kernel_matches_physical_reference(window, kinds, prop):
    # exact discretisation (FOH): modal kernel vs the physical-coordinate expm twin
    rng = np.random.default_rng(8)
    b = chain_bundle(n=6, window=window, alpha=1e-2, kinds=kinds).replace(discretization="foh")
    if not prop:
        C = b.C.copy()
        C[1, 1] += 3.0
        b = b.replace(C=C)
    scale = {"displacement": 1e-4, "velocity": 5e-3, "acceleration": 0.3}
    Y = _signal(2000, b.dt, rng, nch=len(kinds), scale=[scale[k] for k in kinds])
    Y[700, 0] = np.nan
    F, Z, fl = Estimator(b).run(Y)
    Fr, Zr, flr = ReferenceEstimator(b).run(Y)
    assert _rel(F, Fr) < 1e-9 and _rel(Z, Zr) < 1e-9
    np.testing.assert_array_equal(fl, flr)


def test_foh_is_exact_for_piecewise_linear_loads():
    # A load linear between samples is propagated exactly by the FOH realisation: its forward
    # run (x+ = A x + Gamma f) equals an independent scipy-expm integration to roundoff.
    sexpm = pytest.importorskip("scipy.linalg", reason="the reference integration needs scipy "
                                "(vsense[offline]); the edge tier runs without it").expm

    b = chain_bundle(n=5, window=1, alpha=1.0).replace(discretization="foh")
    n, dt, nt = 5, b.dt, 800
    t = np.arange(nt) * dt
    f = np.sin(2 * np.pi * 40 * t) * np.exp(-t / 0.3)
    Minv = np.linalg.inv(b.M)
    Ac = np.block([[np.zeros((n, n)), np.eye(n)], [-Minv @ b.K, -Minv @ b.C]])
    bc = np.concatenate([np.zeros(n), Minv[:, 4]])
    # augmented [x, p, p'] system integrated exactly over each step with scipy
    Maug = np.zeros((2 * n + 2, 2 * n + 2))
    Maug[:2 * n, :2 * n] = Ac
    Maug[:2 * n, 2 * n] = bc
    Maug[2 * n, 2 * n + 1] = 1.0
    Ed = sexpm(Maug * dt)
    x = np.zeros(2 * n)
    u = np.zeros(nt)
    for k in range(nt - 1):
        z = Ed @ np.concatenate([x, [f[k], (f[k + 1] - f[k]) / dt]])
        x = z[:2 * n]
        u[k + 1] = x[4]
    op = derive_operator(b, check_stability=False)
    A = op.A_dense()
    xs = np.zeros(op.n_state)
    y = np.zeros(nt)
    for k in range(nt - 1):
        xs = A @ xs + op.Gamma[:, 0] * f[k + 1]
        y[k + 1] = op.S[0] @ xs
    np.testing.assert_allclose(y, u, atol=1e-10 * np.max(np.abs(u)))


@pytest.mark.parametrize("window,disc,kinds", [
    (6, "newmark", ("displacement", "acceleration")), (8, "newmark", ("displacement",)),
    (4, "foh", ("displacement",))])
def test_first_order_tikhonov_matches_reference(window, disc, kinds):
    # penalty on force increments (f_k - f_(k-1)): the previous force is the state's tail, so
    # its term sits in Kx; the twin solves the windowed problem with D^T D explicitly
    rng = np.random.default_rng(10)
    b = chain_bundle(n=6, window=window, alpha=100.0, kinds=kinds).replace(
        discretization=disc, regularization="tikhonov1")
    scale = {"displacement": 1e-4, "velocity": 5e-3, "acceleration": 0.3}
    Y = _signal(2000, b.dt, rng, nch=len(kinds), scale=[scale[k] for k in kinds])
    Y[300, 0] = np.nan
    F, Z, fl = Estimator(b).run(Y)
    Fr, Zr, flr = ReferenceEstimator(b).run(Y)
    assert _rel(F, Fr) < 1e-9 and _rel(Z, Zr) < 1e-9
    np.testing.assert_array_equal(fl, flr)
    F0, _, _ = Estimator(b.replace(regularization="tikhonov0")).run(Y)
    assert _rel(F0, F) > 1e-3  # a different estimator (the test can fail if ignored)


def test_first_order_tikhonov_per_step_is_refused():
    # penalising the jump from the previous force with a one-sample window makes the closed
    # loop unstable on this chain (spectral radius 1.003-1.39 for alpha 1e-2..1e3): refused
    b = chain_bundle(n=6, window=1, alpha=1.0).replace(regularization="tikhonov1")
    with pytest.raises(EstimatorError, match="unstable"):
        derive_operator(b)


@pytest.mark.parametrize("reg", ["tikhonov0", "tikhonov1"])
def test_force_scales_penalise_f_over_s_and_match_reference(reg, tmp_path):
    # two forces of different size (N vs a 100x smaller unit): the penalty is on f / s
    from edge.bundle import IdentifiedForce, SensorChannel

    rng = np.random.default_rng(11)
    b = chain_bundle(n=6, window=5, alpha=1e-2, kinds=("displacement",))
    chans = [b.channels[0], SensorChannel("y3", dof=3, kind="displacement", weight=1e12, unit="m")]
    forces = [IdentifiedForce("F", dof=5, scale=1.0), IdentifiedForce("G", dof=3, scale=0.01)]
    b = b.replace(channels=chans, forces=forces, regularization=reg)
    Y = _signal(1500, b.dt, rng, nch=2, scale=[1e-4, 1e-4])
    F, Z, fl = Estimator(b).run(Y)
    Fr, Zr, flr = ReferenceEstimator(b).run(Y)
    assert _rel(F, Fr) < 1e-9 and _rel(Z, Zr) < 1e-9  # NumPy twin, round-off level
    # equal scales s are the same as alpha / s^2 without scales (closed form of the penalty)
    s = 3.0
    eq = b.replace(forces=[IdentifiedForce("F", dof=5, scale=s), IdentifiedForce("G", dof=3, scale=s)])
    one = b.replace(forces=[IdentifiedForce("F", dof=5), IdentifiedForce("G", dof=3)], alpha=b.alpha / s ** 2)
    Fa, _, _ = Estimator(eq).run(Y)
    Fb, _, _ = Estimator(one).run(Y)
    assert _rel(Fa, Fb) < 1e-9
    assert _rel(F, Fb) > 1e-3  # the unequal scales change the estimate (the test can fail)
    # the scale survives a save/load round trip
    from edge.bundle import Bundle

    b.save(tmp_path / "b.npz")
    assert [f.scale for f in Bundle.load(tmp_path / "b.npz").forces] == [1.0, 0.01]


def test_free_free_rigid_modes_are_exactly_rigid_and_bad_stiffness_is_named():
    # a free-free chain (no ground spring): its rigid-body mode comes out of eigh at round-off
    # level (about 1e-16 of the largest eigenvalue, either sign); it is set to exactly 0, so
    # the step's rigid block is exactly Newmark's (eigenvalues 1), and the estimator builds
    from edge.estimator.operator import modal_basis

    M, C, K = chain_matrices(n=6)
    K[0, 0] -= 1e4  # remove the ground spring
    C = 1e-4 * K     # stiffness-proportional damping: the rigid mode is undamped
    w2, Phi = modal_basis(M, K)
    assert w2[0] == 0.0 and w2[1] > 1e3  # exactly rigid; next mode elastic (~1.5e4 rad^2/s^2)
    np.testing.assert_allclose(Phi.T @ M @ Phi, np.eye(6), atol=1e-12)
    b = chain_bundle(n=6, window=5, alpha=1e-2).replace(M=M, C=C, K=K)
    op = derive_operator(b)
    assert op.spectral_radius <= 1.0 + 1e-7
    # a stiffness matrix with a clearly negative eigenvalue is refused, naming K
    Kbad = K.copy()
    Kbad[0, 0] -= 5e3
    with pytest.raises(EstimatorError, match="stiffness matrix K is not positive semi"):
        modal_basis(M, Kbad)


def test_packed_kernel_equals_the_kernel_on_separate_arrays():
    """edge.estimator.packed._process_packed (what Estimator.process runs) is _process on
    views of three arrays: the same numbers as _process on the operator's own arrays and a
    separately allocated state, across a swap that keeps the window."""
    from edge.estimator.packed import _process_packed

    rng = np.random.default_rng(12)
    b = chain_bundle(n=6, window=4, kinds=("displacement", "velocity"))
    est = Estimator(b)
    op = est.op
    st = [np.zeros(op.n_state), np.zeros(op.n_state), np.zeros(op.n_forces),
          np.zeros(op.n_outputs), np.zeros((op.window, op.n_channels)),
          np.zeros(op.window, np.uint8), np.zeros(op.n_channels), np.zeros(1, np.int64)]
    Y = _signal(500, b.dt, rng, nch=2, scale=(1e-4, 1e-2))
    Y[100, 1] = np.nan  # a held channel: the state of the hold is packed too
    F, Z = np.zeros((500, op.n_forces)), np.zeros((500, op.n_outputs))
    fl = np.zeros(500, np.uint8)
    Fr, Zr, flr = F.copy(), Z.copy(), fl.copy()
    for a in range(0, 500, 7):
        s = slice(a, min(a + 7, 500))
        _process_packed(Y[s], F[s], Z[s], fl[s], *est.packed.args)
        _process(Y[s], Fr[s], Zr[s], flr[s], op.blk_ptr, op.dat_ptr, op.A_data, op.Acoup,
                 op.Gamma, op.Kx, op.Ky, op.E, *st)
    # the same compiled kernel on the same inputs; 1e-12 relative allows for another
    # instruction order in the other specialisation
    assert _rel(F, Fr) < 1e-12 and _rel(Z, Zr) < 1e-12
    np.testing.assert_array_equal(fl, flr)
    assert _process_packed.targetoptions.get("nogil") is True
    assert _process_packed._cache.__class__.__name__ != "NullCache"
    window = est._ybuf.copy(), est._fbuf.copy(), est._last.copy(), est._counters.copy()
    est.swap(derive_operator(b.replace(K=b.K * 1.05)))
    for x, y in zip((est._ybuf, est._fbuf, est._last, est._counters), window):
        assert np.array_equal(x, y)  # copied: exact
