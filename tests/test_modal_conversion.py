"""The fast path of a model update through the converter (edge/estimator/modal_conversion.py:
the conversions' rows mode by mode; edge/estimator/closed_loop.py: the spectral radius without
the history states) against the readable twins (``derive_operator(..., twin=True)``: every tap
through the whole model's exponential, the eigenvalues of the whole closed loop) and, for a
stiff mode next to a soft one, against a tap-by-tap reference (closed form per mode)."""

import numpy as np
import pytest

from edge.acquisition import Chain
from edge.estimator import derive_operator
from edge.estimator.chain_window import augment, chain_window, tap_grid
from edge.estimator.closed_loop import reduced_closed_loop, spectral_radius
from edge.estimator.operator import _dense, modal_basis, window_model
from edge.hw.ads1256_filter import F_MOD
from tests.helpers import chain_bundle

ARRAYS = ("A_data", "Acoup", "Gamma", "Kx", "Ky", "E", "S", "P", "Pinv")


@pytest.mark.parametrize("offsets", [(), (0.0, 960 / F_MOD)])
def test_modal_update_operator_equals_the_readable_twin(offsets):
    # a 6-DOF chain with Rayleigh damping (one 2x2 block per mode), a displacement and an
    # acceleration channel, the ADS1256 at 1000 SPS (the second channel's window 0.5 ms
    # earlier), window 2, as a model update derives it
    b = chain_bundle(n=6, window=2, kinds=("displacement", "acceleration"))
    b = b.replace(chain=Chain("ads1256", 1000.0, "cycle" if offsets else "continuous", offsets))
    # (the gains only: this toy's closed loop is unstable at any alpha through the chip;
    # the spectral radius: test_closed_loop_radius_without_the_history_states)
    fast = derive_operator(b, check_stability=False)
    twin = derive_operator(b, check_stability=False, twin=True)
    assert fast.n_state == twin.n_state > 2 * 2 * 6  # the older grid states are kept
    # reference: the twin; measured <= 5.2e-13 of each array's largest entry (round-off of
    # two orders of products); 1e-9 is the bound
    for k in ARRAYS:
        a, f = getattr(twin, k), getattr(fast, k)
        assert np.abs(f - a).max() <= 1e-9 * np.abs(a).max(), k


def _two_modes(w2, c, theta=0.6):
    """A 2-DOF bundle (M = I) with modes at ``w2`` [rad^2/s^2] and modal damping ``c``
    [1/s] (proportional), mixed by a rotation so that the channel and the force see both."""
    R = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    b = chain_bundle(n=2, window=1)
    return b.replace(M=np.eye(2), K=R @ np.diag(w2) @ R.T, C=R @ np.diag(c) @ R.T,
                     chain=Chain("ads1256", 1000.0))


def _reference_rows(b):
    """The conversions' rows ``(C, D0, D1)`` tap by tap, every tap in closed form from each
    mode's eigenvalues (no exponential of a matrix, no stepping from tap to tap), for the
    displacement channel (no direct force term): ``exp(A s) = V diag(e^(lam s)) V^-1`` and
    the responses to a step and a ramp of the force, ``(e^(lam s) - 1) / lam`` and ``(e^(lam
    s) - 1 - lam s) / lam^2`` per eigenvalue."""
    w2, Phi = modal_basis(b.M, b.K)
    c = np.diag(Phi.T @ b.C @ Phi)
    PhiB = Phi.T @ np.eye(2)[:, [b.forces[0].dof]]
    s = Phi[b.channels[0].dof]  # the channel's point sample over q
    h, _, W, p, sigma = tap_grid(b.chain, b.dt, 1)
    C, acc = np.zeros((W, 1, 4)), np.zeros((W, 2))
    for m in range(2):
        # q'' + c q' + w2 q = PhiB f: lam^2 + c lam + w2 = 0, eigenvectors [1, lam]
        lam = (-c[m] + np.array([1, -1]) * np.sqrt(complex(c[m] ** 2 - 4 * w2[m]))) / 2
        V = np.array([[1, 1], lam])
        # the channel's row over the eigen-coordinates, and the force's input in them
        u, g = s[m] * V[0], np.linalg.solve(V, [0.0, PhiB[m, 0]])
        z = np.outer(sigma[0], lam)  # (taps, 2)
        e = np.exp(z)
        rows = np.concatenate([(e * u) @ np.linalg.inv(V),  # the q row of exp(A s)
                               (((e - 1) / lam) * u * g).sum(1, keepdims=True),
                               (((e - 1 - z) / lam ** 2) * u * g).sum(1, keepdims=True)], 1)
        for q in range(W):
            r = h[p[0] == q] @ rows[p[0] == q].real
            C[q, 0, 2 * m:2 * m + 2] += r[:2]
            acc[q] += r[2:]
    # [x; p; p'] from [xi; f_j; (f_j+1 - f_j) / dt]
    D0, D1 = acc[:, :1] - acc[:, 1:] / b.dt, acc[:, 1:] / b.dt
    return C, D0[:, None], D1[:, None]


def test_a_stiff_mode_leaves_the_soft_one_exact():
    # the cantilever's first mode (w2 2.57e4, c 5.61) next to its stiffest (2.06e14, 5.67e9,
    # overdamped): the whole model's exponential scales both by up to 2^-35 and squares 35
    # times, which cost the soft mode 3.3e-6 of its rows in examples/cantilever_params.toml
    # (measured against a 40-digit reference); mode by mode each gets its own scaling
    b = _two_modes([2.57e4, 2.06e14], [5.61, 5.67e9])
    L = 2
    real, (O, J), _, _ = window_model(b, L)
    # reference: the window of the reference rows on the point-sample realisation
    pt, _, _, _ = window_model(b.replace(chain=Chain()), L)
    A = _dense(pt)
    C, D0, D1 = _reference_rows(b)
    _, cols = augment(pt, C.shape[0], 1)
    O_ref, J_ref = chain_window(C, D0, D1, A[:4, :4], pt[3][:4], pt[4][:4], L, cols)
    # measured 5.1e-13 (O) and 6e-14 (J) of the largest entry (the tap-by-tap twin, the code
    # before the modal path: 1.8e-4 and 1.1e-7); 1e-9 is the bound
    assert np.abs(O - O_ref).max() <= 1e-9 * np.abs(O_ref).max()
    assert np.abs(J - J_ref).max() <= 1e-9 * np.abs(J_ref).max()


def test_closed_loop_radius_without_the_history_states():
    # the ADS1256 window keeps xi_(k-1) and f_(k-1): 2 x 8 + 1 states the eigenproblem
    # leaves out (nf = 1 added back); the same spectral radius as the whole closed loop
    b = chain_bundle(n=8, window=3).replace(chain=Chain("ads1256", 1000.0))
    op = derive_operator(b, check_stability=False)
    A = op.A_dense()
    R = reduced_closed_loop(A, op.Gamma, op.Kx)
    assert R.shape[0] == A.shape[0] - (2 * 8 + 1) + 1
    full = float(np.max(np.abs(np.linalg.eigvals(A - op.Gamma @ op.Kx))))
    # reference: eigenvalues of the whole closed loop; measured difference 2.3e-15; 1e-12 bound
    assert abs(spectral_radius(A, op.Gamma, op.Kx) - full) <= 1e-12
    assert spectral_radius(A, op.Gamma, op.Kx, reduced=False) == full
