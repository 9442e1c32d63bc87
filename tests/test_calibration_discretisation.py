"""The forward model's discretisation in the posterior (offline/calibration/discretisation.py).

A linear-Gaussian problem where the refined model's posterior is known in closed form, then
the two-span strip of ``calib_zones`` (family ζ + the damaged zone z2, 34-element model with
16 sub-steps and a reduced basis, truth 68 elements by the exact modal engine): without the
check the posterior std of z2 is 30x narrower than the forward model's own error."""

from __future__ import annotations

import json

import numpy as np
from calib_truth import truth_record
from calib_zones import ZONES, _box, case_text, truth_text

from offline.calibration import discretisation
from offline.calibration.calibrate import Settings, calibrate
from offline.calibration.noise import NoiseGroup
from offline.calibration.setup import from_model_file
from offline.calibration.vb import variational_bayes
from offline.cli import main


class _Linear:
    """k(ξ) = (J ξ + c - y) / σ, prior N(0, I): a forward model whose refinement adds the
    response ``c`` (the Problem interface :mod:`discretisation` uses)."""

    group_names = ["g"]

    def __init__(self, J, y, sigma, c=0.0, substeps=16):
        self.s = Settings(priors=[], substeps=substeps)
        self.J, self.y, self.sigma, self.c = np.asarray(J, float), np.asarray(y, float), sigma, c
        self.m0, self.L0 = np.zeros(self.J.shape[1]), np.eye(self.J.shape[1])
        self.n_evals = 0

    def residuals(self, xi, jac=True):
        self.n_evals += 1
        return [(self.J @ xi + self.c - self.y) / self.sigma], [self.J / self.sigma]


def test_shift_is_the_refined_models_posterior_mean_for_a_linear_model():
    rng = np.random.default_rng(3)
    J = rng.normal(size=(200, 3))
    y = J @ np.array([0.5, -1.0, 2.0]) + 0.01 * rng.normal(size=200)
    c = 0.02 * np.sin(np.arange(200) / 7.0)          # the refined model's response change
    groups = [NoiseGroup("g", fixed=1.0)]
    coarse, fine = _Linear(J, y, 0.01), _Linear(J, y, 0.01, c, substeps=64)
    a = variational_bayes(coarse.residuals, coarse.m0, coarse.L0, groups, tol=1e-12)
    b = variational_bayes(fine.residuals, fine.m0, fine.L0, groups, tol=1e-12)
    k, Jk = coarse.residuals(a.m)
    d, rms = discretisation.shift(coarse, fine, a.m, groups, a.noise, k, Jk)
    # linear and Gaussian: one Gauss-Newton step is the exact posterior mean (rounding only)
    np.testing.assert_allclose(a.m + d, b.m, rtol=0, atol=1e-9 * np.abs(b.m).max())
    # the response change in units of σ: RMS(c) / 0.01
    assert abs(rms[0] - np.sqrt(np.mean(c ** 2)) / 0.01) < 1e-9
    cov0 = a.cov
    info = discretisation.check(coarse, a, groups, k, Jk, fine)
    # Λ⁻¹ + ΔΔᵀ (the docstring's covariance), to rounding
    np.testing.assert_allclose(a.cov, cov0 + np.outer(d, d), rtol=1e-9, atol=0)
    assert info["modes_refined"] is False and info["substeps"] == 64
    np.testing.assert_allclose(info["shift"], d, rtol=1e-12, atol=0)   # the same computation


def _two_span(tmp_path, disc: str, extra: str = "", **kw):
    """The two-span case's model file with the family ζ + z2 (k_root and the other zones at
    the truth's values) and ``[bayes] discretisation = disc``."""
    a, b = ZONES[2]
    fam = ('[[parameters]]\nname = "zeta"\nkind = "damping_ratio"\nbounds = [0.003, 0.05]\n'
           f'nominal = 0.01\n[[parameters]]\nname = "z2"\nkind = "damage"\nregion = {_box(a, b)}\n'
           'bounds = [-0.1, 0.99]\n')
    path = tmp_path / f"m_{disc}_{len(extra)}.toml"
    path.write_text(case_text("two-span, 2 sensors", params=fam, **kw)
                    + f"[bayes]\ndiscretisation = {disc}\n{extra}")
    return path


def test_two_span_posterior_covers_the_truth_with_the_discretisation_check(tmp_path):
    # truth: 68 elements, z2 at 40 %, the exact modal engine on a force grid 32x the record's
    # rate (linear between its points: 8x takes 0.16 % off the force at mode 2, a record error
    # the check is not about)
    truth_record(tmp_path / "rec.csv", truth_text("two-span, 2 sensors"), duration=2.0, seed=5,
                 band=(5.0, 450.0), n_modes=30, oversample=32)
    code = main(["calibrate", str(_two_span(tmp_path, "true")), "--data",
                 str(tmp_path / "rec.csv"), "-o", str(tmp_path / "out"), "--no-kfold", "--quiet"])
    assert code == 0
    post = json.loads((tmp_path / "out" / "posterior.json").read_text())
    i = post["names"].index("z2")
    z2, sd = post["mean"][i], post["std"][i]
    # the target: a determined parameter within 3 std of the truth (measured: 0.3836 +- 0.017,
    # 0.96 std; the 34-element model's own error moves z2 by -0.016)
    assert post["determined"]["z2"] and abs(z2 - 0.4) < 3 * sd
    # still informative: measured 0.017; intact (0) is 20 std away
    assert sd < 0.05
    # without the check the same calibration states 0.3836 +- 0.0006: 26 std from the truth
    old = calibrate(from_model_file(_two_span(tmp_path, "false")), [tmp_path / "rec.csv"])
    assert abs(old.theta[i] - 0.4) > 10 * old.theta_std[i] and old.discretisation is None
    # the shift predicts the calibration of the refined forward model (64 sub-steps, 12 modes
    # on the same basis kind): measured 0.4007 against 0.4001, 3 % of the shift 0.017
    shift = np.array(post["discretisation"]["shift"])
    xi = np.array(post["xi"]["mean"])
    z2_shifted = old.problem.transforms[i].to_theta(xi[i] + shift[i])
    fine = calibrate(from_model_file(_two_span(tmp_path, "false", "substeps = 64\n", modes=12,
                                               method=old.problem.setup.reduction_method)),
                     [tmp_path / "rec.csv"])
    assert abs(z2_shifted - fine.theta[i]) < 0.1 * abs(z2_shifted - z2)
