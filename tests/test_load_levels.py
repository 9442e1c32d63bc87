"""The device follows the load's level (kf_level_*, edge/estimator/smoother.py LevelTracker)
and the two-sided model check (innovations too small as well as too large)."""

from pathlib import Path

import numpy as np
import pytest

from edge.estimator import Estimator
from edge.flags import FLAG_MODEL_SUSPECT
from offline.build import build
from offline.load.zoo import STRIP, ZOO, record
from offline.model import build_fe_model, load_model_file
from offline.smoother.levels import level_arrays


@pytest.fixture(scope="module")
def absolute(tmp_path_factory):
    """The zoo strip with the laser's noise given absolutely (1.4e-4 m: 1 % of the response
    to the declared 1 N), built without a record."""
    d = tmp_path_factory.mktemp("levels")
    path = d / "abs.toml"
    path.write_text(STRIP.replace("noise = 0.01", "noise_std = 1.4e-4"))
    spec = load_model_file(path)
    return spec, build_fe_model(spec, progress=False), build(path, progress=False,
                                                              maps=False).bundle


def test_level_arrays_at_the_designed_level_are_the_bundle_gains(absolute):
    spec, model, b = absolute
    kf = b.kf
    i = int(np.argmin(np.abs(np.log(kf["level_grid"]))))
    # the same Riccati solution: equal to round-off (1e-9 of the largest entry)
    for name in ("K", "G", "Sinv", "std", "Wt"):
        a, ref = kf[f"level_{name}"][i], kf[name]
        assert np.max(np.abs(a - ref)) <= 1e-9 * np.max(np.abs(ref)), name
    # r(a, a) = tr(S^-1 S) / nch = 1 exactly
    np.testing.assert_allclose(np.diag(kf["level_nis"]), 1.0, atol=1e-9)
    # scaling load and noise together (a relative noise) leaves the gains alone and the std
    # proportional to the level (closed form of the Riccati equation under Q, R -> g^2 Q,
    # g^2 R), 1e-6
    from offline.smoother import ForceModel
    fms = [ForceModel.from_dict(m) for m in b.meta["estimator"]["force_models"]]
    lv = level_arrays(b, fms, b.window - 1, 0.0, grid=[0.1, 1.0, 10.0], scale_noise=True)
    np.testing.assert_allclose(lv["level_K"][0], lv["level_K"][2], rtol=1e-6,
                               atol=1e-6 * np.max(np.abs(lv["level_K"][1])))
    np.testing.assert_allclose(lv["level_std"][2], 100 * lv["level_std"][0], rtol=1e-6)


def test_the_stated_std_follows_a_load_that_steps_20x_down_and_up(absolute):
    # 10 s at the declared 1 N, 10 s at 0.05 N, 10 s at 1 N; the noise is the sensor's.
    # Issue 23: sigma follows within 10 s, 1-sigma coverage 60-76 % over the whole record
    # (here: over the record after 1 s, 58-78 % for the sampling spread of 29 s)
    spec, model, b = absolute
    rate = int(spec.estimator.rate)
    g = np.concatenate([np.ones(10 * rate), np.full(10 * rate, 0.05), np.ones(10 * rate)])
    Y, F, Z = record(spec, model, ZOO["ideal"], 30.0, 41, noise=None, levels=g,
                     engine="modal")
    est = Estimator(b)
    nb = rate // 2
    Fe, Ze, std = [], [], []
    Fb, Zb, fl = np.zeros((nb, 1)), np.zeros((nb, 1)), np.zeros(nb, np.uint8)
    levels = []
    for k in range(0, Y.shape[0] - nb + 1, nb):
        est.process(np.ascontiguousarray(Y[k:k + nb]), Fb, Zb, fl)
        Fe.append(Fb.copy())
        Ze.append(Zb.copy())
        std.append(np.repeat(est.std[None], nb, axis=0))
        levels.append(est.model_check()["load_level"])
    d = est.delay
    E = np.hstack([np.vstack(Fe), np.vstack(Ze)])[d:]
    S = np.vstack(std)[d:]
    T = np.hstack([F, Z])[: E.shape[0]]
    s0 = rate
    cov = np.mean(np.abs(E[s0:] - T[s0:]) <= S[s0:], axis=0)
    assert np.all((cov > 0.58) & (cov < 0.78)), cov
    # the level 10 s into each part (block index 2 per second)
    assert levels[2 * 19] == pytest.approx(0.05, rel=0.5) and levels[2 * 29] == \
        pytest.approx(1.0, rel=0.5), levels


def test_replay_states_each_row_with_the_std_of_the_level_it_ran_at(absolute):
    # A user replays a record whose load steps 20x down (`vsense-edge replay`): the `_std`
    # columns must follow the device's level, not repeat the last one on every row.
    # Reference (independent of run_std's piecing): one sample at a time, the std read
    # before each; equal to the bit (same operators, same order).
    from edge.replay import run_replay

    spec, model, b = absolute
    rate = int(spec.estimator.rate)
    g = np.concatenate([np.ones(6 * rate), np.full(6 * rate, 0.05)])
    Y, _, _ = record(spec, model, ZOO["ideal"], 12.0, 43, noise=None, levels=g,
                     engine="modal")
    ref = Estimator(b)
    S_ref = []
    for k in range(Y.shape[0]):  # the std read before each sample (it changes per row in
        S_ref.append(ref.std.copy())  # the start-up, per tracker period after)
        ref.run(Y[k:k + 1])
    S_ref = np.array(S_ref)
    t = np.arange(Y.shape[0]) / rate
    t_est, _, _, _, S = run_replay(b, t, Y, [c.name for c in b.channels], with_std=True)
    d = Estimator(b).delay
    np.testing.assert_array_equal(S, S_ref[d:])
    # the stated force std 5 s into each part: the small load's is 20x smaller (the noise is
    # the sensor's, so not exactly: below a quarter)
    i1, i2 = np.searchsorted(t_est, [5.0, 11.0])
    assert S[i2, 0] < 0.25 * S[i1, 0], (S[i1], S[i2])


def test_too_small_innovations_are_flagged_with_their_reason(absolute):
    spec, model, b = absolute
    # matched: the declared load and noise; at most 5 % of the estimates flagged (issue 23)
    Y, _, _ = record(spec, model, ZOO["ideal"], 20.0, 51, noise=None, engine="modal")
    est = Estimator(b, track_level=False)
    _, _, flags = est.run(Y)
    assert np.mean(flags & FLAG_MODEL_SUSPECT > 0) <= 0.05
    # the load 50x below its declaration, the level not tracked: innovations too small
    Y, _, _ = record(spec, model, ZOO["level/50"], 12.0, 52, noise=None, engine="modal")
    est = Estimator(b, track_level=False)
    _, _, flags = est.run(Y)
    mc = est.model_check()
    assert mc["suspect"] and any("too small" in r for r in mc["reasons"])
    assert np.all(flags[-100:] & FLAG_MODEL_SUSPECT)
    # tracked, the level is found and nothing is flagged at the end
    est = Estimator(b)
    _, _, flags = est.run(Y)
    # the two statistics (kf_track_*) give the load's RMS itself, not a grid level
    assert est.model_check()["load_level"] == pytest.approx(0.02, rel=0.5)


def _cli(argv, main):
    assert main([str(a) for a in argv]) == 0, argv


@pytest.mark.slow
def test_a_record_bundle_of_the_readme_beam_stays_at_its_level(tmp_path):
    # Issue #40, item 1: examples/my_beam.toml as shipped, built with --record of a 20 s
    # `simulate` record and replayed on an 8 s test record, had a force error 6.9x that of
    # the bundle built without the record; its level tracker switched every second (the
    # approximate expected-NIS table; a test record whose noise is 0.66x the learned one,
    # `simulate --noise` being relative to each record's signal). Through the public CLI.
    from edge.cli import main as edge_main
    from offline.cli import main as offline_main

    model = Path(__file__).parents[1] / "examples" / "my_beam.toml"
    rec, test = tmp_path / "rec", tmp_path / "test"
    _cli(["simulate", model, "--duration", 20, "--seed", 1, "--warmup", 1, "-o", rec,
          "--quiet"], offline_main)
    _cli(["simulate", model, "--duration", 8, "--seed", 2, "--warmup", 1, "-o", test,
          "--quiet"], offline_main)
    errs, stds = {}, {}
    for name, extra in (("plain", []), ("rec", ["--record", f"{rec}_measurement.csv"])):
        b = tmp_path / f"{name}.npz"
        _cli(["build", model, "-o", b, *extra], offline_main)
        out = tmp_path / f"{name}.csv"
        _cli(["replay", "--bundle", b, f"{test}_measurement.csv", "-o", out], edge_main)
        e = np.genfromtxt(out, delimiter=",", names=True)
        t = np.genfromtxt(f"{test}_truth.csv", delimiter=",", names=True)
        n = e.size
        errs[name] = np.sqrt(np.mean((e["F07"] - t["F07"][:n]) ** 2)) / np.std(t["F07"][:n])
        stds[name] = e["F07_std"]
    # measured: 0.647 with the record, 0.687 without (0.62 / 0.64 in the run);
    # the record bundle at most 5 % worse than the declared-only one (never 6.9x)
    assert errs["rec"] <= 1.05 * errs["plain"], errs
    # stationary data: after the first decisions (2 s) the stated std stays within 10 % of
    # its median (it jumped 0.028 <-> 3.74 every second before), and covers the error
    # 1-sigma 60-76 % (issue #23's band; measured 68 %)
    t0 = 2 * 1000
    s = stds["rec"][t0:]
    assert np.max(np.abs(s / np.median(s) - 1.0)) <= 0.10, (s.min(), s.max())
    e = np.genfromtxt(tmp_path / "rec.csv", delimiter=",", names=True)
    t = np.genfromtxt(f"{test}_truth.csv", delimiter=",", names=True)
    n = e.size
    cov = np.mean(np.abs(e["F07"][t0:] - t["F07"][t0:n]) <= s)
    assert 0.60 <= cov <= 0.76, cov
