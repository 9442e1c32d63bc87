"""The parametric reduced model of the inverse maps and the known excitation (NumPy only).

``K̂(θ) = K̂0 + Σ_j (θ_j - θ0_j) K̂_j``, same for M̂; Rayleigh damping from a ratio ζ(θ) at two
modes or the model file's fixed coefficients. Shipped in the bundle extras (``inv_M0`` ...),
built offline by :mod:`offline.inverse` and used there too (one definition for both halves).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: parameter kinds a parametric model may carry, and the admissible value of each:
#: (test, the rule in words)
PARAM_LIMITS = {
    "modulus": (lambda v: v > 0, "must be > 0"),
    "damping_ratio": (lambda v: 0.0 <= v < 1.0, "must be in [0, 1)"),
    "spring": (lambda v: v > 0, "must be > 0"),
    "mass": (lambda v: v >= 0, "must be >= 0"),
    "damage": (lambda v: v < 1.0, "must be < 1 (E = (1 - omega) E0)"),
}
PARAM_KINDS = tuple(PARAM_LIMITS)
#: names of the bundle extras written by offline.inverse.export (prefix ``x_``)
PARTS_KEYS = ("inv_M0", "inv_K0", "inv_dM", "inv_dK", "inv_theta0")


class InverseMapError(ValueError):
    """An inverse map or parametric model in a bundle is missing, malformed or tampered with."""


class RejectedUpdate(ValueError):
    """Parameters that cannot be applied on the device (the message gives the reason)."""


# =========================================================================== parametric model
@dataclass(frozen=True)
class Parts:
    """Parametric reduced model, as stored in the bundle extras.

    Attributes
    ----------
    names : tuple of str, (np,)
        Parameter names.
    kinds : tuple of str, (np,)
        Parameter kinds (:data:`PARAM_KINDS`).
    theta0 : ndarray, shape (np,)
        Nominal parameter values (SI) at which ``M0``, ``K0`` were built.
    M0, K0 : ndarray, shape (n, n)
        Reduced mass [kg] and stiffness [N/m] at ``theta0``.
    dM, dK : ndarray, shape (np, n, n)
        Derivatives of M̂, K̂ with respect to each parameter (zero for damping ratios).
    zeta0 : float
        Damping ratio used when no parameter has kind ``damping_ratio``.
    modes : tuple of int, (2,)
        1-based mode numbers at which the Rayleigh damping has the ratio ζ.
    rayleigh : tuple (a [1/s], b [s]) or None
        Fixed Rayleigh coefficients of the model file's ``[damping]`` (C = a M + b K), used when
        no parameter has kind ``damping_ratio`` (then ``zeta0`` is unused).
    """

    names: tuple
    kinds: tuple
    theta0: np.ndarray
    M0: np.ndarray
    K0: np.ndarray
    dM: np.ndarray
    dK: np.ndarray
    zeta0: float = 0.01
    modes: tuple = (1, 2)
    rayleigh: tuple | None = None

    def __post_init__(self):
        n = self.M0.shape[0]
        p = len(self.names)
        shapes = {"M0": (self.M0.shape, (n, n)), "K0": (self.K0.shape, (n, n)),
                  "dM": (self.dM.shape, (p, n, n)), "dK": (self.dK.shape, (p, n, n)),
                  "theta0": (np.shape(self.theta0), (p,))}
        for key, (got, want) in shapes.items():
            if tuple(got) != want:
                raise InverseMapError(f"parametric model: {key} has shape {tuple(got)}, expected {want}")
        for k in self.kinds:
            if k not in PARAM_KINDS:
                raise InverseMapError(f"parametric model: unknown parameter kind {k!r}")
        if len(self.kinds) != p:
            raise InverseMapError("parametric model: names and kinds differ in length")
        if sum(k == "damping_ratio" for k in self.kinds) > 1:
            raise InverseMapError("parametric model: at most one damping_ratio parameter")

    @property
    def n(self) -> int:
        return int(self.M0.shape[0])

    def to_extras(self) -> tuple[dict, dict]:
        """(arrays, meta) for the bundle: arrays named without the ``x_`` prefix."""
        arrays = {"inv_M0": self.M0, "inv_K0": self.K0, "inv_dM": self.dM, "inv_dK": self.dK,
                  "inv_theta0": np.asarray(self.theta0, dtype=np.float64)}
        meta = {"names": list(self.names), "kinds": list(self.kinds), "zeta0": float(self.zeta0),
                "modes": [int(m) for m in self.modes]}
        if self.rayleigh is not None:
            meta["rayleigh"] = [float(c) for c in self.rayleigh]
        return arrays, meta

    @classmethod
    def from_extras(cls, arrays: dict, meta: dict) -> "Parts":
        missing = [k for k in PARTS_KEYS if k not in arrays]
        if missing:
            raise InverseMapError(f"bundle extras lack the parametric model array(s) {missing}")
        try:
            return cls(names=tuple(meta["names"]), kinds=tuple(meta["kinds"]),
                       theta0=np.asarray(arrays["inv_theta0"], dtype=np.float64),
                       M0=np.asarray(arrays["inv_M0"], dtype=np.float64),
                       K0=np.asarray(arrays["inv_K0"], dtype=np.float64),
                       dM=np.asarray(arrays["inv_dM"], dtype=np.float64),
                       dK=np.asarray(arrays["inv_dK"], dtype=np.float64),
                       zeta0=float(meta.get("zeta0", 0.01)), modes=tuple(meta.get("modes", (1, 2))),
                       rayleigh=tuple(meta["rayleigh"]) if meta.get("rayleigh") is not None else None)
        except KeyError as exc:
            raise InverseMapError(f"bundle meta 'inverse.parts' lacks {exc}") from None


def _theta(parts: Parts, theta) -> np.ndarray:
    th = np.asarray(theta, dtype=np.float64)
    if th.shape[-1] != len(parts.names):
        raise ValueError(f"theta has {th.shape[-1]} entries, the model has {len(parts.names)} "
                         f"parameters {list(parts.names)}")
    return th


def mass_stiffness(parts: Parts, theta) -> tuple[np.ndarray, np.ndarray]:
    """M̂(θ), K̂(θ), linear in the parameters.

    Parameters
    ----------
    theta : array_like, shape (np,) or (S, np)

    Returns
    -------
    M, K : ndarray, shape (n, n) or (S, n, n)
    """
    th = _theta(parts, theta)
    d = th - parts.theta0
    # K̂(θ) = K̂0 + Σ_j (θ_j - θ0_j) K̂_j ;  M̂(θ) = M̂0 + Σ_j (θ_j - θ0_j) M̂_j
    K = parts.K0 + np.tensordot(d, parts.dK, axes=([-1], [0]))
    M = parts.M0 + np.tensordot(d, parts.dM, axes=([-1], [0]))
    return M, K


def damping_ratio(parts: Parts, theta) -> np.ndarray:
    """ζ per sample: the damping_ratio parameter, or ``parts.zeta0``. Shape () or (S,)."""
    th = _theta(parts, theta)
    if "damping_ratio" in parts.kinds:
        return th[..., parts.kinds.index("damping_ratio")]
    return np.full(th.shape[:-1], parts.zeta0)


def rayleigh_ab(parts: Parts, theta, omega) -> tuple[np.ndarray, np.ndarray]:
    """Rayleigh (a [1/s], b [s]) per sample: the model's fixed ``parts.rayleigh`` when no
    parameter is a damping ratio, else ratio ζ(θ) at ``parts.modes``.

    Parameters
    ----------
    theta : array_like, shape (np,) or (S, np)
    omega : ndarray, shape (n,) or (S, n)   undamped natural frequencies [rad/s], ascending
    """
    th = _theta(parts, theta)
    if parts.rayleigh is not None and "damping_ratio" not in parts.kinds:
        a = np.full(th.shape[:-1], float(parts.rayleigh[0]))
        return a, np.full(th.shape[:-1], float(parts.rayleigh[1]))
    i, j = (int(m) - 1 for m in parts.modes)
    w = np.asarray(omega, float)
    return rayleigh_coefficients(damping_ratio(parts, th), w[..., i], w[..., j])


def modal(M: np.ndarray, K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Undamped modes of ``K φ = ω² M φ`` (stacks allowed), mass-normalised.

    Parameters
    ----------
    M, K : ndarray, shape (..., n, n), symmetric, M positive definite

    Returns
    -------
    omega2 : ndarray, shape (..., n)   ω² [rad²/s²], ascending
    Phi : ndarray, shape (..., n, n)   columns φ_i with Φᵀ M Φ = I
    """
    L = np.linalg.cholesky(M)
    Linv = np.linalg.inv(L)
    # A = L⁻¹ K L⁻ᵀ,  K φ = ω² M φ  <=>  A v = ω² v,  φ = L⁻ᵀ v
    A = Linv @ K @ np.swapaxes(Linv, -1, -2)
    A = 0.5 * (A + np.swapaxes(A, -1, -2))
    w2, V = np.linalg.eigh(A)
    Phi = np.swapaxes(Linv, -1, -2) @ V
    return w2, Phi


def rayleigh_coefficients(zeta, omega_i, omega_j) -> tuple[np.ndarray, np.ndarray]:
    """Rayleigh (a, b) giving damping ratio ζ at both ω_i and ω_j [rad/s].

    ζ(ω) = a/(2ω) + bω/2 = ζ at ω_i and ω_j  ⇒  a = 2ζ ω_i ω_j/(ω_i+ω_j), b = 2ζ/(ω_i+ω_j).
    """
    wi, wj = np.asarray(omega_i, float), np.asarray(omega_j, float)
    # a = 2 zeta w_i w_j / (w_i + w_j)
    a = 2.0 * zeta * wi * wj / (wi + wj)
    # b = 2 zeta / (w_i + w_j)
    b = 2.0 * zeta / (wi + wj)
    return a, b


def matrices(parts: Parts, theta) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """M̂, Ĉ, K̂ for parameters θ (Ĉ = a M̂ + b K̂, paper 004 eq. 7, :func:`rayleigh_ab`).

    Parameters
    ----------
    theta : array_like, shape (np,)

    Returns
    -------
    M, C, K : ndarray, shape (n, n)
    """
    th = _theta(parts, theta)
    if th.ndim != 1:
        raise ValueError(f"theta must have shape ({len(parts.names)},), got {th.shape}")
    M, K = mass_stiffness(parts, th)
    w2, _ = modal(M, K)
    a, b = (float(c) for c in rayleigh_ab(parts, th, np.sqrt(np.maximum(w2, 0.0))))
    # C = a M + b K   (paper 004 eq. 7)
    C = a * M + b * K
    return M, C, K


def check_parameters(parts: Parts, theta, names=None) -> np.ndarray:
    """Validate parameters for a model update; raise :class:`RejectedUpdate` with the reason.

    Accepts a full vector (np,) or a dict ``{name: value}`` (missing names keep ``theta0``).
    Rejects non-finite values, unknown names, negative moduli/springs/masses/ratios, ratios
    >= 1, and parameters for which M̂ is not positive definite or K̂ has a negative eigenvalue.
    """
    if isinstance(theta, dict):
        unknown = sorted(set(theta) - set(parts.names))
        if unknown:
            raise RejectedUpdate(f"parameter(s) {unknown} cannot be applied on this device: the "
                                 f"bundle's parametric model has {list(parts.names)}")
        th = np.array(parts.theta0, dtype=np.float64)
        for k, v in theta.items():
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise RejectedUpdate(f"parameter {k!r} must be a number, got "
                                     f"{type(v).__name__}")
            th[parts.names.index(k)] = float(v)
    else:
        th = np.asarray(theta, dtype=np.float64).reshape(-1)
        if th.size != len(parts.names):
            raise RejectedUpdate(f"got {th.size} parameter values, the model has "
                                 f"{len(parts.names)} {list(parts.names)}")
    for name, kind, v in zip(parts.names, parts.kinds, th):
        if not np.isfinite(v):
            raise RejectedUpdate(f"parameter {name!r} is not finite ({v})")
        ok, rule = PARAM_LIMITS[kind]
        if not ok(v):
            raise RejectedUpdate(f"parameter {name!r} ({kind.replace('_', ' ')}) {rule}, "
                                 f"got {v:g}")
    M, K = mass_stiffness(parts, th)
    try:
        np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        raise RejectedUpdate(f"parameters {dict(zip(parts.names, th.tolist()))} give a mass "
                             "matrix that is not positive definite") from None
    w2, _ = modal(M, K)
    if w2[0] < -1e-8 * abs(w2[-1]):
        raise RejectedUpdate(f"parameters {dict(zip(parts.names, th.tolist()))} give a negative "
                             f"stiffness eigenvalue ({w2[0]:.3g})")
    return th


# =========================================================================== excitation
EXCITATIONS = ("pulse", "step", "chirp")


def excitation_signal(excitation: dict, n: int, rate: float, substeps: int = 1) -> np.ndarray:
    """Known excitation force of the experiment at ``t = k / (rate*substeps)``, k = 0..(n-1)*substeps.

    ``pulse``: half-sine ``amplitude * sin(pi t / width)`` for ``0 <= t <= width`` [N, s];
    ``step``: ``amplitude`` for t >= 0; ``chirp``: ``amplitude * sin(2 pi (f0 t + (f1-f0) t²/(2T)))``
    with T the experiment duration, ``f0``, ``f1`` [Hz].

    Returns
    -------
    f : ndarray, shape ((n-1)*substeps + 1,)   [N]
    """
    kind = excitation.get("type")
    if kind not in EXCITATIONS:
        raise ValueError(f"experiment.excitation.type must be one of {EXCITATIONS}, got {kind!r}")
    amp = float(excitation.get("amplitude", 1.0))
    t = np.arange((n - 1) * substeps + 1) / (rate * substeps)
    if kind == "pulse":
        width = float(excitation.get("width", 0.0))
        if not width > 0:
            raise ValueError(f"experiment.excitation.width must be > 0 s for a pulse, got {width}")
        return np.where(t <= width, amp * np.sin(np.pi * np.minimum(t, width) / width), 0.0)
    if kind == "step":
        return np.full(t.shape, amp)
    f0 = float(excitation.get("f0", 1.0))
    f1 = float(excitation.get("f1", rate / 4))
    T = (n - 1) / rate
    # f(t) = A sin(2π (f0 t + (f1 - f0) t² / (2T)))   (linear chirp)
    return amp * np.sin(2 * np.pi * (f0 * t + (f1 - f0) * t ** 2 / (2 * T)))


