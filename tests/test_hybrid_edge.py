"""The hybrid twin on the edge (base install only: the tiny ONNX network is a committed file,
the smoother designed with NumPy): the compiled per-sample path against a NumPy twin, the
envelope fallback and its flag, the bundle contract (schema 6, malformed hy_* fields, a
schema-5 hybrid bundle read with its own direct terms)."""

from pathlib import Path

import numpy as np
import pytest

from edge.bundle import Bundle, BundleError
from edge.estimator import Estimator, EstimatorError
from edge.estimator.hybrid import HybridEstimator
from edge.estimator.smoother import SmootherEstimator
from edge.estimator.smoother_reference import ReferenceSmoother
from edge.flags import FLAG_ENVELOPE, FLAG_WARMUP
from tests.helpers import numpy_smoother_bundle, tiny_g

ONNX = (Path(__file__).parent / "data" / "hybrid_tiny.onnx").read_bytes()


def _hybrid(b, gain=1.0, lo=-1e3, hi=1e3, direct=(0.5, 0.5), guard=0):
    """``b`` with the tiny network acting as a force at the chain's free end (DOF n-1), its
    input the displacement and velocity there scaled to O(1)."""
    kf = dict(b.kf)
    ns, n = kf["A"].shape[0], b.n
    S = np.zeros((2, ns))
    S[0, 0:2 * n:2] = 1e5 * kf["H"][0, 0:2 * n:2]     # displacement [10 um]
    S[1, 1:2 * n:2] = 1e3 * kf["H"][0, 0:2 * n:2]     # velocity [mm/s]
    # a force at the free end: velocity rows of the modes get phi_end * dt (zero-order hold)
    Bg = np.zeros((ns, 1))
    Bg[1:2 * n:2, 0] = gain * b.dt * kf["H"][0, 0:2 * n:2]
    Dg = np.zeros((1, 1))
    Cqg = np.zeros((kf["Cq"].shape[0], 1))
    Cqg[2, 0] = gain * 0.3                              # the acceleration output sees g
    kf.update({"hy_onnx": np.frombuffer(ONNX, np.uint8).copy(), "hy_S": S, "hy_Bg": Bg,
               "hy_Dg": Dg, "hy_Cqg": Cqg, "hy_lo": np.full(2, lo), "hy_hi": np.full(2, hi),
               "hy_direct": np.array(direct, dtype=float), "hy_guard": np.array(guard)})
    return b.replace(kf=kf)


def _reload(b, tmp_path, name="b.npz"):
    b.save(tmp_path / name)
    return Bundle.load(tmp_path / name)


def _record(nt=1500, seed=3):
    rng = np.random.default_rng(seed)
    t = np.arange(nt) * 1e-3
    y = 2e-5 * np.sin(2 * np.pi * 12 * t) + 1e-6 * rng.standard_normal(nt)
    return y[:, None]


def _reference(b, Y, net=tiny_g):
    """NumPy twin: the reference smoother on y - Dg gd, x += Bg g, outputs + Cqg gd_k-L,
    gd_k = w0 g_k + w1 g_k-1 (w = kf_hy_direct, (1, 0) without it); an output that is not
    finite or beyond gmax_i = min_j (hi_j - lo_j) / |(S Bg)_ji| is not applied (as outside
    the envelope). Outside ``[lo, hi]`` g = 0, or with ``kf_hy_guard = 1`` g = g_theta(clip(s,
    lo, hi)), flagged either way. ``net``: the network's NumPy value, (1, ni) -> (1, ng)."""
    kf = b.kf
    ref = ReferenceSmoother(b)
    L = ref.L
    lo, hi = kf["hy_lo"], kf["hy_hi"]
    w = kf.get("hy_direct", (1.0, 0.0))
    clip = bool(int(kf.get("hy_guard", 0)))
    with np.errstate(divide="ignore"):
        gmax = np.min((hi - lo)[:, None] / np.abs(kf["hy_S"] @ kf["hy_Bg"]), axis=0)
    Fs, Zs, fl, gs, outs = [], [], [], [], []
    g_prev = np.zeros(1)
    for y in Y:
        # s = S x_k|k = S (x_k|k-1 + K (y - H x_k|k-1)); g = g_theta(s), 0 outside [lo, hi]
        yh = np.where(np.isfinite(y), y, ref.last)
        s = kf["hy_S"] @ (ref.x + kf["K"] @ (yh - kf["H"] @ ref.x))
        out = bool(np.any(s < lo) or np.any(s > hi))
        off = out and not clip
        if not off:
            with np.errstate(invalid="ignore"):
                g = net(np.clip(s, lo, hi)[None])[0]
            off = not np.all(np.abs(g) <= gmax)
            out = out or off
        g = np.zeros(1) if off else g
        gd = w[0] * g + w[1] * g_prev                   # the correction at sample k
        g_prev = g
        q, f = ref.step(y - kf["hy_Dg"] @ gd)
        ref.x = ref.x + kf["hy_Bg"] @ g                # x_k+1|k += Bg g_k
        gs.append(kf["hy_Cqg"] @ gd)
        outs.append(out)
        if f & FLAG_WARMUP:
            Fs.append(q[:1]), Zs.append(q[1:]), fl.append(f)
            continue
        q = q + gs[-1 - L]                              # z_k-L += Cqg g_k-L
        if any(outs[-1 - L:]):
            f |= FLAG_ENVELOPE
        Fs.append(q[:1]), Zs.append(q[1:]), fl.append(f)
    return np.array(Fs), np.array(Zs), np.array(fl, np.uint8), sum(outs)


def _run(est, Y, block=7):
    nt = Y.shape[0]
    F, Z = np.zeros((nt, est.n_forces)), np.zeros((nt, est.n_outputs))
    fl = np.zeros(nt, np.uint8)
    for i in range(0, nt, block):  # blocks of several samples, as the daemon's ring
        j = min(nt, i + block)
        est.process(Y[i:j], F[i:j], Z[i:j], fl[i:j])
    return F, Z, fl


def test_kernel_matches_numpy_twin(tmp_path):
    b = _reload(_hybrid(numpy_smoother_bundle(), gain=0.05), tmp_path)
    est = Estimator(b)
    assert isinstance(est, HybridEstimator)
    Y = _record()
    F, Z, fl = _run(est, Y)
    Fr, Zr, flr, nout = _reference(b, Y)
    ok = ~np.isnan(F[:, 0])
    assert ok.sum() == Y.shape[0] - 5 and nout == 0
    # same arithmetic in another order (numba fastmath, dense NumPy): 1e-9 relative
    for a, r in ((F, Fr), (Z, Zr)):
        scale = np.max(np.abs(r[ok]), axis=0)
        np.testing.assert_allclose(a[ok] / scale, r[ok] / scale, atol=1e-9)
    np.testing.assert_array_equal(fl, flr)
    # the correction changes the estimate (the test can fail if g were never applied)
    lin = _run(SmootherEstimator(numpy_smoother_bundle()), Y)
    assert np.max(np.abs(lin[0][ok] - F[ok])) > 1e-3 * np.max(np.abs(F[ok]))


def test_no_correction_is_the_linear_smoother(tmp_path):
    """Bg = Dg = Cqg = 0: the hybrid path gives the linear smoother's numbers exactly."""
    b = _hybrid(numpy_smoother_bundle(), gain=0.0)
    Y = _record()
    got = _run(Estimator(_reload(b, tmp_path)), Y)
    lin = _run(SmootherEstimator(numpy_smoother_bundle()), Y)
    for a, r in zip(got, lin):
        np.testing.assert_array_equal(a, r)


def test_outside_envelope_falls_back_to_linear(tmp_path):
    """An envelope that every state leaves: g is never applied (the linear estimate exactly),
    every estimate after warm-up is flagged, the health says so."""
    b = _reload(_hybrid(numpy_smoother_bundle(), gain=0.05, lo=1e6, hi=2e6), tmp_path)
    est = Estimator(b)
    Y = _record()
    F, Z, fl = _run(est, Y)
    lin = _run(SmootherEstimator(numpy_smoother_bundle()), Y)
    ok = ~np.isnan(F[:, 0])
    np.testing.assert_array_equal(F, lin[0])
    np.testing.assert_array_equal(Z, lin[1])
    assert np.all(fl[ok] & FLAG_ENVELOPE) and not np.any(fl[~ok] & FLAG_ENVELOPE)
    assert est.outside == Y.shape[0]
    mc = est.model_check()
    assert mc["hybrid"]["applied"] is False and any("envelope" in r for r in mc["reasons"])
    est.reset()
    assert est.outside == 0


def test_bundle_contract(tmp_path):
    b = _hybrid(numpy_smoother_bundle(), gain=0.05)
    b2 = _reload(b, tmp_path)
    from edge.bundle import SCHEMA_VERSION
    assert int(np.load(tmp_path / "b.npz")["schema_version"]) == SCHEMA_VERSION
    assert b2.kf["hy_onnx"].tobytes() == ONNX
    a = dict(np.load(tmp_path / "b.npz"))
    from edge.bundle import content_hash

    def broken(**ch):
        c = dict(a)
        c.update(ch)
        for k in [k for k, v in ch.items() if v is None]:
            del c[k]
        c["content_hash"] = np.array(content_hash(c))
        return c

    with pytest.raises(BundleError, match="kf_hy_Dg"):
        Bundle.from_arrays(broken(kf_hy_Dg=None))
    with pytest.raises(BundleError, match="kf_hy_S"):
        Bundle.from_arrays(broken(kf_hy_S=np.zeros((2, 3))))
    with pytest.raises(BundleError, match="needs schema 5"):
        Bundle.from_arrays(broken(schema_version=np.array(4, dtype=np.int64),
                                  kf_hy_direct=None))
    with pytest.raises(BundleError, match="kf_hy_direct"):   # schema 6: part of the group
        Bundle.from_arrays(broken(kf_hy_direct=None))
    with pytest.raises(BundleError, match="kf_hy_direct"):
        Bundle.from_arrays(broken(kf_hy_direct=np.zeros(3)))
    with pytest.raises(BundleError, match="kf_hy_onnx"):
        Bundle.from_arrays(broken(kf_hy_onnx=np.zeros(3)))
    # schema 10: the guard is part of the group, and only 0 (off) or 1 (saturate)
    with pytest.raises(BundleError, match="kf_hy_guard"):
        Bundle.from_arrays(broken(kf_hy_guard=None))
    with pytest.raises(BundleError, match="kf_hy_guard.*got 2"):
        Bundle.from_arrays(broken(kf_hy_guard=np.array(2)))
    bad = Bundle.from_arrays(broken(kf_hy_onnx=np.frombuffer(b"not onnx", np.uint8).copy()))
    with pytest.raises(EstimatorError, match="kf_hy_onnx"):
        Estimator(bad)


def test_saturating_guard_matches_numpy_twin(tmp_path):
    """``kf_hy_guard = 1`` (what a build writes): an envelope the state leaves often (the
    record's inputs reach 2.4 and 5.3 while the envelope ends at 0.5: 1,464 of 1,500 samples
    outside) holds the input at the bound and applies the network there; the kernel equals
    the NumPy twin (1e-9 relative, as test_kernel_matches_numpy_twin), the estimates are
    flagged, and they differ both from
    the switched-off guard's and from the unguarded network's (the test can fail either way)."""
    Y = _record()
    runs = {}
    for guard, (lo, hi) in ((1, (-0.5, 0.5)), (0, (-0.5, 0.5)), (1, (-1e3, 1e3))):
        b = _reload(_hybrid(numpy_smoother_bundle(), gain=0.05, lo=lo, hi=hi, guard=guard),
                    tmp_path, f"g{guard}{hi}.npz")
        est = Estimator(b)
        runs[guard, hi] = (_run(est, Y), _reference(b, Y), est)
    (F, Z, fl), (Fr, Zr, flr, nout), est = runs[1, 0.5]
    ok = ~np.isnan(F[:, 0])
    assert nout > 100 and est.outside == nout
    for a, r in ((F, Fr), (Z, Zr)):
        scale = np.max(np.abs(r[ok]), axis=0)
        np.testing.assert_allclose(a[ok] / scale, r[ok] / scale, atol=1e-9)
    np.testing.assert_array_equal(fl, flr)
    assert np.any(fl[ok] & FLAG_ENVELOPE)
    mc = est.model_check()["hybrid"]
    assert mc["guard"] == "saturate" and mc["applied"] is True
    scale = np.max(np.abs(F[ok]))
    for other in ((0, 0.5), (1, 1e3)):
        assert np.max(np.abs(runs[other][0][0][ok] - F[ok])) > 1e-3 * scale
    assert runs[0, 0.5][2].model_check()["hybrid"]["guard"] == "off"


def test_schema9_hybrid_bundle_is_read_with_the_guard_off(tmp_path):
    """A hybrid bundle of schema 9 (no kf_hy_guard) is read with the guard it was written
    with: the correction off outside the envelope."""
    b = _hybrid(numpy_smoother_bundle(), gain=0.05, lo=-0.5, hi=0.5, guard=0)
    b.save(tmp_path / "b.npz")
    a = dict(np.load(tmp_path / "b.npz"))
    del a["kf_hy_guard"]
    a["schema_version"] = np.array(9, dtype=np.int64)
    from edge.bundle import content_hash
    a["content_hash"] = np.array(content_hash(a))
    old = Bundle.from_arrays(a, "v9.npz")
    assert int(old.kf["hy_guard"]) == 0
    Y = _record()
    np.testing.assert_array_equal(_run(Estimator(old), Y)[0], _run(Estimator(b), Y)[0])


def test_schema5_hybrid_bundle_keeps_its_direct_terms(tmp_path):
    """A hybrid bundle written by schema 5 (no kf_hy_direct) loads and runs with the direct
    terms it was written with, g_k alone: the NumPy twin with w = (1, 0), also after saving
    it again (schema 6); the same bundle with w = (1/2, 1/2) gives other estimates (the
    field matters)."""
    b = _hybrid(numpy_smoother_bundle(), gain=0.05)
    b.save(tmp_path / "b.npz")
    a = dict(np.load(tmp_path / "b.npz"))
    del a["kf_hy_direct"], a["kf_hy_guard"]
    a["schema_version"] = np.array(5, dtype=np.int64)
    from edge.bundle import content_hash
    a["content_hash"] = np.array(content_hash(a))
    old = Bundle.from_arrays(a, "v5.npz")
    np.testing.assert_array_equal(old.kf["hy_direct"], [1.0, 0.0])
    # written again it is a current-schema bundle with the same mathematics
    from edge.bundle import SCHEMA_VERSION
    resaved = _reload(old, tmp_path, "v6.npz")
    assert int(np.load(tmp_path / "v6.npz")["schema_version"]) == SCHEMA_VERSION
    Y = _record()
    F, Z, fl = _run(Estimator(old), Y)
    np.testing.assert_array_equal(_run(Estimator(resaved), Y)[1], Z)
    Fr, Zr, flr, _ = _reference(_hybrid(numpy_smoother_bundle(), gain=0.05, direct=(1, 0)), Y)
    ok = ~np.isnan(F[:, 0])
    scale = np.max(np.abs(Zr[ok]), axis=0)
    # same arithmetic in another order: 1e-9 relative (as test_kernel_matches_numpy_twin)
    np.testing.assert_allclose(Z[ok] / scale, Zr[ok] / scale, atol=1e-9)
    F2, Z2, _ = _run(Estimator(b), Y)
    assert np.max(np.abs(Z2[ok] - Z[ok]) / scale) > 1e-6
