"""A source component of a load model: one mode of a source structure that drives every
force of an interface together (:class:`offline.load.LoadModel` ``components``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Component:
    """A mode of the source that drives every force along one direction ``v``::

        S_ff(f) += |h(f)|^2 v v^T,   h(f) = f0^2 / (f0^2 - f^2 + 2 i zeta f0 f)

    ``v`` [unit/sqrt(Hz), per force] is the two-sided PSD's square root far below ``f0``; the
    state-space form is the resonator ``q'' + 2 zeta w0 q' + w0^2 q = w0^2 w`` (``w`` white,
    unit intensity) with ``f = v q``."""

    f0: float
    zeta: float
    v: tuple

    def h2(self, freqs) -> np.ndarray:
        f = np.asarray(freqs, dtype=float)
        return np.abs(self.f0 ** 2 / (self.f0 ** 2 - f ** 2 + 2j * self.zeta * self.f0 * f)) ** 2

    def variance(self) -> np.ndarray:
        """Each force's variance from this component: v_j^2 w0 / (4 zeta) (w0 = 2 pi f0)."""
        return np.asarray(self.v) ** 2 * 2 * np.pi * self.f0 / (4 * self.zeta)

    def realise(self):
        """``(a (2, 2), b (2, 1), c (1, 2))`` of the resonator (unit white intensity)."""
        w0 = 2 * np.pi * self.f0
        return (np.array([[0.0, 1.0], [-w0 ** 2, -2 * self.zeta * w0]]),
                np.array([[0.0], [w0 ** 2]]), np.array([[1.0, 0.0]]))

    def as_dict(self) -> dict:
        return {"f0": float(self.f0), "zeta": float(self.zeta), "v": [float(x) for x in self.v]}

    @classmethod
    def from_dict(cls, d: dict) -> "Component":
        """The component of :meth:`as_dict`'s form."""
        return cls(float(d["f0"]), float(d["zeta"]), tuple(d["v"]))
