"""The measurement chain a bundle is built for: what one sample of a channel is.

``ideal``: a point sample of the structure's response at the row's time stamp ``t_k``.
``ads1256``: the ADS1256's conversion (:mod:`edge.hw.ads1256_filter`): the taps-weighted mean
of the input over the modulator instants of a window ending ``offset_c`` seconds before
``t_k``::

    y_k,c = sum_i h_i C_c x(t_k - offset_c - i / F_MOD) + v_k,c

``offset_c`` is 0 for every channel in continuous mode; with the multiplexer cycling, each
channel of a row is converted in its own window and ``offset_c`` is how long before the row's
time stamp that channel's window ends. The bundle stores the chain (fields ``chain_*``,
schema 7) so that the estimator's measurement model and the device's ADC configuration can be
compared; a bundle of schema <= 6 is ``ideal``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: converters the estimator models ("daq", a generic anti-alias FIR, is not implemented yet)
CONVERTERS = ("ideal", "ads1256")
#: ADC modes: one channel converted continuously, or the multiplexer cycling over channels
MODES = ("continuous", "cycle")


def conversion_intervals(offsets, span: float, dt: float) -> int:
    """Sample intervals ``W`` (at least 2) that a conversion window of length ``span`` [s]
    ending ``offsets`` (per channel) before the row can reach back over."""
    end = float(np.max(offsets, initial=0.0)) + span
    return max(2, int(np.ceil(end / dt - 1e-9)))


@dataclass(frozen=True)
class Chain:
    """Converter, its data rate [SPS] and mode, each channel's window end before ``t_k`` [s]
    (``()``: all 0)."""

    converter: str = "ideal"
    drate: float = 0.0
    mode: str = "continuous"
    offsets: tuple = ()

    def __post_init__(self):
        if self.converter not in CONVERTERS:
            raise ValueError(f"chain converter {self.converter!r} is not one of "
                             f"{', '.join(CONVERTERS)}")
        if self.mode not in MODES:
            raise ValueError(f"chain mode {self.mode!r} is not one of {', '.join(MODES)}")
        object.__setattr__(self, "offsets", tuple(float(o) for o in self.offsets))
        if self.converter != "ideal" and not self.drate > 0:
            raise ValueError(f"chain drate must be > 0 for converter {self.converter!r}, "
                             f"got {self.drate!r}")

    @property
    def ideal(self) -> bool:
        return self.converter == "ideal"

    def offsets_for(self, nch: int) -> np.ndarray:
        """(nch,) each channel's window end before the row's time stamp [s]."""
        if not self.offsets:
            return np.zeros(nch)
        if len(self.offsets) != nch:
            raise ValueError(f"chain offsets: {len(self.offsets)} values for {nch} channels")
        return np.array(self.offsets, dtype=float)

    def taps(self):
        """``(h, spacing)``: one conversion's taps (``h[0]`` at the window's end) and their
        spacing [s]; ``(ones(1), 0)`` for ``ideal``."""
        if self.ideal:
            return np.ones(1), 0.0
        from edge.hw.ads1256_filter import F_MOD, conversion_taps

        return conversion_taps(self.drate), 1.0 / F_MOD

    def intervals(self, dt: float, nch: int) -> int:
        """Sample intervals ``W`` one conversion can span (its window plus the channel's
        offset, at least 2): the smoother carries ``W`` states per channel; 0 if ideal."""
        if self.ideal:
            return 0
        h, spacing = self.taps()
        return conversion_intervals(self.offsets_for(nch), (len(h) - 1) * spacing, dt)

    def n_states(self, nch: int, dt: float) -> int:
        """States the smoother adds for this chain: ``W`` per channel
        (:meth:`intervals`: the parts of the conversions in progress), 0 if ideal."""
        return self.intervals(dt, nch) * nch

    def as_dict(self) -> dict:
        return {"converter": self.converter, "drate": float(self.drate), "mode": self.mode,
                "offsets": list(self.offsets)}


def chain_of(a: dict):
    """The :class:`edge.acquisition.Chain` of a validated bundle's arrays (``ideal`` before
    schema 7)."""
    if int(a["schema_version"]) < 7:
        return Chain()
    off = np.asarray(a["chain_offset"], dtype=float)
    return Chain(str(a["chain_converter"]), float(a["chain_drate"]), str(a["chain_mode"]),
                 tuple(off.tolist()) if np.any(off != 0) else ())


def validate_chain(a: dict, version: int, nch: int, fail) -> int:
    """The ``chain_*`` fields of a bundle's arrays (schema 7; ``fail(field, message)``
    raises); returns the smoother's chain states (:meth:`Chain.n_states`)."""
    if version < 7:
        return 0
    conv, mode = str(a["chain_converter"]), str(a["chain_mode"])
    if conv not in CONVERTERS:
        fail("chain_converter", f"{conv!r} is not one of {', '.join(CONVERTERS)}")
    if mode not in MODES:
        fail("chain_mode", f"{mode!r} is not one of {', '.join(MODES)}")
    drate = float(a["chain_drate"])
    if not np.isfinite(drate) or drate < 0 or (conv != "ideal" and drate == 0):
        fail("chain_drate", f"must be finite and > 0 (>= 0 for ideal), got {drate}")
    off = np.asarray(a["chain_offset"])
    if off.shape != (nch,):
        fail("chain_offset", f"shape {off.shape}, expected ({nch},)")
    if not np.all(np.isfinite(off)) or np.any(off < 0) or np.any(off >= float(a["dt"])):
        fail("chain_offset", "offsets must be finite, >= 0 and below dt")
    return chain_of(a).n_states(nch, float(a["dt"]))
