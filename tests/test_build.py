"""Model file -> bundle -> simulate -> replay -> score, on the paper's cantilever."""

from pathlib import Path

import numpy as np
import pytest

from edge.bundle import Bundle
from edge.flags import FLAG_HELD, FLAG_WARMUP
from edge.replay import replay
from offline.build import build
from offline.cli import main as offline_main
from offline.estimator_choice import SMOOTHER_MARGIN
from offline.simulate import simulate_model

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "examples" / "paper_cantilever.toml"


#: the paper's rig as its authors sampled it: point samples (the shipped file has no
#: [acquisition], so it is built for the ADS1256; these tests compare the paper's estimators
#: on the paper's point samples)
POINT = '\n[acquisition]\nconverter = "ideal"\n'


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    d = tmp_path_factory.mktemp("build")
    model = d / "paper_cantilever.toml"
    model.write_text(MODEL.read_text() + POINT)
    res = build(model, progress=False, report_dir=d / "report")
    path = d / "cantilever.npz"
    res.bundle.save(path)
    return res, path, d


def test_bundle_of_the_paper_rig(built):
    res, path, d = built
    b = Bundle.load(path)
    # paper Sect. 5: 21 masters (7 nodes x uz, rx, ry) + 50 modes = 71 reduced DOFs
    assert b.n == 71 and len(res.reduction.masters) == 21
    assert b.channels[0].dof == 0 and b.channels[0].name == "d110"  # measured first (eq. 10)
    assert b.forces[0].dof == 0 and b.channels[0].node == b.forces[0].node
    # GMR+ keeps the first 20 eigenvalues within 1e-5 (issue requirement; eq. 31 is in %)
    assert np.max(np.abs(b.report["eig_error"][:20])) < 1e-5 * 100
    if b.method == "smoother":  # chosen automatically (issue 11): its gains are stable
        assert b.meta["estimator"]["spectral_radius"] < 1.0
    else:
        assert b.meta["spectral_radius"] <= 1.0 and b.alpha > 0
    assert (d / "report" / "lcurve.png").stat().st_size > 10_000
    assert (d / "report" / "eigenvalue_error.png").exists()
    # estimator choice on honest (full-model) calibration runs (issue 11): within max_delay
    # (20 ms), never worse there than another candidate, shown in the report
    sel = b.meta["selection"]
    assert b.meta["calibration"]["model"] == "full" and sel["n_runs"] == 3
    assert (b.window - 1) * b.dt <= 0.020 + 1e-12 and b.window == sel["best"]["window"]
    rows = [r for c in sel["candidates"].values() for r in c["rows"] if not r.get("unstable")]
    lowest = min(r["score"] for r in rows)
    # the smoother is preferred within SMOOTHER_MARGIN of the best score (offline/estimator_choice.py)
    assert sel["best"]["score"] <= (1.0 + SMOOTHER_MARGIN if sel["chosen"] == "Kalman smoother"
                                    else 1.0) * lowest
    # measured: per-step force error ~1.0 (alpha so large the force is ~0), fixed lag ~0.48
    assert sel["candidates"]["Tikhonov fixed-lag"]["best"]["score"] < \
        sel["candidates"]["per-step (paper)"]["best"]["score"]
    assert (d / "report" / "selection.png").exists()
    html = (d / "report" / "index.html").read_text()
    assert "Estimator choice" in html and "MMSE" in html


def test_reduced_simulation_matches_full_model(built):
    # same Newmark step (oversample 1) on full and reduced model: the difference is the GMR+
    # reduction error alone, small for a 20 Hz load (first mode 34 Hz, reduced-model
    # eigenvalue errors < 1e-9 for the first modes)
    res, _, _ = built
    load = {"type": "sine", "freq": 20.0, "amplitude": 1.0}
    full = simulate_model(MODEL, load, 0.5, noise=0.0, oversample=1, progress=False,
                          build_result=res, engine="newmark")
    red = simulate_model(MODEL, load, 0.5, noise=0.0, oversample=1, reduced=True,
                         progress=False, build_result=res)
    for a, b in ((full.Y_clean, red.Y_clean), (full.Z, red.Z)):
        np.testing.assert_allclose(b, a, atol=1e-3 * np.max(np.abs(a)))


def test_simulate_replay_score_end_to_end(built, tmp_path, capsys):
    _, path, _ = built
    prefix = tmp_path / "run"
    assert offline_main(["simulate", str(MODEL), "--load", "random", "--band", "5", "160",
                         "--duration", "1", "--oversample", "2", "--noise", "0.01",
                         "--chain", "ideal", "-o", str(prefix), "--quiet"]) == 0
    out = tmp_path / "est.csv"
    assert replay(f"{prefix}_measurement.csv", path, out) == 0
    assert offline_main(["score", str(out), f"{prefix}_truth.csv", "--band", "0", "200"]) == 0
    text = capsys.readouterr().out
    row = [ln.split() for ln in text.splitlines() if ln.startswith("d60")][0]
    # per-step estimator, L-curve alpha, 1 % noise: displacement FDE at 60 mm measured 0.04;
    # bound 0.10 (the paper's experimental Table 9 reports 0.13-0.33)
    assert float(row[1]) < 0.10


def test_replay_bad_inputs(built, tmp_path, capsys):
    _, path, _ = built
    bad = tmp_path / "bad.csv"
    bad.write_text("time,other\n0,1\n0.001,2\n")
    assert replay(bad, path, tmp_path / "o.csv") == 6
    assert "d110" in capsys.readouterr().err
    bad.write_text("time,d110\n0,1\n0.002,2\n0.004,3\n")
    assert replay(bad, path, tmp_path / "o.csv") == 6
    assert "sample interval" in capsys.readouterr().err
    bad.write_text("time,d110\n0,1\n0.001,x\n")
    assert replay(bad, path, tmp_path / "o.csv") == 6
    assert "line 3" in capsys.readouterr().err
    assert replay(bad, tmp_path / "missing.npz", tmp_path / "o.csv") == 3


def test_nan_samples_are_held_and_flagged(built, tmp_path):
    _, path, _ = built
    f = tmp_path / "m.csv"
    rows = ["time,d110"] + [f"{i * 1e-3!r},{float(1e-5 * np.sin(i / 10))!r}" for i in range(200)]
    rows[50] = f"{49 * 1e-3!r},nan"
    f.write_text("\n".join(rows) + "\n")
    out = tmp_path / "o.csv"
    assert replay(f, path, out) == 0
    data = np.genfromtxt(out, delimiter=",", names=True)
    assert np.all(np.isfinite(data["F110"]))
    # the estimates whose window used the held sample 49 are flagged, and only those
    L = Bundle.load(path).window
    fl = data["flags"].astype(int) & ~FLAG_WARMUP  # the start-up's warm-up bit aside
    flagged = np.flatnonzero(fl != 0)
    np.testing.assert_array_equal(flagged, np.arange(49 - L + 1, 50))
    assert np.all(fl[flagged] == FLAG_HELD)


def test_cli_bad_model_file(tmp_path, capsys):
    bad = tmp_path / "m.toml"
    bad.write_text('name = "x"\ntype = "plate"\nbogus = 1\n')
    assert offline_main(["build", str(bad), "-o", str(tmp_path / "b.npz"), "--quiet"]) == 2
    assert "m.toml" in capsys.readouterr().err


def test_unstable_estimator_is_refused_at_build(tmp_path, capsys):
    # displacement sensor at 60 mm, force at 110 mm, alpha = 0: non-collocated inversion
    src = MODEL.read_text().replace('name = "d110"\nselect = { at = [0.110',
                                    'name = "d60s"\nselect = { at = [0.060') + POINT
    m = tmp_path / "nc.toml"
    m.write_text(src)
    code = offline_main(["build", str(m), "-o", str(tmp_path / "b.npz"), "--alpha", "0",
                         "--quiet"])
    assert code == 3
    assert "unstable" in capsys.readouterr().err


def test_modal_truth_matches_sparse_newmark(built):
    # two independent integrators of the full model: exact modal superposition (80 modes +
    # static correction) vs sparse Newmark on every DOF with 8 sub-steps per sample. For a
    # 20 Hz sine the response is dominated by mode 1 (34 Hz, Newmark period error
    # (w dt)^2/12 = 1e-4 at 8 sub-steps): agreement within 1e-2 of the peak.
    res, _, _ = built
    load = {"type": "sine", "freq": 20.0, "amplitude": 1.0}
    a = simulate_model(MODEL, load, 0.3, noise=0.0, oversample=8, engine="modal",
                       progress=False, build_result=res)
    b = simulate_model(MODEL, load, 0.3, noise=0.0, oversample=8, engine="newmark",
                       progress=False, build_result=res)
    for x, y in ((a.Y_clean, b.Y_clean), (a.Z, b.Z)):
        np.testing.assert_allclose(x, y, atol=1e-2 * np.max(np.abs(y)))


def test_reduced_simulation_samples_the_load_on_the_fine_grid(built):
    """`simulate --reduced` honours `oversample`: a 2 ms pulse is integrated on the fine grid.

    Reference: the full FE model through the exact modal engine (an independent integrator).
    Measured on this rig: NRMS of the 110 mm displacement 0.013 with 10 sub-steps, 0.25 with
    one (the pulse sampled at 1 kHz only: the old behaviour of `--reduced`)."""
    res = built[0]
    load = {"type": "pulse", "amplitude": 1.0, "width": 0.002}
    run = {k: simulate_model(MODEL, load, 0.2, noise=0.0, build_result=res, progress=False,
                             **kw)
           for k, kw in (("full", {}), ("fine", {"reduced": True, "oversample": 10}),
                         ("coarse", {"reduced": True, "oversample": 1}))}
    ref = run["full"].Y_clean[:, 0]

    def nrms(k):
        return np.sqrt(np.mean((run[k].Y_clean[:, 0] - ref) ** 2)) / np.std(ref)

    assert run["fine"].info["model"] == "reduced" and run["fine"].Y_clean[:, 0].shape == ref.shape
    assert nrms("fine") < 0.03   # 0.013 measured: reduction + Newmark at dt/10
    assert nrms("coarse") > 0.15  # 0.25 measured: shows the fine grid is what matters
