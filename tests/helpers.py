"""Small models shared by tests (built with NumPy only, no FE package needed)."""

import numpy as np

from edge.bundle import Bundle, IdentifiedForce, SensorChannel, VirtualOutput


def strip_toml(n_elements) -> str:
    """Model-file head of the paper's strip (170 x 13 x 1.2 mm aluminium, E 69 GPa, rho 2700
    kg/m^3) as ``n_elements`` Euler-Bernoulli beams along x; boundaries, sensors and the rest
    are the caller's. ``n_elements`` may be a placeholder string replaced later."""
    return f"""
name = "strip"
type = "beam"
[materials.aluminium]
E = 69e9
nu = 0.3
rho = 2700.0
[beam]
theory = "euler-bernoulli"
[beam.sections.strip]
material = "aluminium"
rectangle = {{ b = 0.013, h = 0.0012 }}
[[beam.members]]
name = "strip"
section = "strip"
line = {{ start = [0.0, 0.0, 0.0], end = [0.17, 0.0, 0.0], n = {n_elements} }}
orientation = [0.0, 0.0, 1.0]
"""


def chain_matrices(n=8, k=1e4, m=0.1, rayleigh=(1.0, 1e-4)):
    """Fixed-free spring-mass chain: M = m I, K tridiagonal, C = a M + b K (SI units)."""
    K = np.zeros((n, n))
    for i in range(n - 1):
        K[i, i] += k
        K[i + 1, i + 1] += k
        K[i, i + 1] -= k
        K[i + 1, i] -= k
    K[0, 0] += k  # ground spring at the fixed end
    M = np.eye(n) * m
    C = rayleigh[0] * M + rayleigh[1] * K
    return M, C, K


def chain_bundle(n=8, window=1, alpha=1e-3, kinds=("displacement",), dt=1e-3, **kw):
    """A chain bundle with collocated channels of the given kinds at the free end."""
    M, C, K = chain_matrices(n, **kw)
    weight = {"displacement": 1e12, "velocity": 1e8, "acceleration": 1e4}
    chans = [SensorChannel(f"y{i}", dof=n - 1, kind=kd, weight=weight[kd],
                     unit={"displacement": "m", "velocity": "m/s", "acceleration": "m/s^2"}[kd],
                     node=n - 1, dof_name="ux") for i, kd in enumerate(kinds)]
    return Bundle(M=M, C=C, K=K, dt=dt, channels=chans,
                  forces=[IdentifiedForce("F", dof=n - 1, node=n - 1, dof_name="ux")],
                  outputs=[VirtualOutput("u_mid", row=np.eye(n)[n // 2], node=n // 2, dof_name="ux"),
                           VirtualOutput("a_mid", row=np.eye(n)[n // 2], kind="acceleration",
                                  unit="m/s^2")],
                  alpha=alpha, window=window, meta={"name": "chain"})
