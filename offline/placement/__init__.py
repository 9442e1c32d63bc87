"""Sensor placement (``vsense-offline place``): where to put the sensors for the accuracy of
the forces and virtual outputs, or for the calibration of ``[[parameters]]``.

Files, by mathematical object: ``riccati`` (the steady-state covariance of one layout),
``criterion`` (the predicted NRMSE of the build's smoother per layout), ``honest`` (that
smoother's error on the full model under the build's calibration load), ``screen`` (the
frequency-domain non-causal proxy that ranks candidates), ``search`` (greedy plus exchange,
costs and budget), ``fisher`` (the E-criterion of the calibration), ``write`` (PLACED.toml),
``report`` (summary and figures), ``cli``. docs/placement.md.
"""

from offline.placement.criterion import PlacementModel, placement_model
from offline.placement.search import Placement, exhaustive, place

__all__ = ["Placement", "PlacementModel", "exhaustive", "place", "placement_model"]
