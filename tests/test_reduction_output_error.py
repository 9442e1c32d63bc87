"""The reduced model's own error at a virtual strain output (offline/limit/model_error.py) and
the ``"cb+r"`` reduction that removes it, on the portal frame of benchmarks/strain_cases.py,
written as docs/modelfile.md shows a model file.

The cause it guards: with GMR+ (12 modes) the frame's strain 20 mm below the joint was 0.29 %
of its std off the full model's under the design load (2.5 % statically), 0.9x its accuracy
limit, and its estimate measured 1.60x the limit; the sensors were off by 4e-5 only.
"""

from __future__ import annotations

import numpy as np
import pytest

from edge.bundle import Bundle
from offline.cli import main as offline_main
from offline.fem.strain import probe_matrix
from offline.limit.model import force_spectra, model_limit
from offline.limit.model_error import output_model_error, model_error_warning
from offline.limit.transfer import modal_model
from offline.model import build_fe_model, load_model_file
from offline.reduced import reduce_model

FRAME = """name = "frame"
type = "beam"

[materials.steel]
E = 210e9
nu = 0.3
rho = 7850.0

[beam.sections.bar]
material = "steel"
rectangle = { b = 0.04, h = 0.01 }

[[beam.members]]
section = "bar"
line = { start = [0.0, 0.0, 0.0], end = [0.0, 0.0, 0.6], n = 12 }
orientation = [1.0, 0.0, 0.0]

[[beam.members]]
section = "bar"
line = { start = [0.8, 0.0, 0.0], end = [0.8, 0.0, 0.6], n = 12 }
orientation = [1.0, 0.0, 0.0]

[[beam.members]]
section = "bar"
line = { start = [0.0, 0.0, 0.6], end = [0.8, 0.0, 0.6], n = 16 }
orientation = [0.0, 0.0, 1.0]

[[boundary]]
select = { box = [[-0.01, -0.01, -0.01], [0.81, 0.01, 0.01]] }

[damping]
ratios = [[8.0, 0.01], [300.0, 0.01]]

[estimator]
rate = 1000.0
method = "smoother"

[reduction]
method = "METHOD"
modes = 12
[[reduction.masters]]
select = { at = [0.8, 0.0, 0.6] }
dofs = ["ux", "uz", "ry"]
[[reduction.masters]]
select = { at = [0.0, 0.0, 0.6] }
dofs = ["ux", "uz", "ry"]
[[reduction.masters]]
select = { at = [0.0, 0.0, 0.55] }
dofs = ["ux", "uz", "ry"]
[[reduction.masters]]
select = { at = [0.4, 0.0, 0.6] }
dofs = ["ux", "uz", "ry"]
[[reduction.masters]]
select = { at = [0.2, 0.0, 0.6] }
dofs = ["ux", "uz", "ry"]

[[sensors]]
name = "d_sway"
select = { at = [0.8, 0.0, 0.6] }
dof = "ux"
noise_std = 3.4e-6

[[sensors]]
name = "d_mid"
select = { at = [0.4, 0.0, 0.6] }
dof = "uz"
noise_std = 1.4e-5

[[forces]]
name = "F"
select = { at = [0.2, 0.0, 0.6] }
dof = "uz"

[[outputs]]
name = "eps"
kind = "strain"
unit = "microstrain"
at = [-0.005, 0.0, 0.58]

[design_load]
load = { type = "random", band = [2.0, 100.0], rms = 30.0 }
"""


def _frame(tmp_path, method):
    p = tmp_path / f"frame-{method}.toml"
    p.write_text(FRAME.replace("METHOD", method))
    spec = load_model_file(p)
    model = build_fe_model(spec, progress=False)
    rm = reduce_model(spec, model, n_report=0, progress=False)
    mm = modal_model(model, rm.force_dofs, list(rm.chan_dofs) + list(rm.out_dofs))
    return spec, model, rm, mm


@pytest.mark.parametrize("method", ["gmr+", "cb+r"])
def test_the_strain_output_model_error_and_the_build_warning(tmp_path, method):
    spec, model, rm, mm = _frame(tmp_path, method)
    d = output_model_error(rm, mm, force_spectra(spec), 1e-3)
    lim = model_limit(spec, model, delays=[0.0], mm=mm, exact=False).output_nrmse
    warn = model_error_warning(rm, d, lim)
    if method == "gmr+":
        # measured 2.9e-3 (the benchmark frame with three more masters: 2.95e-3), against a
        # limit of 3.2e-3: 0.9x the limit, the estimate ~1.35x it
        assert 1.5e-3 < d[0] < 6e-3
        assert warn is not None and "output eps" in warn and 'set method = "cb+r"' in warn
    else:
        # measured 3e-7: the full model's response to 1e-4 of the output's std
        assert d[0] < 1e-5
        assert warn is None


def test_cb_r_static_strain_is_exact(tmp_path):
    # a static unit force at the master F: the strain from the reduced model against the full
    # model's direct solve (reference: scipy's sparse LU of the constrained K)
    spla = pytest.importorskip("scipy.sparse.linalg")
    res = {}
    for method in ("gmr+", "cb+r"):
        _, model, rm, _ = _frame(tmp_path, method)
        f = np.zeros(model.n_dofs)
        f[rm.force_dofs[0]] = 1.0
        u = spla.spsolve(model.K.tocsc(), f)
        ref = float((probe_matrix(rm.out_dofs, model.n_dofs) @ u)[0])
        ur = np.linalg.solve(rm.reduction.K, rm.force_matrix()[:, 0])
        res[method] = abs(float(rm.output_rows()[0] @ ur) / ref - 1)
    # measured: gmr+ 2.5e-2 (benchmark frame), cb+r 3e-12 (round-off)
    assert res["gmr+"] > 5e-3
    assert res["cb+r"] < 1e-8


@pytest.mark.slow
def test_build_of_the_frame_warns_with_the_remedy(tmp_path, capsys):
    # the user's path: `vsense-offline build` of the model file prints the WARNING with the
    # remedy for GMR+ and records each output's model error in the bundle's meta
    errs, texts = {}, {}
    for method in ("gmr+", "cb+r"):
        p = tmp_path / f"frame-{method}.toml"
        p.write_text(FRAME.replace("METHOD", method))
        out = tmp_path / f"{method}.npz"
        assert offline_main(["build", str(p), "-o", str(out), "--quiet"]) == 0
        texts[method] = capsys.readouterr().out
        warned = "the reduced model's response at output eps differs" in texts[method]
        assert warned == (method == "gmr+"), texts[method]
        errs[method] = Bundle.load(out).meta["reduction"]["output_error"][0]
    # the same figures as test_the_strain_output_model_error_and_the_build_warning
    assert 1.5e-3 < errs["gmr+"] < 6e-3 and errs["cb+r"] < 1e-5, errs
    assert 'set method = "cb+r": its basis holds' in texts["gmr+"]
