"""Time-domain response of the parametric reduced model and its exact parameter sensitivities.

The model is the inverse maps' parametric model (:class:`edge.inverse.Parts`: M̂(θ), K̂(θ)
linear in θ, Rayleigh damping: the file's fixed (a, b) or ratio ζ at two modes) driven by
measured forces. Time integration: average-acceleration Newmark, which for a linear system
is the trapezoidal rule on x = [u; v]::

    ẋ = A_c x + B_c f,   A_c = [[0, I], [-M⁻¹K, -M⁻¹C]],   B_c = [[0], [M⁻¹ B]]
    Q = I - h/2 A_c,   A_d = Q⁻¹ (I + h/2 A_c),   B_d = Q⁻¹ h/2 B_c
    x_{j+1} = A_d x_j + B_d (f_j + f_{j+1})                   (h = dt / substeps)

with the force linear between samples. ``substeps`` steps are composed into one per sample,
x_{k+1} = Φ x_k + G0 f_k + G1 f_{k+1}. The sensitivities are the exact derivatives of this
discrete recursion (not finite differences)::

    dA_d = Q⁻¹ h/2 dA_c (I + A_d),   dB_d = Q⁻¹ h/2 (dA_c B_d + dB_c)
    dx_{k+1} = Φ dx_k + dΦ x_k + dG0 f_k + dG1 f_{k+1}

dM̂, dK̂ come from the parametric model (exact: K̂ is linear in θ); dĈ from the Rayleigh
rule, with dω²_r/dθ_j = φ_rᵀ (dK̂_j - ω_r² dM̂_j) φ_r for a ratio-defined damping. Outputs:
displacement rows·u, velocity rows·v, acceleration rows·M⁻¹(B f - C v - K u). The record
starts at rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.inverse import Parts, mass_stiffness, modal


def propagate_loop(Phi, U):
    """x_0 = 0, x_{k+1} = Φ x_k + U_k: plain loop (the reference twin of :func:`propagate`).

    U : (nt-1, m) or (nt-1, m, p) -> X : (nt, m) or (nt, m, p)."""
    X = np.zeros((U.shape[0] + 1,) + U.shape[1:])
    x = X[0]
    for k in range(U.shape[0]):
        x = Phi @ x + U[k]
        X[k + 1] = x
    return X


def propagate(Phi, U, max_cond: float = 1e8):
    """Same recursion through the eigenvectors of Φ: z = V⁻¹x decouples into first-order
    filters z_{k+1} = λ z_k + (V⁻¹U)_k, run by ``scipy.signal.lfilter`` (C speed). Falls back
    to the loop when V is ill-conditioned (defective or near-defective Φ)."""
    lam, V = np.linalg.eig(Phi)
    if np.linalg.cond(V) > max_cond:
        return propagate_loop(Phi, U)
    from offline._deps import need
    lfilter = need("scipy.signal").lfilter
    Vi = np.linalg.inv(V)
    Z = np.einsum("ij,kj...->ki...", Vi, U.astype(complex))   # (nt-1, m[, p])
    out = np.empty_like(Z)
    for i, li in enumerate(lam):
        # z_{k+1} = λ z_k + w_k   <=>   lfilter([1], [1, -λ], w) shifted by one sample
        out[:, i] = lfilter([1.0], [1.0, -li], Z[:, i], axis=0)
    X = np.zeros((U.shape[0] + 1,) + U.shape[1:])
    X[1:] = np.einsum("ij,kj...->ki...", V, out).real
    return X


def damped_matrices(parts: Parts, theta):
    """M̂, Ĉ, K̂ (n, n) and their derivatives dM, dC, dK (p, n, n) at θ (p,)."""
    th = np.asarray(theta, dtype=np.float64)
    M, K = mass_stiffness(parts, th)
    dM, dK = parts.dM, parts.dK
    p = th.size
    z = parts.kinds.index("damping_ratio") if "damping_ratio" in parts.kinds else None
    if parts.rayleigh is not None and z is None:
        a, b = (float(c) for c in parts.rayleigh)
        da = np.zeros(p)
        db = np.zeros(p)
    else:
        zeta = th[z] if z is not None else parts.zeta0
        w2, Phi = modal(M, K)
        i, j = (int(m) - 1 for m in parts.modes)
        wi, wj = np.sqrt(w2[i]), np.sqrt(w2[j])
        s = wi + wj
        # a = 2ζ ωi ωj / (ωi + ωj),  b = 2ζ / (ωi + ωj)
        a, b = 2 * zeta * wi * wj / s, 2 * zeta / s
        # dω²_r/dθ = φ_rᵀ (dK - ω_r² dM) φ_r  (mass-normalised φ); dω = dω² / (2ω)
        dwi = np.einsum("n,pnm,m->p", Phi[:, i], dK - w2[i] * dM, Phi[:, i]) / (2 * wi)
        dwj = np.einsum("n,pnm,m->p", Phi[:, j], dK - w2[j] * dM, Phi[:, j]) / (2 * wj)
        da = 2 * zeta * (wj ** 2 * dwi + wi ** 2 * dwj) / s ** 2
        db = -2 * zeta * (dwi + dwj) / s ** 2
        if z is not None:
            da[z] += 2 * wi * wj / s
            db[z] += 2 / s
    C = a * M + b * K
    # dC_j = da_j M + a dM_j + db_j K + b dK_j
    dC = da[:, None, None] * M + a * dM + db[:, None, None] * K + b * dK
    return M, C, K, dM, dC, dK


@dataclass
class TimeModel:
    """Parametric reduced model with measured inputs and observed outputs.

    Attributes
    ----------
    parts : Parts
    B : ndarray, shape (n, nf)           force distribution (reduced coordinates)
    out_rows : ndarray, shape (nch, n)   observation rows
    out_kind : ndarray, shape (nch,)     0 displacement [m], 1 velocity [m/s], 2 acceleration
    dt : float                           sample interval [s]
    substeps : int                       Newmark steps per sample
    """

    parts: Parts
    B: np.ndarray
    out_rows: np.ndarray
    out_kind: np.ndarray
    dt: float
    substeps: int = 4

    def discrete(self, theta, jac: bool = True):
        """Per-sample matrices Φ (2n,2n), G0, G1 (2n,nf), output Cy (nch,2n), Dy (nch,nf)
        and, with ``jac``, their derivatives (p, ...)."""
        M, C, K, dM, dC, dK = damped_matrices(self.parts, theta)
        n = M.shape[0]
        p = dM.shape[0] if jac else 0
        Mi = np.linalg.inv(M)
        MiK, MiC, MiB = Mi @ K, Mi @ C, Mi @ self.B
        I = np.eye(2 * n)
        Ac = np.zeros((2 * n, 2 * n))
        Ac[:n, n:] = np.eye(n)
        Ac[n:, :n], Ac[n:, n:] = -MiK, -MiC
        Bc = np.vstack([np.zeros_like(MiB), MiB])
        h = self.dt / self.substeps
        Q = I - 0.5 * h * Ac
        Qi = np.linalg.inv(Q)
        Ad = Qi @ (I + 0.5 * h * Ac)
        Bd = Qi @ (0.5 * h * Bc)
        dAc = np.zeros((p, 2 * n, 2 * n))
        dBc = np.zeros((p, 2 * n, self.B.shape[1]))
        if p:
            # d(M⁻¹X) = M⁻¹ (dX - dM M⁻¹X)
            dAc[:, n:, :n] = -Mi @ (dK - dM @ MiK)
            dAc[:, n:, n:] = -Mi @ (dC - dM @ MiC)
            dBc[:, n:, :] = -Mi @ (dM @ MiB)
        dAd = Qi @ (0.5 * h * dAc) @ (I + Ad)
        dBd = (0.5 * h) * (Qi @ (dAc @ Bd + dBc))
        Phi, G0, G1 = I.copy(), np.zeros_like(Bd), np.zeros_like(Bd)
        dPhi, dG0, dG1 = np.zeros_like(dAd), np.zeros_like(dBd), np.zeros_like(dBd)
        s = self.substeps
        for j in range(s):
            # f at sub-step j: (1 - j/s) f_k + (j/s) f_{k+1}
            c0 = (1 - j / s) + (1 - (j + 1) / s)
            c1 = j / s + (j + 1) / s
            dPhi = dAd @ Phi + Ad @ dPhi
            dG0 = dAd @ G0 + Ad @ dG0 + c0 * dBd
            dG1 = dAd @ G1 + Ad @ dG1 + c1 * dBd
            Phi, G0, G1 = Ad @ Phi, Ad @ G0 + c0 * Bd, Ad @ G1 + c1 * Bd
        R = self.out_rows
        nch = R.shape[0]
        Cy = np.zeros((nch, 2 * n))
        Dy = np.zeros((nch, self.B.shape[1]))
        dCy = np.zeros((p, nch, 2 * n))
        dDy = np.zeros((p, nch, self.B.shape[1]))
        for c, (row, kind) in enumerate(zip(R, self.out_kind)):
            if kind == 0:
                Cy[c, :n] = row
            elif kind == 1:
                Cy[c, n:] = row
            else:
                # a = M⁻¹(B f - C v - K u)
                Cy[c] = row @ Ac[n:]
                Dy[c] = row @ MiB
                dCy[:, c] = row @ dAc[:, n:]
                dDy[:, c] = row @ dBc[:, n:]
        return (Phi, G0, G1, Cy, Dy), (dPhi, dG0, dG1, dCy, dDy)

    def run(self, theta, F, jac: bool = True):
        """Response to the force record F (nt, nf) from rest.

        Returns
        -------
        Y : ndarray, shape (nt, nch)
        dY : ndarray, shape (p, nt, nch) (``None`` without ``jac``)
        """
        F = np.asarray(F, dtype=np.float64)
        (Phi, G0, G1, Cy, Dy), (dPhi, dG0, dG1, dCy, dDy) = self.discrete(theta, jac)
        nt = F.shape[0]
        U = F[:-1] @ G0.T + F[1:] @ G1.T                  # (nt-1, 2n) input per step
        X = propagate(Phi, U)
        Y = X @ Cy.T + F @ Dy.T
        if not jac:
            return Y, None
        p = dPhi.shape[0]
        # pseudo-input of the sensitivity recursion: dΦ x_k + dG0 f_k + dG1 f_{k+1}
        W = (np.einsum("pij,kj->kip", dPhi, X[:-1]) + np.einsum("pij,kj->kip", dG0, F[:-1])
             + np.einsum("pij,kj->kip", dG1, F[1:]))      # (nt-1, 2n, p)
        dX = propagate(Phi, W)
        dY = (np.einsum("kip,ci->pkc", dX, Cy) + np.einsum("pci,ki->pkc", dCy, X)
              + np.einsum("pcf,kf->pkc", dDy, F))
        return Y, dY
