"""The Kalman fixed-lag smoother estimator on the edge: a fixed linear recursion whose
steady-state gains were computed offline (:mod:`offline.smoother`) and stored in the bundle.

The estimator reports, with every force and output, its standard deviation (constant: the
steady-state smoother covariance, ``kf_std``), and runs the model check: the normalised
innovation squared (NIS) summed over a sliding window of W samples is chi-square with
``W * nch`` degrees of freedom when the model (structure, force model and noise) is right.
A structural error (a shifted resonance) hardly changes the broadband NIS when the force is
unknown at the sensor, but it colours the innovations near the resonances: the power of the
whitened innovation in narrow bands just below and above each resonance (``kf_band_*``) is
compared with its white-noise expectation. Above a threshold (broadband or any band), every
estimate carries :data:`edge.flags.FLAG_MODEL_SUSPECT`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edge.bundle import Bundle
from edge.estimator.operator import EstimatorError, blocks_to_dense
from edge.estimator.smoother_kernel import _smooth


# ------------------------------------------------------------------- chi-square helpers
def _norm_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def chi2_sf(x: float, dof: int) -> float:
    """P(X > x) for X ~ chi-square(dof), Wilson-Hilferty cube-root normal approximation
    (relative error of the quantile < 1e-3 for dof >= 100; the model check uses dof >= 1000)."""
    if x <= 0:
        return 1.0
    k = float(dof)
    # z = ((x/k)^(1/3) - (1 - 2/(9k))) / sqrt(2/(9k))
    z = ((x / k) ** (1.0 / 3.0) - (1.0 - 2.0 / (9.0 * k))) / math.sqrt(2.0 / (9.0 * k))
    return _norm_sf(z)


def nis_threshold(dof: int, p: float) -> float:
    """x with ``chi2_sf(x, dof) = p`` (Wilson-Hilferty; the normal quantile by bisection)."""
    lo, hi = -40.0, 40.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _norm_sf(mid) > p:
            lo = mid
        else:
            hi = mid
    z = 0.5 * (lo + hi)
    k = float(dof)
    return k * (1.0 - 2.0 / (9.0 * k) + z * math.sqrt(2.0 / (9.0 * k))) ** 3


# ---------------------------------------------------------------------- operator
@dataclass
class SmootherOperator:
    """Kernel layout of the bundle's ``kf_*`` arrays (state ``[q_1, qd_1, ..., xi]``)."""

    blk_ptr: np.ndarray
    dat_ptr: np.ndarray
    A_data: np.ndarray
    Acoup: np.ndarray
    H: np.ndarray
    K: np.ndarray
    Cq: np.ndarray
    G: np.ndarray
    Sinv: np.ndarray
    std: np.ndarray
    lag: int
    nis_window: int
    nis_threshold: float
    n_forces: int
    n_outputs: int
    spectral_radius: float
    Wt: np.ndarray = None
    band_ba: np.ndarray = None
    band_gain: np.ndarray = None
    band_threshold: np.ndarray = None
    band_hz: np.ndarray = None

    @property
    def n_state(self) -> int:
        return int(self.H.shape[1])

    @property
    def n_channels(self) -> int:
        return int(self.H.shape[0])


def derive_smoother(bundle: Bundle, check_stability: bool = True) -> SmootherOperator:
    """Structured layout of a smoother bundle's step matrix, and a stability check.

    ``kf_A`` is split into 2x2 modal blocks, one block of the force-model states and the
    coupling of every state to the force states; if its entries do not fit that pattern
    (non-proportional damping) the modal part is one dense block. The layout reproduces
    ``kf_A`` exactly (checked).
    """
    kf = bundle.kf
    A = np.asarray(kf["A"], dtype=float)
    ns = A.shape[0]
    n = bundle.n
    nc = ns - 2 * n
    mask = np.zeros((ns, ns), bool)
    for i in range(n):
        mask[2 * i:2 * i + 2, 2 * i:2 * i + 2] = True
    mask[:, 2 * n:] = True
    if np.any(A[~mask] != 0.0):
        sizes = [2 * n]  # one dense modal block
    else:
        sizes = [2] * n
    if nc:
        sizes.append(nc)
    blk_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    dat_ptr = np.concatenate([[0], np.cumsum(np.square(sizes))]).astype(np.int64)
    A_data = np.concatenate([A[s:e, s:e].ravel() for s, e in zip(blk_ptr[:-1], blk_ptr[1:])])
    Acoup = np.zeros((ns, nc))
    if nc:
        Acoup[:2 * n] = A[:2 * n, 2 * n:]
    rebuilt = blocks_to_dense(blk_ptr, dat_ptr, A_data)
    if nc:
        rebuilt[:, 2 * n:] += Acoup
    if not np.array_equal(rebuilt, A):
        raise EstimatorError("kf_A does not have the smoother's structure (coupling into the "
                             "force-model states from the modes)")
    H = np.ascontiguousarray(kf["H"], dtype=float)
    K = np.ascontiguousarray(kf["K"], dtype=float)
    rho = float("nan")
    if check_stability:
        # prediction error dynamics x~+ = A (I - K H) x~ must be stable
        rho = float(np.max(np.abs(np.linalg.eigvals(A - A @ K @ H))))
        if not rho < 1.0:
            raise EstimatorError(f"smoother gains of {bundle.path or 'the bundle'} are not "
                                 f"stable (spectral radius of A (I - K H) = {rho:.6f})")
    return SmootherOperator(
        blk_ptr=blk_ptr, dat_ptr=dat_ptr, A_data=np.ascontiguousarray(A_data),
        Acoup=np.ascontiguousarray(Acoup), H=H, K=K,
        Cq=np.ascontiguousarray(kf["Cq"], dtype=float),
        G=np.ascontiguousarray(kf["G"], dtype=float),
        Sinv=np.ascontiguousarray(kf["Sinv"], dtype=float),
        std=np.array(kf["std"], dtype=float), lag=int(kf["G"].shape[0]) - 1,
        nis_window=int(kf["nis_window"]), nis_threshold=float(kf["nis_threshold"]),
        n_forces=len(bundle.forces), n_outputs=len(bundle.outputs), spectral_radius=rho,
        Wt=np.ascontiguousarray(kf["Wt"], dtype=float),
        band_ba=np.ascontiguousarray(kf["band_ba"], dtype=float).reshape(-1, 5),
        band_gain=np.array(kf["band_gain"], dtype=float),
        band_threshold=np.array(kf["band_threshold"], dtype=float),
        band_hz=np.array(kf["band_hz"], dtype=float).reshape(-1, 2))


# --------------------------------------------------------------------- estimator
class SmootherEstimator:
    """Fixed-lag Kalman smoother with the interface of :class:`edge.estimator.Estimator`
    (``process``, ``run``, ``reset``, ``delay``, ...) plus :attr:`std` and
    :meth:`model_check`. ``Estimator(bundle)`` returns one for a smoother bundle.

    Output row ``j`` of :meth:`process` describes input sample ``j - delay`` (``delay`` =
    lag); the first ``delay`` rows are NaN with FLAG_WARMUP.
    """

    def __init__(self, bundle, alpha=None, window=None, check_stability: bool = True):
        if not isinstance(bundle, Bundle):
            bundle = Bundle.load(bundle)
        if bundle.method != "smoother":
            raise EstimatorError(f"{bundle.path or 'bundle'}: estimator method is "
                                 f"{bundle.method!r}, not smoother")
        if alpha is not None or window is not None:
            raise EstimatorError("alpha/window overrides apply to the Tikhonov estimator; the "
                                 "smoother's lag and gains are fixed in the bundle (rebuild)")
        self.bundle = bundle
        self.channel_names = [c.name for c in bundle.channels]
        self.force_names = [f.name for f in bundle.forces]
        self.output_names = [o.name for o in bundle.outputs]
        self.op = derive_smoother(bundle, check_stability=check_stability)
        op = self.op
        ns, nch, nq, Lp1 = op.n_state, op.n_channels, op.Cq.shape[0], op.lag + 1
        self._x = np.zeros(ns)
        self._xn = np.zeros(ns)
        self._e = np.zeros(nch)
        self._zf = np.zeros(nq)
        self._ering = np.zeros((Lp1, nch))
        self._zring = np.zeros((Lp1, nq))
        self._fring = np.zeros(Lp1, np.uint8)
        self._last = np.zeros(nch)
        self._nisring = np.zeros(op.nis_window)
        self._nis = np.zeros(2)
        self._counters = np.zeros(2, np.int64)
        nb = op.band_ba.shape[0]
        self._bstate = np.zeros((nb, nch, 2))
        self._bring = np.zeros((op.nis_window, nb))
        self._bsum = np.zeros(nb)
        self._eps = np.zeros(nch)
        self._Q = np.zeros((1, nq))
        self.std = op.std.copy()  # (nf + nout,) standard deviation of each column [SI]
        self._warm_up()

    # ------------------------------------------------------------------ properties
    @property
    def n_channels(self) -> int:
        return self.op.n_channels

    @property
    def n_forces(self) -> int:
        return self.op.n_forces

    @property
    def n_outputs(self) -> int:
        return self.op.n_outputs

    @property
    def delay(self) -> int:
        return self.op.lag

    @property
    def samples_seen(self) -> int:
        return int(self._counters[0])

    # ------------------------------------------------------------------- running
    def process(self, Y, F, Z, flags) -> None:
        """As :meth:`edge.estimator.Estimator.process` (forces F, outputs Z, flags)."""
        nb = Y.shape[0]
        if Y.ndim != 2 or Y.shape[1] != self.n_channels or Y.dtype != np.float64:
            raise ValueError(f"Y must be float64 of shape (nb, {self.n_channels}), "
                             f"got {Y.dtype} {Y.shape}")
        nf = self.n_forces
        if F.shape != (nb, nf) or Z.shape != (nb, self.n_outputs) \
                or flags.shape != (nb,) or flags.dtype != np.uint8:
            raise ValueError("F, Z, flags must be preallocated as (nb, nf), (nb, nout), "
                             "(nb,) uint8")
        if self._Q.shape[0] < nb:  # grows once to the largest block, then reused
            self._Q = np.zeros((nb, self._Q.shape[1]))
        Q = self._Q[:nb]
        self._run(Y, Q, flags)
        F[:] = Q[:, :nf]
        Z[:] = Q[:, nf:]

    def _run(self, Y, Q, flags):
        op = self.op
        _smooth(Y, Q, flags, op.blk_ptr, op.dat_ptr, op.A_data, op.Acoup, op.H, op.K, op.Cq,
                op.G, op.Sinv, self._x, self._xn, self._e, self._zf, self._ering,
                self._zring, self._fring, self._last, self._nisring, self._nis,
                op.nis_threshold, self._counters, op.Wt, op.band_ba, op.band_gain,
                op.band_threshold, self._bstate, self._bring, self._bsum, self._eps)

    def run(self, Y):
        """Allocate outputs and process a whole record; returns (F, Z, flags)."""
        Y = np.ascontiguousarray(Y, dtype=np.float64)
        nb = Y.shape[0]
        F = np.empty((nb, self.n_forces))
        Z = np.empty((nb, self.n_outputs))
        flags = np.empty(nb, dtype=np.uint8)
        self.process(Y, F, Z, flags)
        return F, Z, flags

    def reset(self) -> None:
        """Structure at rest, rings and the model-check window cleared."""
        for a in self._state():
            a[...] = 0

    def _state(self):
        return (self._x, self._ering, self._zring, self._fring, self._last, self._nisring,
                self._nis, self._counters, self._bstate, self._bring, self._bsum)

    def swap(self, op) -> None:
        raise EstimatorError("a model update needs new smoother gains (Riccati equation, "
                             "offline): rebuild the bundle; update_model works with the "
                             "tikhonov estimator")

    def model_check(self) -> dict:
        """``{"nis", "dof", "window_s", "p_value", "ratio", "threshold", "bands", "suspect"}``
        of the current window (``nis`` the windowed sum, ``ratio = nis / dof``, 1 on average
        for a right model; ``bands``: one entry per resonance, ``{"f_hz": [lo, f, hi],
        "power": [below, above] (1 on average), "ratio": below / above, "threshold": [min,
        max] of the ratio}``); ``None`` values until the window has filled once."""
        op = self.op
        W = op.nis_window
        dof = W * op.n_channels
        full = int(self._counters[1]) >= W
        nis = float(self._nis[0]) if full else None
        bands = []
        suspect = bool(full and nis > op.nis_threshold)
        nch = op.n_channels
        for b in range(0, op.band_ba.shape[0] - 1, 2):
            lo_p, hi_p = float(self._bsum[b]), float(self._bsum[b + 1])
            r = lo_p / hi_p if full and hi_p > 0 else None
            bands.append({"f_hz": [round(float(op.band_hz[b, 0]), 2),
                                   round(float(op.band_hz[b, 1]), 2),
                                   round(float(op.band_hz[b + 1, 1]), 2)],
                          "power": [round(lo_p / (W * nch), 4), round(hi_p / (W * nch), 4)]
                          if full else None,
                          "ratio": None if r is None else round(r, 4),
                          "threshold": [round(1.0 / float(op.band_threshold[b + 1]), 4),
                                        round(float(op.band_threshold[b]), 4)]})
            suspect = suspect or bool(full and (lo_p > op.band_threshold[b] * hi_p or
                                                hi_p > op.band_threshold[b + 1] * lo_p))
        return {"nis": None if nis is None else round(nis, 3), "dof": dof,
                "window_s": W * self.bundle.dt,
                "p_value": None if nis is None else chi2_sf(nis, dof),
                "ratio": None if nis is None else round(nis / dof, 4),
                "threshold": round(op.nis_threshold, 3), "bands": bands,
                "suspect": suspect}

    def _warm_up(self) -> None:
        """Compile (or load from the numba cache) on throw-away copies of the state."""
        saved = [a.copy() for a in self._state()]
        self._run(np.zeros((1, self.n_channels)), np.empty((1, self._Q.shape[1])),
                  np.empty(1, np.uint8))
        for a, s in zip(self._state(), saved):
            a[...] = s
