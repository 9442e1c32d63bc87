"""Is the measurement chain the one the bundle models? The innovations' likelihood under the
bundle's chain against an alternative chain (bundle fields ``kf_alt_*``, schema 8).

A bundle built for point samples and fed the ADS1256's conversions (or the converse) gives
innovations that look white to the usual checks when one sensor is converted: a conversion
is the response to a slightly delayed, low-passed load, and the load is unknown. With several
channels (the multiplexer cycling converts each at its own instant, each through its own
window) the channels' relative timing is fixed by the structure and the load model cannot
absorb it: the exact Gaussian log-likelihood of the record through the steady Kalman filter
of each chain tells them apart. Per sample (``e_k = y_k - H x_k|k-1``, ``S`` the innovation
covariance)::

    l_k = -1/2 (e_k^T S^-1 e_k - log det S^-1 + nch log 2 pi)
    LLR = (sum_k l_k(alternative) - sum_k l_k(bundle)) / (n nch)   [nats per sample, channel]

For the bundle's own chain LLR is <= 0 on average (the model's own likelihood is the
largest in expectation); above :data:`LLR_MAX` the alternative explains the record better,
and the chain is reported as a likely mismatch. Measured (``docs/smoother.md``, tests in
``tests/test_chain_wrong.py``): README beam with a tip laser and a tip accelerometer cycled
at DRATE 3750, 8 seeds: the wrong chain +0.095 to +0.33 nats on the device's buffer, the
right one -0.33 to -0.095; one tip laser converted continuously at DRATE 1000: within
+-0.001 either way, whatever the record (not separable).

The device evaluates it on a buffer of the last :data:`BUFFER_S` of rows every
:data:`EVERY_S` (both filters started at 0, the first :data:`BURN` of the buffer skipped):
0.4 filter steps per row, in one burst per evaluation. Measured on the shared 2-core
machine at load 20 (an upper bound): one channel, 38 / 36 states, 3.4 ms per evaluation
(0.34 us per row amortised); two channels, 40 / 36 states, 7.3 ms (0.67 us per row). The
demo's bundle (171 / 169 states, one channel; thread CPU time at load 5): 17 ms per
evaluation by the non-zero runs of A's columns, 1.7 us per row amortised (the dense product
took 99 ms, 9.9 us per row).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

#: alternative explains the innovations better by more than this (nats per sample and
#: channel): the chain is flagged. 50x the drift of either chain on one channel (0.001),
#: half the smallest wrong-chain value measured with two channels (0.095)
LLR_MAX = 0.05
#: seconds of rows the device evaluates each time, how often, the share skipped (transient)
BUFFER_S = 2.0
EVERY_S = 10.0
BURN = 0.25
#: evaluations averaged (the last ones, about a minute)
KEEP = 6


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _quad_sum(Y, start, skip, AT, runs, H, AK, Sinv, x, xn, e):  # pragma: no cover - compiled
    """``sum_k e_k^T Sinv e_k`` over rows ``skip..n-1`` of the ring ``Y`` read from ``start``
    (circular), of the steady filter ``x_k+1|k = A x_k|k-1 + A K e_k`` started at ``x = 0``.
    ``A x = sum_j A[:, j] x_j`` by columns of A (rows of ``AT = A^T``), each over its runs of
    non-zero entries only (``runs``: :func:`row_runs` of ``AT``; a smoother's A is 1/6
    non-zero: 2x2 modal blocks, the force-model block and its coupling). Unit-stride updates
    of ``xn``, no chain of dependent additions. ``x``, ``xn`` (ns,), ``e`` (nch,) scratch."""
    n, nch = Y.shape
    ns = AT.shape[0]
    for i in range(ns):
        x[i] = 0.0
    tot = 0.0
    for k in range(n):
        r = (start + k) % n
        for c in range(nch):  # e = y - H x
            s = Y[r, c]
            for i in range(ns):
                s -= H[c, i] * x[i]
            e[c] = s
        if k >= skip:
            for c in range(nch):
                for d in range(nch):
                    tot += e[c] * Sinv[c, d] * e[d]
        for i in range(ns):  # x <- A x + (A K) e
            s = 0.0
            for c in range(nch):
                s += AK[i, c] * e[c]
            xn[i] = s
        for q in range(runs.shape[0]):  # A x = sum_j A[:, j] x_j over the runs of AT's rows
            j = runs[q, 0]
            xj = x[j]
            for i in range(runs[q, 1], runs[q, 2]):
                xn[i] += AT[j, i] * xj
        for i in range(ns):
            x[i] = xn[i]
    return tot


def row_runs(A: np.ndarray, gap: int = 4) -> np.ndarray:
    """(runs, 3) int64 ``[row, start, stop)``: the non-zero entries of each row of ``A`` as
    runs of columns, runs fewer than ``gap`` zeros apart joined (the zeros between them are
    summed: exact)."""
    out = []
    for i in range(A.shape[0]):
        nz = np.flatnonzero(A[i])
        if nz.size == 0:
            continue
        cut = np.flatnonzero(np.diff(nz) > gap)
        starts = np.concatenate([nz[:1], nz[cut + 1]])
        stops = np.concatenate([nz[cut] + 1, nz[-1:] + 1])
        out += [(i, a, b) for a, b in zip(starts, stops)]
    return np.array(out, np.int64).reshape(-1, 3)


def quad_sum_numpy(Y, start, skip, A, H, AK, Sinv):
    """NumPy twin of :func:`_quad_sum` (tests)."""
    x = np.zeros(A.shape[0])
    tot = 0.0
    n = Y.shape[0]
    for k in range(n):
        e = Y[(start + k) % n] - H @ x
        if k >= skip:
            tot += float(e @ Sinv @ e)
        x = A @ x + AK @ e
    return tot


class Filter:
    """The steady filter of one chain: ``A``, ``H``, ``A K``, ``S^-1`` and ``log det S^-1``,
    with its scratch."""

    def __init__(self, A, H, K, Sinv):
        self.A = np.ascontiguousarray(A, dtype=float)
        self.AT = np.ascontiguousarray(self.A.T)
        self.runs = row_runs(self.AT)
        self.H = np.ascontiguousarray(H, dtype=float)
        self.AK = np.ascontiguousarray(self.A @ np.asarray(K, dtype=float))
        self.Sinv = np.ascontiguousarray(Sinv, dtype=float)
        sign, self.logdet = np.linalg.slogdet(self.Sinv)
        if not sign > 0:
            raise ValueError("the inverse innovation covariance is not positive definite")
        ns, nch = self.A.shape[0], self.H.shape[0]
        self._x, self._xn, self._e = np.zeros(ns), np.zeros(ns), np.zeros(nch)

    def loglik(self, Y, start: int = 0, skip: int = 0) -> float:
        """``sum_k l_k`` over rows ``skip..`` of ``Y`` (ring read from ``start``), without the
        constant ``-nch/2 log 2 pi`` (it cancels in the ratio)."""
        q = _quad_sum(Y, int(start), int(skip), self.AT, self.runs, self.H, self.AK, self.Sinv,
                      self._x, self._xn, self._e)
        return -0.5 * (q - (Y.shape[0] - skip) * self.logdet)


def llr(bundle_filter: Filter, alt: Filter, Y, start: int = 0, skip: int = 0) -> float:
    """Log-likelihood ratio alternative / bundle [nats per sample and channel]."""
    n = (Y.shape[0] - skip) * Y.shape[1]
    return (alt.loglik(Y, start, skip) - bundle_filter.loglik(Y, start, skip)) / max(n, 1)


def chain_name(d) -> str:
    """A chain's description in words (``meta["chain_check"]["alternative"]`` or a
    :class:`edge.acquisition.Chain`)."""
    if not isinstance(d, dict):
        d = d.as_dict()
    if d.get("converter", "ideal") == "ideal":
        return "point samples (converter ideal)"
    return f"{d['converter']} {float(d['drate']):g} SPS {d['mode']}"


#: the ring's counters (:attr:`ChainCheck.st`): next slot, rows held, rows since the last
#: evaluation, rows between evaluations
HEAD, FILLED, SINCE, EVERY = range(4)


@njit(cache=True, nogil=True)
def _push(Y, a, ring, st):  # pragma: no cover - compiled
    """Rows ``Y[a:]`` into the circular ``ring`` (counters ``st``: :data:`HEAD`...) up to the
    row after which an evaluation is due (:data:`SINCE` reaches :data:`EVERY` with the ring
    full); returns the index of the next row not pushed. The one place of the rule, for
    :meth:`ChainCheck.push` and the smoother's compiled step."""
    n = ring.shape[0]
    nb = Y.shape[0]
    while a < nb:
        h = st[HEAD]
        for c in range(Y.shape[1]):
            ring[h, c] = Y[a, c]
        st[HEAD] = (h + 1) % n
        if st[FILLED] < n:
            st[FILLED] += 1
        st[SINCE] += 1
        a += 1
        if st[SINCE] >= st[EVERY] and st[FILLED] == n:
            break
    return a


class ChainCheck:
    """The device's check: rows into a ring of :data:`BUFFER_S`; every :data:`EVERY_S` the
    LLR of the buffer (:func:`llr`), the mean of the last :data:`KEEP` evaluations
    reported. No allocation per row. The ring and its counters may live in another
    object's arrays (:meth:`bind`: the smoother's, so that its compiled step pushes rows)."""

    def __init__(self, kf: dict, dt: float, declared: str, alternative: str):
        self.bundle_filter = Filter(kf["A"], kf["H"], kf["K"], kf["Sinv"])
        self.alt = Filter(kf["alt_A"], kf["alt_H"], kf["alt_K"], kf["alt_Sinv"])
        nch = self.bundle_filter.H.shape[0]
        self.n = max(8, int(round(BUFFER_S / dt)))
        self.every = max(self.n, int(round(EVERY_S / dt)))
        self.skip = int(BURN * self.n)
        self.ring = np.zeros((self.n, nch))
        self.st = np.array([0, 0, 0, self.every], np.int64)  # HEAD, FILLED, SINCE, EVERY
        self.values = np.full(KEEP, np.nan)
        self.count = 0
        self.declared, self.alternative = declared, alternative

    def bind(self, ring: np.ndarray, st: np.ndarray) -> None:
        """Keep the ring and its counters in ``ring`` (n, nch) and ``st`` (4,) int64 from now
        on (their current values copied)."""
        ring[...] = self.ring
        st[...] = self.st
        self.ring, self.st = ring, st

    head = property(lambda self: int(self.st[HEAD]), doc="the ring's next slot")
    filled = property(lambda self: int(self.st[FILLED]), doc="rows in the ring")
    since = property(lambda self: int(self.st[SINCE]), doc="rows since the last evaluation")

    def reset(self) -> None:
        self.st[HEAD] = self.st[FILLED] = self.st[SINCE] = 0
        self.count = 0
        self.values[:] = np.nan

    def push(self, Y: np.ndarray) -> None:
        """Rows ``Y`` (nb, nch) into the ring (:func:`_push`); evaluate when due."""
        Y = np.ascontiguousarray(Y, dtype=np.float64)
        nb = Y.shape[0]
        a = 0
        while a < nb:
            a = _push(Y, a, self.ring, self.st)
            if self.st[SINCE] >= self.every and self.st[FILLED] == self.n:
                self.st[SINCE] = 0
                v = llr(self.bundle_filter, self.alt, self.ring, self.head, self.skip)
                if math.isfinite(v):
                    self.values[self.count % KEEP] = v
                    self.count += 1

    def value(self) -> float | None:
        """Mean LLR of the last evaluations, None before the first."""
        return None if self.count == 0 else float(np.nanmean(self.values))

    @property
    def suspect(self) -> bool:
        v = self.value()
        return v is not None and v > LLR_MAX

    def reason(self) -> str | None:
        """Why the chain is suspect, in words, or None."""
        if not self.suspect:
            return None
        return (f"the measurement chain looks wrong: the innovations fit "
                f"{self.alternative} better than the bundle's {self.declared} (log-likelihood "
                f"+{self.value():.3g} nats per sample and channel, above {LLR_MAX:g}); the "
                f"converter, DRATE or mode on this device is not the [acquisition] the bundle "
                f"was built for: rebuild with the right [acquisition]")

    def as_dict(self) -> dict:
        v = self.value()
        return {"llr": None if v is None else round(v, 4), "threshold": LLR_MAX,
                "declared": self.declared, "alternative": self.alternative,
                "evaluations": int(min(self.count, KEEP)), "suspect": self.suspect}
