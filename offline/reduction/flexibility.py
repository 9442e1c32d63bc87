"""Static and residual flexibility of the slave set, applied to vectors (never formed).

Paper 004 eq. 4c: ``F_rs = K_ss^-1 - Psi_d Gamma_d^-1 Psi_d^T``, with ``Psi_d`` the dominant
slave modes (eq. 5, mass-normalised) and ``Gamma_d = diag(gamma_i)``. In modal form
``F_rs = sum_{i > N_d} psi_i psi_i^T / gamma_i``: the flexibility of the *residual* slave modes.

Unrestrained slave set
----------------------
If the masters do not restrain the slaves, ``K_ss`` is singular (its rigid-body modes ``R``,
``gamma = 0``, are the lowest slave modes and must be among the dominant ones). ``K_ss^-1``
then does not exist, but ``F_rs`` (modal form above) does, and so does the static response to
a load ``b`` with ``R^T b = 0`` (true of the columns of ``K_sm``, see docs/reduction.md). Both
are computed from the factorisation of ``K_sigma = K_ss - sigma M_ss`` (``sigma < 0``) by the
fixed-point iteration on the residual subspace

    x_r     = x - M_ss Psi_d Psi_d^T x                    (remove dominant components)
    z_{j+1} = P (K_sigma^-1 (x_r - sigma M_ss z_j)),   P = I - Psi_d Psi_d^T M_ss,

whose fixed point is ``F_rs x`` and which contracts each residual component by
``|sigma| / (gamma_i - sigma) <= |sigma| / (gamma_{N_d+1} - sigma)``. With ``sigma = 0`` it
is one step and equals eq. 4c literally (which is what is done then).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .eigen import Factor

#: Relative change below which the fixed-point iteration stops.
RTOL = 1e-14
#: Upper bound on iterations (the contraction factor is reported if it is reached).
MAX_ITER = 200


@dataclass
class Flexibility:
    """Flexibility operators of the slave set.

    Parameters
    ----------
    factor : Factor
        Factorisation of ``K_ss - sigma M_ss`` (``sigma <= 0``).
    M_ss : scipy.sparse matrix, shape (Ns, Ns)
        Slave mass.
    Psi : ndarray, shape (Ns, Nd)
        Dominant slave modes, mass-normalised, rigid-body modes first.
    gamma : ndarray, shape (Nd,)
        Their eigenvalues [rad^2/s^2].
    n_rigid : int
        Number of rigid-body modes among them (``gamma`` treated as 0).

    Attributes
    ----------
    iterations : list of int
        Fixed-point iterations used per call (empty when ``sigma = 0``).
    """

    factor: Factor
    M_ss: object
    Psi: np.ndarray
    gamma: np.ndarray
    n_rigid: int = 0
    iterations: list = field(default_factory=list)

    def __post_init__(self):
        if self.factor.sigma != 0.0 and self.Psi.shape[1] < self.n_rigid:
            raise ValueError(
                f"the slave set has {self.n_rigid} rigid-body modes but only "
                f"{self.Psi.shape[1]} dominant modes are kept")

    # -------------------------------------------------------------------------- operators
    def residual(self, X: np.ndarray) -> np.ndarray:
        """``F_rs X`` (eq. 4c), shape (Ns, r) for ``X`` of shape (Ns, r)."""
        X = np.asarray(X, dtype=np.float64)
        Psi, gamma = self.Psi, self.gamma
        if self.factor.sigma == 0.0:
            # F_rs X = K_ss^-1 X - Psi_d Gamma_d^-1 Psi_d^T X   (eq. 4c)
            Z = self.factor.solve(X) - Psi @ ((Psi.T @ X) / gamma[:, None])
            # Z <- P Z: exact arithmetic gives Psi_d^T M_ss Z = 0; the subtraction above
            # cancels (badly so when most slave modes are dominant), the projection restores it
            return self._project(Z)
        return self._iterate(X)

    def static(self, X: np.ndarray) -> np.ndarray:
        """Static slave response ``K_ss^-1 X`` (``K_ss^+ X``, M-orthogonal to the rigid modes,
        when ``K_ss`` is singular; ``X`` must then be orthogonal to them)."""
        X = np.asarray(X, dtype=np.float64)
        if self.factor.sigma == 0.0:
            # Z = K_ss^-1 X
            return self.factor.solve(X)
        nr = self.n_rigid
        Pe, ge = self.Psi[:, nr:], self.gamma[nr:]
        # K_ss^+ X = F_rs X + Psi_e Gamma_e^-1 Psi_e^T X   (elastic dominant modes only)
        return self._iterate(X) + Pe @ ((Pe.T @ X) / ge[:, None])

    # ------------------------------------------------------------------------- internals
    def _project(self, Z: np.ndarray) -> np.ndarray:
        # P Z = Z - Psi_d (Psi_d^T M_ss Z)
        return Z - self.Psi @ (self.Psi.T @ (self.M_ss @ Z))

    def _iterate(self, X: np.ndarray) -> np.ndarray:
        sigma = self.factor.sigma
        Psi = self.Psi
        # x_r = x - M_ss Psi_d Psi_d^T x
        Xr = X - self.M_ss @ (Psi @ (Psi.T @ X))
        Z = self._project(self.factor.solve(Xr))
        scale = max(float(np.max(np.abs(Z), initial=0.0)), np.finfo(float).tiny)
        for it in range(1, MAX_ITER + 1):
            # z_{j+1} = P K_sigma^-1 (x_r - sigma M_ss z_j)   (fixed point: K_ss z = x_r)
            Zn = self._project(self.factor.solve(Xr - sigma * (self.M_ss @ Z)))
            delta = float(np.max(np.abs(Zn - Z), initial=0.0))
            Z = Zn
            if delta <= RTOL * scale:
                break
        self.iterations.append(it)
        return Z
