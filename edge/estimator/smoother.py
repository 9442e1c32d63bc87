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
from dataclasses import dataclass, replace

import numpy as np

from edge.bundle import Bundle
from edge.estimator.common import BlockEstimator
from edge.estimator.operator import EstimatorError
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
    """Kernel layout of the bundle's ``kf_*`` arrays, the state permuted from the bundle's
    ``[q_1, qd_1, ..., q_n, qd_n, xi]`` to ``[q_1..q_n, qd_1..qd_n, xi]`` (``perm``)."""

    perm: np.ndarray      # (ns,) kernel state s is the bundle's state perm[s]
    Am: np.ndarray        # (4, n) 2x2 modal blocks [a11, a12, a21, a22]; (4, 0) if dense
    Ad: np.ndarray        # (2n, 2n) dense modal part (non-proportional damping) or (0, 0)
    AcT: np.ndarray       # (nc, 2n) coupling of the modes to the force-model states, transposed
    Cl: np.ndarray        # (r, nc)  AcT = Cl^T Cr: the coupling's numerical rank r (SVD)
    Cr: np.ndarray        # (r, 2n)
    Af: np.ndarray        # (nc, nc) force-model block
    f_span: np.ndarray    # (nc, 2) non-zero [start, stop) of each row of Af (a cascade of
                          # sections is block lower triangular: half of it is zero)
    AKT: np.ndarray       # (nch, ns) (A K)^T
    H: np.ndarray         # (nch, ns) permuted
    h_span: np.ndarray    # (nch, 2) non-zero [start, stop) of each row of H
    K: np.ndarray         # (ns, nch) permuted
    Cq: np.ndarray        # (nq, ns) permuted
    q_span: np.ndarray    # (nq, 2)
    G: np.ndarray
    Sinv: np.ndarray
    std: np.ndarray
    lag: int
    nis_window: int
    nis_threshold: float
    nis_threshold_low: float
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


def _spans(M: np.ndarray) -> np.ndarray:
    """(rows, 2) int64: the [start, stop) of each row's non-zero entries ([0, 0] if none)."""
    out = np.zeros((M.shape[0], 2), np.int64)
    for r in range(M.shape[0]):
        nz = np.flatnonzero(M[r])
        if nz.size:
            out[r] = nz[0], nz[-1] + 1
    return out


def _low_rank(AcT: np.ndarray, rel: float = 1e-14):
    """``AcT = Cl^T Cr`` with ``r`` = the number of singular values above ``rel`` times the
    largest (the coupling of the modes to the force-model states over one step has a
    numerical rank of about 10 whatever the force model's order: 32 states at order 16), when
    that is cheaper per step than ``AcT`` itself; else ``Cl = I``, ``Cr = AcT``. The dropped
    part is below ``rel`` of the largest singular value (round-off of its computation)."""
    nc, m2 = AcT.shape
    if nc == 0 or m2 == 0 or not np.any(AcT):
        return np.eye(nc), AcT.copy()
    U, sv, Vt = np.linalg.svd(AcT, full_matrices=False)
    r = int(np.sum(sv > rel * sv[0]))
    if r * (nc + m2) >= nc * m2:
        return np.eye(nc), np.ascontiguousarray(AcT)
    return np.ascontiguousarray((U[:, :r] * sv[:r]).T), np.ascontiguousarray(Vt[:r])


def derive_smoother(bundle: Bundle, check_stability: bool = True) -> SmootherOperator:
    """Structured, permuted layout of a smoother bundle's step matrix, and a stability check.

    ``kf_A`` is split into 2x2 modal blocks, one block of the force-model states and the
    coupling of the modes to the force states; if its modal part does not fit that pattern
    (non-proportional damping) it is one dense block. The layout reproduces ``kf_A`` exactly
    (checked); anything else (coupling into the force states from the modes) is refused.
    """
    kf = bundle.kf
    A = np.asarray(kf["A"], dtype=float)
    ns = A.shape[0]
    n = bundle.n
    m2 = 2 * n
    perm = np.concatenate([np.arange(0, m2, 2), np.arange(1, m2, 2),
                           np.arange(m2, ns)]).astype(np.int64)
    Ap = A[np.ix_(perm, perm)]
    blocks = np.zeros((ns, ns), bool)
    idx = np.arange(n)
    for r, c in ((0, 0), (0, n), (n, 0), (n, n)):
        blocks[idx + r, idx + c] = True
    blocks[:, m2:] = True
    if np.any(Ap[:m2, :m2][~blocks[:m2, :m2]] != 0.0):
        Am, Ad = np.zeros((4, 0)), Ap[:m2, :m2].copy()  # non-proportional: dense modal part
    else:
        Am = np.array([np.diag(Ap[:n, :n]), np.diag(Ap[:n, n:m2]), np.diag(Ap[n:m2, :n]),
                       np.diag(Ap[n:m2, n:m2])])
        Ad = np.zeros((0, 0))
    AcT = Ap[:m2, m2:].T.copy()
    Af = Ap[m2:, m2:].copy()
    rebuilt = np.zeros((ns, ns))
    if Ad.size:
        rebuilt[:m2, :m2] = Ad
    else:
        for k, (r, c) in enumerate(((0, 0), (0, n), (n, 0), (n, n))):
            rebuilt[idx + r, idx + c] = Am[k]
    rebuilt[:m2, m2:] = AcT.T
    rebuilt[m2:, m2:] = Af
    if not np.array_equal(rebuilt, Ap):
        raise EstimatorError("kf_A does not have the smoother's structure (coupling into the "
                             "force-model states from the modes)")
    Cl, Cr = _low_rank(AcT)
    H = np.asarray(kf["H"], dtype=float)
    K = np.asarray(kf["K"], dtype=float)
    rho = float("nan")
    if check_stability:
        # prediction error dynamics x~+ = A (I - K H) x~ must be stable
        rho = float(np.max(np.abs(np.linalg.eigvals(A - A @ K @ H))))
        if not rho < 1.0:
            raise EstimatorError(f"smoother gains of {bundle.path or 'the bundle'} are not "
                                 f"stable (spectral radius of A (I - K H) = {rho:.6f})")
    Hp = np.ascontiguousarray(H[:, perm])
    Cq = np.ascontiguousarray(np.asarray(kf["Cq"], dtype=float)[:, perm])
    return SmootherOperator(
        perm=perm, Am=np.ascontiguousarray(Am), Ad=np.ascontiguousarray(Ad),
        AcT=np.ascontiguousarray(AcT), Cl=Cl, Cr=Cr, Af=np.ascontiguousarray(Af),
        f_span=_spans(Af),
        AKT=np.ascontiguousarray((A @ K)[perm].T), H=Hp, h_span=_spans(Hp),
        K=np.ascontiguousarray(K[perm]), Cq=Cq, q_span=_spans(Cq),
        G=np.ascontiguousarray(kf["G"], dtype=float),
        Sinv=np.ascontiguousarray(kf["Sinv"], dtype=float),
        std=np.array(kf["std"], dtype=float), lag=int(kf["G"].shape[0]) - 1,
        nis_window=int(kf["nis_window"]), nis_threshold=float(kf["nis_threshold"]),
        nis_threshold_low=float(kf.get("nis_threshold_low", 0.0)),
        n_forces=len(bundle.forces), n_outputs=len(bundle.outputs), spectral_radius=rho,
        Wt=np.ascontiguousarray(kf["Wt"], dtype=float),
        band_ba=np.ascontiguousarray(kf["band_ba"], dtype=float).reshape(-1, 5),
        band_gain=np.array(kf["band_gain"], dtype=float),
        band_threshold=np.array(kf["band_threshold"], dtype=float),
        band_hz=np.array(kf["band_hz"], dtype=float).reshape(-1, 2))


def level_operators(bundle: Bundle, op: SmootherOperator) -> list:
    """One operator per load level of the bundle (``kf_level_*``; :mod:`offline.smoother.
    levels`), sharing ``op``'s step matrix layout; ``[]`` without levels."""
    kf = bundle.kf
    if "level_grid" not in kf:
        return []
    A = np.asarray(kf["A"], dtype=float)
    out = []
    for i in range(np.asarray(kf["level_grid"]).size):
        K = np.asarray(kf["level_K"][i], dtype=float)
        out.append(replace(
            op, AKT=np.ascontiguousarray((A @ K)[op.perm].T), K=np.ascontiguousarray(K[op.perm]),
            G=np.ascontiguousarray(kf["level_G"][i], dtype=float),
            Sinv=np.ascontiguousarray(kf["level_Sinv"][i], dtype=float),
            Wt=np.ascontiguousarray(kf["level_Wt"][i], dtype=float),
            std=np.array(kf["level_std"][i], dtype=float)))
    return out


class LevelTracker:
    """Follows the load's level from the innovations: every ``every`` samples the mean NIS
    per channel of the last ``every`` samples (``r``, 1 for a right level) is compared with
    ``kf_level_nis[a, b]``, the ratio expected under the gains of level ``a`` when the load is
    at level ``b``; the level whose expectation is nearest in log (by more than
    ``hysteresis``) becomes the current one. No allocation: scratch arrays are reused."""

    def __init__(self, grid, nis_table, start: int, every: int, hysteresis: float = 0.05):
        self.grid = np.asarray(grid, dtype=float)
        self.log_table = np.log(np.asarray(nis_table, dtype=float))
        self.level = int(start)
        self.every = int(every)
        self.hysteresis = float(hysteresis)
        self.since = 0
        self.switches = 0
        self.last_ratio = float("nan")
        self._d = np.zeros(self.grid.size)

    def decide(self, ratio: float) -> int:
        """The level for a measured mean NIS ratio (and remember it)."""
        self.last_ratio = ratio
        if not ratio > 0 or not math.isfinite(ratio):
            return self.level
        d = self._d
        # d_b = |log r - log r(a, b)|
        np.subtract(self.log_table[self.level], math.log(ratio), out=d)
        np.abs(d, out=d)
        b = int(np.argmin(d))
        if b != self.level and d[b] < d[self.level] - self.hysteresis:
            self.level = b
            self.switches += 1
        return self.level


# --------------------------------------------------------------------- estimator
class SmootherEstimator(BlockEstimator):
    """Fixed-lag Kalman smoother with the interface of :class:`edge.estimator.Estimator`
    (``process``, ``run``, ``reset``, ``delay``, ...) plus :attr:`std` and
    :meth:`model_check`. ``Estimator(bundle)`` returns one for a smoother bundle.

    Output row ``j`` of :meth:`process` describes input sample ``j - delay`` (``delay`` =
    lag); the first ``delay`` rows are NaN with FLAG_WARMUP.

    With load levels in the bundle (``kf_level_*``) and ``track_level`` (default), the
    estimator follows the load's size (:class:`LevelTracker`, once a second): gains and
    :attr:`std` switch to the level the innovations say.
    """

    def __init__(self, bundle, alpha=None, window=None, check_stability: bool = True,
                 track_level: bool = True):
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
        self._levels = level_operators(bundle, op) if track_level else []
        self.tracker = None
        if self._levels:
            grid = np.asarray(bundle.kf["level_grid"], dtype=float)
            start = int(np.argmin(np.abs(np.log(grid))))
            every = max(1, min(int(round(1.0 / bundle.dt)), op.nis_window))
            self.tracker = LevelTracker(grid, bundle.kf["level_nis"], start, every)
            self.op = op = self._levels[start]
            self.std[:] = op.std
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
        tr = self.tracker
        if tr is None:
            self._run(Y, Q, flags)
        elif tr.since + nb < tr.every:  # the tracker is not due in this block
            self._run(Y, Q, flags)
            tr.since += nb
        else:  # pieces that end where the level tracker is due (a long block: several)
            a = 0
            while a < nb:
                b = min(nb, a + tr.every - tr.since)
                self._run(Y[a:b], Q[a:b], flags[a:b])
                tr.since += b - a
                if tr.since >= tr.every:
                    if int(self._counters[0]) >= tr.every + self.op.lag:
                        self._track()
                    tr.since = 0
                a = b
        F[:] = Q[:, :nf]
        Z[:] = Q[:, nf:]

    def _track(self) -> None:
        """Mean NIS per channel of the last ``every`` samples -> the load level; switching
        swaps the operator (same state layout, the state carries over) and :attr:`std`."""
        tr = self.tracker
        op = self.op
        W = op.nis_window
        n = min(tr.every, W)
        end = int(self._counters[0]) % W
        ring = self._nisring
        # the last n entries of the ring (slots end-n .. end-1, circular)
        tot = float(ring[max(end - n, 0):end].sum()) + (float(ring[W - (n - end):].sum())
                                                        if n > end else 0.0)
        level = tr.decide(tot / (n * op.n_channels))
        if self._levels[level] is not op:
            self.op = self._levels[level]
            self.std[:] = self.op.std

    def _run(self, Y, Q, flags):
        op = self.op
        _smooth(Y, Q, flags, op.Am, op.Ad, op.Cl, op.Cr, op.Af, op.f_span, op.AKT, op.H, op.h_span, op.Cq,
                op.q_span, op.G, op.Sinv, self._x, self._xn, self._e, self._ering,
                self._zring, self._fring, self._last, self._nisring, self._nis,
                op.nis_threshold, op.nis_threshold_low, self._counters, op.Wt, op.band_ba, op.band_gain,
                op.band_threshold, self._bstate, self._bring, self._bsum, self._eps)

    def reset(self) -> None:
        """Structure at rest, rings and the model-check window cleared, the load level back
        at the designed one."""
        for a in self._state():
            a[...] = 0
        tr = self.tracker
        if tr is not None:
            tr.level = int(np.argmin(np.abs(np.log(tr.grid))))
            tr.since = 0
            self.op = self._levels[tr.level]
            self.std[:] = self.op.std

    def _state(self):
        return (self._x, self._ering, self._zring, self._fring, self._last, self._nisring,
                self._nis, self._counters, self._bstate, self._bring, self._bsum)

    def update_refused(self) -> str:
        """The smoother's gains (Riccati solution, smoother gains, whitening, model-check
        thresholds) follow from the model; they are computed offline (scipy), not here."""
        return ("update_model is not available with the Kalman smoother estimator: its gains "
                "and model-check thresholds are computed offline from the model (Riccati "
                "equation) and the device cannot recompute them; build a bundle with the new "
                "parameters offline (vsense-offline calibrate --bundle, or build) and deploy "
                "it, or use a bundle with [estimator] method = \"tikhonov\"")

    def swap(self, op, bundle=None) -> None:
        """Refused (:meth:`update_refused`): new gains cannot be derived on the device."""
        raise EstimatorError(self.update_refused())

    def model_check(self) -> dict:
        """``{"nis", "dof", "window_s", "p_value", "ratio", "threshold", "threshold_low",
        "bands", "suspect", "reasons", "load_level"}`` of the current window (``nis`` the
        windowed sum, ``ratio = nis / dof``, 1 on average for a right model; ``bands``: one
        entry per resonance, ``{"f_hz": [lo, f, hi], "power": [below, above] (1 on average),
        "ratio": below / above, "threshold": [min, max] of the ratio}``; ``reasons``: why it
        is suspect, in words; ``load_level``: the tracked load level, a factor of the
        designed force RMS, or None without tracking); ``None`` values until the window
        has filled once."""
        op = self.op
        W = op.nis_window
        dof = W * op.n_channels
        full = int(self._counters[1]) >= W
        nis = float(self._nis[0]) if full else None
        bands = []
        reasons = []
        if full and nis > op.nis_threshold:
            reasons.append(f"innovations too large (NIS/dof {nis / dof:.3g} above "
                           f"{op.nis_threshold / dof:.3g}): the load or the noise is larger "
                           f"than the model says, or the structure differs")
        if full and nis < op.nis_threshold_low:
            reasons.append(f"innovations too small (NIS/dof {nis / dof:.3g} below "
                           f"{op.nis_threshold_low / dof:.3g}): the declared load or noise is "
                           f"larger than the records show; the stated std is too large")
        suspect = bool(reasons)
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
            if full and (lo_p > op.band_threshold[b] * hi_p or
                         hi_p > op.band_threshold[b + 1] * lo_p):
                suspect = True
                reasons.append(f"innovation power around the resonance at "
                               f"{float(op.band_hz[b, 1]):.1f} Hz lopsided (ratio {r:.3g}): "
                               f"the structure's resonance has moved")
        return {"nis": None if nis is None else round(nis, 3), "dof": dof,
                "window_s": W * self.bundle.dt,
                "p_value": None if nis is None else chi2_sf(nis, dof),
                "ratio": None if nis is None else round(nis / dof, 4),
                "threshold": round(op.nis_threshold, 3),
                "threshold_low": round(op.nis_threshold_low, 3), "bands": bands,
                "suspect": suspect, "reasons": reasons,
                "load_level": None if self.tracker is None else
                float(self.tracker.grid[self.tracker.level])}

    def _warm_up(self) -> None:
        """Compile (or load from the numba cache) on throw-away copies of the state."""
        saved = [a.copy() for a in self._state()]
        self._run(np.zeros((1, self.n_channels)), np.empty((1, self._Q.shape[1])),
                  np.empty(1, np.uint8))
        for a, s in zip(self._state(), saved):
            a[...] = s
