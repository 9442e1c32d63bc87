"""The normaliser of the build's calibration-run errors: the truth's stationary std
(offline/limit/truth_std.py), the limit's own, not each short run's std of the truth."""

import re
from pathlib import Path

import numpy as np
import pytest

from offline.build import build
from offline.limit.model import model_limit, modal_model
from offline.limit.ratio import stationary_std
from offline.limit.truth_std import truth_std
from offline.model import build_fe_model, load_model_file, output_probe, resolve_dofs, \
    sensor_probe
from offline.placement import placement_model
from offline.placement.write import write_placed

ROOT = Path(__file__).resolve().parents[1]
# examples/my_beam.toml (README): 1 m steel cantilever, first mode 8.4 Hz at 1 % damping;
# its tip sensor moved to a candidate, the smoother at lag 20, point samples
BEAM = (ROOT / "examples" / "my_beam.toml").read_text()
BEAM = re.sub(r'\[\[sensors\]\]\nname = "d_tip".*?\n\n', "", BEAM, flags=re.S)
BEAM = re.sub(r'\[estimator\].*?window = "auto"[^\n]*\n', '[estimator]\nrate = 1000.0\n'
              'method = "smoother"\nlag = 20\nmodel_error = 0.0\n', BEAM, flags=re.S)
BEAM += """[acquisition]
converter = "ideal"
[placement]
[[placement.candidates]]
name = "d10"
select = { at = [1.0, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
noise = 0.01
"""


@pytest.mark.slow
def test_truth_std_is_the_limits_normaliser():
    spec = load_model_file(ROOT / "examples" / "my_beam.toml")
    model = build_fe_model(spec, progress=False)
    cd = [sensor_probe(model, s) for s in spec.sensors]
    fd = [resolve_dofs(model, f.select, f.dof, f.where)[0] for f in spec.forces]
    od = [output_probe(model, o) for o in spec.outputs]
    mm = modal_model(model, fd, cd + od)
    lim = model_limit(spec, model, delays=[0.0], mm=mm, exact=False)
    # the same sums on the same grid: round-off only
    np.testing.assert_allclose(truth_std(spec, mm, 1e-3), stationary_std(lim.as_dict()),
                               rtol=1e-9)


@pytest.mark.slow
def test_placement_predicts_the_runs_of_a_lightly_damped_output(tmp_path):
    # d05 (mid-span) of the README beam with a tip sensor: predicted 0.0127 (stationary).
    # Over each 2 s run's own std of the truth the built bundle's runs read 0.0180 (+42 %:
    # the 8.4 Hz mode's std on seeds 0-2 is 0.80 of the stationary one); over the
    # stationary std 0.0124 (measured: python benchmarks/placement_chain_runs.py --only
    # beam_ideal; docs/benchmarks.md). F07: 0.641 / 0.650. Bound 10 % (placement's acceptance).
    p = tmp_path / "beam.toml"
    p.write_text(BEAM)
    pm = placement_model(load_model_file(p), progress=False)
    res = build(write_placed(p, tmp_path / "w.toml", ["d10"]), progress=False, limit=False,
                maps=False)
    cal = np.array(res.bundle.meta["selection"]["best"]["nrmse"])
    np.testing.assert_allclose(pm.nrmse([0]), cal, rtol=0.10)
    # the runs' normaliser is the stationary std placement divides by: 1.5 % apart (measured:
    # placement's 2^13-point grid puts 1.4 bins in the 8.4 Hz mode's half-power band, the
    # limit's 2^18 points 45); bound 3 %
    np.testing.assert_allclose(res.calibration["runs"][0].scale, np.sqrt(pm.grid.var_q),
                               rtol=0.03)
