"""The model's own error in the stated std (``kf_std_scale``, schema 9): the device states
``s_i std_i``; the build measures ``s_i`` on its calibration runs; older bundles state the
design's std unchanged; a factor below 1 or of the wrong shape is refused by name."""

import functools
import io
from pathlib import Path

import numpy as np
import pytest
from scipy import linalg

from edge.bundle import Bundle, BundleError
from edge.bundle_schema import content_hash
from edge.csvio import read_table, write_table
from edge.estimator import Estimator
from offline.calibration_runs import CalRun
from offline.smoother.std_scale import measured_std_ratio, run_errors, with_std_scale
from tests.test_smoother import _reload, _smoother_bundle

LAG = 6


@pytest.fixture(scope="module")
def bundle():
    return _reload(_smoother_bundle(lag=LAG))


def _with_scale(b, scale):
    kf = dict(b.kf)
    kf["std_scale"] = np.asarray(scale, dtype=float)
    return _reload(b.replace(kf=kf))


def _runs(b, n_runs=3, nt=12000, noise_factor=1.0, seed=5):
    """Calibration runs drawn from the smoother's OWN state-space model (``x+ = A x + w``,
    ``y = H x + v``; forces and outputs ``Cq x``): the model is right, so its std is the
    error's. ``noise_factor``: the sensor noise std times this (a wrong noise model)."""
    kf = b.kf
    A, H, Cq = kf["A"], kf["H"], kf["Cq"]
    # Q from the design (offline/smoother/gains.py), rebuilt for the runs
    from offline.smoother import ForceModel, design_smoother
    from tests.helpers import chain_bundle
    d = design_smoother(chain_bundle(n=6, kinds=("displacement",)),
                        [ForceModel("bandpass", (5.0, 80.0), 1.0, 2)], lag=LAG)
    w, V = np.linalg.eigh(0.5 * (d.Q + d.Q.T))  # Q = Lq Lq^T (Q is singular: no Cholesky)
    Lq = V * np.sqrt(np.clip(w, 0.0, None))
    r_sd = noise_factor * np.sqrt(np.diag(d.R))
    # x_0 from the stationary covariance X = A X A^T + Q (the start-up std's own prior)
    X0 = linalg.solve_discrete_lyapunov(A, d.Q)
    w, V = np.linalg.eigh(0.5 * (X0 + X0.T))
    L0 = V * np.sqrt(np.clip(w, 0.0, None))
    nf = len(b.forces)
    runs = []
    for s in range(n_runs):
        rng = np.random.default_rng(seed + s)
        x = L0 @ rng.standard_normal(A.shape[0])
        X = np.empty((nt, A.shape[0]))
        for k in range(nt):
            X[k] = x
            x = A @ x + Lq @ rng.standard_normal(A.shape[0])
        Y = X @ H.T + r_sd * rng.standard_normal((nt, H.shape[0]))
        Q = X @ Cq.T
        runs.append(CalRun(t=np.arange(nt) * b.dt, F=Q[:, :nf], Y=Y, Y_clean=X @ H.T,
                           Z=Q[:, nf:], sigma=r_sd, seed=seed + s, start=0))
    return runs


def test_the_device_states_the_scaled_std_from_the_first_row(bundle):
    s = np.array([1.5, 2.0, 1.25, 1.0])[:len(bundle.forces) + len(bundle.outputs)]
    Y = 1e-4 * np.random.default_rng(3).standard_normal((3000, 1))
    _, _, _, S0 = Estimator(bundle).run_std(Y)
    _, _, _, S1 = Estimator(_with_scale(bundle, s)).run_std(Y)
    # every row, the start-up's wide rows too: s_i times the unscaled std (rounding only)
    np.testing.assert_allclose(S1, S0 * s, rtol=1e-12)
    # an older bundle (no kf_std_scale) states the design's std, widened in the start-up:
    # row j (sample m = j - lag) sqrt(std^2 + kf_startup_var[m]) (offline/smoother/error.py)
    sv = bundle.kf["startup_var"]
    m = np.clip(np.arange(Y.shape[0]) - LAG, 0, None)
    ex = np.where((m < sv.shape[0])[:, None], sv[np.minimum(m, sv.shape[0] - 1)], 0.0)
    np.testing.assert_allclose(S0, np.sqrt(bundle.kf["std"] ** 2 + ex), rtol=1e-12)


@pytest.mark.parametrize("scale, why", [([0.0], "must be finite and > 0"),
                                        ([-1.0], "must be finite and > 0"),
                                        ([1.0] * 9, "shape")])
def test_a_bad_std_scale_is_refused_by_name(bundle, scale, why):
    nq = len(bundle.forces) + len(bundle.outputs)
    bad = np.resize(np.asarray(scale, dtype=float), nq) if why != "shape" else scale
    with pytest.raises(BundleError, match=f"kf_std_scale.*{why}"):
        _with_scale(bundle, bad)


def test_an_older_schema_with_a_scale_is_refused(bundle):
    z = np.load(io.BytesIO(_with_scale(bundle, np.ones(len(bundle.forces)
                                                    + len(bundle.outputs))).to_bytes()))
    arrays = {k: z[k] for k in z.files}
    arrays["schema_version"] = np.array(8, dtype=np.int64)
    arrays["content_hash"] = np.array(content_hash(arrays))  # a consistent schema-8 file
    with pytest.raises(BundleError, match="kf_std_scale.*needs schema 9"):
        Bundle.from_arrays(arrays)


def test_a_right_model_gets_no_factor_and_a_wrong_one_its_excess(bundle):
    """On runs from the smoother's own model (stationary from the first sample) the
    measured ratio is 1 within the runs' sampling spread (3 runs of 12 s, scored after the
    3.8 s start-up: +/- 0.1, the slowest error mode decays over ~1 s), so
    the shipped factor is 1 (never below); with the sensor noise 3x its design, the error
    exceeds the std and the factor measures by how much (the estimate's error is mostly
    noise-driven for this displacement sensor: between 1.3 and 3)."""
    right = measured_std_ratio(bundle, _runs(bundle))
    assert np.all(np.abs(right - 1.0) < 0.1), right
    b1 = with_std_scale(bundle, _runs(bundle))
    assert np.all(b1.kf["std_scale"] >= 1.0) and np.all(b1.kf["std_scale"] < 1.1)
    wrong = with_std_scale(bundle, _runs(bundle, noise_factor=3.0))
    sc = wrong.kf["std_scale"]
    assert np.all(sc > 1.3) and np.all(sc <= 3.0), sc
    assert wrong.meta["estimator"]["std_scale"] == pytest.approx(sc.tolist(), rel=1e-12)



def test_narrowing_where_the_runs_load_is_the_smoothers_own(bundle):
    """``narrow`` (build --record: the runs draw their load from the smoother's own load
    model): a std the runs show too wide is narrowed to their upper confidence bound (4),
    a right one is left (its bound is above 1 but in 5 % of builds); without ``narrow`` the
    factor is never below 1. The wide std: the runs' sensor noise a third of the design's
    (the frame of benchmarks/load_user, whose reduced model stated a1z 4.3x its error,
    measured r = 0.234 on its runs)."""
    from offline.smoother.std_scale import STD_SCALE_MIN, ratio_statistics, ratio_upper_bound

    right = with_std_scale(bundle, _runs(bundle), narrow=True).kf["std_scale"]
    assert np.all(right == 1.0), right
    quiet = _runs(bundle, noise_factor=1.0 / 3.0)
    r, n_eff = ratio_statistics(*run_errors(bundle, quiet))
    assert np.all(r < 0.9), r  # the error mostly noise-driven: well below the stated std
    sc = with_std_scale(bundle, quiet, narrow=True).kf["std_scale"]
    np.testing.assert_allclose(sc, np.maximum(ratio_upper_bound(r, n_eff), STD_SCALE_MIN),
                               rtol=1e-12)  # (4) itself
    assert np.all(sc < 1.0) and np.all(sc > r), (sc, r)  # narrowed, by less than the ratio
    assert np.all(with_std_scale(bundle, quiet).kf["std_scale"] == 1.0)

# --- the lower confidence bound on constructed series (offline/smoother/std_scale.py, (1)-(3))

def _ar2(n_runs, n, r, f, seed, burn=3000):
    """``n_runs`` seeded runs of ``n`` rows of a stationary AR(2) of poles ``r e^{+-i 2 pi
    f}`` (a lightly damped error) and its exact ``(sigma, tau)``: ``sigma^2`` and the
    autocorrelation from the Yule-Walker recursion ``rho_k = a1 rho_k-1 + a2 rho_k-2``,
    ``tau = 1 + 2 sum rho_k^2`` over 20,000 lags (the series' own process, not an estimate)."""
    from scipy.signal import lfilter
    a1, a2 = 2 * r * np.cos(2 * np.pi * f), -r * r
    sigma, tau = _ar2_exact(a1, a2)
    rng = np.random.default_rng(seed)
    runs = [lfilter([1.0], [1.0, -a1, -a2], rng.standard_normal(n + burn))[burn:, None]
            for _ in range(n_runs)]
    return runs, sigma, tau


@functools.lru_cache
def _ar2_exact(a1, a2):
    rho = np.empty(20000)
    rho[0], rho[1] = 1.0, a1 / (1 - a2)
    for k in range(2, rho.size):
        rho[k] = a1 * rho[k - 1] + a2 * rho[k - 2]
    # sigma^2 = 1 / (1 - a1 rho_1 - a2 rho_2) for a unit white innovation
    return np.sqrt(1.0 / (1 - a1 * rho[1] - a2 * rho[2])), 1.0 + 2.0 * np.sum(rho[1:] ** 2)


def _ar1(n_runs, n, phi, seed):
    """Stationary AR(1) runs of unit variance; its ``tau = (1 + phi^2) / (1 - phi^2)``."""
    from scipy.signal import lfilter
    rng = np.random.default_rng(seed)
    runs = [lfilter([np.sqrt(1 - phi * phi)], [1.0, -phi], rng.standard_normal(n + 2000),
                    zi=[0.0])[0][2000:, None] for _ in range(n_runs)]
    return runs, (1 + phi * phi) / (1 - phi * phi)


def test_the_effective_samples_of_white_and_correlated_errors():
    from offline.smoother.std_scale import ratio_statistics
    # white: tau = 1 exactly; the estimate adds ~2 M / N (M ~ 5 lags of noise ~1/N each)
    w = [np.random.default_rng(s).standard_normal((2000, 1)) for s in (1, 2, 3)]
    r, n_eff = ratio_statistics(w, [np.ones_like(e) for e in w])
    assert n_eff[0] == pytest.approx(6000, rel=0.02), n_eff
    # the ratio of a right std: 1 within 3 of its sampling sd 1 / sqrt(2 N) = 0.009
    assert abs(r[0] - 1) < 0.03, r
    # AR(1) phi = 0.9: tau = 9.53; AR(2) of pole radius 0.99 at 100 rows per cycle
    # (a lightly damped displacement error): tau = 54.7 from its exact ACF. Three runs of
    # 20,000 rows: the estimate of tau scattered 2-6 % (AR(1)) and 2-13 % (AR(2)) over
    # seeds 7-12; tolerance 20 % (Bartlett's sqrt(4 M / N), M ~ 5 tau the window: 6 % / 13 %)
    a1, tau1 = _ar1(3, 20000, 0.9, seed=7)
    _, n1 = ratio_statistics(a1, [np.ones_like(e) for e in a1])
    assert 60000 / n1[0] == pytest.approx(tau1, rel=0.2), (60000 / n1[0], tau1)
    a2, sig, tau2 = _ar2(3, 20000, 0.99, 0.01, seed=8)
    _, n2 = ratio_statistics(a2, [np.full_like(e, sig) for e in a2])
    assert 60000 / n2[0] == pytest.approx(tau2, rel=0.2), (60000 / n2[0], tau2)
    # the mean's tau (1 + 2 sum rho_k) of that oscillating error is ~0.01: it would call
    # every row independent; the squares' tau is what the spread of r^2 follows
    assert tau2 > 40


def test_the_bound_rarely_widens_a_right_std_and_keeps_a_wrong_ones_excess():
    """Right std of a lightly damped error (the AR(2) above, exact std), three runs of 2000
    rows as the build's 3 runs of 2 s at 1 kHz, 400 seeded builds: the plain ratio exceeds
    1 in about half of them (its median is ~1; measured 187); the bound (3) at 95 % in
    about 5 % (measured 9; binomial sd 1.1 % over 400; allowed 10 %: the window's
    truncation and n_eff's own spread). A std 1.3x too narrow on white errors (N = 6000): the bound is 1.3 / (1 +
    1.645 / sqrt(12000)) = 1.281 within the ratio's spread (1.3 / sqrt(12000) = 0.012)."""
    from offline.smoother.std_scale import ratio_lower_bound, ratio_statistics
    plain = bound = 0
    for s in range(400):
        runs, sig, _ = _ar2(3, 2000, 0.99, 0.01, seed=100 + s, burn=2000)
        r, n_eff = ratio_statistics(runs, [np.full_like(e, sig) for e in runs])
        plain += r[0] > 1.0
        bound += ratio_lower_bound(r, n_eff)[0] > 1.0
    assert plain >= 140 and bound <= 40, (plain, bound)
    w = [1.3 * np.random.default_rng(s).standard_normal((2000, 1)) for s in (4, 5, 6)]
    r, n_eff = ratio_statistics(w, [np.ones_like(e) for e in w])
    lo = ratio_lower_bound(r, n_eff)
    assert lo[0] == pytest.approx(1.281, abs=0.04) and lo[0] < r[0], (lo, r)
    # large n_eff: the chi-square bound is the normal one r / (1 + z / sqrt(2 n_eff))
    assert ratio_lower_bound([1.0], [1e4])[0] == pytest.approx(
        1 / (1 + 1.6449 / np.sqrt(2e4)), rel=2e-3)


def test_rows_left_out_and_an_exact_std_give_no_factor():
    from offline.smoother.std_scale import ratio_lower_bound, ratio_statistics
    e = np.random.default_rng(9).standard_normal((500, 2))
    e[:100] = np.nan                    # the start-up's rows: not counted
    s = np.ones_like(e)
    s[:, 1] = 0.0                       # a target stated exactly (clamped): no factor
    r, n_eff = ratio_statistics([e], [s])
    assert n_eff[0] == pytest.approx(400, rel=0.05) and r[1] == 1.0, (r, n_eff)
    assert ratio_lower_bound([2.0], [0.0])[0] == 0.0   # nothing measured: no bound above 0


def test_a_ratio_above_the_old_cap_of_3_is_shipped(bundle):
    """The frame of benchmarks/load_user with an 8 s record: its runs measured 6.2 for the
    acceleration output a1z (the reduction misses a mode a1z sees) and the cap of 3 stated a
    third of its error (test record coverage 36 %). Here the sensors' noise 8x its design on
    runs from the smoother's own model: the (noise-driven) error's ratio exceeds 3, and the
    factor is the runs' lower bound (3) itself, not cut at 3; at most STD_SCALE_MAX
    (measured: ratios 4.9 / 8.1 / 7.9, factors 4.85 / 7.17 / 7.72; the old cap gave 3 / 3 / 3)."""
    from offline.smoother.std_scale import STD_SCALE_MAX, ratio_lower_bound
    b = with_std_scale(bundle, _runs(bundle, noise_factor=8.0))
    e = b.meta["estimator"]
    r, n_eff = np.array(e["std_ratio_runs"]), np.array(e["std_ratio_neff"])
    sc = b.kf["std_scale"]
    assert np.any(sc > 3.0), (sc, r)
    # the shipped factor is the bound of the runs' own ratio (to rounding), within [1, max]
    np.testing.assert_allclose(sc, np.clip(ratio_lower_bound(r, n_eff), 1.0, STD_SCALE_MAX),
                               rtol=1e-12)
    assert STD_SCALE_MAX >= 10.0


FRAME = Path(__file__).resolve().parents[1] / "benchmarks" / "load_user" / "frame.toml"


def _frame_record(d, name, seconds, seed, load=None):
    """The frame's sensors under ``load`` (a LoadModel; default a pink 2-100 Hz load 30x
    below its declaration, the load of benchmarks/honest_structures.py), through ``simulate
    --load csv`` (full model, the model's converter), then the sensors' ``noise_std``
    (seeded): measurement and truth."""
    from offline.cli import main as offline_main
    from offline.forcing.force_model import ForceModel
    from offline.load.model import LoadModel
    if load is None:
        load = LoadModel([ForceModel("bandpass", (2.0, 100.0), 200.0 / 30, 2, tilt=1.0)])
    fine = 1.0 / 5000.0                                   # 10 points per 500 Hz sample
    t = np.arange(int(round((seconds + 1.0) / fine)) + 1) * fine
    write_table(d / f"{name}_load.csv", t, load.sample(t, seed), ["Fx"])
    assert offline_main([str(a) for a in (
        "simulate", FRAME, "--load", "csv", "--csv", d / f"{name}_load.csv", "--duration",
        seconds, "--warmup", 1.0, "--noise", 0.0, "--seed", seed, "-o", d / name,
        "--quiet")]) == 0
    tm, Y, cols = read_table(d / f"{name}_measurement.csv")
    sd = np.array([0.002, 0.002, 1e-7])                   # frame.toml: noise_std a1x a2x v2z
    write_table(d / f"{name}.csv", tm, Y + sd * np.random.default_rng(seed + 7).standard_normal(
        Y.shape), cols)
    return d / f"{name}.csv", d / f"{name}_truth.csv"


@pytest.mark.slow  # two simulations and a build with a record: 54 s at load ~5 on 2 cores
def test_the_frames_acceleration_output_is_covered_with_a_record(tmp_path):
    """The frame of benchmarks/load_user built with an 8 s record (seed 11): its runs measure
    6.2 for a1z (the reduction places the full model's 261 Hz mode, which a1z sees, at
    641 Hz); the cap of 3 stated a third of the error, coverage 36 % on a 9 s test record
    (seed 23; benchmarks/honest_structures.py --cases frame --lengths 8 before the fix).
    Now the factor is the runs' bound (6.0) and a1z's coverage after 1 s is within the
    61-75 % the stated std must reach with a record (measured 66 %)."""
    from edge.cli import main as edge_main
    from offline.cli import main as offline_main
    run, _ = _frame_record(tmp_path, "run8", 8.0, 11)
    meas, truth = _frame_record(tmp_path, "test", 9.0, 23)
    b = tmp_path / "rec8.npz"
    gmr = tmp_path / "frame.toml"  # reduced by GMR+ (the file's "auto" takes cb+r there)
    gmr.write_text(FRAME.read_text().replace('method = "auto"', 'method = "gmr+"'))
    assert offline_main([str(a) for a in ("build", gmr, "-o", b, "--quiet", "--record",
                                          run)]) == 0
    sc = Bundle.load(b).kf["std_scale"]
    assert sc[2] > 3.0, sc                                # a1z: forces, then d1x, a1z
    assert edge_main(["replay", str(meas), "--bundle", str(b), "-o",
                      str(tmp_path / "est.csv")]) == 0
    te, E, cols = read_table(tmp_path / "est.csv")
    _, T, tc = read_table(truth)
    k = te >= 1.0
    idx = np.rint(te[k] * 500).astype(int)
    err = E[k, cols.index("a1z")] - T[idx, tc.index("a1z")]
    cov = np.mean(np.abs(err) <= E[k, cols.index("a1z_std")])
    assert 0.61 <= cov <= 0.75, cov


@pytest.mark.slow  # a simulation and a build: 60-90 s at load 3-4 on 2 cores
def test_the_frames_acceleration_output_is_covered_without_a_record(tmp_path):
    """The frame of benchmarks/load_user as shipped (``cb+r``, 20 modes), declared load, no
    record. Its a1z sees the full model's 261 Hz mode, which the reduction misses; the
    calibration runs' load has ideal band edges (nothing above 100 Hz), so the factor
    measured on them was 1.0-1.12, and a load with the declaration's own second-order skirts
    gave a1z 5x its stated std (1-sigma coverage 9 % on a 9 s record at 1/30 of the
    declared level, 40 % on benchmarks/honest_structures.py's pink load). The factor is now
    measured on runs drawn from the smoother's own load model (offline.calibration_runs.
    own_load_runs): measured 15.5 for a1z (at 500 rows/s the reduction also misplaces the
    in-band 242 Hz mode; the former cap of 10 left 44 % here), and on a 9 s record of that
    model (seed 23) a1z's coverage after 2 s is 58-78 % (measured 64 %: the 61-75 % asked
    with a record, less 3 points for one record's spread and the declared build's start-up
    tail, which the first 2 s leave out). The build names a1z in a warning."""
    from edge.cli import main as edge_main
    from offline.cli import main as offline_main
    from offline.model import load_model_file
    from offline.load.declared import declared_load_model
    spec = load_model_file(FRAME)
    # the smoother's own load model: 2-100 Hz, second-order skirts, 200 N
    meas, truth = _frame_record(tmp_path, "test", 9.0, 23,
                                declared_load_model(spec, spec.estimator.rate))
    b = tmp_path / "decl.npz"
    assert offline_main([str(a) for a in ("build", FRAME, "-o", b, "--quiet")]) == 0
    bl = Bundle.load(b)
    sc = bl.kf["std_scale"]
    assert sc[2] > 10.0, sc                               # a1z: forces, then d1x, a1z
    assert any(w.startswith("stated std of a1z") for w in bl.meta["warnings"]), bl.meta
    assert edge_main(["replay", str(meas), "--bundle", str(b), "-o",
                      str(tmp_path / "est.csv")]) == 0
    te, E, cols = read_table(tmp_path / "est.csv")
    _, T, tc = read_table(truth)
    k = te >= 2.0
    idx = np.rint(te[k] * spec.estimator.rate).astype(int)
    err = E[k, cols.index("a1z")] - T[idx, tc.index("a1z")]
    cov = np.mean(np.abs(err) <= E[k, cols.index("a1z_std")])
    assert 0.58 <= cov <= 0.78, cov
