"""Time-domain response of the parametric reduced model and its exact parameter sensitivities.

The model is the inverse maps' parametric model (:class:`edge.inverse.Parts`: M̂(θ), K̂(θ)
linear in θ, Rayleigh damping: the file's fixed (a, b) or ratio ζ at two modes) driven by
measured forces. Time integration: average-acceleration Newmark, which for a linear system
is the trapezoidal rule on x = [u; v]::

    ẋ = A_c x + B_c f,   A_c = [[0, I], [-M⁻¹K, -M⁻¹C]],   B_c = [[0], [M⁻¹ B]]
    Q = I - h/2 A_c,   A_d = Q⁻¹ (I + h/2 A_c),   B_d = Q⁻¹ h/2 B_c
    x_{j+1} = A_d x_j + B_d (f_j + f_{j+1})                   (h = dt / substeps)

with the force at the sub-step points up-sampled from the record (band-limited, or linear).
``substeps`` steps are composed into one per sample, x_{k+1} = Φ x_k + Σ_j G_j f_{k,j}. The sensitivities are the exact derivatives of this
discrete recursion (not finite differences)::

    dA_d = Q⁻¹ h/2 dA_c (I + A_d),   dB_d = Q⁻¹ h/2 (dA_c B_d + dB_c)
    dx_{k+1} = Φ dx_k + dΦ x_k + Σ_j dG_j f_{k,j}

dM̂, dK̂ come from the parametric model (exact: K̂ is linear in θ); dĈ from the Rayleigh
rule, with dω²_r/dθ_j = φ_rᵀ (dK̂_j - ω_r² dM̂_j) φ_r for a ratio-defined damping. Outputs:
displacement rows·u, velocity rows·v, acceleration rows·M⁻¹(B f - C v - K u). The record
starts at rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge.inverse import Parts, modal
from offline._deps import need
from offline.calibration.bilinear import matrices
from offline.calibration.kernel import _propagate


def propagate_loop(Phi, U):
    """x_0 = 0, x_{k+1} = Φ x_k + U_k: plain loop (the reference twin of :func:`propagate`).

    U : (nt-1, m) or (nt-1, m, p) -> X : (nt, m) or (nt, m, p)."""
    X = np.zeros((U.shape[0] + 1,) + U.shape[1:])
    x = X[0]
    for k in range(U.shape[0]):
        x = Phi @ x + U[k]
        X[k + 1] = x
    return X


def propagate(Phi, U):
    """Same recursion by the compiled kernel :func:`offline.calibration.kernel._propagate`
    (real arithmetic, O(nt m² q); the earlier eigen-decoupled ``lfilter`` route fell back to
    the Python loop whenever Φ's eigenvectors were ill-conditioned, i.e. on most models)."""
    Phi = np.ascontiguousarray(Phi, dtype=np.float64)
    U = np.asarray(U, dtype=np.float64)
    if Phi.ndim != 2 or Phi.shape[0] != Phi.shape[1] or U.ndim not in (2, 3) \
            or U.shape[1] != Phi.shape[0]:
        raise ValueError(f"propagate: Φ {Phi.shape} and U {U.shape} do not match (m, m) and "
                         f"(nt-1, m[, q])")
    U3 = np.ascontiguousarray(U.reshape(U.shape[0], U.shape[1], -1))
    X = np.empty((U3.shape[0] + 1,) + U3.shape[1:])
    _propagate(Phi, U3, X)
    return X.reshape((U.shape[0] + 1,) + U.shape[1:])


def damped_matrices(parts: Parts, theta):
    """M̂, Ĉ, K̂ (n, n) and their derivatives dM, dC, dK (p, n, n) at θ (p,)."""
    th = np.asarray(theta, dtype=np.float64)
    # linear parts, or products of parameters (offline.calibration.bilinear)
    M, K, dM, dK = matrices(parts, th)
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
    measurement : Measurement or None    what the records hold: the response through the
                                         model file's chain (:mod:`.measurement`); None:
                                         point samples
    """

    parts: Parts
    B: np.ndarray
    out_rows: np.ndarray
    out_kind: np.ndarray
    dt: float
    substeps: int = 4
    interpolation: str = "bandlimited"
    measurement: object = None

    def fine_force(self, F) -> np.ndarray:
        """Force at the sub-step points, ((nt-1) substeps + 1, nf).

        ``linear``: linear between samples (attenuates a force near the Nyquist frequency:
        sinc² response, 11 % at 0.19 of the sample rate); ``bandlimited`` (default): polyphase
        FIR up-sampling (``scipy.signal.resample_poly``), exact for a band-limited force
        away from the record's ends.
        """
        s = self.substeps
        nt = F.shape[0]
        if self.interpolation == "linear" or s == 1 or F.shape[1] == 0:
            t = np.arange((nt - 1) * s + 1) / s
            return np.column_stack([np.interp(t, np.arange(nt), F[:, j]) for j in range(F.shape[1])]) \
                if F.shape[1] else np.zeros((t.size, 0))
        up = need("scipy.signal").resample_poly(F, s, 1, axis=0)
        return up[:(nt - 1) * s + 1]

    def discrete(self, theta, jac: bool = True):
        """Per-sample matrices Φ (2n,2n), G (s+1, 2n, nf) (load at the sub-step points),
        output Cy (nch,2n), Dy (nch,nf) and, with ``jac``, their derivatives (p, ...)."""
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
        # x_{k+1} = Φ x_k + Σ_j G_j f_{k,j}, f_{k,j} the force at sub-step point j = 0..s:
        # sub-step i uses f_i and f_{i+1}, so G_j = A_d^{s-1-j} B_d [j < s] + A_d^{s-j} B_d [j > 0]
        s = self.substeps
        Pw = [I]                                           # A_d^0 .. A_d^s
        dPw = [np.zeros_like(dAd)]
        for _ in range(s):
            dPw.append(dAd @ Pw[-1] + Ad @ dPw[-1])
            Pw.append(Ad @ Pw[-1])
        Phi, dPhi = Pw[s], dPw[s]
        G = np.zeros((s + 1,) + Bd.shape)
        dG = np.zeros((s + 1,) + dBd.shape)
        for j in range(s + 1):
            for e in ([s - 1 - j] if j < s else []) + ([s - j] if j > 0 else []):
                G[j] += Pw[e] @ Bd
                dG[j] += dPw[e] @ Bd + Pw[e] @ dBd
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
        return (Phi, G, Cy, Dy), (dPhi, dG, dCy, dDy)

    def substep_force(self, F) -> np.ndarray:
        """The force at the sub-step points of every sample interval, (nt-1, (s+1) nf) with
        column j nf + f = force f at sub-step point j: input of :meth:`run` that depends on
        the record only (computed once per record)."""
        F = np.asarray(F, dtype=np.float64)
        nt, s = F.shape[0], self.substeps
        Ff = self.fine_force(F)                            # ((nt-1) s + 1, nf)
        Fk = np.stack([Ff[j:j + (nt - 1) * s:s] for j in range(s + 1)], axis=1)
        return np.ascontiguousarray(Fk.reshape(nt - 1, (s + 1) * F.shape[1]))

    def run(self, theta, F, jac: bool = True, Fk=None):
        """Response to the force record F (nt, nf) from rest (``Fk``: :meth:`substep_force`
        of F, when the caller keeps it).

        Returns
        -------
        Y : ndarray, shape (nt, nch)
        dY : ndarray, shape (p, nt, nch) (``None`` without ``jac``)
        """
        F = np.asarray(F, dtype=np.float64)
        (Phi, G, Cy, Dy), (dPhi, dG, dCy, dDy) = self.discrete(theta, jac)
        Fk = self.substep_force(F) if Fk is None else Fk
        m = Phi.shape[0]
        # u_k = Σ_j G_j f_{k,j}: one matrix product over the stacked sub-step forces
        U = Fk @ G.transpose(0, 2, 1).reshape(-1, m)       # (nt-1, 2n)
        X = propagate(Phi, U)
        Y = X @ Cy.T + F @ Dy.T
        meas = self.measurement.apply if self.measurement is not None else (lambda a: a)
        if not jac:
            return meas(Y), None
        p = dPhi.shape[0]
        # pseudo-input of the sensitivity recursion: dΦ x_k + Σ_j dG_j f_{k,j}
        W = X[:-1] @ dPhi.transpose(2, 0, 1).reshape(m, p * m)
        W += Fk @ dG.transpose(0, 3, 1, 2).reshape(-1, p * m)
        dX = propagate(Phi, W.reshape(-1, p, m).transpose(0, 2, 1))     # (nt, 2n, p)
        # dy = Cy dx + dCy x + dDy f
        dY = dX.transpose(2, 0, 1) @ Cy.T + X @ dCy.transpose(0, 2, 1) + F @ dDy.transpose(0, 2, 1)
        # the chain is linear: the recorded sensitivities are the sensitivities' conversions
        return meas(Y), meas(dY)
