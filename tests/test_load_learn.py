"""Learning the load and the noise from records: ``build --record`` end to end on the zoo's
strip (offline/load/), with the truth from the full model by sparse Newmark on every DOF
(not the estimator's reduced model nor its exact discretisation) and the accuracy limit
from the TRUE spectra (offline/limit)."""

from dataclasses import replace

import numpy as np
import pytest

from edge.bundle import Bundle
from edge.csvio import write_table
from edge.estimator import Estimator
from offline.build import build
from offline.cli import main as offline_main
from offline.limit.model import model_limit
from offline.load import read_records
from offline.load.zoo import STRIP, ZOO, record
from offline.model import build_fe_model, load_model_file


@pytest.fixture(scope="module")
def strip(tmp_path_factory):
    d = tmp_path_factory.mktemp("zoo")
    path = d / "strip.toml"
    path.write_text(STRIP)
    spec = load_model_file(path)
    return d, path, spec, build_fe_model(spec, progress=False)


def _write(path, spec, Y):
    write_table(path, np.arange(Y.shape[0]) / spec.estimator.rate, Y,
                [s.name for s in spec.sensors])


def _score(b, Y, F, Z, skip=1.0):
    """(nrmse (nq,), 1-sigma coverage (nq,)) after ``skip`` seconds."""
    est = Estimator(b)
    Fe, Ze, _ = est.run(Y)
    d, s0 = est.delay, int(round(skip / b.dt))
    T = np.hstack([F, Z])[s0:Y.shape[0] - d]
    E = np.hstack([Fe, Ze])[s0 + d:] - T
    return np.sqrt(np.mean(E ** 2, axis=0)) / np.std(T, axis=0), \
        np.mean(np.abs(E) <= est.std, axis=0)


def test_build_record_learns_a_resonant_load_near_the_limit(strip, capsys):
    # The user declares random 5-160 Hz, 1 N; the real load rolls off at 2nd order, carries
    # a 75 Hz source resonance (x6) and is 1 N: the record (20 s) teaches the estimator.
    d, path, spec, model = strip
    lm = ZOO["resonance"]
    Yr, _, _ = record(spec, model, lm, 20.0, 11)
    _write(d / "run.csv", spec, Yr)
    out = d / "learned.npz"
    assert offline_main(["build", str(path), "-o", str(out), "--record", str(d / "run.csv"),
                         "--quiet", "--no-maps"]) == 0
    text = capsys.readouterr().out
    assert "load model learned from 1 record(s)" in text and "peaks 7" in text
    # the learned model explains the record: white innovations of unit variance
    assert "innovations on the record(s)" in text and "WARNING" not in text
    b = Bundle.load(out)
    fitted = b.meta["load_model"]
    assert fitted["source"] == "record" and fitted["info"]["check"]["ok"]
    assert 0.8 <= fitted["info"]["check"]["variance"] <= 1.25
    f0, _, g = fitted["forces"][0]["peaks"][0]
    assert f0 == pytest.approx(75.0, rel=0.02) and g == pytest.approx(6.0, rel=0.3)
    # a separate 8 s test record (other seed): error and coverage against the limit with
    # the true spectrum at the estimator's delay; issue 23: within 1.15x, 1-sigma 61-75 %
    # (the test allows 1.15x and 58-78 %: 7 s scored, sampling spread of ~3 %)
    Y, F, Z = record(spec, model, lm, 8.0, 23)
    lim = model_limit(spec, model, loads=lm, noise=0.01, delays=(0.0, 0.02), exact=False)
    limf, limo = lim.at_delay((b.window - 1) * b.dt + 1e-9)
    nr, cov = _score(b, Y, F, Z)
    ratio = nr / np.concatenate([limf, limo])
    assert np.all(ratio < 1.15), ratio
    assert np.all((cov > 0.58) & (cov < 0.78)), cov


def test_without_a_record_a_wrong_level_is_followed_on_the_device(strip):
    # Declared 1 N, the real load 50x smaller (noise 1 % of the real signal, relative as
    # declared): the device's level tracker brings the stated std down to the error
    # (coverage 61-75 % in the issue; 58-78 % here over 7 s) within the first seconds.
    d, path, spec, model = strip
    b = build(path, progress=False, maps=False).bundle
    assert "level_grid" in b.kf and b.meta["estimator"]["load_levels_scale_noise"]
    Y, F, Z = record(spec, model, ZOO["level/50"], 12.0, 31)
    nr, cov = _score(b, Y, F, Z, skip=4.0)
    assert np.all((cov > 0.58) & (cov < 0.78)), cov
    est = Estimator(b)
    est.run(Y)
    assert est.model_check()["load_level"] == pytest.approx(0.02, rel=0.5)


def test_bad_records_are_named(strip, tmp_path):
    d, path, spec, model = strip
    names = [s.name for s in spec.sensors]
    bad = tmp_path / "bad.csv"
    bad.write_text("time,other\n0,1\n0.001,2\n")
    with pytest.raises(ValueError, match=r"bad\.csv: no column 'd110'"):
        read_records([bad], names, 1e-3)
    bad.write_text("time,d110\n0,1\n0.002,2\n0.004,3\n")
    with pytest.raises(ValueError, match=r"bad\.csv: sample interval 0.002 s"):
        read_records([bad], names, 1e-3)
    bad.write_text("time,d110\n0,1\n0.001,nan\n0.002,3\n")
    with pytest.raises(ValueError, match=r"bad\.csv: 1 row\(s\) with a missing"):
        read_records([bad], names, 1e-3)


def test_declared_model_keeps_scale_per_force_load_and_given_order(strip, tmp_path):
    # regressions (issue 23): method = "smoother" took neither the force's scale nor its own
    # [design_load] load entry; window = "auto" ignored a [[forces]] model.order
    d, path, spec, model = strip
    text = STRIP.replace('dof = "uz"\n[[outputs]]',
                         'dof = "uz"\nscale = 3.0\nmodel = { order = 3 }\n[[outputs]]')
    text = text.replace('load = { type = "random", band = [5.0, 160.0], rms = 1.0 }',
                        'load = [{ type = "random", band = [5.0, 160.0], rms = 1.0 },\n'
                        '  { type = "random", band = [8.0, 120.0], rms = 0.5, '
                        'force = "F110" }]')
    p = tmp_path / "v.toml"
    p.write_text(text + '\n')
    p.write_text(p.read_text().replace("[estimator]\nrate = 1000.0",
                                       '[estimator]\nrate = 1000.0\nmethod = "smoother"'))
    b = build(p, progress=False, maps=False, limit=False).bundle
    fm = b.meta["estimator"]["force_models"][0]
    assert fm["band"] == [8.0, 120.0] and fm["rms"] == pytest.approx(1.5) \
        and fm["order"] == 3
    p.write_text(p.read_text().replace('\nmethod = "smoother"', ""))
    b = build(p, progress=False, maps=False, limit=False).bundle
    assert b.method == "smoother"
    rows = b.meta["selection"]["candidates"]["Kalman smoother"]["rows"]
    assert {r["load_model"] for r in rows} == {"declared"}
    assert b.meta["estimator"]["force_models"][0]["order"] == 3


def test_one_rms_for_forces_and_moments_is_named(strip, tmp_path):
    from offline.load.declared import mixed_units_warning

    d, path, spec, model = strip
    forces = list(spec.forces)
    moment = replace(forces[0], name="M110", dof="ry")
    s2 = replace(spec, forces=forces + [moment])
    w = mixed_units_warning(s2)
    assert "F110" in w and "M110" in w and "[N m]" in w
    s3 = replace(spec, forces=forces + [replace(moment, scale=0.01)])
    assert mixed_units_warning(s3) is None


def test_absolute_sensor_noise_is_used(strip, tmp_path):
    d, path, spec, model = strip
    p = tmp_path / "abs.toml"
    p.write_text(STRIP.replace("noise = 0.01", "noise_std = 2e-6"))
    res = build(p, progress=False, maps=False, limit=False)
    assert res.calibration["runs"][0].sigma[0] == pytest.approx(2e-6, rel=1e-12)
    assert res.bundle.channels[0].weight == pytest.approx(1 / 4e-12, rel=1e-9)


def test_a_trial_step_that_overflows_does_not_end_the_fit(strip):
    """A pink (1/f) load, 10 s record (seed 11): the optimiser's line search once tried a
    level whose shaping filter overflowed (OverflowError out of ForceModel.realise) and the
    build stopped. The search now backs off; the fit finds the tilt and the noise (truth:
    tilt 1, noise 1 % of the signal std; tolerance: the Laplace std of a 10 s record)."""
    from offline.limit.model import noise_std
    from offline.limit.transfer import modal_model
    from offline.load import declared_load_model, learn_load
    from offline.model import resolve_dofs

    d, path, spec, model = strip
    Yr, _, _ = record(spec, model, ZOO["pink"], 10.0, 11)
    dt = 1.0 / spec.estimator.rate
    cd = [resolve_dofs(model, s.select, s.dof, s.name)[0] for s in spec.sensors]
    fd = [resolve_dofs(model, f.select, f.dof, f.name)[0] for f in spec.forces]
    mm = modal_model(model, fd, cd)
    prior = declared_load_model(spec, spec.estimator.rate, noise_std=noise_std(spec, mm, dt))
    fit = learn_load(mm, [Yr], dt, prior, [s.kind for s in spec.sensors])
    assert 0.5 < fit.model.forces[0].tilt < 1.6
    true_noise = 0.01 * np.std(Yr[:, 0]) / np.sqrt(1.0001)
    assert abs(fit.model.noise_std[0] / true_noise - 1.0) < 0.1
