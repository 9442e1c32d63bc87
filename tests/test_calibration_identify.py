"""What the records determine (offline/calibration/identify.py): profiles of weak directions.

Linear-Gaussian problems where the answer is known in closed form, then the cantilever of
``calib_zones`` (root spring, damping, five zones) with one and with three sensors."""

from __future__ import annotations

import numpy as np

from offline.calibration.identify import DPHI, analyse
from offline.calibration.noise import NoiseGroup
from offline.calibration.transforms import Transform
from offline.calibration.vb import variational_bayes


class _Linear:
    """k(ξ) = (J ξ - y) / σ, identity transforms, prior N(0, I): the Problem interface that
    :func:`analyse` uses."""

    def __init__(self, J, y, sigma):
        self.J, self.y, self.sigma = np.asarray(J, float), np.asarray(y, float), sigma
        p = self.J.shape[1]
        self.nmodel, self.names = p, [f"z{i}" for i in range(p)]
        self.transforms = [Transform("identity")] * p
        self.m0, self.L0 = np.zeros(p), np.eye(p)
        self.n_evals = 0

    def theta(self, xi):
        return np.asarray(xi[:self.nmodel], float)

    def residuals(self, xi, jac=True):
        self.n_evals += 1
        return [(self.J @ xi - self.y) / self.sigma], [self.J / self.sigma if jac else None]


def _fit(J, y, sigma=0.01):
    prob = _Linear(J, y, sigma)
    groups = [NoiseGroup("g", fixed=1.0)]
    res = variational_bayes(prob.residuals, prob.m0, prob.L0, groups, tol=1e-10)
    return prob, groups, res


def test_two_parameters_seen_only_as_their_sum_are_reported_with_the_sum():
    rng = np.random.default_rng(0)
    a = rng.standard_normal(200)
    # z0 and z1 enter only as z0 + z1 (identical columns); z2 is measured on its own
    J = np.column_stack([a, a, rng.standard_normal(200)])
    truth = np.array([0.3, 0.0, 0.5])
    y = J @ truth + 0.01 * rng.standard_normal(200)
    prob, groups, res = _fit(J, y)
    res, undet, dirs = analyse(prob, res, groups)
    assert len(undet) == 1 and undet[0]["parameters"] == ["z0", "z1"], undet
    u = undet[0]
    # the sum is the determined combination: coefficients (1, 1); its value z0 + z1 = 0.3
    # to the noise (std of the sum sigma / |a| sqrt 2 ... ~ 1e-3: 0.01 tolerance is ~10 std)
    assert abs(u["combination"]["z1"] - 1.0) < 1e-6
    assert abs(u["value"] - 0.3) < 0.01 and u["std"] < 0.01
    assert "their sum" in u["text"] and "difference is not determined" in u["text"]
    # the difference: the posterior is the prior's along it (closed form: variance ratio 1
    # along (1, -1)/sqrt 2 in whitened coordinates); the profile is flat inside +-1.96
    C = res.cov
    d = np.array([1.0, -1.0, 0.0]) / np.sqrt(2)
    assert abs(d @ C @ d - 1.0) < 1e-3
    # z2 is determined: its std stays the data's, ~ sigma / |b| (~7e-4), not widened
    assert np.sqrt(C[2, 2]) < 2e-3


def test_a_determined_problem_reports_nothing_and_keeps_its_covariance():
    rng = np.random.default_rng(1)
    J = rng.standard_normal((200, 3))
    y = J @ np.array([0.3, -0.2, 0.5]) + 0.01 * rng.standard_normal(200)
    prob, groups, res = _fit(J, y)
    C0 = res.cov.copy()
    res, undet, dirs = analyse(prob, res, groups)
    assert undet == [] and dirs == []      # no direction with r > R_MIN: nothing profiled
    np.testing.assert_allclose(res.cov, C0, rtol=1e-12)


def test_an_answer_off_the_optimum_along_a_weak_direction_is_moved_to_it():
    """A posterior 'answer' placed off the optimum along a weakly determined direction (as VB
    stopped by back-tracking on a ridge leaves it): the analysis moves it to the optimum."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal(200)
    # data information along (1, -1)/sqrt 2: 200 * 0.002² / 0.01² / 2 = 4 prior precisions
    J = np.column_stack([a, a + 0.002 * rng.standard_normal(200)])
    y = J @ np.array([0.4, 0.0]) + 0.01 * rng.standard_normal(200)
    prob, groups, res = _fit(J, y)
    best = res.m.copy()
    wrong = variational_bayes(prob.residuals, prob.m0, prob.L0, groups, tol=1e-10)
    # 1.41 prior std along the weak direction: Φ there is ½ (1 + 4) 1.41² = 5 above the optimum
    wrong.m = best + np.array([1.0, -1.0])
    seen = []

    def restart(xi):
        seen.append(np.array(xi))
        return variational_bayes(prob.residuals, prob.m0, prob.L0, groups, tol=1e-10, m_init=xi)
    res2, undet, dirs = analyse(prob, wrong, groups, restart=restart)
    assert seen          # found by the polish (identify.optimum); VB restarted there
    # VB from there is the closed-form posterior mean (linear model): to round-off
    np.testing.assert_allclose(res2.m, best, atol=1e-8)
    assert all(min(c.dphi) > -DPHI for c in dirs)


def test_vb_says_which_limit_stopped_it():
    """The CLI's message said "did not converge in 16 iterations ... Raise [bayes] max_iter
    (now 40)": VB had stopped on its back-tracking limit, not on max_iter."""
    from types import SimpleNamespace

    from offline.calibration.outcome import not_converged_reason
    from offline.calibration.vb import MAX_HALVINGS
    groups = [NoiseGroup("g", fixed=1e4)]
    y = np.linspace(0.0, 1.0, 50)

    def wrong_jacobian(xi):      # k = ξ x - y, Jacobian of the wrong sign: every step worsens F
        return [xi[0] * y - y], [-y[:, None]]
    res = variational_bayes(wrong_jacobian, np.zeros(1), np.eye(1), groups, max_iter=40,
                            m_init=np.array([0.5]))
    assert not res.converged and res.stop == "backtrack"
    # a full step and MAX_HALVINGS halved ones rejected, far from max_iter
    assert MAX_HALVINGS + 1 < res.iterations < 40
    msg = not_converged_reason({"iterations": res.iterations, "free_energy": res.F,
                                "stop": res.stop}, SimpleNamespace(max_iter=40))
    assert f"after {MAX_HALVINGS} halvings" in msg and "max_iter is 40, not reached" in msg

    def curved(xi):
        return [np.sin(3 * xi[0]) * y - y], [3 * np.cos(3 * xi[0]) * y[:, None]]
    res = variational_bayes(curved, np.zeros(1), np.eye(1), groups, max_iter=2, tol=1e-12)
    assert not res.converged and res.stop == "max_iter" and res.iterations == 2
    msg = not_converged_reason({"iterations": 2, "free_energy": res.F, "stop": res.stop},
                               SimpleNamespace(max_iter=2))
    assert "did not converge in 2 iterations, the [bayes] max_iter limit" in msg


def _zone_case(tmp_path, layout):
    from calib_zones import write_case
    from offline.calibration.calibrate import calibrate
    from offline.calibration.setup import from_model_file
    # one 1.5 s record, no prior draws among the starts: the test's time budget
    path = write_case(tmp_path, layout, duration=1.5, bayes="[bayes]\ndraws = 0\n")
    return calibrate(from_model_file(path), [tmp_path / "rec.csv"])


def _confident_is_correct(res):
    """Every parameter reported as determined holds its truth within 3 posterior stds (the
    truth: calib_zones, k_root 10, z2 0.4, other zones 0; the damping ratio is left out: the
    truth's Rayleigh pair is 1.005 % / 0.97 % at its modes 1 / 2, one ζ cannot be both)."""
    truth = {"k_root": 10.0, "z0": 0.0, "z1": 0.0, "z2": 0.4, "z3": 0.0, "z4": 0.0}
    bad = {n: (m, s) for n, m, s in zip(res.names, res.theta, res.theta_std)
           if n in truth and res.determined[n] and abs(m - truth[n]) > 3 * s}
    assert not bad, (bad, [u["text"] for u in res.undetermined])


def test_one_sensor_cannot_place_the_zone_and_says_so(tmp_path):
    """The tester's case on a strip of our own: one displacement near the tip, root spring,
    damping and five zones, 40 % loss in 30-50 mm. The former answer named zone 10-30 mm
    (0.29 +- 0.03) with confidence, 13 stds from the truth."""
    res = _zone_case(tmp_path, "1 sensor")
    _confident_is_correct(res)
    # the damaged zone is either found or reported as not determined, never confidently intact
    i = res.names.index("z2")
    assert not res.determined["z2"] or abs(res.theta[i] - 0.4) < 3 * res.theta_std[i]
    assert res.undetermined       # one sensor does not separate five zones and a root spring
    # no zone named: every zone's 95 % interval reaches intact (measured: lower ends < 0)
    iv = res.interval95()
    assert all(iv[res.names.index(f"z{j}"), 0] < 0.1 for j in range(5)), iv


def test_three_sensors_find_the_zone(tmp_path):
    """Sensors at the damaged zone's ends (30, 50 mm) and near the tip: the damage must be found
    in its zone: z2 the highest, its 95 % interval holding 0.4 and clear of intact (lower end
    above 0.1), and no intact zone's interval clear of 0.1 (no damage named elsewhere)."""
    res = _zone_case(tmp_path, "3 sensors")
    _confident_is_correct(res)
    iv = res.interval95()
    z = [res.names.index(f"z{j}") for j in range(5)]
    # measured (2 s record, load 21): z2 0.321 +- 0.076, 95 % 0.184 .. 0.477; z1 0.13 .. 0.46
    assert int(np.argmax(res.theta[z])) == 2
    assert iv[z[2], 0] > 0.1 and iv[z[2], 0] < 0.4 < iv[z[2], 1], iv[z[2]]
    assert all(iv[z[j], 0] < 0.1 for j in (0, 1, 3, 4)), iv[z]
