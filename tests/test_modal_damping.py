"""Damping that couples the modes (offline/limit/modal_damping.py) in the truth engines and the
accuracy limit's transfer functions: the 10-DOF chain with a dashpot to ground of
tests/test_nonproportional.py, every mode kept (no residual flexibility)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("scipy.sparse")

from offline.calibration_runs import run_modal  # noqa: E402
from offline.integrators import simulate_modal  # noqa: E402
from offline.limit.modal_damping import modal_damping  # noqa: E402
from offline.limit.transfer import modal_model  # noqa: E402
from offline.model import build_fe_model, load_model_file  # noqa: E402
from offline.simulate import simulate_model  # noqa: E402
from tests.test_nonproportional import _dashpot_chain  # noqa: E402
from tests.test_small_model_modes import _chain_file  # noqa: E402


def test_rayleigh_damping_is_diagonal_a_dashpot_couples(tmp_path):
    for sub, make, coupled in (("r", _chain_file, False), ("d", _dashpot_chain, True)):
        (tmp_path / sub).mkdir()
        model = build_fe_model(load_model_file(make(tmp_path / sub)))
        mm = modal_model(model, [2], [8], n_modes=80)
        assert (mm.Ct is not None) == coupled
        # the diagonal is c either way (modal_damping's c and Ct agree)
        c, Ct = modal_damping(np.eye(10), model.damping_matrix())
        np.testing.assert_allclose(c, model.damping_matrix().diagonal(), rtol=1e-15)


def test_transfer_equals_the_full_models_receptance(tmp_path):
    # reference: S (K - w^2 M + i w C)^-1 B solved on the dense full matrices; all 10 modes
    # are kept, so the modal sum is exact up to round-off (1e-9 of the largest value)
    model = build_fe_model(load_model_file(_dashpot_chain(tmp_path)))
    mm = modal_model(model, [2], [8, 5], n_modes=80)
    f = np.array([0.0, 3.0, 15.9, 44.4, 120.0, 400.0])
    H = mm.transfer(f, [0, 0])
    M, K, C = (x.toarray() for x in (model.M, model.K, model.damping_matrix()))
    for k, fk in enumerate(f):
        w = 2 * np.pi * fk
        X = np.linalg.solve(K - w ** 2 * M + 1j * w * C, np.eye(10)[:, [2]])
        ref = X[[8, 5]]
        assert np.max(np.abs(H[k] - ref)) <= 1e-9 * np.max(np.abs(ref)), fk


def test_modal_truth_of_a_dashpot_chain_matches_newmark(tmp_path):
    # reference: sparse Newmark on every DOF at dt/40 (period error at the top mode 1.1e-4,
    # tests/test_small_model_modes.py); measured 0.11 % / 0.06 %; keeping diag(Ct) only read
    # 6.6 % / 5.1 % (before offline/limit/modal_damping.py). Tolerance 0.5 %.
    path = _dashpot_chain(tmp_path)
    load = {"type": "random", "band": (5.0, 150.0), "rms": 1.0}
    kw = dict(duration=1.0, noise=0.0, oversample=40, seed=3, progress=False, chain="ideal")
    modal = simulate_model(path, load, engine="modal", **kw)
    newmark = simulate_model(path, load, engine="newmark", **kw)
    for a, b in ((modal.Y_clean, newmark.Y_clean), (modal.Z, newmark.Z)):
        rel = np.sqrt(np.mean((a - b) ** 2)) / np.std(b)
        assert rel < 5e-3, rel


def test_calibration_runs_engine_equals_simulate_modal(tmp_path):
    # the same exact discretisation of the same coupled modes: equal to 1e-9 of the signal
    model = build_fe_model(load_model_file(_dashpot_chain(tmp_path)))
    rng = np.random.default_rng(11)
    F = rng.standard_normal((4001, 1))
    dt = 2.5e-5
    ref = simulate_modal(model, [2], F, dt, 40, [(8, 2), (5, 0)], n_modes=80)
    got = run_modal(modal_model(model, [2], [8, 5], n_modes=80), F, dt, 40, [2, 0])
    for j in range(2):
        assert np.max(np.abs(got[:, j] - ref[:, j])) <= 1e-9 * np.max(np.abs(ref[:, j]))


def test_complex_modes_equal_one_solve_per_frequency(tmp_path):
    # the two routes of coupled_receptance: the complex modes' sum (used when every mode is
    # elastic) and one linear solve per frequency (the fallback); same receptance to 1e-9
    from offline.limit.modal_damping import _solved_receptance, coupled_receptance

    model = build_fe_model(load_model_file(_dashpot_chain(tmp_path)))
    mm = modal_model(model, [2], [8, 5], n_modes=80)
    w = 2 * np.pi * np.linspace(0.0, 500.0, 257)
    a = coupled_receptance(mm.lam, mm.Ct, w, mm.Phi_out, mm.Phi_in)
    b = _solved_receptance(mm.lam, mm.Ct, w, mm.Phi_out, mm.Phi_in)
    assert np.max(np.abs(a - b)) <= 1e-9 * np.max(np.abs(b))
