"""Model-inadequacy test (paper 001 Sect. 4): k-fold by input over independent records, each
split into a band below and above the model's first two modes (offline.calibration.folds).

Flags a family that cannot contain the truth (E alone against a compliant clamp) also when
every record has the same force spectrum (issue 25: by record alone p = 0.29 / 0.82), does not
flag the truth's own family (E, damping ratio, root spring; mesh and reduction still differ
from the truth), and refuses, before calibrating, records that are too few or not
independent."""

from __future__ import annotations

import numpy as np
import pytest

from calib_truth import model_text, own_modes_damping, truth_record
from offline.calibration.calibrate import settings_from_raw
from offline.calibration.checks import kfold_inadequacy
from offline.calibration.data import read_record
from offline.calibration.folds import (BLOCK_DECAY_TIMES, check_independent, cut_blocks,
                                       decay_time, fold_groups, split_bands)
from offline.calibration.setup import from_model_file
from offline.cli import main

E_ONLY = """
[[parameters]]
name = "E"
kind = "modulus"
material = "aluminium"
bounds = [40e9, 85e9]
"""


def _disp(t):
    return t.replace('name = "a170"', 'name = "d170"').replace('kind = "acceleration"',
                                                           'kind = "displacement"')


def _records(d, seed):
    truth = own_modes_damping(_disp(model_text(nel=34, E=66e9, k_root=6.0, ratios=(0.015, 0.015),
                                               params="")), 0.015)
    # three records with different force spectra
    for i, band in enumerate([(5.0, 60.0), (5.0, 250.0), (25.0, 250.0)]):
        truth_record(d / f"r{i}.csv", truth, duration=1.0, seed=seed + i, band=band)
    return d


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return _records(tmp_path_factory.mktemp("inad"), 1)


def _setup(text, tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(text)
    su = from_model_file(path)
    return su, settings_from_raw(su.spec.raw, su.parameters, su.where)


def _kfold(text, paths, tmp_path):
    su, st = _setup(text, tmp_path)
    recs = [read_record(p, su.forces, su.sensors, st.prep) for p in paths]
    return su, st, recs, kfold_inadequacy(su, recs, st, alpha=0.05, paths=paths)


@pytest.mark.parametrize("seed", [1, pytest.param(11, marks=pytest.mark.slow),
                                  pytest.param(21, marks=pytest.mark.slow)])
def test_the_truths_family_is_not_flagged(seed, tmp_path_factory, tmp_path):
    d = _records(tmp_path_factory.mktemp(f"good{seed}"), seed)
    *_, out = _kfold(_disp(model_text()), [d / f"r{i}.csv" for i in range(3)], tmp_path)
    # test level 5 % for the family (Bonferroni over the conclusive folds): a right family is
    # flagged in at most 5 % of seeds by construction; docs/calibration.md has the rate over
    # ten seeds
    assert out["passed"] and out["p_family"] >= 0.05, out
    used = [f["p_value"] for f in out["folds"] if f["conclusive"]]
    assert out["conclusive"] and out["p_family"] == pytest.approx(min(1.0, len(used) * min(used)),
                                                                  rel=1e-12)
    assert len(out["folds"]) == 6 and all(f["dof"] == 3 for f in out["folds"])


def test_e_only_with_rigid_clamp_is_flagged(records, tmp_path):
    rigid = _disp(model_text(params=E_ONLY))
    rigid = rigid.replace('dofs = ["ux", "uy", "uz", "rx", "rz"]',
                          'dofs = ["ux", "uy", "uz", "rx", "ry", "rz"]', 1)
    rigid = rigid.replace('[[spring]]\nname = "root"\nselect = { at = [0.0, 0.0, 0.0] }\n'
                          'dof = "ry"\nk = 10.0\n', '')
    rigid = rigid.replace('select = { at = [0.0, 0.0, 0.0] }\ndofs = ["ry"]',
                          'select = { at = [0.17, 0.0, 0.0] }\ndofs = ["ry"]')
    su, st, recs, out = _kfold(rigid, [records / f"r{i}.csv" for i in range(3)], tmp_path)
    assert not out["passed"] and out["p_family"] < 0.01, out
    assert [f["validation"].split(" ")[0] for f in out["folds"]] == [
        "r0.csv", "r0.csv", "r1.csv", "r1.csv", "r2.csv", "r2.csv"]
    assert all(f["dof"] == 1 and np.isfinite(f["T"]) for f in out["folds"])


@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_e_alone_against_a_compliant_clamp_same_spectrum_records(seed, tmp_path):
    """Issue 25: two independent records with one force spectrum. Measured at k_root 7.4
    (4 s records, docs/calibration.md): by record alone E is 65.0 GPa on both records and seed
    2 passes (p = 0.85); with the bands, E is 62.3 GPa from mode 1 and 65.3 from mode 2,
    family p = 2e-9 (seed 2), while E + zeta + k_root passes (p = 1.0)."""
    truth = own_modes_damping(model_text(nel=34, k_root=7.4, params=""))
    paths = [tmp_path / f"s{i}.csv" for i in range(2)]
    for i, p in enumerate(paths):
        truth_record(p, truth, duration=2.0, seed=seed + 10 * i, band=(5.0, 250.0))
    *_, wrong = _kfold(model_text(params=E_ONLY), paths, tmp_path)
    assert not wrong["passed"] and wrong["p_family"] < 1e-6, wrong
    *_, right = _kfold(model_text(), paths, tmp_path)
    assert right["passed"], right
    assert right["plan"]["f_split"] == pytest.approx(np.sqrt(right["plan"]["f1"] * right["plan"]["f2"]))


# ------------------------------------------------------------------ groups and refusals
def test_refuses_records_that_are_not_independent(records, tmp_path):
    su, st = _setup(_disp(model_text()), tmp_path)
    rd = lambda p: read_record(p, su.forces, su.sensors, st.prep)  # noqa: E731
    r0 = records / "r0.csv"
    with pytest.raises(ValueError, match="same data"):
        check_independent([rd(r0), rd(r0)], [r0, r0])
    # two overlapping cuts of one run (relative time stamps both), and absolute time stamps
    lines = r0.read_text().splitlines()
    a, b = tmp_path / "cut_a.csv", tmp_path / "cut_b.csv"
    a.write_text("\n".join(lines[:701]) + "\n")
    head = lines[0]
    rows = [ln.split(",", 1)[1] for ln in lines[401:]]
    b.write_text(head + "\n" + "\n".join(f"{i * 1e-3!r},{r}" for i, r in enumerate(rows)) + "\n")
    with pytest.raises(ValueError, match="overlap .*share samples"):
        check_independent([rd(a), rd(b)], [a, b])
    c, e = tmp_path / "abs_c.csv", tmp_path / "abs_e.csv"
    other = (records / "r1.csv").read_text().splitlines()
    c.write_text(head + "\n" + "\n".join(f"{1000 + i * 1e-3!r},{ln.split(',', 1)[1]}"
                                         for i, ln in enumerate(lines[1:])) + "\n")
    e.write_text(head + "\n" + "\n".join(f"{1000.5 + i * 1e-3!r},{ln.split(',', 1)[1]}"
                                         for i, ln in enumerate(other[1:])) + "\n")
    with pytest.raises(ValueError, match="overlap in time"):
        check_independent([rd(c), rd(e)], [c, e])
    check_independent([rd(records / f"r{i}.csv") for i in range(3)],
                      [records / f"r{i}.csv" for i in range(3)])


def test_one_record_is_refused_unless_long_enough_for_blocks(records, tmp_path):
    su, st = _setup(_disp(model_text()), tmp_path)
    rec = read_record(records / "r1.csv", su.forces, su.sensors, st.prep)
    with pytest.raises(ValueError, match=r"at least two independent records, or one record at "
                                         r"least 2 x 5 decay times"):
        fold_groups(su, [rec], st)
    # τ = 1/12 s: blocks of at least 5 τ = 0.417 s, two fit in the 1 s record
    tau = 1.0 / 12
    blocks = cut_blocks(rec, tau)
    assert len(blocks) == 2 and BLOCK_DECAY_TIMES * tau <= 0.5
    assert np.intersect1d(blocks[0].used, blocks[1].used).size == 0
    np.testing.assert_array_equal(np.concatenate([b.used for b in blocks]), rec.used)
    assert all(b.F is rec.F for b in blocks)      # the whole force history: exact initial state
    # decay time of mode 1: 1/(ζ ω) (closed form)
    assert decay_time(30.0, 0.01) == pytest.approx(1 / (0.01 * 2 * np.pi * 30.0), rel=1e-14)


def test_bands_are_records_of_the_filtered_force():
    """Causal filters on force and response of a system at rest: each band's response is the
    system's response to the band's force (a 2nd-order resonator at 30 Hz, ζ 1 %, discretised
    by scipy.signal.cont2discrete; reference: lfilter of the filtered force)."""
    from scipy import signal

    from offline.calibration.data import Record
    dt, w, z = 1e-3, 2 * np.pi * 30.0, 0.01
    b, a, _ = signal.cont2discrete(([w ** 2], [1, 2 * z * w, w ** 2]), dt, method="bilinear")
    rng = np.random.default_rng(3)
    F = rng.normal(size=(2000, 1))
    Y = signal.lfilter(b.ravel(), a, F, axis=0)
    rec = Record("x.csv", dt, F, Y, np.arange(2000), {}, "h")
    lo, hi = split_bands(rec, 80.0)
    for band in (lo, hi):
        ref = signal.lfilter(b.ravel(), a, band.F, axis=0)
        np.testing.assert_allclose(band.Y, ref, atol=1e-12 * np.abs(ref).max())
    # filtfilt (zero phase) breaks this at the record's end: the guard against that change
    sos = signal.butter(4, 80.0, fs=1 / dt, output="sos")
    Ff, Yf = signal.sosfiltfilt(sos, F, axis=0), signal.sosfiltfilt(sos, Y, axis=0)
    assert np.abs(Yf - signal.lfilter(b.ravel(), a, Ff, axis=0)).max() > 1e-3 * np.abs(Yf).max()


def test_cli_refuses_before_calibrating(records, tmp_path, capsys):
    (tmp_path / "m.toml").write_text(_disp(model_text()))
    out = tmp_path / "out"
    code = main(["calibrate", str(tmp_path / "m.toml"), "--data", str(records / "r1.csv"),
                 "-o", str(out), "--kfold", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "--kfold: the inadequacy test needs at least two independent" in err
    assert not out.exists()
    code = main(["calibrate", str(tmp_path / "m.toml"), "--data", str(records / "r1.csv"),
                 "--data", str(records / "r1.csv"), "-o", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "same data (same SHA-256)" in err and not out.exists()
    code = main(["calibrate", str(tmp_path / "m.toml"), "--data", str(records / "r1.csv"),
                 "--data", str(records / "r2.csv"), "-o", str(out), "--model-tolerance", "-1"])
    err = capsys.readouterr().err
    assert code == 2 and "--model-tolerance must be >= 0" in err and not out.exists()


@pytest.mark.slow
def test_one_long_record_cut_into_blocks_flags_e_alone(tmp_path):
    """One 6 s record (τ₁ = 0.54 s: two blocks of 3 s >= 5 τ₁), truth k_root 4: E alone is
    flagged (measured p = 5e-164; E + zeta + k_root: p = 1.0, docs/calibration.md)."""
    truth = own_modes_damping(model_text(nel=34, k_root=4.0, params=""))
    p = tmp_path / "long.csv"
    truth_record(p, truth, duration=6.0, seed=7, band=(5.0, 250.0))
    su, st, recs, out = _kfold(model_text(params=E_ONLY), [p], tmp_path)
    plan = out["plan"]
    assert plan["blocks"] and len(out["folds"]) == 4
    assert 5 * plan["decay_time"] <= 3.0 < 10 * plan["decay_time"]
    assert not out["passed"] and out["p_family"] < 1e-6, out


def test_cli_runs_the_test_by_default_and_exits_4(tmp_path, capsys):
    """Two independent records: the test runs without --kfold; E alone against a compliant
    clamp fails it (exit 4, outputs written, the folds and the plan in posterior.json)."""
    import json
    truth = own_modes_damping(model_text(nel=34, k_root=7.4, params=""))
    paths = [tmp_path / f"c{i}.csv" for i in range(2)]
    for i, p in enumerate(paths):
        truth_record(p, truth, duration=2.0, seed=40 + i, band=(5.0, 250.0))
    (tmp_path / "m.toml").write_text(model_text(params=E_ONLY))
    out = tmp_path / "out"
    code = main(["calibrate", str(tmp_path / "m.toml"), "--data", str(paths[0]), "--data",
                 str(paths[1]), "-o", str(out), "--quiet"])
    assert code == 4, capsys.readouterr().err
    assert "failed the inadequacy test" in capsys.readouterr().err
    inad = json.loads((out / "posterior.json").read_text())["inadequacy"]
    assert not inad["passed"] and len(inad["folds"]) == 4 and inad["tolerance"] == 0.005
    assert inad["plan"]["bands"] == ["below", "above", "below", "above"]


@pytest.mark.slow
def test_folds_with_non_gaussian_posteriors_are_inconclusive(tmp_path):
    """Five damage zones seen by two sensors, truth one zone at 40 %: one band leaves two zones
    on a curved ridge (nonlinearity measure ~1, docs/calibration.md); such folds are left out
    of the decision and the result says the test could not judge (measured on seeds 2-5:
    every fold inconclusive, smallest fold p 8e-7 to 0.08 that would have flagged it)."""
    from calib_truth import damage_params
    truth = own_modes_damping(model_text(nel=34, params="") + (
        '[[damage]]\nname = "truth"\nregion = { box = [[0.0301, -0.01, -0.01], '
        '[0.0699, 0.01, 0.01]] }\nomega = 0.4\n'))
    paths = [tmp_path / f"z{i}.csv" for i in range(2)]
    for i, p in enumerate(paths):
        truth_record(p, truth, duration=4.0, seed=400 + i, band=(5.0, 250.0))
    *_, out = _kfold(model_text(params=damage_params(5)), paths, tmp_path)
    folds = out["folds"]
    assert all(f["conclusive"] == (f["nonlinearity"] <= 0.5) for f in folds)
    assert sum(not f["conclusive"] for f in folds) >= 1, folds
    used = [f["p_value"] for f in folds if f["conclusive"]]
    assert out["p_family"] == pytest.approx(min(1.0, len(used) * min(used)) if used else 1.0)
    assert out["conclusive"] == bool(used)
