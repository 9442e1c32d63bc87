"""Small models keep every mode in the modal superpositions (simulate, limit, calibration runs).

A 10-DOF imported chain used to lose its top modes: ``simulate_modal`` kept ``N - 2`` modes and
``modal_model`` ``N - 1``, and the omitted modes add only a static term to displacements, none
to accelerations. An accelerometer's truth then missed two modes near the band (the chain's
force error on a replayed run was 0.56 against a Newmark truth's 0.37).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

sp = pytest.importorskip("scipy.sparse")
sio = pytest.importorskip("scipy.io")

from offline.limit.transfer import modal_model  # noqa: E402
from offline.model import build_fe_model, load_model_file  # noqa: E402
from offline.reduction.eigen import DENSE_MAX, max_modes  # noqa: E402
from offline.simulate import simulate_model  # noqa: E402

N = 10


def _chain_file(tmp_path):
    """A fixed-free 10-DOF spring-mass chain as Matrix Market files and its model file."""
    m = np.array([2.0, 1.5, 1.0, 1.0, 1.2, 0.8, 1.0, 1.0, 0.9, 0.5])
    k = 4.0e5
    K = np.zeros((N, N))
    for i in range(N):
        K[i, i] += k
        if i:
            K[i - 1, i - 1] += k
            K[i - 1, i] -= k
            K[i, i - 1] -= k
    sio.mmwrite(tmp_path / "M.mtx", sp.coo_matrix(np.diag(m)), symmetry="symmetric")
    sio.mmwrite(tmp_path / "K.mtx", sp.coo_matrix(K), symmetry="symmetric")
    rows = "".join(f"{i},{i + 1},ux,{0.1 * (i + 1):.1f},0,0\n" for i in range(N))
    (tmp_path / "dofs.csv").write_text("index,node,dof,x,y,z\n" + rows)
    (tmp_path / "chain.toml").write_text("""
name = "chain"
type = "matrices"
[matrices]
mass = "M.mtx"
stiffness = "K.mtx"
dofs = "dofs.csv"
[damping]
ratios = [[15.0, 0.02], [200.0, 0.02]]
[reduction]
modes = 2
[[reduction.masters]]
select = { at = [0.9, 0.0, 0.0] }
dofs = ["ux"]
[estimator]
rate = 1000.0
[[sensors]]
name = "a9"
select = { at = [0.9, 0.0, 0.0] }
dof = "ux"
kind = "acceleration"
[[forces]]
name = "F3"
select = { at = [0.3, 0.0, 0.0] }
dof = "ux"
[[outputs]]
name = "d6"
select = { at = [0.6, 0.0, 0.0] }
dof = "ux"
kind = "displacement"
""")
    return tmp_path / "chain.toml"


def test_max_modes():
    """Dense pencils give every eigenpair, the sparse Lanczos path all but one."""
    assert max_modes(10) == 10
    assert max_modes(DENSE_MAX) == DENSE_MAX
    assert max_modes(DENSE_MAX + 1) == DENSE_MAX


def test_modal_model_of_a_small_model_has_every_mode(tmp_path):
    """10 DOFs, 80 modes asked: all 10 are kept and the residual flexibility is zero."""
    model = build_fe_model(load_model_file(_chain_file(tmp_path)))
    mm = modal_model(model, [2], [8, 5], n_modes=80)
    assert mm.lam.size == N
    assert np.all(mm.R == 0.0)
    # reference: the dense generalized eigenvalues of the same pencil (scipy.linalg.eigh)
    ref = np.sort(np.linalg.eigvals(np.linalg.solve(model.M.toarray(), model.K.toarray())).real)
    np.testing.assert_allclose(np.sort(mm.lam), ref, rtol=1e-9)


def test_modal_truth_of_a_small_model_matches_newmark(tmp_path):
    """The default (modal) engine against sparse Newmark on every DOF, noise-free.

    Reference: Newmark (average acceleration) at dt/40 = 25 us, whose period error at the top
    mode (205 Hz) is (w h)^2 / 12 = 1.1e-4. Measured: 0.08 % (acceleration) and 0.12 %
    (displacement) RMS of the signal; with 8 of the 10 modes (the old cap) 4.7 % and 1.1 %.
    Tolerance 0.5 %.
    """
    path = _chain_file(tmp_path)
    load = {"type": "random", "band": (5.0, 150.0), "rms": 1.0}
    kw = dict(duration=0.3, noise=0.0, oversample=40, seed=3, progress=False)
    modal = simulate_model(path, load, engine="modal", **kw)
    newmark = simulate_model(path, load, engine="newmark", **kw)
    for a, b in ((modal.Y_clean, newmark.Y_clean), (modal.Z, newmark.Z)):
        rel = np.sqrt(np.mean((a - b) ** 2)) / np.std(b)
        assert rel < 5e-3, rel


@pytest.mark.parametrize("line, note", [("", " (the default)"), ("modes = 12", "")])
def test_too_many_modes_names_the_key_and_the_limit(tmp_path, line, note):
    """10 DOFs, the listed master and the force's DOF (forces are masters): 8 slave DOFs. The
    default 50 modes (or 12) is a model-file error naming [reduction].modes, not the bare
    'n_modes: 50 exceeds the 8 slave DOFs' of the reduction."""
    from offline.model import ModelFileError
    from offline.reduced import reduce_model

    path = _chain_file(tmp_path)
    path.write_text(path.read_text().replace("modes = 2", line))
    spec = load_model_file(path)
    msg = (r"chain.toml: \[reduction\].modes: (50|12) modes" + re.escape(note)
           + r" but the model has only 8 slave DOFs \(10 free DOFs, 2 masters\); "
           r"set modes to at most 8")
    with pytest.raises(ModelFileError, match=msg):
        reduce_model(spec, progress=False)


def test_cli_simulate_engine_and_warmup(tmp_path, capsys):
    """``simulate --engine newmark --warmup`` reaches simulate_model: the CLI's truth CSV equals
    the Python call's (same seed, noise-free; the CSV's 17 significant digits, 1e-12 of the
    range) and differs from the modal engine's by the integrators' 0.1 % (measured above)."""
    from edge.csvio import read_table
    from offline.cli import main

    path = _chain_file(tmp_path)
    common = ["--duration", "0.2", "--warmup", "0.05", "--noise", "0", "--oversample", "40",
              "--seed", "4", "--band", "5", "150", "--quiet"]
    for eng in ("modal", "newmark"):
        assert main(["simulate", str(path), "--engine", eng, "-o", str(tmp_path / eng)]
                    + common) == 0
    capsys.readouterr()
    ref = simulate_model(path, {"type": "random", "band": (5.0, 150.0), "rms": 1.0}, 0.2,
                         noise=0.0, oversample=40, seed=4, warmup=0.05, engine="newmark",
                         progress=False)
    t, nm, names = read_table(tmp_path / "newmark_truth.csv")
    _, md, _ = read_table(tmp_path / "modal_truth.csv")
    a9 = names.index("a9")
    assert t.size == 201 and t[0] == 0.0
    np.testing.assert_allclose(nm[:, a9], ref.Y_clean[:, 0], rtol=0,
                               atol=1e-12 * np.ptp(ref.Y_clean[:, 0]))
    rel = np.sqrt(np.mean((md[:, a9] - nm[:, a9]) ** 2)) / np.std(nm[:, a9])
    assert 0 < rel < 5e-3, rel
