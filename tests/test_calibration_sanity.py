"""Issue 40 item 2: `vsense-offline calibrate` no longer writes impossible parameters with
exit 0. A force column with a flipped sign drives a posterior mean outside its parameter's
bounds: exit 5, no calibrated.toml, the parameter and bounds named. A force column in mN
(damping 17.8 for [0.003, 0.05] before) or kN is refused before calibrating: the measured
response is 1e3 times off the model's response to it (exit 2, the column and factor named). An all-zero force column, a dead (all-zero) accelerometer and 200
rows missing from the time stamps are refused before calibrating: exit 2 naming the file and
the column or the row. Records: the cantilever truth of tests/calib_truth.py (seeded)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calib_truth import model_text, truth_record
from edge.csvio import read_table, write_table
from offline.cli import main


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    d = tmp_path_factory.mktemp("cal_sanity")
    truth = model_text(nel=34, E=66e9, k_root=6.0, ratios=(0.015, 0.015), params="")
    truth_record(d / "run1.csv", truth, duration=0.6, seed=1)
    (d / "model.toml").write_text(model_text() + '[estimator]\nrate = 1000.0\nwindow = 10\n'
                                                 'alpha = 1e-6\n')
    return d


def _variant(rig, tmp_path, name, edit):
    t, data, names = read_table(rig / "run1.csv")
    t, data = edit(np.asarray(t, float), np.array(data, float), names)
    p = tmp_path / name
    write_table(p, t, data, names)
    return p


def _calibrate(rig, data, out):
    return main(["calibrate", str(rig / "model.toml"), "--data", str(data), "-o", str(out),
                 "--no-kfold", "--quiet"])


def _col(names, c):
    return names.index(c)


@pytest.mark.parametrize("scale, unit", [(1e3, "mN"), (1e-3, "kN")])
def test_force_in_another_unit_is_refused_naming_the_column_and_factor(rig, tmp_path, capsys,
                                                                        scale, unit):
    """A force column in mN (x1e3) or kN (x1e-3): the response the model predicts to it at
    the prior mean is 1e3 off the measured one (offline/calibration/calibrate.py check_units),
    refused before calibrating (exit 2) naming the record, the sensor column and the factor,
    whether or not the posterior would stay inside wide bounds."""

    def edit(t, d, names):
        d[:, _col(names, "F160")] *= scale
        return t, d

    data = _variant(rig, tmp_path, f"{unit}.csv", edit)
    out = tmp_path / "out"
    code = _calibrate(rig, data, out)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{unit}.csv: column '" in err and "with the parameters at their prior mean" in err
    f = float(err.split("its RMS is ")[1].split(" times")[0])
    # 1 / scale, to within 10x either way: the prior mean's own misfit (E, the clamp spring,
    # the damping off their truths) moves the predicted RMS by a few times at most
    assert 0.1 / scale <= f <= 10.0 / scale
    assert not (out / "calibrated.toml").exists()


@pytest.mark.parametrize("case", ["flipped"])
def test_force_flipped_is_not_a_calibration(rig, tmp_path, capsys, case):
    scale = -1.0

    def edit(t, d, names):
        d[:, _col(names, "F160")] *= scale
        return t, d

    data = _variant(rig, tmp_path, f"{case}.csv", edit)
    out = tmp_path / "out"
    code = _calibrate(rig, data, out)
    err = capsys.readouterr().err
    assert code == 5, err
    assert "outside the prior's bounds" in err and "outside [" in err
    assert not (out / "calibrated.toml").exists()
    post = json.loads((out / "posterior.json").read_text())
    assert post["converged"] is False and post["outside_bounds"]


@pytest.mark.parametrize("column, words", [("F160", "no force"), ("a170", "dead")])
def test_constant_columns_are_refused(rig, tmp_path, capsys, column, words):
    def edit(t, d, names):
        d[:, _col(names, column)] = 0.0
        return t, d

    data = _variant(rig, tmp_path, f"zero_{column}.csv", edit)
    code = _calibrate(rig, data, tmp_path / "out")
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"zero_{column}.csv" in err and repr(column) in err and words in err


def test_missing_rows_are_refused(rig, tmp_path, capsys):
    """200 rows cut out of the record: interpolated silently before (damping 0.056 for
    0.016)."""
    def edit(t, d, names):
        keep = np.r_[0:200, 400:t.size]
        return t[keep], d[keep]

    data = _variant(rig, tmp_path, "gap.csv", edit)
    code = _calibrate(rig, data, tmp_path / "out")
    err = capsys.readouterr().err
    assert code == 2, err
    assert "gap.csv" in err and "200 row(s) missing" in err and "row 201" in err


def test_dead_sensor_is_refused_on_the_operational_route(rig, tmp_path, capsys):
    """--operational: a dead (all-zero) accelerometer gave a noise std of 0 (issue 40)."""
    def edit(t, d, names):
        d[:, _col(names, "a170")] = 0.0
        return t, np.delete(d, _col(names, "F160"), axis=1)

    t, data, names = read_table(rig / "run1.csv")
    t, data = edit(np.asarray(t, float), np.array(data, float), names)
    p = tmp_path / "dead_op.csv"
    write_table(p, t, data, [n for n in names if n != "F160"])
    code = main(["calibrate", str(rig / "model.toml"), "--data", str(p), "-o",
                 str(tmp_path / "out"), "--operational", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "dead_op.csv" in err and "'a170'" in err and "dead" in err


def test_white_noise_is_not_an_operational_record(rig, tmp_path, capsys):
    """White noise on every sensor gave E = 74 +- 1.3 GPa (issue 40): refused before
    calibrating, the file and the columns named; the structure's response (the rig's record,
    1 % noise) passes the same check (its flatness ~0: tests/calib_truth.py's cantilever)."""
    from offline.calibration.data import check_not_white, read_record

    t, data, names = read_table(rig / "run1.csv")
    sensors = [n for n in names if n != "F160"]
    rng = np.random.default_rng(7)
    p = tmp_path / "white.csv"
    write_table(p, np.asarray(t, float), rng.standard_normal((len(t), len(sensors))), sensors)
    code = main(["calibrate", str(rig / "model.toml"), "--data", str(p), "-o",
                 str(tmp_path / "out"), "--operational", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "white.csv" in err and "white noise" in err and "'a170'" in err
    assert not (tmp_path / "out" / "calibrated.toml").exists()
    check_not_white(read_record(rig / "run1.csv", [], sensors), sensors)
