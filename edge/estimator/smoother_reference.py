"""Plain NumPy twin of the smoother kernel (:mod:`edge.estimator.smoother_kernel`), written
with the textbook symbols and dense matrices, one sample at a time. For tests only."""

from __future__ import annotations

from collections import deque

import numpy as np

from edge.bundle import Bundle
from edge.estimator.smoother import _converged_row
from edge.flags import FLAG_HELD, FLAG_MODEL_SUSPECT, FLAG_OVERFLOW, FLAG_WARMUP


class ReferenceSmoother:
    """Steady-state fixed-lag smoother from a bundle's ``kf_*`` arrays (dense, NumPy)."""

    def __init__(self, bundle: Bundle):
        self.bundle = bundle
        self.resets = 0                           # after a non-finite state
        self._start()

    def _start(self):
        """The state at rest (the start, and a reset after a non-finite state)."""
        bundle = self.bundle
        kf = bundle.kf
        self.A, self.H, self.K = kf["A"], kf["H"], kf["K"]
        self.Cq, self.G, self.Sinv = kf["Cq"], kf["G"], kf["Sinv"]
        self.L = self.G.shape[0] - 1
        self.W = int(kf["nis_window"])
        self.threshold = float(kf["nis_threshold"])
        self.threshold_low = float(kf.get("nis_threshold_low", 0.0))
        self.nf = len(bundle.forces)
        self.x = np.zeros(self.A.shape[0])       # x_k|k-1
        self.last = np.zeros(self.H.shape[0])
        self.hist = deque(maxlen=self.L + 1)     # (Cq x_k|k, e_k, flag)
        self.nis = deque(maxlen=self.W)
        self.Wt = kf["Wt"]
        self.ba = np.asarray(kf["band_ba"]).reshape(-1, 5)
        self.gain, self.bthr = kf["band_gain"], kf["band_threshold"]
        nb, nch = self.ba.shape[0], self.H.shape[0]
        self.u_hist = np.zeros((nb, nch, 2))  # u_{k-1}, u_{k-2} per band and channel
        self.y_hist = np.zeros((nb, nch, 2))  # y_{k-1}, y_{k-2}
        self.bpow = deque(maxlen=self.W)
        self.lag1 = deque(maxlen=self.W)          # e_k^T S^-1 e_k-1 per sample
        # start-up: rows of samples m < n_warm carry the warm-up flag (std not converged)
        sv = kf.get("startup_var")
        self.n_warm = 0 if sv is None else _converged_row(np.asarray(sv), kf["std"])
        self.k = 0                                # samples seen
        self.e_prev = None                        # previous innovation (None: held)

    def step(self, y):
        """One sample: returns (q (nq,) smoothed forces then outputs of sample k - L, flag)."""
        y = np.asarray(y, dtype=float)
        ok = np.isfinite(y)
        self.last = np.where(ok, y, self.last)
        flag = 0 if ok.all() else FLAG_HELD
        # e_k = y_k - H x_k|k-1
        e = self.last - self.H @ self.x
        # x_k|k = x_k|k-1 + K e_k
        xf = self.x + self.K @ e
        self.hist.append((self.Cq @ xf, e, flag))
        # NIS_k = e^T S^-1 e (a held sample counts its expectation, nch)
        self.nis.append(float(e @ self.Sinv @ e) if flag == 0 else float(len(e)))
        # c_k = e_k^T S^-1 e_k-1 (0 when either sample is held)
        ok_prev = flag == 0 and self.e_prev is not None
        self.lag1.append(float(e @ self.Sinv @ self.e_prev) if ok_prev else 0.0)
        self.e_prev = e if flag == 0 else None
        # band powers: y_k = b0 u_k + b1 u_k-1 + b2 u_k-2 - a1 y_k-1 - a2 y_k-2 of eps = Wt e
        u = self.Wt @ e if flag == 0 else np.zeros(len(e))
        b0, b1, b2, a1, a2 = (self.ba[:, i:i + 1] for i in range(5))
        yb = b0 * u + b1 * self.u_hist[..., 0] + b2 * self.u_hist[..., 1] \
            - a1 * self.y_hist[..., 0] - a2 * self.y_hist[..., 1]
        self.u_hist[..., 1], self.u_hist[..., 0] = self.u_hist[..., 0], u
        self.y_hist[..., 1], self.y_hist[..., 0] = self.y_hist[..., 0], yb
        self.bpow.append(np.sum(yb ** 2, axis=1) / self.gain if flag == 0
                         else np.full(len(self.gain), float(len(e))))
        # x_k+1|k = A x_k|k; a non-finite one: this row is returned, then a reset to rest
        self.x = self.A @ xf
        blown = not np.all(np.isfinite(self.x))
        z, fl = self._row(flag)
        if blown:
            self.resets += 1
            self._start()
        return z, fl

    def _row(self, flag):
        """The model check's flag and the smoothed row of sample k - L (after the update)."""
        # the window fills from sample min(n_warm, W) on (the start-up's innovations left)
        full = self.k + 1 >= min(self.n_warm, self.W) + self.W
        bad = not self.threshold_low <= sum(self.nis) <= self.threshold
        if len(self.gain):
            P = np.sum(self.bpow, axis=0)   # windowed band powers; pairs (2i, 2i+1)
            lo, hi = P[0::2], P[1::2]
            bad = bad or bool(np.any(lo > self.bthr[0::2] * hi) or
                              np.any(hi > self.bthr[1::2] * lo))
        susp = FLAG_MODEL_SUSPECT if (full and bad) else 0
        self.k += 1
        if len(self.hist) < self.L + 1:
            return np.full(self.Cq.shape[0], np.nan), FLAG_WARMUP | flag | susp
        # the row describes sample m = k - 1 - L
        if self.k - 1 - self.L < self.n_warm:
            susp |= FLAG_WARMUP
        # z_k-L|k = Cq x_k-L|k-L + sum_{j=1..L} G_j e_k-L+j
        z = self.hist[0][0].copy()
        wflag = 0
        for j, (_, ej, fj) in enumerate(self.hist):
            wflag |= fj
            if j:
                z += self.G[j] @ ej
        over = 0 if np.all(np.isfinite(z)) else FLAG_OVERFLOW
        return z, wflag | susp | over

    def run(self, Y):
        """(F (nt, nf), Z (nt, nout), flags (nt,)) for a whole record."""
        out = [self.step(y) for y in np.asarray(Y, dtype=float)]
        Qm = np.array([o[0] for o in out])
        fl = np.array([o[1] for o in out], dtype=np.uint8)
        return Qm[:, :self.nf], Qm[:, self.nf:], fl
