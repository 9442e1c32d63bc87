"""What the estimators of :mod:`edge.estimator` share (Tikhonov and the smoother).

:class:`BlockEstimator` is the block interface the daemon, replay and the demo call; a
subclass sets ``n_channels``, ``n_forces``, ``n_outputs`` and the ``_counters`` array
(samples seen first) and implements ``process(Y, F, Z, flags)`` on preallocated arrays.
"""

from __future__ import annotations

import numpy as np


class BlockEstimator:
    """Block interface of an estimator: :meth:`process` (subclass), :meth:`run`, counters."""

    std = None  # (nf + nout,) standard deviations [SI] when the estimator states them
    n_channels: int
    n_forces: int
    n_outputs: int

    def process(self, Y, F, Z, flags) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def model_check(self):
        """Model-check status for health, or None when the estimator has no check."""
        return None

    def update_refused(self) -> str | None:
        """Why this estimator cannot take a model update on the device (``update_model``),
        or None when it can (:meth:`swap`)."""
        return None

    def run_std(self, Y):
        """:meth:`run` with the standard deviation each row was stated with: ``(F, Z, flags,
        S)``, ``S`` (nb, nf + nout) or None when the estimator states none. A smoother that
        follows the load's level switches its gains and :attr:`std` once a tracker period
        (``tracker.every`` samples); the record is processed in pieces that end where it is
        due, so each row carries the std of the gains that produced it (not the last one)."""
        Y = np.ascontiguousarray(Y, dtype=np.float64)
        if self.std is None:
            return (*self.run(Y), None)
        nb = Y.shape[0]
        F = np.empty((nb, self.n_forces))
        Z = np.empty((nb, self.n_outputs))
        flags = np.empty(nb, dtype=np.uint8)
        S = np.empty((nb, np.size(self.std)))
        a = 0
        while a < nb:
            b = a + self.next_piece(nb - a)
            S[a:b] = self.std
            self.process(Y[a:b], F[a:b], Z[a:b], flags[a:b])
            a = b
        return F, Z, flags, S

    def next_piece(self, n_left: int) -> int:
        """How many of the next ``n_left`` rows share one :attr:`std` (all of them unless a
        subclass changes its std within a block)."""
        return n_left

    @property
    def samples_seen(self) -> int:
        return int(self._counters[0])

    def run(self, Y):
        """Allocate outputs and process a whole record (nb, nch); returns (F (nb, nf),
        Z (nb, nout), flags (nb,) uint8)."""
        Y = np.ascontiguousarray(Y, dtype=np.float64)
        nb = Y.shape[0]
        F = np.empty((nb, self.n_forces))
        Z = np.empty((nb, self.n_outputs))
        flags = np.empty(nb, dtype=np.uint8)
        self.process(Y, F, Z, flags)
        return F, Z, flags
