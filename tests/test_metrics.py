"""Accuracy metrics (paper 004, eq. 28, 29, 33) against closed-form values."""

import numpy as np
import pytest

from offline.metrics import FDE, add_noise, correlation, fde, rms_error, snr_db

DT = 1e-3
NT = 1000  # 1 s at 1 kHz: FFT bins every 1 Hz, so integer-Hz tones sit exactly on a bin


def _tone(f, amp=1.0, phase=0.0):
    t = np.arange(NT) * DT
    return amp * np.sin(2 * np.pi * f * t + phase)


def _x():
    rng = np.random.default_rng(10)
    return rng.standard_normal(NT) + _tone(37, 2.0)


def test_fde_identical_is_zero():
    # eq. 33: numerator sum |E - C| vanishes identically
    x = _x()
    r = fde(x, x, DT)
    assert isinstance(r, FDE) and r.band is None
    assert r.value == 0.0


def test_fde_opposite_and_zero_are_one():
    # |E - (-E)| = 2|E| = |E| + |-E|, and |E - 0| = |E| + 0: both ratios are exactly 1
    x = _x()
    assert fde(-x, x, DT).value == pytest.approx(1.0, abs=1e-14)
    assert fde(np.zeros(NT), x, DT).value == pytest.approx(1.0, abs=1e-14)
    assert fde(x, np.zeros(NT), DT).value == pytest.approx(1.0, abs=1e-14)


@pytest.mark.parametrize("c", [0.1, 0.5, 0.9, 1.5, 3.0])
def test_fde_scaled_copy(c):
    # E = c C bin by bin: sum |c-1||C| / sum (c+1)|C| = |1 - c| / (1 + c)   (analytic)
    x = _x()
    assert fde(c * x, x, DT).value == pytest.approx(abs(1 - c) / (1 + c), abs=1e-13)


def test_fde_band_selects_bins():
    # truth a sin(50 Hz) + b sin(300 Hz); estimate doubles the 300 Hz tone. Integer periods:
    # each tone is one bin of magnitude amp * NT / 2, no leakage. Closed forms:
    #   band (0, 200) Hz holds only the exact 50 Hz tone            -> 0
    #   band (250, 350) Hz holds only the 300 Hz bin: |2b-b|/(2b+b) -> 1/3
    #   full spectrum: b / (2a + 3b)
    a, b = 1.0, 0.4
    truth = _tone(50, a) + _tone(300, b)
    est = _tone(50, a) + _tone(300, 2 * b)
    lo = fde(est, truth, DT, band=(0, 200))
    assert lo.value == pytest.approx(0.0, abs=1e-12)
    assert lo.band == (0.0, 200.0) and lo.label == "0-200 Hz"
    assert lo.n_bins == 201 and lo.f_lo == 0.0 and lo.f_hi == 200.0  # 1 Hz bins, both ends in
    assert str(lo).startswith("FDE over 0-200 Hz")
    hi = fde(est, truth, DT, band=(250, 350))
    assert hi.value == pytest.approx(1 / 3, abs=1e-12)
    full = fde(est, truth, DT)
    assert full.value == pytest.approx(b / (2 * a + 3 * b), abs=1e-12)
    assert full.label == "full spectrum (0-500 Hz)"


def test_fde_columns():
    # 2-D input: one index per column, each equal to the 1-D result (independent call)
    x = _x()
    X = np.column_stack([x, 2 * x, -x])
    T = np.column_stack([x, x, x])
    r = fde(X, T, DT)
    assert r.value.shape == (3,)
    np.testing.assert_allclose(r.value, [0.0, 1 / 3, 1.0], atol=1e-13)  # |1-c|/(1+c)


def test_fde_bad_input_is_named():
    x = _x()
    y = x.copy()
    y[17] = np.nan
    with pytest.raises(ValueError, match=r"estimate: contains NaN or inf \(first at sample 17\)"):
        fde(y, x, DT)
    with pytest.raises(ValueError, match="truth: contains NaN"):
        fde(x, y, DT)
    with pytest.raises(ValueError, match="shape"):
        fde(x, x[:-1], DT)
    with pytest.raises(ValueError, match="dt"):
        fde(x, x, 0.0)
    with pytest.raises(ValueError, match="band"):
        fde(x, x, DT, band=(200, 100))
    with pytest.raises(ValueError, match="no FFT bin"):
        fde(x, x, DT, band=(10.2, 10.4))


def test_snr_closed_form():
    # clean = A sin(2 pi 40 t), noise = B sin(2 pi 170 t), whole periods, orthogonal tones:
    # rms(noisy)^2 = (A^2 + B^2)/2, rms(noise)^2 = B^2/2 -> SNR = 10 log10((A^2 + B^2)/B^2)
    A, B = 3.0, 0.03
    clean = _tone(40, A)
    noisy = clean + _tone(170, B)
    assert snr_db(noisy, clean) == pytest.approx(10 * np.log10((A**2 + B**2) / B**2), abs=1e-9)
    # a constant offset c as noise: rms(noise) = c, rms(noisy)^2 = A^2/2 + c^2
    c = 0.1
    assert snr_db(clean + c, clean) == pytest.approx(
        10 * np.log10((A**2 / 2 + c**2) / c**2), abs=1e-9)
    assert snr_db(clean, clean) == np.inf


def test_add_noise_level_and_snr():
    # eq. 28 with sigma = level * std(u). 1 % noise: SNR -> 20 log10(sqrt(1 + l^2) / l)
    # = 40.0004 dB for a zero-mean signal (the paper's "1 %, 40 dB").
    rng = np.random.default_rng(11)
    u = np.column_stack([_tone(40, 3.0), _tone(90, 1e-4)])
    ub = add_noise(u, 0.01, rng)
    n = NT
    sigma = 0.01 * np.std(u, axis=0)
    s_hat = np.std(ub - u, axis=0)
    # sample std of n Gaussian draws: relative standard error 1/sqrt(2n) = 2.2 %; allow 4 sigma
    np.testing.assert_allclose(s_hat, sigma, rtol=4 / np.sqrt(2 * n))
    expected = 20 * np.log10(np.sqrt(1 + 0.01**2) / 0.01)
    # SNR error ~ 20 log10(1 +- 4/sqrt(2n)) ~ 0.8 dB at 4 sigma
    np.testing.assert_allclose(snr_db(ub, u), expected, atol=0.8)
    # reproducible with the same seed, different with another
    np.testing.assert_array_equal(add_noise(u, 0.01, np.random.default_rng(11)), ub)
    assert not np.array_equal(add_noise(u, 0.01, np.random.default_rng(12)), ub)
    with pytest.raises(TypeError, match="rng"):
        add_noise(u, 0.01, 11)
    with pytest.raises(ValueError, match="level"):
        add_noise(u, -0.1, rng)


def test_rms_and_correlation():
    # rms of a constant error c is |c|; correlation of a*x + b with x is sign(a)
    x = _x()
    assert rms_error(x + 0.25, x) == pytest.approx(0.25, abs=1e-14)
    # sine of amplitude A over whole periods: rms = A / sqrt(2)
    assert rms_error(_tone(40, 2.0), np.zeros(NT)) == pytest.approx(2 / np.sqrt(2), rel=1e-12)
    assert correlation(3 * x + 1, x) == pytest.approx(1.0, abs=1e-12)
    assert correlation(-x, x) == pytest.approx(-1.0, abs=1e-12)
    # orthogonal tones over whole periods: correlation 0
    assert correlation(_tone(40), _tone(90)) == pytest.approx(0.0, abs=1e-12)
    assert np.isnan(correlation(np.ones(NT), x))


# ------------------------------------------------------------------------- score tool
from offline.score import ScoreError, main, score  # noqa: E402


def _write(path, names, cols, fmt="%.10g"):
    np.savetxt(path, np.column_stack(cols), delimiter=",", header=",".join(names),
               comments="", fmt=fmt)
    return path


def _score_files(tmp_path, c=0.5, flags=None, truth_sub=1):
    # truth: F (two tones) and u; estimate: c * F and u exactly. Truth may be on a finer grid.
    t = np.arange(NT) * DT
    tf = np.arange(NT * truth_sub) * DT / truth_sub
    F = lambda tt: np.sin(2 * np.pi * 50 * tt) + 0.4 * np.sin(2 * np.pi * 300 * tt)  # noqa
    u = lambda tt: 1e-4 * np.cos(2 * np.pi * 20 * tt)  # noqa
    fl = np.zeros(NT) if flags is None else flags
    est = _write(tmp_path / "est.csv", ["time", "F", "u", "flags"], [t, c * F(t), u(t), fl])
    tru = _write(tmp_path / "truth.csv", ["time", "u", "F", "extra"],
                 [tf, u(tf), F(tf), np.zeros_like(tf)])
    return est, tru


def test_score_scaled_copy_and_band(tmp_path):
    # F estimate = c F: FDE = |1-c|/(1+c) = 1/3 in any band and over any row subset
    # (analytic, bin by bin); u exact: FDE 0, RMS 0, correlation 1.
    est, tru = _score_files(tmp_path, c=0.5)
    tab = score(est, tru, band=(0, 200))
    rows = {r.name: r for r in tab.rows}
    assert list(rows) == ["F", "u"]
    assert rows["F"].fde_band == pytest.approx(1 / 3, abs=1e-9)
    assert rows["F"].fde_full == pytest.approx(1 / 3, abs=1e-9)
    assert rows["u"].fde_full == pytest.approx(0.0, abs=1e-9)
    assert rows["u"].rms == pytest.approx(0.0, abs=1e-14)
    assert rows["F"].corr == pytest.approx(1.0, abs=1e-9)
    # RMS of (c - 1) F: |c - 1| * sqrt(1/2 + 0.4^2/2) over whole periods (analytic)
    assert rows["F"].rms == pytest.approx(0.5 * np.sqrt(0.5 + 0.08), rel=1e-8)
    # NRMSE = RMS((c - 1) F) / std(F) = |c - 1| for a zero-mean F (analytic)
    assert rows["F"].nrmse == pytest.approx(0.5, rel=1e-8)
    assert rows["u"].nrmse == pytest.approx(0.0, abs=1e-12)
    assert tab.band_label == "0-200 Hz" and tab.full_label.startswith("full spectrum")
    assert tab.n_used == NT and tab.n_warmup == 0 and tab.n_nan == 0
    assert "FDE over 0-200 Hz" in tab.format()
    # without a band, one FDE column (a docs-only user read two identical ones as a bug)
    one = score(est, tru).format().splitlines()
    head = next(ln for ln in one if ln.startswith("column"))
    assert head.split()[:4] == ["column", "FDE", "full", "NRMSE"], head
    assert not any(ln.startswith("FDE over") for ln in one), one
    f_row = next(ln for ln in one if ln.startswith("F "))
    assert float(f_row.split()[1]) == pytest.approx(1 / 3, abs=1e-4), f_row


def test_score_skips_warmup_and_nan(tmp_path):
    fl = np.zeros(NT)
    fl[:5] = 2        # warm-up (bit 1)
    fl[100] = 1       # held value only: kept
    est, tru = _score_files(tmp_path, c=0.5, flags=fl)
    # a NaN in the middle of the estimate
    text = est.read_text().splitlines()
    parts = text[1 + 500].split(",")
    parts[1] = "nan"
    text[1 + 500] = ",".join(parts)
    est.write_text("\n".join(text) + "\n")
    tab = score(est, tru)
    assert (tab.n_warmup, tab.n_nan, tab.n_used, tab.n_interior) == (5, 1, NT - 6, 1)
    rows = {r.name: r for r in tab.rows}
    # zeroing one interior row in both signals keeps E = c C bin by bin: still 1/3
    assert rows["F"].fde_full == pytest.approx(1 / 3, abs=1e-9)


def test_score_skip_leaves_out_the_start(tmp_path, capsys):
    """--skip S: rows before time[0] + S are left out and counted (the estimator's start-up).
    A start-up error on the first 100 rows (F estimate + 50) is gone with --skip 100 DT;
    the rest is the scaled copy, NRMSE |c - 1| = 0.5 on whole periods (analytic)."""
    est, tru = _score_files(tmp_path, c=0.5)
    text = est.read_text().splitlines()
    for i in range(100):
        parts = text[1 + i].split(",")
        parts[1] = repr(float(parts[1]) + 50.0)
        text[1 + i] = ",".join(parts)
    est.write_text("\n".join(text) + "\n")
    assert {r.name: r for r in score(est, tru).rows}["F"].nrmse > 5.0
    tab = score(est, tru, skip=100 * DT)
    assert (tab.n_start, tab.n_used, tab.n_warmup) == (100, NT - 100, 0)
    assert {r.name: r for r in tab.rows}["F"].nrmse == pytest.approx(0.5, rel=1e-6)
    assert "100 outside the window (--skip / --until)" in tab.format()
    assert main([str(est), str(tru), "--skip", str(100 * DT)]) == 0
    assert "100 outside the window" in capsys.readouterr().out
    with pytest.raises(ScoreError, match="skip"):
        score(est, tru, skip=-1.0)
    # --until S: only the first S seconds; the start-up rows alone (NRMSE over them: the
    # +50 offset dominates) against the window after them (the scaled copy's 0.5)
    head = score(est, tru, until=100 * DT)
    assert (head.n_used, head.n_start) == (100, NT - 100)
    assert {r.name: r for r in head.rows}["F"].nrmse > 5.0
    mid = score(est, tru, skip=100 * DT, until=300 * DT)
    assert mid.n_used == 200
    assert main([str(est), str(tru), "--until", str(100 * DT), "--json"]) == 0
    assert '"n_used": 100' in capsys.readouterr().out
    with pytest.raises(ScoreError, match="until"):
        score(est, tru, skip=0.1, until=0.05)


def test_score_warmup_scores_the_flagged_rows(tmp_path):
    """--warmup: rows flagged warm-up are scored too (the std's honesty during start-up);
    without it they are left out and counted."""
    fl = np.zeros(NT)
    fl[:5] = 2        # warm-up (bit 1)
    est, tru = _score_files(tmp_path, c=1.0, flags=fl)
    off, on = score(est, tru), score(est, tru, warmup=True)
    assert (off.n_warmup, on.n_warmup) == (5, 0)
    assert on.n_used == off.n_used + 5 == NT


def test_score_truth_on_finer_grid(tmp_path):
    # truth at 4x the rate: rows picked at the estimate times -> exact comparison
    est, tru = _score_files(tmp_path, c=1.0, truth_sub=4)
    tab = score(est, tru)
    assert all(r.fde_full == pytest.approx(0.0, abs=1e-9) for r in tab.rows)


def test_score_errors_name_file_and_column(tmp_path):
    est, tru = _score_files(tmp_path)
    txt = tru.read_text().replace("time,u,F,extra", "time,u,G,extra")
    bad = tmp_path / "bad_truth.csv"
    bad.write_text(txt)
    with pytest.raises(ScoreError, match=r"bad_truth.csv: column 'F' is missing"):
        score(est, bad)
    # shifted truth times: no row at the estimate times
    names = ["time", "u", "F"]
    t = np.arange(NT) * DT + 0.4 * DT
    shifted = _write(tmp_path / "shifted.csv", names, [t, t, t])
    with pytest.raises(ScoreError, match=r"shifted.csv: no row at time 0 s of .*est.csv"):
        score(est, shifted)
    with pytest.raises(ScoreError, match=r"nope.csv: cannot read"):
        score(est, tmp_path / "nope.csv")
    with pytest.raises(ScoreError, match=r"est.csv: column 'X' is missing"):
        score(est, tru, columns=["X"])
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("time,F\n0,1\n0.001,2,3\n")
    with pytest.raises(ScoreError, match=r"ragged.csv: line 3 has 3 fields"):
        score(ragged, tru)


def test_score_main(tmp_path, capsys):
    est, tru = _score_files(tmp_path, c=0.5)
    assert main([str(est), str(tru), "--band", "0", "200"]) == 0
    out = capsys.readouterr().out
    assert "FDE over 0-200 Hz" in out and "0.3333" in out
    assert main([str(est), str(tru), "--columns", "F,missing"]) == 2
    assert "column 'missing' is missing" in capsys.readouterr().err
