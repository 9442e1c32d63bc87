"""The model check's lower NIS threshold against the tracked load levels' spacing: a load
between two levels a quarter decade apart reads a mean NIS below 1 under the nearer level's
gains (edge/estimator/load_level.py grid_nis_drop); while the level is tracked the threshold
is widened by that drop, untracked it stays the designed one."""

import math

import numpy as np
import pytest

from edge.estimator import Estimator
from edge.estimator.load_level import grid_nis_drop
from edge.flags import FLAG_MODEL_SUSPECT
from offline.build import build
from offline.load.model import LoadModel
from offline.load.zoo import STRIP, _band, record
from offline.model import build_fe_model, load_model_file
from offline.smoother.levels import LEVELS


def test_grid_nis_drop_between_two_levels():
    g = LEVELS
    # load-dominated innovations: r(a, b) = g_b^2 / g_a^2; halfway in log below level a the
    # load's power is g_(a-1) / g_a = 10^-0.25 of the level's (exact up to rounding, 1e-12)
    load = (g[None, :] / g[:, None]) ** 2
    assert grid_nis_drop(g, load) == pytest.approx(10 ** -0.25, rel=1e-12)
    # noise-dominated: the NIS does not move with the load (exactly 1)
    assert grid_nis_drop(g, np.ones((g.size, g.size))) == 1.0
    assert grid_nis_drop([1.0], [[1.0]]) == 1.0  # one level: nothing between levels


@pytest.fixture(scope="module")
def strip(tmp_path_factory):
    """The zoo strip with the laser's noise given absolutely (tests/test_load_levels.py)."""
    path = tmp_path_factory.mktemp("lvthr") / "abs.toml"
    path.write_text(STRIP.replace("noise = 0.01", "noise_std = 1.4e-4"))
    spec = load_model_file(path)
    return spec, build_fe_model(spec, progress=False), build(path, progress=False,
                                                              maps=False).bundle


def test_a_load_between_two_levels_is_not_flagged_too_small(strip):
    spec, model, b = strip
    kf = b.kf
    drop = grid_nis_drop(kf["level_grid"], kf["level_nis"])
    base = float(kf["nis_threshold_low"])
    assert Estimator(b, track_level=False).op.nis_threshold_low == base
    tracked = Estimator(b)
    assert tracked.op.nis_threshold_low == pytest.approx(base * drop, rel=1e-12)
    # the declared 1 N times 10^-0.125 (0.75 N): halfway in log between the levels 0.56 and
    # 1; the tracker settles at a level, the NIS under its gains reads below the designed
    # lower threshold (measured 0.742 against 0.8; the drop of this bundle 0.58)
    Y, _, _ = record(spec, model, LoadModel([_band(16, rms=10 ** -0.125)]), 30.0, 61,
                     noise=None, engine="modal")
    _, _, flags = tracked.run(Y)
    mc = tracked.model_check()
    assert mc["ratio"] < base / mc["dof"], mc  # what the designed threshold flagged
    assert not mc["suspect"], mc
    # the last 10 s of the 30 s flagged at most 1 % (measured 0 %; the designed threshold
    # flagged every row whose 8 s window read the low NIS)
    assert np.mean(flags[-10000:] & FLAG_MODEL_SUSPECT > 0) <= 0.01
    # the tracked level within a grid step of the load (two statistics: measured 0.744)
    assert abs(math.log10(mc["load_level"]) + 0.125) <= 0.25, mc
