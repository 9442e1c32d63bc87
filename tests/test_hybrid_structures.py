"""The hybrid twin on structures we did not build it on: its discrete model is the smoother's
(one continuous model, offline.smoother.gains.modal_dynamics; the smoother's step kf_A), so
`build --hybrid` is not refused on a finely meshed cantilever (beam model or imported
matrices), a plate, or a free-free model.

Before: the smoother's step was Van Loan's 2^m-fold square, which loses the low modes'
rotation when a stiff high mode sets m; the hybrid's own expm differed from it by more than
its 1e-9 tolerance and the build refused (1.1e-8 relative on the cantilever below, 2.1e-7 on
a 340-element strip)."""

import sys
from pathlib import Path

import numpy as np
import pytest

from offline.smoother import ForceModel, attach_smoother, design_smoother, van_loan

ROOT = Path(__file__).resolve().parents[1]


def _closed_form(w, zeta, dt):
    """exp([[0, 1], [-w^2, -2 zeta w]] dt) of an underdamped mode (textbook closed form)."""
    wd = w * np.sqrt(1 - zeta ** 2)
    e, c, s = np.exp(-zeta * w * dt), np.cos(wd * dt), np.sin(wd * dt)
    return e * np.array([[c + zeta * w / wd * s, s / wd],
                         [-w ** 2 / wd * s, c - zeta * w / wd * s]])


def test_van_loan_step_keeps_a_low_mode_next_to_a_stiff_one():
    """A 34 Hz mode (1 %) in one system with an overdamped 250 kHz mode (zeta 4): the stiff
    mode sets 33 halvings of the Van Loan sub-step; the low mode's step must still be its
    exponential. The 33-fold square was 5e-8 off here (2.5e-6 on entries of 45, the previous van_loan);
    expm within 1e-11 of the closed form (round-off of the closed form's cos and sin)."""
    dt = 1e-3
    wl, ws = 2 * np.pi * 34.0, 2 * np.pi * 2.5e5
    Ac = np.zeros((4, 4))
    Ac[0, 1] = Ac[2, 3] = 1.0
    Ac[1, 0], Ac[1, 1] = -wl ** 2, -2 * 0.01 * wl
    Ac[3, 2], Ac[3, 3] = -ws ** 2, -2 * 4.0 * ws
    Ad, Qd = van_loan(Ac, np.diag([0.0, 1.0, 0.0, 1.0]), dt)
    E = _closed_form(wl, 0.01, dt)
    assert np.max(np.abs(Ad[:2, :2] - E)) <= 1e-11 * np.max(np.abs(E))
    # the stiff mode has decayed within the step: exp(-ws^2 / (2 zeta ws) dt) ~ 1e-85
    assert np.max(np.abs(Ad[2:, 2:])) < 1e-80
    # Qd of the low mode: its stationary covariance relation X = Ad X Ad^T + Qd holds for
    # the continuous-Lyapunov X (1 / (4 zeta w^3) on the displacement; 1e-6: doubling)
    X = np.diag([1 / (4 * 0.01 * wl ** 3), 1 / (4 * 0.01 * wl)])
    np.testing.assert_allclose(Ad[:2, :2] @ X @ Ad[:2, :2].T + Qd[:2, :2], X, rtol=1e-6,
                               atol=1e-6 * X[0, 0])


def _structures(tmp_path, edit=None):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import hybrid_structures as hs
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return hs, hs.write_models(tmp_path, edit)


def _smoother_bundle(path):
    """The smoother of a model file without calibration runs: reduced model, declared force
    models (offline.build's own functions)."""
    from offline.build import design_bundle, reduce_model
    from offline.model import build_fe_model, load_model_file

    spec = load_model_file(path)
    model = build_fe_model(spec, progress=False)
    rm = reduce_model(spec, model, progress=False)
    b = design_bundle(rm, spec.estimator, None)
    fm = [ForceModel("bandpass", (5.0, 150.0), 0.6, 8)]
    return attach_smoother(b, design_smoother(b, fm, lag=20), fm, 0.0), rm, spec


@pytest.mark.parametrize("name", ["beam", "matrices", "plate"])
def test_hybrid_step_is_the_smoothers(tmp_path, name):
    """The hybrid's own step (its expm, no kf_A) equals the smoother's kf_A block to 1e-11 of
    its largest entry on the cantilever (150 elements, GMR+ 30 modes up to 52 kHz; beam
    model and imported matrices) and the plate; before, 1.1e-8 on the cantilever (refused)."""
    from offline.hybrid.attach import model_of

    _, paths = _structures(tmp_path)
    b, rm, spec = _smoother_bundle(paths[name])
    hm = model_of(b, rm, spec)
    m = 2 * b.n
    As = b.kf["A"][:m, :m]
    np.testing.assert_array_equal(hm.A, As)
    own = model_of(b.replace(kf={}), rm, spec).A
    assert np.max(np.abs(own - As)) <= 1e-11 * np.max(np.abs(As))
    # and the input matrices come from the same model: a constant unit force held for ever
    # gives the static deflection, x = (I - A)^-1 (B0 + B1) u = -Ac^-1 Bc u, whose
    # displacement at the force is (K^-1)_ff (closed form on the reduced model; 1e-7: the
    # solve with the stiff modes' I - A)
    x = np.linalg.solve(np.eye(m) - hm.A, (hm.B0 + hm.B1)[:, 0])
    f = b.forces[0].dof
    stat = np.linalg.solve(b.K, np.eye(b.n)[f])[f]
    # u_f = e_f^T Phi eta = (Phi^T e_f)^T eta, Phi^T e_f = PhiB
    assert hm.PhiB[:, 0] @ x[0::2] == pytest.approx(stat, rel=1e-7)


def test_hybrid_on_a_free_free_model_uses_the_anchored_rigid_mode():
    """A free-free chain (a rigid-body mode): the hybrid's model was refused ("needs a
    supported structure"); now its step is the smoother's, with the rigid mode anchored as
    the smoother anchors it (meta rigid_anchor_hz)."""
    from offline.hybrid import hybrid_model
    from tests.test_smoother_freefree import FM, N, _free_free_bundle

    b = _free_free_bundle()
    sb = attach_smoother(b, design_smoother(b, [FM], lag=5), [FM], 0.0)
    assert sb.meta["estimator"]["rigid_modes"] == 1
    hm = hybrid_model(sb, np.eye(N)[[N - 1]])
    own = hybrid_model(sb.replace(kf={}), np.eye(N)[[N - 1]]).A
    As = sb.kf["A"][:2 * N, :2 * N]
    np.testing.assert_array_equal(hm.A, As)
    assert np.max(np.abs(own - As)) <= 1e-12 * np.max(np.abs(As))
    assert np.max(np.abs(np.linalg.eigvals(hm.A))) < 1.0   # anchored: a stable step


def test_hybrid_with_non_proportional_damping():
    """A discrete dashpot at one DOF (modal damping not diagonal: the smoother's step couples
    the modes): the hybrid's step is still the smoother's, its own within 1e-12."""
    from offline.hybrid import hybrid_model
    from tests.helpers import chain_bundle

    b = chain_bundle(n=5, kinds=("displacement", "acceleration"))
    C = b.C.copy()
    C[2, 2] += 5.0                     # a dashpot at DOF 2 (the chain's C is Rayleigh)
    b = b.replace(C=C)
    fm = [ForceModel("bandpass", (5.0, 80.0), 1.0, 2)]
    sb = attach_smoother(b, design_smoother(b, fm, lag=4), fm, 0.0)
    assert not sb.meta["estimator"]["proportional"]
    rows = np.eye(5)[[4]]
    hm = hybrid_model(sb, rows)
    As = sb.kf["A"][:10, :10]
    np.testing.assert_array_equal(hm.A, As)
    own = hybrid_model(sb.replace(kf={}), rows).A
    assert np.max(np.abs(own - As)) <= 1e-12 * np.max(np.abs(As))
    off = np.abs(As[0:2, 2:4]).max()   # modes 1 and 2 coupled through the dashpot
    assert off > 1e-6 * np.max(np.abs(As[0:2, 0:2]))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["beam", "matrices", "plate"])
def test_build_hybrid_on_three_structures(tmp_path, name):
    """`vsense-offline build --hybrid` with two force-known records at two amplitudes (0.15
    and 0.6 N RMS; the last 25 % of each validates) from the FULL nonlinear model (cubic
    spring, RK4): a bundle, no refusal, and the network better than the linear model on the
    validation data (short training: 5 iterations)."""
    from edge.bundle import Bundle
    from offline.cli import main
    from offline.hybrid.demo import write_record
    from offline.hybrid.truth import cubic_record
    from offline.model import load_model_file

    hs, paths = _structures(tmp_path, lambda s: s.replace("hidden = 32", "hidden = 8")
                            .replace("restarts = 2", "restarts = 1")
                            .replace("epochs = 200", "epochs = 5"))
    path = paths[name]
    assert "epochs = 5" in path.read_text()      # the short training of this test
    at, _, _ = hs.SPRING[name]
    # k3 of benchmarks/hybrid_structures.py (spring_k3, measured): 1.02e5 N/m^3 at the
    # cantilever's tip, 4.06e12 at the plate's point (the spring's tangent stiffness 0.1 of
    # the structure's static stiffness at the high level's RMS displacement)
    k3 = {"beam": 1.02e5, "matrices": 1.02e5, "plate": 4.06e12}[name]
    spec = load_model_file(path)
    recs = []
    for lab, rms, seed in (("low", hs.LOW, 1), ("high", hs.HIGH, 2)):
        t, F, Y, _ = cubic_record(path, ({"at": at}, "uz"), k3, rms, seed, 2.0)
        recs += ["--hybrid", str(write_record(tmp_path / f"{lab}.csv", t, F, Y, spec))]
    out = tmp_path / "h.npz"
    assert main(["build", str(path), "-o", str(out), "--quiet", *recs]) == 0
    b = Bundle.load(out)
    meta = b.meta["hybrid"]
    assert "hy_onnx" in b.kf and meta["acts_on"] == "dofs"
    assert meta["loss_best_val"] < meta["loss_linear_val"]


def test_the_records_generator_reads_a_strain_gauge_through_its_recovery_row(tmp_path):
    # offline/hybrid/truth.py reads a strain gauge and a strain output through the element's
    # recovery row (offline.fem.strain.Probe), as `simulate` does; before, it resolved every
    # signal to one DOF, and a gauge (no `dof`) stopped it with "unknown DOF ''".
    # Reference: the same full model without the spring (k3 = 0) by the exact modal engine of
    # the calibration runs (offline.calibration_runs.run_modal: FOH transfer per mode, with
    # the residual flexibility), independent of the Runge-Kutta stepping of cubic_record
    from offline.calibration_runs import run_modal
    from offline.hybrid.demo import model_text
    from offline.hybrid.truth import cubic_record
    from offline.limit.transfer import modal_model
    from edge.kinds import kind_order
    from offline.model import (build_fe_model, load_model_file, output_probe, resolve_dofs,
                               sensor_probe)
    from offline.simulate import load_profile

    gauge = ('[[sensors]]\nname = "eps20"\nkind = "strain"\nunit = "microstrain"\n'
             'at = [0.02, 0.0, 0.0006]\nnoise = 0.01\n')
    out = ('[[outputs]]\nname = "eps40"\nkind = "strain"\nunit = "microstrain"\n'
           'at = [0.04, 0.0, 0.0006]\n')
    text = model_text(0.1, hybrid=False)
    text = text.replace("[[forces]]", gauge + "[[forces]]", 1)
    text = text.replace("[estimator]", out + "[estimator]", 1)
    path = tmp_path / "strip_gauge.toml"
    path.write_text(text)
    t, F, Y, Z = cubic_record(path, ({"at": [0.17, 0.0, 0.0]}, "uz"), 0.0, 0.1, 3, 1.0,
                              noise=0.0)
    spec = load_model_file(path)
    model = build_fe_model(spec, progress=False)
    probes = [sensor_probe(model, s) for s in spec.sensors]
    probes += [output_probe(model, o) for o in spec.outputs]
    fd = [resolve_dofs(model, f.select, f.dof)[0] for f in spec.forces]
    dtf = 1e-4                                      # cubic_record's grid: 10x the record's
    tf = dtf * np.arange(10 * (t.size - 1) + 1)
    Ff = load_profile("random", tf, band=(5.0, 150.0), rms=0.1, seed=3)[:, None]
    orders = [kind_order(e.kind) for e in spec.sensors + spec.outputs]
    ref = run_modal(modal_model(model, fd, probes, n_modes=20), Ff, dtf, 10, orders)
    got = np.hstack([Y, Z])
    names = [s.name for s in spec.sensors] + [o.name for o in spec.outputs]
    for j in (names.index("eps20"), names.index("eps40")):
        err = np.sqrt(np.mean((got[:, j] - ref[:, j]) ** 2)) / np.std(ref[:, j])
        # measured 0.08 % / 0.13 % (RK4 on the modes below 1/dt_fine against the exact FOH
        # of 20 modes with the residual flexibility): 1 %
        assert err < 0.01, (names[j], err)
