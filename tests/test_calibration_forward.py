"""Forward model of the calibration: response and exact sensitivities of the parametric model."""

from __future__ import annotations

import numpy as np
import pytest

from edge import inverse as EI
from offline.calibration.forward import TimeModel, damped_matrices
from offline.calibration.setup import from_model_file
from offline.inverse.parametric import newmark_dense
from test_inverse import BEAM_TOML


@pytest.fixture(scope="module")
def strip(tmp_path_factory):
    path = tmp_path_factory.mktemp("cal") / "strip.toml"
    path.write_text(BEAM_TOML)
    return from_model_file(path)


def test_setup_reads_sensors_forces_parameters(strip):
    assert strip.names == ("E", "zeta", "k_root", "m_tip")
    assert strip.sensors == ["d110"] and strip.forces == ["F160"]
    assert strip.B.shape == (strip.pm.parts.n, 1) and strip.B.sum() == 1.0


def test_response_equals_dense_newmark_twin(strip):
    rng = np.random.default_rng(0)
    sub, dt, nt = 4, 1e-3, 300
    F = rng.normal(size=(nt, 1))
    th = np.array([66e9, 0.02, 8.0, 0.002])
    tm = TimeModel(strip.pm.parts, strip.B, strip.out_rows, strip.out_kind, dt, sub,
                   interpolation="linear")
    Y, _ = tm.run(th, F, jac=False)
    M, C, K = EI.matrices(strip.pm.parts, th)           # edge's own M̂, Ĉ, K̂ (independent code)
    t_fine = np.arange((nt - 1) * sub + 1) * dt / sub
    g = np.interp(t_fine, np.arange(nt) * dt, F[:, 0])  # force linear between samples
    ref = newmark_dense(M, C, K, strip.B[:, 0], g, dt / sub, strip.out_rows)[::sub]
    # trapezoidal rule on [u; v] == average-acceleration Newmark: equal to round-off
    np.testing.assert_allclose(Y, ref, rtol=0, atol=1e-9 * np.abs(ref).max())


@pytest.mark.parametrize("kind", [0, 2])
def test_sensitivities_match_central_differences(strip, kind):
    rng = np.random.default_rng(1)
    nt = 200
    F = rng.normal(size=(nt, 1))
    th = np.array([66e9, 0.02, 8.0, 0.002])
    tm = TimeModel(strip.pm.parts, strip.B, strip.out_rows, np.array([kind], np.int8), 1e-3, 3)
    Y, dY = tm.run(th, F)
    for j in range(th.size):
        h = 1e-4 * th[j]
        tp, tmn = th.copy(), th.copy()
        tp[j] += h
        tmn[j] -= h
        fd = (tm.run(tp, F, jac=False)[0] - tm.run(tmn, F, jac=False)[0]) / (2 * h)
        # central difference: O(h²) truncation ~ 1e-8 relative at h = 1e-4 θ, round-off of the
        # ill-conditioned inverse (M⁻¹, Q⁻¹) ~ 1e-7 (measured: 3e-8 .. 6e-7 over h = 1e-3..1e-6)
        np.testing.assert_allclose(dY[j], fd, rtol=0, atol=5e-6 * np.abs(fd).max())


def test_damping_derivative_fixed_rayleigh(strip):
    import dataclasses
    parts = dataclasses.replace(strip.pm.parts, kinds=("modulus", "mass", "spring", "mass"),
                                rayleigh=(20.0, 1e-5))
    th = np.array([66e9, 0.0, 8.0, 0.002])
    M, C, K, dM, dC, dK = damped_matrices(parts, th)
    # C = a M + b K with fixed (a, b): dC = a dM + b dK exactly
    np.testing.assert_allclose(dC, 20.0 * dM + 1e-5 * dK, rtol=0, atol=1e-12 * np.abs(dC).max())


def test_compiled_propagation_equals_loop(strip):
    from offline.calibration.forward import propagate, propagate_loop
    rng = np.random.default_rng(4)
    tm = TimeModel(strip.pm.parts, strip.B, strip.out_rows, strip.out_kind, 1e-3, 4)
    (Phi, *_), _ = tm.discrete(np.array([66e9, 0.02, 8.0, 0.002]), jac=False)
    U = rng.normal(size=(500, Phi.shape[0], 3))
    ref = propagate_loop(Phi, U)
    # numba kernel vs the NumPy loop: the same recursion, summation order differs (BLAS):
    # round-off accumulated over 500 stable steps, ~1e-13 relative (measured 1e-15)
    np.testing.assert_allclose(propagate(Phi, U), ref, rtol=0, atol=1e-11 * np.abs(ref).max())
    np.testing.assert_allclose(propagate(Phi, U[:, :, 0]), ref[:, :, 0], rtol=0,
                               atol=1e-11 * np.abs(ref).max())
    with pytest.raises(ValueError, match="do not match"):
        propagate(Phi, U[:, :-1])
