"""Tests of the MITC3 Mindlin plate (offline/fem/plate.py)."""

import numpy as np
import pytest
import scipy.sparse.linalg as sla

from offline.fem.plate import mitc3_matrices, plate_model, rectangle_mesh

E, NU, RHO = 69e9, 0.3, 2700.0
# Roots of cos(bL) cosh(bL) = -1 (clamped-free beam), Blevins Table 8-1.
CF_ROOTS = np.array([1.875104068711961, 4.694091132974175, 7.854757438237613, 10.995540734875467])


def ss_square(n, t, a=1.0, pattern="alternate"):
    """Hard simply supported square plate: uz = 0 and the tangential rotation = 0 on edges."""
    c, ids, tr, g = rectangle_mesh(a, a, n, n, pattern=pattern)
    m = plate_model(c, ids, tr, E, NU, RHO, t, groups=g)
    fixed = np.zeros(m.n_dofs, bool)
    for grp, kinds in (("x0", (2, 3)), ("x1", (2, 3)), ("y0", (2, 4)), ("y1", (2, 4))):
        fixed |= np.isin(m.dof_node, g[grp]) & np.isin(m.dof_kind, kinds)
    mc = m.constrain(fixed)
    w2 = sla.eigsh(mc.K, k=4, M=mc.M, sigma=-1.0, which="LM")[0]
    return np.sqrt(np.sort(w2))


def kirchhoff_ss(a, t, modes):
    # omega = pi^2 (m^2/a^2 + n^2/b^2) sqrt(D / (rho t)), D = E t^3 / (12 (1 - nu^2))
    # (Leissa, "Vibration of plates", NASA SP-160, eq. 4.20)
    D = E * t**3 / (12 * (1 - NU**2))
    return np.array([np.pi**2 * (m * m + n * n) / a**2 * np.sqrt(D / (RHO * t)) for m, n in modes])


def test_thin_simply_supported_plate_no_locking():
    a, t = 1.0, 1e-3  # span / thickness = 1000
    w = ss_square(48, t, a)
    ref = kirchhoff_ss(a, t, [(1, 1), (1, 2), (2, 1), (2, 2)])
    # measured errors 0.14 %, 0.32 %, 0.32 %, 0.57 % on the 48 x 48 chessboard mesh
    np.testing.assert_allclose(w, ref, rtol=1e-2)
    assert np.all(w > ref)  # MITC3 is stiffer than the exact solution here


def test_error_independent_of_thickness():
    # locking would make the error grow as t -> 0; a locking-free element gives the same
    # relative error for t/a = 1e-2 ... 1e-4 (up to the Mindlin shear effect ~ (t/a)^2).
    errs = [ss_square(16, t)[0] / kirchhoff_ss(1.0, t, [(1, 1)])[0] - 1 for t in (1e-2, 1e-3, 1e-4)]
    assert abs(errs[1] - errs[2]) < 1e-4, errs
    assert abs(errs[0] - errs[2]) < 5e-3, errs


def bending_modes_of_strip(nx, ny, n_modes=4):
    L, b, t = 0.170, 0.013, 1.2e-3
    c, ids, tr, g = rectangle_mesh(L, b, nx, ny)
    m = plate_model(c, ids, tr, E, NU, RHO, t, groups=g)
    mc = m.constrain(np.isin(m.dof_node, g["x0"]))
    w2, V = sla.eigsh(mc.K, k=10, M=mc.M, sigma=-1.0, which="LM")
    order = np.argsort(w2)
    tip0 = mc.dof_index(int(g["x1"][0]), "uz")   # (L, 0)
    tip1 = mc.dof_index(int(g["x1"][-1]), "uz")  # (L, b)
    out = []
    for i in order:
        a0, a1 = V[tip0, i], V[tip1, i]
        if abs(a0 - a1) < 0.05 * abs(a0 + a1):  # symmetric across the width: bending
            out.append(np.sqrt(w2[i]))
    return np.array(out[:n_modes]), mc


def test_paper_cantilever_strip_matches_beam_theory():
    w, mc = bending_modes_of_strip(170, 10)
    assert mc.n_dofs == 5610  # 170 x 11 free nodes x 3
    L, b, t = 0.170, 0.013, 1.2e-3
    # Euler-Bernoulli: omega = (b_i L)^2 sqrt(E I / (rho A L^4)), I = b t^3 / 12 (analytic)
    ref = CF_ROOTS**2 * np.sqrt(E * (b * t**3 / 12) / (RHO * b * t * L**4))
    # measured +0.46 ... +0.53 % (finite width: partly restrained anticlastic bending)
    np.testing.assert_allclose(w, ref, rtol=2e-2)


def test_rigid_modes_mass_and_rotation_convention():
    c, ids, tr, g = rectangle_mesh(0.3, 0.2, 5, 4)
    t = 0.01
    m = plate_model(c, ids, tr, E, NU, RHO, t, groups=g)
    K, M = m.K.toarray(), m.M.toarray()
    x, y = c[:, 0], c[:, 1]
    # w = a + b x + c y with rx = dw/dy, ry = -dw/dx (right-hand rotations) is stress free
    for aa, bb, cc in ((1.0, 0, 0), (0, 1.0, 0), (0, 0, 1.0)):
        r = np.zeros(m.n_dofs)
        r[0::3], r[1::3], r[2::3] = aa + bb * x + cc * y, cc, -bb
        assert np.abs(K @ r).max() < 1e-9 * np.abs(K).max()
    # the opposite sign of ry is not: it strains the plate in shear
    r = np.zeros(m.n_dofs)
    r[0::3], r[2::3] = x, 1.0
    assert r @ K @ r > 1e-3 * np.abs(K).max()
    # translational mass rho t A (analytic) and rotary inertia rho t^3/12 A
    one = np.zeros(m.n_dofs)
    one[0::3] = 1.0
    np.testing.assert_allclose(one @ M @ one, RHO * t * 0.06, rtol=1e-12)
    rot = np.zeros(m.n_dofs)
    rot[1::3] = 1.0
    np.testing.assert_allclose(rot @ M @ rot, RHO * t**3 / 12 * 0.06, rtol=1e-12)


def test_element_isotropy_and_symmetry():
    rng = np.random.default_rng(7)
    xy = np.array([[[0.0, 0.0], [0.3, 0.05], [0.1, 0.2]]])
    K, M = mitc3_matrices(xy, E, NU, RHO, 0.01)
    assert np.allclose(K, K.transpose(0, 2, 1), atol=1e-9 * np.abs(K).max())
    # rotating the triangle in its plane rotates (rx, ry) like a vector: same eigenvalues
    th = rng.uniform(0, 2 * np.pi)
    Rm = np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])
    K2, M2 = mitc3_matrices(xy @ Rm.T, E, NU, RHO, 0.01)
    np.testing.assert_allclose(np.linalg.eigvalsh(K2[0]), np.linalg.eigvalsh(K[0]),
                               rtol=1e-9, atol=1e-9 * np.abs(K).max())
    # node relabelling (cyclic) gives the permuted matrix
    K3, _ = mitc3_matrices(xy[:, [1, 2, 0]], E, NU, RHO, 0.01)
    p = np.r_[3:9, 0:3]
    np.testing.assert_allclose(K3[0], K[0][np.ix_(p, p)], rtol=1e-9, atol=1e-9 * np.abs(K).max())


def test_mesh_groups_and_bad_input():
    c, ids, tr, g = rectangle_mesh(0.17, 0.013, 17, 2)
    assert c.shape == (54, 3) and tr.shape == (68, 3)
    np.testing.assert_allclose(c[g["x1"] - 1, 0], 0.17)
    np.testing.assert_allclose(c[g["y1"] - 1, 1], 0.013)
    assert len(g["x0"]) == 3 and len(g["y0"]) == 18
    with pytest.raises(ValueError, match="pattern"):
        rectangle_mesh(1, 1, 2, 2, pattern="diag")
    with pytest.raises(ValueError, match="triangle 0"):
        mitc3_matrices(np.array([[[0, 0], [1, 0], [2, 0]]], float), E, NU, RHO, 0.01)
