"""Records ``build --record`` cannot learn from get an error naming the file and the problem
(offline/load/learn.py ``read_records``), never a crash or a silent garbage model. Met as a
user: a 1 s record ended the build with numpy's "Invalid number of FFT data points (0)"; a
record with a dead (all-zero) accelerometer built a bundle whose load was 1e-145 N and
alpha 3e304, with exit code 0."""

import numpy as np
import pytest

from edge.csvio import write_table
from offline.cli import main as offline_main
from offline.load.learn import MIN_RECORD_S, read_records
from offline.load.zoo import STRIP


def _write(path, n, dt, cols):
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((n, len(cols)))
    write_table(path, np.arange(n) * dt, Y, cols)
    return Y


def test_a_record_too_short_is_named(tmp_path):
    p = tmp_path / "short.csv"
    _write(p, int(MIN_RECORD_S / 1e-3) - 1, 1e-3, ["d110"])
    with pytest.raises(ValueError, match=r"short\.csv: 3\.\d+ s is too short for the load fit"):
        read_records([p], ["d110"], 1e-3)
    _write(p, int(MIN_RECORD_S / 1e-3), 1e-3, ["d110"])
    assert read_records([p], ["d110"], 1e-3)[0].shape == (4000, 1)


def test_a_dead_sensor_column_is_named(tmp_path):
    p = tmp_path / "dead.csv"
    Y = _write(p, 5000, 1e-3, ["a", "b", "c"])
    Y[:, 1] = 0.0
    Y[:, 2] = 0.25                                   # stuck at a value
    write_table(p, np.arange(5000) * 1e-3, Y, ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"dead\.csv: column 'b', 'c' is constant"):
        read_records([p], ["a", "b", "c"], 1e-3)


def test_the_build_exits_2_naming_the_record(tmp_path, capsys):
    model = tmp_path / "strip.toml"
    model.write_text(STRIP)
    p = tmp_path / "run.csv"
    _write(p, 1000, 1e-3, ["d110"])
    rc = offline_main(["build", str(model), "-o", str(tmp_path / "b.npz"), "--record", str(p),
                       "--quiet", "--no-maps"])
    assert rc == 2
    assert "run.csv: 1 s is too short for the load fit" in capsys.readouterr().err
