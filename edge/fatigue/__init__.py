"""Fatigue at a hotspot on the device: a streaming rainflow count (``rainflow.py``), S-N
curves (``sn_curve.py``), Miner damage and the range-mean histogram (``damage.py``), the
counter's state saved atomically through restarts and power cuts (``persist.py``);
``reference.py`` is the NumPy twin of the compiled counter. docs/fatigue.md.

No scipy, no ``offline``: this package runs on the Pi.
"""

from edge.fatigue.damage import HistogramBins, equivalent_range, miner_damage
from edge.fatigue.rainflow import Hotspot, RainflowCounter
from edge.fatigue.sn_curve import SNCurve, curve

__all__ = ["HistogramBins", "Hotspot", "RainflowCounter", "SNCurve", "curve",
           "equivalent_range", "miner_damage"]
