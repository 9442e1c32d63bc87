"""The model check after a (re)start: its window fills from the warm-up's end on
(``edge/estimator/smoother.py`` ``_check_from``), so the innovations of the state leaving
rest, on a record that starts with the structure moving, are not judged as the model's."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edge.bundle import Bundle
from edge.csvio import read_table
from edge.estimator import Estimator
from edge.estimator.smoother_reference import ReferenceSmoother
from edge.flags import FLAG_MODEL_SUSPECT
from offline.forcing.force_model import ForceModel
from offline.load.model import LoadModel

BIN = Path(sys.executable).parent
FILE = Path(__file__).resolve().parents[1] / "benchmarks" / "load_user" / "footbridge.toml"


def cli(*args):
    p = subprocess.run([str(BIN / args[0]), *map(str, args[1:])], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stderr


@pytest.mark.slow  # a footbridge build (~15 s), one simulated record and one replay
def test_a_matched_record_that_starts_moving_is_not_flagged_as_the_window_fills(tmp_path):
    """The footbridge a new user wrote (``benchmarks/load_user/footbridge.toml``: 8 s window,
    418.5 rows/s, a force declared random 1-80 Hz at 200 N), a record of that very load
    (drawn from its own model) that starts with the girder moving (``simulate --warmup 2``).
    The estimator starts from rest, so its first innovations carry the girder's motion: over
    the first window alone they read NIS/dof 5-6 against the threshold 2 (the twin's sum
    below; measured 2026-12-01), and before this change the check flagged 198-251 rows as
    that window first filled (the NIS, and the pair at 53.8 Hz up to 4.9). Now the window
    fills from the warm-up's end (``n_warm`` samples, the stated std within 10 % of steady):
    no row is flagged, and the check does judge the record (a verdict from sample
    ``n_warm + W`` on)."""
    bundle = tmp_path / "fb.npz"
    cli("vsense-offline", "build", FILE, "-o", bundle, "--quiet")
    fs, T = 4000.0, 11.0
    t = np.arange(int(round(T * fs)) + 1) / fs
    f = LoadModel([ForceModel(band=(1.0, 80.0), rms=200.0)]).sample(t, 301)[:, 0]
    np.savetxt(tmp_path / "load.csv", np.column_stack([t, f]), delimiter=",",
               header="time,F_40", comments="")
    cli("vsense-offline", "simulate", FILE, "--load", "csv", "--csv", tmp_path / "load.csv",
        "--warmup", 2, "--duration", T - 2, "--seed", 1, "-o", tmp_path / "r", "--quiet")
    err = cli("vsense-edge", "replay", tmp_path / "r_measurement.csv", "--bundle", bundle,
              "-o", tmp_path / "e.csv")
    _, E, cols = read_table(tmp_path / "e.csv")
    assert "model check" not in err, err
    assert not np.any(E[:, cols.index("flags")].astype(int) & FLAG_MODEL_SUSPECT)

    b = Bundle.load(bundle)
    _, Y, _ = read_table(tmp_path / "r_measurement.csv")
    est = Estimator(b)
    W, n0 = int(b.kf["nis_window"]), est.n_warm
    assert 0 < n0 < W and Y.shape[0] > n0 + W
    # the first window, start-up included, would have been judged suspect (the twin's NIS)
    twin = ReferenceSmoother(b)
    for y in Y[:W]:
        twin.step(y)
    assert sum(twin.nis) > b.kf["nis_threshold"]
    # the check's first verdict comes with sample n_warm + W (no verdict one sample before)
    n = Y.shape[0]
    F, Z, fl = np.empty((n, len(b.forces))), np.empty((n, len(b.outputs))), np.zeros(n, np.uint8)
    k = n0 + W - 1
    est.process(np.ascontiguousarray(Y[:k]), F[:k], Z[:k], fl[:k])
    assert est.model_check()["ratio"] is None
    est.process(np.ascontiguousarray(Y[k:]), F[k:], Z[k:], fl[k:])
    mc = est.model_check()
    assert mc["ratio"] is not None and not mc["suspect"], mc
    # after a forced reset the window again fills from the warm-up's end
    est.reset()
    est.process(np.ascontiguousarray(Y[:k]), F[:k], Z[:k], fl[:k])
    assert est.model_check()["ratio"] is None
    assert not np.any(fl[:k] & FLAG_MODEL_SUSPECT)
