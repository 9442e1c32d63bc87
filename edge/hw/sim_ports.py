"""The simulated ADS1256 behind the hardware ports: a clock, ``spidev`` and ``RPi.GPIO``
look-alikes (:mod:`edge.hw.ports` shapes), so the real driver (:mod:`edge.hw.ads1256`) runs
unchanged; :func:`make_simulated_hardware` builds all three around a
:class:`edge.hw.sim_ads1256.SimulatedADS1256`. Timing model: see that module.
"""

from __future__ import annotations

import math
import time

from edge.hw.ports import Pins
from edge.hw.sim_ads1256 import Faults, SimulatedADS1256

__all__ = ["SimClock", "FakeSpiDev", "FakeGPIO", "make_simulated_hardware"]


class SimClock:
    """Clock for the simulator (satisfies :class:`edge.hw.ports.Clock`).

    Parameters
    ----------
    virtual : bool
        True: time advances only through sleeps/transfers/DRDY waits (instantly).
        False: wall-clock time (``time.monotonic_ns`` since creation), paced with
        ``time.sleep``; simulated time may lead the wall clock by at most ``max_lead_us``.
    max_lead_us : float
        Real-time mode only (see module notes). 0 = strict wall clock.
    """

    def __init__(self, virtual: bool = False, max_lead_us: float = 2000.0):
        self.virtual = bool(virtual)
        self.max_lead_ns = int(max_lead_us * 1e3)
        self._origin = time.monotonic_ns()
        self._t = 0

    def monotonic_ns(self) -> int:
        if not self.virtual:
            real = time.monotonic_ns() - self._origin
            if real > self._t:
                self._t = real
        return self._t

    def sleep_until_ns(self, t_ns: int) -> None:
        """Advance to ``t_ns`` (virtual: at once; real: sleep while too far ahead)."""
        if not self.virtual:
            lead = t_ns - (time.monotonic_ns() - self._origin)
            if lead > self.max_lead_ns:
                time.sleep((lead - self.max_lead_ns // 2) * 1e-9)
        if t_ns > self._t:
            self._t = t_ns

    def sleep_us(self, us: float) -> None:
        if us > 0:
            self.sleep_until_ns(self.monotonic_ns() + math.ceil(us * 1e3))


class FakeSpiDev:
    """``spidev.SpiDev`` look-alike wired to a :class:`SimulatedADS1256`.

    Defaults mirror spidev: ``mode = 0`` (the driver must set 1), ``no_cs = False``.
    When the chip's ``pins.cs`` is None and ``no_cs`` is False the controller's own chip
    select is emulated: low during each transfer, released between transfers.
    """

    def __init__(self, chip: SimulatedADS1256):
        self.chip = chip
        self.mode = 0
        self.max_speed_hz = 125_000_000
        self.no_cs = False
        self.bits_per_word = 8
        self.lsbfirst = False
        self._open = False

    def open(self, bus: int, device: int) -> None:
        self.bus, self.device = int(bus), int(device)
        self._open = True

    def close(self) -> None:
        self._open = False

    def _transfer(self, data) -> list[int]:
        if not self._open:
            raise OSError("FakeSpiDev: transfer on a closed device (call open(bus, dev))")
        chip, clock = self.chip, self.chip.clock
        hw_cs = chip.pins.cs is None and not self.no_cs
        t0 = clock.monotonic_ns()
        if hw_cs:
            chip.set_cs(0, t0)
        out = chip.transfer(data, t0, self.max_speed_hz, self.mode, self.bits_per_word,
                            self.lsbfirst)
        t_end = t0 + math.ceil(len(data) * 8e9 / self.max_speed_hz)
        clock.sleep_until_ns(t_end)
        if hw_cs:
            chip.set_cs(1, t_end)
        return out

    def xfer2(self, data) -> list[int]:
        return self._transfer(data)

    def xfer(self, data) -> list[int]:
        return self._transfer(data)

    def writebytes(self, data) -> None:
        self._transfer(data)

    def readbytes(self, n: int) -> list[int]:
        return self._transfer([0] * int(n))


class FakeGPIO:
    """``RPi.GPIO`` look-alike (BCM numbering) wired to a :class:`SimulatedADS1256`."""

    BCM, BOARD = 11, 10
    OUT, IN = 0, 1
    LOW, HIGH = 0, 1
    RISING, FALLING, BOTH = 31, 32, 33
    PUD_OFF, PUD_DOWN, PUD_UP = 20, 21, 22

    def __init__(self, chip: SimulatedADS1256):
        self.chip = chip
        self._mode = None
        self._dir: dict[int, int] = {}
        self._level: dict[int, int] = {}

    def setwarnings(self, flag: bool) -> None:
        pass

    def setmode(self, mode: int) -> None:
        if mode not in (self.BCM, self.BOARD):
            raise ValueError(f"FakeGPIO.setmode: BCM or BOARD, got {mode!r}")
        self._mode = mode

    def setup(self, pin: int, direction: int, pull_up_down: int = 20, initial=None) -> None:
        if self._mode != self.BCM:
            raise RuntimeError("FakeGPIO.setup: call setmode(GPIO.BCM) first (pins are BCM)")
        self._dir[pin] = direction
        if direction == self.OUT:
            self.output(pin, self.LOW if initial is None else initial)

    def output(self, pin: int, value) -> None:
        if self._dir.get(pin) != self.OUT:
            raise RuntimeError(f"FakeGPIO.output: GPIO{pin} has not been set up as an OUTPUT")
        level = 1 if value else 0
        self._level[pin] = level
        chip, p = self.chip, self.chip.pins
        now = chip.clock.monotonic_ns()
        if pin == p.cs:
            chip.set_cs(level, now)
        elif pin == p.reset:
            chip.set_reset(level, now)
        elif pin == p.pdwn:
            chip.set_pdwn(level, now)

    def input(self, pin: int) -> int:
        if pin not in self._dir:
            raise RuntimeError(f"FakeGPIO.input: GPIO{pin} has not been set up")
        if pin == self.chip.pins.drdy:
            return self.chip.drdy_level(self.chip.clock.monotonic_ns())
        return self._level.get(pin, 0)

    def wait_for_edge(self, pin: int, edge: int, timeout=None, bouncetime=None):
        """Block until DRDY falls (returns ``pin``) or ``timeout`` ms pass (returns None)."""
        chip = self.chip
        if pin != chip.pins.drdy or edge != self.FALLING:
            raise NotImplementedError("FakeGPIO.wait_for_edge: only DRDY falling edges")
        if self._dir.get(pin) != self.IN:
            raise RuntimeError(f"FakeGPIO.wait_for_edge: GPIO{pin} is not set up as an input")
        clock = chip.clock
        now = clock.monotonic_ns()
        t_edge = chip.next_drdy_fall_ns(now)
        if timeout is None:
            if t_edge is None:
                raise RuntimeError("FakeGPIO.wait_for_edge: DRDY never falls and no timeout "
                                   "was given (would block forever)")
            clock.sleep_until_ns(t_edge)
            return pin
        deadline = now + int(float(timeout) * 1e6)
        if t_edge is None or t_edge > deadline:
            clock.sleep_until_ns(deadline)
            return None
        clock.sleep_until_ns(t_edge)
        return pin

    def cleanup(self, *pins) -> None:
        self._dir.clear()


def make_simulated_hardware(source, seed: int = 0, faults: Faults | None = None, *,
                            virtual_clock: bool = False, pins: Pins = Pins(),
                            max_lead_us: float = 2000.0, **chip_kw):
    """A simulated ADS1256 behind fake spidev/GPIO objects.

    Parameters
    ----------
    source : object with ``volts(t_s) -> ndarray (9,)`` (see :mod:`edge.hw.sources`)
    seed : int
    faults : Faults, optional
    virtual_clock : bool
        True: time jumps to the next event (tests, benchmarks). False: real-time pacing.
    pins : Pins
    max_lead_us : float
        Real-time clock only, see :class:`SimClock`.
    **chip_kw
        Passed to :class:`SimulatedADS1256` (``vref, fclkin_hz, noise_v, offset_error_v,
        gain_error, strict, conversion``).

    Returns
    -------
    (spi, gpio, clock) : FakeSpiDev (opened on bus 0 device 0), FakeGPIO, SimClock.
        The chip is ``spi.chip`` (also ``gpio.chip``).
    """
    clock = SimClock(virtual=virtual_clock, max_lead_us=max_lead_us)
    chip = SimulatedADS1256(source, clock, pins=pins, seed=seed, faults=faults, **chip_kw)
    spi = FakeSpiDev(chip)
    spi.open(0, 0)
    return spi, FakeGPIO(chip), clock
