"""``vsense-offline fatigue`` (offline/fatigue.py): the device's count of a CSV column, the
damage against fatpack's count with the same curve, the interval from ``<name>_std``, the
figure, and errors that name the file and column (exit 2)."""

from __future__ import annotations

import json

import fatpack
import numpy as np
import pytest
from scipy.signal import butter, lfilter, sosfilt

from edge.csvio import write_table
from edge.fatigue import curve, miner_damage
from edge.fatigue import reference as twin
from edge.fatigue.sn_curve import SNCurve
from offline.cli import main
from offline.fatigue import turning_point_k
from tests.fatigue_signals import record
from tests.helpers import ClosedPipe

RATE = 1000.0


def _csv(tmp_path, y, std=None, name="root_stress"):
    t = np.arange(len(y)) / RATE
    cols, names = [y], [name]
    if std is not None:
        cols.append(std)
        names.append(f"{name}_std")
    p = tmp_path / "est.csv"
    write_table(p, t, np.column_stack(cols), names)
    return p


def _fatpack_damage(y, sn, scale):
    """fatpack's cycles of the whole record plus its residue as half cycles (ASTM E1049
    5.4.4), Miner sum with the same curve."""
    cyc, res = fatpack.find_rainflow_cycles(twin.reversals(y[np.isfinite(y)]))
    r = np.concatenate((np.abs(cyc[:, 1] - cyc[:, 0]), np.abs(np.diff(res))))
    w = np.concatenate((np.ones(len(cyc)), np.full(len(res) - 1, 0.5)))
    return miner_damage(r, w, sn, scale)


def test_fatigue_command_counts_like_fatpack_and_brackets_the_truth(tmp_path, capsys):
    # truth: a stress history in Pa (bursts, level changes), 100 s at 1 kHz
    truth = 1e6 * record(100_000, seed=71, gaps=False)
    # the estimate: truth plus a smooth error (AR(1), 20 ms) of std 0.5 MPa, stated as std
    rng = np.random.default_rng(72)
    e = lfilter([1.0], [1.0, -0.95], rng.standard_normal(len(truth)))
    sigma = 0.5e6
    est = truth + sigma * e / np.std(e)
    p = _csv(tmp_path, est, np.full(len(est), sigma))
    out = tmp_path / "report"
    assert main(["fatigue", str(p), "--column", "root_stress", "--curve", "EN-71", "--unit",
                 "Pa", "-o", str(out)]) == 0
    assert "damage interval" in capsys.readouterr().out
    s = json.loads((out / "fatigue.json").read_text())
    assert (out / "fatigue.png").stat().st_size > 10_000
    sn = curve("EN-71")
    # the same count as fatpack's: float sums in another order, rtol 1e-9
    np.testing.assert_allclose(s["damage_with_residue"], _fatpack_damage(est, sn, 1e-6),
                               rtol=1e-9)
    assert s["damage_with_residue"] > 0 and s["cycles"] > 1000
    # the truth's damage lies in the stated interval
    d_true = _fatpack_damage(truth, sn, 1e-6)
    lo, hi = s["damage_interval"]
    assert lo <= d_true <= hi, (lo, d_true, hi)
    # rate: damage / 100 s
    np.testing.assert_allclose(s["damage_rate_per_s"], s["damage_with_residue"] / 100.0,
                               rtol=1e-12)


def test_strain_unit_equals_stress(tmp_path):
    y = record(20_000, seed=73, gaps=True)          # MPa-sized, with gaps
    E = 210e9
    p1 = _csv(tmp_path, y)
    assert main(["fatigue", str(p1), "--column", "root_stress", "--curve", "DNV-D-air",
                 "-o", str(tmp_path / "a")]) == 0
    p2 = _csv(tmp_path, y * 1e6 / E)                # the same history as strain
    assert main(["fatigue", str(p2), "--column", "root_stress", "--curve", "DNV-D-air",
                 "--unit", "strain", "--E", str(E), "-o", str(tmp_path / "b")]) == 0
    a = json.loads((tmp_path / "a" / "fatigue.json").read_text())
    b = json.loads((tmp_path / "b" / "fatigue.json").read_text())
    # y * 1e6 / E * E * 1e-6 differs from y by rounding only: rtol 1e-9
    np.testing.assert_allclose(b["damage"], a["damage"], rtol=1e-9)
    assert a["gaps"] > 0 and a["damage_interval"] is None


@pytest.mark.parametrize("args,needle", [
    (["--column", "nope", "--curve", "EN-71"], "no column 'nope'"),
    (["--column", "root_stress", "--curve", "EN-72"], "unknown S-N curve"),
    (["--column", "root_stress", "--curve", "EN-71", "--unit", "strain"], "needs --E"),
    (["--column", "root_stress", "--curve", "m1=5,S_ref=71"], "missing 'N_ref'"),
    (["--column", "root_stress", "--curve", "m1=five,S_ref=71,N_ref=2e6"], "not a number"),
    (["--column", "root_stress", "--curve", "m=5,S_ref=71,N_ref=2e6"], "unknown keys ['m']"),
])
def test_errors_name_file_and_column(tmp_path, capsys, args, needle):
    p = _csv(tmp_path, record(2000, seed=74, gaps=False))
    assert main(["fatigue", str(p), *args, "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert needle in err
    if "column" in needle:
        assert str(p) in err and "root_stress" in err


def test_missing_or_broken_csv_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("time,x\n0,1\n0.001,abc\n")
    for f in (tmp_path / "none.csv", bad):
        assert main(["fatigue", str(f), "--column", "x", "--curve", "EN-71", "-o",
                     str(tmp_path / "o")]) == 2
        assert str(f) in capsys.readouterr().err


@pytest.mark.parametrize("m", [3.0, 5.0])
def test_user_curve_single_slope(tmp_path, m):
    # a one-slope curve N = 2e6 (71 / S)^m without knee or cut-off: D = sum n S^m / (2e6 71^m)
    y = record(50_000, seed=75, gaps=False)          # MPa-sized bursts and level changes
    p = _csv(tmp_path, y)
    out = tmp_path / f"m{m:g}"
    assert main(["fatigue", str(p), "--column", "root_stress", "--curve",
                 f"m1={m:g},S_ref=71,N_ref=2e6", "-o", str(out)]) == 0
    s = json.loads((out / "fatigue.json").read_text())
    # Basquin closed form over the same count: the equivalent range S_eq over the n counted
    # cycles (n = closed cycles + residue half cycles) gives D = n S_eq^m / (2e6 71^m)
    # (docs/fatigue.md); two summation orders: rtol 1e-9
    n = s["cycles"] + 0.5 * (s["residue_points"] - 1)
    np.testing.assert_allclose(s["damage_with_residue"],
                               n * s["equivalent_range_MPa"] ** m / (2e6 * 71.0 ** m),
                               rtol=1e-9)
    # a user curve, named by its text; a real record (many cycles)
    assert s["curve"].startswith("user") and s["cycles"] > 1000
    assert s["curve_source"] == "user"


def test_warmup_rows_are_gaps_and_leave_the_interval_alone(tmp_path):
    # a replay CSV: the first rows carry FLAG_WARMUP (2) with the smoother's unconverged,
    # large stated std and a poor estimate; the device counts them as gaps (docs/fatigue.md)
    truth = record(30_000, seed=76, gaps=False)     # MPa
    rng = np.random.default_rng(77)
    e = lfilter([1.0], [1.0, -0.95], rng.standard_normal(len(truth)))
    sigma, n_warm = 0.2, 100
    est = truth + sigma * e / np.std(e)
    std = np.full(len(est), sigma)
    est[:n_warm] += 40.0 * rng.standard_normal(n_warm)
    std[:n_warm] = 200.0 * sigma
    flags = np.zeros(len(est))
    flags[:n_warm] = 2.0
    t = np.arange(len(est)) / RATE
    p = tmp_path / "est.csv"
    write_table(p, t, np.column_stack([est, std, flags]),
                ["root_stress", "root_stress_std", "flags"])
    assert main(["fatigue", str(p), "--column", "root_stress", "--curve", "DNV-D-air",
                 "-o", str(tmp_path / "o")]) == 0
    s = json.loads((tmp_path / "o" / "fatigue.json").read_text())
    sn = curve("DNV-D-air")
    assert s["warmup_rows"] == n_warm and s["sigma"] == sigma
    # the count is that of the rows after the warm-up (float sums in another order: 1e-9)
    np.testing.assert_allclose(s["damage_with_residue"],
                               _fatpack_damage(est[n_warm:], sn, 1.0), rtol=1e-9)
    # the interval rests on the settled std (sigma), not the warm-up's 200 sigma: ranges
    # move by 2 x 1.96 x 0.2 = 0.78 MPa against ranges of ~10-40 MPa, so the upper end is
    # well within 2x the estimate's damage (with 200 sigma it was ~100x); it covers the truth
    lo, hi = s["damage_interval"]
    assert hi < 2.0 * s["damage_with_residue"] and lo > 0.5 * s["damage_with_residue"]
    assert lo <= _fatpack_damage(truth[n_warm:], sn, 1.0) <= hi


@pytest.mark.parametrize("m", [3.0, 5.0])
def test_interval_holds_the_cycles_the_estimate_misses(tmp_path, m):
    # the estimate sees a slow 60 MPa sine (20 cycles of 120 MPa in 20 s) and misses the
    # truth's 150-300 Hz content of std 3 MPa (a mode above what the sensors resolve), stated
    # as the std: the truth has ~4,800 cycles, most of them small ones the estimate lacks,
    # and its peaks ride on the fast error's peaks
    n = 20_000
    est = 60.0 * np.sin(2 * np.pi * np.arange(n) / RATE)
    sos = butter(4, [150.0, 300.0], btype="band", fs=RATE, output="sos")
    e = sosfilt(sos, np.random.default_rng(83).standard_normal(n))
    sigma = 3.0
    truth = est + sigma * e / np.std(e)
    p = _csv(tmp_path, est, np.full(n, sigma))
    assert main(["fatigue", str(p), "--column", "root_stress", "--curve",
                 f"m1={m:g},S_ref=71,N_ref=2e6", "-o", str(tmp_path / "o")]) == 0
    s = json.loads((tmp_path / "o" / "fatigue.json").read_text())
    sn = SNCurve.from_dict({"m1": m, "S_ref": 71.0, "N_ref": 2e6})
    d_true = _fatpack_damage(truth, sn, 1.0)
    lo, hi = s["damage_interval"]
    # the hidden cycles' bound: n / 2 cycles at most, less the counted ones (closed cycles
    # and the residue's half cycles), of range 2 x 1.96 x sigma (offline/fatigue.py)
    n_h = n / 2 - (s["cycles"] + 0.5 * (s["residue_points"] - 1))
    assert s["hidden_cycles_max"] == n_h
    # one-slope Miner sum of n_h cycles; float rounding: rtol 1e-12
    np.testing.assert_allclose(s["damage_hidden_max"],
                               n_h * (2 * 1.96 * sigma) ** m / (2e6 * 71.0 ** m), rtol=1e-12)
    # every range moved up by 2 x 1.96 sigma alone stops below the truth (fatpack's count of
    # the estimate; the truth's damage is 43 % / 68 % above the estimate's, the moved ranges
    # give 33 % / 60 %)
    cyc, res = fatpack.find_rainflow_cycles(twin.reversals(est))
    r = np.concatenate((np.abs(cyc[:, 1] - cyc[:, 0]), np.abs(np.diff(res))))
    w = np.concatenate((np.ones(len(cyc)), np.full(len(res) - 1, 0.5)))
    assert miner_damage(r + 2 * 1.96 * sigma, w, sn, 1.0) < d_true
    # with the hidden cycles and the turning points' dwell (a ~200-sample dwell at the sine's
    # peaks: k = 3.67) the interval covers the truth and stays informative: within 2x the
    # truth (measured 1.50x for m = 3, 1.39x for m = 5 at this seed)
    assert s["k_turning_max"] > 3.0
    assert lo <= d_true <= hi < 2.0 * d_true, (lo, d_true, hi)


def test_turning_point_k_counts_the_dwell():
    # a triangle wave of slope 1 per sample: up -10..10, down to -10, up to a flat top (three
    # samples of 10, merged into one by the counter), down to -9 (the last sample). Within
    # delta = 2.5 of each interior extremum lie 2 samples on each side (n_d = 5); the start
    # (-10) and the end (-9) have one side (n_d = 3); a repeated value keeps its largest k
    y = np.concatenate((np.arange(-10.0, 11.0), np.arange(9.0, -11.0, -1.0),
                        np.arange(-9.0, 10.0), [10.0, 10.0, 10.0], np.arange(9.0, -10.0, -1.0)))
    k = turning_point_k(y, 2.5)
    assert set(k) == {-10.0, 10.0, -9.0}
    # Bonferroni over n_d samples: Phi^-1(1 - 0.025 / 5) = 2.5758, Phi^-1(1 - 0.025 / 3)
    # = 2.3940 (normal tables), to 1e-4
    np.testing.assert_allclose([k[10.0], k[-10.0], k[-9.0]], [2.5758, 2.5758, 2.3940],
                               atol=1e-4)
    # a tight delta (below one step): n_d = 1, the two-sided 95 % quantile 1.96 (tables)
    np.testing.assert_allclose(turning_point_k(y, 0.5)[10.0], 1.96, atol=1e-3)


def test_rows_of_counts_the_truth_on_the_estimates_rows(tmp_path, capsys):
    # a replay stops `lag` rows before the truth's end and flags its first rows warm-up
    # (gaps to the counter); --rows-of counts the truth on the same rows (docs/fatigue.md)
    truth = record(20_000, seed=78, gaps=False)     # MPa
    n_warm, lag = 300, 20
    t = np.arange(len(truth)) / RATE
    p_truth = tmp_path / "truth.csv"
    write_table(p_truth, t, truth[:, None], ["root_stress"])
    n = len(truth) - lag
    flags = np.zeros(n)
    flags[:n_warm] = 2.0
    p_est = tmp_path / "est.csv"
    write_table(p_est, t[:n], np.column_stack([truth[:n] + 0.01, flags]),
                ["root_stress", "flags"])
    sn = curve("EN-71")
    assert main(["fatigue", str(p_truth), "--column", "root_stress", "--curve", "EN-71",
                 "--rows-of", str(p_est), "-o", str(tmp_path / "o")]) == 0
    s = json.loads((tmp_path / "o" / "fatigue.json").read_text())
    # fatpack over the truth's rows n_warm .. n (float sums in another order: 1e-9)
    np.testing.assert_allclose(s["damage_with_residue"],
                               _fatpack_damage(truth[n_warm:n], sn, 1.0), rtol=1e-9)
    assert s["rows_of_left_out"] == n_warm + lag and s["rows_of"] == str(p_est)
    assert f"on the rows {p_est} counts: {n_warm + lag} rows left out" in capsys.readouterr().out
    # without it, every truth row counts: the warm-up's cycles are in (another number)
    assert main(["fatigue", str(p_truth), "--column", "root_stress", "--curve", "EN-71",
                 "-o", str(tmp_path / "all")]) == 0
    s_all = json.loads((tmp_path / "all" / "fatigue.json").read_text())
    np.testing.assert_allclose(s_all["damage_with_residue"], _fatpack_damage(truth, sn, 1.0),
                               rtol=1e-9)
    # an estimate of another rate: its counted rows are not in the truth, exit 2 naming both
    p_other = tmp_path / "other.csv"
    write_table(p_other, np.arange(100) / 750.0, np.zeros((100, 1)), ["root_stress"])
    assert main(["fatigue", str(p_truth), "--column", "root_stress", "--curve", "EN-71",
                 "--rows-of", str(p_other), "-o", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert str(p_truth) in err and str(p_other) in err and "same time stamps" in err


def test_fatigue_into_a_closed_pipe_exits_quietly(tmp_path, monkeypatch, capsys):
    # before: "vsense-offline fatigue: error: [Errno 32] Broken pipe", exit 2
    p = _csv(tmp_path, record(2_000, seed=5))
    sink = ClosedPipe(tmp_path / "scratch")
    monkeypatch.setattr("sys.stdout", sink)
    assert main(["fatigue", str(p), "--column", "root_stress", "--curve", "EN-71",
                 "-o", str(tmp_path / "f")]) == 0
    assert capsys.readouterr().err == ""
