"""The inverse maps learn from the windows the device records (offline/inverse/chained.py): a
bundle's chain that they model is not warned about; one they cannot model (an [experiment] at
another rate than the chain's, drifting offsets) is, at build time (offline/inverse/pipeline.py
chain_warning; the bias it states is measured in docs/inverse.md "The measurement chain")."""

from __future__ import annotations

from edge.acquisition import Chain
from offline.inverse import chained, spec
from offline.inverse.pipeline import chain_warning

EX = spec.Experiment(excitation={"type": "pulse", "amplitude": 1.0, "width": 0.002},
                     duration=0.5, rate=1000.0, channels=("d110",), noise=0.01)


def warning(chain, rate=1000.0, sensors=("d110",), ex=EX):
    _, why = chained.experiment_measurement(chain, list(sensors), ex, rate)
    return chain_warning(chain, ex.channels, why)


def test_point_samples_and_modelled_chains_are_not_warned():
    assert warning(Chain()) is None and warning(None) is None
    # the ADS1256 at the experiment's rate, a laser's moving average, an IEPE high-pass:
    # the maps are trained on these conversions
    assert warning(Chain("ads1256", 1000.0, "continuous")) is None
    assert warning(Chain("ads1256", 1000.0, average=(0.002,))) is None
    assert warning(Chain(highpass=(10.0,))) is None


def test_an_experiment_at_another_rate_is_warned_naming_both_rates_and_docs():
    ex = spec.Experiment(excitation=EX.excitation, duration=0.5, rate=500.0,
                         channels=("d110",), noise=0.01)
    w = warning(Chain("ads1256", 1000.0, "continuous"), ex=ex)
    assert w is not None
    assert "d110" in w and "ads1256 at 1000 SPS" in w and "point samples" in w
    assert "500 samples/s" in w and "1000 rows/s" in w and "docs/inverse.md" in w


def test_drifting_offsets_are_warned():
    w = warning(Chain(drift=(1e-6,)))
    assert w is not None and "ideal and the sensors' dynamics" in w and "drift" in w
