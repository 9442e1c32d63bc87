"""Load combinations the sensors cannot see (offline/load/observability.py): the rank of the
whitened transfer matrix against closed forms, and the build's warning on a beam whose
loads all sit on one side of the sensors."""

from dataclasses import replace

import numpy as np

from offline.limit.model import noise_std
from offline.limit.transfer import modal_model
from offline.load import declared_load_model
from offline.load.observability import blind_directions, blind_loads_warning
from offline.load.zoo import RECEIVER
from offline.model import build_fe_model, load_model_file, resolve_dofs


def test_rank_and_blind_projector_are_the_closed_form():
    rng = np.random.default_rng(5)
    A = rng.normal(size=(6, 10, 2)) + 1j * rng.normal(size=(6, 10, 2))
    B = rng.normal(size=(2, 4))
    H = A @ B                                                   # rank 2 at every frequency
    noise, scale = rng.uniform(0.5, 2.0, 10), rng.uniform(0.1, 3.0, 4)
    rank, P = blind_directions(H, noise, scale)
    assert np.all(rank == 2)
    # the blind directions (units of scale) are the null space of B D: I - (BD)^+ (BD)
    BD = B * scale[None, :]
    P_ref = np.eye(4) - np.linalg.pinv(BD) @ BD
    for k in range(6):  # round-off of two SVDs (1e-10 is far below any entry of order 1)
        np.testing.assert_allclose(P[k], P_ref, atol=1e-10)
    # full column rank: nothing blind; more loads than channels: nf - nch blind at least
    rank, P = blind_directions(A[:, :, :2], noise, scale[:2])
    assert np.all(rank == 2) and np.max(np.abs(P)) < 1e-12
    rank, P = blind_directions(np.transpose(A, (0, 2, 1))[:, :, :5], noise[:2], rng.uniform(
        0.5, 2.0, 5))
    assert np.all(rank == 2)
    np.testing.assert_allclose(np.real(np.einsum("kjj->k", P)), 3.0, atol=1e-10)


def _receiver(tmp_path):
    path = tmp_path / "receiver.toml"
    path.write_text(RECEIVER)
    spec = load_model_file(path)
    model = build_fe_model(spec, progress=False)
    return spec, model


def _warning(spec, model):
    cd = [resolve_dofs(model, s.select, s.dof, s.name)[0] for s in spec.sensors]
    fd = [resolve_dofs(model, f.select, f.dof, f.name)[0] for f in spec.forces]
    mm = modal_model(model, fd, cd)
    dt = 1.0 / spec.estimator.rate
    lm = declared_load_model(spec, spec.estimator.rate)
    return blind_loads_warning(mm, lm, [s.kind for s in spec.sensors],
                               noise_std(spec, mm, dt), dt, [f.name for f in spec.forces])


def test_loads_behind_a_cut_are_named(tmp_path):
    # the receiver: a free beam, two forces and two moments at x = 0 and 0.1 m, every sensor
    # at x >= 0.175 m; the sensors see the shear and the moment at the cut x = 0.1 m, 2 of
    # the 4 combinations (Euler-Bernoulli statics and dynamics alike)
    spec, model = _receiver(tmp_path)
    w = _warning(spec, model)
    assert w is not None and "see 2 independent combination(s) of the 4 loads" in w
    for name in ("F0", "M0", "F1", "M1"):
        assert name in w
    # the two forces alone: two combinations, both seen
    forces = [f for f in spec.forces if f.dof == "uz"]
    assert len(forces) == 2
    assert _warning(replace(spec, forces=forces), model) is None
