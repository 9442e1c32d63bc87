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


def _mlp(params, h, xp):
    for W, b in params[:-1]:
        h = xp.tanh(h @ W + b)
    W, b = params[-1]
    return h @ W + b


def rest_terms(params, z0, xp=np):
    """Value ``N(z0)`` (ng,) and Jacobian ``dN/dz(z0)`` (ni, ng) of the MLP at the scaled
    input of the structure at rest ``z0`` (ni,), by the chain rule through the tanh layers."""
    h, J = z0, xp.eye(z0.shape[0])
    for W, b in params[:-1]:
        t = xp.tanh(h @ W + b)
        J = (J @ W) * (1.0 - t ** 2)[None, :]           # d tanh(a) = (1 - tanh^2) da
        h = t
    W, b = params[-1]
    return h @ W + b, J @ W


def apply(params, s, mu, sig, gs, xp=np, linear_kept=True):
    """``g = gs * r((s - mu) / sig)`` for inputs ``s`` (..., ni) -> (..., ng).

    ``r = N`` the MLP, or with ``linear_kept`` its residual beyond first order at rest
    (``s = 0``, scaled ``z0 = -mu / sig``): ``r(z) = N(z) - N(z0) - (z - z0) dN/dz(z0)``, so
    the correction and its slope vanish at rest and the linear model is kept exactly for
    small motions. ``xp``: the array module (``numpy`` or ``jax.numpy``)."""
    z = (s - mu) / sig                                   # paper 002: pre-processing
    r = _mlp(params, z, xp)
    if linear_kept:
        z0 = -mu / sig
        n0, j0 = rest_terms(params, z0, xp)
        # r = N(z) - N(z0) - (z - z0) J(z0)
        r = r - n0 - (z - z0) @ j0
    return r * gs                                        # post-processing


def folded(params, mu, sig, gs, linear_kept=True):
    """The same function with the scaling and the terms at rest folded into the weights (exact
    algebra, fewer operators on the device)::

        g = tanh(... tanh(s W1' + b1') ...) WL' + s J' + c'
        W1' = W1 / sig,  b1' = b1 - (mu / sig) W1                (pre-processing)
        WL' = WL gs,  c' = (bL - N(z0)) gs,  J' = -(J(z0) / sig) gs   (z - z0 = s / sig)

    Returns ``(hidden [(W, b), ...], WL', J', c')`` (NumPy)."""
    mu, sig, gs = (np.asarray(v, dtype=float) for v in (mu, sig, gs))
    (W1, b1), *rest = [(np.asarray(W, float), np.asarray(b, float)) for W, b in params]
    n0, j0 = (rest_terms(params, -mu / sig) if linear_kept
              else (np.zeros(gs.size), np.zeros((mu.size, gs.size))))
    first = (W1 / sig[:, None], b1 - (mu / sig) @ W1)
    if not rest:  # no hidden layer: the first layer is the last
        WL, bL = first
        return [], WL * gs, -(j0 / sig[:, None]) * gs, (bL - n0 + 0.0) * gs
    *hid, (WL, bL) = rest
    return [first, *hid], WL * gs, -(j0 / sig[:, None]) * gs, (bL - n0) * gs


def export_onnx(params, mu, sig, gs, linear_kept=True) -> bytes:
    """The network with its scaling as ONNX (float64, input ``s`` (1, ni), output ``g``
    (1, ng)), by jax2onnx from a JAX function of the trained weights (:func:`folded`)."""
    jax = need("jax")
    jnp = need("jax.numpy")
    j2o = need("jax2onnx")
    jax.config.update("jax_enable_x64", True)
    hid, WL, J, c = folded(params, mu, sig, gs, linear_kept)
    hid = [(jnp.asarray(W), jnp.asarray(b)) for W, b in hid]
    WL, J, c = jnp.asarray(WL), jnp.asarray(J), jnp.asarray(c)

    def g(s):
        h = s
        for W, b in hid:
            h = jnp.tanh(h @ W + b)
        return h @ WL + s @ J + c

    model = j2o.to_onnx(g, [jax.ShapeDtypeStruct((1, np.asarray(mu).size), jnp.float64)],
                        model_name="vsense_hybrid", enable_double_precision=True,
                        input_names=["s"], output_names=["g"])
    return model.SerializeToString()
