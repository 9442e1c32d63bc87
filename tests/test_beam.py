"""Tests of the 3-D frame element (offline/fem/beam.py)."""

import numpy as np
import pytest
import scipy.linalg as sl

from offline.fem.beam import Section, beam_model, element_matrices, rectangle, tube

E, NU, RHO = 210e9, 0.3, 7850.0
G = E / (2 * (1 + NU))
# Roots of cos(bL) cosh(bL) = -1 (clamped-free Euler-Bernoulli beam), e.g. Blevins,
# "Formulas for natural frequency and mode shape", Table 8-1.
CF_ROOTS = np.array([1.875104068711961, 4.694091132974175, 7.854757438237613, 10.995540734875467])


def line_model(n, L=1.0, sec=None, theory="euler-bernoulli", direction=(1.0, 0, 0),
               orientation=None):
    d = np.asarray(direction, float)
    d /= np.linalg.norm(d)
    s = np.linspace(0.0, L, n + 1)
    coords = s[:, None] * d
    conn = np.column_stack([np.arange(n), np.arange(1, n + 1)])
    return beam_model(coords, np.arange(1, n + 2), conn, E, G, RHO,
                      sec or rectangle(0.02, 0.01, NU), theory, orientation)


def eig_dense(model, keep):
    K = model.K.toarray()[np.ix_(keep, keep)]
    M = model.M.toarray()[np.ix_(keep, keep)]
    return np.sqrt(np.abs(sl.eigh(K, M, eigvals_only=True)))


def xz_cantilever(n, L=1.0, sec=None, theory="euler-bernoulli"):
    """Circular frequencies of bending in x-z (uz, ry), clamped at node 1."""
    m = line_model(n, L, sec, theory)
    keep = np.isin(m.dof_kind, [2, 4]) & (m.dof_node != 1)
    return eig_dense(m, keep)


def test_euler_bernoulli_cantilever_first_four_within_0p1_percent():
    sec = rectangle(0.02, 0.01, NU)
    w = xz_cantilever(40, sec=sec)[:4]
    # omega_i = (b_i L)^2 sqrt(E Iy / (rho A L^4)), b_i L from CF_ROOTS (analytic)
    ref = CF_ROOTS**2 * np.sqrt(E * sec.Iy / (RHO * sec.A))
    np.testing.assert_allclose(w, ref, rtol=1e-3)


def test_euler_bernoulli_convergence_rate_is_h4():
    # cubic Hermite + consistent mass: frequency error ~ h^4 (Strang & Fix, ch. 6)
    sec = rectangle(0.02, 0.01, NU)
    ref = CF_ROOTS**2 * np.sqrt(E * sec.Iy / (RHO * sec.A))
    ns = np.array([8, 16, 32])
    err = np.array([np.abs(xz_cantilever(n, sec=sec)[:4] / ref - 1) for n in ns])
    for mode in (1, 2, 3):  # modes 2-4; mode 1 reaches round-off at n = 32
        slope = -np.polyfit(np.log(ns), np.log(err[:, mode]), 1)[0]
        assert 3.8 < slope < 4.2, (mode, slope, err[:, mode])
    assert np.all(err > 0)  # consistent mass bounds frequencies from above (Rayleigh-Ritz)


def test_both_bending_planes_and_orientation():
    # b != h: x-y bending uses Iz, x-z bending uses Iy; turning the orientation vector by 90
    # degrees about the axis swaps them.
    sec = rectangle(0.03, 0.01, NU)
    ref_z = CF_ROOTS[0] ** 2 * np.sqrt(E * sec.Iy / (RHO * sec.A))  # analytic, Iy
    ref_y = CF_ROOTS[0] ** 2 * np.sqrt(E * sec.Iz / (RHO * sec.A))  # analytic, Iz
    for ori, (r_xz, r_xy) in (((0, 0, 1), (ref_z, ref_y)), ((0, 1, 0), (ref_y, ref_z))):
        m = line_model(30, sec=sec, orientation=ori)
        free = m.dof_node != 1
        w_xz = eig_dense(m, free & np.isin(m.dof_kind, [2, 4]))[0]
        w_xy = eig_dense(m, free & np.isin(m.dof_kind, [1, 5]))[0]
        np.testing.assert_allclose([w_xz, w_xy], [r_xz, r_xy], rtol=1e-4)  # EB, 30 elements


def test_rotated_member_has_same_spectrum():
    # invariance under rigid rotation: the same cantilever along (1, 2, 2)/3 (independent of
    # the global frame) must give the same 12 lowest frequencies as along x.
    sec = rectangle(0.03, 0.01, NU)
    a = line_model(10, sec=sec, theory="timoshenko")
    d = np.array([1.0, 2.0, 2.0]) / 3.0
    ori = np.cross(d, [0.0, 1.0, 0.0])
    b = line_model(10, sec=sec, theory="timoshenko", direction=d, orientation=ori)
    wa = eig_dense(a, a.dof_node != 1)[:12]
    wb = eig_dense(b, b.dof_node != 1)[:12]
    np.testing.assert_allclose(wb, wa, rtol=1e-9)


def test_rigid_body_modes_and_mass():
    m = line_model(7, L=2.0, sec=tube(0.05, 0.004, NU), theory="timoshenko",
                   direction=(1, 1, 0.3))
    K, M = m.K.toarray(), m.M.toarray()
    X = m.coords[m.node_ids.argsort()]
    rigid = []
    for k in range(3):  # translations
        r = np.zeros(m.n_dofs)
        r[k::6] = 1.0
        rigid.append(r)
    for k in range(3):  # small rotations about global axes through the origin
        om = np.eye(3)[k]
        r = np.zeros(m.n_dofs)
        u = np.cross(om, X)
        for j in range(3):
            r[j::6] = u[:, j]
        r[3 + k::6] = 1.0
        rigid.append(r)
    R = np.array(rigid).T
    # K r = 0 for rigid motions (round-off relative to |K|)
    assert np.abs(K @ R).max() < 1e-9 * np.abs(K).max()
    # translational mass = rho A L_total (analytic)
    sec = tube(0.05, 0.004, NU)
    for k in range(3):
        np.testing.assert_allclose(R[:, k] @ M @ R[:, k], RHO * sec.A * 2.0, rtol=1e-12)


def test_timoshenko_tip_deflection_exact():
    # static cantilever tip load P: delta = P L^3 / (3 E I) + P L / (k G A)  (Timoshenko,
    # Strength of Materials); the interdependent-interpolation element is exact for it.
    sec = rectangle(0.05, 0.1, NU)
    L, P = 0.4, 1000.0
    for n in (1, 3):
        m = line_model(n, L=L, sec=sec, theory="timoshenko")
        free = m.dof_node != 1
        K = m.K.toarray()[np.ix_(free, free)]
        f = np.zeros(m.n_dofs)
        f[m.dof_index(n + 1, "uz")] = P
        u = np.zeros(m.n_dofs)
        u[free] = np.linalg.solve(K, f[free])
        ref = P * L**3 / (3 * E * sec.Iy) + P * L / (sec.kz * G * sec.A)
        np.testing.assert_allclose(u[m.dof_index(n + 1, "uz")], ref, rtol=1e-10)


def test_timoshenko_approaches_euler_bernoulli_for_slender_beams():
    sec = rectangle(0.01, 0.002, NU)  # h = 2 mm, L = 1 m: L/h = 500
    w_eb = xz_cantilever(40, sec=sec)[:4]
    w_ti = xz_cantilever(40, sec=sec, theory="timoshenko")[:4]
    # shear + rotary inertia lower the frequency by O((h/L)^2 (b L)^2) ~ 1e-4 at mode 4
    rel = w_ti / w_eb - 1
    assert np.all(rel < 0) and np.all(rel > -5e-4), rel
    # stubbier (L/h = 50): the drop grows roughly as (h/L)^2, i.e. ~100x
    sec2 = rectangle(0.01, 0.02, NU)
    rel2 = xz_cantilever(40, sec=sec2, theory="timoshenko")[:4] / xz_cantilever(40, sec=sec2)[:4] - 1
    assert np.all(rel2 < 30 * rel)


def timoshenko_ss(k_wave, sec):
    """Bending frequency of a simply supported Timoshenko beam (analytic).

    With w = W sin(kx), psi = Psi cos(kx) in rho A w'' = kGA (w'' - psi'),
    rho I psi'' = EI psi'' + kGA (w' - psi) the determinant gives
    rhoA rhoI s^2 - [rhoA (EI k^2 + kGA) + rhoI kGA k^2] s + kGA EI k^4 = 0,  s = omega^2
    (Timoshenko 1921; e.g. Han, Benaroya & Wei, J. Sound Vib. 225 (1999) 935, eq. 50).
    """
    rA, rI, kGA, EI = RHO * sec.A, RHO * sec.Iy, sec.kz * G * sec.A, E * sec.Iy
    a = rA * rI
    b = -(rA * (EI * k_wave**2 + kGA) + rI * kGA * k_wave**2)
    c = kGA * EI * k_wave**4
    return np.sqrt((-b - np.sqrt(b * b - 4 * a * c)) / (2 * a))


def test_timoshenko_stubby_simply_supported_matches_closed_form():
    sec = rectangle(0.05, 0.1, NU)  # L/h = 5
    L = 0.5
    ref = np.array([timoshenko_ss(j * np.pi / L, sec) for j in (1, 2, 3)])
    errs = []
    for n in (32, 64):
        m = line_model(n, L=L, sec=sec, theory="timoshenko")
        ends = np.isin(m.dof_node, [1, n + 1]) & (m.dof_kind == 2)
        keep = np.isin(m.dof_kind, [2, 4]) & ~ends
        w = eig_dense(m, keep)[:3]
        errs.append(w / ref - 1)
    # 64 elements: measured 9e-6, 1.0e-4, 3.7e-4 for modes 1-3
    np.testing.assert_allclose(w, ref, rtol=5e-4)
    # converging to the closed form at O(h^2) (error ratio 4 on halving h; measured 4.0)
    ratio = errs[0] / errs[1]
    assert np.all((ratio > 3.5) & (ratio < 4.5)), ratio
    # and it differs clearly from Euler-Bernoulli (omega = (j pi / L)^2 sqrt(EI/rhoA))
    eb = (np.arange(1, 4) * np.pi / L) ** 2 * np.sqrt(E * sec.Iy / (RHO * sec.A))
    assert np.all(w < 0.97 * eb)


def test_element_matrices_symmetric_finite_and_bad_input():
    X1 = np.zeros((2, 3))
    X2 = np.array([[1.0, 0, 0], [0, 0, 2.0]])
    Ke, Me = element_matrices(X1, X2, E, G, RHO, Section(1e-4, 1e-8, 2e-8, 3e-8), "timoshenko")
    assert np.allclose(Ke, Ke.transpose(0, 2, 1), rtol=0, atol=1e-9 * np.abs(Ke).max())
    assert np.allclose(Me, Me.transpose(0, 2, 1), rtol=0, atol=1e-12 * np.abs(Me).max())
    assert np.all(np.linalg.eigvalsh(Me) > 0)
    with pytest.raises(ValueError, match="zero length"):
        element_matrices(X1, X1, E, G, RHO, rectangle(0.01, 0.01))
    with pytest.raises(ValueError, match="parallel"):
        element_matrices(X1[:1], X2[:1], E, G, RHO, rectangle(0.01, 0.01), orientation=(2, 0, 0))
    with pytest.raises(ValueError, match="theory"):
        element_matrices(X1, X2, E, G, RHO, rectangle(0.01, 0.01), theory="bernoulli")
    with pytest.raises(ValueError, match="rectangle"):
        rectangle(0.0, 0.01)
    with pytest.raises(ValueError, match="tube"):
        tube(0.01, 0.02)


def test_section_properties():
    # square b = h: J = 0.1406 b^4 (Roark Table 10.7: beta = 0.141), I = b^4/12
    s = rectangle(0.01, 0.01, 0.3)
    np.testing.assert_allclose(s.J, 0.1406 * 0.01**4, rtol=2e-3)
    np.testing.assert_allclose(s.Iy, 0.01**4 / 12, rtol=1e-14)
    # solid circle Cowper factor 6(1+nu)/(7+6nu) = 0.8864 for nu = 0.3 (Cowper 1966)
    np.testing.assert_allclose(tube(0.02, None, 0.3).ky, 6 * 1.3 / (7 + 1.8), rtol=1e-14)
    # thin tube: J = 2 I, I ~ pi r^3 t (thin-wall formula, 1 % for t/d = 1/100)
    t = tube(0.1, 0.001, 0.3)
    np.testing.assert_allclose(t.J, 2 * t.Iy, rtol=1e-14)
    np.testing.assert_allclose(t.Iy, np.pi * 0.0495**3 * 0.001, rtol=1e-3)
