"""The measurement chain in the Kalman smoother (issue 35): the design without a chain is
today's, bit for bit; the augmented model's conversions have exactly the covariance of the
converter's taps applied to the continuous process; the bundle carries the chain."""

import io
from pathlib import Path

from dataclasses import replace

import numpy as np
import pytest

from edge.acquisition import Chain
from edge.bundle import SCHEMA_VERSION, Bundle
from edge.estimator import EstimatorError
from edge.hw.ads1256_filter import F_MOD, conversion_taps
from offline.cli import main as offline_main
from offline.smoother import ForceModel, attach_smoother, design_smoother
from tests.helpers import chain_bundle

FM = [ForceModel("bandpass", (5.0, 80.0), 1.0, 2)]


KEYS = ("A", "H", "K", "Cq", "G", "Sinv", "std", "std_filtered", "Q", "P")
REFERENCE = Path(__file__).parent / "data" / "smoother_point_design.npz"


def test_ideal_design_is_bit_identical_to_the_point_sample_design():
    # an explicit ideal chain gives the point-sample design bit for bit (same run); the design
    # itself against tests/data/smoother_point_design.npz, written on 2026-11-30 by the code of
    # 40480f2 (numpy 2.4.6, scipy 1.17.1). Until then this compared SHA-256 digests recorded
    # at 0143602, before the chain existed; a fresh install's numpy/scipy changed the last
    # bits, so the comparison is now numeric: 1e-9 of each array's largest entry, far above
    # a BLAS/LAPACK version's rounding and far below any change of the mathematics
    ref = np.load(REFERENCE)
    for tag, kinds in (("d", ("displacement",)), ("da", ("displacement", "acceleration"))):
        b = chain_bundle(n=6, kinds=kinds)
        d = design_smoother(b, FM, lag=10)
        e = design_smoother(b, FM, lag=10, chain=Chain())
        assert d.n_chain == 0 and e.n_chain == 0
        for k in KEYS:
            got = np.asarray(getattr(d, k))
            assert np.array_equal(got, np.asarray(getattr(e, k))), k
            want = ref[f"{tag}_{k}"]
            np.testing.assert_allclose(got, want, rtol=0,
                                       atol=1e-9 * max(np.abs(want).max(), 1e-300), err_msg=k)


def _exp_sum(Ac, t0, d, w):
    """sum_j w_j e^{Ac (t0 + j d)} (t0 >= 0), the exponentials by repeated products."""
    from scipy.linalg import expm

    E, Ed, S = expm(Ac * t0), expm(Ac * d), np.zeros_like(Ac)
    for wj in w:
        S += wj * E
        E = E @ Ed
    return S


def _conversion_cov(Ac, Qc, C, dt, taps, spacing, offsets, r):
    """Independent reference: E[y_k y_k-r^T] of the noise-free conversions of the stationary
    continuous process, sum_ij h_i h_j C_c E[z(t_a) z(t_b)^T] C_e^T with E[z(t + tau) z(t)^T]
    = e^{Ac tau} X (tau >= 0) and X e^{-Ac^T tau} (tau < 0), X from Ac X + X Ac^T + Qc = 0
    (continuous Lyapunov), the double sum over the taps as one over their lags l."""
    from scipy.linalg import solve_continuous_lyapunov

    X = solve_continuous_lyapunov(Ac, -Qc)
    nt = len(taps)
    ac = np.correlate(taps, taps, mode="full")   # ac[l + nt - 1] = sum_i h_i h_{i+l}
    nch = C.shape[0]
    out = np.zeros((nch, nch))
    for c in range(nch):
        for e in range(nch):
            # y_k,c at t_k - o_c - i d; y_k-r,e at t_k - r dt - o_e - j d: tau = base + l d
            base = r * dt - offsets[c] + offsets[e]
            l0 = int(np.ceil(-base / spacing - 1e-9))       # first lag with tau >= 0
            l0 = min(max(l0, -(nt - 1)), nt)
            pos = _exp_sum(Ac, max(base + l0 * spacing, 0.0), spacing, ac[l0 + nt - 1:])
            neg = np.zeros_like(Ac)
            if l0 > -(nt - 1):  # tau < 0 from l0 - 1 down to -(nt - 1): |tau| increasing
                neg = _exp_sum(Ac, -(base + (l0 - 1) * spacing), spacing,
                               ac[l0 + nt - 2::-1])
            out[c, e] = C[c] @ (pos @ X + X @ neg.T) @ C[e]
    return out


@pytest.mark.parametrize("ch,W", [
    (Chain("ads1256", 1000.0, "cycle", (0.0, 0.37e-3)), 2),
    (Chain("ads1256", 1000.0, "cycle", (0.9e-3, 0.0)), 3),
    (Chain("daq", 1000.0, "continuous", (), 400.0, 1.5e-3), 3)])  # 3 ms FIR, 193 taps
def test_augmented_model_gives_the_exact_covariance_of_the_conversions(monkeypatch, ch, W):
    # a small chain (3 DOFs, 10 states), displacement and acceleration channels, one
    # converted 0.37 dt before the row (off the modulator grid; 2 intervals) or 0.9 dt
    # before it (its window reaches 2.03 dt back: 3 intervals); the ADS1256's taps at
    # DRATE 1000 (2172 taps over 1.13 ms), or a generic DAQ's FIR. The design's Ac, Qc, C
    # are captured on their way to offline.smoother.chain.chain_model for the reference
    import offline.smoother.gains as gains
    from offline.smoother import chain as chainmod

    seen = {}

    def capture(Ac, Qc, C, dt, taps, sp, offsets):
        seen.update(Ac=Ac, Qc=Qc, C=C, dt=dt, taps=taps, sp=sp, offsets=offsets)
        return chainmod.chain_model(Ac, Qc, C, dt, taps, sp, offsets)

    monkeypatch.setattr(gains, "chain_model", capture)
    b = chain_bundle(n=3, kinds=("displacement", "acceleration"))
    d = design_smoother(b, FM, lag=4, chain=ch)
    assert d.n_chain == 2 * W and d.A.shape == (10 + 2 * W, 10 + 2 * W)
    np.testing.assert_array_equal(seen["taps"], ch.taps()[0])
    if ch.converter == "ads1256":
        np.testing.assert_array_equal(seen["taps"], conversion_taps(1000.0))
        assert seen["sp"] == 1.0 / F_MOD
    # stationary covariance of the augmented model: X = F X F^T + Qa (doubling)
    F, X = d.A.copy(), d.Q.copy()
    for _ in range(30):
        X = X + F @ X @ F.T
        F = F @ F
    args = tuple(seen[k] for k in ("Ac", "Qc", "C", "dt", "taps", "sp", "offsets"))
    ref0 = _conversion_cov(*args, 0)
    scale = np.sqrt(np.outer(np.diag(ref0), np.diag(ref0)))
    worst = []
    for r in range(W + 1):  # row lags < W: the windows overlap the later rows
        model = d.H @ np.linalg.matrix_power(d.A, r) @ X @ d.H.T
        ref = ref0 if r == 0 else _conversion_cov(*args, r)
        worst.append(float(np.max(np.abs(model - ref) / scale)))
        if r == 1:  # the point-sample model would be off by far more than the tolerance
            Xz = X[:10, :10]
            point = seen["C"] @ np.linalg.matrix_power(d.A[:10, :10], r) @ Xz @ seen["C"].T
            assert np.max(np.abs(point - ref) / scale) > 1e-2
    # 1e-8 of the channels' standard deviations (measured 5e-12): round-off of the sub-step
    # products and of the reference's sum over 4343 lags (both exact in exact arithmetic)
    assert max(worst) < 1e-8, worst


def test_offsets_and_too_long_windows_are_refused():
    b = chain_bundle(n=3, kinds=("displacement",))
    with pytest.raises(EstimatorError, match="chain offset of channel 0"):
        design_smoother(b, FM, lag=2, chain=Chain("ads1256", 1000.0, "cycle", (1.2e-3,)))
    # DRATE 50: a 20.1 ms window over 1 ms rows, 21 intervals (at most 16)
    with pytest.raises(EstimatorError, match="spans 21 sample intervals"):
        design_smoother(b, FM, lag=2, chain=Chain("ads1256", 50.0, "continuous"))


def _reload(b: Bundle) -> Bundle:
    z = np.load(io.BytesIO(b.to_bytes()))
    return Bundle.from_arrays({k: z[k] for k in z.files})


def test_bundle_carries_the_chain_and_old_bundles_are_ideal():
    b = chain_bundle(n=3, kinds=("displacement", "acceleration"))
    ch = Chain("ads1256", 1000.0, "cycle", (0.0, 0.4e-3))
    b = b.replace(chain=ch)
    sb = attach_smoother(b, design_smoother(b, FM, lag=3), FM, 0.0, nis_window_s=0.5,
                         bands=[(20, 22), (22, 24)])
    r = _reload(sb)
    assert r.chain == ch and r.kf["A"].shape == (14, 14)
    z = np.load(io.BytesIO(sb.to_bytes()))
    a = {k: z[k] for k in z.files}
    assert int(a["schema_version"]) == SCHEMA_VERSION
    # a schema-6 bundle (no chain_* fields) is read as ideal point samples
    ideal = chain_bundle(n=3)
    z = np.load(io.BytesIO(ideal.to_bytes()))
    a = {k: z[k] for k in z.files if not k.startswith("chain_")}
    a["schema_version"] = np.array(6, dtype=np.int64)
    from edge.bundle import content_hash

    a["content_hash"] = np.array(content_hash(a))
    assert Bundle.from_arrays(a).chain == Chain()
    # a bad converter names the field
    z = np.load(io.BytesIO(ideal.to_bytes()))
    a = {k: z[k] for k in z.files}
    a["chain_converter"] = np.array("sigma")
    a["content_hash"] = np.array(content_hash(a))
    with pytest.raises(Exception, match="chain_converter"):
        Bundle.from_arrays(a)


def _chain_smoother(offsets=(0.0, 0.4e-3), lag=7):
    b = chain_bundle(n=4, kinds=("displacement", "acceleration"))
    b = b.replace(chain=Chain("ads1256", 1000.0, "cycle", offsets))
    return attach_smoother(b, design_smoother(b, FM, lag=lag), FM, 0.0, nis_window_s=0.5,
                           bands=[(20, 22), (22, 24)])


@pytest.mark.parametrize("offsets", [(0.0, 0.4e-3), (0.9e-3, 0.0)])  # 2 and 3 intervals
def test_kernel_with_the_chain_agrees_with_its_numpy_twin(offsets):
    from edge.estimator import Estimator
    from edge.estimator.smoother import SmootherEstimator
    from edge.estimator.smoother_operator import derive_smoother
    from edge.estimator.smoother_reference import ReferenceSmoother
    from edge.flags import FLAG_HELD

    b = _reload(_chain_smoother(offsets))
    op = derive_smoother(b)
    nk = 2 * (2 if offsets[0] < 0.5e-3 else 3)
    assert op.Ak.shape == (nk, b.kf["A"].shape[0]) and op.Am.shape[1] == 4  # 2x2 blocks kept
    rng = np.random.default_rng(35)
    t = np.arange(2000) * b.dt
    Y = np.column_stack([1e-4 * np.sin(2 * np.pi * 17 * t), 3.0 * np.sin(2 * np.pi * 17 * t)])
    Y += np.array([1e-6, 1e-2]) * rng.standard_normal(Y.shape)
    Y[700, 1] = np.nan
    est = Estimator(b)
    assert isinstance(est, SmootherEstimator) and est.delay == 7
    F, Z, fl = est.run(Y)
    Fr, Zr, flr = ReferenceSmoother(b).run(Y)
    # same arithmetic in another order: agreement to 1e-9 of the largest value (as the
    # point-sample kernel's test in tests/test_smoother.py)
    for a, r in ((F, Fr), (Z, Zr)):
        ok = np.isfinite(r)
        assert np.array_equal(ok, np.isfinite(a))
        assert np.max(np.abs(a[ok] - r[ok])) <= 1e-9 * np.max(np.abs(r[ok]))
    np.testing.assert_array_equal(fl, flr)
    assert set(np.flatnonzero(fl & FLAG_HELD)) == set(range(700, 708))


def test_chain_layout_refuses_a_coupling_from_the_chain_states():
    from edge.estimator.smoother_operator import derive_smoother

    b = _chain_smoother()
    A = b.kf["A"].copy()
    A[0, -1] = 1e-3  # a modal state fed from a chain state: not the model's structure
    with pytest.raises(EstimatorError, match="measurement chain"):
        derive_smoother(b.replace(kf={**b.kf, "A": A}))


def _spec(extra: str, rate: float = 1000.0):
    import tomllib
    from pathlib import Path

    from offline.model import spec_from_dict

    root = Path(__file__).resolve().parents[1]
    text = (root / "examples" / "my_beam.toml").read_text()
    assert "rate = 1000.0 " in text  # the rate the substitution below changes
    raw = tomllib.loads(text.replace("rate = 1000.0 ", f"rate = {rate} ", 1) + extra)
    return spec_from_dict(raw, root / "examples" / "my_beam.toml")


def test_acquisition_table_parses_and_names_bad_keys():
    from offline.model import ModelFileError

    # no [acquisition]: the ADS1256 the edge reads, at the data rate that gives the model's
    # 1000 rows/s (one sensor: continuous), as `simulate` converts by default
    assert _spec('\n[acquisition]\nconverter = "ideal"\n').chain() == Chain()
    # a rate no data rate gives (700 rows/s): point samples, the bundle cannot run on the chip
    assert _spec("", rate=700.0).chain() == Chain()
    # an [acquisition] without converter is the ADS1256 too
    assert _spec('\n[acquisition]\nmode = "continuous"\n').chain() == \
        Chain("ads1256", 1000.0, "continuous")
    assert _spec('\n[acquisition]\nconverter = "ads1256"\n').chain() == \
        Chain("ads1256", 1000.0, "continuous")  # drate defaults to [estimator] rate
    s = _spec('\n[acquisition]\nconverter = "ads1256"\ndrate = 3750.0\nmode = "cycle"\n'
              'offsets = [2.0e-4]\n')
    assert s.chain() == Chain("ads1256", 3750.0, "cycle", (2e-4,))
    # an ADS1256 cycling without offsets: the datasheet's (Table 14), the row's time being
    # its last channel's conversion (one sensor here: 0)
    s = _spec('\n[acquisition]\nconverter = "ads1256"\ndrate = 3750.0\nmode = "cycle"\n')
    assert s.chain() == Chain("ads1256", 3750.0, "cycle", (0.0,))
    s = _spec('\n[acquisition]\nconverter = "daq"\ncutoff = 400.0\ngroup_delay = 1.5e-3\n')
    assert s.chain() == Chain("daq", 1000.0, "continuous", (), 400.0, 1.5e-3)
    for extra, key in (('converter = "sigma"', r"\[acquisition\]\.converter"),
                       ('converter = "ads1256"\ndrate = 1234.0', r"\[acquisition\]\.drate"),
                       ('converter = "daq"\ncutoff = 400.0\ngroup_delay = 1e-3\n'
                        'mode = "cycle"', r"\[acquisition\]\.offsets: missing"),
                       ('offsets = [0.0, 0.0]', r"\[acquisition\]\.offsets: 2 values"),
                       ('offsets = [0.002]', r"\[acquisition\]\.offsets\[0\]"),
                       ('rate = 1.0', r"\[acquisition\]\.rate: unknown key"),
                       ('converter = "daq"\ncutoff = 600.0\ngroup_delay = 1e-3',
                        r"\[acquisition\]\.cutoff"),
                       ('converter = "daq"\ncutoff = 400.0', r"\[acquisition\]\.group_delay: missing"),
                       ('cutoff = 400.0', r"\[acquisition\]\.cutoff: unknown key")):
        with pytest.raises(ModelFileError, match=key):
            _spec("\n[acquisition]\n" + extra + "\n")


def _conversions(y_fine, n_rows, per_row, taps, taps_per_fine, offset_fine=0.0):
    """The converter's output at every row from a response on a fine grid (``per_row`` fine
    steps per row; the window ends ``offset_fine`` fine steps before the row): each tap at
    ``t_k - o - i / F_MOD`` reads the fine response linearly interpolated (32 kHz grid:
    interpolation error ~ (w h)^2 / 8 = 1e-4 at 700 Hz)."""
    pos = np.arange(n_rows)[:, None] * per_row - offset_fine \
        - np.arange(len(taps))[None, :] / taps_per_fine
    i0 = np.floor(pos).astype(int)
    fr = pos - i0
    i0c = np.clip(i0, 0, len(y_fine) - 2)
    val = (1 - fr) * y_fine[i0c] + fr * y_fine[i0c + 1]
    return np.sum(np.where(i0 >= 0, taps[None, :] * val, 0.0), axis=1)


_ACCEL = """
[[sensors]]
name = "a_tip"
select = { at = [1.0, 0.0, 0.0] }
dof = "uz"
kind = "acceleration"
noise = 0.01
"""


def _accuracy(rate, drate, mode="continuous", offsets=None, extra="", converter="ads1256",
              daq=""):
    """Issue 35's case on the README's beam (examples/my_beam.toml, smoother, lag 20 ms,
    ``extra`` sensors): truth by the full FE model (120 DOFs, exact modal FOH of 80 modes +
    residual flexibility, offline/simulate.py) at 32 fine steps per row, not the estimator's
    16-DOF reduced model; the chip's conversions are the taps applied to it; 1 % noise; 10 s
    after 1 s warm-up. Returns (force nrmse, coverage, d05 nrmse, coverage) of the smoother
    for point samples on point samples, of the chain's smoother on the conversions, and of
    the point-sample smoother on the conversions."""
    import tomllib
    from pathlib import Path

    from edge.estimator import Estimator
    from offline.build import build
    from offline.model import resolve_dofs, spec_from_dict
    from offline.simulate import force_histories, simulate_modal

    root = Path(__file__).resolve().parents[1]
    text = (root / "examples" / "my_beam.toml").read_text().replace(
        "[estimator]\nrate = 1000.0", f'[estimator]\nmethod = "smoother"\nrate = {rate}') + extra
    acq = f'\n[acquisition]\nconverter = "{converter}"\ndrate = {drate}\nmode = "{mode}"\n{daq}'
    if offsets is not None:
        acq += f"offsets = {list(offsets)}\n"
    s_pt = spec_from_dict(tomllib.loads(text + '\n[acquisition]\nconverter = "ideal"\n'),
                          root / "examples" / "my_beam.toml")
    s_ch = spec_from_dict(tomllib.loads(text + acq), root / "examples" / "my_beam.toml")
    b_pt = build(s_pt, progress=False, limit=False, maps=False).bundle
    res = build(s_ch, progress=False, limit=False, maps=False)
    b_ch, nch = res.bundle, len(s_pt.sensors)
    assert b_pt.chain == Chain() and b_ch.chain.converter == converter
    W = b_ch.chain.intervals(b_ch.dt, nch)
    assert b_ch.kf["A"].shape[0] == b_pt.kf["A"].shape[0] + W * nch
    per_row, warm, dur = 32, 1.0, 10.0
    nw, n_rows = int(warm * rate), int((warm + dur) * rate) + 1
    dtf = 1.0 / rate / per_row
    tf = np.arange((n_rows - 1) * per_row + 1) * dtf
    model = res.model
    probe = [(resolve_dofs(model, x.select, x.dof, x.name)[0], 2 if x.kind == "acceleration"
              else 0) for x in (*s_pt.sensors, *s_pt.outputs)]
    fdof = [resolve_dofs(model, f.select, f.dof, f.name)[0] for f in s_pt.forces]
    Ff = force_histories(s_pt, [0], "random", tf, 7, {"band": (2.0, 100.0), "rms": 1.0})
    out = simulate_modal(model, np.array(fdof), Ff, dtf, 1, probe)
    point, Z, F = out[::per_row, :nch], out[::per_row, nch], Ff[::per_row, 0]
    off = offsets or (0.0,) * nch
    taps, spacing = b_ch.chain.taps()
    conv = np.column_stack([_conversions(out[:, c], n_rows, per_row, taps, dtf / spacing,
                                         off[c] / dtf) for c in range(nch)])
    rng = np.random.default_rng(35)

    def noisy(Y):  # 1 % of each channel's record std
        return Y + 0.01 * np.std(Y[nw:], axis=0) * rng.standard_normal(Y.shape)

    def score(b, Y):
        est = Estimator(b)
        Fe, Ze, _ = est.run(Y)
        d = est.delay
        out = []
        for j, (e, tr) in enumerate(((Fe[d + nw:, 0], F[nw:-d]), (Ze[d + nw:, 0], Z[nw:-d]))):
            err = e - tr
            out += [np.sqrt(np.mean(err ** 2)) / np.std(tr), np.mean(np.abs(err) <= est.std[j])]
        return np.array(out)

    return score(b_pt, noisy(point)), score(b_ch, noisy(conv)), score(b_pt, noisy(conv))


def test_chain_smoother_on_the_chips_conversions_is_as_good_as_on_point_samples():
    # one laser at the tip, continuous mode, DRATE 1000 (the demo rig's acquisition)
    pt, ch, wrong = _accuracy(1000.0, 1000.0)
    # measured (this machine): point 0.630 / 70 %, 0.0123 / 65 %; chain 0.631 / 71 %,
    # 0.0125 / 64 %; ideal smoother on conversions 0.647 / 70 %, 0.0385 / 22 %
    # issue 35's targets: within 1.1x of the same estimator on point samples, 61-75 %
    assert ch[0] <= 1.1 * pt[0] and ch[2] <= 1.1 * pt[2], (ch, pt)
    assert 0.61 <= ch[1] <= 0.75 and 0.61 <= ch[3] <= 0.75, ch
    # the smoother built for point samples, fed the chip's conversions: the unmeasured
    # displacement > 2x worse (measured 3.1x) and its band covers < 40 % (measured 22 %)
    assert wrong[2] > 2.0 * ch[2] and wrong[3] < 0.4, (wrong, ch)


def test_chain_smoother_with_the_multiplexer_cycling():
    # laser + tip accelerometer, multiplexer cycling at DRATE 3750, 1082.5 rows/s: the laser
    # converted 0.46 ms before the accelerometer, whose conversion ends at the row's stamp
    pt, ch, wrong = _accuracy(1082.5, 3750.0, "cycle", (0.46e-3, 0.0), _ACCEL)
    # measured (this machine): point 0.254 / 76 %, 0.0057 / 72 %; chain 0.234 / 78 %,
    # 0.0052 / 74 %; ideal smoother on conversions 0.264 / 74 %, 0.0351 / 13 %
    assert ch[0] <= 1.1 * pt[0] and ch[2] <= 1.1 * pt[2], (ch, pt)
    # d05 within issue 35's 61-75 %; the force's band is as conservative as on point samples
    # (76 % there, an accelerometer and the declared band-pass): within 5 points of it
    assert 0.61 <= ch[3] <= 0.75 and abs(ch[1] - pt[1]) <= 0.05, (ch, pt)
    assert wrong[2] > 3.0 * ch[2] and wrong[3] < 0.4, (wrong, ch)  # measured 6.7x, 13 %


def test_chain_policy_forces_the_smoother_for_sensor_dynamics_only():
    from offline.model.sections import EstimatorSpec
    from offline.estimator_choice import chain_policy

    meta = {}
    assert not chain_policy(Chain(), EstimatorSpec(), meta, True, "x.toml: [hybrid]")
    assert meta == {}  # point samples: the automatic choice as before
    ads = Chain("ads1256", 1000.0, "continuous")
    tik = replace(EstimatorSpec(), method="tikhonov")
    # a converter: every estimator models it (the Tikhonov estimators' Markov parameters are
    # the conversions', edge/estimator/chain_window.py), "auto" and "tikhonov" as asked
    assert not chain_policy(ads, EstimatorSpec(), meta, False, "x")
    assert not chain_policy(ads, tik, meta, False, "x")
    assert not meta.get("warnings")
    # sensor dynamics: only the smoother models them; Tikhonov asked for by name is warned
    hp = replace(ads, highpass=(0.5,))
    assert chain_policy(hp, EstimatorSpec(), meta, False, "x") and not meta.get("warnings")
    assert chain_policy(hp, tik, meta, False, "x")
    assert len(meta["warnings"]) == 1 and "Kalman smoother" in meta["warnings"][0]
    # the hybrid twin models a converter (offline/hybrid/conversion.py), not sensor dynamics
    assert not chain_policy(ads, EstimatorSpec(), {}, True, "x.toml: [hybrid]")
    with pytest.raises(ValueError, match=r"x\.toml: \[hybrid\]: the hybrid twin does not "
                                         r"model the sensors' dynamics"):
        chain_policy(hp, EstimatorSpec(), {}, True, "x.toml: [hybrid]")


def test_check_config_refuses_an_adc_that_differs_from_the_bundles_chain(tmp_path, capsys):
    from edge.cli import main

    b = chain_bundle(n=3, kinds=("displacement",))
    for drate, code in ((1000.0, 0), (2000.0, 2)):  # the chain's data rate, the ADC's 1000
        sb = b.replace(chain=Chain("ads1256", drate, "continuous"))
        sb = attach_smoother(sb, design_smoother(sb, FM, lag=2), FM, 0.0, nis_window_s=0.5,
                             bands=[(20, 22), (22, 24)])
        sb.save(tmp_path / "b.npz")
        cfg = tmp_path / "edge.toml"
        cfg.write_text(f'[device]\nid = "d"\n[bundle]\npath = "{tmp_path / "b.npz"}"\n'
                       '[adc]\ndrate = 1000.0\nmode = "continuous"\n'
                       '[[channels]]\nname = "y0"\npin = "AIN0"\n')
        assert main(["check-config", str(cfg), "--bundle"]) == code
        err = capsys.readouterr().err
        if code:  # both values named
            assert "[adc] drate = 1000" in err and "at 2000 SPS" in err, err
    sb = b.replace(chain=Chain("daq", 1000.0, "continuous", (), 400.0, 1e-3))
    attach_smoother(sb, design_smoother(sb, FM, lag=2), FM, 0.0, nis_window_s=0.5,
                    bands=[(20, 22), (22, 24)]).save(tmp_path / "b.npz")
    assert main(["check-config", str(cfg), "--bundle"]) == 2
    assert "models a daq acquisition" in capsys.readouterr().err


def test_chain_smoother_with_a_generic_daq_filter():
    # a DAQ's linear-phase anti-alias FIR stated by its data sheet: cut-off 400 Hz at 1 kSPS,
    # group delay 1.5 ms (a 3 ms window: 3 intervals); one laser at the tip
    pt, ch, wrong = _accuracy(1000.0, 1000.0, converter="daq",
                              daq="cutoff = 400.0\ngroup_delay = 1.5e-3\n")
    # measured (this machine): point 0.630 / 70 %, 0.0123 / 65 %; chain 0.638 / 71 %,
    # 0.0127 / 64 %; the point-sample smoother on the DAQ's samples 0.707 / 65 %, 0.0965 / 9 %
    assert ch[0] <= 1.1 * pt[0] and ch[2] <= 1.1 * pt[2], (ch, pt)  # issue 35's 1.1x
    assert 0.61 <= ch[1] <= 0.75 and 0.61 <= ch[3] <= 0.75, ch      # and 61-75 %
    assert wrong[2] > 3.0 * ch[2] and wrong[3] < 0.4, (wrong, ch)   # measured 7.6x, 9 %


def test_chain_response_is_the_conversions_transfer():
    # G(f) of an ADS1256 conversion: |G| = the datasheet's closed form, phase = the window's
    # centre delay (symmetric taps) plus the channel's offset; to round-off (1e-12)
    from edge.hw.ads1256_filter import frequency_response

    ch = Chain("ads1256", 1000.0, "cycle", offsets=(0.0, 2e-4))
    f = np.array([3.0, 50.0, 160.0, 420.0, 1600.0])
    G = ch.response(f, 2)
    np.testing.assert_allclose(np.abs(G[:, 1]), frequency_response(1000.0, f), atol=1e-12)
    centre = 0.5 * (conversion_taps(1000.0).size - 1) / F_MOD
    ok = np.abs(G[:, 0]) > 1e-6
    for c, off in ((0, 0.0), (1, 2e-4)):
        ref = frequency_response(1000.0, f) * np.exp(-2j * np.pi * f * (centre + off))
        # the closed form's magnitude loses the sign of a lobe: compare up to sign
        sgn = np.sign(np.real(G[ok, c] / ref[ok]))
        np.testing.assert_allclose(G[ok, c], sgn * ref[ok], atol=1e-12)
    np.testing.assert_array_equal(Chain().response(f, 3), np.ones((5, 3)))


@pytest.mark.slow
def test_build_record_learns_through_the_chain(tmp_path):
    # An accelerometer at the README beam's tip, recorded through the ADS1256 (1000 SPS):
    # learned through the chain, the sensor noise is the conversions' (1 % of their std,
    # `simulate --noise`); measured 0.102 for 0.103 (learned as point samples: 0.0973, and a
    # 2.5-77 Hz band with roll-off orders 1/4 for the true 5-160 Hz)
    from offline.build import design_bundle, noise_std
    from offline.limit.transfer import modal_model
    from offline.load import declared_load_model, learn_load, read_records
    from offline.model import EstimatorSpec, build_fe_model, load_model_file
    from offline.reduced import reduce_model

    src = (Path(__file__).parents[1] / "examples" / "my_beam.toml").read_text()
    i = src.index("[[sensors]]")
    text = src[:i].replace("[estimator]", '[acquisition]\nconverter = "ads1256"\n\n[estimator]') \
        + src[i:].replace('"d_tip"', '"a_tip"').replace('"displacement"', '"acceleration"')
    path = tmp_path / "acc.toml"
    path.write_text(text)
    rec = tmp_path / "rec"
    assert offline_main(["simulate", str(path), "--chain", "ads1256", "--duration", "20",
                         "--seed", "1", "--warmup", "1", "-o", str(rec), "--quiet"]) == 0
    spec = load_model_file(path)
    rm = reduce_model(spec, build_fe_model(spec, progress=False), progress=False)
    b = design_bundle(rm, spec.estimator or EstimatorSpec())
    mm = modal_model(rm.model, rm.force_dofs, list(rm.chan_dofs) + list(rm.out_dofs))
    Ys = read_records([f"{rec}_measurement.csv"], ["a_tip"], b.dt)
    prior = declared_load_model(spec, b.rate, noise_std=noise_std(spec, mm, b.dt))
    true_noise = 0.01 * np.std(Ys[0][:, 0])
    fit = learn_load(mm, Ys, b.dt, prior, ["acceleration"], chain=b.chain)
    assert fit.model.noise_std[0] == pytest.approx(true_noise, rel=0.03)
