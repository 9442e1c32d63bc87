"""High-level acquisition on the ADS1256: channels in engineering units, block reads.

:class:`Acquisition` is what the daemon uses: configured with :class:`Channel` s, a data rate
and a mode (``"continuous"``: one channel with RDATAC, up to 30 kSPS; ``"cycle"``: several
channels by the datasheet's multiplexer cycling), it fills preallocated arrays::

    acq = Acquisition(adc, [Channel("a1", "AIN0", sensitivity=0.1, unit="m/s^2")], rate=1000)
    acq.start()
    n = acq.read(values (n, nch) float64, t_ns (n,) int64, flags (n,) uint8)

Flags (ARCHITECTURE.md): bit 2 (4) saturated: a code at either rail or ``|V| >= saturation_v``;
bit 3 (8) gap: the time since the previous row exceeds 1.5 nominal periods (a DRDY pulse or
samples were lost); bit 4 (16) suspect: a jump larger than the channel's ``max_step`` from the
last accepted sample and larger than 2 ``max_step`` from the one before (the signature of a
MISO bit error in a high bit; the ADS1256 has no CRC). Bits 0 and 1 belong to the estimator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edge.hw.decode import COUNTS, LAST_T, N_REF, PostState, _post_packed
from edge.hw.ads1256 import (
    ADS1256, CODE_MAX, CODE_MIN, PGA_CODES, DrdyTimeout, _nearest_rate, input_index, lsb_volts,
    mux_byte,
)
from edge.hw.ads1256_spec import row_rates

__all__ = ["Channel", "Acquisition"]



@dataclass(frozen=True)
class Channel:
    """One measured channel.

    Attributes
    ----------
    name : str
    pos, neg : str or int
        Inputs ``"AIN0"``..``"AIN7"``, ``"AINCOM"`` (or 0..8).
    pga : int
        1, 2, 4, ..., 64.
    sensitivity : float
        Volts per engineering unit [V/unit]; value = (V - offset) / sensitivity.
    offset : float
        Volts at zero engineering value [V].
    unit : str
    saturation_v : float or None
        ``|V| >=`` this counts as saturated (besides codes at the rails).
    max_step : float or None
        Largest plausible change between consecutive samples [unit]; larger jumps are
        flagged suspect (bit-error check). None = off.
    """

    name: str
    pos: object = "AIN0"
    neg: object = "AINCOM"
    pga: int = 1
    sensitivity: float = 1.0
    offset: float = 0.0
    unit: str = "V"
    saturation_v: float | None = None
    max_step: float | None = None

    def __post_init__(self):
        where = f"Channel {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"{where}: name must be a non-empty string")
        p, n = input_index(self.pos), input_index(self.neg)
        if p == n:
            raise ValueError(f"{where}: pos and neg are the same input {self.pos!r}")
        if self.pga not in PGA_CODES:
            raise ValueError(f"{where}: pga must be one of {sorted(PGA_CODES)}, got {self.pga!r}")
        if not (math.isfinite(self.sensitivity) and self.sensitivity != 0):
            raise ValueError(f"{where}: sensitivity must be finite and non-zero [V/unit], got "
                             f"{self.sensitivity!r}")
        if not math.isfinite(self.offset):
            raise ValueError(f"{where}: offset must be finite [V], got {self.offset!r}")
        if self.saturation_v is not None and not self.saturation_v > 0:
            raise ValueError(f"{where}: saturation_v must be > 0 V, got {self.saturation_v!r}")
        if self.max_step is not None and not self.max_step > 0:
            raise ValueError(f"{where}: max_step must be > 0, got {self.max_step!r}")

    @property
    def mux(self) -> int:
        return mux_byte(self.pos, self.neg)


class Acquisition:
    """Channels read from an :class:`~edge.hw.ads1256.ADS1256` into preallocated blocks.

    Parameters
    ----------
    adc : ADS1256
    channels : sequence of Channel
    rate : float
        ADS1256 data rate [SPS] (DRATE). Continuous mode delivers ``rate`` rows/s; cycling
        delivers about Table 14's throughput / n_channels rows/s (see :attr:`nominal_rate`).
    mode : "auto" | "continuous" | "cycle"
        auto: continuous for one channel, cycle for several.
    buffer : bool
        Input buffer on.
    calibrate : bool
        SELFCAL after configuration.
    nan_on_saturation : bool
        Write NaN instead of the railed value for saturated samples.
    """

    def __init__(self, adc: ADS1256, channels, rate: float = 1000.0, mode: str = "auto",
                 buffer: bool = True, calibrate: bool = True, nan_on_saturation: bool = False):
        chans = tuple(channels)
        if not chans:
            raise ValueError("Acquisition: at least one channel is needed")
        if not all(isinstance(c, Channel) for c in chans):
            raise TypeError("Acquisition channels: Channel instances expected")
        names = [c.name for c in chans]
        if len(set(names)) != len(names):
            raise ValueError(f"Acquisition channels: duplicate names in {names}")
        if len(chans) > 8:
            raise ValueError(f"Acquisition: at most 8 channels, got {len(chans)}")
        self.rate = _nearest_rate(rate)
        if mode == "cycling":
            mode = "cycle"
        if mode == "auto":
            mode = "continuous" if len(chans) == 1 else "cycle"
        if mode not in ("continuous", "cycle"):
            raise ValueError(f"Acquisition mode: 'auto', 'continuous' or 'cycle', got {mode!r}")
        if mode == "continuous" and len(chans) != 1:
            raise ValueError(f"Acquisition mode 'continuous' reads one channel, got {len(chans)}")
        self.adc, self.channels, self.mode = adc, chans, mode
        self.buffer, self.calibrate = bool(buffer), bool(calibrate)
        self.nan_on_saturation = bool(nan_on_saturation)
        nch = len(chans)
        self.nch = nch
        self.names = tuple(names)
        self.units = tuple(c.unit for c in chans)
        lsb = np.array([lsb_volts(adc.vref, c.pga) for c in chans])
        sat_v = np.array([np.inf if c.saturation_v is None else c.saturation_v for c in chans])
        # max_step in codes: |Δunit| * |sensitivity| / LSB (NaN: no check)
        step_codes = np.array([np.nan if c.max_step is None else
                               c.max_step * abs(c.sensitivity) / lsb[j]
                               for j, c in enumerate(chans)])
        self._muxes = [c.mux for c in chans]
        pgas = {c.pga for c in chans}
        self._adcons = ([PGA_CODES[c.pga] for c in chans] if len(pgas) > 1 else None)
        self._codes = np.zeros((1, nch), dtype=np.int64)
        # calibration and the gap / bit-error state of the post-processing, in two arrays
        self._ps = ps = PostState(lsb, [c.offset for c in chans],
                                  [c.sensitivity for c in chans], sat_v, step_codes, CODE_MAX,
                                  CODE_MIN, self.nan_on_saturation, 1e9 / self.nominal_rate)
        self._last_t = ps.view(LAST_T)  # [a previous row exists, its t_ns]
        self._n_ref = ps.view(N_REF)
        self._counts = ps.view(COUNTS)  # rows, saturated, gaps, suspect
        self.started = False
        # compile (or load from numba's cache) the post-processing now, not on the first
        # sample: zero rows change nothing
        _post_packed(self._codes, 0, np.zeros((1, nch)), np.zeros(1, np.int64),
                     np.zeros(1, np.uint8), *ps.args)

    @property
    def counts(self) -> dict:
        """Rows read and rows flagged saturated / gap / suspect (channel hits) so far."""
        r, s, g, b = self._counts.tolist()
        return {"rows": r, "saturated": s, "gaps": g, "suspect": b}

    @property
    def missed_conversions(self) -> int:
        """Conversions the chip completed and overwrote before they were read (continuous
        mode; :mod:`edge.hw.ads1256_rdatac`): samples lost at the ADC. 0 in cycle mode, where
        every row's conversion is started by the driver and a late read delays it (a gap
        in time, flag bit 3, and a lower row rate) instead of losing it."""
        return int(self.adc.stats.get("missed_conversions", 0))

    @property
    def nominal_rate(self) -> float:
        """Rows per second: ``rate`` (continuous) or Table 14 throughput / n_channels
        (:func:`edge.hw.ads1256_spec.row_rates`)."""
        return row_rates(self.nch, self.mode)[self.rate]

    def start(self) -> None:
        """Reset, check the chip ID, configure, calibrate, start conversions."""
        adc = self.adc
        adc.reset()
        adc.check_id()
        c0 = self.channels[0]
        adc.configure(mux=self._muxes[0], pga=c0.pga, rate=self.rate, buffer=self.buffer)
        if self.calibrate:
            adc.self_calibrate()
        if self.mode == "continuous":
            adc.start_continuous()
        else:
            adc.start_cycling(self._muxes[0], None if self._adcons is None else self._adcons[0])
        self._last_t[:] = 0
        self._n_ref[:] = 0
        self.started = True

    def stop(self) -> None:
        """Leave RDATAC / stop cycling; CS released. ``start()`` again to resume."""
        if not self.started:
            return
        self.started = False
        if self.mode == "continuous":
            self.adc.stop_continuous()
        else:
            self.adc.sync_wakeup()

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self.adc.close()

    def __enter__(self):
        if not self.started:
            self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def _check_out(self, values, t_ns, flags) -> int:
        n = t_ns.shape[0] if hasattr(t_ns, "shape") else -1
        if not (isinstance(values, np.ndarray) and values.dtype == np.float64
                and values.ndim == 2 and values.shape[1] == self.nch):
            raise ValueError(f"read out_values: float64 array (n, {self.nch}) expected, got "
                             f"{getattr(values, 'dtype', type(values))} "
                             f"{getattr(values, 'shape', '')}")
        if not (isinstance(t_ns, np.ndarray) and t_ns.dtype == np.int64 and t_ns.ndim == 1):
            raise ValueError("read out_t_ns: int64 array (n,) expected")
        if not (isinstance(flags, np.ndarray) and flags.dtype == np.uint8 and flags.ndim == 1):
            raise ValueError("read out_flags: uint8 array (n,) expected")
        if values.shape[0] != n or flags.shape[0] != n:
            raise ValueError(f"read: out_values {values.shape}, out_t_ns {t_ns.shape}, "
                             f"out_flags {flags.shape} must have the same n")
        return n

    def read(self, out_values: np.ndarray, out_t_ns: np.ndarray, out_flags: np.ndarray) -> int:
        """Fill all rows of the output arrays; return the number of rows (= n).

        Parameters
        ----------
        out_values : ndarray (n, nch) float64   engineering units
        out_t_ns : ndarray (n,) int64           clock time of the row's (last) DRDY [ns]
        out_flags : ndarray (n,) uint8          see module docstring

        Raises
        ------
        DrdyTimeout
            ``exc.n_read`` rows were filled (and post-processed) before the timeout.
        """
        n = self._check_out(out_values, out_t_ns, out_flags)
        if not self.started:
            raise RuntimeError("Acquisition.read: call start() first")
        if self._codes.shape[0] < n:
            self._codes = np.zeros((n, self.nch), dtype=np.int64)
        codes = self._codes
        err = None
        try:
            if self.mode == "continuous":
                self.adc.read_continuous(codes[:, 0], out_t_ns, n)
                n_done = n
            else:
                n_done = 0
                self._cycle(codes, out_t_ns, n)
                n_done = n
        except DrdyTimeout as exc:
            n_done = exc.n_read if self.mode == "continuous" else self._rows_done
            err = exc
        _post_packed(codes, n_done, out_values, out_t_ns, out_flags, *self._ps.args)
        if err is not None:
            err.n_read = n_done
            raise err
        return n_done

    def _cycle(self, codes, out_t_ns, n) -> None:
        adc, nch, muxes, adcons = self.adc, self.nch, self._muxes, self._adcons
        step = adc.cycle_step
        self._rows_done = 0
        for i in range(n):
            for j in range(nch):
                k = j + 1 if j + 1 < nch else 0
                code, t = step(muxes[k], None if adcons is None else adcons[k])
                codes[i, j] = code
                # the row's stamp: its last channel's DRDY, the instant the estimator's
                # measurement model counts the row from (channel_instants)
                if j == nch - 1:
                    out_t_ns[i] = t
            self._rows_done = i + 1
