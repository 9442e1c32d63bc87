"""The correction network ``g_theta``: a small tanh MLP with the input and output scaling of
paper 002 (Sect. 2.2.2: inputs shifted and scaled to mean 0, std 1 for the activation), in
JAX for training, exported to ONNX with jax2onnx for the edge."""

from __future__ import annotations

import numpy as np

from offline._deps import need


def init_params(n_in: int, n_out: int, hidden: int, layers: int, seed: int = 0) -> list:
    """Weights ``[(W, b), ...]`` (Glorot-uniform hidden layers; the last layer at 1e-3 of that,
    so training starts from the linear model, ``g ~ 0``). NumPy float64."""
    rng = np.random.default_rng(seed)
    sizes = [n_in] + [hidden] * layers + [n_out]
    out = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        lim = np.sqrt(6.0 / (a + b)) * (1e-3 if i == len(sizes) - 2 else 1.0)
        out.append((rng.uniform(-lim, lim, (a, b)), np.zeros(b)))
    return out


def apply(params, s, mu, sig, gs, xp=np):
    """``g = gs * MLP((s - mu) / sig)`` for inputs ``s`` (..., ni) -> (..., ng).

    ``xp``: the array module (``numpy`` or ``jax.numpy``)."""
    h = (s - mu) / sig                                   # paper 002: pre-processing
    for W, b in params[:-1]:
        h = xp.tanh(h @ W + b)
    W, b = params[-1]
    return (h @ W + b) * gs                              # post-processing


def export_onnx(params, mu, sig, gs) -> bytes:
    """The network with its scaling as ONNX (float64, input ``s`` (1, ni), output ``g``
    (1, ng)), by jax2onnx from the JAX function itself."""
    jnp = need("jax.numpy")
    j2o = need("jax2onnx")
    need("jax").config.update("jax_enable_x64", True)
    P = [(jnp.asarray(W, jnp.float64), jnp.asarray(b, jnp.float64)) for W, b in params]
    c = [jnp.asarray(v, jnp.float64) for v in (mu, sig, gs)]
    ni = int(np.asarray(mu).size)

    def g(s):
        return apply(P, s, c[0], c[1], c[2], xp=jnp)

    model = j2o.to_onnx(g, [need("jax").ShapeDtypeStruct((1, ni), jnp.float64)],
                        model_name="vsense_hybrid", enable_double_precision=True,
                        input_names=["s"], output_names=["g"])
    return model.SerializeToString()
