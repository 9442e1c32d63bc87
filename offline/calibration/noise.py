"""Noise groups of the model error (paper 003 eq. 11): one Gamma-distributed precision each.

Paper notation: ``Ga(s, c)`` with scale ``s`` and shape ``c``; mean ``E[Φ] = s c``,
``E[log Φ] = ψ(c) + log s``. A group can instead have a *fixed* precision (known noise), and a
``weight`` w in (0, 1]: the group's likelihood is raised to the power w (N_i → w N_i,
kᵢᵀkᵢ → w kᵢᵀkᵢ, Jᵢᵀ Jᵢ → w Jᵢᵀ Jᵢ). With w = N_eff / N this accounts for residual
autocorrelation (an AR(1) residual with lag-one correlation ρ carries
N_eff = N (1 - ρ) / (1 + ρ) independent samples), in place of the paper's decimation to the
correlation length (Sect. 2.4).

Slip in paper 003, Table 2: the "noninformative" prior printed with ε = 1e-6 as scale and shape
is a tight prior at a tiny precision. A vague prior needs a small shape AND a large scale:
:meth:`NoiseGroup.vague` uses c0 = 1e-6, s0 = 1e6 (mean 1, variance 1e6 in the units of the
scaled residual).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NoiseGroup:
    """Prior of one noise group's precision Φ_i [1/unit² of the residual].

    Attributes
    ----------
    name : str
    c0 : float   prior shape (> 0)
    s0 : float   prior scale (> 0)
    fixed : float or None
        Known precision: no Gamma factor, Φ_i = fixed.
    weight : float
        Likelihood power w in (0, 1] (effective samples / samples).
    """

    name: str
    c0: float = 1e-6
    s0: float = 1e6
    fixed: float | None = None
    weight: float = 1.0

    def __post_init__(self):
        if self.fixed is None and not (self.c0 > 0 and self.s0 > 0):
            raise ValueError(f"noise group {self.name!r}: Gamma prior needs shape c0 > 0 and "
                             f"scale s0 > 0, got c0={self.c0}, s0={self.s0}")
        if self.fixed is not None and not (np.isfinite(self.fixed) and self.fixed > 0):
            raise ValueError(f"noise group {self.name!r}: fixed precision must be > 0, got {self.fixed}")
        if not (0 < self.weight <= 1):
            raise ValueError(f"noise group {self.name!r}: weight must be in (0, 1], got {self.weight}")

    @classmethod
    def vague(cls, name: str, weight: float = 1.0) -> "NoiseGroup":
        """Noninformative Gamma prior (small shape, large scale; see module docstring)."""
        return cls(name=name, c0=1e-6, s0=1e6, weight=weight)

    @classmethod
    def from_std(cls, name: str, std: float, rel: float = 1.0, weight: float = 1.0) -> "NoiseGroup":
        """Prior with mean precision 1/std² and coefficient of variation ``rel``
        (shape c0 = 1/rel², scale s0 = 1/(std² c0))."""
        c0 = 1.0 / rel ** 2
        return cls(name=name, c0=c0, s0=1.0 / (std ** 2 * c0), weight=weight)


@dataclass(frozen=True)
class GammaPosterior:
    """q(Φ_i) = Ga(s, c) (a fixed precision is stored as s = fixed, c = 1, ``fixed=True``)."""

    name: str
    s: float
    c: float
    fixed: bool = False

    @property
    def mean(self) -> float:
        """E[Φ] = s c."""
        return float(self.s * self.c)

    @property
    def std_noise(self) -> float:
        """Noise standard deviation at the mean precision, 1/sqrt(s c) [unit of the residual]."""
        return float(1.0 / np.sqrt(self.s * self.c))

    def mean_log(self) -> float:
        """E[log Φ] = ψ(c) + log s."""
        if self.fixed:
            return float(np.log(self.s * self.c))
        from offline._deps import need
        return float(need("scipy.special").digamma(self.c) + np.log(self.s))
