"""The Tikhonov estimators through a converter: the window ``Y = O z_k + J F`` of the converted
channels (edge/estimator/chain_window.py) against a brute-force simulation, and bundles of
schema <= 9 read as point samples (the mathematics they were written with)."""

import copy
from dataclasses import replace

import numpy as np
import pytest
from scipy.linalg import expm

from edge.acquisition import Chain
from edge.bundle import Bundle
from edge.bundle_schema import content_hash
from edge.estimator import Estimator, derive_operator
from edge.estimator.chain_window import augment
from edge.estimator.operator import window_model
from edge.hw.ads1256_filter import F_MOD
from offline.build import build
from offline.calibration_runs import calibration_runs
from offline.calibration_score import nrmse
from offline.model.strip import strip_head
from tests.helpers import chain_bundle


def _fine_response(b, F, rows: int, sub: int):
    """Brute force, independent of the estimator's realisation: the physical model
    ``M u'' + C u' + K u = B f(t)`` from rest, f linear between the rows, stepped exactly
    (scipy expm of the ramp-augmented system) on a grid ``sub`` times finer than dt; each
    channel's point value (u or a = M^-1 (B f - C u' - K u)) at every fine instant."""
    n, nf = b.M.shape[0], len(b.forces)
    Minv = np.linalg.inv(b.M)
    B = np.zeros((n, nf))
    for j, f in enumerate(b.forces):
        B[f.dof, j] = 1.0
    Ac = np.block([[np.zeros((n, n)), np.eye(n)], [-Minv @ b.K, -Minv @ b.C]])
    Bc = np.vstack([np.zeros((n, nf)), Minv @ B])
    h = b.dt / sub
    Maug = np.zeros((2 * n + 2 * nf, 2 * n + 2 * nf))
    Maug[:2 * n, :2 * n], Maug[:2 * n, 2 * n:2 * n + nf] = Ac, Bc
    Maug[2 * n:2 * n + nf, 2 * n + nf:] = np.eye(nf)
    E = expm(Maug * h)  # [x; f; f'](t + h) from [x; f; f'](t), f' constant within a row
    x = np.zeros(2 * n)
    out = np.zeros((rows * sub + 1, len(b.channels)))
    for k in range(rows):
        slope = (F[k + 1] - F[k]) / b.dt
        for i in range(sub):
            t = k * sub + i
            f = F[k] + slope * (i * h)
            acc = Minv @ (B @ f - b.C @ x[n:] - b.K @ x[:n])
            out[t] = [x[c.dof] if c.kind == "displacement" else acc[c.dof] for c in b.channels]
            x = (E @ np.concatenate([x, f, slope]))[:2 * n]
    acc = Minv @ (B @ F[rows] - b.C @ x[n:] - b.K @ x[:n])
    out[-1] = [x[c.dof] if c.kind == "displacement" else acc[c.dof] for c in b.channels]
    return out, x


@pytest.mark.parametrize("mode", ["continuous", "cycle"])
def test_chain_window_equals_a_brute_force_simulation_through_the_taps(mode):
    # a 6-DOF chain, a displacement and an acceleration channel at its end (the acceleration
    # feeds the force through), the ADS1256 at 1000 SPS, dt = 1 ms = 1920 modulator periods;
    # "cycle": the acceleration's window ends 960 periods (0.5 ms) before the row
    b = chain_bundle(n=6, kinds=("displacement", "acceleration"))
    b = b.replace(discretization="foh", chain=Chain(
        "ads1256", 1000.0, mode, (0.0, 960 / F_MOD) if mode == "cycle" else ()))
    sub = int(round(b.dt * F_MOD))
    assert sub == 1920
    h, spacing = b.chain.taps()
    assert spacing * sub == pytest.approx(b.dt, rel=1e-12)
    rng = np.random.default_rng(7)
    k, L, rows = 6, 5, 12
    F = rng.standard_normal((rows + 1, 1))
    fine, _ = _fine_response(b, F, rows, sub)
    lag = [int(round(o * F_MOD)) for o in b.chain.offsets_for(2)]
    # y_r,c = sum_m h_m y_c(t_r - offset_c - m spacing), on the fine grid
    Y = np.array([[h @ fine[r * sub - lag[c] - np.arange(h.size), c] for c in range(2)]
                  for r in range(k + 1, k + L + 1)]).ravel()
    _, (O, J), _, _ = window_model(b, L)
    n, W = 6, 2  # the 1.133 ms window (plus 0.5 ms) reaches into the row before
    assert O.shape[1] == W * (2 * n + 1)  # z_k: the last W grid states and forces
    # the estimator's state at row k: the modal states at rows k and k-1 from the brute
    # force's physical states (through the point realisation's Pinv), the forces f_(k-1), f_k
    point, _, _, _ = window_model(b.replace(chain=Chain()), L)
    _, cols = augment(point, W, 1)
    z = np.zeros(O.shape[1])
    for q in range(W):
        _, xq = _fine_response(b, F, k - q, sub)
        acc = np.linalg.solve(b.M, np.eye(n)[:, [5]] @ F[k - q] - b.C @ xq[n:] - b.K @ xq[:n])
        z[cols[q]] = (point[-1] @ np.concatenate([xq[:n], xq[n:], acc]))[:2 * n]
    z[-W:] = F[k - 1:k + 1, 0]
    model = O @ z + J @ F[k + 1:k + L + 1, 0]
    # reference: the brute force above; the two differ by round-off in the exponentials
    # (1920 fine steps) and the taps' stepping (2172 products): measured 3.7e-13 (continuous
    # and cycle) of each channel's largest value; the point samples at the rows
    # differ from these conversions by 1.05 and 1.10 of it
    scale = np.max(np.abs(Y.reshape(L, 2)), axis=0)
    err = np.abs(model - Y).reshape(L, 2) / scale
    assert np.max(err) < 1e-9, err
    # J is block lower-triangular (causal): a conversion never sees a later force
    for i in range(L):
        assert np.all(J[2 * i:2 * i + 2, i + 1:] == 0.0)


def test_ideal_chain_keeps_the_point_sample_window():
    # reference: derive_operator of the same bundle without a chain (point samples, schema
    # <= 6); an ideal chain takes the point-sample path, bit for bit
    b = chain_bundle(n=5, kinds=("displacement",), window=4)
    a = derive_operator(b.replace(chain=Chain()))
    c = derive_operator(b)
    assert np.array_equal(a.Ky, c.Ky) and np.array_equal(a.Kx, c.Kx)


def test_schema_9_bundle_reads_as_point_samples(tmp_path):
    # a schema-9 bundle has no chain_markov: read with 0, its Tikhonov operator the point
    # samples' (the mathematics it was written with); a schema-10 bundle keeps 1
    b = chain_bundle(n=5, kinds=("displacement",), window=4, alpha=1e-6)
    b = b.replace(chain=Chain("ads1256", 1000.0, "continuous"))
    b.save(tmp_path / "b10.npz")
    b10 = Bundle.load(tmp_path / "b10.npz")
    assert b10.chain.markov
    with np.load(tmp_path / "b10.npz") as z:
        a = {k: z[k] for k in z.files if k != "chain_markov"}
    a["schema_version"] = np.array(9, dtype=np.int64)
    a["content_hash"] = np.array(content_hash(a))
    np.savez(tmp_path / "b9.npz", **a)
    b9 = Bundle.load(tmp_path / "b9.npz")
    assert not b9.chain.markov and b9.chain.converter == "ads1256"
    point = derive_operator(b9.replace(chain=Chain()))
    assert np.array_equal(derive_operator(b9).Ky, point.Ky)
    # the last 2 grid states and forces: 2 (10 + 1)
    assert derive_operator(b10).n_state == 2 * point.n_state
    # the compiled kernel (unchanged) on the augmented state equals its plain NumPy twin,
    # f = Ky Y - Kx z, z+ = A z + Gamma f (A dense: the shift register of the older forces)
    est = Estimator(b10)
    op = est.op
    y = np.random.default_rng(3).standard_normal((40, 1)) * 1e-6
    Fe, _, _ = est.run(y)
    A, L = op.A_dense(), op.window
    z, ref = np.zeros(op.n_state), []
    for j in range(L - 1, y.shape[0]):
        f = op.Ky @ y[j - L + 1:j + 1].ravel() - op.Kx @ z
        z = A @ z + op.Gamma @ f
        ref.append(f)
    # reference: the loop above; the same sums in another order: round-off, 1e-12 relative
    assert np.allclose(Fe[L - 1:], np.array(ref), rtol=1e-12, atol=1e-12 * np.abs(ref).max())


def test_a_bad_chain_markov_is_named(tmp_path):
    b = chain_bundle(n=3, kinds=("displacement",))
    b.save(tmp_path / "b.npz")
    with np.load(tmp_path / "b.npz") as z:
        a = {k: z[k] for k in z.files}
    a["chain_markov"] = np.array(2, dtype=np.int64)
    a["content_hash"] = np.array(content_hash(a))
    np.savez(tmp_path / "bad.npz", **a)
    with pytest.raises(ValueError, match="chain_markov"):
        Bundle.load(tmp_path / "bad.npz")


def test_replace_keeps_markov():
    c = replace(Chain("ads1256", 1000.0), markov=False)
    assert not c.markov and Chain("ads1256", 1000.0).markov


STRIP_TAIL = """
[[boundary]]
select = {{ at = [0.0, 0.0, 0.0] }}
[damping]
ratios = [[34.0, 0.01], [600.0, 0.01]]
[reduction]
method = "gmr+"
modes = 8
[[reduction.masters]]
select = {{ at = [0.170, 0.0, 0.0] }}
dofs = ["uz"]
[estimator]
rate = {rate}
method = "tikhonov"
window = 21
{sensors}
[[forces]]
name = "F110"
select = {{ at = [0.110, 0.0, 0.0] }}
dof = "uz"
[[outputs]]
name = "d60"
select = {{ at = [0.060, 0.0, 0.0] }}
dof = "uz"
kind = "displacement"
[design_load]
load = {{ type = "random", band = [5.0, 160.0], rms = 1.0 }}
duration = 1.0
seeds = 2
"""
SENSOR = """[[sensors]]
name = "d{x}"
select = {{ at = [0.{x}, 0.0, 0.0] }}
dof = "uz"
kind = "displacement"
noise = 0.01
"""


def _nrmse(b, runs):
    """Mean normalised RMS error per target (force, output) of ``b``'s estimator on runs."""
    est = Estimator(b)
    out = []
    for r in runs:
        est.reset()
        F, Z, _ = est.run(r.Y)
        out.append(nrmse(np.hstack([F, Z]), np.hstack([r.F, r.Z]), est.delay, r.start))
    return np.mean(out, axis=0)


@pytest.mark.parametrize("where, rate", [(("110",), 1000.0), (("110", "170"), 719.0)])
def test_tikhonov_built_for_the_chip_is_as_accurate_as_on_point_samples(tmp_path, where, rate):
    # the strip (examples/strip.toml's head, 17 elements) without [acquisition]: built for
    # the ADS1256, one laser at 1000 SPS continuous (1000 rows/s), two by the multiplexer
    # cycling at 2000 SPS (719 rows/s, the first channel 0.70 ms before the row); Tikhonov
    # asked for by name, window 21, alpha chosen on the chip-converted calibration runs
    p = tmp_path / "strip.toml"
    p.write_text(strip_head(17) + STRIP_TAIL.format(rate=rate,
        sensors="".join(SENSOR.format(x=x) for x in where)))
    res = build(p, progress=False, maps=False, limit=False)
    b = res.bundle
    assert b.method == "tikhonov" and b.chain.converter == "ads1256" and b.chain.markov
    assert b.chain.mode == ("continuous" if len(where) == 1 else "cycle")
    # test records of the FULL model (exact modal integration, other seeds): point samples,
    # and the same records converted as the chip converts
    ts = copy.copy(res.spec)
    ts.calibration = replace(res.spec.calibration, duration=2.0, seed=100, seeds=2)
    dofs = [res.full_dofs[k] for k in ("channels", "forces", "outputs")]
    pt = calibration_runs(ts, res.model, *dofs, b.dt)
    ch = calibration_runs(ts, res.model, *dofs, b.dt, chain=b.chain)
    e_point = _nrmse(b.replace(chain=Chain()), pt)  # the same estimator on point samples
    e_chain = _nrmse(b, ch)
    e_old = _nrmse(b.replace(chain=replace(b.chain, markov=False)), ch)  # schema <= 9's
    # measured (F110, d60; this machine): one laser, point 0.521 / 0.0173, chain 0.509 /
    # 0.0177 (0.98x / 1.02x), the point-sample Markov parameters on the chip 0.566 / 0.121
    # (6.8x on d60); two lasers cycling: point 0.238 / 0.0101, chain 0.239 / 0.0102 (1.00x /
    # 1.01x), point-sample Markov parameters 0.333 / 0.141 (13.8x)
    assert np.all(e_chain <= 1.1 * e_point), (e_chain, e_point)
    assert e_old[1] > 3.0 * e_chain[1] and e_old[0] > e_chain[0], (e_old, e_chain)
