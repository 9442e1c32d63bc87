"""A record in another unit (mm where the model's sensor is in m) is caught before the load
fit would absorb it as a load 1e3 times the declared one (offline/load/units.py): each
channel's RMS against the full model's prediction under the declared load. Beyond 300x either
way ``build --record`` refuses (exit 2) naming the record, the column and the factor; beyond
30x it warns; a record of the declared load is near 1."""

import numpy as np
import pytest

from edge.csvio import read_table, write_table
from offline.cli import main as offline_main
from offline.load.units import check_record_levels
from offline.load.zoo import STRIP


@pytest.fixture(scope="module")
def strip(tmp_path_factory):
    d = tmp_path_factory.mktemp("units")
    model = d / "strip.toml"
    model.write_text(STRIP)
    # the model's own declared load, simulated on the full model (offline/simulate.py)
    assert offline_main(["simulate", str(model), "--duration", "8", "--seed", "3",
                         "-o", str(d / "run"), "--quiet"]) == 0
    return d, model, d / "run_measurement.csv"


def _scaled(src, dst, factor):
    t, Y, names = read_table(src)
    write_table(dst, t, np.asarray(Y, float) * factor, names)
    return dst


def test_a_record_in_mm_is_refused_naming_the_column_and_factor(strip, tmp_path, capsys):
    d, model, rec = strip
    mm = _scaled(rec, tmp_path / "run_mm.csv", 1e3)
    rc = offline_main(["build", str(model), "-o", str(tmp_path / "b.npz"), "--record",
                       str(mm), "--quiet", "--no-maps"])
    err = capsys.readouterr().err
    assert rc == 2, err
    # the declared load is the simulated one: 1e3 x the prediction, to the 8 s record's RMS
    # spread (the first mode dominates: 34 Hz, damping 0.01, noise bandwidth pi zeta f = 1.07
    # Hz, B T = 8.5: power 1/sqrt(8.5) = 34 %, RMS 17 %; +-50 % is 3 sigma; measured 1.18)
    assert "run_mm.csv: column 'd110': its RMS is " in err
    f = float(err.split("its RMS is ")[1].split(" times")[0])
    assert 500.0 <= f <= 1500.0
    assert "refused" in err and not (tmp_path / "b.npz").exists()


def test_a_record_100x_the_declared_load_warns_and_builds(strip, tmp_path, capsys):
    """Between the thresholds (30x and 300x): the bundle is built and the build warns naming
    the column and the factor."""
    d, model, rec = strip
    big = _scaled(rec, tmp_path / "run_100.csv", 100.0)
    rc = offline_main(["build", str(model), "-o", str(tmp_path / "b.npz"), "--record",
                       str(big), "--quiet", "--no-maps"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "warning: " in err and "run_100.csv: column 'd110': its RMS is" in err
    # the factor, to the record's RMS spread (17 %, 3 sigma; test above): the declaration is
    # what was simulated, so the unscaled record is at 1.0 of the prediction
    f = float(err.split("its RMS is ")[1].split(" times")[0])
    assert 50.0 <= f <= 150.0


def test_check_record_levels_thresholds():
    """The thresholds on numbers: 20x (the demo's rig against its declaration) passes
    silently, 200x (and 1/200) warns naming the column, 2000x (and 1/2000) refuses; a
    non-finite factor (a silent channel) refuses."""
    assert check_record_levels([20.0, 0.05], ["a", "b"], ["r.csv"]) == []
    w = check_record_levels([200.0, 1 / 200], ["a", "b"], ["r.csv"])
    assert len(w) == 2 and "column 'a'" in w[0] and "200 times" in w[0]
    for f in (2000.0, 1 / 2000, float("nan"), 0.0):
        with pytest.raises(ValueError, match=r"r\.csv: column 'b'.*refused"):
            check_record_levels([1.0, f], ["a", "b"], ["r.csv"])


def test_an_unidentified_noise_the_fit_moved_is_not_called_kept():
    # a docs-only user test: a plate's accelerometer noise went 0.02 -> 0.209 while the
    # summary said "not identified: kept near the declaration"
    from offline.load.records import unidentified_noise

    assert "kept near the declaration" in unidentified_noise(0.02, 0.025)
    note = unidentified_noise(0.02, 0.209)
    assert "kept near" not in note and "moved it 10x the declaration" in note, note
    assert "moved it 0.1x" in unidentified_noise(0.02, 0.002)
