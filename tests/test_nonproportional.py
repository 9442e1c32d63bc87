"""An imported model with non-proportional damping (a dashpot in C.mtx) gets the smoother.

The smoother's step matrix is expm of a block-triangular continuous model: the force-model
states do not depend on the modes. With proportional damping the design zeroed expm's
round-off outside the modes' 2x2 blocks; with a dense modal part it did not, so the edge
refused the bundle's structure ("coupling into the force-model states from the modes") and the
build's choice silently fell to the per-step estimator: on the chain below F3 read 1.01 (worse
than an estimate of zero) and d6 0.99 on its calibration runs, where the smoother reads 0.75
and 0.28 (the limit at its 20 ms delay: 0.66 and 0.25; `vsense-offline build`, 2026-11-30).
"""

from __future__ import annotations

import numpy as np
import pytest

sp = pytest.importorskip("scipy.sparse")
sio = pytest.importorskip("scipy.io")

from edge.estimator import Estimator  # noqa: E402
from edge.estimator.smoother import SmootherEstimator  # noqa: E402
from edge.estimator.smoother_operator import derive_smoother  # noqa: E402
from offline.build import build  # noqa: E402
from tests.test_small_model_modes import _chain_file  # noqa: E402


def _dashpot_chain(tmp_path):
    """The 10-DOF chain of tests/test_small_model_modes.py with C = 2 M + 2e-5 K plus a
    150 N s/m dashpot from the fifth mass to ground, imported as C.mtx; 8 modes, 1 % noise."""
    path = _chain_file(tmp_path)
    M = sio.mmread(tmp_path / "M.mtx").toarray()
    K = sio.mmread(tmp_path / "K.mtx").toarray()
    C = 2.0 * M + 2e-5 * K
    C[4, 4] += 150.0
    sio.mmwrite(tmp_path / "C.mtx", sp.coo_matrix(C), symmetry="symmetric")
    text = path.read_text().replace('dofs = "dofs.csv"\n', 'dofs = "dofs.csv"\ndamping = "C.mtx"\n')
    text = text.replace("[damping]\nratios = [[15.0, 0.02], [200.0, 0.02]]\n", "")
    text = text.replace("modes = 2", "modes = 8")
    text = text.replace('kind = "acceleration"', 'kind = "acceleration"\nnoise = 0.01')
    path.write_text(text)
    return path


def test_non_proportional_damping_builds_the_smoother_the_edge_runs(tmp_path):
    res = build(_dashpot_chain(tmp_path), progress=False, maps=False, limit=False)
    b = res.bundle
    est = Estimator(b)
    assert isinstance(est, SmootherEstimator)
    assert derive_smoother(b).Ad.size > 0  # the dense modal path: the damping is not proportional
    # replay the build's first calibration run on the edge: the force's normalised RMS error
    # (over the run's std of the truth, after the 1 s warm-up) against the per-step
    # estimator's 1.01 before (module docstring); the smoother read 0.75 on the three runs
    cal = res.calibration
    F, _, _ = est.run(cal["Y"])
    L, s = est.delay, int(round(1.0 / b.dt))
    err = F[s + L:, 0] - cal["F"][s:cal["F"].shape[0] - L, 0]
    nrmse = np.sqrt(np.mean(err ** 2)) / np.std(cal["F"][s:, 0])
    assert nrmse < 0.85, nrmse
