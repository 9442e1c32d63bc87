"""Plain NumPy reference estimator following paper 004, Table 1, step by step.

With ``discretization="foh"`` the Newmark step is replaced by the exact discretisation of the
physical reduced model (matrix exponential, force linear between samples), again computed
directly in physical coordinates.

This is the readable twin of the compiled kernel: physical reduced coordinates, the effective
stiffness solved every step, no precomputed gains. With ``window > 1`` it solves the fixed-lag
Tikhonov problem at every step from explicit free-response predictions (Newmark runs with zero
force) and impulse responses, i.e. independently of the modal realisation and gain algebra
used by :mod:`edge.estimator.operator`. It is slow on purpose; use it for checking.
"""

from __future__ import annotations

import numpy as np

from edge.bundle import Bundle
from edge.estimator.expm import foh_matrices
from edge.estimator.kernel import FLAG_HELD, FLAG_OVERFLOW, FLAG_WARMUP
from edge.estimator.newmark import effective_stiffness, internal_force, update_rates
from edge.kinds import kind_order


class ReferenceEstimator:
    """Table 1 of paper 004, generalised to mixed channel kinds, weights and a window L."""

    def __init__(self, bundle: Bundle, alpha: float | None = None, window: int | None = None):
        b = bundle
        self.M, self.C, self.K = b.M, b.C, b.K
        self.dt, self.beta, self.gamma = b.dt, b.beta, b.gamma
        self.alpha = float(b.alpha if alpha is None else alpha)
        self.disc = getattr(b, "discretization", "newmark")
        self.reg = getattr(b, "regularization", "tikhonov0")
        self.L = int(b.window if window is None else window)
        n = self.n = b.M.shape[0]
        self.ch_dof = np.array([c.dof for c in b.channels])
        self.ch_kind = np.array([kind_order(c.kind) for c in b.channels])
        self.w = np.array([c.weight for c in b.channels])
        self.scale = np.array([float(getattr(f, "scale", 1.0)) for f in b.forces])
        self.B = np.zeros((n, len(b.forces)))
        for j, f in enumerate(b.forces):
            self.B[f.dof, j] = 1.0
        self.out_rows = np.array([o.row for o in b.outputs]).reshape(len(b.outputs), n)
        self.out_kind = np.array([kind_order(o.kind) for o in b.outputs], dtype=int)
        # 1-2. effective stiffness Keff = M/(b dt^2) + g C/(b dt) + K            (eq. 15b)
        self.Keff = effective_stiffness(self.M, self.C, self.K, self.dt, self.beta, self.gamma)
        if self.disc == "foh":
            Minv = np.linalg.inv(self.M)
            Ac = np.block([[np.zeros((n, n)), np.eye(n)], [-Minv @ self.K, -Minv @ self.C]])
            Bc = np.vstack([np.zeros((n, n)), Minv])
            self.Phi, self.G0, self.G1 = foh_matrices(Ac, Bc, self.dt)
            self.Minv = Minv
        self.reset()
        # impulse responses of the channels to a unit force at window step j (for J)
        self.markov = self._markov()

    def reset(self):
        n = self.n
        self.u, self.v, self.a = np.zeros(n), np.zeros(n), np.zeros(n)
        self.fp = np.zeros(n)  # previous nodal force (FOH)
        self.f_last = np.zeros(self.B.shape[1])  # previous identified force (tikhonov1)
        self.window = []
        self.wflags = []
        self.last = np.zeros(len(self.ch_dof))

    # -------------------------------------------------------------- building blocks
    def _step(self, st, f_nodal):
        """One step from state (u, v, a, f_prev) with the nodal load f_nodal at the new step."""
        u, v, a, fp = st
        if self.disc == "foh":
            # x+ = Phi x + G0 f_prev + G1 f_new  (exact, force linear over the step)
            x = self.Phi @ np.concatenate([u, v]) + self.G0 @ fp + self.G1 @ f_nodal
            u1, v1 = x[:self.n], x[self.n:]
            # a+ = M^-1 (f - C v - K u)
            a1 = self.Minv @ (f_nodal - self.C @ v1 - self.K @ u1)
            return u1, v1, a1, f_nodal
        return (*self._newmark_step(u, v, a, f_nodal), f_nodal)

    def _newmark_step(self, u, v, a, f_nodal):
        # 2-1. internal force r (eq. 15d)
        r = internal_force(self.M, self.C, u, v, a, self.dt, self.beta, self.gamma)
        # 3-1. Keff u+ = r + f  (eq. 15a), then v+, a+ (eq. 14)
        u1 = np.linalg.solve(self.Keff, r + f_nodal)
        v1, a1 = update_rates(u1, u, v, a, self.dt, self.beta, self.gamma)
        return u1, v1, a1

    def _measure(self, u, v, a):
        state = (u, v, a)
        return np.array([state[k][d] for d, k in zip(self.ch_dof, self.ch_kind)])

    def _markov(self):
        """Channel responses at window steps 0..L-1 to a unit force at window step 0."""
        n, nf = self.n, self.B.shape[1]
        out = np.zeros((self.L, len(self.ch_dof), nf))
        for j in range(nf):
            st = (np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n))
            for i in range(self.L):
                f = self.B[:, j] if i == 0 else np.zeros(n)
                st = self._step(st, f)
                out[i, :, j] = self._measure(*st[:3])
        return out

    # ------------------------------------------------------------------------ step
    def step(self, y):
        """Process one sample; returns (f (nf,), z (nout,), flag) for sample k - (L-1)."""
        y = np.asarray(y, dtype=float)
        flag = 0
        good = np.isfinite(y)
        if not np.all(good):
            flag |= FLAG_HELD
        self.last = np.where(good, y, self.last)
        self.window.append(self.last.copy())
        self.wflags.append(flag)
        if len(self.window) > self.L:
            self.window.pop(0)
            self.wflags.pop(0)
        nf, nout = self.B.shape[1], self.out_rows.shape[0]
        if len(self.window) < self.L:
            return np.full(nf, np.nan), np.full(nout, np.nan), FLAG_WARMUP | flag
        L, nch = self.L, len(self.ch_dof)
        # 2-2. initial prediction with no external force, over the window (eq. 16)
        pred = np.zeros((L, nch))
        st = (self.u, self.v, self.a, self.fp)
        for i in range(L):
            st = self._step(st, np.zeros(self.n))
            pred[i] = self._measure(*st[:3])
        # 2-3. Tikhonov force (eq. 24 for L = 1; windowed least squares otherwise)
        J = np.zeros((L * nch, L * nf))
        for i in range(L):
            for j in range(i + 1):
                J[i * nch:(i + 1) * nch, j * nf:(j + 1) * nf] = self.markov[i - j]
        W = np.diag(np.tile(self.w, L))
        resid = (np.array(self.window) - pred).ravel()
        # penalty on f / s per force (scales s), S = diag(s) over the window
        Si = np.diag(1.0 / np.tile(self.scale, L))
        if self.reg == "tikhonov1":
            # min ||W^1/2 (Y - pred - J F)||^2 + alpha sum_i ||(f_i - f_(i-1)) / s||^2, f_0 known
            D = np.zeros((L * nf, L * nf))
            for i in range(L):
                for j in range(nf):
                    D[i * nf + j, i * nf + j] = 1.0
                    if i > 0:
                        D[i * nf + j, (i - 1) * nf + j] = -1.0
            d0 = np.zeros(L * nf)
            d0[:nf] = self.f_last
            D = Si @ D
            Fw = np.linalg.solve(J.T @ W @ J + self.alpha * D.T @ D,
                                 J.T @ W @ resid + self.alpha * D.T @ (Si @ d0))
        else:
            Fw = np.linalg.solve(J.T @ W @ J + self.alpha * Si @ Si, J.T @ W @ resid)
        f = Fw[:nf]
        self.f_last = f.copy()
        # 2-4. effective force of the second sub-step, 3-1. state update
        self.u, self.v, self.a, self.fp = self._step((self.u, self.v, self.a, self.fp),
                                                     self.B @ f)
        state = (self.u, self.v, self.a)
        z = np.array([row @ state[k] for row, k in zip(self.out_rows, self.out_kind)])
        over = 0 if np.all(np.isfinite(f)) and np.all(np.isfinite(z)) else FLAG_OVERFLOW
        return f, z, int(np.bitwise_or.reduce(self.wflags)) | over

    def run(self, Y):
        """Process a record; returns (F (nt, nf), Z (nt, nout), flags (nt,))."""
        Y = np.asarray(Y, dtype=float)
        res = [self.step(y) for y in Y]
        F = np.array([r[0] for r in res]).reshape(len(Y), self.B.shape[1])
        Z = np.array([r[1] for r in res]).reshape(len(Y), self.out_rows.shape[0])
        flags = np.array([r[2] for r in res], dtype=np.uint8)
        return F, Z, flags
