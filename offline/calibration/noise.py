"""Noise groups of the model error (paper 003 eq. 11): one Gamma-distributed precision each.

Paper notation: ``Ga(s, c)`` with scale ``s`` and shape ``c``; mean ``E[Φ] = s c``,
``E[log Φ] = ψ(c) + log s``. A group can instead have a *fixed* precision (known noise), and a
``weight`` w in (0, 1]: the group's likelihood is raised to the power w (N_i → w N_i,
kᵢᵀkᵢ → w kᵢᵀkᵢ, Jᵢᵀ Jᵢ → w Jᵢᵀ Jᵢ). With w = N_eff / N this accounts for residual
autocorrelation, in place of the paper's decimation to the correlation length (Sect. 2.4):
:func:`spectral_weight` measures N_eff where the parameters act (the residual spectrum weighted
by the Jacobian's), which an AR(1) N_eff = N (1 - ρ)/(1 + ρ) from the lag-one correlation ρ
misses when white sensor noise hides a coloured model error.

Slip in paper 003, Table 2: the "noninformative" prior printed with ε = 1e-6 as scale and shape
is a tight prior at a tiny precision. A vague prior needs a small shape AND a large scale:
:meth:`NoiseGroup.vague` uses c0 = 1e-6, s0 = 1e6 (mean 1, variance 1e6 in the units of the
scaled residual).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offline._deps import need


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
        return float(need("scipy.special").digamma(self.c) + np.log(self.s))


def spectral_weight(segments, half_width: int = 4) -> tuple[float, float]:
    """Likelihood weight w = N_eff / N of one noise group from the residual's spectrum at the
    frequencies the parameters act on (a Whittle / sandwich effective sample size).

    The VB likelihood treats the residual as white: Var(Jᵀk) = σ² JᵀJ. For a stationary
    residual with spectrum P(f) the score's covariance is Ω = Σ_f c_f Re(Ĵ_fᴴ Ĵ_f) P(f)
    (Ĵ_f: DFT of the Jacobian columns, c_f = 2 for interior rfft bins). A model error is a
    coloured residual concentrated at the structure's modes, where Ĵ is large too; its lag-one
    correlation is hidden by white sensor noise, so an AR(1) N_eff misses it. The worst
    direction's inflation λ = max eig((σ² Σ c Re(ĴᴴĴ))⁻¹ Ω) gives w = 1/λ (clipped to
    [1/N, 1]): the tempered posterior covariance covers the sandwich covariance
    (JᵀJ)⁻¹ Ω (JᵀJ)⁻¹ in every direction.

    Parameters
    ----------
    segments : iterable of (k (n,), J (n, p))
        Contiguous residual pieces of the group (one per record and channel: never across a
        record boundary) and their Jacobians.
    half_width : int
        P(f) is the periodogram |k̂_f|²/n averaged over ±half_width bins (Daniell window).

    Returns
    -------
    w : float      weight in [1/N, 1]
    lam : float    variance inflation λ before clipping
    """
    A = B = None
    N = 0
    for k, J in segments:
        k = np.asarray(k, float)
        J = np.asarray(J, float).reshape(k.size, -1)
        n = k.size
        N += n
        if n < 2 * half_width + 3:
            continue
        kh = np.fft.rfft(k)
        Jh = np.fft.rfft(J, axis=0)                          # (nf, p)
        P = np.abs(kh) ** 2 / n                              # periodogram, E = σ² if white
        win = np.ones(2 * half_width + 1) / (2 * half_width + 1)
        Ps = np.convolve(np.pad(P, half_width, mode="reflect"), win, mode="valid")
        c = np.full(P.size, 2.0)
        c[0] = 1.0
        if n % 2 == 0:
            c[-1] = 1.0
        G = np.einsum("f,fi,fj->fij", c, Jh.conj(), Jh).real  # c_f Re(Ĵ_fᴴ Ĵ_f), (nf, p, p)
        # Ω = Σ_f c_f Re(ĴᴴĴ) P(f);  white: σ² Σ_f c_f Re(ĴᴴĴ), σ² = kᵀk / n
        a, b = np.tensordot(Ps, G, axes=1), (k @ k / n) * G.sum(axis=0)
        A, B = (a, b) if A is None else (A + a, B + b)
    if A is None or not np.all(np.isfinite(A)) or np.trace(B) <= 0:
        return 1.0, 1.0
    # generalised eigenvalues of (A, B) through B's Cholesky factor (B ≥ 0; ridge for rank)
    B = B + 1e-12 * np.trace(B) / B.shape[0] * np.eye(B.shape[0])
    Lc = np.linalg.cholesky(B)
    Li = np.linalg.inv(Lc)
    lam = float(np.linalg.eigvalsh(Li @ A @ Li.T).max())
    return float(np.clip(1.0 / lam, 1.0 / max(N, 1), 1.0)), lam
