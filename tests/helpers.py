"""Small models shared by tests (built with NumPy only, no FE package needed)."""

import io

import numpy as np

from edge.bundle import Bundle, IdentifiedForce, SensorChannel, VirtualOutput


def strip_toml(n_elements) -> str:
    """Model-file head of the paper's strip (170 x 13 x 1.2 mm aluminium, E 69 GPa, rho 2700
    kg/m^3) as ``n_elements`` Euler-Bernoulli beams along x; boundaries, sensors and the rest
    are the caller's. ``n_elements`` may be a placeholder string replaced later."""
    # imported here: the edge tier imports this module without the offline stack (no scipy)
    from offline.model.strip import strip_head
    return strip_head(n_elements)


def root_spring_strip(tip_mass: bool = True) -> str:
    """:func:`strip_toml` (17 beams) fixed at the root but for a rotational spring ``root``
    (10 N m/rad, ry), in-plane motion locked, with a 1 g ``tip`` mass at 170 mm unless not
    ``tip_mass``; 1 % Rayleigh damping at 30 and 200 Hz; Craig-Bampton with 6 modes and the tip
    uz and the root ry as masters; the laser ``d110``. Forces, outputs and the rest are the
    caller's (tests/test_inverse.py, test_model_update.py, test_paramchain.py)."""
    tip = ('[[mass]]\nname = "tip"\nselect = { at = [0.17, 0.0, 0.0] }\nm = 0.001\n'
           if tip_mass else "")
    return strip_toml(17) + """[[boundary]]
select = { at = [0.0, 0.0, 0.0] }
dofs = ["ux", "uy", "uz", "rx", "rz"]
[[boundary]]
select = { box = [[0.001, -0.01, -0.01], [0.2, 0.01, 0.01]] }
dofs = ["ux", "uy", "rx", "rz"]
[[spring]]
name = "root"
select = { at = [0.0, 0.0, 0.0] }
dof = "ry"
k = 10.0
""" + tip + """[damping]
ratios = [[30.0, 0.01], [200.0, 0.01]]
[reduction]
method = "cb"
modes = 6
[[reduction.masters]]
select = { at = [0.17, 0.0, 0.0] }
dofs = ["uz"]
[[reduction.masters]]
select = { at = [0.0, 0.0, 0.0] }
dofs = ["ry"]
[[sensors]]
name = "d110"
select = { at = [0.11, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
"""


def free_free_beam(name: str, length: float, h: float, n: int, modes: int, master_x: float,
                   master_dofs: str) -> str:
    """Model-file head of a free-free steel beam (E 210 GPa, 40 mm wide, ``h`` high, ``n``
    Euler-Bernoulli elements along x from 0 to ``length``, bending in x-z), 1 % damping at 20
    and 180 Hz, GMR+ with ``modes`` modes and a master at ``master_x`` (``master_dofs``, a TOML
    list's items), the smoother at 400 rows/s; sensors, forces and the rest are the caller's
    (tests/test_limit_aliases.py, tests/test_load_split.py)."""
    return f"""name = "{name}"
type = "beam"
[materials.steel]
E = 210e9
nu = 0.3
rho = 7850.0
[beam]
theory = "euler-bernoulli"
[beam.sections.main]
material = "steel"
rectangle = {{ b = 0.04, h = {h} }}
[[beam.members]]
name = "span"
section = "main"
line = {{ start = [0.0, 0.0, 0.0], end = [{length}, 0.0, 0.0], n = {n} }}
orientation = [0.0, 0.0, 1.0]
[[boundary]]
select = {{ box = [[-0.01, -0.01, -0.01], [{round(length + 0.01, 6)}, 0.01, 0.01]] }}
dofs = ["ux", "uy", "rx", "rz"]
[damping]
ratios = [[20.0, 0.01], [180.0, 0.01]]
[reduction]
method = "gmr+"
modes = {modes}
[[reduction.masters]]
select = {{ at = [{master_x}, 0.0, 0.0] }}
dofs = [{master_dofs}]
[estimator]
rate = 400.0
method = "smoother"
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


#: The tiny correction network of the edge-tier hybrid tests, g = c * tanh(W1^T s + b1)^T W2
#: (2 inputs, 3 tanh units, 1 output); tests/data/hybrid_tiny.onnx holds it as ONNX, written by
#: :func:`tiny_hybrid_onnx` (tests/test_hybrid.py checks the file is what it writes).
TINY_W1 = np.array([[0.8, -0.5, 0.3], [0.2, 0.4, -0.7]])
TINY_B1 = np.array([0.1, -0.2, 0.05])
TINY_W2 = np.array([[1.5], [-0.8], [0.6]])


def tiny_g(s, c=1.0):
    """NumPy value of the tiny network at inputs ``s`` (..., 2) -> (..., 1)."""
    return c * np.tanh(np.asarray(s) @ TINY_W1 + TINY_B1) @ TINY_W2


def tiny_hybrid_onnx() -> bytes:
    """The tiny network as ONNX bytes (onnx.helper; needs the offline extra)."""
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(a, n) for a, n in
             ((TINY_W1, "W1"), (TINY_B1, "b1"), (TINY_W2, "W2"))]
    nodes = [helper.make_node("MatMul", ["s", "W1"], ["h0"]),
             helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Tanh", ["h1"], ["h2"]),
             helper.make_node("MatMul", ["h2", "W2"], ["g"])]
    graph = helper.make_graph(nodes, "tiny_hybrid",
                              [helper.make_tensor_value_info("s", TensorProto.DOUBLE, [1, 2])],
                              [helper.make_tensor_value_info("g", TensorProto.DOUBLE, [1, 1])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="vsense-tests")
    model.ir_version = 8
    return model.SerializeToString()


def numpy_smoother_bundle(n=3, lag=5, dt=1e-3):
    """A small smoother bundle designed with NumPy alone (edge tier: no scipy): the chain of
    :func:`chain_bundle` (``n`` masses, a displacement channel at the free end, force there),
    its modal state plus one first-order force state (``xi' = -a xi + w``), the discrete
    model by :func:`edge.estimator.expm.expm`, the Riccati equation by fixed-point iteration.
    No model-check bands."""
    from edge.estimator.expm import expm
    from edge.estimator.operator import modal_basis

    b = chain_bundle(n=n, kinds=("displacement",), dt=dt)
    w2, Phi = modal_basis(b.M, b.K)
    Ct = Phi.T @ b.C @ Phi
    Ct = np.diag(np.diag(Ct))
    ns = 2 * n + 1
    Ac = np.zeros((ns, ns))
    for i in range(n):
        Ac[2 * i, 2 * i + 1] = 1.0
        Ac[2 * i + 1, 2 * i] = -w2[i]
        Ac[2 * i + 1, 2 * i + 1] = -Ct[i, i]
    Ac[1:2 * n:2, 2 * n] = Phi[n - 1]          # force at the free end
    Ac[2 * n, 2 * n] = -20.0
    A = expm(Ac * dt)
    mask = np.zeros((ns, ns), bool)
    for i in range(n):
        mask[2 * i:2 * i + 2, 2 * i:2 * i + 2] = True
    mask[:, 2 * n:] = True
    A = np.where(mask, A, 0.0)
    Q = np.zeros((ns, ns))
    Q[2 * n, 2 * n] = 40.0 * dt
    H = np.zeros((1, ns))
    H[0, 0:2 * n:2] = Phi[n - 1]
    Cq = np.zeros((1 + len(b.outputs), ns))
    Cq[0, 2 * n] = 1.0
    Cq[1, 0:2 * n:2] = Phi[n // 2]
    Cq[2, 0:2 * n:2] = -Phi[n // 2] * w2
    Cq[2, 1:2 * n:2] = -Phi[n // 2] * np.diag(Ct)
    Cq[2, 2 * n] = Phi[n // 2] @ Phi[n - 1]
    R = np.array([[1e-12]])
    P = np.eye(ns) * 1e-6
    for _ in range(20000):  # P = A P A^T - A P H^T S^-1 H P A^T + Q
        S = H @ P @ H.T + R
        Pn = A @ P @ A.T - A @ P @ H.T @ np.linalg.solve(S, H @ P @ A.T) + Q
        if np.max(np.abs(Pn - P)) <= 1e-14 * np.max(np.abs(P)):
            P = Pn
            break
        P = 0.5 * (Pn + Pn.T)
    S = H @ P @ H.T + R
    Sinv = np.linalg.inv(S)
    K = P @ H.T @ Sinv
    Abar = A - A @ K @ H
    G = np.zeros((lag + 1, Cq.shape[0], 1))
    Pj, Ps = P.copy(), P.copy()
    for j in range(lag + 1):
        Gx = Pj @ H.T @ Sinv
        G[j] = Cq @ Gx
        Ps -= Gx @ H @ Pj.T
        Pj = Pj @ Abar.T
    std = np.sqrt(np.clip(np.einsum("ij,jk,ik->i", Cq, Ps, Cq), 0.0, None))
    W = 200
    kf = {"A": A, "H": H, "K": K, "Cq": Cq, "G": G, "Sinv": Sinv, "std": std,
          "nis_window": np.array(W, dtype=np.int64), "nis_threshold": np.array(3.0 * W),
          "Wt": np.sqrt(Sinv), "band_ba": np.zeros((0, 5)), "band_gain": np.zeros(0),
          "band_threshold": np.zeros(0), "band_hz": np.zeros((0, 2))}
    meta = {"name": "chain-smoother", "estimator": {"method": "smoother", "lag": lag}}
    return b.replace(kf=kf, window=lag + 1, meta=meta)


def run_sample_path(est, y, fl, fast: bool):
    """Samples ``y`` (n, nch) with driver flags ``fl`` (n,) through the daemon's per-sample
    path of ``est`` (``edge.daemon.samplepath.SamplePath`` on its own arena and ring of 8
    slots), with the acquisition loop's choice per sample (``edge.daemon.loop.Daemon.
    _acquire``, block 1): the compiled call when the path allows it, else (or when it returns
    -2) the general path; ``fast=False``: the general path always. Returns ``(rows, stds,
    taken, est, path)``: per sample ``(row ready, seq, t_ns, flags, values)`` of its ring
    slot, the stated std after it, the compiled calls taken."""
    from edge.daemon.arena import Arena
    from edge.daemon.ring import Ring
    from edge.daemon.samplepath import SamplePath

    cap, nch = 8, y.shape[1]
    ar = Arena(cap, nch, est.n_forces, est.n_outputs, 1, est.delay, 16)
    ring = Ring(cap, nch, arena=ar)
    path = SamplePath(est, ring, ar, [f"y{c}" for c in range(nch)], 10)
    path.set_clock_offset(0)
    path.refresh_fast()
    rows, stds, taken = [], [], 0
    for k in range(y.shape[0]):
        v, t, f = ring.write_span(1)
        v[0], t[0], f[0] = y[k], 1_000_000 * k, fl[k]
        i = ring.head % cap
        if fast and path.fast_ok and path.call(*path.args) != -2:
            taken += 1
        else:
            assert ring.stage(1)
            path.estimate_staged(1)
            ring.publish(1)
            path.refresh_fast()
        rows.append((bool(ar.sok[i]), int(ar.sseq[i]), int(ar.st[i]), int(ar.sf[i]),
                     ar.sV[i].copy()))
        ar.sok[i] = False
        stds.append(est.std.copy())
        ring.release(ring.available())
    return rows, np.array(stds), taken, est, path


class ClosedPipe(io.StringIO):
    """stdout whose reader has gone (`... | head` after its lines): every write raises
    BrokenPipeError; ``fileno`` gives a scratch descriptor, since the CLIs point the real
    one at devnull."""

    def __init__(self, scratch):
        super().__init__()
        self._fd = open(scratch, "w").fileno()

    def write(self, s):
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self):
        return self._fd
