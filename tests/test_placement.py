"""Sensor placement (`vsense-offline place`, offline/placement): the model-file section, the
Riccati solver, the predicted errors against the build's smoother and against full-model
simulations by another integrator, the greedy search against exhaustive search, the CLI."""

import re

import numpy as np
import pytest

from offline.build import build
from offline.cli import main as offline_main
from offline.model import load_model_file
from offline.model.spec import ModelFileError
from offline.placement import exhaustive, place, placement_model
from offline.placement.replay import replay as replay_nrmse
from offline.placement.riccati import sda
from offline.placement.write import write_placed
from tests.helpers import strip_toml

# The paper's strip (170 x 13 x 1.2 mm aluminium) as 34 Euler-Bernoulli beams, clamped;
# force at 110 mm, output d60; 17 candidate positions every 10 mm, displacement (dz..) and
# acceleration (az..), 1 % noise; smoother lag 20 ms at 1 kHz, random 5-160 Hz force model,
# no model-error noise (one level: each layout one Riccati solution and one frequency sum).
# Point samples: placement does not model a measurement chain yet (with the default ADS1256
# chain the built stated std of d60 differs from the prediction by 4.4 %).
HEAD = strip_toml(34) + """[acquisition]
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
modes = 8
[[reduction.masters]]
select = { at = [0.17, 0.0, 0.0] }
dofs = ["uz"]
[[forces]]
name = "F110"
select = { at = [0.11, 0.0, 0.0] }
dof = "uz"
[[outputs]]
name = "d60"
select = { at = [0.06, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
[estimator]
rate = 1000.0
method = "smoother"
lag = 20
model_error = 0.0
[design_load]
load = { type = "random", band = [5.0, 160.0], rms = 1.0 }
duration = 2.0
"""


def candidates(kinds=("displacement", "acceleration"), n=17):
    c = "[placement]\n"
    for i in range(1, n + 1):
        x = 0.01 * i
        for kind in kinds:
            c += (f'[[placement.candidates]]\nname = "{kind[0]}z{round(x * 1000)}"\n'
                  f'select = {{ at = [{x:.3f}, 0.0, 0.0] }}\ndof = "uz"\nkind = "{kind}"\n'
                  f'noise = 0.01\n')
    return c


@pytest.fixture(scope="module")
def strip(tmp_path_factory):
    path = tmp_path_factory.mktemp("place") / "strip.toml"
    path.write_text(HEAD + candidates())
    spec = load_model_file(path)
    return path, spec, placement_model(spec, progress=False)


# ------------------------------------------------------------------ model file
def test_candidates_without_sensors_are_valid_and_build_says_why_not(strip):
    path, spec, _ = strip
    assert spec.sensors == [] and len(spec.placement.candidates) == 34
    assert spec.placement.candidates[1].kind == "acceleration"
    with pytest.raises(ValueError, match=r"\[\[sensors\]\]: a bundle needs at least one sensor"):
        build(path, progress=False)


@pytest.mark.parametrize("edit,msg", [
    (('noise = 0.01\n', 'noise = 0.01\ncolour = "red"\n'),
     r"\[\[placement.candidates\]\]\[0\]\.colour: unknown key"),
    (('noise = 0.01\n', 'noise = -1.0\n'), r"\[\[placement.candidates\]\]\[0\]\.noise"),
    (('noise = 0.01\n', 'noise = 0.01\ncost = "high"\n'),
     r"\[\[placement.candidates\]\]\[0\]\.cost: expected a number"),
    (('kind = "displacement"\nnoise', 'kind = "temperature"\nnoise'),
     r"\[\[placement.candidates\]\]\[0\]\.kind"),
    # a strain gauge is placed at a point, not on a node's DOF: the key named is select
    (('kind = "displacement"\nnoise', 'kind = "strain"\nnoise'),
     r"\[\[placement.candidates\]\]\[0\]\.select: a strain gauge is placed with at"),
    (('name = "az10"', 'name = "dz10"'), r"\[\[placement.candidates\]\]\[1\]\.name: 'dz10' is "
                                         r"already a candidate"),
    (('name = "az10"', 'name = "d60"'), r"\[1\]\.name: 'd60' is a force or output name"),
    (('[placement]\n', '[placement]\nweights = { F999 = 1.0 }\n'),
     r"\[placement\]\.weights\.F999: no \[\[forces\]\] or \[\[outputs\]\] entry"),
    (('[placement]\n', '[placement]\nbudget = 0.5\n'),
     r"\[placement\]\.budget: 0.5 is below the cheapest"),
    (('[placement]\n', '[placement]\ncriterion = "max"\n'), r"\[placement\]\.criterion"),
    (('[placement]\n', '[placement]\nnoise = "loud"\n'), r"\[placement\]\.noise: expected one"),
])
def test_bad_placement_keys_are_named(tmp_path, edit, msg):
    text = HEAD + candidates()
    assert edit[0] in text
    p = tmp_path / "bad.toml"
    p.write_text(text.replace(edit[0], edit[1], 1))
    with pytest.raises(ModelFileError, match=msg):
        load_model_file(p)


def test_candidate_equal_to_a_sensor_is_placed_other_is_an_error(tmp_path):
    sensor = ('[[sensors]]\nname = "dz10"\nselect = { at = [0.010, 0.0, 0.0] }\ndof = "uz"\n'
              'kind = "displacement"\nnoise = 0.01\n')
    p = tmp_path / "s.toml"
    p.write_text(HEAD + sensor + candidates())
    spec = load_model_file(p)
    assert spec.placement.placed == ("dz10",)
    assert "dz10" not in [c.name for c in spec.placement.candidates]
    p.write_text(HEAD + sensor.replace("0.01\n", "0.02\n") + candidates())
    with pytest.raises(ModelFileError, match=r"'dz10' is a \[\[sensors\]\] entry with another"):
        load_model_file(p)


# ------------------------------------------------------------------ criterion
def test_doubling_solves_the_riccati_equation_like_scipy(strip):
    # reference: scipy.linalg.solve_discrete_are (QZ), on the scaled state of the strip's
    # smoother with two candidates (dz20, az170); tolerance 1e-8 of the largest entry
    linalg = pytest.importorskip("scipy.linalg")
    _, _, pm = strip
    idx = [pm.candidates.index("dz20"), pm.candidates.index("az170")]
    d = pm.d
    At = pm.A / d[:, None] * d[None, :]
    Ht = pm.Hc[idx] * d[None, :]
    Qt = pm.Q / d[:, None] / d[None, :]
    R = np.diag(pm.rc[idx])
    P1 = sda(At, Ht, Qt, R)
    P2 = linalg.solve_discrete_are(At.T, Ht.T, Qt, R)
    assert np.max(np.abs(P1 - P2)) <= 1e-8 * np.max(np.abs(P2))


@pytest.mark.parametrize("layout", [["dz170"], ["dz20", "az170"]])
def test_prediction_equals_the_built_smoothers_stated_std(strip, tmp_path, layout):
    # The build designs its smoother on its own reduction (the placed sensors as masters):
    # its stated std over the target's stationary std must equal the prediction, which
    # used one reduction for all candidates (rows of T); 4 % (the reduction difference: the
    # default 2nd-order force model puts power above the band, where the two reductions
    # differ most; measured 3.1 % on the output, 1.5 % on the force)
    path, _, pm = strip
    out = write_placed(path, tmp_path / "p.toml", layout)
    b = build(out, progress=False, limit=False, maps=False).bundle
    # the stated std of the model-error level the build chose (offline/smoother/settings.py)
    pred = pm.stated([pm.candidates.index(n) for n in layout],
                     b.meta["estimator"]["model_error"])
    stated = np.array(b.meta["estimator"]["std"]) / pm.target_std
    np.testing.assert_allclose(pred, stated, rtol=0.04)


def replay(path, tmp_path, names, T=28.0, seed=3):
    """Simulated NRMSE of each target: PLACED.toml built, truth from the FULL 68-DOF model by
    sparse Newmark on 10x finer steps (not the estimator's reduced exact discretisation), the
    [design_load] ideal-band load the build scores on, 1 % noise
    (offline/placement/replay.py)."""
    out = write_placed(path, tmp_path / ("r_" + "_".join(names) + ".toml"), names)
    return replay_nrmse(out, duration=T, seed=seed, load="band")


def test_predictions_are_true_for_the_chosen_layouts(strip, tmp_path):
    # issue 28: the replayed error of each target within 15 % of the prediction, for the
    # layouts `place` chooses (1 and 2 of 34 candidates)
    path, _, pm = strip
    for n in (1, 2):
        r = place(pm, n, progress=False)
        names = [pm.candidates[i] for i in r.order]
        sim = replay(path, tmp_path, names)
        ratio = sim / r.nrmse[-1]
        assert np.all(np.abs(ratio - 1) <= 0.15), (names, r.nrmse[-1], sim)


@pytest.mark.parametrize("n", [1, 2])
def test_greedy_is_within_5_percent_of_exhaustive_search(strip, tmp_path, n):
    # 1-2 sensors out of 17 displacement candidates (issue 28): predicted criterion (the
    # geometric mean of the targets' NRMSE) of the greedy + exchange layout within 1.05x of
    # the best of all C(17, n) layouts, and the simulated errors (same load and noise)
    # within 1.05x as well
    path, _, pm0 = strip
    p = tmp_path / "disp.toml"
    p.write_text(HEAD + candidates(("displacement",)))
    pm = placement_model(load_model_file(p), progress=False)
    r = place(pm, n, progress=False)
    best, v = exhaustive(pm, n)
    assert np.exp(r.score[-1] - v) <= 1.05
    if sorted(best) != sorted(r.order):
        sg = replay(p, tmp_path, [pm.candidates[i] for i in r.order])
        sb = replay(p, tmp_path, [pm.candidates[i] for i in best])
        assert np.exp(np.mean(np.log(sg)) - np.mean(np.log(sb))) <= 1.05


def test_place_one_sensor_on_the_cantilever_predicts_what_the_build_measures(tmp_path,
                                                                             capsys):
    # Regression: 17 displacement candidates, the default estimator (auto): place -n 1 chose
    # dz10, whose built error was 2.1x the tip's, because it predicted the smoother's error
    # under its own order-2 force model (tip: 0.32) instead of on the build's calibration load
    # (tip: 0.18 in the built bundle's calibration runs). Now the prediction is the build's
    # smoother on the full model under the [design_load] load (offline/placement/honest.py).
    p = tmp_path / "cant.toml"
    p.write_text(HEAD.replace('method = "smoother"\nlag = 20\nmodel_error = 0.0\n', "")
                 + candidates(("displacement",)))
    out = tmp_path / "one.toml"
    assert offline_main(["place", str(p), "-n", "1", "-o", str(out), "--quiet"]) == 0
    row = re.search(r"^\s+1\s+(\S+)\s+\S+\s+(\S+)\s+(\S+)\s*$", capsys.readouterr().out, re.M)
    chosen, pred = row.group(1), np.array([float(row.group(2)), float(row.group(3))])
    assert chosen == "dz170"  # the tip: the best single sensor built (benchmark, docs)
    mean = {}
    for name in (chosen, "dz10"):
        b = build(write_placed(p, tmp_path / f"{name}.toml", [name]), progress=False,
                  limit=False, maps=False).bundle
        cal = np.array(b.meta["selection"]["best"]["nrmse"])
        mean[name] = float(np.mean(cal))
        if name == chosen:  # prediction against the built bundle's calibration runs: 10 %
            # (measured: F110 0.180 / 0.177, d60 0.0123 / 0.0114 over 3 runs of 2 s)
            np.testing.assert_allclose(pred, cal, rtol=0.10)
    # the old choice's built error is about twice the tip's (measured 0.192 / 0.094)
    assert mean["dz10"] >= 1.5 * mean[chosen], mean


def test_a_force_no_candidate_sees_is_reported(tmp_path, capsys):
    # a lateral (uy) force on the strip: the candidates measure uz only, which lateral
    # bending does not move; its predicted NRMSE stays 1 (the prior) and `place` says so
    text = (HEAD + candidates(("displacement",), n=6)).replace(
        'dofs = ["ux", "uy", "rx", "rz"]', 'dofs = ["ux", "rx"]').replace(
        '[[outputs]]', '[[forces]]\nname = "Fy"\nselect = { at = [0.17, 0.0, 0.0] }\n'
                       'dof = "uy"\n[[outputs]]')
    p = tmp_path / "blind.toml"
    p.write_text(text)
    res = offline_main(["place", str(p), "-n", "2", "-o", str(tmp_path / "out.toml"),
                        "--quiet"])
    out = capsys.readouterr().out
    assert res == 0
    assert re.search(r"not identifiable: Fy \(predicted NRMSE 1\.000", out), out


def test_place_cli_writes_the_model_file_and_figures(strip, tmp_path, capsys):
    path, _, pm = strip
    out = tmp_path / "placed.toml"
    assert offline_main(["place", str(path), "-n", "3", "-o", str(out), "--quiet",
                         "--report", str(tmp_path / "rep")]) == 0
    text = capsys.readouterr().out
    spec = load_model_file(out)
    names = [s.name for s in spec.sensors]
    assert len(names) == 3
    # the summary has one row per count, 0..3, with both targets' errors
    rows = re.findall(r"^\s+(\d)\s+(\S+)\s+\S+\s+(\S+)\s+(\S+)(?:\s+exchanged .*)?$",
                      text, re.M)
    assert [r[0] for r in rows] == ["0", "1", "2", "3"]
    assert f"order written: {', '.join(names)} (" in text
    e3 = pm.nrmse([pm.candidates.index(n) for n in names])
    np.testing.assert_allclose([float(rows[3][2]), float(rows[3][3])], e3, rtol=1e-3)
    assert (tmp_path / "rep" / "placement_curve.png").stat().st_size > 1000
    assert (tmp_path / "rep" / "placement_layout.png").stat().st_size > 1000
    # written in [[placement.candidates]] order (the channels' order the criterion scored)
    assert names == sorted(names, key=pm.candidates.index)
    # the placed candidates are not offered again: a second run adds one more sensor
    assert spec.placement.placed == tuple(names)
    out2 = tmp_path / "placed2.toml"
    assert offline_main(["place", str(out), "-n", "1", "-o", str(out2), "--quiet"]) == 0
    assert [s.name for s in load_model_file(out2).sensors][:3] == names
    assert len(load_model_file(out2).sensors) == 4
    # a build of the written file works and keeps the chosen order
    assert [c.name for c in build(out, progress=False, limit=False, maps=False)
            .bundle.channels] == names


# ------------------------------------------------------------------ calibration (paper 001)
def zones_text(band=(5.0, 450.0)):
    """The calibration tests' strip (20 elements, every uz a CB master, all interior modes)
    with five `damage` zones, a tip force and no sensors; 20 displacement candidates at the
    nodes every 8.5 mm, 1 % noise; the declared load random 5-450 Hz, 0.05 N, 1 s."""
    from calib_truth import damage_params, localisation_text

    t = localisation_text(20, n_sensors=5, params=damage_params(5))
    a, b = t.index("[[sensors]]"), t.index("[[forces]]")
    t = t[:a] + t[b:]
    t += ("\n[estimator]\nrate = 1000.0\n[design_load]\nduration = 1.0\n"
          f"load = {{ type = \"random\", band = [{band[0]}, {band[1]}], rms = 0.05 }}\n"
          "[placement]\n")
    for i in range(1, 21):
        x = 0.17 * i / 20
        t += (f'[[placement.candidates]]\nname = "d{i}"\nselect = {{ at = [{x!r}, 0.0, 0.0] }}\n'
              'dof = "uz"\nkind = "displacement"\nnoise = 0.01\n')
    return t


def test_calibration_placement_is_e_optimal_among_pairs(tmp_path, capsys):
    # E-criterion (paper 001): lambda_min(F + Lambda_0) of the chosen pair against every
    # pair of the 20 candidates (exhaustive, 190 pairs): within 5 %; above the evenly spaced
    # pair (85, 170 mm); the printed posterior std per zone for 0..2 sensors
    from itertools import combinations

    from offline.placement.fisher import e_value, posterior_std

    p = tmp_path / "zones.toml"
    p.write_text(zones_text())
    out = tmp_path / "placed.toml"
    assert offline_main(["place", str(p), "-n", "2", "-o", str(out), "--for", "calibration",
                         "--quiet"]) == 0
    text = capsys.readouterr().out
    rows = re.findall(r"^\s+(\d)\s+(\S+)\s+(\S+)\s+" + r"\s+".join([r"(\S+)"] * 5) + "$",
                      text, re.M)
    assert [r[0] for r in rows] == ["0", "1", "2"]
    names = [s.name for s in load_model_file(out).sensors]
    assert [r[1] for r in rows[1:]] == names
    from offline.placement.fisher import fisher_blocks

    Fb, L0, dth, _, params = fisher_blocks(load_model_file(p), progress=False)
    assert params == [f"w{z}" for z in range(5)]
    idx = [int(n[1:]) - 1 for n in names]
    lam = e_value(Fb[idx].sum(axis=0), L0)
    best = max(e_value(Fb[list(c)].sum(axis=0), L0) for c in combinations(range(20), 2))
    assert lam >= best / 1.05
    assert lam > e_value(Fb[[9, 19]].sum(axis=0), L0)
    # the printed std of the last row is the Gauss-Newton posterior std of the layout
    np.testing.assert_allclose([float(v) for v in rows[2][3:]],
                               posterior_std(Fb[idx].sum(axis=0), L0, dth), rtol=1e-3)
    # with no sensor the prior's std (damage prior W ~ N(0, 1/2) through the sigmoid)
    assert len({r for r in rows[0][3:]}) == 1


def test_calibration_placement_needs_parameters(strip, tmp_path, capsys):
    path, _, _ = strip
    assert offline_main(["place", str(path), "-n", "1", "-o", str(tmp_path / "o.toml"),
                         "--for", "calibration", "--quiet"]) == 2
    assert "[[parameters]]: --for calibration needs [[parameters]]" in capsys.readouterr().err


def test_costs_and_budget_are_respected(strip):
    # the best single candidate (by the criterion, all evaluated exactly) made expensive:
    # with a budget of 2.5 and cost 3 it is never chosen; the chosen costs stay within budget
    _, _, pm = strip
    from offline.placement.search import Criterion

    crit = Criterion(pm)
    best = int(np.argmin([crit([j]) for j in range(len(pm.candidates))]))
    cost0 = pm.cost.copy()
    try:
        pm.cost = np.ones(len(pm.candidates))
        pm.cost[best] = 3.0
        pm.cost[[j for j in range(len(pm.cost)) if j != best][::2]] = 0.5
        for screen in (0, 6):
            r = place(pm, 4, budget=2.5, screen=screen, progress=False)
            assert best not in r.order
            assert pm.cost[r.order].sum() <= 2.5 + 1e-12
            assert r.cost == pytest.approx(pm.cost[r.order].sum(), rel=1e-12)
    finally:
        pm.cost = cost0


def test_absolute_noise_gives_every_candidate_of_a_kind_one_noise_floor(strip, tmp_path):
    # [placement] noise = "absolute": sigma = noise x the largest stationary std of the
    # candidates of the same kind and DOF (closed form from the relative model's variances)
    path, _, pm = strip
    p = tmp_path / "abs.toml"
    p.write_text(path.read_text().replace("[placement]\n", '[placement]\nnoise = "absolute"\n'))
    pa = placement_model(load_model_file(p), progress=False)
    kinds = np.array([n[0] for n in pm.candidates])
    for k in ("d", "a"):
        m = kinds == k
        # relative: r = (0.01 std)^2, so std = 100 sqrt(r)
        np.testing.assert_allclose(pa.rc[m], np.max(pm.rc[m]), rtol=1e-12)
    # a sensor where the structure hardly moves is worse under one noise floor
    near = pm.candidates.index("dz10")
    assert pa.nrmse([near])[1] > 2 * pm.nrmse([near])[1]


def test_written_file_keeps_the_text_or_is_rewritten_when_it_cannot(strip, tmp_path):
    path, _, _ = strip
    text = "# my comment\n" + path.read_text()
    src = tmp_path / "c.toml"
    src.write_text(text)
    out = write_placed(src, tmp_path / "o.toml", ["az170", "dz20"])
    assert out.read_text().startswith(text.rstrip("\n"))          # comments and layout kept
    assert [s.name for s in load_model_file(out).sensors] == ["az170", "dz20"]
    # sensors as an inline array: appending [[sensors]] would not parse, the file is
    # written again from its parsed form (the sensor kept first, then the chosen)
    inline = ('sensors = [{ name = "s0", select = { at = [0.17, 0.0, 0.0] }, dof = "uz" }]\n'
              + text)
    src.write_text(inline)
    out = write_placed(src, tmp_path / "o2.toml", ["dz20"])
    assert [s.name for s in load_model_file(out).sensors] == ["s0", "dz20"]


@pytest.mark.timeout(1800)  # two calibrations: over 600 s at load 7-8 on two workers
def test_calibration_layout_localises_a_damaged_zone_an_even_layout_does_not(tmp_path,
                                                                            capsys):
    # Five zones, zone 1 ([34, 68] mm) at omega = 0.4; truth: the 40-element strip, exact
    # modal integration (30 modes), tip force random 5-450 Hz, 1 s at 1 kHz, 1 % noise
    # (tests/calib_truth.py); calibration: the 20-element model, VB (offline/calibration).
    # The E-optimal pair that `place --for calibration` picks localises the damage (omega_1
    # within 0.05 of 0.4 with P(omega_1 > 0.2) > 0.99, every intact zone P(omega > 0.2) <
    # 0.05); the evenly spaced pair (85, 170 mm) does not. Measured: chosen 0.403 +- 0.001,
    # intact |w| <= 0.021; even: w0 = 0.151 +- 0.026 (a false damage), w1 = 0.207 +- 0.056,
    # P(omega_1 > 0.2) = 0.55.
    from calib_truth import damage_params, damage_truth, localisation_text, truth_record

    from offline.calibration.calibrate import calibrate
    from offline.calibration.setup import from_model_file

    p = tmp_path / "zones.toml"
    p.write_text(zones_text())
    assert offline_main(["place", str(p), "-n", "2", "-o", str(tmp_path / "placed.toml"),
                         "--for", "calibration", "--quiet"]) == 0
    capsys.readouterr()
    chosen = [float(s.select.forms[0][1][0]) for s in
              load_model_file(tmp_path / "placed.toml").sensors]

    def with_sensors(text, xs):
        a, b = text.index("[[sensors]]"), text.index("[[forces]]")
        return text[:a] + "".join(
            f'[[sensors]]\nname = "s{i}"\nselect = {{ at = [{x!r}, 0.0, 0.0] }}\ndof = "uz"\n'
            f'kind = "displacement"\n' for i, x in enumerate(xs)) + text[b:]

    def localised(xs):
        truth = with_sensors(localisation_text(40, modes=40), xs) + damage_truth(5, 1, 0.4)
        truth_record(tmp_path / "z.csv", truth, duration=1.0, seed=3, band=(5.0, 450.0),
                     n_modes=30)
        cal = tmp_path / "cal.toml"
        cal.write_text(with_sensors(localisation_text(20, params=damage_params(5)), xs))
        res = calibrate(from_model_file(cal), [tmp_path / "z.csv"])
        return (abs(res.theta[1] - 0.4) < 0.05 and res.exceedance(1, 0.2) > 0.99
                and max(res.exceedance(i, 0.2) for i in (0, 2, 3, 4)) < 0.05)

    assert localised(chosen), chosen
    assert not localised([0.085, 0.17])


def test_costs_and_noise_std_of_the_model_file_reach_the_criterion(tmp_path):
    # issue #40 item 7: Candidate(..., noise, cost) put every cost into noise_std, so the
    # model file's costs were all ignored (1.0) and each candidate's noise was its cost
    text = HEAD + candidates(kinds=("displacement",), n=3).replace(
        'name = "dz20"', 'name = "dz20"\ncost = 2.5').replace(
        'name = "dz30"', 'name = "dz30"\nnoise_std = 3e-6')
    path = tmp_path / "m.toml"
    path.write_text(text)
    pm = placement_model(load_model_file(path), progress=False)
    np.testing.assert_array_equal(pm.cost, [1.0, 2.5, 1.0])
    # the noise variance of dz30 is its noise_std squared (exactly), the others relative
    assert pm.rc[2] == pytest.approx(9e-12, rel=1e-12)
    assert pm.rc[0] != pytest.approx(9e-12, rel=0.5)


def test_a_candidate_on_a_dof_that_does_not_move_is_named(tmp_path):
    # issue #40 item 7: a candidate at the clamp had a relative noise variance of 2.5e-36
    # and was predicted to cut the force error from 0.65 to 0.25
    # (here: the lateral DOF uy of the tip, free once the planar restraint is removed, which
    # the vertical force does not excite: a beam's bending planes are uncoupled)
    planar = '[[boundary]]\nselect = { box = [[0.001, -0.01, -0.01], [0.2, 0.01, 0.01]] }\n' \
        'dofs = ["ux", "uy", "rx", "rz"]\n'
    assert planar in HEAD
    path = tmp_path / "m.toml"
    path.write_text(HEAD.replace(planar, "") + candidates(kinds=("displacement",), n=2) + (
        '[[placement.candidates]]\nname = "dy170"\nselect = { at = [0.17, 0.0, 0.0] }\n'
        'dof = "uy"\nkind = "displacement"\nnoise = 0.01\n'))
    with pytest.raises(ValueError, match="dy170 does not respond to the forces"):
        placement_model(load_model_file(path), progress=False)


def test_place_to_a_directory_is_an_error_naming_it(strip, tmp_path, capsys):
    # issue #40 item 10: `place -o DIR` raised IsADirectoryError with a traceback (exit 1)
    path, _, _ = strip
    d = tmp_path / "outdir"
    d.mkdir()
    assert offline_main(["place", str(path), "-n", "1", "-o", str(d), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "vsense-offline place: error:" in err and str(d) in err
