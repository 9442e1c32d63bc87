"""``build --record`` with a ``[[forces]] model`` kind outside the fit's family (the band-pass
model): the learned model replaces it, and the summary and ``meta["load_model"]`` say so.
A user's random-walk force (a load with a slowly drifting part) was replaced by a band-pass
model without a word."""

import numpy as np

from edge.csvio import write_table
from offline.build import build
from offline.load.zoo import STRIP, ZOO, record
from offline.model import build_fe_model, load_model_file


def test_a_declared_random_walk_replaced_by_the_fit_is_named(tmp_path):
    path = tmp_path / "rw.toml"
    path.write_text(STRIP.replace('[[forces]]\nname = "F110"',
                                  '[[forces]]\nname = "F110"\nmodel = { kind = "randomwalk" }'))
    spec = load_model_file(path)
    assert spec.forces[0].model["kind"] == "randomwalk"
    Y, _, _ = record(spec, build_fe_model(spec, progress=False), ZOO["rolloff-2"], 10.0, 11,
                     engine="modal")
    write_table(tmp_path / "run.csv", np.arange(Y.shape[0]) / spec.estimator.rate, Y,
                [s.name for s in spec.sensors])
    res = build(path, progress=False, maps=False, limit=False,
                records=[str(tmp_path / "run.csv")])
    assert res.load_fit.model.forces[0].kind == "bandpass"          # the fit's family
    warn = [w for w in res.bundle.meta["load_model"]["info"].get("warnings", [])
            if "randomwalk" in w]
    assert len(warn) == 1 and "F110 (randomwalk)" in warn[0], warn
    assert "WARNING: [[forces]] model kind of F110 (randomwalk) replaced" in res.summary()


def test_the_learned_model_is_checked_on_the_records_whatever_estimator_is_chosen(tmp_path):
    # a given alpha: a Tikhonov bundle. The check of the learned model on the records ran
    # for smoother bundles only, so a record with a channel in another unit (a user's frame,
    # one accelerometer 1000x) built a garbage load model without a word.
    path = tmp_path / "tk.toml"
    path.write_text(STRIP.replace("[estimator]\nrate = 1000.0",
                                  "[estimator]\nrate = 1000.0\nalpha = 1e-3"))
    spec = load_model_file(path)
    Y, _, _ = record(spec, build_fe_model(spec, progress=False), ZOO["rolloff-2"], 10.0, 12,
                     engine="modal")
    write_table(tmp_path / "run.csv", np.arange(Y.shape[0]) / spec.estimator.rate, Y,
                [s.name for s in spec.sensors])
    res = build(path, progress=False, maps=False, limit=False,
                records=[str(tmp_path / "run.csv")])
    assert res.bundle.method == "tikhonov"
    chk = res.bundle.meta["load_model"]["info"]["check"]
    # a right record: white, variance 1 within the check's own range (0.8-1.25)
    assert chk["ok"] and 0.8 <= chk["variance"] <= 1.25, chk
    assert "innovations on the record(s)" in res.summary()
