"""The model check's load-shape pair (``offline/smoother/model_check.py``): a load of another
shape than the model's is flagged, through the public command line, and a load of the
model's shape is not."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edge.bundle import Bundle
from edge.csvio import read_table
from edge.estimator.band_pairs import SHAPE_REASON
from edge.flags import FLAG_MODEL_SUSPECT
from offline.forcing.force_model import ForceModel
from offline.load.model import LoadModel
from offline.load.zoo import STRIP
from offline.smoother.model_check import (SHAPE_MARGIN, SHAPE_MIN_SPAN, SHAPE_TOLERANCE,
                                          band_filters, shape_pair)

BIN = Path(sys.executable).parent


def cli(*args):
    p = subprocess.run([str(BIN / args[0]), *map(str, args[1:])], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout, p.stderr


def test_the_pair_splits_the_load_band_at_its_geometric_centre():
    fms = [ForceModel(band=(5.0, 160.0)), ForceModel(band=(2.0, 40.0))]
    (lo, mid), (mid2, hi) = shape_pair(fms, 1000.0)
    # the lowest lower corner and the highest upper one: 2-160 Hz, centre sqrt(320)
    assert (lo, hi) == (2.0, 160.0) and mid == mid2 == pytest.approx(np.sqrt(320.0), rel=1e-12)
    # capped at 0.4 of the rate (as the resonance pairs are): 2-100 Hz at 250 rows/s
    assert shape_pair(fms, 250.0)[1][1] == pytest.approx(100.0, rel=1e-12)
    # a band narrower than SHAPE_MIN_SPAN, or no force model: no pair
    assert shape_pair([ForceModel(band=(10.0, 10.0 * SHAPE_MIN_SPAN * 0.99))], 1000.0) == []
    assert shape_pair([], 1000.0) == []


@pytest.mark.slow  # one smoother build of the strip (80 s at load ~4) and three replays
def test_a_load_lower_in_the_band_than_declared_is_flagged_and_a_matched_one_is_not(tmp_path):
    """The strip declared random 5-160 Hz (its smoother's force model rolls off at second
    order around that band), the check's window 2 s. A load of 5-25 Hz at the declared RMS
    reads a ratio 4.3 of the halves' innovation powers (5-28.3 Hz against 28.3-160 Hz;
    measured 2026-12-01), far beyond the threshold (SHAPE_TOLERANCE 1.5: the chi-square
    statistics' 1.3 are lower, and the noise is relative, so a level half a step off does not
    tilt the pair): every row from the first full window on is flagged and the
    replay names the reason. A load of the declared band (``simulate``'s own, ideal edges
    against the model's skirts) is not flagged (its ratio per 2 s window 0.95-1.36)."""
    path = tmp_path / "strip.toml"
    path.write_text(STRIP.replace(
        "[estimator]\n", "[estimator]\nmethod = \"smoother\"\ncheck_window_s = 2.0\n"))
    cli("vsense-offline", "build", path, "-o", tmp_path / "b.npz", "--quiet")
    b = Bundle.load(tmp_path / "b.npz")
    lo, mid, hi = b.meta["estimator"]["check_shape_hz"]
    assert (lo, hi) == (5.0, 160.0)
    np.testing.assert_allclose(b.kf["band_hz"][-2:], [[lo, mid], [mid, hi]], rtol=1e-12)
    # the noise is declared relative (it scales with the level): no tilt, no margin
    e = b.meta["estimator"]
    assert e["load_levels_scale_noise"] and e["check_shape_margin"] == 1.0
    stat = band_filters(b.kf["band_hz"], b.rate, int(b.kf["nis_window"]), 1,
                        e["check_false_alarm"])[2]
    np.testing.assert_allclose(b.kf["band_threshold"][:-2], stat[:-2], rtol=1e-12)
    np.testing.assert_allclose(b.kf["band_threshold"][-2:],
                               np.maximum(stat[-2:], SHAPE_TOLERANCE), rtol=1e-12)
    fs = 8000.0
    t = np.arange(int(8 * fs) + 1) / fs
    f = LoadModel([ForceModel(band=(5.0, 25.0), rms=1.0)]).sample(t, 5)[:, 0]
    np.savetxt(tmp_path / "low.csv", np.column_stack([t, f]), delimiter=",",
               header="time,F110", comments="")
    cli("vsense-offline", "simulate", path, "--load", "csv", "--csv", tmp_path / "low.csv",
        "--warmup", 1, "--duration", 6, "--seed", 3, "--noise", 0.01, "-o", tmp_path / "low",
        "--quiet")
    cli("vsense-offline", "simulate", path, "--warmup", 1, "--duration", 6, "--seed", 4,
        "--noise", 0.01, "-o", tmp_path / "same", "--quiet")
    for name, flagged in (("low", True), ("same", False)):
        _, err = cli("vsense-edge", "replay", tmp_path / f"{name}_measurement.csv",
                     "--bundle", tmp_path / "b.npz", "-o", tmp_path / f"e_{name}.csv")
        te, E, cols = read_table(tmp_path / f"e_{name}.csv")
        flags = E[:, cols.index("flags")].astype(int)
        late = te >= 2.1  # the window (2 s) full, the delay (20 ms) and a margin past it
        suspect = (flags & FLAG_MODEL_SUSPECT) != 0
        assert (SHAPE_REASON in err) == flagged, err
        if flagged:
            assert "more power low in the band" in err
            assert np.all(suspect[late])
        else:
            assert not np.any(suspect)


def _toy(seed=3, n=6, nch=2):
    """A stable random model and its Kalman predictor's gains at load powers 1 and 4."""
    linalg = pytest.importorskip("scipy.linalg")
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= 0.9 / np.max(np.abs(np.linalg.eigvals(A)))
    H = rng.standard_normal((nch, n))
    B = rng.standard_normal((n, 2))
    Q, R = B @ B.T, np.diag([0.3, 0.5])
    K, Sinv = [], []
    for g2 in (1.0, 4.0):
        P = linalg.solve_discrete_are(A.T, H.T, g2 * Q, R)
        S = H @ P @ H.T + R
        K.append(P @ H.T @ np.linalg.inv(S))      # x_k|k = x_k|k-1 + K e_k
        Sinv.append(np.linalg.inv(S))
    return A, H, Q, R, K, Sinv


def test_band_power_parts_are_one_for_a_right_model_and_the_nis_for_an_all_pass():
    """Two identities of :func:`band_power_parts`: (1) the innovations of the optimal filter
    for its own load are white, so any band's power over its gain is 1 (to 1e-9: the sums
    run until the filter's autocorrelation has decayed to 1e-9); (2) through an all-pass
    filter the parts are the NIS parts of ``innovation_stats`` (the same formula at lag 0,
    to round-off)."""
    from offline.smoother.error import error_covariances
    from offline.smoother.levels import innovation_stats
    from offline.smoother.model_check import band_filters, band_power_parts
    A, H, Q, R, K, Sinv = _toy()
    covs = error_covariances(A, H, Q, R, K)
    ba = band_filters([(0.02, 0.1), (0.1, 0.4)], 1.0, 1000, 2, 0.01)[0]
    for i, g2 in enumerate((1.0, 4.0)):
        for b in ba:
            q, r = band_power_parts(covs, H, R, Sinv, b)[i]
            assert g2 * q + r == pytest.approx(1.0, abs=1e-9)
    allpass = np.array([1.0, 0.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(band_power_parts(covs, H, R, Sinv, allpass),
                               innovation_stats(A, H, Q, R, K, Sinv, covs)[:, :2],
                               rtol=1e-12, atol=1e-14)


def test_the_margin_is_the_half_step_where_one_half_is_load_and_the_other_noise():
    """``shape_margin``: a lower half carrying only load power and an upper half only noise
    tilt by the power ratio itself, half a quarter-decade step: 10^0.25 = SHAPE_MARGIN; two
    halves of the same mixture do not tilt (1)."""
    from offline.smoother.model_check import shape_margin
    grid = 10.0 ** np.array([-0.25, 0.0, 0.25])
    lo, hi = np.array([[1.0, 0.0]] * 3), np.array([[0.0, 1.0]] * 3)
    assert shape_margin(grid, lo, hi) == pytest.approx(SHAPE_MARGIN, rel=1e-12)
    assert shape_margin(grid, lo + hi, lo + hi) == pytest.approx(1.0, abs=1e-12)
