"""Parametric reduced model and the simulated experiment (IMPU paper, file 000, Sect. 2.2.2).

K̂ and M̂ are linear in the parameters (moduli per material, spring stiffnesses, added masses),
so the full model is built once at the nominal point and once per parameter at a perturbed
point; the differences are projected ONCE with the nominal reduction basis T:

    K̂(θ) = K̂0 + Σ_j (θ_j - θ0_j) K̂_j,   K̂_j = Tᵀ (K(θ0 + δ_j e_j) - K(θ0)) T / δ_j

(same for M̂). Damping is Rayleigh on the reduced model: the model file's fixed (a, b), or,
with a ``damping_ratio`` parameter, ratio ζ at two modes.

One experiment (known excitation from rest, paper Sect. 2.2.3) is simulated with the
average-acceleration Newmark scheme in modal coordinates: with Rayleigh damping the modes
decouple exactly, and Newmark on the decoupled equations equals Newmark on M̂, Ĉ, K̂ (the
scheme is linear and commutes with the modal transformation). All samples of a batch are
integrated together.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.inverse import Parts, excitation_signal, mass_stiffness, modal, rayleigh_ab

NEWMARK_BETA = 0.25
NEWMARK_GAMMA = 0.5


@dataclass(frozen=True)
class ParametricModel:
    """Parametric reduced model with its observation and load vectors.

    Attributes
    ----------
    parts : edge.inverse.Parts
        M̂0, K̂0, derivatives, nominal θ0, damping ratio settings.
    bounds : ndarray, shape (np, 2)
        Admissible box P (SI units).
    out_rows : ndarray, shape (nch, n)
        Channel c observes ``out_rows[c] @ u`` (its derivative for velocity/acceleration).
    out_kind : ndarray of int8, shape (nch,)
        0 displacement [m], 1 velocity [m/s], 2 acceleration [m/s²].
    force : ndarray, shape (n,)
        Load distribution of the excitation: ``f(t) = force * g(t)`` [N per unit g].
    channels : tuple of str
        Channel names.
    """

    parts: Parts
    bounds: np.ndarray
    out_rows: np.ndarray
    out_kind: np.ndarray
    force: np.ndarray
    channels: tuple

    @property
    def names(self) -> tuple:
        return self.parts.names


def from_builder(build, theta0, bounds, names, kinds, T=None, out_rows=None, out_kind=None,
                 force=None, channels=None, zeta0: float = 0.01, modes=(1, 2),
                 verify: bool = True, rayleigh=None) -> ParametricModel:
    """Parametric model from a function that builds the full model for given parameters.

    Parameters
    ----------
    build : callable theta (np,) -> (M, K)
        Full (constrained) mass and stiffness, sparse or dense, shape (N, N).
    theta0 : array_like, shape (np,)
        Nominal parameters.
    bounds : array_like, shape (np, 2)
    names, kinds : sequence of str, (np,)
    T : ndarray, shape (N, n), optional
        Nominal reduction basis (identity when None).
    out_rows : (nch, n), out_kind : (nch,), force : (n,) in reduced coordinates.
    rayleigh : (a, b) or None
        The model's fixed Rayleigh damping, used when no parameter is a damping ratio.
    verify : bool
        Rebuild the full model at a mid-box point and check that the parts reproduce its
        projection (relative 1e-8): catches parameters that are not linear in M, K.
    """
    theta0 = np.asarray(theta0, dtype=np.float64)
    bounds = np.asarray(bounds, dtype=np.float64)
    p = theta0.size

    def proj(A):
        A = A.toarray() if hasattr(A, "toarray") else np.asarray(A, dtype=np.float64)
        return A if T is None else T.T @ (A @ T)

    M0f, K0f = build(theta0)
    M0, K0 = proj(M0f), proj(K0f)
    n = M0.shape[0]
    dM = np.zeros((p, n, n))
    dK = np.zeros((p, n, n))
    for j, kind in enumerate(kinds):
        if kind == "damping_ratio":
            continue
        delta = float(bounds[j, 1] - bounds[j, 0]) or max(abs(theta0[j]), 1.0)
        if kind == "damage":
            delta = -delta  # ω + δ could pass 1 (E = (1 - ω) E0 <= 0); K̂ is linear in ω anyway
        th = theta0.copy()
        th[j] += delta
        Mj, Kj = build(th)
        # K̂_j = Tᵀ (K(θ0 + δ e_j) - K(θ0)) T / δ
        dK[j] = proj(Kj - K0f) / delta
        dM[j] = proj(Mj - M0f) / delta
    sym = lambda A: 0.5 * (A + np.swapaxes(A, -1, -2))  # noqa: E731
    parts = Parts(names=tuple(names), kinds=tuple(kinds), theta0=theta0, M0=sym(M0), K0=sym(K0),
                  dM=sym(dM), dK=sym(dK), zeta0=float(zeta0), modes=tuple(int(m) for m in modes),
                  rayleigh=None if rayleigh is None else tuple(float(c) for c in rayleigh))
    if verify and p:
        th = bounds.mean(axis=1) + 0.27 * (bounds[:, 1] - bounds[:, 0])
        Mf, Kf = build(th)
        M, K = mass_stiffness(parts, th)
        for lab, A, B in (("K", proj(Kf), K), ("M", proj(Mf), M)):
            err = np.abs(A - B).max() / max(np.abs(A).max(), 1e-300)
            if err > 1e-8:
                raise ValueError(f"the model's {lab} is not linear in the parameters "
                                 f"{list(names)} (relative deviation {err:.2e} at {th.tolist()})")
    out_rows = np.eye(n)[:1] if out_rows is None else np.atleast_2d(np.asarray(out_rows, float))
    out_kind = np.zeros(out_rows.shape[0], np.int8) if out_kind is None else np.asarray(out_kind, np.int8)
    force = np.eye(n)[0] if force is None else np.asarray(force, float).reshape(n)
    channels = tuple(channels) if channels is not None else tuple(f"ch{c}" for c in range(out_rows.shape[0]))
    return ParametricModel(parts=parts, bounds=bounds, out_rows=out_rows, out_kind=out_kind,
                           force=force, channels=channels)


def natural_frequencies(pm: ParametricModel, thetas) -> np.ndarray:
    """Undamped natural frequencies [Hz], shape (S, n), ascending."""
    M, K = mass_stiffness(pm.parts, np.atleast_2d(thetas))
    w2, _ = modal(M, K)
    return np.sqrt(np.maximum(w2, 0.0)) / (2 * np.pi)


def frequency_bands(pm: ParametricModel, f_max: float, n_random: int = 64, seed: int = 0,
                    bounds=None) -> np.ndarray:
    """Range [Hz] of every natural frequency below ``f_max`` over the parameter box.

    Evaluated at all box corners plus ``n_random`` uniform points. Returns (n_modes, 2).
    """
    b = pm.bounds if bounds is None else np.asarray(bounds, float)
    p = b.shape[0]
    corners = np.array(np.meshgrid(*b, indexing="ij")).reshape(p, -1).T if p <= 10 else b.T
    rng = np.random.default_rng(seed)
    pts = np.vstack([corners, b[:, 0] + rng.random((n_random, p)) * (b[:, 1] - b[:, 0])])
    f = natural_frequencies(pm, pts)
    keep = f.min(axis=0) < f_max
    return np.stack([f.min(axis=0)[keep], f.max(axis=0)[keep]], axis=1)


def simulate(pm: ParametricModel, thetas, excitation: dict, n: int, rate: float,
             substeps: int = 4, chunk: int = 256) -> np.ndarray:
    """Noise-free response windows of the experiment, from rest.

    Parameters
    ----------
    thetas : array_like, shape (S, np)
    excitation : dict
        See :func:`edge.inverse.excitation_signal`.
    n : int
        Samples per window (t = 0 .. (n-1)/rate).
    rate : float
        Sample rate [Hz].
    substeps : int
        Newmark steps per sample (time step h = 1/(rate*substeps)); the excitation is evaluated
        at every step.

    Returns
    -------
    Y : ndarray, shape (S, n, nch)   channel responses [SI]
    """
    thetas = np.atleast_2d(np.asarray(thetas, dtype=np.float64))
    g = excitation_signal(excitation, n, rate, substeps)
    out = np.empty((thetas.shape[0], n, pm.out_rows.shape[0]))
    for s0 in range(0, thetas.shape[0], chunk):
        out[s0:s0 + chunk] = _simulate_chunk(pm, thetas[s0:s0 + chunk], g, n, rate, substeps)
    return out


def _simulate_chunk(pm, th, g, n, rate, substeps):
    parts = pm.parts
    M, K = mass_stiffness(parts, th)
    w2, Phi = modal(M, K)                                      # (S, n), (S, n, n)
    w = np.sqrt(np.maximum(w2, 0.0))
    a, b = rayleigh_ab(parts, th, w)
    # modal damping of C = aM + bK:  φᵀ C φ = a + b ω²  (= 2 ζ_r ω_r)
    c = a[:, None] + b[:, None] * w2
    P = np.einsum("sni,n->si", Phi, pm.force)                  # modal load per unit g
    O = np.einsum("cn,sni->sci", pm.out_rows, Phi)             # channel rows in modal coords
    h = 1.0 / (rate * substeps)
    beta, gamma = NEWMARK_BETA, NEWMARK_GAMMA
    denom = 1.0 + gamma * h * c + beta * h * h * w2
    q = np.zeros_like(w2)
    qd = np.zeros_like(w2)
    # rest: q = q' = 0, q'' = P g(0)
    qdd = P * g[0]
    kinds = pm.out_kind
    Y = np.empty((th.shape[0], n, O.shape[1]))

    def record(k):
        for ch in range(O.shape[1]):
            src = (q, qd, qdd)[int(kinds[ch])]
            Y[:, k, ch] = np.einsum("si,si->s", O[:, ch, :], src)

    record(0)
    for k in range(1, (n - 1) * substeps + 1):
        # predictors: u* = u + h u' + (1/2 - β) h² u'',  u'* = u' + (1 - γ) h u''
        qs = q + h * qd + (0.5 - beta) * h * h * qdd
        qds = qd + (1.0 - gamma) * h * qdd
        # (1 + γ h c + β h² ω²) u''_{k+1} = p_{k+1} - c u'* - ω² u*
        qdd = (P * g[k] - c * qds - w2 * qs) / denom
        q = qs + beta * h * h * qdd
        qd = qds + gamma * h * qdd
        if k % substeps == 0:
            record(k // substeps)
    return Y


def newmark_dense(M, C, K, force, g, h, out_rows):
    """Plain dense Newmark (β=1/4, γ=1/2) from rest: the independent twin of :func:`simulate`.

    Returns displacements at every step, observed through ``out_rows``: shape (len(g), nch).
    """
    beta, gamma = NEWMARK_BETA, NEWMARK_GAMMA
    u = np.zeros(M.shape[0])
    v = np.zeros_like(u)
    acc = np.linalg.solve(M, force * g[0])
    S = M + gamma * h * C + beta * h * h * K
    out = [out_rows @ u]
    for k in range(1, len(g)):
        us = u + h * v + (0.5 - beta) * h * h * acc
        vs = v + (1 - gamma) * h * acc
        acc = np.linalg.solve(S, force * g[k] - C @ vs - K @ us)
        u = us + beta * h * h * acc
        v = vs + gamma * h * acc
        out.append(out_rows @ u)
    return np.array(out)
