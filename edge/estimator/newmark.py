"""Newmark-beta time integration (plain NumPy), the building block of the estimator.

Notation follows paper 004 (Oh et al.), eq. 14-15 and Table 1, with ``gamma`` for its delta::

    Keff = M / (beta dt^2) + gamma C / (beta dt) + K                                  (15b)
    r    = M (u/(beta dt^2) + v/(beta dt) + (1/(2 beta) - 1) a)
         + C (gamma u/(beta dt) + (gamma/beta - 1) v + dt (gamma/(2 beta) - 1) a)     (15d)
    u+   = Keff^-1 (r + f+)                                                           (15a)
    a+   = (u+ - u)/(beta dt^2) - v/(beta dt) - (1/(2 beta) - 1) a                    (14b)
    v+   = v + dt ((1 - gamma) a + gamma a+)                                          (14a)
"""

from __future__ import annotations

import numpy as np


def effective_stiffness(M, C, K, dt, beta=0.25, gamma=0.5):
    """Keff of eq. 15b, shape (n, n)."""
    # Keff = M/(beta dt^2) + gamma C/(beta dt) + K
    return M / (beta * dt * dt) + gamma * C / (beta * dt) + K


def internal_force(M, C, u, v, a, dt, beta=0.25, gamma=0.5):
    """Internal force term r of eq. 15d (Table 1, step 2-1), shape (n,)."""
    # r = M (u/(b dt^2) + v/(b dt) + (1/(2b) - 1) a) + C (g u/(b dt) + (g/b - 1) v + dt (g/(2b) - 1) a)
    rm = u / (beta * dt * dt) + v / (beta * dt) + (0.5 / beta - 1.0) * a
    rc = gamma * u / (beta * dt) + (gamma / beta - 1.0) * v + dt * (0.5 * gamma / beta - 1.0) * a
    return M @ rm + C @ rc


def update_rates(u_new, u, v, a, dt, beta=0.25, gamma=0.5):
    """Velocity and acceleration at the new step (eq. 14a-b); returns (v+, a+)."""
    # a+ = (u+ - u)/(beta dt^2) - v/(beta dt) - (1/(2 beta) - 1) a
    a_new = (u_new - u) / (beta * dt * dt) - v / (beta * dt) - (0.5 / beta - 1.0) * a
    # v+ = v + dt ((1 - gamma) a + gamma a+)
    v_new = v + dt * ((1.0 - gamma) * a + gamma * a_new)
    return v_new, a_new


def newmark(M, C, K, F, dt, beta=0.25, gamma=0.5, u0=None, v0=None):
    """Forward Newmark-beta response to a known load history.

    Parameters
    ----------
    M, C, K : ndarray, shape (n, n)
        Mass [kg], damping [N s/m] and stiffness [N/m] matrices.
    F : ndarray, shape (nt, n)
        Load at every time step t_k = k dt, k = 0..nt-1 [N].
    dt : float
        Time step [s].
    beta, gamma : float
        Newmark parameters (1/4, 1/2: average acceleration).
    u0, v0 : ndarray, shape (n,), optional
        Initial displacement [m] and velocity [m/s] (default zero).

    Returns
    -------
    u, v, a : ndarray, shape (nt, n)
        Displacement, velocity and acceleration at every step.
    """
    M = np.atleast_2d(np.asarray(M, dtype=float))
    C = np.atleast_2d(np.asarray(C, dtype=float))
    K = np.atleast_2d(np.asarray(K, dtype=float))
    F = np.asarray(F, dtype=float)
    if F.ndim == 1:
        F = F[:, None]
    nt, n = F.shape
    u = np.zeros((nt, n))
    v = np.zeros((nt, n))
    a = np.zeros((nt, n))
    if u0 is not None:
        u[0] = u0
    if v0 is not None:
        v[0] = v0
    # initial acceleration from equilibrium: M a0 = f0 - C v0 - K u0
    a[0] = np.linalg.solve(M, F[0] - C @ v[0] - K @ u[0])
    Keff_inv = np.linalg.inv(effective_stiffness(M, C, K, dt, beta, gamma))
    for k in range(nt - 1):
        r = internal_force(M, C, u[k], v[k], a[k], dt, beta, gamma)
        u[k + 1] = Keff_inv @ (r + F[k + 1])
        v[k + 1], a[k + 1] = update_rates(u[k + 1], u[k], v[k], a[k], dt, beta, gamma)
    return u, v, a
