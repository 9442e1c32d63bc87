"""The load fit's second start from the declaration's shape (offline/load/restart.py).

Found on a user's structure (benchmarks/load_user/plate.toml: a plate clamped on two edges,
three accelerometers, one force, flat 10-250 Hz with a 140 Hz source resonance 5x its
floor): the staged fit ended in a local optimum, the upper corner on the resonance and the
band tilted up to its bound (4.3-136 Hz, tilt -2), 3-10x too little force at 4-30 Hz where
the accelerometers see nothing above their noise; the smoother's stated std of the force
was then 1.3-1.5x too narrow (1-sigma coverage 53-58 % with `build --record`). The records
give the true spectrum 157 nats more likelihood than that fit.
The truth: the full model (exact modal integration, tests/test_load_alias.py ``_setup``), not
the estimator's reduced model.
"""

import numpy as np
import pytest

from offline.forcing.force_model import ForceModel
from offline.load import learn_load
from offline.load.model import LoadModel
from offline.load.restart import declared_shapes
from tests.test_load_alias import PLATE, _setup

#: the plate's load of benchmarks/load_user.py ``true_load("plate")``
TRUE = LoadModel([ForceModel("bandpass", (10.0, 250.0), 3.0, 2, peaks=((140.0, 0.03, 5.0),))])


@pytest.mark.slow
def test_a_source_resonance_does_not_leave_the_fit_tilted_against_its_bound(tmp_path):
    mm, Y, dt, prior, kinds, _ = _setup(tmp_path, PLATE, TRUE, 0.05, "plate")
    fit = learn_load(mm, [Y[:int(8.0 / dt)]], dt, prior, kinds)   # 8 s, as the benchmark's
    m = fit.model.forces[0]
    # before: tilt -2.0 (the bound), band 4.3-136 Hz; after 9-254 Hz, tilt +0.13 on the
    # benchmark's record (a tilt of +-0.5 is a 2x change of the spectrum across the band)
    assert abs(m.tilt) < 0.5, m
    assert m.band[1] > 180.0, m      # the corner not on the 140 Hz resonance
    # the force spectrum where the sensors see nothing above the noise (4-30 Hz): the
    # extrapolation the stated std rests on, within 2x of the truth's (before: 0.11-0.44x)
    f = np.array([12.0, 16.0, 20.0, 25.0, 30.0])
    ratio = fit.model.psd(f)[:, 0, 0] / TRUE.psd(f)[:, 0, 0]
    assert np.all((ratio > 0.5) & (ratio < 2.0)), ratio
    # and the resonance is still found (within 2 %: 140.3 Hz on the benchmark's record)
    assert any(abs(p[0] / 140.0 - 1.0) < 0.02 for p in m.peaks), m.peaks


def test_the_restart_starts_from_the_declared_corners_and_tilt_at_the_fitted_level():
    fitted = [ForceModel("bandpass", (4.3, 136.0), 3.3, 2, hp_order=1, lp_order=2,
                         tilt=-2.0, peaks=((140.4, 0.014, 4.4),))]
    declared = [ForceModel("bandpass", (10.0, 300.0), 5.0, 2)]
    own, decl = declared_shapes(fitted, declared)
    for m in (own[0], decl[0]):
        assert m.band == (10.0, 300.0) and m.tilt == 0.0
        assert m.rms == 3.3 and m.peaks == fitted[0].peaks   # the fit's level and peak kept
    assert own[0].orders == (1, 2) and decl[0].orders == (2, 2)
    # the same orders: one start only
    assert len(declared_shapes(declared, declared)) == 1
    # a random-walk declaration (a static part) keeps the fitted band-pass shape
    rw = [ForceModel("randomwalk", (0.5, 50.0), 1.0, 1)]
    assert declared_shapes(fitted, rw) == [fitted]
