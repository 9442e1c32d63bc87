"""Parameter transforms: the Gaussian posterior lives on an unbounded variable ξ.

``identity``: θ = ξ;  ``log``: θ = exp ξ (positive θ: moduli, springs, damping ratios, zone
stiffness factors);  ``logit``: θ = lo + (hi - lo) / (1 + exp(-ξ)) (θ in an open box).
``damage``: ω = S(ξ, ε) = ε (e^ξ - 1) / (ε e^ξ + 1) (paper 003 eq. 24-25: ω in (-ε, 1), S(0) = 0,
the damage variable of E_z = (1 - ω) E, eq. 23).
A Gaussian on ξ is a log-normal (logit-normal) distribution of θ; the inverse-power form of
paper 003 Sect. 4.2 (compliance 1/E) is another remedy for nonlinearity and can be had by
calibrating ``log``: the measure of eq. 18 then reports how linear the model is in ξ.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KINDS = ("identity", "log", "logit", "damage")


@dataclass(frozen=True)
class Transform:
    """θ = t(ξ) for one parameter.

    Attributes
    ----------
    kind : {"identity", "log", "logit"}
    lo, hi : float
        Bounds of ``logit`` (ignored otherwise).
    """

    kind: str = "identity"
    lo: float = 0.0
    hi: float = 1.0
    eps: float = 0.1

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"transform must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "damage" and not self.eps > 0:
            raise ValueError(f"damage transform: eps must be > 0, got {self.eps}")
        if self.kind == "logit" and not self.hi > self.lo:
            raise ValueError(f"logit transform: upper bound {self.hi} must exceed lower {self.lo}")

    def to_theta(self, xi):
        """θ = t(ξ) (elementwise)."""
        xi = np.asarray(xi, dtype=np.float64)
        if self.kind == "log":
            return np.exp(xi)
        if self.kind == "logit":
            # θ = lo + (hi - lo) σ(ξ),  σ(ξ) = 1 / (1 + e^-ξ)
            return self.lo + (self.hi - self.lo) / (1.0 + np.exp(-xi))
        if self.kind == "damage":
            # ω = ε (e^ξ - 1) / (ε e^ξ + 1)                                  (eq. 25)
            e = np.exp(xi)
            return self.eps * (e - 1.0) / (self.eps * e + 1.0)
        return xi.copy()

    def to_xi(self, theta):
        """ξ = t⁻¹(θ); raises ValueError when θ is outside the transform's domain."""
        th = np.asarray(theta, dtype=np.float64)
        if self.kind == "log":
            if np.any(th <= 0):
                raise ValueError(f"log transform needs θ > 0, got {th}")
            return np.log(th)
        if self.kind == "logit":
            if np.any(th <= self.lo) or np.any(th >= self.hi):
                raise ValueError(f"logit transform needs {self.lo} < θ < {self.hi}, got {th}")
            u = (th - self.lo) / (self.hi - self.lo)
            return np.log(u / (1.0 - u))
        if self.kind == "damage":
            if np.any(th <= -self.eps) or np.any(th >= 1):
                raise ValueError(f"damage transform needs {-self.eps} < ω < 1, got {th}")
            # e^ξ = (ε + ω) / (ε (1 - ω))
            return np.log((self.eps + th) / (self.eps * (1.0 - th)))
        return th.copy()

    def dtheta_dxi(self, xi):
        """dθ/dξ (elementwise), for the chain rule J_ξ = J_θ · dθ/dξ."""
        xi = np.asarray(xi, dtype=np.float64)
        if self.kind == "log":
            return np.exp(xi)
        if self.kind == "logit":
            s = 1.0 / (1.0 + np.exp(-xi))
            # dθ/dξ = (hi - lo) σ (1 - σ)
            return (self.hi - self.lo) * s * (1.0 - s)
        if self.kind == "damage":
            e = np.exp(xi)
            # dω/dξ = ε (1 + ε) e^ξ / (ε e^ξ + 1)²
            return self.eps * (1.0 + self.eps) * e / (self.eps * e + 1.0) ** 2
        return np.ones_like(xi)

    def to_dict(self) -> dict:
        d = {"kind": self.kind}
        if self.kind == "logit":
            d.update(lo=self.lo, hi=self.hi)
        if self.kind == "damage":
            d.update(eps=self.eps)
        return d
