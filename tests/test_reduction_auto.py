"""``[reduction] method = "auto"`` (the default, offline/reduction_choice.py): GMR+ unless its
reduced model is off at a sensor (model error above half the sensor's noise std) or at an
output (above half its accuracy limit), then Craig-Bampton with the residual vectors.

The case it guards: the two-storey frame of benchmarks/load_user (GMR+, 20 modes, a velocity
sensor v2z at the top girder's midspan) had v2z 30x its noise std off the full model (44 %
of its std), invisible to the build's output check; the force Fx and the displacement d1x
came out 3.1x / 2.6x their accuracy limit on the build's own runs and 3.4x / 2.7x on a 10 s
record (benchmarks/chain.py, point samples), 1.18x / 1.19x with cb+r."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edge.bundle import Bundle
from offline.build import build
from offline.limit.model import force_spectra, noise_std
from offline.limit.model_error import sensor_model_error
from offline.limit.transfer import modal_model
from offline.model import build_fe_model, load_model_file
from offline.reduced import reduce_model
from offline.reduction_choice import misfit

ROOT = Path(__file__).resolve().parents[1]
FRAME = (ROOT / "benchmarks" / "load_user" / "frame.toml").read_text()


def _reduced(tmp_path, text, method=None):
    p = tmp_path / "m.toml"
    p.write_text(text)
    spec = load_model_file(p)
    model = build_fe_model(spec, progress=False)
    rm = reduce_model(spec, model, n_report=0, progress=False, method=method)
    mm = modal_model(model, rm.force_dofs, list(rm.chan_dofs) + list(rm.out_dofs))
    return spec, rm, mm


def test_the_frames_velocity_sensor_is_off_under_gmr_and_not_under_cb_r(tmp_path):
    spec, rm, mm = _reduced(tmp_path, FRAME, "gmr+")
    dt = 1.0 / spec.estimator.rate
    noise = noise_std(spec, mm, dt)
    s = sensor_model_error(rm, mm, force_spectra(spec), dt, noise)
    # a1x, a2x, v2z (measured 0.043 / 0.78 / 30.6): v2z is a small vertical response of a
    # horizontal load, GMR+'s free-vibration correction misses it
    assert s.shape == (3,) and np.argmax(s) == 2 and s[2] > 10.0, s
    worst, what = misfit(rm, mm, dt, None)
    assert worst > 20.0 and "v2z" in what, (worst, what)     # 30.6 / 0.5
    _, rm2, _ = _reduced(tmp_path, FRAME, "cb+r")
    s2 = sensor_model_error(rm2, mm, force_spectra(spec), dt, noise)
    assert np.all(s2 < 0.05), s2                             # measured below 0.002


def test_auto_keeps_gmr_where_it_describes_the_sensors(tmp_path):
    # the README cantilever (examples/my_beam.toml, its method line "auto"): its tip laser
    # 4e-4 of its noise off under GMR+ (measured), so "auto" reduces as GMR+ does
    text = (ROOT / "examples" / "my_beam.toml").read_text().replace(
        'method = "gmr+"', 'method = "auto"')
    spec, rm, mm = _reduced(tmp_path, text)
    assert rm.reduction.method == "gmr+"
    worst, _ = misfit(rm, mm, 1.0 / spec.estimator.rate, None)
    assert worst < 0.1, worst                                 # measured 8e-4 (4e-4 / 0.5)


@pytest.mark.slow  # a build of the frame: 51 s at load 6 on 2 cores (20 s of CPU)
def test_the_frame_is_built_with_cb_r_and_its_force_near_its_limit(tmp_path):
    """The build, as `vsense-offline build` runs it, on the frame as benchmarks/chain.py
    declares it (1 % sensor noise, the force's model of order 8, point samples): "auto" takes cb+r and says so;
    its ratios to the limit on the build's runs (measured 1.18 / 1.19 / 1.05; GMR+ gave
    3.09 / 2.63 / 15.4) below 1.4."""
    text = (FRAME.replace("noise_std = 0.002", "noise = 0.01")
            .replace("noise_std = 1e-7", "noise = 0.01")
            .replace("rate = 500.0", "rate = 479.333")
            # the record's load has no skirts above its band (benchmarks/chain.py --order 8)
            .replace('name = "Fx"\n', 'name = "Fx"\nmodel = { order = 8 }\n')
            # point samples: the benchmark's `ideal` chain
            + '\n[acquisition]\nconverter = "ideal"\n')
    p = tmp_path / "frame.toml"
    p.write_text(text)
    res = build(p, progress=False, maps=False)
    b = res.bundle
    assert b.meta["reduction"]["method"] == "cb+r" and res.reduction.method == "cb+r"
    assert "note: [reduction] method = \"auto\"" in res.summary() and "v2z" in res.summary()
    assert b.n == 30                                          # 5 masters + 20 modes + 5 vectors
    ratio = {r["name"]: r["ratio"] for r in b.meta["accuracy"]["rows"]}
    assert max(ratio.values()) < 1.4, ratio
    assert not any("[reduction]" in w for w in b.meta.get("warnings", [])), b.meta["warnings"]
    b.save(tmp_path / "b.npz")
    assert Bundle.load(tmp_path / "b.npz").meta["reduction"]["choice"].startswith(
        '[reduction] method = "auto"')


@pytest.mark.slow  # a build of the frame: 35 s at load 6 on 2 cores
def test_an_explicit_gmr_is_kept_and_the_sensor_named_in_the_warning(tmp_path):
    p = tmp_path / "frame.toml"
    p.write_text(FRAME.replace('method = "auto"', 'method = "gmr+"'))
    res = build(p, progress=False, maps=False, limit=True)
    assert res.reduction.method == "gmr+" and "choice" not in res.bundle.meta["reduction"]
    warn = [w for w in res.bundle.meta.get("warnings", []) if "[reduction]:" in w]
    assert len(warn) == 1 and "sensor v2z" in warn[0] and 'method = "cb+r"' in warn[0], warn
