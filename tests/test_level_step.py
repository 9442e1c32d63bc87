"""The level tracker's rules where the two statistics are weak or misleading
(edge/estimator/load_level.py): a lag-1 correlation no load and noise give, a row whose
correlation falls with the load, a load between two grid levels, a step in the NIS, the
noise a move sets from one window (replaced by the average's, or kept where it cannot), a
model's own error of the correlation (the noise kept, the level from the NIS); and,
through the public CLI, a user's frame (benchmarks/load_user/frame.toml) built with an 8 s
record: never worse than the declared-only bundle on stationary data, and its stated std
settled within 10 s of a x0.1 step down and back up."""

import math
from pathlib import Path

import numpy as np
import pytest

from edge.csvio import read_table, write_table
from edge.estimator.load_level import LevelTracker, rho_range, sampling_spread
from offline.smoother.gains import steady_gains
from offline.smoother.levels import expected_nis, innovation_stats

GRID = 10.0 ** np.arange(-1.0, 1.01, 0.25)


def _system():
    """A damped oscillator driven by a first-order force state, one displacement channel
    (as tests/test_level_statistics.py)."""
    dt, w, z, a = 1e-3, 2 * np.pi * 30.0, 0.02, 2 * np.pi * 50.0
    Ac = np.array([[0.0, w, 0.0], [-w, -2 * z * w, w], [0.0, 0.0, -a]])
    from scipy.linalg import expm
    A = expm(Ac * dt)
    Q = np.diag([0.0, 0.0, 2 * a * dt])
    return A, np.array([[1.0, 0.0, 0.0]]), Q, np.array([[1e-2]]), \
        np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])


@pytest.fixture(scope="module")
def stats():
    """Exact ``[tq, tr, cq, cr]`` per level of GRID (absolute noise)."""
    A, H, Q, R, Cq = _system()
    K, Sinv = [], []
    for g in GRID:
        _, k, si, _, _, _, _ = steady_gains(A, H, g * g * Q, R, Cq, lag=0)
        K.append(k), Sinv.append(si)
    return innovation_stats(A, H, Q, R, K, Sinv)


def _tracker(stats):
    start = int(np.argmin(np.abs(np.log(GRID))))
    return LevelTracker(GRID, expected_nis(stats, GRID), start, every=1000, innov=stats), start


def _window(stats, a, g2, nu):
    """The exact ``(r, c)`` of a window under the gains of level ``a`` (load g2, noise nu)."""
    tq, tr, cq, cr = stats[a]
    return g2 * tq + nu * tr, g2 * cq + nu * cr


def test_a_correlation_no_load_gives_leaves_the_level_to_the_nis(stats):
    # the frame's learned model read rho 0.055 on average at its designed level, where the
    # gains allow 0.039 at most; one window of 0.105 sent the tracker to the grid's end
    tr, start = _tracker(stats)
    lo, hi = rho_range(stats)
    sd = 1.0 / math.sqrt(1000)
    r = 1.0                                   # the designed NIS: the designed level explains it
    assert tr.decide(r, (hi[start] + 3 * sd) * r) == start
    assert tr.decide(r, (lo[start] - 3 * sd) * r) == start
    assert tr.switches == 0
    # a NIS 10x the design's with such a rho: the level whose NIS row explains it
    r, _ = _window(stats, start, GRID[start + 4] ** 2, 1.0)
    b = tr.decide(r, (hi[start] + 3 * sd) * r)
    assert abs(b - (start + 4)) <= 1, b      # one grid step: the hysteresis of rule 2


def test_a_row_whose_correlation_falls_with_the_load_sends_a_large_load_up():
    # the plate's rows: rho(s2) falls from cr/tr to cq/tq; a step up read under the gains of
    # 0.18x gave rho -0.174, and the tracker went to the LOWEST level (then 0.01x <-> 0.1x)
    k = 0.1
    g2 = GRID ** 2
    # tq = 0.5 / g_a^2, tr = 0.5 (r(a, a) = 1); cq = -k / g_a^2, cr = k (rho(g_a^2) = 0)
    innov = np.column_stack([0.5 / g2, np.full(g2.size, 0.5), -k / g2, np.full(g2.size, k)])
    lo, hi = rho_range(innov)
    np.testing.assert_allclose(lo, -2 * k, rtol=1e-12)    # cq / tq
    np.testing.assert_allclose(hi, 2 * k, rtol=1e-12)     # cr / tr
    tr = LevelTracker(GRID, expected_nis(innov, GRID), 2, every=1000, innov=innov)
    r, _ = _window(innov, 2, g2[7], 1.0)                   # a load 18x the level's in power
    b = tr.decide(r, -3 * k * r)                          # beyond cq / tq: a larger load
    assert b >= 6, b


def test_a_load_between_two_levels_does_not_flip_the_level():
    # relative noise (one statistic, r(a, b) = g_b^2 / g_a^2): the declared plate's load
    # lay halfway (in log) between 0.32x and 0.56x and the tracker flipped between them
    nis = np.outer(1.0 / GRID ** 2, GRID ** 2)
    a = 4
    tr = LevelTracker(GRID, nis, a, every=1000, n_channels=3)
    h = tr.hysteresis
    assert h == pytest.approx(4 * sampling_spread(1000, 3), rel=1e-12)
    mid = 0.5 * math.log(nis[a, a + 1])                   # halfway to the level above
    for k in range(20):                                   # r either side of the midpoint
        tr.decide(math.exp(mid + (0.5 if k % 2 else -0.5) * h))
    assert tr.level == a and tr.switches == 0
    assert tr.decide(math.exp(mid + 1.5 * h)) == a + 1    # clearly nearer: moves


def test_a_step_in_the_nis_moves_the_level_with_the_noise_kept(stats):
    # the frame's stated std took 19.5 s to settle after a x0.1 step: the average of the
    # statistics kept the windows before the step for ~10 s, and at the designed gains
    # the ratio was not resolved (the outputs' std wandered 0.6-1.6x)
    tr, start = _tracker(stats)
    for _ in range(5):
        tr.decide(*_window(stats, start, 1.0, 1.0))
    assert tr.level == start and tr.noise_scale == pytest.approx(1.0, rel=1e-6)
    for _ in range(5):   # x0.1: 0.01 in power; here a level a window (measured: 4 windows)
        tr.decide(*_window(stats, tr.level, 0.01, 1.0))
    # within one grid step of 0.1 (a quarter decade), the noise where it was (+-10 %)
    assert abs(math.log10(GRID[tr.level]) + 1.0) <= 0.25 + 1e-9, GRID[tr.level]
    assert tr.noise_scale == pytest.approx(1.0, rel=0.10)
    assert abs(math.log10(tr.load_level()) + 1.0) <= 0.25, tr.load_level()



def _falling(k):
    """``[tq, tr, cq, cr]`` per level of GRID whose ``rho(s2)`` falls from ``2 k_a`` (s2 -> 0,
    the noise's end) to ``-2 k_a`` (the load's end), 0 at the level's own load, ``r(a, a) = 1``
    (``tq = 0.5 / g_a^2, tr = 0.5, cq = -k_a / g_a^2, cr = k_a``): the width of a row's range
    set per level."""
    g2 = GRID ** 2
    return np.column_stack([0.5 / g2, np.full(g2.size, 0.5), -k / g2, k])


def test_a_moves_noise_from_one_window_is_replaced_where_the_noise_dominates():
    # the zoo strip at 1/50 of its load read 0.042: a move set the noise from one window 5 %
    # low, and at the new level the averaged rho lay within its spread of the noise's end
    # (not resolved), so g^2 came from the NIS at that noise (the load's share of it 2 %)
    innov = _falling(np.where(np.arange(GRID.size) < 5, 0.05, 0.3))
    tr = LevelTracker(GRID, expected_nis(innov, GRID), 5, every=1000, innov=innov)
    g2 = 0.1 ** 2                                       # the load at the grid's lowest level
    r, c = _window(innov, 5, g2, 1.0)
    tr.decide(0.93 * r, 0.93 * c)                       # a window 7 % low: moves down
    assert tr.level < 5 and tr.noise_scale < 0.95
    for _ in range(8):
        tr.decide(*_window(innov, tr.level, g2, 1.0))
    # exact windows from then on: the noise and the load as given (2 %; the rule before
    # read 1.47x the load with the noise 0.88x)
    assert tr.noise_scale == pytest.approx(1.0, rel=0.02)
    assert tr.load_level() == pytest.approx(0.1, rel=0.02)


def test_a_window_astride_a_step_leaves_the_noise_where_the_load_dominates():
    # the frame of benchmarks/load_user: one window astride a x10 step up set the noise
    # 1.45x; at the new level its averaged rho lay beyond the load's end (its model's error
    # colours the innovations), g^2 came from the NIS at that noise, and the stated std
    # settled after 12.5 s instead of 2.5 s
    innov = _falling(np.where(np.arange(GRID.size) < 3, 0.3, 0.02))
    lo, _ = rho_range(innov)
    sd = 1.0 / math.sqrt(1000)
    a = 2
    tr = LevelTracker(GRID, expected_nis(innov, GRID), a, every=1000, innov=innov)
    for _ in range(5):
        tr.decide(*_window(innov, a, GRID[a] ** 2, 1.0))
    assert tr.noise_scale == pytest.approx(1.0, rel=1e-6)
    w1, w2 = _window(innov, a, GRID[a] ** 2, 1.0), _window(innov, a, 1.0, 1.0)
    tr.decide(0.5 * (w1[0] + w2[0]), 0.5 * (w1[1] + w2[1]))     # half before, half after
    # moved; the noise kept: where the load dominates, one window's rho does not give it
    # (its spread of log nu beyond NU_SPREAD_MAX; the rule before read 1.34x)
    assert tr.level > a and tr.noise_scale == pytest.approx(1.0, rel=1e-6)
    for _ in range(5):                  # the load x10 in power, rho 1 spread beyond its end
        r, _ = _window(innov, tr.level, 1.0, 1.0)
        tr.decide(r, (lo[tr.level] - sd) * r)
    # the noise of the averaged windows before the move, the load from the NIS at it (2 %;
    # the rule before kept 1.34x and read 0.94x the load)
    assert tr.noise_scale == pytest.approx(1.0, rel=0.02)
    assert tr.load_level() == pytest.approx(1.0, rel=0.02)


# the clamped beam of benchmarks/load_user through the ADS1256, its model learned from a 60 s
# record: kf_track_innov of its levels 0.056-1.78 (rounded to 5 digits; level 0.056's row is
# that of 0.01, the grid's lowest, so that no load below the grid reads inside it). Under its
# own load its innovations' rho read +0.01..+0.04 averaged (model error: 0 for a right model)
# where rho's slope is 0.05 per unit log s2; after a x0.1 step, -0.041..-0.047 at level 0.56
# where a right model gives -0.087 (benchmarks/honest_structures.py, 2026-12-01).
CC_GRID = 10.0 ** np.arange(-1.25, 0.26, 0.25)
CC_INNOV = np.array([[3.3731e+01, 8.9333e-01, 1.6290e+01, -5.1513e-02],
                     [1.6648e+01, 8.3352e-01, 6.1567e+00, -6.1567e-02],
                     [7.7567e+00, 7.5471e-01, 2.0463e+00, -6.4708e-02],
                     [3.3202e+00, 6.6798e-01, 6.0998e-01, -6.0998e-02],
                     [1.2964e+00, 5.9003e-01, 1.7068e-01, -5.3973e-02],
                     [4.7921e-01, 5.2079e-01, 5.1309e-02, -5.1309e-02],
                     [1.7326e-01, 4.5211e-01, 1.8761e-02, -5.9327e-02]])


def _cc_window(a, g2, bias):
    """``(r, c)`` under the gains of level ``a``: load ``g2``, the designed noise, rho off by
    ``bias`` (the model's own error)."""
    tq, tr, cq, cr = CC_INNOV[a]
    r = g2 * tq + tr
    return r, g2 * cq + cr + bias * r


def test_a_models_own_correlation_error_neither_sets_the_noise_nor_holds_the_level():
    tr = LevelTracker(CC_GRID, expected_nis(CC_INNOV, CC_GRID), 5, every=954, n_channels=4,
                      innov=CC_INNOV)
    for _ in range(6):                        # the designed load, rho +0.02 (its own error)
        tr.decide(*_cc_window(tr.level, 1.0, 0.02))
    # the load dominates the NIS (48 %): rho +0.02 read as a ratio put the noise at 0.81 and
    # the load at 1.20 (the rule before); the noise is kept, the load read from the NIS
    assert tr.level == 5
    assert tr.noise_scale == pytest.approx(1.0, rel=1e-9)
    assert tr.load_level() == pytest.approx(1.0, rel=1e-6)
    r, _ = _cc_window(tr.level, 0.01, 0.0)    # x0.1: a window of rho -0.069 (as measured)
    tr.decide(r, -0.069 * r)
    # a step in the NIS: its level at the designed noise, the highest that explains it
    # (0.32; the rule before moved on that window's rho to 0.56 and read a power of 0.33)
    assert tr.level == 3 and tr.stated_power == pytest.approx(0.1, rel=1e-9)
    for _ in range(3):                        # rho pulled towards 0 by 0.04
        tr.decide(*_cc_window(tr.level, 0.01, 0.04))
    # the NIS of two averaged windows takes the gains to the load's level (0.1), whose rho
    # at the tracked ratio keeps them there (the rule before kept level 0.56 while rho
    # stayed within its 4 spreads: power 0.093 for 0.01, the beam's std settled after
    # 14-15 s); the power within a factor 2 of the load's (measured 0.0154: rho's error
    # read at the right level)
    assert tr.level == 1
    assert 0.005 <= tr.stated_power <= 0.02


# --------------------------------------------------------------------------- the frame
FRAME = Path(__file__).parents[1] / "benchmarks" / "load_user" / "frame.toml"


def _cli(argv, main):
    assert main([str(a) for a in argv]) == 0, argv


def _load_csv(path, seconds, rate, seed, factor=None):
    """A user's force history: band-limited (2-100 Hz) random, 6.7 N RMS (the frame's
    declaration says 200 N), 10 points per sample, from 1 s before the record; times
    ``factor(t)`` (record time) when given."""
    fine = 1.0 / (10 * rate)
    t = np.arange(int(round((seconds + 1.0) / fine)) + 1) * fine
    X = np.fft.rfft(np.random.default_rng(seed).standard_normal(t.size))
    f = np.fft.rfftfreq(t.size, fine)
    X[(f < 2.0) | (f > 100.0)] = 0.0
    F = np.fft.irfft(X, t.size)
    F *= 200.0 / 30 / np.std(F)
    if factor is not None:
        F *= factor(t - 1.0)
    write_table(path, t, F[:, None], ["Fx"])


def _record(d, name, seconds, seed, factor=None):
    """``simulate --load csv`` of the frame without noise, then the sensors' ``noise_std``
    (seeded) added: the measurement CSV's path and the truth's."""
    from offline.cli import main as offline_main
    _load_csv(d / f"{name}_load.csv", seconds, 500.0, seed, factor)
    _cli(["simulate", FRAME, "--load", "csv", "--csv", d / f"{name}_load.csv", "--duration",
          seconds, "--warmup", 1.0, "--noise", 0.0, "--seed", seed, "-o", d / name,
          "--quiet"], offline_main)
    t, Y, cols = read_table(d / f"{name}_measurement.csv")
    sd = np.array([0.002, 0.002, 1e-7])                 # frame.toml: noise_std a1x a2x v2z
    Y = Y + sd * np.random.default_rng(seed + 7).standard_normal(Y.shape)
    write_table(d / f"{name}.csv", t, Y, cols)
    return d / f"{name}.csv", d / f"{name}_truth.csv"


@pytest.fixture(scope="module")
def frame(tmp_path_factory):
    """The frame built without a record and with an 8 s one (seed 11)."""
    from offline.cli import main as offline_main
    d = tmp_path_factory.mktemp("frame")
    run, _ = _record(d, "run8", 8.0, 11)
    for name, extra in (("declared", []), ("rec8", ["--record", run])):
        _cli(["build", FRAME, "-o", d / f"{name}.npz", "--quiet", *extra], offline_main)
    return d


def _replay(d, meas, bundle, out):
    from edge.cli import main as edge_main
    _cli(["replay", meas, "--bundle", d / f"{bundle}.npz", "-o", d / out], edge_main)
    return read_table(d / out)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the frame's two builds (fixture) ran over 600 s at load 7-8
def test_the_frames_8_s_record_bundle_is_never_worse_on_stationary_data(frame):
    meas, truth = _record(frame, "test", 9.0, 23)
    _, T, tc = read_table(truth)
    err = {}
    for name in ("declared", "rec8"):
        t, E, cols = _replay(frame, meas, name, f"est_{name}.csv")
        k = t >= 1.0
        idx = np.rint(t[k] * 500).astype(int)
        err[name] = {n: float(np.sqrt(np.mean((E[k, cols.index(n)] - T[idx, tc.index(n)])
                                              ** 2)) / np.std(T[idx, tc.index(n)]))
                     for n in ("Fx", "d1x", "a1z")}
    # benchmarks/honest_structures.py before the fix: a1z 23.9 with the record against 2.49
    # declared (the tracker at 3.2x the load); a record bundle at most 5 % worse per target
    for n in err["rec8"]:
        assert err["rec8"][n] <= 1.05 * err["declared"][n], (n, err)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the frame's two builds (fixture) ran over 600 s at load 7-8
def test_the_frames_stated_std_stays_put_on_stationary_data(frame):
    # the force's stated std within 10 % of its median after the first decisions (2 s); it
    # wandered 0.68-1.28x its median while GMR+ reduced the frame (an xfail until the frame's
    # "auto" reduction took cb+r, docs/reduction.md "Which method")
    meas, _ = _record(frame, "test2", 9.0, 23)
    t, E, cols = _replay(frame, meas, "rec8", "est_rec8_2.csv")
    std = E[t >= 2.0, cols.index("Fx_std")]
    assert np.max(np.abs(std / np.median(std) - 1.0)) <= 0.10, (std.min(), std.max())


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the frame's two builds (fixture) ran over 600 s at load 7-8
def test_the_frames_stated_std_follows_a_step_within_10_s(frame):
    # x1 for 10 s, x0.1 for 12 s, x1 for 10 s; benchmarks/honest_structures.py measured 19.5 s
    # down before the fix (the 1 s running median of the stated std within 10 % of the
    # segment's last 3 s for good)
    steps = ((0.0, 1.0), (10.0, 0.1), (22.0, 1.0), (32.0, None))

    def factor(t):
        return np.select([t < 10.0, t < 22.0], [1.0, 0.1], 1.0)
    meas, _ = _record(frame, "step", 32.0, 31, factor)
    t, E, cols = _replay(frame, meas, "rec8", "est_step.csv")
    for n in ("Fx", "d1x", "a1z"):
        s = E[:, cols.index(f"{n}_std")]
        med = np.array([np.median(s[max(0, i - 499):i + 1]) for i in range(s.size)])
        for (t0, _), (t1, _) in zip(steps[1:-1], steps[2:]):
            seg = (t >= t0) & (t < t1)
            level = np.median(s[(t >= t1 - 3.0) & (t < t1)])
            bad = seg & (np.abs(med / level - 1.0) > 0.10)
            settle = float(t[bad][-1] - t0) if bad.any() else 0.0
            assert settle <= 10.0, (n, t0, settle)
