"""The hybrid model through the ADS1256 (offline/hybrid/conversion.py): its conversions of the
channels against an independent reference (the continuous modal model stepped exactly on a
grid 64x finer than the rows, converted by the chip's taps, offline.calibration_runs.convert),
its chain rows against the smoother's step, and the held correction against the force's
first-order hold."""

import numpy as np
import pytest
import scipy.linalg as scipy_linalg

from edge.acquisition import Chain
from edge.estimator.operator import modal_basis
from offline.calibration_runs import convert
from offline.hybrid import hybrid_model, simulate
from offline.hybrid.conversion import input_functionals
from offline.hybrid.discrete import _foh
from offline.model.sections import default_chain
from offline.smoother import ForceModel, attach_smoother, design_smoother
from tests.helpers import chain_bundle

RATE = 1082.5  # rows/s: two channels cycled at 3,750 SPS (edge/hw/ads1256_spec.row_rates)


def _smoother_on_the_chip(n=5):
    b = chain_bundle(n=n, kinds=("displacement", "acceleration"), dt=1.0 / RATE)
    b = b.replace(chain=default_chain(RATE, 2))
    assert b.chain.converter == "ads1256" and b.chain.mode == "cycle"
    fm = [ForceModel("bandpass", (5.0, 80.0), 1.0, 2)]
    return attach_smoother(b, design_smoother(b, fm, lag=4), fm, 0.0, nis_window_s=0.5,
                           bands=[(20, 22), (22, 24)])


def test_conversion_rows_are_the_smoothers():
    b = _smoother_on_the_chip()
    n, nch = b.n, 2
    hm = hybrid_model(b, np.eye(n)[[n - 1]])
    W = b.chain.intervals(b.dt, nch)
    assert hm.nk == W * nch and hm.A.shape == (2 * n + hm.nk,) * 2
    # the structural columns of kf_A's chain rows (the smoother's state [modes, force-model
    # states, chain]) are the conversions' functionals of this module's own system, computed
    # without the force-model states: equal to round-off (1e-9 of the largest entry)
    Ak = np.asarray(b.kf["A"])
    ns = Ak.shape[0]
    Ac = _continuous(b)
    C = hybrid_model(b.replace(chain=Chain()), np.eye(n)[[n - 1]]).H   # point samples' rows
    Lx, *_ = input_functionals(Ac, np.zeros((2 * n, 1)), np.zeros((2 * n, 1)), C,
                               np.zeros((nch, 1)), b.dt, b.chain, nch)
    ref = Ak[ns - hm.nk:, :2 * n]
    np.testing.assert_allclose(Lx, ref, rtol=0, atol=1e-9 * np.max(np.abs(ref)))
    np.testing.assert_array_equal(hm.A[2 * n:, :2 * n], ref)   # the edge's step is used
    # channels read the last conversion states; the force has no direct term left (the
    # correction's g_k has: test_a_constant_correction_is_a_constant_force_at_its_dof)
    assert np.all(hm.Du == 0)
    np.testing.assert_array_equal(hm.H[:, -nch:], np.eye(nch))


def _continuous(b):
    """The smoother's structural continuous system (modal, [eta, eta'] per mode)."""
    from offline.hybrid.discrete import _modal
    return _modal(b).Ac()


def test_a_constant_correction_is_a_constant_force_at_its_dof():
    # the correction at the force's DOF, every mode loaded: held over the step it drives the
    # structure as the force's first-order hold with u_k-1 = u_k (exact), and a constant one
    # reaches each conversion as a constant force does: its direct part (interpolated between
    # the mid-steps, offline/hybrid/conversion.direct_weights) spread over the chain states
    # of the conversion and the channel's direct term, whose weights sum to the hold's
    b = _smoother_on_the_chip()
    n, nch = b.n, 2
    hm = hybrid_model(b, np.eye(n)[[n - 1]])
    m = 2 * n
    held = hm.B0 + hm.B1
    np.testing.assert_allclose(hm.Bg[:m], held[:m], rtol=1e-9,
                               atol=1e-12 * np.max(np.abs(hm.Bg[:m])))
    W = hm.nk // nch
    for c in range(nch):
        rows = m + np.arange(W) * nch + c
        total = hm.Bg[rows].sum(axis=0) + hm.Dg[c]          # gd = (g_k + g_k-1) / 2
        np.testing.assert_allclose(total, held[rows].sum(axis=0), rtol=1e-9,
                                   atol=1e-12 * np.max(np.abs(held[rows])))
    assert hm.Dg[0, 0] == 0.0 and hm.Dg[1, 0] != 0.0       # the accelerometer sees g_k


@pytest.mark.parametrize("with_g", [False, True])
def test_conversions_match_the_chip_on_a_fine_grid(with_g):
    """A known force (zero for the first rows, then random; linear between rows) and, with
    ``with_g``, a constant correction switched on at row 5: the hybrid model's channels
    against the modal model stepped exactly every 1/64 row (first-order hold of the force,
    the correction held; seen directly, linear between its mid-step values) and converted by
    the chip's taps between those nodes."""
    b = _smoother_on_the_chip()
    n, nch, nt, sub = b.n, 2, 400, 64
    hm = hybrid_model(b, np.eye(n)[[n - 1]])
    rng = np.random.default_rng(3)
    U = np.zeros((nt, 1))
    U[8:, 0] = rng.standard_normal(nt - 8)
    g0, on = 0.7, 5
    G = np.zeros(nt)
    if with_g:
        G[on:] = g0
    k = {"i": 0}

    def g(_s):  # the k-th call is g_k (simulate calls it once per row, in order)
        v = G[k["i"]]
        k["i"] += 1
        return np.array([v])
    _, Y, _ = simulate(hm, U, g if with_g else None)
    # reference: the modal model built here (M^-1 K's modes, Phi^T C Phi as it is), [u, g]
    # on the fine grid (u linear between rows, g held over each row), stepped exactly
    w2, Phi = modal_basis(b.M, b.K)
    Ct = Phi.T @ b.C @ Phi
    Ac = np.zeros((2 * n, 2 * n))
    Ac[0::2, 1::2] = np.eye(n)
    Ac[1::2, 0::2] = -np.diag(w2)
    Ac[1::2, 1::2] = -Ct
    Bc = np.zeros((2 * n, 2))
    Bc[1::2, 0] = Bc[1::2, 1] = Phi[n - 1]
    h = b.dt / sub
    A_f, G1, G2 = _foh(scipy_linalg, Ac, Bc, h)
    tf = np.arange((nt - 1) * sub + 1) * h
    uf = np.interp(tf, np.arange(nt) * b.dt, U[:, 0])
    gf = np.repeat(G, sub)[:tf.size]                          # held: drives the structure
    # seen directly: linear between the values at the mid-steps, g_-1 = 0 (at rest)
    gdf = np.interp(tf, (np.arange(-1, nt) + 0.5) * b.dt, np.r_[0.0, G])
    C = np.zeros((nch, 2 * n))
    C[0, 0::2] = Phi[n - 1]                                   # displacement at the DOF
    C[1, 0::2] = -w2 * Phi[n - 1]                             # its acceleration
    C[1, 1::2] = -Phi[n - 1] @ Ct
    direct = np.array([0.0, Phi[n - 1] @ Phi[n - 1]])         # (M^-1)_dd (u + g)
    x = np.zeros(2 * n)
    yf = np.zeros((tf.size, nch))
    for j in range(tf.size):
        yf[j] = C @ x + direct * (uf[j] + gdf[j])
        if j + 1 < tf.size:
            # x+ = A x + (G1 - G2) [u, g]_j + G2 [u_j+1, g_j]   (g held within the row)
            x = A_f @ x + (G1 - G2) @ [uf[j], gf[j]] + G2 @ [uf[j + 1], gf[j]]
    ref = convert(yf, h, sub, nt, b.chain)
    # 1e-4 of each channel's RMS: the reference's linear interpolation between the fine
    # nodes (1/64 row: (w h)^2 / 12 ~ 1e-5 at 150 Hz); the mid-steps are fine nodes
    for c in range(nch):
        scale = np.sqrt(np.mean(ref[:, c] ** 2))
        np.testing.assert_allclose(Y[:, c], ref[:, c], rtol=0, atol=1e-4 * scale)


@pytest.mark.slow
def test_build_hybrid_through_the_chip_cli_and_edge(tmp_path):
    """The strip with a cubic spring at 1,082.5 rows/s, no [acquisition]: the ADS1256 the
    device reads cycles its two channels at 3,750 SPS, the records are its conversions
    (offline/hybrid/demo.records through the model file's chain), and `vsense-offline build
    --hybrid` models them (before: the build fell back to point samples with a warning and
    the device fed it conversions). At the high level the hybrid's force is closer to the
    truth than the linear smoother's on the same conversions."""
    pytest.importorskip("jax")
    from edge.estimator import Estimator
    from edge.estimator.hybrid import HybridEstimator
    from offline.cli import main
    from offline.hybrid import demo
    from offline.model import load_model_file

    path = tmp_path / "strip.toml"
    path.write_text(demo.model_text(0.007).replace("rate = 1000.0", f"rate = {RATE}")
                    .replace("restarts = 3", "restarts = 1")
                    .replace("inputs = [", "epochs = 40\ninputs = ["))
    spec = load_model_file(path)
    assert spec.chain().converter == "ads1256"
    recs = []
    for name, rms, seed in (("low", 0.0007, 1), ("high", 0.007, 2), ("val", 0.003, 3)):
        t, F, Y, _ = demo.records(path, rms, seed, 3.0)
        recs += ["--hybrid", str(demo.write_record(tmp_path / f"{name}.csv", t, F, Y, spec))]
    assert main(["build", str(path), "-o", str(tmp_path / "h.npz"), "--quiet", *recs]) == 0
    assert main(["build", str(path), "-o", str(tmp_path / "l.npz"), "--quiet"]) == 0
    hy = Estimator(str(tmp_path / "h.npz"))
    assert isinstance(hy, HybridEstimator)
    assert hy.bundle.chain.converter == "ads1256" and hy.bundle.chain.mode == "cycle"
    assert not any("point samples" in w for w in hy.bundle.meta.get("warnings", []))
    # the correction reaches the conversions in progress (the chain states come last)
    nk = 2 * hy.bundle.chain.intervals(hy.bundle.dt, 2)
    assert np.any(np.asarray(hy.bundle.kf["hy_Bg"])[-nk:] != 0)
    t, F, Y, Z = demo.records(path, 0.007, 151, 3.0)
    errs = []
    for est in (Estimator(str(tmp_path / "l.npz")), hy):
        nt = Y.shape[0]
        Fe, Ze = np.zeros((nt, 1)), np.zeros((nt, 2))
        est.process(np.ascontiguousarray(Y), Fe, Ze, np.zeros(nt, np.uint8))
        d = est.delay
        e, tf = Fe[d + 500:, 0], F[500:nt - d, 0]
        errs.append(np.sqrt(np.mean((e - tf) ** 2)) / np.std(tf))
    # the force on the conversions (scratch runs of this setup with 4 s records and the
    # full training, seeds 150 / 151: linear 0.83 / 0.33; the hybrid with the correction's
    # direct part held 0.16 / 0.037, interpolated 0.15 / 0.024; benchmarks/hybrid.py --rate
    # 1082.5: 14x better over seeds 151-153)
    assert errs[1] < 0.5 * errs[0], errs
    assert hy.rejected == 0
