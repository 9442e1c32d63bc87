"""Source components of a load model (offline/forcing/component.py): one resonance of a
source driving several forces together; their spectrum, their Whittle gradient and the
smoother's state-space form."""

from __future__ import annotations

import numpy as np
import pytest

from offline.load.model import LoadModel
from offline.load.whittle import Whittle, components, make_layout, start_theta
from offline.forcing.component import Component
from offline.forcing.force_model import ForceModel


def test_component_variance_is_its_closed_form():
    c = Component(40.0, 0.05, (2.0, -0.5))
    f = np.linspace(-4000.0, 4000.0, 800001)
    # var = integral of the two-sided PSD over all f (trapezoid; the tails beyond 4 kHz hold
    # ~1e-5 of it) against v^2 w0 / (4 zeta) (the resonator's Lyapunov variance)
    num = np.trapezoid(c.h2(f), f) * np.array(c.v) ** 2
    np.testing.assert_allclose(num, c.variance(), rtol=1e-4)
    lm = LoadModel(forces=[ForceModel(rms=1.0), ForceModel(rms=0.1)], components=[c])
    np.testing.assert_allclose(lm.rms() ** 2, [1.0 + c.variance()[0], 0.01 + c.variance()[1]],
                               rtol=1e-12)
    # the direction: fully coherent at the resonance, S_12 = |h|^2 v1 v2
    S = lm.psd([40.0])[0]
    assert S[0, 1] < 0 and abs(S[0, 1]) > 0.99 * np.sqrt(S[0, 0] * S[1, 1])
    back = LoadModel.from_meta(lm.as_meta())
    assert back.components == [c]


def _problem(seed=0, images=False):
    """A small Whittle problem: 3 channels, 2 forces, random smooth transfer functions (and
    two alias images of them)."""
    rng = np.random.default_rng(seed)
    over, kern = 2, np.array([0.25, 0.5, 0.25])
    nb = 40
    f = 5.0 + np.arange(nb * over + len(kern) - 1) * 1.0
    H = (rng.normal(size=(3, 2)) + 1j * rng.normal(size=(3, 2)))[None] / (1.0 + f[:, None, None] / 50.0)
    S_hat = np.zeros((nb, 3, 3), complex)
    for k in range(nb):
        X = rng.normal(size=(3, 8)) + 1j * rng.normal(size=(3, 8))
        S_hat[k] = X @ X.conj().T / 8 * 1e-3
    img = [(1000.0 - f, 0.3 * np.conj(H)), (1000.0 + f, 0.1 * H)] if images else ()
    return Whittle(f, H, S_hat, kern, over, 8.0, 1e-3, img)


@pytest.mark.parametrize("images", [False, True])
def test_whittle_gradient_of_components_matches_differences(images):
    W = _problem(images=images)
    prior = [ForceModel(band=(5.0, 60.0), rms=0.5), ForceModel(band=(5.0, 60.0), rms=0.2)]
    comps = [Component(30.0, 0.05, (0.01, -0.004))]
    L = make_layout(prior, np.array([0.1, 0.1, 0.1]), 1000.0, 5.0, True, comps=comps)
    th = start_theta(L, prior, np.array([0.1, 0.2, 0.15]), np.array([[1, 0.3], [0.3, 1]]), comps)
    assert abs(components(L, th)[0].f0 - 30.0) < 1e-12
    v, g = W.nll_grad(L, th)
    fd = np.zeros_like(g)
    for i in range(L.size):
        h = 1e-5 * max(1.0, abs(th[i]))
        tp, tm = th.copy(), th.copy()
        tp[i] += h
        tm[i] -= h
        fd[i] = (W.nll(L, tp) - W.nll(L, tm)) / (2 * h)
    # central differences of the penalised NLL (independent of the analytic route);
    # rtol 1e-4 of the largest entry: the force parameters' own inner differences
    np.testing.assert_allclose(g, fd, rtol=0, atol=1e-4 * np.abs(fd).max())
    assert abs(v - W.nll(L, th)) < 1e-9 * abs(v)


def test_smoother_states_carry_the_component():
    """The smoother's force model: the component's resonator adds 2 states and its variance
    to each force (stationary Lyapunov covariance of the force states against LoadModel.rms)."""
    from scipy.linalg import solve_continuous_lyapunov

    fms = [ForceModel(band=(5.0, 100.0), rms=1.0), ForceModel(band=(5.0, 100.0), rms=0.3)]
    c = Component(30.0, 0.04, (0.05, 0.02))
    a, b, cc = c.realise()
    X = solve_continuous_lyapunov(a, -b @ b.T)
    var = (np.outer(c.v, cc[0]) @ X @ np.outer(c.v, cc[0]).T).diagonal()
    np.testing.assert_allclose(var, c.variance(), rtol=1e-10)
    lm = LoadModel(forces=fms, components=[c])
    np.testing.assert_allclose(lm.rms() ** 2, np.array([1.0, 0.09]) + var, rtol=1e-10)


def test_candidates_are_the_source_resonances_in_the_force_domain():
    """Records whose spectral matrix is exactly a two-component load's expectation: the
    candidates sit at the components' frequencies (within one bin) along their directions
    (the structure's transfer functions divided out by the pseudo-inverse)."""
    from offline.load.sources import candidates as _component_candidates, force_domain_spectra

    rng = np.random.default_rng(3)
    over, kern = 4, np.array([0.1, 0.2, 0.4, 0.2, 0.1])
    nb, df = 120, 0.5
    f = 2.0 + np.arange(nb * over + len(kern) - 1) * df / over
    # a structure with its own resonance at 40 Hz (it must not become a candidate)
    H = (rng.normal(size=(4, 2)) + 1j * rng.normal(size=(4, 2)))[None] * (
        1.0 / (1.0 - (f / 40.0) ** 2 + 0.02j * f / 40.0))[:, None, None]
    W = Whittle(f, H, np.zeros((nb, 4, 4), complex), kern, over, 10.0, 1e-3)
    floor = [ForceModel(band=(2.0, 60.0), rms=0.2, order=2)] * 2
    true = [Component(22.0, 0.03, (0.05, -0.04)), Component(47.0, 0.02, (0.03, 0.06))]
    noise = np.full(4, 0.05)
    W.S_hat = W.expected(floor, noise, np.eye(2), true)
    scale = [float(np.sqrt(fm.psd([10.0])[0])) for fm in floor]
    _, S, N = force_domain_spectra(W, noise, scale)
    assert S.shape == (nb, 2, 2) and np.all(np.real(np.einsum("kii->ki", N)) > 0)
    cands = _component_candidates(W, noise, scale, 4)
    assert [round(c.f0) for c in cands] == [22, 47], cands
    for c, t in zip(cands, true):
        assert abs(c.f0 - t.f0) <= df                     # one Welch bin
        cos = abs(np.dot(c.v, t.v)) / np.linalg.norm(c.v) / np.linalg.norm(t.v)
        assert cos > 0.99, (c, t)                        # the direction (sign is free)
        # the size: within 30 % (the window smooths the peak; the damping is read from
        # the half-power width of a 0.5 Hz grid)
        assert 0.7 < np.linalg.norm(c.v) / np.linalg.norm(t.v) < 1.3, (c, t)


def test_direction_uncertainty_components_add_the_posterior_second_moment():
    """E[v v^T] over the Laplace posterior: the entries the records fix keep their fit; the
    others go to their prior mean (zero) and the uncertainty components' outer products sum
    to their second moment v_hat v_hat^T + Sigma_v (all ranks kept), in units of each
    force's declared size the largest one first."""
    from offline.load.sources import direction_uncertainty as _direction_uncertainty

    prior = [ForceModel(band=(5.0, 60.0), rms=0.5), ForceModel(band=(5.0, 60.0), rms=0.02)]
    c = Component(30.0, 0.05, (0.01, -0.0004))
    L = make_layout(prior, np.array([0.1, 0.1]), 1000.0, 5.0, False, comps=[c])
    rng = np.random.default_rng(5)
    A = rng.normal(size=(L.size, L.size))
    cov = A @ A.T                          # every entry's std above half its prior's
    idx = [L.index("cv0_0"), L.index("cv0_1")]
    assert np.all(np.sqrt(np.diag(cov)[idx]) >= 0.5 * np.asarray(L.sd)[idx])
    D = np.asarray(L.vscale)
    v = np.asarray(c.v)
    second = D[:, None] * cov[np.ix_(idx, idx)] * D[None, :] + np.outer(v, v)
    kept, extra = _direction_uncertainty(L, cov, [c], rank=2, floor=0.0)
    assert kept == [Component(30.0, 0.05, (0.0, 0.0))]
    assert all(e.f0 == c.f0 and e.zeta == c.zeta for e in extra)
    # closed form: the eigen-decomposition sums back to the second moment (round-off)
    np.testing.assert_allclose(sum(np.outer(e.v, e.v) for e in extra), second,
                               rtol=0, atol=1e-12 * np.abs(second).max())
    lam = np.linalg.eigvalsh(second / np.outer(D, D))
    _, one = _direction_uncertainty(L, cov, [c], rank=1, floor=0.0)
    np.testing.assert_allclose(np.sum((np.asarray(one[0].v) / D) ** 2), lam.max(), rtol=1e-12)
    assert _direction_uncertainty(L, cov, [c], floor=1e9)[1] == []
    # an entry the records fix (std a tenth of its prior's) keeps its fit and no extra power
    cov2 = cov.copy()
    i0 = idx[0]
    f = 1e-1 * L.sd[i0] / np.sqrt(cov[i0, i0])
    cov2[i0, :] *= f
    cov2[:, i0] *= f
    kept, only = _direction_uncertainty(L, cov2, [c], rank=2, floor=0.0)
    assert kept[0].v == (c.v[0], 0.0)
    np.testing.assert_allclose(sum(np.outer(e.v, e.v) for e in only),
                               np.diag([0.0, second[1, 1]]), rtol=1e-12, atol=1e-30)


def test_summary_names_each_direction_entry_the_records_do_not_fix():
    from offline.load.learn import LoadFit

    fms = [ForceModel(band=(5.0, 100.0), rms=1.0), ForceModel(band=(5.0, 100.0), rms=0.1)]
    c = Component(35.0, 0.03, (0.25, 0.0004))
    extra = Component(35.0, 0.03, (0.01, 0.012))
    lm = LoadModel(forces=fms, components=[c, extra], noise_std=np.array([0.1]),
                   info={"uncertainty_components": 1})
    fit = LoadFit(model=lm, prior=lm, identified={"force 0": True, "force 1": False,
                                                  "noise 0": True, "component 0 0": True,
                                                  "component 0 1": False},
                  posterior_sd={"force 0": 0.1, "force 1": 1.0, "noise 0": 0.01,
                                "component 0 0": 0.05, "component 0 1": 0.011}, nll=0.0)
    text = fit.summary(["F", "M"], ["a0"])
    line = next(x for x in text.splitlines() if "source component 35.0 Hz" in x)
    assert "F +0.25 (+/- 0.05)" in line and "M +0.0004 (+/- 0.011) [not identified]" in line
    assert text.count("source component") == 1          # the uncertainty one is not a source
    assert "1 component(s) holding the uncertainty" in text


def test_summary_states_each_force_total_rms_when_components_carry_it():
    """With source components the floor's RMS is not the force's: the summary, the build's
    smoother line and the report state the total (LoadModel.rms, whose closed form is checked
    above). A user's 12 N force was printed as 'rms 20 -> 0.202 [not identified]'."""
    from offline.load.model import total_rms_note
    from offline.load.learn import LoadFit

    fms = [ForceModel(band=(5.0, 170.0), rms=0.2), ForceModel(band=(5.0, 110.0), rms=4.1)]
    comps = [Component(56.0, 0.3, (0.48, -0.11)), Component(108.0, 0.27, (-0.35, 0.094))]
    lm = LoadModel(forces=fms, components=comps, noise_std=np.array([0.1]))
    total = lm.rms()
    assert total[0] > 10 * fms[0].rms                 # the case: the components carry F0
    fit = LoadFit(model=lm, prior=LoadModel(forces=[ForceModel(rms=20.0)] * 2,
                                            noise_std=np.array([0.2])),
                  identified={"force 0": False, "force 1": True, "noise 0": True},
                  posterior_sd={"force 0": 2.25, "force 1": 0.05, "noise 0": 0.01}, nll=0.0)
    text = fit.summary(["F0", "F1"], ["a0"])
    f0 = next(x for x in text.splitlines() if x.strip().startswith("F0:"))
    # an unidentified floor's posterior width is the prior's (225 %): not printed as a
    # measured uncertainty; an identified level's is (F1: 5 %)
    assert f"rms 20 -> {total[0]:.3g} (floor 0.2, plus the components" in f0
    assert "[floor not identified" in f0 and "225" not in f0
    f1 = next(x for x in text.splitlines() if x.strip().startswith("F1:"))
    assert "+/- 5 %" in f1
    e = {"force_models": [fm.as_dict() for fm in fms],
         "force_components": [c.as_dict() for c in comps]}
    assert total_rms_note(e).endswith(f"total rms {total[0]:.3g}, {total[1]:.3g}")
    np.testing.assert_allclose(LoadModel.from_estimator(e).rms(), total, rtol=1e-12)
    assert total_rms_note({"force_models": e["force_models"]}) == ""
