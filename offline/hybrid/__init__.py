"""Hybrid twin: the linear reduced model plus a small neural correction ``g_theta`` trained
through the smoother's fixed-step discretisation (paper 002, NeuralFMUs), exported to ONNX for
the edge (docs/hybrid.md).

Files, by mathematical object: `spec` (the ``[hybrid]`` table), `discrete` (the discrete
hybrid model), `network` (the MLP with its scaling, ONNX export), `train` (training through
the integrator), `attach` (records, bundle arrays). JAX and jax2onnx come with the ``hybrid``
extra and are imported where used.
"""

from offline.hybrid.attach import attach_hybrid, model_of, read_runs
from offline.hybrid.discrete import HybridModel, hybrid_model, simulate
from offline.hybrid.spec import HybridSpec, parse_hybrid

__all__ = ["HybridModel", "HybridSpec", "attach_hybrid", "hybrid_model", "model_of",
           "parse_hybrid", "read_runs", "simulate"]
