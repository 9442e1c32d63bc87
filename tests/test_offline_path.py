"""The offline path as steps: model -> reduced model -> calibration -> design -> maps -> bundle.

One reduction per build (the inverse maps reuse it), ``simulate --reduced`` without calibration
or map training, and sensor rows that stay right when two sensors share a DOF.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import offline.inverse.fromfile as fromfile_mod
import offline.reduced as reduced_mod
from offline.inverse.fromfile import from_model_file
from offline.model import load_model_file
from offline.reduced import reduce_model, unit_rows
from offline.simulate import simulate_model
from tests.test_inverse import BEAM_TOML

#: a second sensor on the DOF of the first (d110 at x = 0.11 m, uz), listed by the experiment
TWO_ON_ONE = BEAM_TOML.replace('channels = ["d110"]', 'channels = ["d110", "v110", "a090"]') \
    .replace("[[forces]]", """[[sensors]]
name = "v110"
select = { at = [0.11, 0.0, 0.0] }
dof = "uz"
kind = "velocity"
[[sensors]]
name = "a090"
select = { at = [0.09, 0.0, 0.0] }
dof = "uz"
kind = "acceleration"
[[forces]]""", 1)


@pytest.fixture(scope="module")
def two_on_one(tmp_path_factory):
    path = tmp_path_factory.mktemp("path") / "strip.toml"
    path.write_text(TWO_ON_ONE)
    return path


def test_unit_rows_two_entries_on_one_dof():
    # masters [7, 3, 9]: DOF 3 is coordinate 1; two entries on it get the same row
    rows = unit_rows([7, 3, 9], [3, 3, 9], 5)
    np.testing.assert_array_equal(rows, [[0, 1, 0, 0, 0], [0, 1, 0, 0, 0], [0, 0, 1, 0, 0]])


def test_sensor_rows_when_two_sensors_share_a_dof(two_on_one):
    su = from_model_file(two_on_one, progress=False)
    rm = reduce_model(load_model_file(two_on_one), n_report=0, progress=False)
    # masters: d110 (= v110's DOF, once), a090, F160, then the declared ones; the third sensor
    # is coordinate 1, not 2 (np.eye(n)[i] by sensor index gave the force's coordinate)
    assert rm.chan_dofs[0] == rm.chan_dofs[1] != rm.chan_dofs[2]
    rows = su.pm.out_rows
    assert rows.shape == (3, rm.n)
    np.testing.assert_array_equal(rows[0], rows[1])
    assert np.argmax(rows[2]) == rm.position(rm.chan_dofs[2]) == 1
    # independent check: each row picks the reduced coordinate whose basis column is 1 at the
    # sensor's physical DOF (T[masters[j], j] = 1, exact by construction)
    T = rm.reduction.T
    for r, d in zip(rows, rm.chan_dofs):
        assert T[d] @ r == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_array_equal(su.pm.out_kind, [0, 1, 2])


def test_maps_reuse_the_builds_reduction(two_on_one, monkeypatch):
    rm = reduce_model(load_model_file(two_on_one), progress=False)

    def no_second_reduction(*a, **k):
        raise AssertionError("read or reduced again")

    monkeypatch.setattr(reduced_mod, "reduce", no_second_reduction)
    monkeypatch.setattr(fromfile_mod, "load_model_file", no_second_reduction)
    su = from_model_file(two_on_one, progress=False, reduced=rm)
    assert su.reduction is rm.reduction


def test_simulate_reduced_runs_no_calibration(two_on_one, monkeypatch):
    import offline.build as build_mod

    def refuse(*a, **k):
        raise AssertionError("simulate --reduced must not calibrate")

    monkeypatch.setattr(build_mod, "calibration_runs", refuse)
    monkeypatch.setattr(build_mod, "select", refuse)
    load = {"type": "pulse", "amplitude": 1.0, "width": 0.002}
    res = simulate_model(two_on_one, load, 0.05, noise=0.0, reduced=True, progress=False)
    assert res.info["model"] == "reduced" and res.Y.shape == (51, 3)
    # d110 and v110 watch one DOF: the velocity is the time derivative of the displacement
    # (Newmark average acceleration: (v_k + v_k+1) dt / 2 = u_k+1 - u_k exactly, per fine step;
    # compared on samples, the trapezoid over 10 fine steps is within 2 % of the range)
    u, v = res.Y[:, 0], res.Y[:, 1]
    du = np.diff(u)
    vdt = 0.5 * (v[1:] + v[:-1]) * 1e-3
    assert np.max(np.abs(du - vdt)) < 0.02 * np.ptp(u)


def test_cli_help_imports_no_solver_or_numba():
    # the CLI's subcommand modules are imported in their branch of main() for this reason
    code = ("import sys; from offline.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('numba', 'scipy.sparse.linalg', 'offline.build') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_build_hands_its_reduction_to_the_maps(two_on_one, monkeypatch):
    import offline.build as build_mod

    calls, seen = [], {}
    real = reduced_mod.reduce

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    def fake_attach(bundle, model_path, cache_dir=None, progress=True, reduced=None):
        # the map training itself is tested in test_inverse.py; here only what it is handed
        seen["reduced"] = reduced
        return bundle.replace(meta={**bundle.meta, "inverse": {}}), {"timings": {}}

    monkeypatch.setattr(reduced_mod, "reduce", counting)
    monkeypatch.setattr(build_mod, "attach", fake_attach)
    res = build_mod.build(two_on_one, progress=False, limit=False, maps_cache=two_on_one.parent)
    assert len(calls) == 1 and seen["reduced"] is res.reduced
    assert res.reduced.reduction is res.reduction
