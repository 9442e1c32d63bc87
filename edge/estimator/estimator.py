"""The public estimator: validates once, owns preallocated state, runs the compiled kernel."""

from __future__ import annotations

import numpy as np

from edge.bundle import Bundle
from edge.estimator.common import BlockEstimator
from edge.estimator import packed as pk_
from edge.estimator.chain_window import carry_history
from edge.estimator.kernel import FLAG_HELD, FLAG_SATURATED, FLAG_WARMUP
from edge.estimator.packed import Packed, _process_packed, _reset_packed
from edge.estimator.operator import StepOperator, derive_operator
from edge.estimator.hybrid import HybridEstimator
from edge.estimator.smoother import SmootherEstimator

__all__ = ["Estimator", "FLAG_HELD", "FLAG_WARMUP", "FLAG_SATURATED"]


class Estimator(BlockEstimator):
    """Real-time force identification and virtual outputs for one bundle.

    Parameters
    ----------
    bundle : Bundle or str
        A loaded bundle or the path of one.
    alpha, window : optional
        Override the bundle's Tikhonov parameter / fixed-lag window.
    check_stability : bool
        Refuse an unstable closed loop (default). Off only for parameter sweeps.

    Notes
    -----
    Not thread-safe by design (no lock on the per-sample path): call :meth:`process`,
    :meth:`reset` and :meth:`swap` from one thread, as the daemon's loop does. The kernel
    releases the GIL, so other threads run meanwhile.

    Output row ``j`` of :meth:`process` describes the input sample ``j - delay`` of the
    stream (``delay = window - 1`` samples); rows of the first ``delay`` samples are NaN with
    :data:`FLAG_WARMUP` set. A non-finite channel value is replaced by that channel's last
    finite value and every estimate that used it carries :data:`FLAG_HELD`.
    """

    def __new__(cls, bundle, *args, **kwargs):
        # a smoother bundle gets the smoother (same interface): every caller of
        # Estimator(bundle) -- daemon, replay, demo -- runs whichever the bundle selects
        loaded = None
        if cls is Estimator:
            loaded = bundle if isinstance(bundle, Bundle) else Bundle.load(bundle)
            if loaded.method == "smoother" and "hy_onnx" in loaded.kf:
                return HybridEstimator(loaded, *args, **kwargs)  # hybrid twin (schema 5)
            if loaded.method == "smoother":
                return SmootherEstimator(loaded, *args, **kwargs)
        obj = super().__new__(cls)
        obj._loaded = loaded  # __init__ uses it instead of loading the file again
        return obj

    def __init__(self, bundle, alpha: float | None = None, window: int | None = None,
                 check_stability: bool = True):
        if not isinstance(bundle, Bundle):
            bundle = getattr(self, "_loaded", None) or Bundle.load(bundle)
        self.bundle = bundle
        self.channel_names = [c.name for c in bundle.channels]
        self.force_names = [f.name for f in bundle.forces]
        self.output_names = [o.name for o in bundle.outputs]
        self._install(derive_operator(bundle, alpha=alpha, window=window,
                                      check_stability=check_stability), keep_state=False)
        self._warm_up()

    # ------------------------------------------------------------------ properties
    @property
    def delay(self) -> int:
        """Samples between a measurement and the estimate that describes it."""
        return self.op.window - 1

    # ------------------------------------------------------------------- running
    def process(self, Y, F, Z, flags) -> None:
        """Process a block of samples into preallocated outputs.

        Parameters
        ----------
        Y : float64 (nb, nch)  measurements in channel units (SI)
        F : float64 (nb, nf)   out: forces [N]
        Z : float64 (nb, nout) out: virtual outputs
        flags : uint8 (nb,)    out: FLAG_* bits
        """
        nb = Y.shape[0]
        if Y.ndim != 2 or Y.shape[1] != self.n_channels or Y.dtype != np.float64:
            raise ValueError(f"Y must be float64 of shape (nb, {self.n_channels}), "
                             f"got {Y.dtype} {Y.shape}")
        if F.shape != (nb, self.n_forces) or Z.shape != (nb, self.n_outputs) \
                or flags.shape != (nb,) or flags.dtype != np.uint8:
            raise ValueError("F, Z, flags must be preallocated as (nb, nf), (nb, nout), "
                             "(nb,) uint8")
        _process_packed(Y, F, Z, flags, *self.packed.args)

    def reset(self) -> None:
        """Zero the state (structure at rest) and forget the measurement window."""
        _reset_packed(*self.packed.args)

    def physical_state(self):
        """Reduced-coordinate (u, v, a), each shape (n,)."""
        ua = self.op.P @ self._x
        n = ua.shape[0] // 3
        return ua[:n], ua[n:2 * n], ua[2 * n:]

    def swap(self, op: StepOperator, bundle=None) -> None:
        """Swap in a new operator between two blocks (e.g. after a model update).

        Displacements, velocities and the previous force carry over (accelerations then follow
        from the new model's equilibrium); the window must keep its length. ``bundle``: the
        bundle ``op`` was derived from, which becomes :attr:`bundle` (the running model).
        """
        if (op.n_channels, op.n_forces, op.n_outputs, op.window) != (
                self.n_channels, self.n_forces, self.n_outputs, self.op.window):
            raise ValueError("the new operator must keep channels, forces, outputs and window")
        phys = self.op.P @ self._x
        # the forces at the state's end (previous force; older ones for a converter)
        nc_old, nc_new = (o.info.get("force_tail", o.Acoup.shape[1]) for o in (self.op, op))
        old_op, x_old = self.op, self._x.copy()
        self._install(op, keep_state=True, phys=phys)
        if nc_new and nc_new == nc_old:
            self._x[self._x.shape[0] - nc_new:] = x_old[x_old.shape[0] - nc_old:]
        # ... and the older grid states a converter's window reaches back to
        carry_history(old_op, x_old, op, self._x)
        if bundle is not None:
            self.bundle = bundle

    # ------------------------------------------------------------------ internals
    def _install(self, op: StepOperator, keep_state: bool, phys=None) -> None:
        """Make ``op`` the operator: a packed copy of it (:class:`edge.estimator.packed.Packed`)
        whose views are the state; ``keep_state``: the structure's physical state ``phys``
        and the measurement window carry over."""
        old = self.__dict__.get("packed")
        pk = Packed(op)
        self.n_channels, self.n_forces, self.n_outputs = op.n_channels, op.n_forces, op.n_outputs
        self._x, self._xn, self._fs, self._zs = (pk.view(k) for k in (pk_.X, pk_.XN, pk_.FS,
                                                                        pk_.ZS))
        self._ybuf, self._fbuf = pk.view(pk_.YBUF), pk.view(pk_.FBUF)
        self._last, self._counters = pk.view(pk_.LAST), pk.view(pk_.COUNTERS)
        if keep_state:
            self._x[:] = op.Pinv @ phys
            for k in (pk_.YBUF, pk_.FBUF, pk_.LAST, pk_.COUNTERS):
                pk.view(k)[...] = old.view(k)
        self.packed = pk
        self.op = op

    def _warm_up(self) -> None:
        """Compile (or load from the numba cache) on throw-away copies of the state."""
        op = self.op
        Y = np.zeros((1, op.n_channels))
        f8, i8, u8 = self.packed.args
        _process_packed(Y, np.empty((1, op.n_forces)), np.empty((1, op.n_outputs)),
                        np.empty(1, dtype=np.uint8), f8.copy(), i8.copy(), u8.copy())
        _reset_packed(f8.copy(), i8.copy(), u8.copy())
