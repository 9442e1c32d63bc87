"""One design path for the build's smoother (offline/smoother/settings.py): whether
``[estimator] method = "smoother"`` asks for it by name or the automatic choice (``"auto"``,
the default) picks it, it is scored on the calibration runs and made by the same function, so
every ``[estimator]`` key reaches the bundle either way; ``"tikhonov"`` means the Tikhonov
estimators only."""

import numpy as np
import pytest

from edge.estimator.chi2 import nis_threshold
from offline.build import build
from offline.model import load_model_file
from offline.smoother import MODEL_ERRORS, band_filters
from offline.smoother.model_check import SHAPE_MARGIN, SHAPE_TOLERANCE
from tests.helpers import strip_toml

# The paper's strip (170 x 13 x 1.2 mm aluminium) as 12 Euler-Bernoulli beams, clamped; tip
# displacement sensor and force, output at 85 mm; 1 % noise, random 5-160 Hz; two 1 s runs
# (a small model: each build takes 1-2 s); point samples (the ADS1256 chain, the default, is
# modelled by every candidate too, at the cost of converting the runs)
STRIP = strip_toml(12) + """[acquisition]
converter = "ideal"
[[boundary]]
select = { at = [0.0, 0.0, 0.0] }
[[boundary]]
select = { box = [[0.001, -0.01, -0.01], [0.2, 0.01, 0.01]] }
dofs = ["ux", "uy", "rx", "rz"]
[damping]
ratios = [[34.0, 0.01], [600.0, 0.01]]
[reduction]
method = "gmr+"
modes = 4
[[reduction.masters]]
select = { at = [0.17, 0.0, 0.0] }
dofs = ["uz"]
[[sensors]]
name = "d170"
select = { at = [0.17, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
noise = 0.01
[[forces]]
name = "F170"
select = { at = [0.17, 0.0, 0.0] }
dof = "uz"
[[outputs]]
name = "d85"
select = { at = [0.085, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
[estimator]
rate = 1000.0
[design_load]
load = { type = "random", band = [5.0, 160.0], rms = 1.0 }
duration = 1.0
seeds = 2
"""


def _build(tmp_path, lines, name="s"):
    p = tmp_path / f"{name}.toml"
    p.write_text(STRIP.replace("rate = 1000.0\n", "rate = 1000.0\n" + "".join(
        f"{k} = {v}\n" for k, v in lines.items())))
    return build(p, progress=False, limit=False, maps=False).bundle


def _both(tmp_path, lines):
    """The bundle chosen automatically (default method) and asked for by name."""
    auto = _build(tmp_path, lines, "auto")
    named = _build(tmp_path, {**lines, "method": '"smoother"'}, "named")
    # auto: every family was scored and the smoother won; by name: the smoother alone
    assert auto.method == named.method == "smoother"
    assert len(auto.meta["selection"]["candidates"]) == 4
    assert list(named.meta["selection"]["candidates"]) == ["Kalman smoother"]
    # one design path: the same settings, the same runs -> the same gains, bit for bit
    for k in ("K", "G", "A", "std", "nis_threshold", "band_threshold"):
        np.testing.assert_array_equal(auto.kf[k], named.kf[k])  # exact: one function
    return auto, named


def test_lag_is_honoured_either_way(tmp_path):
    for b in _both(tmp_path, {"lag": 7}):
        assert b.window == 8 and b.meta["estimator"]["lag"] == 7
        assert b.kf["G"].shape[0] == 8  # L + 1 smoother gains


def test_model_error_is_honoured_either_way_and_chosen_when_absent(tmp_path):
    for b in _both(tmp_path, {"model_error": 0.05}):
        assert b.meta["estimator"]["model_error"] == 0.05
        rows = b.meta["selection"]["candidates"]["Kalman smoother"]["rows"]
        assert [r["model_error"] for r in rows] == [0.05]  # the given level only
    for b in _both(tmp_path, {}):  # absent: each level designed, the runs choose
        rows = b.meta["selection"]["candidates"]["Kalman smoother"]["rows"]
        assert [r["model_error"] for r in rows] == list(MODEL_ERRORS)
        best = min(rows, key=lambda r: r["score"])
        assert b.meta["estimator"]["model_error"] == best["model_error"]


def test_check_window_is_honoured_either_way(tmp_path):
    for b in _both(tmp_path, {"check_window_s": 2.5}):
        assert b.meta["estimator"]["check_window_s"] == pytest.approx(2.5, abs=1e-12)
        assert int(b.kf["nis_window"]) == 2500  # 2.5 s at 1 kHz


def test_check_false_alarm_is_honoured_either_way(tmp_path):
    for b in _both(tmp_path, {"check_false_alarm": 0.2}):
        e = b.meta["estimator"]
        assert e["check_false_alarm"] == 0.2
        # the band-pair thresholds are the chi-square quantiles of this false-alarm rate
        # (offline/smoother/model_check.py), and the low NIS threshold its lower quantile
        W = int(b.kf["nis_window"])
        # then the load-shape pair, its thresholds widened by the levels' half step
        lo, mid, hi = e["check_shape_hz"]
        bands = [*e["check_bands_hz"], (lo, mid), (mid, hi)]
        thr = band_filters(bands, b.rate, W, 1, 0.2)[2]
        margin = e.get("check_shape_margin", SHAPE_MARGIN)  # with levels: their tilt
        assert 1.0 <= margin <= SHAPE_MARGIN
        thr[-2:] = np.maximum(thr[-2:] * margin, SHAPE_TOLERANCE)
        np.testing.assert_allclose(b.kf["band_threshold"], thr, rtol=1e-12)
        assert float(b.kf["nis_threshold_low"]) == pytest.approx(
            min(nis_threshold(W, 0.8), W / 1.25), rel=1e-12)


def test_max_delay_and_window_set_the_lag_when_it_is_absent(tmp_path):
    # no lag: the longest within max_delay (10 ms = 10 samples), or window - 1
    for b in _both(tmp_path, {"max_delay": 0.01}):
        assert b.meta["estimator"]["lag"] == 10
    for b in _both(tmp_path, {"window": 5}):
        assert b.meta["estimator"]["lag"] == 4


def test_tikhonov_means_tikhonov_and_the_default_is_auto(tmp_path):
    b = _build(tmp_path, {"method": '"tikhonov"'}, "tik")
    assert b.method == "tikhonov" and b.alpha > 0
    assert "Kalman smoother" not in b.meta["selection"]["candidates"]
    assert len(b.meta["selection"]["candidates"]) == 3
    p = tmp_path / "default.toml"
    p.write_text(STRIP)
    assert load_model_file(p).estimator.method == "auto"
    assert load_model_file(p).estimator.model_error is None
