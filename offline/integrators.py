"""The response of a structural model to a force history: the integrators of
:mod:`offline.simulate` (and of the tests' and benchmarks' truths).

* :func:`simulate_sparse`: Newmark-beta, average acceleration, on the full sparse matrices;
* :func:`simulate_modal`: modal superposition of the full model, each mode integrated exactly
  for a force linear between fine steps (first-order hold), plus the static response of the
  modes left out (mode acceleration method);
* :func:`simulate_dense`: Newmark-beta on dense (reduced) matrices.

Each samples its probes (a DOF or a strain/stress row, and the kind: displacement, velocity,
acceleration) every ``decim``-th fine step.
"""

from __future__ import annotations

import numpy as np

from edge.estimator.expm import foh_matrices
from edge.estimator.newmark import newmark
from offline._deps import need
from offline._deps import progress as _progress
from offline.fem.strain import probe_matrix
from offline.limit.modal_damping import modal_damping, run_coupled
from offline.reduction.eigen import max_modes, modes


def simulate_sparse(M, C, K, force_dofs, F_fine, dt_fine, decim, probes, progress=True):
    """Newmark (average acceleration) on sparse full-model matrices, sampling probe DOFs.

    Parameters
    ----------
    M, C, K : scipy.sparse matrices, shape (N, N)
    force_dofs : (nf,) int            DOFs the forces act on
    F_fine : (nt, nf)                 force history on the fine grid [N]
    dt_fine : float                   fine time step [s]
    decim : int                       fine steps per sample
    probes : list of (dof, kind)      recorded quantities (kind 0 u, 1 v, 2 a; ``dof`` an
                                      index or a strain/stress ``offline.fem.strain.Probe``)

    Returns
    -------
    ndarray, shape (nt // decim + ..., len(probes)) sampled at fine steps 0, decim, 2 decim, ...
    """
    sp = need("scipy.sparse")
    spla = need("scipy.sparse.linalg")
    beta, gamma = 0.25, 0.5
    dt = dt_fine
    N = M.shape[0]
    nt = F_fine.shape[0]
    Keff = (M / (beta * dt * dt) + gamma * C / (beta * dt) + K).tocsc()
    lu = spla.splu(Keff)
    u = np.zeros(N)
    v = np.zeros(N)
    a = np.zeros(N)
    fvec = np.zeros(N)
    S = probe_matrix([p[0] for p in probes], N)  # a DOF or a strain/stress row each
    pk = np.array([p[1] for p in probes], dtype=int)
    out = np.zeros(((nt - 1) // decim + 1, len(probes)))
    M = sp.csr_matrix(M)
    C = sp.csr_matrix(C)

    def record(i):
        st = (S @ u, S @ v, S @ a)
        out[i] = [st[k][j] for j, k in enumerate(pk)]

    record(0)
    c1, c2, c3 = 1 / (beta * dt * dt), 1 / (beta * dt), 0.5 / beta - 1
    d1, d2, d3 = gamma / (beta * dt), gamma / beta - 1, dt * (0.5 * gamma / beta - 1)
    for k in _progress(range(nt - 1), desc="full-model Newmark", enable=progress,
                      mininterval=0.5):
        fvec[:] = 0.0
        fvec[force_dofs] = F_fine[k + 1]
        # r = M (c1 u + c2 v + c3 a) + C (d1 u + d2 v + d3 a)            (eq. 15d)
        r = M @ (c1 * u + c2 * v + c3 * a) + C @ (d1 * u + d2 * v + d3 * a)
        u_new = lu.solve(r + fvec)
        a_new = c1 * (u_new - u) - c2 * v - c3 * a
        v += dt * ((1 - gamma) * a + gamma * a_new)
        u, a = u_new, a_new
        if (k + 1) % decim == 0:
            record((k + 1) // decim)
    return out


def simulate_modal(model, force_dofs, F_fine, dt_fine, decim, probes, n_modes=80,
                   progress=False):
    """Full-model response by modal superposition, integrated exactly, with static correction.

    The ``n_modes`` lowest modes of the full sparse model are integrated with the exact
    discretisation for a force linear between fine steps (matrix exponential, first-order
    hold: no period error, unlike Newmark); the modes left out contribute their static
    (residual-flexibility) response ``(K^-1 - Phi W^-2 Phi^T) B f`` to displacements (mode
    acceleration method). Damping per mode from ``Phi^T C Phi`` (diagonal part), or the
    whole matrix where it couples the modes (:mod:`offline.limit.modal_damping`).

    Parameters as :func:`simulate_sparse`; returns the probes at every ``decim``-th fine step.
    """
    spla = need("scipy.sparse.linalg")
    N = model.n_dofs
    m = int(max(1, min(n_modes, max_modes(N))))
    md = modes(model.K, model.M, m)
    lam, Phi = np.clip(md.lam, 0.0, None), md.Phi
    w = np.sqrt(lam)
    c, Ct = modal_damping(Phi, model.damping_matrix())
    force_dofs = np.asarray(force_dofs, dtype=int)
    P = Phi[force_dofs].T  # (m, nf): modal load per unit force
    A = np.zeros((m, 2, 2))
    G0 = np.zeros((m, 2))
    G1 = np.zeros((m, 2))
    for i in range(m):
        Ac = np.array([[0.0, 1.0], [-lam[i], -c[i]]])
        Ai, g0, g1 = foh_matrices(Ac, np.array([[0.0], [1.0]]), dt_fine)
        A[i], G0[i], G1[i] = Ai, g0[:, 0], g1[:, 0]
    S = probe_matrix([p[0] for p in probes], N)  # a DOF or a strain/stress row each
    pk = np.array([p[1] for p in probes], dtype=int)
    Pp = np.asarray(S @ Phi)  # (np, m)
    # residual flexibility at the probes: (K^-1 - Phi diag(1/w^2) Phi^T) B   (mode acceleration)
    rigid = bool(np.any(w < 1e-6 * max(w.max(), 1e-300)))
    Rp = np.zeros((len(pk), len(force_dofs)))
    if not rigid and len(force_dofs):
        B = np.zeros((N, len(force_dofs)))
        B[force_dofs, np.arange(len(force_dofs))] = 1.0
        KinvB = spla.splu(model.K.tocsc()).solve(B)
        Rp = np.asarray(S @ KinvB) - (Pp / lam) @ Phi[force_dofs].T
    if Ct is not None:
        return _coupled_probes(lam, Ct, P, F_fine, dt_fine, decim, pk, Pp, Rp)
    nt = F_fine.shape[0]
    out = np.zeros(((nt - 1) // decim + 1, len(probes)))
    q = np.zeros(m)
    qd = np.zeros(m)
    p_prev = P @ F_fine[0]

    def record(i, f):
        p = P @ f
        qdd = p - c * qd - lam * q
        for j, (kind, row) in enumerate(zip(pk, Pp)):
            if kind == 0:
                out[i, j] = row @ q + Rp[j] @ f
            elif kind == 1:
                out[i, j] = row @ qd
            else:
                out[i, j] = row @ qdd

    record(0, F_fine[0])
    a00, a01, a10, a11 = A[:, 0, 0], A[:, 0, 1], A[:, 1, 0], A[:, 1, 1]
    for k in _progress(range(nt - 1), desc="full-model modal run", enable=progress,
                      mininterval=0.5):
        p_new = P @ F_fine[k + 1]
        q, qd = (a00 * q + a01 * qd + G0[:, 0] * p_prev + G1[:, 0] * p_new,
                 a10 * q + a11 * qd + G0[:, 1] * p_prev + G1[:, 1] * p_new)
        p_prev = p_new
        if (k + 1) % decim == 0:
            record((k + 1) // decim, F_fine[k + 1])
    return out


def _coupled_probes(lam, Ct, P, F_fine, dt_fine, decim, pk, Pp, Rp) -> np.ndarray:
    """:func:`simulate_modal`'s probes where the damping ``Ct`` couples the modes."""
    st = run_coupled(lam, Ct, F_fine @ P.T, dt_fine, decim)  # (Q, Qd, Qdd)
    out = np.column_stack([st[k] @ row for k, row in zip(pk, Pp)])
    return out + (F_fine[::decim] @ Rp.T) * (pk == 0)[None, :]


def simulate_dense(M, C, K, force_dofs, F, dt, probes_rows, kinds):
    """Newmark on dense (reduced) matrices; outputs ``rows @ (u, v or a)`` at every step.

    Parameters
    ----------
    probes_rows : (np, n) rows over the coordinates; kinds : (np,) 0 u, 1 v, 2 a.
    """
    n = M.shape[0]
    Fn = np.zeros((F.shape[0], n))
    Fn[:, force_dofs] = F
    u, v, a = newmark(M, C, K, Fn, dt)
    st = (u, v, a)
    return np.column_stack([st[k] @ row for row, k in zip(probes_rows, kinds)]) \
        if len(kinds) else np.zeros((F.shape[0], 0))
