"""The conversion model of the simulated ADS1256: data rate, settling, DRDY timing, the
digital filter, the calibration registers and the datasheet's calibration equation (eq. 3).
Mixed into :class:`edge.hw.sim_ads1256.SimulatedADS1256` (the SPI protocol side lives there).

A conversion whose DRDY falls at ``t_k`` is, like the chip's (``conversion="chip"``, the
default), the sinc5 + averager over the window ending then (:mod:`edge.hw.ads1256_filter`)::

    y_k = sum_i h_i x(t_k - i / F_MOD),      h = conversion_taps(DRATE)

Every restart (SYNC/WAKEUP, a MUX/ADCON/DRATE write, reset, calibration) puts the next DRDY
at least t18 (Table 13) later, and t18 is longer than the window at every rate, so the first
conversion after a multiplexer change sees only the new input: settled, as Table 13 says.
``conversion="ideal"`` keeps the old point sample ``x(t_k)`` (for comparisons only).
"""

from __future__ import annotations

from edge.hw.ads1256 import (ADCON, CODE_MAX, CODE_MIN, DRATE, DRATE_CODES, FSC0, MUX, OFC0,
                             SETTLING_TIME_S)
from edge.hw.ads1256_filter import conversion_taps
from edge.hw.sources import window_mean

#: what one conversion is: the chip's filter over its window, or a point sample
CONVERSIONS = ("chip", "ideal")

#: Register reset values (datasheet register map; OFC/FSC: the ideal-chip calibration).
FSC_IDEAL = 0x44AC08
OFC_ALPHA = 0x400000
RESET_VALUES = (0x31, 0x01, 0x20, 0xF0, 0xE0, 0x00, 0x00, 0x00,
                FSC_IDEAL & 0xFF, (FSC_IDEAL >> 8) & 0xFF, FSC_IDEAL >> 16)
_RATE_OF_CODE = {c: r for r, c in DRATE_CODES.items()}
_PGA_OF_BITS = (1, 2, 4, 8, 16, 32, 64, 64)
_MASK64 = (1 << 64) - 1


def _hash01(seed: int, k: int) -> float:
    """Deterministic uniform [0, 1) from (seed, k) (splitmix64)."""
    z = (seed * 0x9E3779B97F4A7C15 + (k + 1) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return ((z ^ (z >> 31)) >> 11) * (1.0 / (1 << 53))


class ConverterModel:
    """Conversions, DRDY and calibration of the simulated chip (state set by the chip's
    ``_power_on``)."""

    def _set_conversion(self, conversion: str) -> None:
        if conversion not in CONVERSIONS:
            raise ValueError(f"conversion: one of {CONVERSIONS}, got {conversion!r}")
        self.conversion = conversion
        self._taps_of_rate: dict = {}

    def _input(self, t_ns: float, inputs=None):
        """The voltages a conversion ending at ``t_ns`` sees, shape (9,) (at least
        ``inputs``)."""
        t = t_ns * 1e-9
        if self.conversion == "ideal":
            return self.source.volts(t)
        rate = self._rate()
        taps = self._taps_of_rate.get(rate)
        if taps is None:
            taps = self._taps_of_rate[rate] = conversion_taps(rate)
        return window_mean(self.source, t, taps, inputs)

    def _rate(self) -> float:
        return _RATE_OF_CODE.get(self.regs[DRATE], 30000.0)

    def _settle_ns(self) -> float:
        return SETTLING_TIME_S[self._rate()] * 1e9

    def _restart(self, t: float, first_after_ns: float, busy: bool = False) -> None:
        """(Re)start conversions: first data ``first_after_ns`` after ``t``, then periodic.

        DRDY goes high; the output register keeps the previous conversion, which may still
        be read once (the multiplexer-cycling procedure reads it after SYNC/WAKEUP).
        """
        self._drdy_low = False
        self._t_first = t + first_after_ns
        self._j = 0
        self._period = 1e9 / self._rate()
        self._t_next = int(self._t_first)
        if busy:
            self._busy_until = self._t_next

    def _stop(self) -> None:
        self._t_next = None

    @property
    def pga(self) -> int:
        return _PGA_OF_BITS[self.regs[ADCON] & 0x07]

    def _missing(self, k: int) -> bool:
        return self._p_missing > 0.0 and _hash01(self.seed, k) < self._p_missing

    def _advance(self, now: int) -> None:
        """Complete every conversion due by ``now``."""
        while self._t_next is not None and self._t_next <= now:
            behind = int((now - self._t_next) // self._period)
            if behind > 2:  # far behind: skip to the last two conversions
                self.stats["overwritten"] += behind - 1
                self._j += behind - 1
                self._k += behind - 1
                self._t_next = int(self._t_first + self._j * self._period)
                continue
            t = self._t_next
            k = self._k
            self._k += 1
            self._j += 1
            self._t_next = int(self._t_first + self._j * self._period)
            if (self._stuck_ns is not None and t >= self._stuck_ns) or self._missing(k):
                self.stats["drdy_missing"] += 1
                continue
            if self._unread:
                self.stats["overwritten"] += 1
            self._code = self._convert(t)
            self._unread = True
            self._drdy_low = True
            self._t_data = t
            self.stats["conversions"] += 1

    def _convert(self, t_ns: int) -> int:
        mux = self.regs[MUX]
        p, n = mux >> 4, mux & 0x0F
        p = 8 if p >= 8 else p
        n = 8 if n >= 8 else n
        for a, b, i in self._drop:
            if a <= t_ns < b and (i == p or i == n):
                return CODE_MAX
        v = self._input(t_ns, (p, n))
        vp, vn = float(v[p]), float(v[n])
        for a, b, i, volts in self._sat:
            if a <= t_ns < b:
                if i == p:
                    vp = volts
                elif i == n:
                    vn = volts
        vd = vp - vn
        if self.noise_v > 0.0:
            vd += self.noise_v * float(self._rng.standard_normal())
        # x = PGA (V_IN + offset error)(1 + gain error) / (2 VREF)   (fraction of full scale)
        x = self.pga * (vd + self.offset_error_v) * (1.0 + self.gain_error) / (2.0 * self.vref)
        # Output = (x - OFC/alpha) FSC beta, beta = 2^23 / FSC_ideal   [datasheet eq. 3]
        code = round((x - self._ofc() / OFC_ALPHA) * self._fsc() * (8388608.0 / FSC_IDEAL))
        return CODE_MAX if code > CODE_MAX else (CODE_MIN if code < CODE_MIN else code)

    def _ofc(self) -> int:
        raw = self.regs[OFC0] | (self.regs[OFC0 + 1] << 8) | (self.regs[OFC0 + 2] << 16)
        return raw - 0x1000000 if raw & 0x800000 else raw

    def _fsc(self) -> int:
        return self.regs[FSC0] | (self.regs[FSC0 + 1] << 8) | (self.regs[FSC0 + 2] << 16)

    def _set24(self, base: int, value: int) -> None:
        value &= 0xFFFFFF
        self.regs[base:base + 3] = [value & 0xFF, (value >> 8) & 0xFF, value >> 16]

    def _x_now(self, t_ns: int, shorted: bool) -> float:
        vd = 0.0
        if not shorted:
            mux = self.regs[MUX]
            p, n = min(mux >> 4, 8), min(mux & 0x0F, 8)
            v = self._input(t_ns, (p, n))
            vd = float(v[p]) - float(v[n])
        return self.pga * (vd + self.offset_error_v) * (1.0 + self.gain_error) / (2.0 * self.vref)

    def _self_cal(self, offset: bool = True, gain: bool = True) -> None:
        if offset:
            self._set24(OFC0, round(OFC_ALPHA * self._x_now(0, shorted=True)))
        if gain:
            self._set24(FSC0, round(FSC_IDEAL / (1.0 + self.gain_error)))

    def drdy_level(self, now: int) -> int:
        self._advance(now)
        return 0 if self._drdy_low else 1

    def next_drdy_fall_ns(self, now: int) -> int | None:
        """Time of the next DRDY falling edge strictly after ``now`` (None: never)."""
        self._advance(now)
        if self._t_next is None:
            return None
        j, k = self._j, self._k
        for _ in range(100_000):
            t = int(self._t_first + j * self._period)
            if self._stuck_ns is not None and t >= self._stuck_ns:
                return None
            if not self._missing(k):
                return t
            j += 1
            k += 1
        return None
