"""The hybrid twin on the edge: the Kalman fixed-lag smoother of the linear model plus the
neural correction ``g_theta`` of the bundle (``kf_hy_*``, :mod:`offline.hybrid`), run by
onnxruntime.

The correction enters as a known input computed from the filtered state (the best estimate
of ``x_k``, at which the training's discretisation evaluates ``g``), with the innovation of
the linear part (the correction's own part of an acceleration channel is not known before
``g``)::

    g_k      = g_theta(S (x_k|k-1 + K (y_k - H x_k|k-1)))   (outside the trained envelope:
               the input held at its bound, or g_k = 0; kf_hy_guard)
    gd_k     = w0 g_k + w1 g_k-1                    (the correction at the sample instant)
    e_k      = y_k - H x_k|k-1 - Dg gd_k            (innovation of the hybrid model)
    x_k+1|k  = A (x_k|k-1 + K e_k) + Bg g_k
    z_k-L    = smoothed linear part + Cqg gd_k-L

``g_k`` is held over the step after sample k (from its mid-step state), so the correction at
the instant of sample k is the mean of the holds after and before it, ``w = (1/2, 1/2)``
(``kf_hy_direct``; a schema-5 bundle has no such field and is read with ``(1, 0)``, as it
was written: :meth:`edge.bundle.Bundle.from_arrays`).

A known input does not change the Kalman recursion's covariance, so the gains, the stated
std and the model check (NIS, band pairs: now of the hybrid model's innovations) are the
linear smoother's. The std neglects the network's Jacobian (an extended filter would need a
Riccati step per sample); docs/hybrid.md has the measured coverage. Outside the trained
envelope (any network input beyond the range seen in training, widened by the margin) the
bundle's ``kf_hy_guard`` decides: 1 (what a build writes) holds each input at its bound, so
the correction is the network's at the envelope's edge (a saturated correction, not an
extrapolation); 0 (a bundle of schema <= 9) does not apply it -- the linear model's
estimate. Either way the estimates whose window contains such a sample carry
:data:`edge.flags.FLAG_ENVELOPE`. An output
that is not finite or absurd is not applied
(:func:`output_bound`: one that alone would move a network input
by more than the envelope's width in one step), counted in ``model_check()["hybrid"]
["rejected"]``. Should the state still become non-finite (an input far out of range), the
estimator resets itself (``"resets"``; the daemon logs it once per supervisor tick).

At load (:func:`check_network`): the network's input and output widths must be the bundle's
(``kf_hy_S`` rows, ``kf_hy_Bg`` columns), and one inference at the envelope's centre must
return a finite (1, ng) output within :data:`LOAD_INFERENCE_LIMIT_S` (a network with a huge
loop is stopped by onnxruntime's ``terminate`` and refused, not left to hang start-up).

Per sample: one compiled call (:func:`edge.estimator.hybrid_kernel._hy_sample`: the smoother's
kernel between the correction's parts, then the next network input) and one
``run_with_iobinding`` of onnxruntime on input and output buffers bound once (no allocation
outside onnxruntime).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from edge.estimator.hybrid_kernel import _hy_input, _hy_sample
from edge.estimator.operator import EstimatorError
from edge.estimator.smoother import SmootherEstimator


def onnx_session(blob: bytes, what: str):
    """An onnxruntime session of ``blob`` on one CPU thread (as the inverse maps')."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    try:
        return ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own exception types
        raise EstimatorError(f"{what}: not a loadable ONNX model ({exc})") from None


#: Seconds one inference may take at load (:func:`check_network`); a sample at 1 kHz has
#: 1 ms, so a network needing this long cannot run anyway: it is refused, not waited for.
LOAD_INFERENCE_LIMIT_S = 2.0


def output_bound(S: np.ndarray, Bg: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(ng,) bound of ``|g_i|``: the smallest ``(hi_j - lo_j) / |(S Bg)_ji|`` over the inputs
    ``j`` that output ``i`` feeds (``(S Bg)_ji != 0``, ``hi_j > lo_j``), i.e. the output that
    held for one step alone would move a network input by the whole width of the trained
    envelope. A trained correction moves the state by a small fraction of its range per
    sample (docs/hybrid.md), so beyond this the output is absurd and not applied; ``inf``
    for an output that feeds no input (only finiteness is checked then)."""
    SB = np.abs(S @ Bg)
    width = (hi - lo)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where((SB > 0) & (width > 0), width / SB, np.inf)
    return np.ascontiguousarray(r.min(axis=0), dtype=float)


def check_network(session, ni: int, ng: int, centre: np.ndarray, what: str) -> None:
    """Refuse (``EstimatorError`` naming ``what``) a network whose input ``s`` or output
    ``g`` has another width than the bundle's (``ni`` from ``kf_hy_S``, ``ng`` from
    ``kf_hy_Bg``), or whose one inference at ``centre`` fails, is not a finite (1, ng)
    array, or takes longer than :data:`LOAD_INFERENCE_LIMIT_S` (stopped by onnxruntime's
    ``RunOptions.terminate`` from a timer thread)."""
    import onnxruntime as ort

    for arg, name, n, field in ((session.get_inputs()[0], "input 's'", ni, "kf_hy_S rows"),
                                (session.get_outputs()[0], "output 'g'", ng,
                                 "kf_hy_Bg columns")):
        shape = list(arg.shape)
        if len(shape) != 2 or any(isinstance(d, int) and d != want
                                  for d, want in zip(shape, (1, n))):
            raise EstimatorError(f"{what}: the network's {name} has shape {shape}, the "
                                 f"bundle needs [1, {n}] ({n} = {field})")
    opts = ort.RunOptions()
    opts.log_severity_level = 4  # the refusal below says it; no onnxruntime log line too
    timer = threading.Timer(LOAD_INFERENCE_LIMIT_S, lambda: setattr(opts, "terminate", True))
    t0 = time.monotonic()
    timer.start()
    try:
        g = session.run(["g"], {"s": np.ascontiguousarray(centre, dtype=float)[None]}, opts)[0]
    except Exception as exc:  # onnxruntime's own exception types
        if opts.terminate:
            raise EstimatorError(f"{what}: one inference took longer than "
                                 f"{LOAD_INFERENCE_LIMIT_S:g} s (stopped): the network cannot "
                                 "run per sample") from None
        raise EstimatorError(f"{what}: the network fails on an input of shape (1, {ni}) "
                             f"({str(exc).splitlines()[0][:200]})") from None
    finally:
        timer.cancel()
    if time.monotonic() - t0 > LOAD_INFERENCE_LIMIT_S:
        raise EstimatorError(f"{what}: one inference took longer than "
                             f"{LOAD_INFERENCE_LIMIT_S:g} s: the network cannot run per sample")
    g = np.asarray(g)
    if g.shape != (1, ng) or not np.all(np.isfinite(g)):
        raise EstimatorError(f"{what}: the network's output at the envelope's centre is "
                             f"{'not finite' if g.shape == (1, ng) else f'of shape {g.shape}'}"
                             f" (the bundle needs a finite (1, {ng}))")


class HybridEstimator(SmootherEstimator):
    """:class:`SmootherEstimator` with the bundle's correction network (module docstring).
    ``Estimator(bundle)`` returns one for a smoother bundle with ``kf_hy_*``; extra state:
    :attr:`outside` (samples outside the envelope since the start or the last reset),
    :attr:`rejected` (outputs not applied, not finite or beyond :attr:`hy_gmax`) and
    :attr:`self_resets` (resets after a non-finite state), both since the start."""

    def __init__(self, bundle, *args, **kwargs):
        self._hy_ready = False
        super().__init__(bundle, *args, **kwargs)
        kf = self.bundle.kf
        if "hy_onnx" not in kf:
            raise EstimatorError(f"{self.bundle.path or 'bundle'}: no hybrid network (kf_hy_*)")
        perm = self.op.perm
        self.hy_S = np.ascontiguousarray(np.asarray(kf["hy_S"], dtype=float)[:, perm])
        self.hy_Bg = np.ascontiguousarray(np.asarray(kf["hy_Bg"], dtype=float)[perm])
        self.hy_Dg = np.ascontiguousarray(kf["hy_Dg"], dtype=float)
        self.hy_Cqg = np.ascontiguousarray(kf["hy_Cqg"], dtype=float)
        self.hy_lo = np.ascontiguousarray(kf["hy_lo"], dtype=float)
        self.hy_hi = np.ascontiguousarray(kf["hy_hi"], dtype=float)
        self.hy_w = np.ascontiguousarray(kf["hy_direct"], dtype=float)
        self.hy_clip = bool(int(kf["hy_guard"]))  # saturate outside the envelope (else off)
        ni, ng = self.hy_S.shape[0], self.hy_Bg.shape[1]
        self.session = onnx_session(np.asarray(kf["hy_onnx"], np.uint8).tobytes(),
                                    f"{self.bundle.path or 'bundle'}: kf_hy_onnx")
        ins, outs = self.session.get_inputs(), self.session.get_outputs()
        if [i.name for i in ins] != ["s"] or [o.name for o in outs] != ["g"] \
                or ins[0].type != "tensor(double)" or outs[0].type != "tensor(double)":
            raise EstimatorError(f"{self.bundle.path or 'bundle'}: kf_hy_onnx must map a "
                                 "float64 input 's' to a float64 output 'g'")
        what = f"{self.bundle.path or 'bundle'}: kf_hy_onnx"
        check_network(self.session, ni, ng, 0.5 * (self.hy_lo + self.hy_hi), what)
        self.hy_gmax = output_bound(self.hy_S, self.hy_Bg, self.hy_lo, self.hy_hi)
        self._hyc = np.zeros(2, np.int64)  # [outputs rejected, resets], since the start
        import onnxruntime as ort

        self._s = np.zeros((1, ni))
        self._g = np.zeros((1, ng))
        # buffers bound once: onnxruntime reads _s and writes _g in place
        self._binding = self.session.io_binding()
        self._binding.bind_ortvalue_input("s", ort.OrtValue.ortvalue_from_numpy(self._s))
        self._binding.bind_ortvalue_output("g", ort.OrtValue.ortvalue_from_numpy(self._g))
        Lp1 = self.op.lag + 1
        self._y1 = np.zeros((1, self.n_channels))
        self._gring = np.zeros((Lp1, self.hy_Cqg.shape[0]))
        self._gp = np.zeros((2, ng))  # [g_k-1, gd_k]
        self._envring = np.zeros(Lp1, np.uint8)
        self._outside = np.zeros(2, np.int64)  # [since reset, in the current NIS window]
        # s = S (x + K (y - H x)) = Sx x + Sy y, per operator (the load levels switch K)
        self._hy_ops = {}
        for o in [self.op, *self._levels]:
            SK = self.hy_S @ o.K
            self._hy_ops[id(o)] = (np.ascontiguousarray(self.hy_S - SK @ o.H),
                                   np.ascontiguousarray(SK))
        self._hy_ready = True
        self._warm_up()
        self.reset()
        self._hyc[:] = 0  # the warm-up's throw-away sample is not counted

    @property
    def outside(self) -> int:
        """Samples outside the trained envelope since the start or the last reset."""
        return int(self._outside[0])

    @property
    def rejected(self) -> int:
        """Network outputs not applied since the start: not finite or beyond :attr:`hy_gmax`."""
        return int(self._hyc[0])

    @property
    def self_resets(self) -> int:
        """Resets since the start after the state had become non-finite."""
        return int(self._hyc[1])

    def _run(self, Y, Q, flags):
        if not self._hy_ready:  # the linear smoother's warm-up in __init__
            return super()._run(Y, Q, flags)
        a = 0
        while a < Y.shape[0]:  # a non-finite state ends a piece: reset, go on with the next
            a = self._hy_piece(Y, Q, flags, a)

    def _hy_piece(self, Y, Q, flags, a: int) -> int:
        """Samples ``a``.. of the block until its end or a non-finite state (then
        :meth:`reset`, counted); returns the next sample to process."""
        op = self.op
        run = self.session.run_with_iobinding
        s, g, y1, b = self._s, self._g, self._y1, self._binding
        Sx, Sy = self._hy_ops[id(op)]
        clip = self.hy_clip
        out = _hy_input(Y[a], self._last, self._x, Sx, Sy, self.hy_lo, self.hy_hi, s, clip)
        for j in range(a, Y.shape[0]):
            if out:
                self._outside[0] += 1
            if clip or not out:
                run(b)  # g = g_theta(s), in place
            r = _hy_sample(
                j, Y, Q, flags, g, out, self.hy_Dg, y1, op.Am, op.Ad, op.ClT, op.Cr, op.AfT,
                op.fT_span, op.Ak, op.AKT, op.H, op.h_span, op.Cq, op.q_span, op.G, op.Sinv, self._x,
                self._xn, self._e, self._ering, self._zring, self._fring, self._last,
                self._nisring, self._nis, op.nis_threshold, op.nis_threshold_low,
                self._counters, op.Wt, op.band_ba, op.band_gain, op.band_threshold,
                self._bstate, self._bring, self._bsum, self._eps, self._lag1ring,
                self._eps_prev, self.hy_Bg, self.hy_Cqg,
                self._gring, self._envring, op.lag, Sx, Sy, self.hy_lo, self.hy_hi, s,
                self._gp, self.hy_w, self.hy_gmax, self._hyc, clip)
            if r == 2:  # the state is not finite: start again from rest
                self._hyc[1] += 1
                self.reset()
                return j + 1
            out = r == 1
        return Y.shape[0]

    def _state(self):
        base = super()._state()
        if not getattr(self, "_hy_ready", False):
            return base
        return (*base, self._gring, self._envring, self._outside, self._gp)

    def model_check(self) -> dict:
        """:meth:`SmootherEstimator.model_check` plus ``"hybrid"``: samples outside the
        trained envelope (since the start or the last reset), whether the correction is
        applied now (``False``: a sample of the current window was outside and the guard is
        ``"off"``, the linear estimate; the ``"saturate"`` guard applies it at the envelope's
        edge), ``rejected`` outputs (not finite or absurd) and ``resets`` after a
        non-finite state, both since the start."""
        out = super().model_check()
        n = int(self._counters[0])
        recent = bool(self._envring.any())
        out["hybrid"] = {"outside": self.outside, "samples": n,
                         "fraction_outside": round(self.outside / n, 6) if n else 0.0,
                         "applied": not recent or self.hy_clip, "rejected": self.rejected,
                         "resets": self.self_resets, "guard": "saturate" if self.hy_clip
                         else "off"}
        if recent:
            what = ("the correction is the network's at the envelope's edge (saturated)"
                    if self.hy_clip else "the correction is off (linear estimate)")
            out["reasons"] = [*out["reasons"], "the state is outside the hybrid network's "
                              f"trained envelope, or its output was not finite or absurd: {what}"]
        return out
