"""Stiffness that is a product of parameters: a modulus together with zone damage.

The inverse maps' parametric model (:class:`edge.inverse.Parts`) is linear in θ. A modulus E
and a damage ω_z of a zone of the same material multiply, E_z = (1 - ω_z) E, so K̂ is
bilinear in (E, ω_z). Written about θ₀ with Δ = θ - θ₀, exactly::

    K̂(θ) = K̂₀ + Σⱼ K̂ⱼ Δⱼ + Σ_{i<j} K̂ᵢⱼ Δᵢ Δⱼ             (M̂ alike)
    ∂K̂/∂θⱼ = K̂ⱼ + Σ_{i≠j} K̂ᵢⱼ Δᵢ
    K̂ᵢⱼ = Tᵀ [K(θ₀+δᵢeᵢ+δⱼeⱼ) - K(θ₀+δᵢeᵢ) - K(θ₀+δⱼeⱼ) + K(θ₀)] T / (δᵢ δⱼ)

(the mixed difference of a bilinear function is exact for any step). Only the pairs whose
mixed difference is not zero are kept. A model that is not multilinear either (a third-order
interaction, or a parameter entering nonlinearly) is refused by the check at a point inside
the box, with the parameters named.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.inverse import Parts, mass_stiffness


@dataclass(frozen=True)
class Pair:
    """Mixed second derivative of M̂, K̂ in parameters ``i`` < ``j`` (shapes (n, n))."""

    i: int
    j: int
    d2M: np.ndarray
    d2K: np.ndarray


@dataclass(frozen=True)
class BilinearParts(Parts):
    """:class:`edge.inverse.Parts` with the products of parameters (:class:`Pair` s)."""

    pairs: tuple = ()


def matrices(parts, theta):
    """M̂(θ), K̂(θ) (n, n) and ∂M̂/∂θ, ∂K̂/∂θ (p, n, n) at θ (p,), for linear or bilinear
    parts (module docstring)."""
    th = np.asarray(theta, dtype=np.float64)
    M, K = mass_stiffness(parts, th)
    dM, dK = parts.dM, parts.dK
    pairs = parts.pairs if isinstance(parts, BilinearParts) else ()
    if pairs:
        d = th - parts.theta0
        dM, dK = dM.copy(), dK.copy()
        for q in pairs:
            # K̂ += K̂ᵢⱼ Δᵢ Δⱼ;  ∂K̂/∂θᵢ += K̂ᵢⱼ Δⱼ;  ∂K̂/∂θⱼ += K̂ᵢⱼ Δᵢ
            M = M + q.d2M * (d[q.i] * d[q.j])
            K = K + q.d2K * (d[q.i] * d[q.j])
            dM[q.i] += q.d2M * d[q.j]
            dM[q.j] += q.d2M * d[q.i]
            dK[q.i] += q.d2K * d[q.j]
            dK[q.j] += q.d2K * d[q.i]
    return M, K, dM, dK


def with_products(parts: Parts, build, bounds, T, where: str) -> BilinearParts:
    """``parts`` (linear terms at θ₀, e.g. ``from_builder(..., verify=False)``) plus the
    parameter products of the full-model builder ``build`` (θ -> (M, K)); verified at a
    point inside the box (relative 1e-8) or refused naming the parameters."""
    th0 = np.asarray(parts.theta0, float)
    bounds = np.asarray(bounds, float)
    proj = lambda A: T.T @ ((A.toarray() if hasattr(A, "toarray") else np.asarray(A)) @ T)  # noqa: E731
    idx = [j for j, k in enumerate(parts.kinds) if k != "damping_ratio"]
    # steps inside the box (a damage step towards 0.5, never past ω = 1)
    step = {j: (0.5 - th0[j] if parts.kinds[j] == "damage" else 0.5 * (bounds[j, 1] - bounds[j, 0]))
            or 1.0 for j in idx}
    M0, K0 = build(th0)
    one = {}
    for j in idx:
        th = th0.copy()
        th[j] += step[j]
        one[j] = build(th)
    pairs = []
    for a, i in enumerate(idx):
        for j in idx[a + 1:]:
            th = th0.copy()
            th[i] += step[i]
            th[j] += step[j]
            Mij, Kij = build(th)
            s = step[i] * step[j]
            xK = proj(Kij - one[i][1] - one[j][1] + K0)
            xM = proj(Mij - one[i][0] - one[j][0] + M0)
            # kept when the product changes K̂ or M̂ by more than round-off over the steps
            if np.abs(xK).max() > 1e-10 * np.abs(parts.K0).max() or \
                    np.abs(xM).max() > 1e-10 * np.abs(parts.M0).max():
                d2K, d2M = xK / s, xM / s
                sym = lambda A: 0.5 * (A + A.T)  # noqa: E731
                pairs.append(Pair(i, j, sym(d2M), sym(d2K)))
    fields = {f: getattr(parts, f) for f in Parts.__dataclass_fields__}
    out = BilinearParts(**fields, pairs=tuple(pairs))
    th = bounds.mean(axis=1) + 0.27 * (bounds[:, 1] - bounds[:, 0])
    th = np.where([k == "damage" for k in parts.kinds], np.minimum(th, 0.6), th)
    Mf, Kf = build(th)
    M, K, _, _ = matrices(out, th)
    for lab, A, B in (("K", proj(Kf), K), ("M", proj(Mf), M)):
        err = np.abs(A - B).max() / max(np.abs(A).max(), 1e-300)
        if err > 1e-8:
            raise ValueError(f"{where}: the model's {lab} is neither linear in the parameters "
                             f"{list(parts.names)} nor a product of two of them (relative "
                             f"deviation {err:.2e} at {th.tolist()}); calibrate them in "
                             f"separate runs")
    return out
