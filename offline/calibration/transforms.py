"""Parameter transforms: the Gaussian posterior lives on an unbounded variable ξ.

``identity``: θ = ξ;  ``log``: θ = exp ξ (positive θ: moduli, springs, damping ratios, zone
stiffness factors);  ``logit``: θ = lo + (hi - lo) / (1 + exp(-ξ)) (θ in an open box).
A Gaussian on ξ is a log-normal (logit-normal) distribution of θ; the inverse-power form of
paper 003 Sect. 4.2 (compliance 1/E) is another remedy for nonlinearity and can be had by
calibrating ``log``: the measure of eq. 18 then reports how linear the model is in ξ.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

KINDS = ("identity", "log", "logit")


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

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"transform must be one of {KINDS}, got {self.kind!r}")
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
        return np.ones_like(xi)

    def to_dict(self) -> dict:
        d = {"kind": self.kind}
        if self.kind == "logit":
            d.update(lo=self.lo, hi=self.hi)
        return d
