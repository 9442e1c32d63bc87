"""The first second after a start or a reset (edge/estimator/load_level.py start_windows,
LevelTracker._widen): the tracker reads short windows from the lag on; they widen the stated
std (the largest over them, the last and longest alone for the rest of the first whole
window, never below the designed one); the gains and the level the first whole window
decides from stay the designed ones. Before, the first decision came after two whole periods (the first one was
skipped), so a load 3x its declaration was stated with the declared level's std for 2 s: on
the overhang beam of an acceptance test the first second covered 42-58 %, under a resonant
load 50x its declaration 3 %."""

import numpy as np
import pytest

from edge.estimator import Estimator
from edge.estimator.load_level import LevelTracker, sampling_spread, start_windows
from offline.build import build
from offline.load.zoo import STRIP, ZOO, record
from offline.model import build_fe_model, load_model_file
from offline.smoother.levels import expected_nis

GRID = 10.0 ** np.arange(-1.0, 1.01, 0.25)


def test_start_windows_halve_down_from_the_period():
    assert start_windows(1000) == (62, 125, 250, 500)
    assert start_windows(400) == (50, 100, 200)   # 25 < the shortest window, 32 samples
    assert start_windows(20) == ()


def _table():
    """``r(a, b) = g_b^2 / g_a^2`` of a load-dominated channel (no noise): a steep row."""
    g2 = GRID ** 2
    return g2[None, :] / g2[:, None]


def test_a_start_window_widens_the_std_and_leaves_the_gains():
    start = 4  # GRID[4] = 1
    tr = LevelTracker(GRID, _table(), start, every=1000, windows=start_windows(1000))
    assert tr.every == 62 and tr.starting
    # a load 3x its declaration (r = 9): the stated level goes up, the gains' level stays
    assert tr.decide(9.0) == start
    assert tr.std_level == start + 2 and tr.load_level() == pytest.approx(3.16, rel=0.01)
    # a short window reading low (0.2) never narrows it
    assert tr.decide(0.2) == start and tr.std_level == start + 2
    # the third window's hysteresis: the period's (4 sampling spreads) times sqrt(1000 / 250)
    assert tr.every == 250
    assert tr.hysteresis == pytest.approx(4.0 * sampling_spread(1000, 1) * 2.0, rel=1e-12)
    tr.decide(9.0)
    # the last (longest) start window alone states the std until the first whole window,
    # never below the designed level
    tr.decide(0.2)
    assert tr.std_level == start
    assert not tr.starting and tr.every == 1000
    # the first whole window decides from the designed level with the whole hysteresis:
    # a right load there (r = 1) keeps it, and the stated level follows
    assert tr.decide(1.0) == start and tr.std_level == start and tr.load_level() == 1.0
    # a restart runs the start's windows again
    tr.restart(start)
    assert tr.starting and tr.every == 62


def test_two_statistics_widen_the_stated_power_until_the_first_whole_window():
    # innovation statistics [tq, tr, cq, cr] of a load-dominated level: r = g^2 tq + nu tr,
    # c = g^2 cq + nu cr (the window's mean NIS and lag-1 product at load g^2, noise nu)
    innov = np.tile([1.0, 0.05, 0.001, 0.0], (GRID.size, 1))
    tr = LevelTracker(GRID, expected_nis(innov, GRID), 4, every=1000, innov=innov,
                      windows=start_windows(1000))
    tr.decide(9.05, 0.009)  # g^2 = (9.05 - 0.05) / 1 = 9
    assert tr.stated_power == pytest.approx(9.0, rel=1e-12) and tr.load_power == 1.0
    assert tr.load_level() == pytest.approx(3.0, rel=1e-12)
    for _ in range(2):  # lower: kept
        tr.decide(1.05, 0.001)
    assert tr.stated_power == pytest.approx(9.0, rel=1e-12)
    # the last (longest) start window alone states the std until the first whole one; a
    # high one (g^2 = 4) ...
    tr.decide(4.05, 0.004)
    assert tr.stated_power == pytest.approx(4.0, rel=1e-12) and tr.level == 4
    tr.decide(1.05, 0.001)  # the first whole window (g^2 = 1): the start's power is dropped
    assert tr.start_power == 0.0 and tr.stated_power == pytest.approx(1.0, rel=1e-9)
    # ... never below the designed power (g^2 = 0.25 in the last start window)
    tr.restart(4)
    for r in (1.05, 1.05, 1.05, 0.30):
        tr.decide(r, 0.001)
    assert tr.stated_power == 1.0


@pytest.fixture(scope="module")
def strip(tmp_path_factory):
    """The zoo strip with the laser's noise given absolutely (1.4e-4 m), built without a
    record (as tests/test_load_levels.py)."""
    path = tmp_path_factory.mktemp("start") / "abs.toml"
    path.write_text(STRIP.replace("noise = 0.01", "noise_std = 1.4e-4"))
    spec = load_model_file(path)
    return spec, build_fe_model(spec, progress=False), build(path, progress=False,
                                                              maps=False).bundle


def _coverage(est, Y, T, rows):
    """1-sigma coverage per column over ``rows`` (indices of samples) of one run."""
    F, Z, _, S = est.run_std(Y)
    d = est.delay
    E = np.hstack([F, Z])[d:]
    err = np.abs(E - T[: E.shape[0]])
    return np.mean(err[rows] <= S[d:][rows], axis=0)


@pytest.mark.parametrize("factor", [3.0, 10.0])
def test_the_first_second_and_the_one_after_a_reset_cover_a_load_above_its_declaration(
        strip, factor):
    # the structure already moving (record's 1 s warm-up); the goal: a coverage of at
    # least 60 % in the first second and in the second after a forced reset. Measured
    # (force, displacement; first second, second after the reset): before 0.33 / 0.47 and
    # 0.31 / 0.46 at 3x, 0.10 / 0.17 and 0.12 / 0.19 at 10x; now 0.75 / 0.85 and
    # 0.89 / 0.95, 0.72 / 0.85 and 0.85 / 0.91.
    spec, model, b = strip
    rate = int(spec.estimator.rate)
    n = 3 * rate
    Y, F, Z = record(spec, model, ZOO["ideal"], 6.0, 61, noise=None,
                     levels=np.full(6 * rate, factor), engine="modal")
    T = np.hstack([F, Z])
    est = Estimator(b)
    first = slice(0, rate)
    cov = _coverage(est, Y[:n], T[:n], first)
    est.reset()
    again = _coverage(est, Y[n:], T[n:], first)
    assert np.all(cov >= 0.60) and np.all(again >= 0.60), (cov, again)
