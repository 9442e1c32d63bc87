"""Issue 25, operational records (force unknown): the plausibility check of the modal route,
``--bundle`` / ``--kfold`` with operational records, damping identified, and the likelihood
route's accuracy (calibrated estimates against those of the true model)."""

from __future__ import annotations

import json
import tomllib

import numpy as np
import pytest

from calib_operational import CASES, operational_record, score
from calib_truth import E_ONLY, model_text, truth_record, truth_run
from offline.calibration.modal import identify_modes

def _truth():
    return model_text(nel=34, E=66e9, k_root=10.0, params="")


def test_noise_peaks_are_not_taken_as_modes():
    # the bug: a force 5-80 Hz leaves the 2nd mode (187 Hz) unexcited and the most prominent
    # second peak of one 8 s Welch estimate is noise at 378.6 Hz (the former identifier
    # returned [29.3, 378.6]; asking for 3 modes added a noise peak at 17.0 Hz)
    _, Y, _, _ = truth_run(_truth(), duration=8.0, seed=4, band=(5.0, 80.0))
    with pytest.raises(ValueError, match=r"found 1 plausible mode.*378\.6 Hz not stable"):
        identify_modes(Y, 1e-3, 2)
    f, _, dropped = identify_modes(Y, 1e-3, 1)
    # the first mode stays (FE truth 29.2 Hz, see test_calibration_modal: within 0.6 %)
    assert abs(f[0] / 29.2 - 1) < 6e-3 and dropped == []


def test_damping_is_identified():
    from offline.model import build_fe_model, spec_from_dict
    from offline.reduction.eigen import modes
    truth = _truth()
    _, Y, _, _ = truth_run(truth, duration=32.0, seed=4, band=(5.0, 300.0))
    f, z, _ = identify_modes(Y, 1e-3, 2, nperseg=2048)
    # reference: the truth's Rayleigh damping ζ(ω) = a / (2ω) + b ω / 2 from [damping] ratios
    # 1 % at 30 and 200 Hz, at its FE frequencies
    m = build_fe_model(spec_from_dict(tomllib.loads(truth), "t.toml"), progress=False)
    w = np.sqrt(modes(m.K, m.M, 2).lam)
    w1, w2 = 2 * np.pi * 30.0, 2 * np.pi * 200.0
    a, b = 2 * 0.01 * w1 * w2 / (w1 + w2), 2 * 0.01 / (w1 + w2)
    zeta = a / (2 * w) + b * w / 2
    # mode 2 (3.7 Hz half-power band = 7.6 bins of 0.49 Hz) is resolved: measured +12 %
    # (31 Welch averages: the half-power points of one estimate scatter by about a bin)
    assert abs(z[1] / zeta[1] - 1) < 0.25, (z, zeta)
    # mode 1 (0.58 Hz band, 1.2 bins) is not: reported as not resolved (nan), never guessed
    assert np.isnan(z[0])


def test_output_only_bundle_is_built_and_kfold_refused(tmp_path, capsys):
    from edge.bundle import Bundle
    from offline.cli import main
    truth_record(tmp_path / "op.csv", _truth(), duration=8.0, seed=4, band=(5.0, 300.0))
    # operational record: the force column dropped (the calibration must not need it)
    from edge.csvio import read_table, write_table
    t, data, names = read_table(tmp_path / "op.csv")
    write_table(tmp_path / "op2.csv", t, data[:, 1:], names[1:])
    (tmp_path / "model.toml").write_text(model_text(params=E_ONLY))
    base = ["calibrate", str(tmp_path / "model.toml"), "--data", str(tmp_path / "op2.csv"),
            "-o", str(tmp_path / "out"), "--output-only", "2", "--f-range", "10", "400",
            "--quiet"]
    # --kfold was silently ignored: now a clear refusal (exit 2, the option named)
    assert main(base + ["--kfold"]) == 2
    assert "--kfold is not available with --output-only" in capsys.readouterr().err
    # --bundle was silently ignored: now the calibrated bundle is built
    assert main(base + ["--bundle", str(tmp_path / "cal.npz")]) == 0
    b = Bundle.load(tmp_path / "cal.npz")
    post = json.loads((tmp_path / "out" / "posterior.json").read_text())
    assert b.meta["calibration"]["names"] == ["E"]
    assert b.meta["calibration"]["mean"] == pytest.approx(post["mean"], rel=1e-12)
    # E from two identified frequencies (measured -0.39 %, test_calibration_modal)
    assert abs(post["mean"][0] / 66e9 - 1) < 0.012


def test_operational_likelihood_calibration_matches_the_true_model(tmp_path):
    """Issue 25 Must show, the modulus-and-damping case: calibrated from a 32 s operational
    record alone, the estimates' errors within 1.3x of those of the true model."""
    from offline.cli import main
    name = "E -7 %, damping 1.5 %"
    truth, model, true = CASES[name]
    operational_record(tmp_path / "op.csv", truth, 32.0, seed=7)
    (tmp_path / "model.toml").write_text(model)
    code = main(["calibrate", str(tmp_path / "model.toml"), "--data", str(tmp_path / "op.csv"),
                 "-o", str(tmp_path / "out"), "--operational", "--quiet",
                 "--bundle", str(tmp_path / "cal.npz")])
    assert code == 0 and (tmp_path / "cal.npz").is_file()
    post = json.loads((tmp_path / "out" / "posterior.json").read_text())
    E, zeta = post["mean"]
    # truth 0.93 x 69 GPa = 64.17 GPa (34-element truth vs 17-element model): measured
    # 64.20 GPa (+0.05 %); the truth's Rayleigh damping (1.5 % at 30 and 200 Hz) is 1.54 % at
    # its f1 and 1.42 % at f2, one ζ at both modes lies between: measured 1.461 %
    assert abs(E / 64.17e9 - 1) < 0.005 and abs(zeta / 0.015 - 1) < 0.06, post["mean"]
    assert post["converged"] and post["output_only"]
    cal = tomllib.loads((tmp_path / "out" / "calibrated.toml").read_text())
    sc = score(tmp_path, {"true": true, "calibrated": cal}, truth, seed=7)
    # measured calibrated / true: 0.98 / 0.98 / 1.00 / 1.00 (benchmarks/calibrate_operational.py)
    for key in ("force_fde", "force_nrmse", "d60_fde", "d60_nrmse"):
        assert sc["calibrated"][key] <= 1.3 * sc["true"][key], (key, sc)


def test_transfer_of_the_reduced_model_is_the_direct_solve(tmp_path):
    """H(f; θ) of the operational likelihood (modes of the reduced model) against the direct
    frequency-domain solve u = (K̂ - ω² M̂ + iω Ĉ)⁻¹ B̂ (independent code), with the output
    factor (iω)^kind: displacement d110 and acceleration a170."""
    from offline.calibration.forward import damped_matrices
    from offline.calibration.operational import reduced_modal
    from offline.calibration.setup import from_model_file
    (tmp_path / "model.toml").write_text(model_text())
    su = from_model_file(tmp_path / "model.toml")
    th = np.array([64e9, 0.013, 8.0])
    f = np.array([3.0, 29.0, 31.7, 150.0, 205.0, 390.0])
    H = reduced_modal(su.pm.parts, th, su.B, su.out_rows).transfer(f, su.out_kind)
    M, C, K, *_ = damped_matrices(su.pm.parts, th)
    for i, fi in enumerate(f):
        w = 2 * np.pi * fi
        u = np.linalg.solve(K - w ** 2 * M + 1j * w * C, su.B)
        ref = (su.out_rows @ u) * ((1j * w) ** su.out_kind)[:, None]
        # Rayleigh damping is exactly modal: equal to round-off (conditioning of the solve
        # near resonance ~1e4 x 1e-16)
        np.testing.assert_allclose(H[i], ref, rtol=1e-9, atol=1e-12 * np.abs(ref).max())


def test_output_only_calibrates_the_damping_ratio(tmp_path):
    """The modal route with a damping_ratio parameter: ζ follows the identified damping of
    the resolved mode(s) (it stayed at its prior before)."""
    from edge.csvio import write_table
    from offline.cli import main
    _, Y, _, _ = truth_run(_truth(), duration=32.0, seed=4, band=(5.0, 300.0))
    write_table(tmp_path / "op.csv", np.arange(Y.shape[0]) / 1000.0, Y, ["d110", "a170"])
    params = E_ONLY + ('[[parameters]]\nname = "zeta"\nkind = "damping_ratio"\n'
                       'bounds = [0.003, 0.05]\nnominal = 0.02\n')
    (tmp_path / "model.toml").write_text(model_text(params=params))
    assert main(["calibrate", str(tmp_path / "model.toml"), "--data", str(tmp_path / "op.csv"),
                 "-o", str(tmp_path / "out"), "--output-only", "2", "--quiet"]) == 0
    post = json.loads((tmp_path / "out" / "posterior.json").read_text())
    z1, z2 = post["damping_identified"]
    # 1024-sample segments (0.98 Hz bins): mode 1's 0.6 Hz band is not resolved, mode 2's
    # 3.6 Hz band is; the truth's Rayleigh damping (1 % at 30 and 200 Hz) is 0.953 % at its
    # f2 = 187 Hz (test_damping_is_identified's formula). Measured 1.21 % (+27 %): a band of
    # 3.7 bins is widened by the Hann kernel more than the quadrature correction removes
    # (2048-sample segments: +12 %, test_damping_is_identified)
    assert z1 is None and abs(z2 / 0.00953 - 1) < 0.3, post["damping_identified"]
    # ζ moved from its prior median 2 % to the identified damping it is fitted to (measured
    # 1.265 % against 1.21 % identified: VB stops when its next step is below 1 % of the
    # posterior std, calibrate_frequencies)
    assert post["converged"] and post["mean"][1] < 0.015, post["mean"]
    assert abs(post["mean"][1] / z2 - 1) < 0.1, (post["mean"], z2)


def _durbin_nll(r, y):
    """-log p(y) of a stationary Gaussian series with autocovariance r (n,) by the
    prediction-error decomposition: Durbin's recursion gives the one-step prediction error
    variances v_k (log det R = Σ log v_k), Levinson's solve the quadratic form."""
    from scipy.linalg import solve_toeplitz
    v, phi, logdet = r[0], np.zeros(0), np.log(r[0])
    for k in range(1, r.size):
        kap = (r[k] - phi @ r[1:k][::-1]) / v
        phi = np.concatenate([phi - kap * phi[::-1], [kap]])
        v *= 1 - kap ** 2
        logdet += np.log(v)
    return 0.5 * (logdet + y @ solve_toeplitz(r, y))


def test_whittle_likelihood_agrees_with_the_prediction_error_decomposition(tmp_path):
    """The operational likelihood (Whittle, on Welch matrices) against the exact time-domain
    likelihood of the same record (prediction-error decomposition: the innovations of the
    optimal one-step predictor, independent code): same maximiser in E and same curvature
    within the stated tolerances. One displacement channel, force 5-300 Hz of known spectrum,
    1 % noise, 8.2 s synthesised from the model's own spectrum (FFT synthesis on 2^19 points)."""
    from offline.calibration.calibrate import settings_from_raw
    from offline.calibration.operational import Likelihood, reduced_modal
    from offline.calibration.setup import from_model_file
    from offline.load.model import LoadModel
    from offline.forcing.force_model import ForceModel
    t = model_text(params=E_ONLY)
    t = t[:t.index('[[sensors]]\nname = "a170"')] + t[t.index("[[forces]]"):]
    (tmp_path / "m.toml").write_text(t)
    su = from_model_file(tmp_path / "m.toml")
    st = settings_from_raw(su.spec.raw, su.parameters, su.where)
    dt, n, E0 = 1e-3, 8192, 66e9
    fm = ForceModel("bandpass", (5.0, 300.0), 0.05, order=4)
    f = np.fft.rfftfreq(2 ** 19, dt)

    def S_of(E, s):
        H = reduced_modal(su.pm.parts, np.array([E]), su.B, su.out_rows).transfer(f, su.out_kind)
        return np.abs(H[:, 0, 0]) ** 2 * fm.psd(f) + s ** 2 * dt

    s = 0.01 * np.sqrt(np.fft.irfft(S_of(E0, 0.0))[0] / dt)
    w = np.random.default_rng(3).standard_normal(f.size * 2 - 2)
    y = np.fft.irfft(np.fft.rfft(w) * np.sqrt(S_of(E0, s) / dt))[:n]
    lik = Likelihood(su, st.priors, [y[:, None]], dt, None, np.array([np.log(E0)]),
                     load_start=LoadModel(forces=[fm], noise_std=np.array([s])))
    grid = 1 + np.linspace(-0.004, 0.004, 9)
    exact = [_durbin_nll((np.fft.irfft(S_of(E0 * g, s)) / dt)[:n], y) for g in grid]
    whittle = [lik.whittle(np.array([np.log(E0 * g)])).nll(lik.L, lik.lam0) for g in grid]
    (a_e, b_e, _), (a_w, b_w, _) = (np.polyfit(grid - 1, c, 2) for c in (exact, whittle))
    sd_e, sd_w = 1 / np.sqrt(2 * a_e), 1 / np.sqrt(2 * a_w)
    # measured: maximisers +0.135 % (exact) and +0.224 % (Whittle), 0.42 sigma apart; posterior
    # std 0.214 % and 0.199 % (Whittle's K_eff = segments / 1.5: 7 % narrower)
    assert abs(-b_w / (2 * a_w) + b_e / (2 * a_e)) < 0.75 * sd_e
    assert 0.75 < sd_w / sd_e < 1.33
