"""Bayesian calibration of model-file parameters (paper 003, Titscher et al.: variational Bayes
with noise groups, free energy, nonlinearity measure) and the model-inadequacy test (paper 001).

Small pure objects: :mod:`transforms` (positive/bounded parameters), :mod:`noise` (Gamma noise
groups), :mod:`vb` (eq. 13-16 and the free energy eq. A1), :mod:`nonlinearity` (eq. 17-18).
"""

from offline.calibration.noise import GammaPosterior, NoiseGroup
from offline.calibration.nonlinearity import nonlinearity_measure
from offline.calibration.transforms import Transform
from offline.calibration.vb import VBResult, free_energy, variational_bayes

__all__ = ["GammaPosterior", "NoiseGroup", "Transform", "VBResult", "free_energy",
           "nonlinearity_measure", "variational_bayes"]
