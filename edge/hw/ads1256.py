"""ADS1256 24-bit delta-sigma ADC driver over SPI (TI datasheet SBAS288K).

Protocol facts used here: :mod:`edge.hw.ads1256_spec` (with the datasheet sections).

DRDY is awaited as a GPIO falling edge with a timeout (``wait_for_edge``), never by spinning;
a timeout raises :class:`DrdyTimeout` naming the pin.
"""

from __future__ import annotations

import math

from edge.hw.ads1256_spec import (  # noqa: F401 (re-exported: the driver's public names)
    ADCON, ADS1256Error, CHIP_ID, CMD, CODE_MAX, CODE_MIN, CYCLING_THROUGHPUT_HZ, ChipIdError,
    DRATE, DRATE_CODES, DrdyTimeout, FSC0, INPUTS, IO, MUX, N_REGS, OFC0, PGA_CODES, RDATA,
    RDATAC, REG, RESET, RREG, RegisterVerifyError, SDATAC, SELFCAL, SELFGCAL, SELFOCAL,
    SETTLING_TIME_S, STANDBY, STATUS, SYNC, SYSGCAL, SYSOCAL, WAKEUP, WREG, _RATE_OF_CODE,
    _nearest_rate, code_from_bytes, codes_to_volts, input_index, lsb_volts, mux_byte,
    sign_extend_24,
)
from edge.hw.ads1256_rdatac import ContinuousReads
from edge.hw.ports import Pins

__all__ = [
    "ADS1256", "ADS1256Error", "DrdyTimeout", "ChipIdError", "RegisterVerifyError",
    "CMD", "REG", "DRATE_CODES", "SETTLING_TIME_S", "CYCLING_THROUGHPUT_HZ", "PGA_CODES",
    "INPUTS", "CODE_MAX", "CODE_MIN", "sign_extend_24", "code_from_bytes", "codes_to_volts",
    "lsb_volts", "mux_byte", "input_index",
]

class ADS1256(ContinuousReads):
    """ADS1256 over SPI with GPIO chip select, DRDY, RESET and SYNC/PDWN.

    Parameters
    ----------
    spi : SpiPort
        An opened ``spidev.SpiDev`` (or the simulator's ``FakeSpiDev``).
    gpio : GpioPort
        The ``RPi.GPIO`` module (or ``FakeGPIO``).
    clock : Clock
    pins : Pins
        BCM pins; default the Waveshare High-Precision AD/DA board (CS 22, DRDY 17,
        RESET 18, PDWN 27).
    vref : float
        Reference voltage [V] (2.5 V on the Waveshare board).
    fclkin_hz : float
        Crystal frequency [Hz]; the Waveshare board uses 7.68 MHz.
    speed_hz : int
        SCLK [Hz], at most ``fclkin_hz / 4``.
    drdy_timeout_s : float
        Timeout for a data DRDY [s] (settling time and calibration are added where needed).

    Notes
    -----
    Construction configures the ports (SPI mode 1, speed, ``no_cs``; pins as outputs/input)
    but does not talk to the chip; call :meth:`reset` and :meth:`check_id` next.
    """

    def __init__(self, spi, gpio, clock, pins: Pins = Pins(), *, vref: float = 2.5,
                 fclkin_hz: float = 7.68e6, speed_hz: int = 1_000_000,
                 drdy_timeout_s: float = 0.1):
        if not vref > 0:
            raise ValueError(f"vref: must be > 0 V, got {vref!r}")
        if not fclkin_hz > 0:
            raise ValueError(f"fclkin_hz: must be > 0, got {fclkin_hz!r}")
        if not 0 < speed_hz <= fclkin_hz / 4:
            raise ValueError(f"speed_hz: SCLK must be in (0, f_CLKIN/4 = {fclkin_hz / 4:.0f}] "
                             f"Hz, got {speed_hz!r}")
        if not drdy_timeout_s > 0:
            raise ValueError(f"drdy_timeout_s: must be > 0, got {drdy_timeout_s!r}")
        self.spi, self.gpio, self.clock, self.pins = spi, gpio, clock, pins
        self.vref = float(vref)
        self.fclkin_hz = float(fclkin_hz)
        self.speed_hz = int(speed_hz)
        self.drdy_timeout_s = float(drdy_timeout_s)
        self._slice_ms = max(1, min(int(self.drdy_timeout_s * 1e3), 20))  # edge-wait slice
        tau_ns = 1e9 / self.fclkin_hz
        # t6 = 50 tCLKIN; t11 = 4 tCLKIN (RREG, WREG, RDATA, WAKEUP), 24 tCLKIN (SYNC, RESET,
        # RDATAC); RESET pulse >= 4 tCLKIN (t16).      [Timing Characteristics]
        self.t6_ns = math.ceil(50 * tau_ns)
        self.t11_short_ns = math.ceil(4 * tau_ns)
        self.t11_long_ns = math.ceil(24 * tau_ns)
        self.t_reset_ns = math.ceil(4 * tau_ns)
        self.drate = 30000.0  # reset value (DRATE = F0h)
        self.pga = 1
        self.mux = 0x01
        self.continuous = False
        self._acal = False
        self.stats = {"register_retries": 0, "drdy_missed_edge": 0, "missed_conversions": 0}
        self._cs_held = False
        self._last_cmd_end = 0
        self._last_cmd_gap = 0
        self._setup_ports()

    # ------------------------------------------------------------------ ports
    def _setup_ports(self) -> None:
        spi, g, p = self.spi, self.gpio, self.pins
        spi.mode = 1
        spi.max_speed_hz = self.speed_hz
        if p.cs is not None:
            try:
                spi.no_cs = True
            except (OSError, AttributeError):
                # Some kernels reject SPI_NO_CS; harmless when the ADS1256's CS is a GPIO
                # (the controller's CE line is then not connected to this chip).
                pass
        g.setmode(g.BCM)
        if p.cs is not None:
            g.setup(p.cs, g.OUT, initial=g.HIGH)
        if p.reset is not None:
            g.setup(p.reset, g.OUT, initial=g.HIGH)
        if p.pdwn is not None:
            g.setup(p.pdwn, g.OUT, initial=g.HIGH)
        g.setup(p.drdy, g.IN, pull_up_down=g.PUD_UP)

    def close(self) -> None:
        """Stop continuous mode if active, release CS and the pins, close SPI."""
        try:
            if self.continuous:
                self.stop_continuous()
        finally:
            self._cs(False)
            pins = [p for p in (self.pins.cs, self.pins.reset, self.pins.pdwn, self.pins.drdy)
                    if p is not None]
            try:
                self.gpio.cleanup(pins)
            finally:
                self.spi.close()

    def _cs(self, low: bool) -> None:
        if self.pins.cs is not None:
            self.gpio.output(self.pins.cs, self.gpio.LOW if low else self.gpio.HIGH)
        self._cs_held = low

    # ------------------------------------------------------------------ timing
    def _wait_since(self, t_ref_ns: int, min_ns: int) -> None:
        """Sleep until ``min_ns`` have passed since ``t_ref_ns`` (no sleep if already so)."""
        rem = t_ref_ns + min_ns - self.clock.monotonic_ns()
        if rem > 0:
            self.clock.sleep_us(rem * 1e-3)

    def _command(self, data: list[int], gap_after_ns: int) -> None:
        """Send one command (with its operand bytes), honouring t11 of the previous one."""
        self._wait_since(self._last_cmd_end, self._last_cmd_gap)
        self.spi.xfer2(data)
        self._last_cmd_end = self.clock.monotonic_ns()
        self._last_cmd_gap = gap_after_ns

    def _read_after_command(self, n: int) -> list[int]:
        """Read ``n`` bytes t6 after the command just sent (CS still low)."""
        self._wait_since(self._last_cmd_end, self.t6_ns)
        out = self.spi.readbytes(n)
        self._last_cmd_end = self.clock.monotonic_ns()
        self._last_cmd_gap = self.t11_short_ns
        return out

    def wait_drdy(self, timeout_s: float | None = None, what: str = "data",
                  checked: bool = False) -> int:
        """Wait until DRDY is low; return the clock time [ns] it was seen low.

        If DRDY is already low (unread data), returns at once (``checked``: the caller has
        just seen it high). Otherwise waits for a falling edge with ``wait_for_edge`` in
        slices, re-checking the level between slices (an edge that fell between the level
        check and arming the edge detector is not lost). The data wait (``timeout_s`` None)
        arms the first slice at once and works out its deadline only if that slice ends
        without an edge: per sample, one edge wait and one clock read.
        """
        g, pin, clock = self.gpio, self.pins.drdy, self.clock
        if not checked and g.input(pin) == 0:
            return clock.monotonic_ns()
        if timeout_s is None:
            if g.wait_for_edge(pin, g.FALLING, timeout=self._slice_ms) is not None:
                return clock.monotonic_ns()
            return self._drdy_after_slice(what)
        timeout = timeout_s
        t0 = clock.monotonic_ns()
        return self._drdy_slices(t0 + int(timeout * 1e9), max(1, min(int(timeout * 1e3), 20)),
                                 timeout, what)

    def _drdy_after_slice(self, what: str = "data") -> int:
        """The data wait after its first edge-wait slice ended without an edge."""
        g, pin, clock = self.gpio, self.pins.drdy, self.clock
        if g.input(pin) == 0:
            self.stats["drdy_missed_edge"] += 1
            return clock.monotonic_ns()
        t0 = clock.monotonic_ns() - self._slice_ms * 1_000_000  # the first slice has passed
        return self._drdy_slices(t0 + int(self.drdy_timeout_s * 1e9), self._slice_ms,
                                 self.drdy_timeout_s, what)

    def _drdy_slices(self, deadline: int, slice_ms: int, timeout: float, what: str) -> int:
        g, pin, clock = self.gpio, self.pins.drdy, self.clock
        while True:
            left_ms = (deadline - clock.monotonic_ns()) * 1e-6
            if left_ms <= 0:
                raise DrdyTimeout(pin, timeout, what)
            r = g.wait_for_edge(pin, g.FALLING, timeout=max(1, min(slice_ms, math.ceil(left_ms))))
            if r is not None:
                return clock.monotonic_ns()
            if g.input(pin) == 0:
                self.stats["drdy_missed_edge"] += 1
                return clock.monotonic_ns()

    # ------------------------------------------------------------------ control
    def reset(self, hard: bool | None = None) -> None:
        """Reset to power-up values; waits for the post-reset self-calibration (DRDY low).

        ``hard=None``: pulse the RESET pin when wired, else send the RESET command.
        """
        if self.continuous:
            self.stop_continuous()
        if self.pins.pdwn is not None:
            self.gpio.output(self.pins.pdwn, self.gpio.HIGH)
        use_pin = self.pins.reset is not None if hard is None else hard
        if use_pin:
            if self.pins.reset is None:
                raise ValueError("reset(hard=True): Pins.reset is not wired")
            self.gpio.output(self.pins.reset, self.gpio.LOW)
            self.clock.sleep_us(max(self.t_reset_ns * 1e-3, 1.0))
            self.gpio.output(self.pins.reset, self.gpio.HIGH)
        else:
            self._cs(True)
            try:
                self._command([RESET], self.t11_long_ns)
            finally:
                self._cs(False)
        self.drate, self.pga, self.mux = 30000.0, 1, 0x01
        self._acal = False
        self.wait_drdy(self.calibration_timeout_s(30000.0), "reset/self-calibration")

    def calibration_timeout_s(self, rate: float | None = None) -> float:
        """Generous bound for calibration + settling at ``rate`` [s]."""
        r = self.drate if rate is None else rate
        return 4.0 * SETTLING_TIME_S[_nearest_rate(r)] + self.drdy_timeout_s + 0.05

    def read_registers(self, start: int, n: int = 1) -> list[int]:
        """RREG: ``n`` registers from ``start`` (CS held across command and read; t6)."""
        if not (0 <= start < N_REGS and 1 <= n <= N_REGS):
            raise ValueError(f"read_registers: start 0..10 and n 1..11, got {start}, {n}")
        self._cs(True)
        try:
            self._command([RREG | start, n - 1], self.t11_short_ns)
            return list(self._read_after_command(n))
        finally:
            self._cs(False)

    def write_registers(self, start: int, values, verify: bool = True, retries: int = 2,
                        mask: list[int] | None = None) -> None:
        """WREG ``values`` from ``start``; with ``verify`` read back and retry on mismatch.

        ``mask`` (per register) selects the bits compared (read-only bits excluded); by
        default STATUS compares bits 3:1 and ADCON bits 6:0.
        """
        vals = [int(v) & 0xFF for v in values]
        if not (0 <= start < N_REGS and 1 <= len(vals) <= N_REGS - start):
            raise ValueError(f"write_registers: start {start} with {len(vals)} values")
        if mask is None:
            mask = [{STATUS: 0x0E, ADCON: 0x7F}.get(start + i, 0xFF) for i in range(len(vals))]
        for attempt in range(retries + 1):
            self._cs(True)
            try:
                self._command([WREG | start, len(vals) - 1, *vals], self.t11_short_ns)
            finally:
                self._cs(False)
            if start <= STATUS < start + len(vals):
                self._acal = bool(vals[STATUS - start] & 0x04)
            if self._acal and start <= DRATE and start + len(vals) > STATUS:
                # ACAL: a PGA/DRATE/BUFEN change starts a self-calibration; no command may
                # be sent before DRDY falls again (SELFCAL description)
                try:
                    rate = self.drate
                    if start <= DRATE < start + len(vals):
                        rate = _RATE_OF_CODE.get(vals[DRATE - start], 2.5)
                    self.wait_drdy(self.calibration_timeout_s(rate), "auto-calibration")
                except DrdyTimeout:
                    pass  # conversions stopped (SYNC/STANDBY): no calibration ran
            if not verify:
                return
            got = self.read_registers(start, len(vals))
            if all((g & m) == (v & m) for g, v, m in zip(got, vals, mask)):
                return
            self.stats["register_retries"] += 1
        raise RegisterVerifyError(
            f"ADS1256: register {start:#04x}..{start + len(vals) - 1:#04x} wrote "
            f"{[hex(v) for v in vals]} but read back {[hex(g) for g in got]} "
            f"after {retries + 1} attempts (SPI wiring/noise?)")

    def chip_id(self) -> int:
        """STATUS bits 7:4 (3 for an ADS1256)."""
        return self.read_registers(STATUS, 1)[0] >> 4

    def check_id(self) -> None:
        """Raise :class:`ChipIdError` unless the chip answers with ID 3."""
        cid = self.chip_id()
        if cid != CHIP_ID:
            raise ChipIdError(f"ADS1256: STATUS ID bits read {cid} (expected {CHIP_ID}); check "
                              f"wiring, power, SPI mode 1 and CS pin GPIO{self.pins.cs}")

    def configure(self, mux: int = 0x08, pga: int = 1, rate: float = 1000.0,
                  buffer: bool = True, auto_cal: bool = False, clock_out: bool = False) -> None:
        """Write STATUS, MUX, ADCON, DRATE in one WREG and verify them.

        Parameters
        ----------
        mux : int        MUX register (see :func:`mux_byte`).
        pga : int        1, 2, 4, ..., 64.
        rate : float     data rate [SPS], one of :data:`DRATE_CODES`.
        buffer : bool    input buffer (BUFEN).
        auto_cal : bool  ACAL: self-calibrate on PGA/DRATE/BUFEN changes.
        clock_out : bool keep D0/CLKOUT = f_CLKIN (off by default, as the datasheet advises).
        """
        if pga not in PGA_CODES:
            raise ValueError(f"pga: one of {sorted(PGA_CODES)}, got {pga!r}")
        r = _nearest_rate(rate)
        if not 0 <= int(mux) <= 0xFF:
            raise ValueError(f"mux: register byte expected, got {mux!r}")
        status = (0x04 if auto_cal else 0) | (0x02 if buffer else 0)   # ORDER = 0 (MSB first)
        adcon = (0x20 if clock_out else 0) | PGA_CODES[pga]
        self.write_registers(STATUS, [status, int(mux), adcon, DRATE_CODES[r]])
        self.drate, self.pga, self.mux = r, pga, int(mux)

    def self_calibrate(self, kind: int = SELFCAL) -> None:
        """SELFCAL (or SELFOCAL/SELFGCAL/SYSOCAL/SYSGCAL); waits until DRDY falls."""
        if kind not in (SELFCAL, SELFOCAL, SELFGCAL, SYSOCAL, SYSGCAL):
            raise ValueError(f"self_calibrate: not a calibration command {kind:#x}")
        self._cs(True)
        try:
            self._command([kind], self.t11_short_ns)
        finally:
            self._cs(False)
        self.wait_drdy(self.calibration_timeout_s(), "calibration")

    def sync_wakeup(self) -> None:
        """SYNC then WAKEUP (t11 = 24 tCLKIN between them): restart the digital filter."""
        self._cs(True)
        try:
            self._command([SYNC], self.t11_long_ns)
            self._command([WAKEUP], self.t11_short_ns)
        finally:
            self._cs(False)

    def standby(self) -> None:
        """STANDBY (leave with :meth:`sync_wakeup` or WAKEUP)."""
        self._cs(True)
        try:
            self._command([STANDBY], self.t11_short_ns)
        finally:
            self._cs(False)

    def read_data(self) -> int:
        """Wait for DRDY, RDATA, return the signed code (single-shot read, not RDATAC)."""
        self.wait_drdy()
        return self.rdata()

    def rdata(self) -> int:
        """RDATA now (caller made sure a conversion is ready): signed code."""
        self._cs(True)
        try:
            self._command([RDATA], self.t11_short_ns)
            b = self._read_after_command(3)
        finally:
            self._cs(False)
        return code_from_bytes(b)

    # ------------------------------------------------------------------ cycling
    def cycle_step(self, next_mux: int, next_adcon: int | None = None,
                   timeout_s: float | None = None) -> tuple[int, int]:
        """One step of the datasheet's multiplexer cycling procedure.

        Waits for DRDY (conversion of the current MUX done), writes ``next_mux`` (and ADCON
        when ``next_adcon`` is given: per-channel PGA), SYNC, WAKEUP, then RDATA of the
        conversion that made DRDY fall.

        Returns
        -------
        (code, t_ns) : the previous channel's signed code and its DRDY time [ns].
        """
        t = self.wait_drdy(timeout_s)
        self._cs(True)
        try:
            if next_adcon is None:
                self._command([WREG | MUX, 0, next_mux], self.t11_short_ns)
            else:
                self._command([WREG | MUX, 1, next_mux, next_adcon], self.t11_short_ns)
            self._command([SYNC], self.t11_long_ns)
            self._command([WAKEUP], self.t11_short_ns)
            self._command([RDATA], self.t11_short_ns)
            b = self._read_after_command(3)
        finally:
            self._cs(False)
        self.mux = next_mux
        return code_from_bytes(b), t

    def start_cycling(self, first_mux: int, first_adcon: int | None = None) -> None:
        """Point the MUX at the first channel and restart conversion.

        One full cycling step whose data (a conversion of the previous MUX setting) is
        discarded, so the first :meth:`cycle_step` returns the first channel.
        """
        self.cycle_step(first_mux, first_adcon, timeout_s=self.calibration_timeout_s())

    # ------------------------------------------------------------------ helpers
    def volts(self, code, pga: int | None = None):
        """Code(s) -> volts at this chip's VREF and the given (default: current) PGA."""
        return codes_to_volts(code, self.vref, self.pga if pga is None else pga)
