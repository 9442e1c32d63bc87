"""Model reduction (offline/reduction): Guyan, Craig-Bampton, GMR+ (paper 004 eq. 4-6, 31).

Test models are assembled here with scipy.sparse (spring chains, a 2-D truss grid, an
Euler-Bernoulli cantilever) so that the references are independent of offline/fem: closed-form
chain eigenvalues, the cantilever's characteristic-equation roots, a hand-computed 2-DOF
Guyan model, and a dense NumPy transcription of eq. 4 written from the paper.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp

from offline.fem.femodel import FEModel
from offline.reduction import (ReductionReport, plot_reports, recover, reduce)
from offline.reduction.eigen import DENSE_MAX, modes, rigid_count
from offline.reduction.flexibility import Flexibility
from offline.reduction.guyan import constraint_modes
from offline.reduction.partition import partition
from offline.reduction.report import eigenvalue_error

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    # the dense LAPACK references are small; OpenBLAS threads on the shared 2-core machine
    # made them 30x slower (measured), so run them single-threaded like reduce() does
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # comes with scikit-learn (offline extra); tests just run slower
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


# ------------------------------------------------------------------------- test models
def _model(K, M, name="test") -> FEModel:
    n = K.shape[0]
    return FEModel(coords=np.zeros((n, 3)), node_ids=np.arange(n, dtype=np.int64),
                   dof_node=np.arange(n, dtype=np.int64), dof_kind=np.zeros(n, np.int8),
                   M=sp.csr_matrix(M), K=sp.csr_matrix(K), name=name)


def chain(n, k=1000.0, m=2.0, grounded=True) -> FEModel:
    """n masses m [kg] joined by springs k [N/m]; the first one grounded by a spring k or free."""
    main = np.full(n, 2.0 * k)
    main[-1] = k
    if not grounded:
        main[0] = k
    off = -k * np.ones(n - 1)
    K = sp.diags([main, off, off], [0, 1, -1], format="csr")
    M = sp.identity(n, format="csr") * m
    return _model(K, M, "chain")


def chain_eigenvalues(n, k, m, grounded):
    """Closed-form eigenvalues [rad^2/s^2] of :func:`chain` (tridiagonal Toeplitz theory)."""
    if grounded:
        # lambda_j = 4k/m sin^2((2j-1) pi / (2(2n+1))), j = 1..n   (fixed-free chain)
        j = np.arange(1, n + 1)
        return 4 * k / m * np.sin((2 * j - 1) * np.pi / (2 * (2 * n + 1))) ** 2
    # lambda_j = 4k/m sin^2(j pi / (2n)), j = 0..n-1   (free-free chain)
    j = np.arange(n)
    return 4 * k / m * np.sin(j * np.pi / (2 * n)) ** 2


def cantilever(n_el, L=1.0, EI=2.0e3, rhoA=3.0) -> FEModel:
    """Euler-Bernoulli cantilever, Hermite elements, consistent mass; DOFs (w, theta) of nodes
    1..n_el (node 0 clamped)."""
    h = L / n_el
    # K_e = EI/h^3 [[12, 6h, -12, 6h], [6h, 4h^2, -6h, 2h^2], ...]
    Ke = EI / h**3 * np.array([[12, 6 * h, -12, 6 * h], [6 * h, 4 * h * h, -6 * h, 2 * h * h],
                               [-12, -6 * h, 12, -6 * h], [6 * h, 2 * h * h, -6 * h, 4 * h * h]])
    # M_e = rho A h / 420 [[156, 22h, 54, -13h], ...]
    Me = rhoA * h / 420 * np.array([[156, 22 * h, 54, -13 * h],
                                    [22 * h, 4 * h * h, 13 * h, -3 * h * h],
                                    [54, 13 * h, 156, -22 * h],
                                    [-13 * h, -3 * h * h, -22 * h, 4 * h * h]])
    N = 2 * (n_el + 1)
    rows, cols, kv, mv = [], [], [], []
    for e in range(n_el):
        d = np.arange(2 * e, 2 * e + 4)
        rows.append(np.repeat(d, 4))
        cols.append(np.tile(d, 4))
        kv.append(Ke.ravel())
        mv.append(Me.ravel())
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    K = sp.coo_matrix((np.concatenate(kv), (rows, cols)), shape=(N, N)).tocsr()
    M = sp.coo_matrix((np.concatenate(mv), (rows, cols)), shape=(N, N)).tocsr()
    free = np.arange(2, N)
    return _model(K[free][:, free], M[free][:, free], "cantilever")


#: Roots beta_n L of 1 + cos(x) cosh(x) = 0 (cantilever characteristic equation).
CANTILEVER_ROOTS = np.array([1.875104068711961, 4.694091132974175, 7.854757438237613,
                             10.99554073487547, 14.13716839104647])


def truss(nx, ny, a=0.1, EA=1.0e6, m=0.5, clamp_left=False) -> FEModel:
    """2-D pin-jointed grid (bars along x, y and both diagonals), lumped mass m per node;
    DOFs (ux, uy) node-major. Free-free (3 rigid-body modes) unless ``clamp_left``."""
    xy = np.array([(i * a, j * a) for j in range(ny) for i in range(nx)], dtype=float)

    def nid(i, j):
        return j * nx + i

    bars = []
    for j in range(ny):
        for i in range(nx):
            if i + 1 < nx:
                bars.append((nid(i, j), nid(i + 1, j)))
            if j + 1 < ny:
                bars.append((nid(i, j), nid(i, j + 1)))
            if i + 1 < nx and j + 1 < ny:
                bars += [(nid(i, j), nid(i + 1, j + 1)), (nid(i + 1, j), nid(i, j + 1))]
    N = 2 * len(xy)
    rows, cols, vals = [], [], []
    for p, q in bars:
        d = xy[q] - xy[p]
        Lb = float(np.hypot(*d))
        c, s = d / Lb
        g = np.array([-c, -s, c, s])
        dofs = np.array([2 * p, 2 * p + 1, 2 * q, 2 * q + 1])
        rows.append(np.repeat(dofs, 4))
        cols.append(np.tile(dofs, 4))
        # k_bar = EA/L g g^T
        vals.append((EA / Lb * np.outer(g, g)).ravel())
    K = sp.coo_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(N, N)).tocsr()
    M = sp.identity(N, format="csr") * m
    model = _model(K, M, "truss")
    if clamp_left:
        left = np.array([nid(0, j) for j in range(ny)])
        fixed = np.zeros(N, bool)
        fixed[2 * left] = fixed[2 * left + 1] = True
        model = model.constrain(fixed)
    return model


def dense_eigenvalues(model, k):
    """Reference eigenvalues: LAPACK dense generalized eigh of the full model."""
    return sla.eigh(model.K.toarray(), model.M.toarray(), eigvals_only=True)[:k]


def dense_gmr(model, masters, nd, n_rigid=0, method="gmr+"):
    """Paper eq. 4 transcribed with dense NumPy: full slave eigendecomposition, F_rs as the
    modal sum over residual modes, Y = -K_ss^+ K_sm (M-orthogonal to rigid slave modes)."""
    K, M = model.K.toarray(), model.M.toarray()
    N = K.shape[0]
    m = np.asarray(masters)
    s = np.setdiff1d(np.arange(N), m)
    Kss, Ksm, Mss, Msm = K[np.ix_(s, s)], K[np.ix_(s, m)], M[np.ix_(s, s)], M[np.ix_(s, m)]
    g, P = sla.eigh(Kss, Mss)
    if n_rigid:
        Pe, ge = P[:, n_rigid:], g[n_rigid:]
        Y = -(Pe / ge) @ (Pe.T @ Ksm)
    else:
        Y = -np.linalg.solve(Kss, Ksm)
    Pr, gr = P[:, nd:], g[nd:]
    F = (Pr / gr) @ Pr.T
    nm = m.size
    T0 = np.zeros((N, nm + nd))
    T0[m, :nm] = np.eye(nm)
    T0[np.ix_(s, np.arange(nm))] = Y
    T0[np.ix_(s, np.arange(nm, nm + nd))] = P[:, :nd]
    if method == "cb":
        return T0
    M0, K0 = T0.T @ M @ T0, T0.T @ K @ T0
    L = np.zeros((N, nm + nd))
    L[np.ix_(s, np.arange(nm))] = F @ (Msm + Mss @ Y)
    return T0 + L @ np.linalg.solve(M0, K0)


def reduced_eigenvalues(T, model):
    K, M = model.K.toarray(), model.M.toarray()
    return sla.eigh(T.T @ K @ T, T.T @ M @ T, eigvals_only=True)


# ------------------------------------------------------------------ independent references
def test_guyan_two_dof_closed_form():
    k1, k2, m1, m2 = 3.0e4, 1.0e4, 2.0, 0.5
    model = _model(np.array([[k1 + k2, -k2], [-k2, k2]]), np.diag([m1, m2]))
    red = reduce(model, [1], 0, "guyan", n_report=1, progress=False)
    # hand: Y = k2/(k1+k2); K_hat = k1 k2/(k1+k2) (springs in series); M_hat = m2 + m1 Y^2
    a = k2 / (k1 + k2)
    assert red.T[:, 0] == pytest.approx([a, 1.0], rel=1e-14)
    assert red.K[0, 0] == pytest.approx(k1 * k2 / (k1 + k2), rel=1e-13)
    assert red.M[0, 0] == pytest.approx(m2 + m1 * a * a, rel=1e-13)
    # full-model reference: LAPACK eigh of the 2x2 pencil
    assert red.report.lam_full[0] == pytest.approx(dense_eigenvalues(model, 1)[0], rel=1e-12)


@pytest.mark.parametrize("method", ["cb", "gmr+", "cb+r"])
def test_all_slave_modes_reproduce_full_spectrum(method):
    # with every slave mode kept T spans R^N (and F_rs = 0): exact up to round-off
    n, k, m = 60, 1000.0, 2.0                  # chain: lambda_max / lambda_1 ~ 1.5e4
    model = chain(n, k, m)
    masters = np.array([59, 30, 4])
    red = reduce(model, masters, n - 3, method, n_report=n, progress=False)
    ref = chain_eigenvalues(n, k, m, grounded=True)    # closed form
    lam = sla.eigh(red.K, red.M, eigvals_only=True)
    assert np.max(np.abs(lam - ref) / ref) < 1e-10
    # a beam (lambda_max / lambda_1 ~ 7e8): backward-stable to 1e-9 of lambda_max
    model = cantilever(40)
    masters = np.array([79, 38, 20])
    red = reduce(model, masters, model.n_dofs - 3, method, n_report=0, progress=False)
    ref = dense_eigenvalues(model, model.n_dofs)   # reference: LAPACK eigh of the full model
    lam = sla.eigh(red.K, red.M, eigvals_only=True)
    assert np.max(np.abs(lam - ref)) < 1e-9 * ref[-1]


def test_full_reference_matches_closed_form_chain():
    # sparse path (n > DENSE_MAX) of the full-model eigensolver vs the closed form
    n, k, m = 600, 1000.0, 2.0
    assert n > DENSE_MAX
    red = reduce(chain(n, k, m), [n - 1, 300], 6, "gmr+", n_report=8, progress=False)
    ref = chain_eigenvalues(n, k, m, grounded=True)[:8]
    assert np.max(np.abs(red.report.lam_full - ref) / ref) < 1e-9


def test_cantilever_model_converges_to_beam_theory():
    # the test beam itself: first 3 frequencies vs (beta_n L)^2 sqrt(EI / (rho A L^4))
    EI, rhoA = 2.0e3, 3.0
    lam = dense_eigenvalues(cantilever(60, 1.0, EI, rhoA), 3)
    ref = CANTILEVER_ROOTS[:3] ** 4 * EI / rhoA
    # 60 cubic elements: h^4 discretisation error well below 1e-6 on the first modes
    assert np.max(np.abs(lam - ref) / ref) < 1e-6


@pytest.mark.parametrize("method,nd", [("gmr+", 8), ("cb", 8)])
def test_matches_dense_transcription_of_eq4(method, nd):
    model = truss(30, 8, clamp_left=True)      # 2 x 29 x 8 = 464 DOFs -> sparse path
    masters = np.array([463, 462, 231, 230, 99, 100])
    red = reduce(model, masters, nd, method, n_report=0, progress=False)
    T_ref = dense_gmr(model, masters, nd, method=method)
    nm = masters.size
    # master columns do not depend on eigenvector signs: compare entrywise
    scale = np.max(np.abs(T_ref[:, :nm]))
    assert np.max(np.abs(red.T[:, :nm] - T_ref[:, :nm])) < 1e-9 * scale
    lam = sla.eigh(red.K, red.M, eigvals_only=True)
    lam_ref = reduced_eigenvalues(T_ref, model)
    assert np.max(np.abs(lam - lam_ref) / lam_ref) < 1e-9


# ------------------------------------------------------------------------- accuracy order
@pytest.mark.parametrize("which", ["beam", "grid"])
def test_error_order_gmr_cb_guyan(which):
    if which == "beam":
        model = cantilever(250)                # 500 DOFs
        masters = np.concatenate([[2 * i - 2, 2 * i - 1] for i in (50, 100, 150, 200, 250)])
    else:
        model = truss(24, 8, clamp_left=True)  # 2 x 23 x 8 = 368 DOFs
        masters = np.array([2 * (j * 23 + i) + c for j in (0, 7) for i in (7, 15, 22)
                            for c in (0, 1)])
    n_cmp = 8
    err = {}
    for method in ("gmr+", "cb", "guyan"):
        red = reduce(model, masters, 6, method, n_report=n_cmp, progress=False)
        err[method] = np.abs(red.report.eig_error)
    if which == "beam":
        # reference: roots of 1 + cos cosh = 0 (dense LAPACK is too inexact for this
        # lambda_max / lambda_1 ~ 1e11); 250 cubic elements: discretisation error < 1e-8
        ref = CANTILEVER_ROOTS**4 * 2.0e3 / 3.0
        assert np.allclose(red.report.lam_full[:5], ref, rtol=1e-7, atol=0)
    else:
        ref = dense_eigenvalues(model, n_cmp)  # reference: LAPACK eigh of the full model
        assert np.allclose(red.report.lam_full, ref, rtol=1e-10, atol=0)
    # mode by mode: GMR+ < CB < Guyan (Rayleigh-Ritz on nested-quality bases)
    assert np.all(err["gmr+"] < err["cb"]), err
    assert np.all(err["cb"] < err["guyan"]), err
    # and GMR+ gains at least a factor 10 on average over CB here
    assert np.exp(np.mean(np.log(err["cb"] / np.maximum(err["gmr+"], 1e-300)))) > 10.0


@pytest.mark.parametrize("method", ["guyan", "cb", "gmr+", "cb+r"])
def test_ritz_upper_bound_and_symmetry(method):
    model = truss(24, 8, clamp_left=True)
    masters = np.array([0, 1, 100, 101, 200, 201, 300, 301])
    red = reduce(model, masters, 10, method, n_report=12, progress=False)
    # exactly symmetric after explicit symmetrisation, asymmetry before reported
    assert np.array_equal(red.M, red.M.T) and np.array_equal(red.K, red.K.T)
    assert red.report.diagnostics["asym_M"] < 1e-12
    assert red.report.diagnostics["asym_K"] < 1e-12
    np.linalg.cholesky(red.M)                 # M positive definite
    # Rayleigh-Ritz: lambda_hat_i >= lambda_i, i.e. eq. 31 error <= 0 (up to round-off)
    assert np.all(red.report.eig_error <= 1e-9)
    assert red.report.lam_reduced.shape == red.report.lam_full.shape == (min(12, red.n),)
    # masters keep their physical meaning: T[masters] = [I 0]
    nm = masters.size
    assert np.array_equal(red.T[masters, :nm], np.eye(nm))
    assert not np.any(red.T[masters, nm:])


# --------------------------------------------------------------------------- rigid bodies
@pytest.mark.parametrize("method", ["guyan", "cb", "gmr+"])
def test_free_free_chain_masters_on_one_end(method):
    n, k, m = 600, 1000.0, 2.0
    model = chain(n, k, m, grounded=False)     # one rigid-body mode, K singular
    red = reduce(model, [0, 1, 2], 8, method, n_report=6, progress=False)
    ref = chain_eigenvalues(n, k, m, grounded=False)[:6]   # closed form, ref[0] = 0
    rep = red.report
    assert rep.n_rigid == 1 and rep.diagnostics["sigma_full"] < 0
    nr = rep.lam_full.size                     # min(6, n_reduced): 3 for Guyan
    ref = ref[:nr]
    # full-model reference via the shifted solver: closed form to 1e-9 (rigid: absolute)
    assert abs(rep.lam_full[0]) < 1e-9 * ref[1]
    assert np.max(np.abs(rep.lam_full[1:] - ref[1:]) / ref[1:]) < 1e-9
    # reduced: the rigid-body mode is exact (it lies in span [I; Y]) ...
    assert abs(rep.lam_reduced[0]) < 1e-9 * ref[1]
    assert rep.freqs_reduced[0] < 1e-4 * rep.freqs_full[1]
    # Ritz upper bounds on the elastic modes
    assert np.all(rep.lam_reduced[1:] >= ref[1:] * (1 - 1e-10))
    if method == "guyan":
        return                                 # 3 end masters: slaves follow statically
    # the first elastic modes are reproduced (acceptance bounds for 3 end masters and 8 slave
    # modes of a 600-mass chain: GMR+ 1e-5, CB 1e-2 relative)
    tol = {"gmr+": 1e-5, "cb": 1e-2}[method]
    rel = np.abs(rep.lam_reduced[1:4] - ref[1:4]) / ref[1:4]
    assert np.all(rel < tol), rel


@pytest.mark.parametrize("method", ["cb", "gmr+"])
def test_unrestrained_slave_set(method):
    # free-free 2-D grid, masters (ux, uy) of one corner node: the slave set can still rotate
    # about it, so K_ss is singular (one rigid slave mode); the full model has three
    model = truss(20, 15)                      # 600 DOFs -> sparse path
    ref = dense_eigenvalues(model, 10)         # reference: LAPACK eigh of the full model
    red = reduce(model, [0, 1], 8, method, n_report=10, progress=False)
    d = red.report.diagnostics
    assert d["n_rigid_slave"] == 1 and d["sigma_slave"] < 0
    assert red.report.n_rigid == 3
    lam = red.report.lam_reduced
    # all three rigid-body modes exact (span[T0] contains them)
    assert np.all(np.abs(lam[:3]) < 1e-9 * ref[3])
    # elastic modes: Ritz upper bounds, first two within 5 % (few masters, 8 modes);
    # dense eq.-4 transcription as the reference for the reduced spectrum itself
    assert np.all(lam[3:] >= ref[3:] * (1 - 1e-10))
    assert np.all((lam[3:5] - ref[3:5]) / ref[3:5] < 0.05)
    lam_ref = reduced_eigenvalues(dense_gmr(model, [0, 1], 8, n_rigid=1, method=method), model)
    assert np.allclose(lam[3:], lam_ref[3:10], rtol=1e-9, atol=0)
    assert np.all(np.abs(lam_ref[:3]) < 1e-9 * ref[3])


def test_unrestrained_slave_set_guyan_and_too_few_modes_refused():
    model = truss(12, 10)
    with pytest.raises(ValueError, match="masters: they do not restrain"):
        reduce(model, [0, 1], 0, "guyan", n_report=0, progress=False)
    # two masters on one node leave 1 rigid slave mode; a vertical pair of nodes leaves none
    red = reduce(model, [0, 1, 24, 25], 1, "gmr+", n_report=4, progress=False)
    assert red.report.diagnostics["n_rigid_slave"] == 0


def test_constraint_modes_and_residual_flexibility_singular_slave_set():
    model = truss(20, 15)
    part = partition(model.K, model.M, [0, 1])
    sm = modes(part.K_ss, part.M_ss, 6)
    assert sm.n_rigid == 1 and sm.factor.sigma < 0
    flex = Flexibility(sm.factor, part.M_ss, sm.Phi, sm.lam, sm.n_rigid)
    Y = constraint_modes(part, flex, block=1)
    Ksm = part.K_sm.toarray()
    # K_ss Y = -K_sm holds although K_ss is singular (compatibility R^T K_sm = 0)
    assert np.linalg.norm(part.K_ss @ Y + Ksm) < 1e-10 * np.linalg.norm(Ksm)
    # and Y is M-orthogonal to the rigid slave mode
    R = sm.Phi[:, :1]
    assert np.max(np.abs(R.T @ (part.M_ss @ Y))) < 1e-10 * np.max(np.abs(Y))
    # residual flexibility vs the dense modal sum over residual modes
    g, P = sla.eigh(part.K_ss.toarray(), part.M_ss.toarray())
    F = (P[:, 6:] / g[6:]) @ P[:, 6:].T
    X = np.random.default_rng(3).standard_normal((part.s.size, 4))
    FX = flex.residual(X)
    assert np.max(np.abs(FX - F @ X)) < 1e-10 * np.max(np.abs(F @ X))
    assert max(flex.iterations) < 50


def test_residual_flexibility_unshifted_is_eq_4c():
    model = cantilever(250)
    part = partition(model.K, model.M, [499, 498, 199])
    sm = modes(part.K_ss, part.M_ss, 5)
    assert sm.factor.sigma == 0.0 and sm.n_rigid == 0
    flex = Flexibility(sm.factor, part.M_ss, sm.Phi, sm.lam)
    g, P = sla.eigh(part.K_ss.toarray(), part.M_ss.toarray())
    F = (P[:, 5:] / g[5:]) @ P[:, 5:].T       # reference: dense modal sum over residual modes
    X = np.random.default_rng(4).standard_normal((part.s.size, 3))
    assert np.max(np.abs(flex.residual(X) - F @ X)) < 1e-8 * np.max(np.abs(F @ X))
    assert flex.iterations == []


# ------------------------------------------------------------------------------ eigen
def test_sparse_eigensolver_matches_references():
    model = truss(30, 8, clamp_left=True)      # 464 DOFs > DENSE_MAX
    md = modes(model.K, model.M, 10)
    ref = dense_eigenvalues(model, 10)         # reference: LAPACK eigh
    assert md.factor.sigma == 0.0 and md.n_rigid == 0
    assert np.max(np.abs(md.lam - ref) / ref) < 1e-10
    # mass-normalised, M-orthogonal
    G = md.Phi.T @ (model.M @ md.Phi)
    assert np.max(np.abs(G - np.eye(10))) < 1e-10
    # ill-conditioned beam (lambda_max / lambda_1 ~ 5e11): shift-invert keeps the lowest
    # eigenvalues relatively accurate; reference: roots of 1 + cos cosh = 0 (error < 1e-8
    # from the 300-element discretisation)
    md = modes(cantilever(300).K, cantilever(300).M, 5)
    ref = CANTILEVER_ROOTS**4 * 2.0e3 / 3.0
    assert np.max(np.abs(md.lam - ref) / ref) < 1e-7


def test_shift_selection_paths():
    from offline.reduction.eigen import SingularFactor, factorize
    # exactly singular (integer Laplacian of a free chain): splu refuses sigma = 0
    model = chain(600, 1000.0, 2.0, grounded=False)
    with pytest.raises(SingularFactor):
        factorize(model.K)
    md = modes(model.K, model.M, 4)
    ref = chain_eigenvalues(600, 1000.0, 2.0, grounded=False)[:4]   # closed form
    assert md.n_rigid == 1 and md.factor.sigma < 0
    assert abs(md.lam[0]) < 1e-9 * ref[1]
    assert np.max(np.abs(md.lam[1:] - ref[1:]) / ref[1:]) < 1e-9
    # the shift ends up within [1e-3, 1] x the first elastic eigenvalue (module docstring)
    assert 1e-3 * ref[1] <= -md.factor.sigma <= ref[1] * (1 + 1e-9)
    # an explicit shift is used as given; a positive one is refused
    md = modes(model.K, model.M, 3, sigma=-0.5 * ref[1])
    assert md.factor.sigma == -0.5 * ref[1]
    assert np.max(np.abs(md.lam[1:] - ref[1:3]) / ref[1:3]) < 1e-9
    with pytest.raises(ValueError, match="sigma"):
        modes(model.K, model.M, 3, sigma=1.0)
    with pytest.raises(ValueError, match="k=-1"):
        modes(model.K, model.M, -1)


@pytest.mark.parametrize("method", ["guyan", "cb", "cb+r"])
def test_static_response_to_master_loads_is_exact(method):
    # static condensation property: [I; Y] holds the exact static response to master forces
    spla = pytest.importorskip("scipy.sparse.linalg")
    model = truss(30, 8, clamp_left=True)
    masters = np.array([463, 462, 231, 230, 99])
    red = reduce(model, masters, 4, method, n_report=0, progress=False)
    f = np.zeros(model.n_dofs)
    f[masters] = np.random.default_rng(6).standard_normal(masters.size) * 1e3
    u_ref = spla.spsolve(model.K.tocsc(), f)   # reference: direct sparse solve of the full model
    u_red = red.T @ np.linalg.solve(red.K, red.T.T @ f)
    assert np.max(np.abs(u_red - u_ref)) < 1e-9 * np.max(np.abs(u_ref))


def test_gmr_static_response_misses_and_cb_r_spans_both_bases():
    # the cause of the portal frame's strain error (benchmarks/strain_cases.py): GMR+ folds
    # the residual vectors into the CB coordinates through the free-vibration estimate
    # u'' ~ -M0^-1 K0 u, so a static master load is answered with an error; "cb+r" keeps
    # them as coordinates of their own: its span holds the CB and the GMR+ bases
    spla = pytest.importorskip("scipy.sparse.linalg")
    model = truss(30, 8, clamp_left=True)
    masters = np.array([463, 462, 231, 230, 99])
    f = np.zeros(model.n_dofs)
    f[masters] = np.random.default_rng(6).standard_normal(masters.size) * 1e3
    u_ref = spla.spsolve(model.K.tocsc(), f)   # reference: direct sparse solve
    red = {m: reduce(model, masters, 4, m, n_report=8, progress=False)
           for m in ("gmr+", "cb+r", "cb")}
    u = red["gmr+"].T @ np.linalg.solve(red["gmr+"].K, red["gmr+"].T.T @ f)
    # measured 7.3e-3 of max |u| (this truss, 4 modes; cb+r and cb 2e-13): far above round-off
    assert np.max(np.abs(u - u_ref)) > 1e-4 * np.max(np.abs(u_ref))
    # Rayleigh-Ritz on a span holding both: no eigenvalue worse than either's (eq. 31
    # errors, up to round-off 1e-9 of each), and n = Nm + Nd + Nm here
    e = {m: np.abs(r.report.eig_error) for m, r in red.items()}
    assert np.all(e["cb+r"] <= e["gmr+"] * (1 + 1e-9) + 1e-9)
    assert np.all(e["cb+r"] <= e["cb"] * (1 + 1e-9) + 1e-9)
    assert red["cb+r"].n == 2 * masters.size + 4
    assert red["cb+r"].report.diagnostics["asym_M"] < 1e-12


def test_rigid_count():
    # round-off zeros below a gap of > 1e6 count as rigid; negatives always
    assert rigid_count(np.array([1e-9, -3e-10, 2e-9, 4.0e4, 1e5])) == 3
    assert rigid_count(np.array([0.0, 0.0, 1.0])) == 2
    assert rigid_count(np.array([1.0, 40.0, 300.0])) == 0
    assert rigid_count(np.array([-1e-12, 5.0])) == 1
    assert rigid_count(np.array([1e-20, 1e-9, 1e-9, 1e4])) == 3


# ------------------------------------------------------------------------------ report
def test_eigenvalue_error_eq31():
    # hand: (4 - 4.4)/4 * 100 = -10 %, (9 - 9)/9 = 0
    assert eigenvalue_error([4.0, 9.0], [4.4, 9.0]) == pytest.approx([-10.0, 0.0], abs=1e-12)
    # rigid mode: relative to the first elastic eigenvalue, (0 - 0.5)/5 * 100 = -10 %
    assert eigenvalue_error([0.0, 5.0], [0.5, 5.5], n_rigid=1) == pytest.approx(
        [-10.0, -10.0], abs=1e-12)
    with pytest.raises(ValueError, match="lam_full"):
        eigenvalue_error([1.0, 2.0], [1.0])


def test_report_format_and_plots(tmp_path):
    model = cantilever(60)
    masters = np.array([119, 118, 59])
    reports = [reduce(model, masters, 4, m, n_report=6, progress=False).report
               for m in ("gmr+", "cb", "guyan")]
    txt = reports[0].format()
    assert "gmr+" in txt and "error [%]" in txt and "timings" in txt
    assert "largest |eigenvalue error|: " in txt and "eps" not in txt
    banded = reports[0].format(f_band=reports[0].freqs_full[2] + 1e-9)
    assert "for the 3 modes within the band" in banded and "for the 3 modes above the band" in banded
    assert len([ln for ln in txt.splitlines() if ln.strip()[:1].isdigit()]) == 6
    assert set(reports[0].timings) >= {"partition", "slave_factorise", "slave_eigen",
                                       "constraint_modes", "projection",
                                       "residual_flexibility", "reduced_eigen", "full_eigen"}
    arrays = reports[2].as_arrays()
    assert arrays["freqs_full"].shape == arrays["eig_error"].shape == (3,)   # Guyan: n = 3
    for p in (reports[0].plot(tmp_path / "one.png"),
              plot_reports(reports, tmp_path / "all.png")):
        data = p.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    with pytest.raises(ValueError, match="no reports"):
        plot_reports([], tmp_path / "none.png")


def test_report_dataclass_fields():
    r = ReductionReport("cb", 10, 3, np.array([1.0]), np.array([1.1]), np.array([-21.0]))
    assert r.timings == {} and r.diagnostics == {} and "cb" in r.format()


# ------------------------------------------------------------------------- helpers, input
def test_recover_rows():
    model = cantilever(30)
    red = reduce(model, [59, 30], 3, "gmr+", n_report=0, progress=False)
    rows = recover(red.T, [59, 10, 30])
    u = np.random.default_rng(5).standard_normal(red.n)
    # physical DOF i is T[i] @ u_hat; masters come back exactly
    assert np.array_equal(rows @ u, red.T[[59, 10, 30]] @ u)
    assert rows[0] @ u == u[0] and rows[2] @ u == u[1]
    with pytest.raises(ValueError, match="rows"):
        recover(red.T, [60])
    with pytest.raises(ValueError, match="rows"):
        recover(red.T, [1.5])


@pytest.mark.parametrize("kwargs,match", [
    (dict(method="svd"), "method"),
    (dict(masters=[0, 0]), "masters: repeated"),
    (dict(masters=[-1]), "masters: indices"),
    (dict(masters=[100]), "masters: indices"),
    (dict(masters=[[1, 2]]), "masters: expected"),
    (dict(masters=[1.5]), "masters: expected integer"),
    (dict(masters=[]), "masters: expected"),
    (dict(n_modes=-1), "n_modes"),
    (dict(n_modes=0), "n_modes"),
    (dict(n_modes=1000), "n_modes"),
    (dict(n_report=-2), "n_report"),
    (dict(n_modes=2.5), "n_modes"),
])
def test_bad_input_names_the_field(kwargs, match):
    model = cantilever(20)                     # 40 DOFs
    args = dict(masters=[39, 20], n_modes=3, method="gmr+", n_report=3, progress=False)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        reduce(model, **args)


def test_model_without_matrices_rejected():
    with pytest.raises(ValueError, match="model"):
        reduce(object(), [0], 1, progress=False)


@pytest.mark.parametrize("bad,which,match", [
    (np.nan, "K", "model.K: contains NaN"), (np.inf, "M", "model.M: contains NaN or inf"),
    ("asym", "K", "model.K: not symmetric"), ("zero", "M", "model.M: is all zero"),
])
def test_bad_matrices_named(bad, which, match):
    model = cantilever(10)
    A = getattr(model, which).tolil()
    if bad == "asym":
        A[0, 1] = A[0, 1] * 1.01 + 1.0
    elif bad == "zero":
        A = sp.lil_matrix(A.shape)
    else:
        A[3, 3] = bad
    setattr(model, which, A.tocsr())
    with pytest.raises(ValueError, match=match):
        reduce(model, [19], 2, "cb", progress=False)


def test_float_integer_masters_accepted_and_order_kept():
    model = cantilever(20)
    red = reduce(model, np.array([39.0, 5.0]), 2, "cb", n_report=2, progress=False)
    assert red.masters.tolist() == [39, 5] and red.T[39, 0] == 1.0 and red.T[5, 1] == 1.0


# ---------------------------------------------------------------------- paper cantilever
def _paper_model():
    mf = pytest.importorskip("offline.model")
    if not all(hasattr(mf, f) for f in ("load_model_file", "build_fe_model", "resolve_dofs")):
        pytest.skip("model-file loader not available yet")
    path = REPO / "examples" / "paper_cantilever.toml"
    if not path.exists():
        pytest.skip("examples/paper_cantilever.toml not available yet")
    spec = mf.load_model_file(path)
    model = mf.build_fe_model(spec, progress=False)
    masters = []
    for ms in spec.reduction.masters:
        masters += mf.resolve_dofs(model, ms.select, ms.dofs, ms.where)
    return model, np.asarray(masters)


def test_paper_cantilever_gmr_first_20_within_1e5():
    model, masters = _paper_model()
    assert masters.size == 21                  # paper eq. 34: 7 nodes x (uz, rx, ry)
    red = reduce(model, masters, 50, "gmr+", n_report=30, progress=False)
    assert red.n == 71                         # paper Sect. 5: 21 masters + 50 modes
    rep = red.report
    # paper Fig. 11 / brief: first 20 eigenvalues within 1e-5 relative error
    assert np.max(np.abs(rep.eig_error[:20])) / 100.0 < 1e-5
    # first bending frequency of a 170 mm x 1.2 mm aluminium strip, Euler-Bernoulli:
    # f1 = 1.8751^2 / (2 pi L^2) sqrt(E h^2 / (12 rho)) = 34.0 Hz; plate within 2 %
    f1 = 1.875104068711961**2 / (2 * np.pi * 0.170**2) * np.sqrt(69e9 * 1.2e-3**2 / (12 * 2700))
    assert rep.freqs_full[0] == pytest.approx(f1, rel=0.02)


# ------------------------------------------------------------ sparse solver backends
def _pardiso_or_skip():
    from offline.reduction.eigen import pardiso_available
    if not pardiso_available():
        pytest.skip("MKL PARDISO (pypardiso, pip extra 'fast') is not importable here")


def _shifts(model):
    """sigma = 0, below the spectrum, and between eigenvalues 3 and 4 (indefinite)."""
    lam = dense_eigenvalues(model, 4)   # reference: LAPACK eigh of the full model
    return [0.0, -0.5 * lam[0], 0.5 * (lam[2] + lam[3])], lam


@pytest.mark.parametrize("which", ["truss", "beam"])
def test_pardiso_solves_match_superlu(which):
    _pardiso_or_skip()
    from offline.reduction.eigen import factorize
    model = truss(30, 10, clamp_left=True) if which == "truss" else cantilever(120)
    K, M = model.K, model.M
    rng = np.random.default_rng(7)
    B = rng.standard_normal((K.shape[0], 7))
    for sigma in _shifts(model)[0]:
        fs = factorize(K, M, sigma, solver="superlu")
        fp = factorize(K, M, sigma, solver="pardiso")
        assert (fs.solver, fp.solver) == ("superlu", "pardiso")
        Xs, Xp = fs.solve(B), fp.solve(B)
        # reference: SuperLU (independent code). Both are backward stable, so they differ by
        # at most ~cond(A) eps: the truss (cond ~ 1e4) within 1e-10 relative; the beam with its
        # mixed units (cond ~ 1e9) within 100 eps cond (measured 5.6e-10 relative)
        cond = np.linalg.cond((K - sigma * M).toarray())
        tol = 1e-10 if which == "truss" else 100 * np.finfo(float).eps * cond
        assert which == "beam" or cond < 1e6
        assert Xp.shape == B.shape
        assert np.max(np.abs(Xp - Xs)) <= tol * np.max(np.abs(Xs))
        # one right-hand side keeps its 1-D shape and equals the first column
        xp = fp.solve(B[:, 0])
        assert xp.shape == (K.shape[0],)
        assert np.max(np.abs(xp - Xs[:, 0])) <= tol * np.max(np.abs(Xs[:, 0]))
        # normwise backward error of A x = b, A = K - sigma M (definition; eps-level for a
        # backward-stable solver, measured ~1e-16)
        A = K - sigma * M
        nA = sla.norm(A.toarray(), 2)
        assert (np.linalg.norm(A @ Xp - B, 2)
                <= 1e-13 * (nA * np.linalg.norm(Xp, 2) + np.linalg.norm(B, 2)))


def test_inertia_counts_eigenvalues_below_shift():
    _pardiso_or_skip()
    from offline.reduction.eigen import factorize
    model = truss(30, 10, clamp_left=True)
    shifts, lam = _shifts(model)
    # Sylvester: negative pivots of L D L^T of K - sigma M = eigenvalues below sigma;
    # reference: LAPACK eigh (3 below the middle shift, none below 0 or -lam_1/2)
    for sigma, n_below in zip(shifts, (0, 0, 3)):
        for solver in ("superlu", "pardiso"):
            f = factorize(model.K, model.M, sigma, solver=solver)
            assert f.inertia == (model.K.shape[0] - n_below, n_below), (solver, sigma)
    f = factorize(model.K, model.M, 0.0, solver="pardiso")
    assert f.info["nnz_factor"] > 0 and f.info["memory_mib"] > 0


def test_pardiso_singular_and_bad_input():
    _pardiso_or_skip()
    from offline.reduction.eigen import SingularFactor, factorize
    # exactly singular (integer Laplacian of a free chain), as in test_shift_selection_paths
    for n in (10, 600, 2000):
        with pytest.raises(SingularFactor, match="singular"):
            factorize(chain(n, 1000.0, 2.0, grounded=False).K, solver="pardiso")
    # a DOF without stiffness: an empty row/column (zero pivot)
    K = chain(50).K.tolil()
    K[10, :] = 0.0
    K[:, 10] = 0.0
    with pytest.raises(SingularFactor):
        factorize(K.tocsr(), solver="pardiso")
    # NaN / inf entries are refused before factorising, by both backends
    K = chain(50).K.copy()
    K.data[3] = np.nan
    for solver in ("superlu", "pardiso"):
        with pytest.raises(SingularFactor, match="NaN or inf"):
            factorize(K, solver=solver)
    f = factorize(chain(50).K, solver="pardiso")
    with pytest.raises(ValueError, match="B: expected shape"):
        f.solve(np.ones(49))
    # no right-hand side at all is an empty result, not a crash
    assert f.solve(np.ones((50, 0))).shape == (50, 0)
    # a shift between eigenvalues is fine (indefinite L D L^T), exact solve residual
    model = chain(50)
    lam = chain_eigenvalues(50, 1000.0, 2.0, True)          # closed form
    sigma = 0.5 * (lam[4] + lam[5])
    f = factorize(model.K, model.M, sigma, solver="pardiso")
    assert f.inertia == (45, 5)
    b = np.random.default_rng(3).standard_normal(50)
    assert np.linalg.norm((model.K - sigma * model.M) @ f.solve(b) - b) < 1e-10 * np.linalg.norm(b)


def test_solver_selection(monkeypatch):
    import offline.reduction.eigen as eigen
    from offline._deps import MissingDependency
    monkeypatch.delenv(eigen.SOLVER_ENV, raising=False)
    assert eigen.sparse_solver("superlu") == "superlu"
    assert eigen.sparse_solver(" SuperLU ") == "superlu"
    auto = "pardiso" if eigen.pardiso_available() else "superlu"
    assert eigen.sparse_solver() == auto and eigen.sparse_solver("auto") == auto
    with pytest.raises(ValueError, match="^solver: expected one of"):
        eigen.sparse_solver("cholmod")
    monkeypatch.setenv(eigen.SOLVER_ENV, "umfpack")
    with pytest.raises(ValueError, match=f"^{eigen.SOLVER_ENV}: expected one of"):
        eigen.sparse_solver()
    with pytest.raises(ValueError, match=eigen.SOLVER_ENV):
        modes(chain(10).K, chain(10).M, 2)
    monkeypatch.setenv(eigen.SOLVER_ENV, "superlu")
    assert eigen.factorize(chain(10).K).solver == "superlu"
    # the argument wins over the environment
    assert eigen.factorize(chain(10).K, solver="auto").solver == auto
    # PARDISO requested but not loadable: names the pip extra; auto falls back to SuperLU
    import offline.reduction.pardiso as pardiso
    monkeypatch.setattr(pardiso, "_MKL", False)
    monkeypatch.setattr(pardiso, "_MKL_ERROR", "ImportError: test")
    with pytest.raises(MissingDependency, match=r"vsense\[fast\]"):
        eigen.factorize(chain(10).K, solver="pardiso")
    assert eigen.factorize(chain(10).K, solver="auto").solver == "superlu"


def _align_modal_signs(red, ref):
    """Flip modal coordinates of ``red`` to the signs of ``ref`` (eigenvector sign is free)."""
    nm = ref.masters.size
    s = np.ones(ref.n)
    s[nm:] = np.sign(np.einsum("ij,ij->j", red.T[:, nm:], ref.T[:, nm:]))
    return red.T * s, red.M * np.outer(s, s), red.K * np.outer(s, s)


# Guyan refuses a free-free slave set (tested elsewhere), so it runs on the clamped truss only
@pytest.mark.parametrize("method,which", [("gmr+", "truss"), ("cb", "truss"), ("guyan", "truss"),
                                          ("gmr+", "free truss"), ("cb", "free truss")])
def test_reduction_same_with_either_solver(method, which, monkeypatch):
    _pardiso_or_skip()
    import offline.reduction.eigen as eigen
    if which == "truss":    # 580 DOFs: the sparse (shift-invert) path, sigma = 0
        model = truss(30, 10, clamp_left=True)
        masters = np.array([2 * (j * 29 + i) + c for j in (0, 9) for i in (9, 19, 28)
                            for c in (0, 1)])
    else:                   # free-free 640 DOFs, masters at one end: full model shifted
        model = truss(32, 10)
        masters = np.array([2 * (j * 32 + 31) + c for j in range(10) for c in (0, 1)])
    reds = {}
    for solver in ("superlu", "pardiso"):
        monkeypatch.setenv(eigen.SOLVER_ENV, solver)
        reds[solver] = reduce(model, masters, 12, method, n_report=10, progress=False)
        assert reds[solver].report.diagnostics["solver"] == solver
    ref, red = reds["superlu"], reds["pardiso"]
    T, Mh, Kh = _align_modal_signs(red, ref)
    # reference: the SuperLU reduction (independent factorisation code). Measured agreement:
    # 1e-14 relative to the largest entry on the clamped truss, 3.2e-12 for T on the free one
    # (shifted full model, iterated flexibility); 1e-10 leaves room for other MKL/BLAS builds
    for A, B in ((T, ref.T), (Mh, ref.M), (Kh, ref.K)):
        assert np.max(np.abs(A - B)) <= 1e-10 * np.max(np.abs(B))
    # eigenvalues: 1e-13 relative measured; rigid ones (free truss) are round-off zeros, ~1e-6
    assert np.allclose(red.report.lam_full, ref.report.lam_full, rtol=1e-10, atol=1e-6)
    assert np.allclose(red.report.lam_reduced, ref.report.lam_reduced, rtol=1e-10, atol=1e-6)
    assert red.report.n_rigid == ref.report.n_rigid


def test_pardiso_orderings_and_release(monkeypatch):
    _pardiso_or_skip()
    import offline.reduction.eigen as eigen
    model = truss(30, 10, clamp_left=True)
    B = np.random.default_rng(11).standard_normal((model.K.shape[0], 3))
    Xs = eigen.factorize(model.K, solver="superlu").solve(B)
    import offline.reduction.pardiso as pardiso
    monkeypatch.setattr(pardiso, "PARDISO_ORDERING", "metis")
    f = eigen.factorize(model.K, solver="pardiso")
    # reference: SuperLU; cond(K) ~ 1e4 here, so 1e-10 relative (as above)
    assert np.max(np.abs(f.solve(B) - Xs)) <= 1e-10 * np.max(np.abs(Xs))
    f._lu.free()                       # releases MKL's memory; the factor is then unusable
    with pytest.raises(RuntimeError, match="released"):
        f.solve(B)
    monkeypatch.setattr(pardiso, "PARDISO_ORDERING", "nd")
    with pytest.raises(ValueError, match="PARDISO_ORDERING"):
        eigen.factorize(model.K, solver="pardiso")
