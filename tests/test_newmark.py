"""Forward Newmark-beta against Chopra's worked example and an analytic SDOF response."""

import numpy as np

from edge.estimator.newmark import newmark


def test_chopra_example_5_3():
    # Chopra, Dynamics of Structures, Example 5.3 (average acceleration, dt = 0.1 s):
    # m = 0.2533, k = 10, zeta = 0.05, p = 10 sin(pi t / 0.6) for t <= 0.6 s.
    m, k, zeta, dt = 0.2533, 10.0, 0.05, 0.1
    c = 2 * zeta * np.sqrt(k * m)
    t = np.arange(11) * dt
    p = np.where(t <= 0.6 + 1e-12, 10 * np.sin(np.pi * t / 0.6), 0.0)
    u, _, _ = newmark([[m]], [[c]], [[k]], p, dt)
    chopra = [0.0437, 0.2326, 0.6121, 1.0825, 1.4309, 1.4231, 0.9622, 0.1908, -0.6044, -1.1442]
    # the book prints 4 decimals: agreement within 1e-3
    np.testing.assert_allclose(u[1:, 0], chopra, atol=1e-3)


def test_free_vibration_period_error():
    # Average acceleration has no amplitude decay and a period elongation
    # T_bar/T = sqrt(1 + (w dt)^2 / 4) (Chopra, Sect. 5.5): check the phase after 20 cycles.
    w, dt = 2 * np.pi, 0.01
    nt = 2001
    u, _, _ = newmark([[1.0]], [[0.0]], [[w * w]], np.zeros(nt), dt, u0=[1.0])
    wbar = 2 * np.arctan(w * dt / 2) / dt  # exact discrete frequency of the trapezoidal rule
    t = np.arange(nt) * dt
    np.testing.assert_allclose(u[:, 0], np.cos(wbar * t), atol=1e-9)
    np.testing.assert_allclose(np.max(np.abs(u[:, 0])), 1.0, atol=1e-12)  # no decay
