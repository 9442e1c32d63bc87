"""Nonlinearity measure of a VB posterior (paper 003 Sect. 3.3, eq. 17-18).

For parameter i, the model error is evaluated at m' = m with m'_i = m_i + j σ_i for
j = -3..3 (eq. 17) and compared with its linearisation k(m) + J (m' - m) (the printed
"(m - m')" is a sign slip; with m' - m the linearisation is the Taylor expansion of eq. 9)::

    L_i = ‖K_i - K_i,lin‖_F / ‖K_i,lin‖_F                                   (eq. 18)

σ_i = sqrt((Λ⁻¹)_ii). With several noise groups the residuals are whitened by each group's
noise std (sqrt(E[Φ_i]) kᵢ) so that groups in different units add up; with one group this is
the paper's measure (the ratio does not depend on a common scale).
"""

from __future__ import annotations

import numpy as np

J_DEFAULT = (-3, -2, -1, 0, 1, 2, 3)


def nonlinearity_measure(residual, m, std, k, J, scale=None, js=J_DEFAULT) -> tuple[np.ndarray, int]:
    """Measure L_i of eq. 18 for every parameter.

    Parameters
    ----------
    residual : callable ξ (p,) -> list of (Nᵢ,)   model error kᵢ = gᵢ - yᵢ (no Jacobian)
    m : (p,)       posterior mean
    std : (p,)     posterior standard deviations
    k : list of (Nᵢ,), J : list of (Nᵢ, p)   model error and Jacobian at m
    scale : (n_groups,) or None   whitening factor per group (sqrt of E[Φᵢ]); None: 1
    js : sequence of float        multiples of σ (eq. 17)

    Returns
    -------
    L : ndarray, shape (p,) ;  n_evals : int (model evaluations spent)
    """
    m = np.asarray(m, float)
    std = np.asarray(std, float)
    scale = np.ones(len(k)) if scale is None else np.asarray(scale, float)
    k_m = np.concatenate([s * np.asarray(ki, float).ravel() for s, ki in zip(scale, k)])
    J_m = np.vstack([s * np.asarray(Ji, float).reshape(-1, m.size) for s, Ji in zip(scale, J)])
    L = np.zeros(m.size)
    n_evals = 0
    for i in range(m.size):
        num = den = 0.0
        for j in js:
            d = j * std[i]
            # k_lin(m') = k(m) + J (m' - m) = k(m) + J[:, i] j σ_i
            k_lin = k_m + J_m[:, i] * d
            if j == 0:
                k_true = k_m
            else:
                mp = m.copy()
                mp[i] += d                                   # m'_i = m_i + j σ_i   (eq. 17)
                k_true = np.concatenate([s * np.asarray(ki, float).ravel()
                                         for s, ki in zip(scale, residual(mp))])
                n_evals += 1
            num += np.sum((k_true - k_lin) ** 2)
            den += np.sum(k_lin ** 2)
        # L_i = ‖K_i - K_i,lin‖_F / ‖K_i,lin‖_F                                (eq. 18)
        L[i] = np.sqrt(num) / np.sqrt(den) if den > 0 else np.inf
    return L, n_evals
