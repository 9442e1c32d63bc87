"""Does the reduced model see the parameters? Eigenvalue changes, reduced against full.

The calibration's parametric model projects the full model's M(θ), K(θ) on ONE basis T, the
reduction at the nominal θ₀. A parameter whose change the basis cannot represent (a root
spring that is not a master of a GMR+ basis, a damage zone whose softened mode shapes leave
span(T)) is silently inert or wrong in the reduced model: the calibration then moves other
parameters instead. The check, per parameter j, at a probe point θ'ⱼ (a damage of 0.5, the
farther bound of a positive parameter in ratio, else the box centre)::

    Δλ_r      = λ_r(M(θ'), K(θ'))           - λ_r(M(θ₀), K(θ₀))             full model
    Δλ̂_r      = λ_r(Tᵀ M(θ') T, Tᵀ K(θ') T) - λ_r(Tᵀ M(θ₀) T, Tᵀ K(θ₀) T)   reduced
    e_j       = max_r |Δλ̂_r - Δλ_r| / max_r |Δλ_r|,   r = 1..n_modes

and e_j > ``tol`` (5 %) fails. The remedy is the parameter's boundary: the DOFs the parameter
changes (non-zero rows of K(θ') - K(θ₀) or M(θ') - M(θ₀)) that are coupled by K(θ₀) to DOFs
it does not change. With them as masters a static constraint mode spans the region's
deformation (for a spring or a mass: its own DOF).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offline._deps import need
from offline.reduction.eigen import modes

TOL = 0.05
N_MODES = 4


@dataclass
class Sensitivity:
    """Per parameter: relative error ``e`` of the reduced eigenvalue changes, the full
    model's relative change of λ₁..λ_R (``effect``), and the boundary DOFs (full indices)."""

    name: str
    probe: float
    e: float
    effect: float
    boundary: np.ndarray


def probe_point(kind: str, theta0: float, bounds) -> float:
    """θ' of the module docstring."""
    lo, hi = (float(b) for b in bounds)
    if kind == "damage":
        return min(0.5, 0.5 * (theta0 + hi)) if hi > theta0 else 0.5 * (lo + hi)
    if kind in ("modulus", "spring", "mass") and lo > 0 and theta0 > 0:
        return lo if abs(np.log(lo / theta0)) > abs(np.log(hi / theta0)) else hi
    return 0.5 * (lo + hi) if 0.5 * (lo + hi) != theta0 else hi


def _lams(M, K, T, n: int):
    """(full λ₁..λₙ, reduced λ̂₁..λ̂ₙ) of sparse M, K and the basis T (N, m)."""
    lin = need("scipy.linalg")
    full = np.sort(modes(K, M, n).lam)[:n]
    Mr, Kr = T.T @ (M @ T), T.T @ (K @ T)
    red = lin.eigh(0.5 * (Kr + Kr.T), 0.5 * (Mr + Mr.T), eigvals_only=True)[:n]
    return full, red


def boundary_dofs(dK, dM, K0) -> np.ndarray:
    """DOFs changed by the parameter that K₀ couples to unchanged DOFs (module docstring)."""
    sp = need("scipy.sparse")
    D = (abs(sp.csr_matrix(dK)) + abs(sp.csr_matrix(dM))).tocsr()
    changed = np.zeros(D.shape[0], bool)
    changed[np.flatnonzero(np.diff(D.indptr) > 0)] = True
    if not changed.any():
        return np.zeros(0, np.int64)
    C = sp.csr_matrix(K0).tocoo()
    out = changed[C.row] & ~changed[C.col] & (C.data != 0)
    return np.unique(C.row[out]).astype(np.int64)


def check(build, theta0, bounds, names, kinds, T, n_modes: int = N_MODES) -> list:
    """:class:`Sensitivity` of every stiffness or mass parameter (damping ratios skipped).

    ``build``: θ -> full (M, K), sparse; ``T``: the nominal reduction basis (N, m)."""
    theta0 = np.asarray(theta0, float)
    M0, K0 = build(theta0)
    n = int(min(n_modes, T.shape[1] - 1))
    lf0, lr0 = _lams(M0, K0, T, n)
    out = []
    for j, (name, kind) in enumerate(zip(names, kinds)):
        if kind == "damping_ratio":
            continue
        th = theta0.copy()
        th[j] = probe_point(kind, theta0[j], bounds[j])
        Mj, Kj = build(th)
        lf, lr = _lams(Mj, Kj, T, n)
        dfull, dred = lf - lf0, lr - lr0
        scale = np.max(np.abs(dfull))
        effect = float(np.max(np.abs(dfull) / np.abs(lf0)))
        e = float(np.max(np.abs(dred - dfull)) / scale) if scale > 0 else 0.0
        out.append(Sensitivity(name, float(th[j]), e, effect, boundary_dofs(Kj - K0, Mj - M0, K0)))
    return out


def failing(sens, tol: float | None = None, min_effect: float = 1e-6) -> list:
    """The parameters whose reduced eigenvalue changes are off by more than ``tol`` (those with
    no effect on the full model's first eigenvalues either are not the reduction's fault)."""
    tol = TOL if tol is None else tol
    return [s for s in sens if s.e > tol and s.effect > min_effect]
