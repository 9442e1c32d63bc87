"""The load vocabulary: what a force is as a random process, below the model-file parser, the
smoother's design and the load learning, which all speak it.

`force_model` (:class:`ForceModel`: a force as the output of a shaping filter driven by white
noise, a band-pass Butterworth cascade or a random walk) and `component` (:class:`Component`:
a source component, one resonance of the source driving several forces with fixed
directions). Nothing here imports another vsense package than ``edge`` and ``offline._deps``.
"""

from offline.forcing.component import Component
from offline.forcing.force_model import DEFAULT_ORDER, FORCE_MODELS, ForceModel

__all__ = ["Component", "DEFAULT_ORDER", "FORCE_MODELS", "ForceModel"]
