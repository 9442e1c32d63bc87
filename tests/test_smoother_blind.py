"""A force the sensors do not see: the smoother's design names it (an error by default), and
the automatic choice scores the smoother anyway, saying which forces it cannot see
(offline/estimator_choice.py). The load zoo's receiver (offline/load/zoo.py: four interface
loads the sensors see as two combinations) lost its smoother candidate silently to that error,
and the choice shipped a Tikhonov bundle at 18.7x the limit on a_mid (the smoother: 2.2x)."""

from types import SimpleNamespace

import numpy as np
import pytest

from edge.bundle import IdentifiedForce
from edge.estimator import EstimatorError
from offline.estimator_choice import candidates_for, select
from offline.smoother import ForceModel, SmootherSettings, design_smoother, with_load_levels
from offline.smoother.gains import blind_forces
from tests.helpers import chain_bundle


def _hidden():
    """The chain with DOF 0 cut loose from the rest (as test_estimator's unidentifiable
    force): a force there is invisible at the free end, where the sensor is."""
    b = chain_bundle(n=6)
    C, K = b.C.copy(), b.K.copy()
    K[0, 1] = K[1, 0] = 0.0
    C[0, 1] = C[1, 0] = 0.0
    b = b.replace(C=C, K=K, forces=b.forces + [IdentifiedForce("Fhidden", dof=0)])
    fm = [ForceModel("bandpass", (5.0, 80.0), 1.0, 2)] * 2
    return b, fm


def test_the_design_names_a_force_it_cannot_see():
    b, fm = _hidden()
    with pytest.raises(EstimatorError, match="Fhidden"):
        design_smoother(b, fm, lag=3)
    d = design_smoother(b, fm, lag=3, blind_ok=True)
    assert blind_forces(b, fm, (), d.std) == ["Fhidden"]
    # the collocated force is seen: its smoothed std well below its prior (1 N); 0.5 is a
    # loose bound (a collocated displacement at 1e12 weight pins it far lower)
    assert d.std[0] < 0.5 * fm[0].rms


def test_the_automatic_choice_keeps_the_smoother_and_says_what_it_cannot_see():
    b, fm = _hidden()
    rng = np.random.default_rng(3)
    n = 1000  # one run of 1 s at 1 kHz; any finite data score the candidate
    run = SimpleNamespace(Y=1e-6 * rng.standard_normal((n, 1)), F=rng.standard_normal((n, 2)),
                          Z=rng.standard_normal((n, 2)), start=100, seed=3)
    s = SmootherSettings(lag=3, model_errors=(0.0,), check_window_s=0.5,
                         check_false_alarm=0.01, force_models=tuple(fm))
    # before: the design's error left no candidate ("no estimator setting is stable")
    sel = select(b, [run], 0.02, windows=[4], candidates=candidates_for("smoother"),
                 smoother=s)
    assert sel.chosen == "Kalman smoother"
    assert sel.best["blind"] == ["Fhidden"]
    assert "Fhidden" in sel.report["note"]
    # the device's load-level gains are designed for the shipped bundle too
    lv = with_load_levels(sel.bundle)
    assert 1.0 in lv.meta["estimator"]["load_levels"]
