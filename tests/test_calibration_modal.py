"""Output-only calibration through identified natural frequencies."""

from __future__ import annotations

import numpy as np

from calib_truth import E_ONLY, model_text, truth_record
from offline.calibration.calibrate import settings_from_raw
from offline.calibration.modal import calibrate_frequencies, frequency_model, identify_frequencies
from offline.calibration.setup import from_model_file

def test_identified_frequencies_calibrate_E(tmp_path):
    from offline.model import build_fe_model, spec_from_dict
    from offline.reduction.eigen import modes
    import tomllib
    truth = model_text(nel=34, E=66e9, k_root=10.0, params="")
    # operational record: unknown broadband force 5-300 Hz, 8 s at 1 kHz, 1 % noise
    _, Y = truth_record(tmp_path / "op.csv", truth, duration=8.0, seed=4, band=(5.0, 300.0))
    m = build_fe_model(spec_from_dict(tomllib.loads(truth), tmp_path / "t.toml"), progress=False)
    f_true = np.sqrt(modes(m.K, m.M, 2).lam) / (2 * np.pi)
    from edge.csvio import read_table
    t, data, names = read_table(tmp_path / "op.csv")
    f_hat = identify_frequencies(data[:, 1:], t[1] - t[0], 2, f_range=(10.0, 400.0), nperseg=2048)
    # Welch bins of 0.49 Hz (7 averages of a random force), parabola over ±3 bins: within
    # 0.6 % of the truth's FE frequencies (measured +0.21 % and -0.52 %: the peak of one
    # 8 s realisation of a random response, not the identifier's resolution)
    np.testing.assert_allclose(f_hat, f_true, rtol=6e-3)
    (tmp_path / "model.toml").write_text(model_text(params=E_ONLY))
    su = from_model_file(tmp_path / "model.toml")
    st = settings_from_raw(su.spec.raw, su.parameters, su.where)
    res, tr = calibrate_frequencies(su, f_hat, st)
    E = float(tr[0].to_theta(res.m[0]))
    # f ∝ sqrt(E): a 0.5 % frequency error is 1 % in E; model 17 vs truth 34 elements
    # (measured -0.39 %)
    assert abs(E / 66e9 - 1) < 0.012 and res.converged


def test_frequency_jacobian_is_exact(tmp_path):
    (tmp_path / "model.toml").write_text(model_text())
    su = from_model_file(tmp_path / "model.toml")
    fm = frequency_model(su.pm.parts, [1, 2, 3])
    th = np.array([66e9, 0.01, 7.0])
    f, df = fm(th)
    for j in (0, 2):
        h = 1e-5 * th[j]
        tp, tn = th.copy(), th.copy()
        tp[j] += h
        tn[j] -= h
        fd = (fm(tp)[0] - fm(tn)[0]) / (2 * h)
        # central differences: O(h²) truncation ~ 1e-10, round-off of the eigenvalues
        # ~ 1e-16 / 1e-5 relative (measured 1.1e-6)
        np.testing.assert_allclose(df[:, j], fd, rtol=5e-6)


def test_cli_output_only(tmp_path):
    import json
    from offline.cli import main
    truth = model_text(nel=34, E=66e9, k_root=10.0, params="")
    truth_record(tmp_path / "op.csv", truth, duration=8.0, seed=4, band=(5.0, 300.0))
    (tmp_path / "model.toml").write_text(model_text(params=E_ONLY))
    code = main(["calibrate", str(tmp_path / "model.toml"), "--data", str(tmp_path / "op.csv"),
                 "-o", str(tmp_path / "out"), "--output-only", "2", "--f-range", "10", "400",
                 "--quiet"])
    assert code == 0
    post = json.loads((tmp_path / "out" / "posterior.json").read_text())
    assert post["output_only"] and len(post["frequencies_identified"]) == 2
    assert abs(post["mean"][0] / 66e9 - 1) < 0.012          # as the direct test (measured -0.39 %)
    assert (tmp_path / "out" / "calibrated.toml").is_file()
