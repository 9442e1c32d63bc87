"""Simulated acquisitions: the signal level (values injected after the driver) and the
duration limit wrapped around the real driver at the ADC level.

:class:`SignalAcquisition` delivers a source (:mod:`edge.daemon.simulate`) through the same
``read(out_values, out_t_ns, out_flags) -> n`` interface as the ADS1256 driver, paced by the
wall clock (``clock = "real"``) or as fast as it is read (``"virtual"``); :func:`calibrate`
is what :class:`edge.hw.acquire.Acquisition` does to the voltages on the Pi.
"""

from __future__ import annotations

import logging
import time

import numpy as np
from numba import njit

from edge.daemon.exitcodes import HardwareError
from edge.daemon.health import drdy_offset_ns
from edge.daemon.simulate import SimulationFinished
from edge.flags import FLAG_HELD, FLAG_SATURATED

log = logging.getLogger("vsense.simulate")


def calibrate(V, sensitivity, offset, saturation, Y, flags):
    """Volts to physical units and bad-sample flags (pure; outputs preallocated).

    What :class:`edge.hw.acquire.Acquisition` does on the Pi; used by the signal-level
    simulator. Saturated values are replaced by NaN (the driver's ``nan_on_saturation``).

    Parameters
    ----------
    V : float64 (n, nch)          channel voltages [V]
    sensitivity, offset, saturation : float64 (nch,)  [V/unit], [V], [V]
    Y : float64 (n, nch)          out: physical values, (V - offset) / sensitivity
    flags : uint8 (n,)            in/out: OR-ed with bit0 (non-finite) and bit2 (saturated)

    Returns
    -------
    bad : bool (n, nch)           non-finite or saturated
    """
    # y = (v - v0) / s
    np.subtract(V, offset, out=Y)
    np.divide(Y, sensitivity, out=Y)
    nonfinite = ~np.isfinite(V)
    with np.errstate(invalid="ignore"):
        sat = np.abs(V) >= saturation
    flags |= np.where(nonfinite.any(axis=1), FLAG_HELD, 0).astype(np.uint8)
    flags |= np.where(sat.any(axis=1), FLAG_SATURATED, 0).astype(np.uint8)
    Y[sat] = np.nan
    return nonfinite | sat


@njit(cache=True)
def _deliver(Y, flags, j, t_ns, out_values, out_t_ns, out_flags):  # pragma: no cover - compiled
    """Row ``j`` of a prepared chunk into one-sample outputs: ``out_values[0] = Y[j]``,
    ``out_flags[0] = flags[j]``, ``out_t_ns[0] = t_ns`` (:meth:`SignalAcquisition.read`'s
    short path: after a 1 ms sleep one compiled call costs less than three NumPy stores).
    NumPy twin: ``tests/test_daemon.py``.

    Parameters
    ----------
    Y : float64 (m, nch), flags : uint8 (m,)   the chunk
    j : int                                    its row
    t_ns : int                                 the sample's time [ns]
    out_values : float64 (1, nch), out_t_ns : int64 (1,), out_flags : uint8 (1,)   out
    """
    for c in range(Y.shape[1]):
        out_values[0, c] = Y[j, c]
    out_flags[0] = flags[j]
    out_t_ns[0] = t_ns


class SignalAcquisition:
    """A source delivered like the ADC driver: ``read(values, t_ns, flags) -> n``.

    ``clock="real"``: sample k becomes available at ``start + k/rate`` (monotonic clock) and,
    like the driver, a read returns when all the rows it asked for are in;
    ``"virtual"``: samples are available as fast as they are read; ``t_ns = k * dt`` [ns].
    ``duration_s > 0``: :class:`SimulationFinished` after that many samples' worth.
    ``drdy_dead_at``: simulate a DRDY line that stops toggling at this time [s] (raises the
    same :class:`HardwareError` a real driver raises on a DRDY timeout).
    """

    def __init__(self, source, rate: float, clock: str = "real", duration_s: float = 0.0,
                 drdy_timeout_s: float = 0.1, drdy_dead_at: float | None = None,
                 chunk: int = 1024, faults: list | None = None, full_scale: float = 2.5,
                 sensitivity=None, offset=None, saturation=None):
        self.src = source
        self.rate = float(rate)
        self.dt_ns = int(round(1e9 / rate))
        self.clock = clock
        self.total = int(round(duration_s * rate)) if duration_s > 0 else None
        self.k = 0
        self.start = None
        self.drdy_timeout_s = drdy_timeout_s
        self.dead_at = None if drdy_dead_at is None else int(round(drdy_dead_at * rate))
        self.chunk = chunk
        self.full_scale = full_scale
        self.sens, self.off, self.sat = sensitivity, offset, saturation
        # (kind, channel, first sample, n) with kind "nan" | "saturate"
        self.faults = [(k, c, int(round(at * rate)), n) for k, c, at, n in (faults or [])]
        # the prepared chunk: values as read() delivers them (faults applied, calibrated),
        # their flags, the sample number of its first row
        self._Y = np.zeros((0, 0))
        self._F = np.zeros(0, np.uint8)
        self._k0 = 0
        # rows _k0 .. _k0 + _fast - 1 can be delivered one at a time with no check (in the
        # chunk, before the duration's end and a dead DRDY line): read()'s short path
        self._fast = 0
        self._real = clock == "real"
        # load (or compile) the short path's kernel now, not at the first sample
        _deliver(np.zeros((1, 1)), np.zeros(1, np.uint8), 0, 0, np.zeros((1, 1)),
                 np.zeros(1, np.int64), np.zeros(1, np.uint8))

    @property
    def source(self):
        """The signal source (identification experiments call its ``inject_excitation``)."""
        return self.src

    def _prepare(self) -> None:
        """The next chunk of the source, as :meth:`read` delivers it: the faults applied,
        volts to physical units with the bad-sample flags (:func:`calibrate`), or volts."""
        V = np.array(self.src.volts(self.chunk), dtype=float)
        m = V.shape[0]
        if m == 0:
            raise SimulationFinished("measurement file exhausted")
        k0 = self._k0 = self.k
        for kind, c, f0, nf in self.faults:
            a, b = max(f0, k0), min(f0 + nf, k0 + m)
            if a < b:
                V[a - k0:b - k0, c] = np.nan if kind == "nan" else self.full_scale
        self._F = np.zeros(m, np.uint8)
        if self.sens is None:
            self._Y = V
        else:  # volts -> physical units, saturated -> NaN + bit2 (as the ADS1256 driver)
            self._Y = np.empty_like(V)
            calibrate(V, self.sens, self.off, self.sat, self._Y, self._F)
        self._fast = min([m, *(e - k0 for e in (self.total, self.dead_at) if e is not None)])

    @property
    def host_offset_ns(self) -> int | None:
        """``time.monotonic_ns`` of sample 0's DRDY (real clock, after the first read):
        sample k's DRDY is at ``host_offset_ns + t_ns[k]``."""
        if self.clock != "real" or self.start is None:
            return None
        return self._start_ns

    def read(self, out_values, out_t_ns, out_flags) -> int:
        """Up to ``n`` rows (the length of the outputs) into the outputs; returns how many
        (fewer only at the end of a prepared chunk or of the simulation). With the real clock
        it returns, like the driver, when the last of them is due (its DRDY time)."""
        k = self.k
        j = k - self._k0
        if j < self._fast and out_values.shape[0] == 1:  # one sample (block 1, the default)
            if self._real:  # sample k is due at start + k / rate
                rem = self._start_ns + k * self.dt_ns - time.monotonic_ns()
                if rem > 0:
                    time.sleep(rem * 1e-9)
            _deliver(self._Y, self._F, j, k * self.dt_ns, out_values, out_t_ns, out_flags)
            self.k = k + 1
            return 1
        return self._read(out_values, out_t_ns, out_flags)

    def _read(self, out_values, out_t_ns, out_flags) -> int:
        """:meth:`read` in general: the first read, blocks, the chunk's end, the duration's
        end, a dead DRDY line."""
        k = self.k
        if self.start is None:
            self._start_ns = time.monotonic_ns()
            self.start = self._start_ns * 1e-9
        nmax = out_values.shape[0]
        if self.total is not None:
            if k >= self.total:
                raise SimulationFinished(f"simulated duration reached ({k} samples)")
            nmax = min(nmax, self.total - k)
        if self.dead_at is not None:
            if k >= self.dead_at:
                time.sleep(self.drdy_timeout_s)
                raise HardwareError(f"ADS1256: DRDY did not go low within "
                                    f"{self.drdy_timeout_s * 1e3:.0f} ms (line dead?)")
            nmax = min(nmax, self.dead_at - k)
        j = k - self._k0
        if j >= self._F.shape[0]:
            self._prepare()
            j = 0
        n = min(nmax, self._F.shape[0] - j)
        if self.clock == "real":  # sample k + n - 1 is due at start + (k + n - 1) / rate
            rem = self._start_ns + (k + n - 1) * self.dt_ns - time.monotonic_ns()
            if rem > 0:
                time.sleep(rem * 1e-9)
        out_values[:n] = self._Y[j:j + n]
        out_flags[:n] = self._F[j:j + n]
        out_t_ns[:n] = (k + np.arange(n)) * self.dt_ns
        self.k = k + n
        return n

    def close(self) -> None:
        pass


def parse_faults(specs: list[str], nch: int) -> tuple[list, float | None]:
    """Parse ``[simulate] faults``: ``nan:ch=0:at=1.5:n=10``, ``saturate:ch=1:at=2:n=5``,
    ``drdy_dead:at=3.0``. Returns ``(sample faults, drdy dead time or None)``."""
    out, dead = [], None
    for i, spec in enumerate(specs):
        parts = spec.split(":")
        kind = parts[0]
        try:
            opts = {k: v for k, v in (p.split("=", 1) for p in parts[1:])}
        except ValueError:
            raise ValueError(f"[simulate] faults #{i}: {spec!r}: expected kind:key=value:...") \
                from None
        try:
            if kind == "drdy_dead":
                dead = float(opts.get("at", 0.0))
            elif kind in ("nan", "saturate"):
                ch = int(opts.get("ch", 0))
                if not 0 <= ch < nch:
                    raise ValueError(f"ch={ch} out of range 0..{nch - 1}")
                out.append((kind, ch, float(opts.get("at", 0.0)), int(opts.get("n", 1))))
            else:
                raise ValueError("kind must be nan, saturate or drdy_dead")
        except ValueError as e:
            raise ValueError(f"[simulate] faults #{i}: {spec!r}: {e}") from None
    return out, dead


class LimitedAcquisition:
    """Wrap a driver acquisition: :class:`SimulationFinished` after ``total`` rows."""

    def __init__(self, acq, total: int | None):
        self.acq, self.total, self.k = acq, total, 0

    @property
    def host_offset_ns(self) -> int | None:
        """DRDY clock -> ``time.monotonic_ns`` offset of the wrapped driver's clock."""
        return drdy_offset_ns(self.acq, False)

    @property
    def missed_conversions(self) -> int:
        """The wrapped driver's count (:attr:`edge.hw.acquire.Acquisition.missed_conversions`)."""
        return self.acq.missed_conversions

    def _chip_lost(self) -> int | None:
        """The simulated chip's own count of lost conversions (overwritten unread, DRDY
        pulse missing), or None when the driver is not on the simulator."""
        chip = getattr(getattr(getattr(self.acq, "adc", None), "spi", None), "chip", None)
        return None if chip is None else chip.stats["overwritten"] + chip.stats["drdy_missing"]

    def read(self, values, t_ns, flags) -> int:
        if self.k == 0 and not hasattr(self, "_lost0"):
            # conversions the chip overwrote before streaming began (configuration, start-up
            # work between the calibration and RDATAC) are no samples of the stream; the
            # conversion RDATAC's start skips is counted during this first read
            lost0 = self._chip_lost()
            self._lost0 = None if lost0 is None else lost0 + 1
        if self.total is not None:
            left = self.total - self.k
            if left <= 0:
                raise SimulationFinished(f"simulated duration reached ({self.k} samples)")
            if values.shape[0] > left:
                values, t_ns, flags = values[:left], t_ns[:left], flags[:left]
        try:
            n = self.acq.read(values, t_ns, flags)
        except Exception as e:
            self.k += int(getattr(e, "n_read", 0) or 0)
            raise
        self.k += n
        return n

    def close(self) -> None:
        # the simulator's own count, the reference for the driver's: taken before the close
        # (stopping RDATAC completes, unread, every conversion since the last read)
        lost = self._chip_lost()
        lost0 = getattr(self, "_lost0", None)
        self.acq.close()
        if lost is not None and lost0 is not None:
            log.info("simulated ADS1256: %d conversions lost while streaming (overwritten "
                     "before they were read, or their DRDY pulse missing); the driver counted "
                     "%d missed conversions", lost - lost0, self.missed_conversions)
