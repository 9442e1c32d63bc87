"""The inverse maps learn from point samples (offline/inverse/dataset.py): a bundle built for
a converter or for sensors with dynamics is warned about at build time
(offline/inverse/pipeline.py chain_warning; the bias it states is measured in docs/inverse.md
"The measurement chain")."""

from __future__ import annotations

from edge.acquisition import Chain
from offline.inverse.pipeline import chain_warning


def test_point_samples_are_not_warned():
    assert chain_warning(Chain(), ["d110"]) is None
    assert chain_warning(None, ["d110"]) is None


def test_the_ads1256_is_warned_naming_channels_rate_and_docs():
    w = chain_warning(Chain("ads1256", 1000.0, "continuous"), ["d110"])
    assert w is not None
    assert "d110" in w and "ads1256 at 1000 SPS" in w and "point samples" in w
    assert "docs/inverse.md" in w


def test_sensor_dynamics_alone_are_warned():
    # an ideal converter with an IEPE high-pass: no longer point samples of the response
    w = chain_warning(Chain(highpass=(10.0,)), ["a170"])
    assert w is not None and "ideal and the sensors' dynamics" in w
