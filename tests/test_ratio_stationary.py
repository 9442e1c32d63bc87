"""The ratio to the accuracy limit normalises the estimator's error by the truth's stationary
std under the load, as the limit does (offline/limit/ratio.py), not by the std of each short
calibration run: on a lightly damped plate started from rest that std is biased low and
scattered, and the build printed a strain 3.3x its limit for an estimator at about 2x."""

import re

import numpy as np

from offline.cli import main
from offline.calibration_score import nrmse

# the strain benchmark's plate (docs/benchmarks.md): 600 x 400 x 4 mm steel clamped at x = 0,
# two tip displacement sensors, one force, a strain gauge 25 mm from the clamp; first mode
# 9.6 Hz at 1 % damping (its energy builds up over ~1/(2 zeta omega) = 0.83 s)
PLATE = """name = "strain-plate"
type = "plate"

[materials.steel]
E = 210e9
nu = 0.3
rho = 7850.0

[plate]
material = "steel"
thickness = 4e-3

[plate.rectangle]
length = 0.6
width = 0.4
nx = 12
ny = 8

[[boundary]]
select = { group = "x0" }

[damping]
ratios = [[8.0, 0.01], [300.0, 0.01]]

[estimator]
rate = 1000.0
method = "smoother"

[reduction]
method = "gmr+"
modes = 20
[[reduction.masters]]
select = { at = [0.05, 0.15, 0.0] }
dofs = ["uz", "rx", "ry"]

[[sensors]]
name = "d_tip"
select = { at = [0.6, 0.0, 0.0] }
dof = "uz"
noise_std = 3.311e-05

[[sensors]]
name = "d_tip2"
select = { at = [0.6, 0.4, 0.0] }
dof = "uz"
noise_std = 3.316e-05

[[forces]]
name = "F"
select = { at = [0.45, 0.3, 0.0] }
dof = "uz"

[[outputs]]
name = "eps"
kind = "strain"
unit = "microstrain"
at = [0.025, 0.15, 0.0]
surface = "top"
direction = [1.0, 0.0, 0.0]

[design_load]
load = { type = "random", band = [2.0, 100.0], rms = 16.0 }
"""


def _build_ratios(out: str) -> dict:
    """``{name: ratio}`` of the build's "ratio to the accuracy limit" line."""
    line = next(ln for ln in out.splitlines() if "ratio to the accuracy limit" in ln)
    return {m[0]: float(m[1]) for m in re.findall(r"(\w+) ([0-9.]+)x \(", line)}


def test_plate_strain_ratio_over_the_stationary_std(tmp_path, capsys):
    model = tmp_path / "plate.toml"
    model.write_text(PLATE)
    assert main(["build", str(model), "-o", str(tmp_path / "b.npz"), "--quiet"]) == 0
    r = _build_ratios(capsys.readouterr().out)
    # measured on this file (commit 3ab128c, declared load, 3 runs of 1 s warm-up + 2 s):
    # eps 3.33x and F 1.55x over each run's own std (the runs' strain std 44-88 microstrain
    # against 89 stationary); over the stationary std eps 1.98x and F 1.56x. The bound 2.5x
    # sits between; the rest of the 2x is the smoother's order-2 force model against the
    # declared ideal band (order 8 on 20 s runs measured 0.96x, 1.10x)
    assert r["eps"] < 2.5, r
    assert 1.0 <= r["F"] < 1.8, r  # 1.56x measured; no estimator beats the limit (1.0)


def test_nrmse_over_a_given_scale():
    rng = np.random.default_rng(3)
    truth = rng.standard_normal((400, 2)) * [2.0, 5.0]
    est = truth + 0.1 * rng.standard_normal((400, 2))
    own = nrmse(est, truth, delay=0)
    given = nrmse(est, truth, delay=0, scale=[1.0, 10.0])
    # the same RMS error over another normaliser: exact up to rounding (1e-12 relative)
    np.testing.assert_allclose(given * [1.0, 10.0], own * np.std(truth, axis=0), rtol=1e-12)
