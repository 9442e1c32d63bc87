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

import numpy as np

from edge.bundle import Bundle
from edge.estimator.band_pairs import band_reason
from edge.estimator.chain_check import ChainCheck, chain_name, llr
from edge.estimator.chi2 import chi2_sf
from edge.estimator.common import BlockEstimator
from edge.estimator.load_level import LevelTracker, start_windows
from edge.estimator.operator import EstimatorError
from edge.estimator import smoother_pack as P
from edge.estimator.smoother_pack import _smooth_packed
from edge.estimator.smoother_operator import derive_smoother, level_operators
from edge.flags import FLAG_MODEL_SUSPECT, FLAG_WARMUP


class SmootherEstimator(BlockEstimator):
    """Fixed-lag Kalman smoother with the interface of :class:`edge.estimator.Estimator`
    (``process``, ``run``, ``reset``, ``delay``, ...) plus :attr:`std` and
    :meth:`model_check`. ``Estimator(bundle)`` returns one for a smoother bundle.

    Output row ``j`` of :meth:`process` describes input sample ``j - delay`` (``delay`` =
    lag); the first ``delay`` rows are NaN with FLAG_WARMUP.

    With load levels in the bundle (``kf_level_*``) and ``track_level`` (default), the
    estimator follows the load's size (:class:`LevelTracker`, once a second): gains and
    :attr:`std` switch to the level the innovations say. After a (re)start, shorter windows
    from the lag on widen :attr:`std` only (:func:`start_windows`).
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
        self._levels = level_operators(bundle, op, check_stability) if track_level else []
        self.chain_check = None  # the innovations' likelihood against another chain
        if "alt_A" in bundle.kf:
            alt = bundle.meta.get("chain_check", {}).get("alternative", {})
            self.chain_check = ChainCheck(bundle.kf, bundle.dt, chain_name(bundle.chain),
                                          chain_name(alt) if alt else "another chain")
        # the state, the level operators and the Python side's counters in three arrays
        # (edge.estimator.smoother_pack): the kernel runs on them on every path
        cc = self.chain_check
        self.pack = P.SmootherPack(self._levels or [op], 0 if cc is None else cc.n)
        v = self.pack.view
        if cc is not None:
            cc.bind(v(P.CRING), v(P.CST))
        (self._x, self._xn, self._e, self._ering, self._zring, self._fring, self._last,
         self._nisring, self._nis, self._counters, self._bstate, self._bring, self._bsum,
         self._eps, self._lag1ring, self._eps_prev, self._resets, self._tick) = (
            v(k) for k in (P.X, P.XN, P.E, P.ERING, P.ZRING, P.FRING, P.LAST, P.NISRING,
                           P.NIS, P.COUNTERS, P.BSTATE, P.BRING, P.BSUM, P.EPS, P.LAG1RING,
                           P.EPS_PREV, P.RESETS, P.TICK))
        self._Q = np.zeros((1, op.Cq.shape[0]))
        self.std = op.std.copy()  # (nf + nout,) standard deviation of each column [SI]
        self._base_std = op.std.copy()  # the steady std of the running gains
        sv = bundle.kf.get("startup_var")
        self._startup = None if sv is None else np.ascontiguousarray(sv, dtype=float)
        self.n_warm = 0 if sv is None else _converged_row(self._startup, op.std)
        self._counters[2] = self._check_from()
        # the model's own error measured by the build (kf_std_scale; schema <= 8: none)
        sc = bundle.kf.get("std_scale")
        self._scale = None if sc is None else np.array(sc, dtype=float)
        self.tracker = None
        self._track_var = None
        if self._levels:
            grid = np.asarray(bundle.kf["level_grid"], dtype=float)
            start = int(np.argmin(np.abs(np.log(grid))))
            every = max(1, min(int(round(1.0 / bundle.dt)), op.nis_window))
            self.tracker = LevelTracker(grid, bundle.kf["level_nis"], start, every,
                                        n_channels=op.n_channels,
                                        innov=bundle.kf.get("track_innov"),
                                        windows=start_windows(every))
            tv = bundle.kf.get("track_var")
            self._track_var = None if tv is None else np.asarray(tv, dtype=float)
            self._tick[P.TRACK] = 1
            self._tick[P.SINCE] = -self._track_offset()
            self._use(start)
            self._base_std[:] = self.op.std
        self._warm_up()
        self._stated_std()
        self._set_budget()

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
        if self._tick[P.PENDING]:  # the compiled step left a reset (non-finite state)
            self._blown_fast()
        if self._Q.shape[0] < nb:  # grows once to the largest block, then reused
            self._Q = np.zeros((nb, self._Q.shape[1]))
        Q = self._Q[:nb]
        c0 = int(self._counters[0])
        r0 = self.self_resets
        tr, t = self.tracker, self._tick  # t[P.SINCE]: samples since the tracker's decision
        if tr is None:
            self._run(Y, Q, flags)
        elif t[P.SINCE] + nb < tr.every:  # the tracker is not due in this block
            self._run(Y, Q, flags)
            t[P.SINCE] += nb
        else:  # pieces that end where the level tracker is due (a long block: several)
            a = 0
            while a < nb:
                b = min(nb, a + tr.every - int(t[P.SINCE]))
                self._run(Y[a:b], Q[a:b], flags[a:b])
                t[P.SINCE] += b - a
                if t[P.SINCE] >= tr.every:
                    if int(self._counters[0]) >= tr.every:
                        self._track()
                    t[P.SINCE] = 0
                a = b
        F[:] = Q[:, :nf]
        Z[:] = Q[:, nf:]
        cc = self.chain_check
        if cc is not None:
            cc.push(Y)
            if cc.suspect:
                flags |= FLAG_MODEL_SUSPECT
        # rows of samples m = c0 + i - lag before the start-up std has converged: warm-up
        L = self.op.lag
        lo, hi = max(0, L - c0), min(nb, self.n_warm + L - c0)
        if lo < hi:
            flags[lo:hi] |= FLAG_WARMUP
        if self.self_resets != r0 and self.n_warm:
            # a reset within the block: row i estimates sample k - nb + i - lag since it
            k = int(self._counters[0])
            lo, hi = max(nb - k, 0), min(nb, self.n_warm + L + nb - k)
            if lo < hi:
                flags[lo:hi] |= FLAG_WARMUP
        self._stated_std()
        self._set_budget()

    def _stated_std(self) -> None:
        """:attr:`std` for the next output row (sample ``m = count - lag``): the steady std
        of the running gains, widened in the start-up by ``kf_startup_var[m]`` (the error of
        a state started at 0 on a moving structure: :mod:`offline.smoother.error`), times
        ``kf_std_scale`` (the model's own error the build measured on the full model)."""
        sv = self._startup
        m = int(self._counters[0]) - self.op.lag
        if sv is None or m >= sv.shape[0]:
            self.std[:] = self._base_std
        else:  # std_m^2 = std^2 + g^2 excess_m  (the prior scales with the load's power)
            np.multiply(self._base_std, self._base_std, out=self.std)
            g2 = 1.0 if self.tracker is None else self.tracker.load_level() ** 2
            self.std += g2 * sv[max(m, 0)]
            np.sqrt(self.std, out=self.std)
        if self._scale is not None:  # s_i std_i (offline/smoother/std_scale.py)
            self.std *= self._scale

    def next_piece(self, n_left: int) -> int:
        """Rows to process before :attr:`std` changes: 1 in the start-up (each row its own
        std), else up to the level tracker's next decision."""
        m = int(self._counters[0]) - self.op.lag
        if self._startup is not None and m < self._startup.shape[0]:
            return 1
        tr = self.tracker
        return n_left if tr is None else min(n_left, tr.every - int(self._tick[P.SINCE]))

    def _use(self, level: int) -> None:
        """Run the gains of load level ``level`` from the next sample on (the operator of
        :attr:`op`; the kernel reads ``TICK[LEVEL]``)."""
        self.op = self._levels[level]
        self._tick[P.LEVEL] = level

    def _set_budget(self) -> None:
        """``TICK[BUDGET]``: samples the compiled step (:func:`edge.estimator.smoother_pack.
        _fast_step`) may take before a Python decision is due, the sample that brings it
        excluded: none in the start-up (each row its own std, warm-up flags) or with a reset
        pending; else up to the level tracker's and the chain check's next decision.
        ``TICK[EXTRA]``: the chain check's verdict, carried by every row until then."""
        t = self._tick
        m = int(self._counters[0]) - self.op.lag
        if t[P.PENDING] or (self._startup is not None and m < self._startup.shape[0]):
            t[P.BUDGET] = 0
            return
        b = 1 << 62
        if self.tracker is not None:
            b = min(b, self.tracker.every - int(t[P.SINCE]) - 1)
        cc = self.chain_check
        if cc is not None:
            b = min(b, cc.every - cc.since - 1)
            t[P.EXTRA] = FLAG_MODEL_SUSPECT if cc.suspect else 0
        t[P.BUDGET] = max(b, 0)

    def _blown_fast(self) -> None:
        """The reset the compiled step left pending (its state became non-finite; the reset
        is already counted): what :meth:`process` does after such a row, late by the time
        between two samples. The row went to the chain check before the reset there: again,
        into the emptied ring."""
        cc = self.chain_check
        y = None if cc is None else cc.ring[(cc.head - 1) % cc.n].copy()
        self.reset()
        if self.tracker is not None:
            self._tick[P.SINCE] += 1
        if cc is not None:
            cc.push(y[None])
        self._set_budget()

    def _track_offset(self) -> int:
        """Samples after a (re)start before the tracker's first window opens: the lag. The
        start-up's innovations carry the error of a state started at 0 on a moving
        structure, which scales with the load's power as the steady error does: a load 3x
        its declaration reads high there too. Waiting for the start-up std to converge (1.1 s
        on the shear frame of an acceptance test) left its first second at 32 % coverage;
        at the declared load the early windows read high and the std is wide (the start's
        windows only widen it, :meth:`LevelTracker._widen`)."""
        return self.op.lag

    def _track(self) -> None:
        """Mean NIS per channel of the last ``every`` samples -> the load level; switching
        swaps the operator (same state layout, the state carries over) and :attr:`std`."""
        tr = self.tracker
        op = self.op
        n = min(tr.every, op.nis_window)
        end = int(self._counters[0]) % op.nis_window
        per = n * op.n_channels
        level = tr.decide(_last_sum(self._nisring, end, n) / per,
                          _last_sum(self._lag1ring, end, n) / per)
        if self._levels[level] is not op:
            self._use(level)
        if self._track_var is None:  # the std of the level it states (the start: wider)
            self._base_std[:] = self._levels[tr.std_level].std
        else:  # std^2 = g^2 v_q + nu v_r under the gains of the level (kf_track_var)
            v = self._track_var[level]
            np.sqrt(tr.stated_power * v[0] + tr.noise_scale * v[1], out=self._base_std)

    def _run(self, Y, Q, flags):
        """The kernel over the block; a non-finite state ends a piece: :meth:`reset` (counted
        in :attr:`self_resets`) and go on from the next sample (from rest, warm-up rows)."""
        a, nb = 0, Y.shape[0]
        while a < nb:
            # the kernel on the packed state and the level's operator (the compiled
            # per-sample step runs the same call)
            stop = _smooth_packed(Y[a:] if a else Y, Q[a:] if a else Q,
                                  flags[a:] if a else flags, *self.pack.args)
            if stop == 0:
                return
            self._resets[0] += 1
            self.reset()
            a += stop

    @property
    def self_resets(self) -> int:
        """Resets since the start after the state had become non-finite (an input so large
        that the update overflowed): the estimator starts again from rest."""
        return int(self._resets[0])

    def reset(self) -> None:
        """State at 0, rings and the model-check window cleared, the load level back at the
        designed one; the stated std restarts from the structure's stationary prior
        (``kf_startup_var``) and narrows as the data arrive."""
        for a in self._state():
            a[...] = 0
        self._counters[2] = self._check_from()
        self._tick[P.SINCE] = self._tick[P.PENDING] = self._tick[P.EXTRA] = 0
        tr = self.tracker
        if tr is not None:
            tr.restart(int(np.argmin(np.abs(np.log(tr.grid)))))
            self._tick[P.SINCE] = -self._track_offset()
            self._use(tr.level)
            self._base_std[:] = self.op.std
        if self.chain_check is not None:
            self.chain_check.reset()
        self._stated_std()
        self._set_budget()

    def _check_from(self) -> int:
        """The sample from which the model check's window fills after a (re)start: the
        warm-up's end (:attr:`n_warm`), at most one window. Before it the state leaves rest
        and the innovations carry the structure's own motion, far above their steady
        expectation: a matched record that starts with the structure moving was flagged as
        the window first filled."""
        return min(self.n_warm, self.op.nis_window)

    def _state(self):
        return (self._x, self._ering, self._zring, self._fring, self._last, self._nisring,
                self._nis, self._counters, self._bstate, self._bring, self._bsum,
                self._lag1ring, self._eps_prev)

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
        entry per resonance, then one for the load's band (``meta["estimator"]
        ["check_shape_hz"]``), ``{"f_hz": [lo, f, hi], "power": [below, above] (1 on average),
        "ratio": below / above, "threshold": [min, max] of the ratio, "kind": "resonance" or
        "load shape"}``; ``reasons``: why it
        is suspect, in words; ``noise_level``: the tracked sensor noise's std over the designed
        one (1 without ``kf_track_*``); ``load_level``: the tracked load level, a factor of the
        designed force RMS, or None without tracking; ``chain``: the measurement-chain check,
        :meth:`edge.estimator.chain_check.ChainCheck.as_dict`, or None without ``kf_alt_*``;
        ``resets``: resets after a non-finite state since the start, :attr:`self_resets`);
        ``None`` values until the window has filled once."""
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
        shape = self.bundle.meta.get("estimator", {}).get("check_shape_hz")
        n_res = op.band_ba.shape[0] - (2 if shape else 0)
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
                                        round(float(op.band_threshold[b]), 4)],
                          "kind": "resonance" if b < n_res else "load shape"})
            if full and (lo_p > op.band_threshold[b] * hi_p or
                         hi_p > op.band_threshold[b + 1] * lo_p):
                suspect = True
                reasons.append(band_reason(op.band_hz, b, r, b >= n_res))
        cc = self.chain_check
        if cc is not None and cc.reason():
            suspect = True
            reasons.append(cc.reason())
        if self.self_resets:
            reasons.append(f"the estimator's state became non-finite and was reset "
                           f"{self.self_resets} time(s) since the start")
        return {"nis": None if nis is None else round(nis, 3), "dof": dof,
                "window_s": W * self.bundle.dt,
                "p_value": None if nis is None else chi2_sf(nis, dof),
                "ratio": None if nis is None else round(nis / dof, 4),
                "threshold": round(op.nis_threshold, 3),
                "threshold_low": round(op.nis_threshold_low, 3), "bands": bands,
                "suspect": suspect, "reasons": reasons,
                "load_level": None if self.tracker is None else self.tracker.load_level(),
                "noise_level": None if self.tracker is None else
                math.sqrt(self.tracker.noise_scale),
                "chain": None if cc is None else cc.as_dict(), "resets": self.self_resets}

    def _warm_up(self) -> None:
        """Compile (or load from the numba cache) on throw-away copies of the state: the
        daemon gives the compiler's memory back before the first sample
        (:func:`edge.daemon.realtime.release_after_startup`)."""
        saved = [a.copy() for a in (*self._state(), self._tick, self._resets)]
        self._run(np.zeros((1, self.n_channels)), np.empty((1, self._Q.shape[1])),
                  np.empty(1, np.uint8))
        for a, s in zip((*self._state(), self._tick, self._resets), saved):
            a[...] = s
        cc = self.chain_check
        if cc is not None:  # its kernels too: nothing compiles or loads once running
            ring, st = cc.ring.copy(), cc.st.copy()
            cc.push(np.zeros((1, self.n_channels)))
            llr(cc.bundle_filter, cc.alt, cc.ring, 0, 0)
            cc.ring[...], cc.st[...] = ring, st


def _last_sum(ring: np.ndarray, end: int, n: int) -> float:
    """Sum of the last ``n`` entries of a circular ``ring`` whose next slot is ``end``."""
    W = ring.shape[0]
    tot = float(ring[max(end - n, 0):end].sum())
    if n > end:
        tot += float(ring[W - (n - end):].sum())
    return tot


def _converged_row(excess: np.ndarray, std: np.ndarray, within: float = 0.10) -> int:
    """The first start-up row whose std is within ``within`` of the steady ``std`` for every
    column (``sqrt(std^2 + excess) <= (1 + within) std``); the rows before it are flagged
    warm-up. ``len(excess)`` if none is."""
    ok = np.all(excess <= ((1.0 + within) ** 2 - 1.0) * np.asarray(std) ** 2, axis=1)
    hit = np.flatnonzero(ok)
    return int(hit[0]) if hit.size else int(excess.shape[0])
