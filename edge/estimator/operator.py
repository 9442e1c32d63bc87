"""The estimator's step operator, derived once at load time from a bundle (NumPy only).

Every step of the paper's modified Newmark integrator (paper 004, Table 1) is linear in the
state and the new measurement. Writing the Newmark state as ``x = [u, v, a]``::

    x_{k+1} = A x_k + Gamma f_{k+1}              (Newmark, eq. 14-15)
    y_{k+1} = S x_{k+1}                          (channels: rows of u, v or a)

The paper identifies ``f_{k+1}`` from ``y_{k+1}`` alone (Tikhonov, eq. 24). The fixed-lag
generalisation stacks the next L measurements ``Y = O x_k + J F`` with ``O_i = S A^(i+1)`` and
the block-Toeplitz Markov parameters ``J_ij = S A^(i-j) Gamma`` (i >= j), solves::

    F = (J^T W J + alpha I)^-1 J^T W (Y - O x_k)

and keeps the first force. With L = 1 this is exactly eq. 24 (J = S Keff^-1 B = H for
collocated displacement channels, W = I). The gain ``K1`` (first nf rows) is precomputed, so
every step is the fixed linear filter::

    f_{k+1} = Ky Y - Kx x_k,     Ky = K1,  Kx = K1 O
    x_{k+1} = A x_k + Gamma f_{k+1}

Realisation: the state is expressed in the M-orthonormal modal basis of the reduced model
(``u = Phi q``) as ``[q_i, qd_i]`` per mode plus the previous force (equilibrium gives the
accelerations). With proportional (e.g. Rayleigh) damping, A is block diagonal with one 2x2
block per mode plus a rank-nf coupling to the previous force, so a step costs O(n) instead of
O(n^2); otherwise one dense block is used.
The modal basis is well conditioned (Phi^T M Phi = I), unlike a diagonalisation of the
non-normal closed-loop matrix.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edge.bundle import Bundle
from edge.estimator.chain_window import chain_realisation, models_chain
from edge.estimator.closed_loop import spectral_radius
from edge.estimator.expm import foh_matrices
from edge.estimator.tikhonov import (EstimatorError, first_difference,  # noqa: F401
                                     force_scales, tikhonov_gain, window_matrices)
from edge.kinds import DISCRETIZATIONS, REGULARIZATIONS, kind_order


@dataclass
class StepOperator:
    """Precomputed arrays of the estimator (state ``[q_1, qd_1, ..., q_n, qd_n, f_prev]``).

    Attributes
    ----------
    blk_ptr : int64 (nblk+1,)       state index where each diagonal block of A starts
    dat_ptr : int64 (nblk+1,)       offset of each block's row-major data in ``A_data``
    A_data : float64                the diagonal blocks of A
    Acoup : float64 (ns, nc)        A's coupling to the last nc states (FOH: previous force)
    Gamma : float64 (ns, nf)        force input of one step
    Kx : float64 (nf, ns)           state gain (K1 O)
    Ky : float64 (nf, L*nch)        measurement-window gain (K1), oldest sample first
    E : float64 (nout, ns)          virtual outputs from the state
    S : float64 (nch, ns)           channel rows
    P : float64 (3n, ns)            physical state [u; v; a] = P x
    Pinv : float64 (ns, 3n)         x = Pinv [u; v; a]
    n_state, n_forces, n_channels, n_outputs : int   sizes, from Gamma, S and E
    """

    blk_ptr: np.ndarray
    dat_ptr: np.ndarray
    A_data: np.ndarray
    Acoup: np.ndarray
    Gamma: np.ndarray
    Kx: np.ndarray
    Ky: np.ndarray
    E: np.ndarray
    S: np.ndarray
    P: np.ndarray
    Pinv: np.ndarray
    window: int
    alpha: float
    dt: float
    spectral_radius: float
    freqs_hz: np.ndarray
    info: dict = field(default_factory=dict)

    def __post_init__(self):
        # sizes: ns states, nf forces (Gamma), nch channels (S), nout outputs (E)
        self.n_state, self.n_forces = (int(d) for d in self.Gamma.shape)
        self.n_channels, self.n_outputs = int(self.S.shape[0]), int(self.E.shape[0])

    def A_dense(self) -> np.ndarray:
        """The full state matrix A, shape (ns, ns) (for analysis and tests)."""
        A = blocks_to_dense(self.blk_ptr, self.dat_ptr, self.A_data)
        nc = self.Acoup.shape[1]
        if nc:
            A[:, A.shape[0] - nc:] += self.Acoup
        return A


# ----------------------------------------------------------------------------- Newmark
def newmark_state_matrices(M, C, K, dt, beta=0.25, gamma=0.5):
    """State matrices of one Newmark step for ``x = [u; v; a]`` (physical ordering).

    Returns
    -------
    A : ndarray, shape (3n, 3n)
    G : ndarray, shape (3n, n)
        ``x_{k+1} = A x_k + G f_{k+1}`` with f the nodal load at the new step.
    """
    n = M.shape[0]
    I = np.eye(n)
    Z = np.zeros((n, n))
    # Keff = M/(beta dt^2) + gamma C/(beta dt) + K                             (eq. 15b)
    Keff = M / (beta * dt * dt) + gamma * C / (beta * dt) + K
    Kinv = np.linalg.inv(Keff)
    # r = R [u; v; a]                                                           (eq. 15d)
    R = np.hstack([
        M / (beta * dt * dt) + gamma * C / (beta * dt),
        M / (beta * dt) + (gamma / beta - 1.0) * C,
        (0.5 / beta - 1.0) * M + dt * (0.5 * gamma / beta - 1.0) * C,
    ])
    # u+ = Keff^-1 (r + f)                                                      (eq. 15a)
    Au, Gu = Kinv @ R, Kinv
    # a+ = (u+ - u)/(beta dt^2) - v/(beta dt) - (1/(2beta) - 1) a               (eq. 14b)
    Aa = (Au - np.hstack([I, Z, Z])) / (beta * dt * dt) - np.hstack(
        [Z, I / (beta * dt), (0.5 / beta - 1.0) * I])
    Ga = Gu / (beta * dt * dt)
    # v+ = v + dt ((1 - gamma) a + gamma a+)                                    (eq. 14a)
    Av = np.hstack([Z, I, dt * (1.0 - gamma) * I]) + dt * gamma * Aa
    Gv = dt * gamma * Ga
    return np.vstack([Au, Av, Aa]), np.vstack([Gu, Gv, Ga])


#: modal bases of recent (M, K) pairs: an alpha/window sweep derives many operators of one
#: model, and the eigenproblem is the same each time (key: the matrices' bytes)
_BASIS_CACHE: dict = {}
#: eigenvalues below this fraction of the largest are rigid-body modes computed with round-off
#: (e.g. -6e-9 for a free-free beam): set to exactly 0 (round-off is ~1e-16 of the largest)
RIGID_REL = 1e-12


def modal_basis(M, K):
    """M-orthonormal eigenvectors: ``K Phi = M Phi diag(omega^2)``, ``Phi^T M Phi = I``.

    Returns (omega2 (n,), Phi (n, n)); NumPy only (Cholesky + symmetric eigh). Rigid-body
    modes (``|omega^2| <= RIGID_REL max |omega^2|``) get exactly ``omega^2 = 0``; a clearly
    negative eigenvalue (K not positive semi-definite) is an error naming it.
    """
    M = np.ascontiguousarray(M, dtype=float)
    K = np.ascontiguousarray(K, dtype=float)
    key = (M.shape, hash(M.tobytes()), hash(K.tobytes()))
    hit = _BASIS_CACHE.get(key)
    if hit is not None:
        return hit[0].copy(), hit[1].copy()
    try:
        L = np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        raise EstimatorError("reduced mass matrix M is not positive definite") from None
    Linv = np.linalg.inv(L)
    Kt = Linv @ K @ Linv.T
    w2, V = np.linalg.eigh(0.5 * (Kt + Kt.T))
    top = float(np.max(np.abs(w2))) if w2.size else 0.0
    rigid = np.abs(w2) <= RIGID_REL * top
    if np.any((w2 < 0) & ~rigid):
        raise EstimatorError(
            f"reduced stiffness matrix K is not positive semi-definite: eigenvalue "
            f"{float(w2.min()):.4g} rad^2/s^2 (largest {top:.4g}); check the boundary "
            "conditions, springs and the reduction")
    w2 = np.where(rigid, 0.0, w2)
    Phi = Linv.T @ V
    if len(_BASIS_CACHE) >= 8:
        _BASIS_CACHE.pop(next(iter(_BASIS_CACHE)))
    _BASIS_CACHE[key] = (w2, Phi)
    return w2.copy(), Phi.copy()


def blocks_to_dense(blk_ptr, dat_ptr, A_data):
    ns = int(blk_ptr[-1])
    A = np.zeros((ns, ns))
    for b in range(len(blk_ptr) - 1):
        s, e = int(blk_ptr[b]), int(blk_ptr[b + 1])
        m = e - s
        A[s:e, s:e] = A_data[dat_ptr[b]:dat_ptr[b] + m * m].reshape(m, m)
    return A


# ------------------------------------------------------------------------- derivation
def derive_operator(bundle: Bundle, alpha: float | None = None, window: int | None = None,
                    check_stability: bool = True, stability_tol: float = 1e-7,
                    twin: bool = False) -> StepOperator:
    """Derive the step operator of a bundle (optionally with another alpha or window).

    ``twin``: the readable twins of the fast paths (tests, benchmarks): a converter's rows
    tap by tap through the whole model's exponential (:func:`edge.estimator.chain_window.
    conversion_rows`; default with proportional damping: mode by mode, :mod:`edge.estimator.
    modal_conversion`) and the spectral radius of the whole closed loop (default: of
    :func:`edge.estimator.closed_loop.reduced_closed_loop`).

    Raises
    ------
    EstimatorError
        When a force is not identifiable from the channels, or the closed-loop estimator is
        unstable (spectral radius > 1), with an explanation.
    """
    alpha, L = _settings(bundle, alpha, window)
    disc = getattr(bundle, "discretization", "newmark")
    real, OJ, w2, proportional = window_model(bundle, L, twin)
    blk_ptr, dat_ptr, A_data, Acoup, Gamma, S, E, P, Pinv = real
    A = _dense(real)
    Kx, Ky, cond = _window_gains(bundle, A, Gamma, S, alpha, L, OJ)
    rho = _closed_loop_radius(A, Gamma, Kx, alpha, L, stability_tol, not twin) \
        if check_stability else float("nan")
    freqs = np.sqrt(np.clip(w2, 0.0, None)) / (2 * np.pi)
    return StepOperator(
        blk_ptr=blk_ptr, dat_ptr=dat_ptr, A_data=np.ascontiguousarray(A_data),
        Acoup=np.ascontiguousarray(Acoup), Gamma=np.ascontiguousarray(Gamma), Kx=np.ascontiguousarray(Kx),
        Ky=np.ascontiguousarray(Ky), E=np.ascontiguousarray(E), S=S, P=P, Pinv=Pinv,
        window=L, alpha=alpha, dt=bundle.dt, spectral_radius=rho, freqs_hz=freqs,
        info={"proportional_damping": bool(proportional), "condition": cond,
              "n_state": int(Gamma.shape[0]), "n_blocks": int(len(blk_ptr) - 1),
              "discretization": disc,
              # the forces at the state's end: the previous one, and the older ones a
              # converter's window reaches (edge.estimator.chain_window)
              "force_tail": int(blk_ptr[-1] - blk_ptr[-2])})


def window_model(bundle: Bundle, L: int, dense_rows: bool = False):
    """``(real, OJ, w2, proportional)``: the realisation (:func:`_two_state_realisation`), the window
    ``Y = O x_k + J F`` of the next L samples when the bundle's Tikhonov estimator models its
    converter (``OJ = (O, J)``, :mod:`edge.estimator.chain_window`; None: point samples,
    :func:`window_matrices` of the realisation), the squared modal frequencies and whether
    the damping is proportional."""
    disc = getattr(bundle, "discretization", "newmark")
    w2, Phi, Ct, proportional = _modal_damping(bundle.M, bundle.C, bundle.K)
    B = np.zeros((bundle.M.shape[0], len(bundle.forces)))
    for j, f in enumerate(bundle.forces):
        B[f.dof, j] = 1.0
    PhiB = Phi.T @ B  # modal load per unit force: p = Phi^T B f
    if disc == "newmark":
        real = _newmark_realisation(bundle, Phi, w2, Ct, PhiB, proportional)
    elif disc == "foh":
        real = _foh_realisation(bundle, Phi, w2, Ct, PhiB, proportional)
    else:
        raise EstimatorError(f"unknown discretization {disc!r} ({' or '.join(DISCRETIZATIONS)})")
    OJ = None
    if models_chain(bundle):  # conversions, not point samples
        real, *OJ = chain_realisation(bundle, real, _dense(real), w2, Ct, PhiB, L,
                                      modal=proportional and not dense_rows)
    return real, OJ, w2, proportional


def _dense(real) -> np.ndarray:
    """The dense state matrix A of a realisation (its blocks plus the coupling)."""
    A = blocks_to_dense(*real[:3])
    nc = real[3].shape[1]
    if nc:
        A[:, A.shape[0] - nc:] += real[3]
    return A


def _settings(bundle: Bundle, alpha, window) -> tuple[float, int]:
    """``(alpha, L)``: the bundle's, or the overrides; EstimatorError names a bad one."""
    alpha = float(bundle.alpha if alpha is None else alpha)
    L = int(bundle.window if window is None else window)
    if L < 1:
        raise EstimatorError(f"window must be >= 1, got {L}")
    if alpha < 0 or not np.isfinite(alpha):
        raise EstimatorError(f"alpha must be finite and >= 0, got {alpha}")
    return alpha, L


def _modal_damping(M, C, K):
    """``(w2, Phi, Ct, proportional)``: modal coordinates Phi^T M Phi = I,
    Phi^T K Phi = diag(w^2), Phi^T C Phi = Ct; Ct made diagonal when its off-diagonal part is
    below 1e-9 of its largest diagonal term (proportional damping)."""
    n = M.shape[0]
    w2, Phi = modal_basis(M, K)
    Ct = Phi.T @ C @ Phi
    Ct = 0.5 * (Ct + Ct.T)
    off = Ct - np.diag(np.diag(Ct))
    scale = max(float(np.max(np.abs(np.diag(Ct)))), 1e-300)
    proportional = float(np.max(np.abs(off))) <= 1e-9 * scale if n > 1 else True
    if proportional:
        Ct = np.diag(np.diag(Ct))
    return w2, Phi, Ct, proportional


def _window_gains(bundle: Bundle, A, Gamma, S, alpha: float, L: int, OJ=None):
    """``(Kx, Ky, cond)``: the Tikhonov gains of the window, f = Ky Y - Kx x; ``OJ``: the
    window's ``(O, J)`` (default: point samples, :func:`window_matrices`)."""
    nf = len(bundle.forces)
    w = np.array([ch.weight for ch in bundle.channels])
    O, J = window_matrices(A, Gamma, S, L) if OJ is None else OJ
    Wbar = np.tile(w, L)
    reg = getattr(bundle, "regularization", "tikhonov0")
    if reg not in REGULARIZATIONS:
        raise EstimatorError(f"unknown regularization {reg!r} ({' or '.join(REGULARIZATIONS)})")
    # penalty on the scaled forces f / s (one alpha over mixed units): R -> R S^-1
    Sinv = np.diag(1.0 / np.tile(force_scales(bundle), L))
    R = (first_difference(L, nf) if reg == "tikhonov1" else np.eye(L * nf)) @ Sinv
    K1, Hinv1, cond = tikhonov_gain(J, Wbar, alpha, nf, bundle, R=R)
    Ky = K1
    Kx = K1 @ O
    if reg == "tikhonov1":
        # the first difference f_{k+1} - f_k penalises the jump from the previous force,
        # which is the state's tail: its term moves into the state gain (scaled: S^-1 r0)
        ns_ = A.shape[0]
        Ptail = np.zeros((nf, ns_))
        Ptail[:, ns_ - nf:] = np.eye(nf)
        r0 = np.zeros((L * nf, nf))
        r0[:nf] = np.eye(nf)
        Kx = Kx - alpha * Hinv1 @ R.T @ (Sinv @ r0) @ Ptail
    return Kx, Ky, cond


def _closed_loop_radius(A, Gamma, Kx, alpha: float, L: int, stability_tol: float,
                        reduced: bool = True) -> float:
    """Spectral radius of the closed loop x_{k+1} = (A - Gamma Kx) x_k + Gamma Ky Y (``reduced``:
    without the history states, :mod:`edge.estimator.closed_loop`); EstimatorError when it is
    above 1 + ``stability_tol``."""
    rho = spectral_radius(A, Gamma, Kx, reduced)
    if not rho <= 1.0 + stability_tol:
        raise EstimatorError(
            f"the estimator is unstable: spectral radius of the closed-loop step operator is "
            f"{rho:.6f} > 1 (alpha={alpha:g}, window={L}). The identified force feeds back "
            "into the state faster than the model damps it; increase alpha, use a longer "
            "window, or add damping/sensors. Not shipping an unstable estimator.")
    return rho


def _block_layout(A, size, n, proportional):
    """Block-diagonal storage of A (per-mode blocks of ``size`` or one dense block)."""
    if proportional:
        blk_ptr = np.arange(0, size * n + 1, size, dtype=np.int64)
        dat_ptr = np.arange(0, size * size * n + 1, size * size, dtype=np.int64)
        A_data = np.concatenate([A[size * i:size * (i + 1), size * i:size * (i + 1)].ravel()
                                 for i in range(n)])
    else:
        blk_ptr = np.array([0, size * n], dtype=np.int64)
        dat_ptr = np.array([0, (size * n) ** 2], dtype=np.int64)
        A_data = A.ravel().copy()
    return blk_ptr, dat_ptr, A_data


def _modal_rows(Phi, items):
    """(derivative order, row over the modal coordinates) of channels (a DOF) or outputs (a row)."""
    out = []
    for it in items:
        if hasattr(it, "row"):
            r = np.asarray(it.row, dtype=float)
        else:
            r = np.zeros(Phi.shape[0])
            r[it.dof] = 1.0
        out.append((kind_order(it.kind), r @ Phi))
    return out


def _newmark_realisation(bundle, Phi, w2, Ct, PhiB, proportional):
    """Newmark-beta (paper eq. 14-15) in modal coordinates, reduced to 2 states per mode.

    The 3-state step ``[q, qd, qdd]+ = A3 [q, qd, qdd] + g3 p+`` enforces equilibrium at every
    step, so ``qdd = p - Ct qd - w2 q`` with ``p`` the modal load of the current step. Keeping
    that load as a state (the previous force) gives the same 2-states-per-mode form as the
    exact discretisation: ``[q, qd]+ = A2 [q, qd] + G0 p + G1 p+`` (identical results, fewer
    operations per sample).
    """
    n = Phi.shape[0]
    A3, G3 = newmark_state_matrices(np.eye(n), Ct, np.diag(w2), bundle.dt, bundle.beta,
                                    bundle.gamma)
    # [q; qd; qdd] = T [q; qd] + E3 p   (equilibrium at the current step)
    T = np.vstack([np.eye(2 * n), np.hstack([-np.diag(w2), -Ct])])
    E3 = np.vstack([np.zeros((2 * n, n)), np.eye(n)])
    A2 = (A3 @ T)[:2 * n]
    G0 = (A3 @ E3)[:2 * n] @ PhiB
    G1 = G3[:2 * n] @ PhiB
    return _two_state_realisation(bundle, Phi, w2, Ct, PhiB, proportional, A2, G0, G1)


def _foh_realisation(bundle, Phi, w2, Ct, PhiB, proportional):
    """Exact discretisation with a first-order hold on the force.

    Continuous modal dynamics ``q'' + Ct q' + diag(w2) q = Phi^T B f(t)``, f linear between
    samples (see :func:`edge.estimator.expm.foh_matrices`).
    """
    n = Phi.shape[0]
    nf = PhiB.shape[1]
    if proportional:
        A2 = np.zeros((2 * n, 2 * n))
        G0 = np.zeros((2 * n, nf))
        G1 = np.zeros((2 * n, nf))
        for i in range(n):
            Ac = np.array([[0.0, 1.0], [-w2[i], -Ct[i, i]]])
            Ai, g0, g1 = foh_matrices(Ac, np.array([[0.0], [1.0]]), bundle.dt)
            idx = [i, n + i]
            A2[np.ix_(idx, idx)] = Ai
            G0[idx] = g0 @ PhiB[i:i + 1]
            G1[idx] = g1 @ PhiB[i:i + 1]
    else:
        Ac = np.block([[np.zeros((n, n)), np.eye(n)], [-np.diag(w2), -Ct]])
        Bc = np.vstack([np.zeros((n, nf)), PhiB])
        A2, G0, G1 = foh_matrices(Ac, Bc, bundle.dt)
    return _two_state_realisation(bundle, Phi, w2, Ct, PhiB, proportional, A2, G0, G1)


def _two_state_realisation(bundle, Phi, w2, Ct, PhiB, proportional, A2, G0, G1):
    """Kernel layout of ``[q; qd]+ = A2 [q; qd] + G0 f_prev + G1 f`` (``[q(all); qd(all)]``).

    State ``[q_1, qd_1, ..., q_n, qd_n, f_prev (nf)]``: per-mode 2x2 blocks (one dense block
    without proportional damping), the previous force as a zero block whose new value comes
    through Gamma, coupled into the modes by ``Acoup``. Accelerations from equilibrium,
    ``a = Phi (Phi^T B f - Ct qd - w2 q)``.
    """
    n = Phi.shape[0]
    nf = PhiB.shape[1]
    ns = 2 * n + nf
    perm = np.arange(2 * n).reshape(2, n).T.ravel()  # -> per mode [q_i, qd_i]
    A = A2[np.ix_(perm, perm)]
    blk_ptr, dat_ptr, A_data = _block_layout(A, 2, n, proportional)
    # the tail (previous force) is a zero block of size nf; its new value comes via Gamma
    blk_ptr = np.append(blk_ptr, blk_ptr[-1] + nf)
    dat_ptr = np.append(dat_ptr, dat_ptr[-1] + nf * nf)
    A_data = np.concatenate([A_data, np.zeros(nf * nf)])
    Acoup = np.zeros((ns, nf))
    Acoup[:2 * n] = G0[perm]
    Gamma = np.vstack([G1[perm], np.eye(nf)])

    def rows(items):
        R = np.zeros((len(items), ns))
        for i, (k, r) in enumerate(_modal_rows(Phi, items)):
            if k == 0:
                R[i, 0:2 * n:2] = r
            elif k == 1:
                R[i, 1:2 * n:2] = r
            else:  # a = Phi (PhiB f - Ct qd - w2 q)
                R[i, 0:2 * n:2] = -r * w2
                R[i, 1:2 * n:2] = -r @ Ct
                R[i, 2 * n:] = r @ PhiB
        return R

    S, E = rows(bundle.channels), rows(bundle.outputs)
    P = np.zeros((3 * n, ns))
    P[:n, 0:2 * n:2] = Phi
    P[n:2 * n, 1:2 * n:2] = Phi
    P[2 * n:, 0:2 * n:2] = -Phi * w2
    P[2 * n:, 1:2 * n:2] = -Phi @ Ct
    P[2 * n:, 2 * n:] = Phi @ PhiB
    Pinv = np.zeros((ns, 3 * n))
    PhiInv = Phi.T @ bundle.M  # Phi^-1 = Phi^T M
    Pinv[0:2 * n:2, :n] = PhiInv
    Pinv[1:2 * n:2, n:2 * n] = PhiInv
    return blk_ptr, dat_ptr, A_data, Acoup, Gamma, S, E, P, Pinv
