"""``vsense-offline simulate`` with two forces: independent realisations times their scales.

The simulated rig used to apply the very same history to every force (one seed, no
``scale``), while the build's calibration runs and the accuracy limit assume independent
forces of the sizes ``scale`` gives: a two-force plate scored on such a run measured
something else than the estimator was designed and checked for.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("scipy.sparse")

from helpers import strip_toml  # noqa: E402
from offline.simulate import simulate_model  # noqa: E402

TAIL = """
[[boundary]]
select = { at = [0.0, 0.0, 0.0] }
[estimator]
rate = 1000.0
[[sensors]]
name = "d_tip"
select = { at = [0.17, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
[[forces]]
name = "F_tip"
select = { at = [0.17, 0.0, 0.0] }
dof = "uz"
[[forces]]
name = "M_tip"
select = { at = [0.17, 0.0, 0.0] }
dof = "ry"
scale = 0.05
"""


@pytest.fixture()
def beam(tmp_path):
    path = tmp_path / "beam.toml"
    path.write_text(strip_toml(10) + TAIL)
    return path


def test_each_force_its_own_realisation_times_its_scale(beam):
    """Force 0 keeps the seed's realisation (rms 2 exactly: load_profile scales the fine grid,
    the samples are a tenth of it, 3 % reference from the sampling); force 1 is seed + 1000
    (uncorrelated: |r| < 0.1 over 2,001 samples of a 5-100 Hz band, whose ~400 independent
    values give a standard deviation of r of 0.05) at 0.05 times the size."""
    load = {"type": "random", "band": (5.0, 100.0), "rms": 2.0}
    r = simulate_model(beam, load, 2.0, noise=0.0, seed=7, reduced=True, progress=False)
    F, M = r.F[:, 0], r.F[:, 1]
    assert np.std(F) == pytest.approx(2.0, rel=0.03)
    assert np.std(M) / np.std(F) == pytest.approx(0.05, rel=0.05)
    assert abs(np.corrcoef(F, M)[0, 1]) < 0.1


def test_csv_load_takes_the_column_named_after_the_force(beam, tmp_path):
    """A measured history is not scaled; each force reads its own column (exact)."""
    t = np.arange(0, 0.101, 1e-3)
    csv = tmp_path / "forces.csv"
    csv.write_text("time,M_tip,F_tip\n" + "".join(f"{a},{0.1 * a},{3.0 * a}\n" for a in t))
    load = {"type": "csv", "csv_path": str(csv)}
    r = simulate_model(beam, load, 0.1, noise=0.0, reduced=True, progress=False)
    np.testing.assert_allclose(r.F[:, 0], 3.0 * r.t, rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.F[:, 1], 0.1 * r.t, rtol=0, atol=1e-12)


def test_warmup_drops_the_start_of_a_longer_run(beam):
    """``warmup`` = the same run started earlier: a 0.4 s run from rest, its first 0.1 s
    dropped and the time re-based, sample for sample (noise-free; exact up to round-off,
    as the load realisation has the same length and seed)."""
    load = {"type": "random", "band": (5.0, 100.0), "rms": 1.0}
    kw = dict(noise=0.0, seed=2, progress=False)
    long = simulate_model(beam, load, 0.4, **kw)
    warm = simulate_model(beam, load, 0.3, warmup=0.1, **kw)
    assert warm.t.size == 301 and warm.t[0] == 0.0 and warm.info["warmup"] == pytest.approx(0.1)
    np.testing.assert_allclose(warm.t, long.t[100:] - long.t[100], rtol=0, atol=1e-12)
    for a, b in ((warm.F, long.F[100:]), (warm.Y_clean, long.Y_clean[100:])):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * np.max(np.abs(b)))
    assert abs(warm.Y_clean[0, 0]) > 1e-3 * np.std(warm.Y_clean[:, 0])  # not at rest
    with pytest.raises(ValueError, match="warmup"):
        simulate_model(beam, load, 0.1, warmup=-1.0, **kw)
