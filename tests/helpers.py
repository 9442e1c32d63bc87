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


def toy_map_bundle():
    """A 2-DOF chain bundle (channel ``y2``, force ``F``, dt 5 ms) with one small trained ONNX
    inverse map ``mlp`` of (k1, zeta, k2) and its parametric model: the toy of
    tests/test_inverse.py trained briefly (60 samples, 8 hidden units: a valid map, not an
    accurate one; ~3 s). Needs the offline extra."""
    from edge import inverse as EI
    from edge.features import FeatureConfig, bins_of_interest, extract_batch
    from offline.inverse import dataset, export, parametric as P, sampling, spec
    from offline.inverse.mlp import train_mlp

    names, kinds = ("k1", "zeta", "k2"), ("spring", "damping_ratio", "spring")
    bounds = np.array([[8000.0, 12000.0], [0.01, 0.05], [3000.0, 6000.0]])

    def chain2(th):
        K = np.array([[th[0] + th[2], -th[2]], [-th[2], th[2]]])
        return np.diag([1.0, 1.0]), K

    pm = P.from_builder(chain2, bounds.mean(1), bounds, names, kinds,
                        out_rows=np.eye(2)[[1]], force=np.eye(2)[1], channels=("y2",))
    ex = spec.Experiment(excitation={"type": "pulse", "amplitude": 1.0, "width": 0.004},
                         duration=0.5, rate=200.0, channels=("y2",), noise=0.005)
    X = sampling.latin_hypercube(60, pm.bounds, seed=0)
    Xv = sampling.uniform(20, pm.bounds, seed=1)
    sigma = dataset.noise_sigma(pm, ex)
    Y, Yv = (dataset.generate(pm, ex, x, seed=s, sigma=sigma, progress=False)
             for x, s in ((X, 10), (Xv, 11)))
    cfg = FeatureConfig(kind="fft_ri_bins", bins=tuple(bins_of_interest(
        P.frequency_bands(pm, ex.rate / 2), ex.n, ex.rate, 2)))
    Ft, Fv = (extract_batch(cfg.kind, y, ex.rate, cfg) for y in (Y, Yv))
    tm = train_mlp(Ft, X, Fv, Xv, hidden=(8,), max_epochs=20, patience=5, seed=0,
                   progress=False)
    arrays, meta = export.artifact(tm, "mlp", Fv, pm.names, pm.bounds, cfg, ex.to_dict(),
                                   ex.n, 1, Ft, sigma)
    parts_arrays, parts_meta = pm.parts.to_extras()
    M, C, K = EI.matrices(pm.parts, pm.parts.theta0)
    return Bundle(M=M, C=C, K=K, dt=1.0 / 200.0, channels=[SensorChannel("y2", dof=1)],
                  forces=[IdentifiedForce("F", dof=1)], alpha=1e-6, window=2,
                  extras={**arrays, **parts_arrays},
                  meta={"inverse": {"maps": {"mlp": meta}, "parts": parts_meta,
                                    "default": "mlp"}})
