"""Force identification and response estimation (paper 004, Sect. 3), compiled with numba."""

from edge.estimator.estimator import FLAG_HELD, FLAG_SATURATED, FLAG_WARMUP, Estimator
from edge.estimator.operator import EstimatorError, StepOperator, derive_operator

__all__ = ["Estimator", "EstimatorError", "StepOperator", "derive_operator",
           "FLAG_HELD", "FLAG_WARMUP", "FLAG_SATURATED"]
