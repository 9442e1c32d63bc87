"""A simulated ADS1256 that speaks the SPI protocol byte by byte.

:class:`SimulatedADS1256` models the chip: command decoder, the eleven registers with their
reset values, conversions at the configured data rate with the datasheet's settling time after
SYNC/WAKEUP/reset (Table 13; :mod:`edge.hw.sim_converter`), DRDY, RDATAC mode, calibration
registers, and the timing rules a driver must respect. :mod:`edge.hw.sim_ports` puts it
behind the same ``spidev``/``RPi.GPIO`` shapes as the hardware (:mod:`edge.hw.ports`), so the
real driver (:mod:`edge.hw.ads1256`) runs unchanged (``make_simulated_hardware``).

Protocol violations are **rejected**: every one increments ``chip.violations[kind]`` and, with
``strict=True`` (default), raises :class:`ProtocolViolation` at the offending SPI/GPIO call.
Kinds:

``t6``                 data shifted out less than 50 tCLKIN after RDATA/RDATAC/RREG
``t11``                a command less than 4 (24 after SYNC/RESET/RDATAC) tCLKIN after the
                       previous one
``cs_high``            SCLK while CS is high (bytes ignored, DOUT reads FFh)
``cs_released``        CS raised between a command and its operands/data (command aborted)
``sclk``               SCLK faster than f_CLKIN/4
``spi_mode``           SPI mode other than 1 (data garbled by one bit), or 8-bit/MSB-first not set
``read_not_ready``     conversion data read with no unread conversion (DRDY high)
``read_during_update`` a data read still running when the next conversion completed (virtual
                       clock only; in real time it is counted in ``stats`` as an overrun,
                       since a descheduled but correct driver can cause it)
``busy``               a command while a calibration is running (before DRDY falls)
``unknown_command``, ``bad_register``, ``invalid_drate``

Timing model. Bytes of one transfer are back to back at SCLK = ``max_speed_hz``; the clock
is advanced to the end of the transfer. With the virtual clock (``SimClock(virtual=True)``)
time moves only through transfers and sleeps, so a run is deterministic and faster than real
time; ``wait_for_edge`` jumps to the next DRDY. The real-time clock follows
``time.monotonic_ns``; waits ``time.sleep`` (never spin) and the simulated time may run at
most ``max_lead_us`` ahead of the wall clock, so that short waits (t6, transfers, DRDY at
20 kSPS) do not each cost the operating system's ~60 µs sleep granularity while the long-run
pace stays the wall clock's.

Conversions (documented in docs/hardware.md): the datasheet's sinc5 + averager over the
window ending when DRDY falls (:mod:`edge.hw.sim_converter`). Simplifications: faults
(saturation, dropouts) apply at the DRDY instant; writing MUX/ADCON/DRATE/BUFEN restarts the
filter like SYNC/WAKEUP (settled data after t18); calibration takes 3 t18 (SELFCAL) or 2 t18
(the others); the calibration equation (datasheet eq. 3) uses α = 400000h and the ideal
FSC = 44AC08h at every rate with β chosen so that an ideal chip is exact.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from edge.hw.ads1256 import (
    ADCON, DRATE, FSC0, IO, MUX, N_REGS, OFC0, RDATA, RDATAC, RESET, RREG, SDATAC,
    SELFCAL, SELFGCAL, SELFOCAL, STANDBY, STATUS, SYNC, SYSGCAL, SYSOCAL, WAKEUP, WREG,
    input_index,
)
from edge.hw.ports import Pins
from edge.hw.sim_converter import (_RATE_OF_CODE, FSC_IDEAL, OFC_ALPHA,  # noqa: F401
                                   RESET_VALUES, ConverterModel)

__all__ = ["ProtocolViolation", "Faults", "SimulatedADS1256", "RESET_VALUES", "FSC_IDEAL",
           "OFC_ALPHA"]


class ProtocolViolation(RuntimeError):
    """The driver broke an ADS1256 protocol rule; ``kind`` names the rule."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(f"ADS1256 protocol violation [{kind}]: {message}")


@dataclass(frozen=True)
class Faults:
    """Injected faults.

    Attributes
    ----------
    stuck_drdy_after_s : float or None
        From this simulated time on DRDY never falls again (no conversions become ready).
    missing_drdy_prob : float
        Probability that a conversion is lost: its DRDY pulse never comes.
    bit_error_prob : float
        Probability that a MISO (DOUT) bit is flipped, independently per bit.
    saturation : tuple of (t0_s, t1_s, input, volts)
        Over ``[t0, t1)`` the input (name or index) is driven to ``volts`` (beyond
        ±2 VREF/PGA the codes clip at the rails).
    dropouts : tuple of (t0_s, t1_s, input)
        Over ``[t0, t1)`` the input is disconnected: conversions that use it read the
        positive rail (7FFFFFh), as a floating buffered input does.
    """

    stuck_drdy_after_s: float | None = None
    missing_drdy_prob: float = 0.0
    bit_error_prob: float = 0.0
    saturation: tuple = ()
    dropouts: tuple = ()

    def __post_init__(self):
        for name in ("missing_drdy_prob", "bit_error_prob"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"Faults.{name}: probability in [0, 1], got {p!r}")


class SimulatedADS1256(ConverterModel):
    """The chip. Driven through :class:`FakeSpiDev` / :class:`FakeGPIO`.

    Parameters
    ----------
    source : object with ``volts(t_s) -> ndarray (9,)``
        See :mod:`edge.hw.sources`.
    clock : SimClock
    pins : Pins
        Which GPIOs are CS, DRDY, RESET, SYNC/PDWN.
    fclkin_hz, vref : float
    seed : int
        Seeds noise, bit errors and missing-DRDY draws.
    faults : Faults
    noise_v : float
        Input-referred white noise, standard deviation [V].
    offset_error_v, gain_error : float
        Chip imperfections removed by self-calibration (0 = ideal chip).
    strict : bool
        Raise :class:`ProtocolViolation` on a violation (always counted in ``violations``).
    conversion : "chip" | "ideal"
        The chip's filter over each window (default), or the point value at DRDY.
    """

    def __init__(self, source, clock, *, pins: Pins = Pins(),
                 fclkin_hz: float = 7.68e6, vref: float = 2.5, seed: int = 0,
                 faults: Faults | None = None, noise_v: float = 0.0,
                 offset_error_v: float = 0.0, gain_error: float = 0.0, strict: bool = True,
                 conversion: str = "chip"):
        if not hasattr(source, "volts"):
            raise TypeError("source: an object with volts(t_s) -> ndarray (9,) expected")
        self.source, self.clock, self.pins = source, clock, pins
        self.fclkin_hz, self.vref = float(fclkin_hz), float(vref)
        self.seed = int(seed)
        self._rng = np.random.default_rng(seed)
        self.noise_v = float(noise_v)
        self.offset_error_v, self.gain_error = float(offset_error_v), float(gain_error)
        self.strict = bool(strict)
        self._set_conversion(conversion)
        self.violations: Counter = Counter()
        self.stats: Counter = Counter()
        self.log: list[str] = []
        tau = 1e9 / self.fclkin_hz
        self.t6_ns = 50 * tau
        self.t11_short_ns = 4 * tau
        self.t11_long_ns = 24 * tau
        self.max_sclk_hz = self.fclkin_hz / 4
        self.set_faults(faults)
        self.cs_low = False
        self.in_reset = False
        self.pdwn_low = False
        self._power_on(clock.monotonic_ns())

    def set_faults(self, faults: Faults | None) -> None:
        """Replace the injected faults (e.g. to start them after configuration)."""
        self.faults = f = Faults() if faults is None else faults
        if not isinstance(f, Faults):
            raise TypeError("faults: a Faults instance expected")
        self._sat = tuple((int(a * 1e9), int(b * 1e9), _inp(i), float(v))
                          for a, b, i, v in f.saturation)
        self._drop = tuple((int(a * 1e9), int(b * 1e9), _inp(i)) for a, b, i in f.dropouts)
        self._stuck_ns = (None if f.stuck_drdy_after_s is None
                          else int(f.stuck_drdy_after_s * 1e9))
        self._p_missing = float(f.missing_drdy_prob)
        self._p_bit = float(f.bit_error_prob)

    # ------------------------------------------------------------------ state
    def _power_on(self, t: int) -> None:
        self.regs = list(RESET_VALUES)
        self.continuous = False
        self._state = "idle"
        self._pos = 0
        self._n = 0
        self._addr = 0
        self._cmd_end = -1e18
        self._next_cmd_ok = -1e18
        self._data_not_before = -1e18
        self._code = 0
        self._unread = False
        self._drdy_low = False
        self._t_data = -1
        self._latched = (0, 0, 0)
        self._read_t0 = 0
        self._read_t_data = -1
        self._busy_until = -1
        self._k = 0  # conversion counter (for missing-DRDY draws)
        self._self_cal()  # "After a reset, the ADS1255/6 performs self-calibration."
        self._restart(t, 3 * self._settle_ns())

    # ------------------------------------------------------------------ violations
    def _violate(self, kind: str, message: str) -> None:
        self.violations[kind] += 1
        if len(self.log) < 1000:
            self.log.append(f"{kind}: {message}")
        if self.strict:
            self._state, self._pos = "idle", 0  # the command is aborted
            raise ProtocolViolation(kind, message)

    # ------------------------------------------------------------------ pins
    def set_cs(self, level: int, now: int) -> None:
        low = not level
        if low == self.cs_low:
            return
        if not low:
            st = self._state
            if st in ("rreg_n", "wreg_n", "wreg") or (st in ("rdata", "rreg") and self._pos == 0):
                self._violate("cs_released", f"CS raised in the middle of a command (state "
                              f"{st}); the serial interface resets and the command is lost")
            if st != "idle":
                self._state = "idle"
                self._cmd_end = now
                self._next_cmd_ok = now + self.t11_short_ns
        self.cs_low = low

    def set_reset(self, level: int, now: int) -> None:
        if not level:
            self.in_reset = True
            self._stop()
            self._unread = self._drdy_low = False
        elif self.in_reset:
            self.in_reset = False
            self._power_on(now)
            self._busy_until = self._t_next

    def set_pdwn(self, level: int, now: int) -> None:
        if not level:
            self.pdwn_low = True
            self._stop()
            self._drdy_low = False  # "As soon as SYNC/PDWN goes low, DRDY goes high"
        elif self.pdwn_low:
            self.pdwn_low = False
            self._restart(now, self._settle_ns())

    # ------------------------------------------------------------------ SPI
    def transfer(self, mosi, t0: int, sclk_hz: float, mode: int, bits_per_word: int = 8,
                 lsbfirst: bool = False) -> list[int]:
        """Shift ``mosi`` bytes starting at ``t0`` [ns]; return the DOUT bytes."""
        self._advance(t0)
        n = len(mosi)
        byte_ns = 8e9 / sclk_hz
        if sclk_hz > self.max_sclk_hz * (1 + 1e-9):
            self._violate("sclk", f"SCLK {sclk_hz:.0f} Hz > f_CLKIN/4 = {self.max_sclk_hz:.0f} Hz")
        garble = False
        if mode != 1 or bits_per_word != 8 or lsbfirst:
            self._violate("spi_mode", f"SPI mode {mode}, {bits_per_word} bits/word, "
                          f"lsbfirst={lsbfirst}; the ADS1256 needs mode 1, 8 bits, MSB first")
            garble = True
        if not self.cs_low:
            self._violate("cs_high", f"{n} byte(s) clocked with CS high (ignored)")
            return [0xFF] * n
        if self.in_reset:
            return [0xFF] * n
        out = [0] * n
        for i in range(n):
            tb = t0 + i * byte_ns
            out[i] = self._byte(int(mosi[i]) & 0xFF, tb, tb + byte_ns)
        if garble:
            out = [((b << 1) | (b >> 7)) & 0xFF for b in out]
        if self._p_bit > 0.0:
            flips = self._rng.random((n, 8)) < self._p_bit
            if flips.any():
                for i, j in np.argwhere(flips):
                    out[i] ^= 1 << int(j)
                self.stats["bit_flips"] += int(flips.sum())
        return out

    def _data_byte(self, tb: float, te: float, not_before: float) -> int:
        """One byte of conversion data (RDATA data phase or RDATAC)."""
        if self._pos == 0:
            if tb < not_before:
                self._violate("t6", f"data clocked {(tb - self._cmd_end) * 1e-3:.2f} µs after "
                              f"the command; t6 = {self.t6_ns * 1e-3:.2f} µs")
            if not self._unread:
                self._violate("read_not_ready", "conversion data read while DRDY is high "
                              "(no new conversion since the last read)")
            raw = self._code & 0xFFFFFF
            if self.regs[STATUS] & 0x08:  # ORDER = 1: LSB first
                raw = int(f"{raw:024b}"[::-1], 2)
            self._latched = (raw >> 16, (raw >> 8) & 0xFF, raw & 0xFF)
            self._read_t0 = tb
            self._read_t_data = self._t_data
        b = self._latched[self._pos]
        self._pos += 1
        if self._pos == 3:
            self._pos = 0
            if self._t_next is not None and self._t_next <= te:
                # With the virtual clock the timing is the driver's own doing: a violation.
                # In real time the OS may deschedule a correct driver: counted as an overrun.
                self.stats["read_during_update"] += 1
                if self.clock.virtual:
                    self._violate("read_during_update", "a conversion completed while its "
                                  "predecessor was being shifted out")
            if self._t_data == self._read_t_data:
                self._unread = self._drdy_low = False
            self.stats["reads"] += 1
            return b | 0x100  # marker: read complete
        return b

    def _byte(self, b: int, tb: float, te: float) -> int:
        st = self._state
        if st == "rdata":
            out = self._data_byte(tb, te, self._data_not_before)
            if out & 0x100:
                self._state = "idle"
                self._cmd_end = te
                self._next_cmd_ok = te + self.t11_short_ns
            return out & 0xFF
        if st == "rreg_n":
            self._n = (b & 0x0F) + 1
            self._state, self._pos = "rreg", 0
            self._cmd_end = te
            self._data_not_before = te + self.t6_ns
            return 0
        if st == "rreg":
            if self._pos == 0 and tb < self._data_not_before:
                self._violate("t6", f"register data clocked {(tb - self._cmd_end) * 1e-3:.2f}"
                              f" µs after RREG; t6 = {self.t6_ns * 1e-3:.2f} µs")
            addr = (self._addr + self._pos) % N_REGS
            v = self.regs[addr]
            if addr == STATUS:
                v = (v & 0xFE) | (0 if self._drdy_low else 1)
            self._pos += 1
            if self._pos == self._n:
                self._state, self._pos = "idle", 0
                self._cmd_end = te
                self._next_cmd_ok = te + self.t11_short_ns
            return v
        if st == "wreg_n":
            self._n = (b & 0x0F) + 1
            self._state, self._pos = "wreg", 0
            return 0
        if st == "wreg":
            self._write_reg((self._addr + self._pos) % N_REGS, b, te)
            self._pos += 1
            if self._pos == self._n:
                self._state, self._pos = "idle", 0
                self._cmd_end = te
                self._next_cmd_ok = te + self.t11_short_ns
            return 0
        if self.continuous:
            if b == SDATAC and self._pos == 0:
                self.continuous = False
                self._cmd_end = te
                self._next_cmd_ok = te + self.t11_short_ns
                return 0
            if b == RESET:
                self._power_on(te)
                self._busy_until = self._t_next
                return 0
            out = self._data_byte(tb, te, self._data_not_before)
            return out & 0xFF
        return self._command(b, tb, te)

    def _command(self, b: int, tb: float, te: float) -> int:
        if tb < self._next_cmd_ok:
            self._violate("t11", f"command {b:#04x} {(tb - self._cmd_end) * 1e-3:.3f} µs after "
                          f"the previous one (t11 not respected)")
        if tb < self._busy_until:
            self._violate("busy", f"command {b:#04x} during calibration (wait for DRDY)")
        self._cmd_end = te
        self._next_cmd_ok = te + self.t11_short_ns
        hi = b & 0xF0
        if b in (WAKEUP, 0xFF):
            if self._t_next is None and not self.pdwn_low and not self.in_reset:
                self._restart(te, self._settle_ns())
        elif b == RDATA:
            self._state, self._pos = "rdata", 0
            self._data_not_before = te + self.t6_ns
        elif b == RDATAC:
            self.continuous = True
            self._pos = 0
            self._data_not_before = te + self.t6_ns
            self._next_cmd_ok = te + self.t11_long_ns
        elif b == SDATAC:
            pass
        elif hi == RREG or hi == WREG:
            addr = b & 0x0F
            if addr >= N_REGS:
                self._violate("bad_register", f"register address {addr:#x} > 0x0A")
                addr %= N_REGS
            self._addr = addr
            self._state = "rreg_n" if hi == RREG else "wreg_n"
        elif b in (SELFCAL, SELFOCAL, SELFGCAL, SYSOCAL, SYSGCAL):
            self._calibrate(b, te)
        elif b == SYNC:
            self._stop()
            self._next_cmd_ok = te + self.t11_long_ns
        elif b == STANDBY:
            self._stop()
        elif b == RESET:
            self._power_on(te)
            self._busy_until = self._t_next
            self._next_cmd_ok = te + self.t11_long_ns
        else:
            self._violate("unknown_command", f"byte {b:#04x} is not an ADS1256 command")
        return 0

    def _calibrate(self, cmd: int, te: float) -> None:
        t = int(te)
        if cmd == SELFCAL:
            self._self_cal()
        elif cmd == SELFOCAL:
            self._self_cal(offset=True, gain=False)
        elif cmd == SELFGCAL:
            self._self_cal(offset=False, gain=True)
        elif cmd == SYSOCAL:  # system offset: the inputs carry the system's zero
            self._set24(OFC0, round(OFC_ALPHA * self._x_now(t, shorted=False)))
        elif cmd == SYSGCAL:  # system gain: the inputs carry the system's full scale
            span = self._x_now(t, shorted=False) - self._ofc() / OFC_ALPHA
            if span > 1e-6:
                self._set24(FSC0, min(round(FSC_IDEAL / span), 0xFFFFFF))
        self._unread = self._drdy_low = False  # "DRDY goes high at the beginning of the calibration"
        self._restart(te, (3 if cmd == SELFCAL else 2) * self._settle_ns(), busy=True)

    def _write_reg(self, addr: int, v: int, te: float) -> None:
        old = self.regs[addr]
        if addr == STATUS:
            v = (old & 0xF1) | (v & 0x0E)  # ID and DRDY bits are read-only
        elif addr == ADCON:
            v &= 0x7F  # bit 7 reserved, reads 0
        elif addr == DRATE and v not in _RATE_OF_CODE:
            self._violate("invalid_drate", f"DRATE {v:#04x} is not one of the 16 valid codes")
            return
        self.regs[addr] = v
        if v == old or self._t_next is None:
            return
        if addr in (MUX, ADCON, DRATE, STATUS):
            acal = self.regs[STATUS] & 0x04
            cal_trigger = (addr == DRATE or (addr == ADCON and (old ^ v) & 0x07)
                           or (addr == STATUS and (old ^ v) & 0x02))
            if acal and cal_trigger:
                self._self_cal()
                self._unread = False
                self._restart(te, 3 * self._settle_ns(), busy=True)
            elif addr != STATUS or (old ^ v) & 0x02:
                self._restart(te, self._settle_ns())
        elif addr == IO:
            pass


def _inp(i) -> int:
    return input_index(i)
