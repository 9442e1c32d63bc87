"""Ports: the small interfaces the ADS1256 driver talks to (SPI, GPIO, clock).

The driver (:mod:`edge.hw.ads1256`) only uses the subset of ``spidev.SpiDev`` and ``RPi.GPIO``
described by :class:`SpiPort` and :class:`GpioPort`, plus a :class:`Clock`. Real hardware is
opened with :func:`open_hardware`; the byte-level simulator
(:func:`edge.hw.sim_ports.make_simulated_hardware`) returns objects with the same shape, so
the driver runs unchanged on both.

``spidev`` and ``RPi.GPIO`` (``rpi-lgpio`` on a Raspberry Pi 5, same API) are imported only
inside :func:`open_hardware`; when missing, :class:`MissingHardwareDependency` names the pip
extra (``pip install 'vsense[pi]'``, or ``'vsense[pi5]'`` on a Pi 5).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "Pins",
    "SpiPort",
    "GpioPort",
    "Clock",
    "RealClock",
    "MissingHardwareDependency",
    "open_hardware",
]


@dataclass(frozen=True)
class Pins:
    """GPIO pins (BCM numbering) wired to the ADS1256.

    Defaults: Waveshare High-Precision AD/DA board. ``None`` = not wired: ``cs=None`` lets the
    SPI controller drive its own chip select (which is released between transfers and so
    breaks RDATA/RREG; only for boards wired that way), ``reset=None`` resets by command,
    ``pdwn=None`` means SYNC/PDWN is tied high.
    """

    cs: int | None = 22
    drdy: int = 17
    reset: int | None = 18
    pdwn: int | None = 27

    def __post_init__(self):
        for name in ("cs", "drdy", "reset", "pdwn"):
            v = getattr(self, name)
            if v is None and name != "drdy":
                continue
            if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= 27:
                raise ValueError(f"Pins.{name}: BCM GPIO number 0..27 expected, got {v!r}")
        used = [p for p in (self.cs, self.drdy, self.reset, self.pdwn) if p is not None]
        if len(set(used)) != len(used):
            raise ValueError(f"Pins: a GPIO is used twice: {self}")

    @classmethod
    def from_config(cls, cs: int = 22, drdy: int = 17, reset: int = 18, pdwn: int = 27):
        """Pins from config integers where ``-1`` means "not wired"."""
        f = (lambda p: None if p is None or p < 0 else int(p))
        return cls(cs=f(cs), drdy=int(drdy), reset=f(reset), pdwn=f(pdwn))


@runtime_checkable
class SpiPort(Protocol):
    """The subset of ``spidev.SpiDev`` used by the driver.

    Attributes ``mode`` (0..3; the ADS1256 needs 1: CPOL=0, CPHA=1), ``max_speed_hz`` and
    ``no_cs`` (True: the controller does not drive its chip select).
    """

    mode: int
    max_speed_hz: int
    no_cs: bool

    def open(self, bus: int, device: int) -> None: ...

    def xfer2(self, data: list[int]) -> list[int]: ...

    def writebytes(self, data: list[int]) -> None: ...

    def readbytes(self, n: int) -> list[int]: ...

    def close(self) -> None: ...


@runtime_checkable
class GpioPort(Protocol):
    """The subset of ``RPi.GPIO`` used by the driver (the module itself satisfies it).

    Constants ``BCM, IN, OUT, HIGH, LOW, FALLING, PUD_UP``;
    ``wait_for_edge(pin, FALLING, timeout=ms)`` returns the pin on an edge, ``None`` on timeout.
    """

    BCM: int
    IN: int
    OUT: int
    HIGH: int
    LOW: int
    FALLING: int
    PUD_UP: int

    def setmode(self, mode: int) -> None: ...

    def setup(self, pin: int, direction: int, **kw) -> None: ...

    def output(self, pin: int, value: int) -> None: ...

    def input(self, pin: int) -> int: ...

    def wait_for_edge(self, pin: int, edge: int, timeout: int | None = None): ...

    def cleanup(self, *pins) -> None: ...


@runtime_checkable
class Clock(Protocol):
    """Monotonic time in integer nanoseconds and a sleep that does not spin the CPU."""

    def monotonic_ns(self) -> int: ...

    def sleep_us(self, us: float) -> None: ...


class RealClock:
    """The wall clock: ``time.monotonic_ns`` and ``time.sleep`` (never a busy loop).

    ``time.sleep`` sleeps *at least* the requested time (Linux adds its timer slack, about
    50-70 µs), which is what the ADS1256 timing minima (t6, t11) need.
    """

    __slots__ = ()

    def monotonic_ns(self) -> int:
        return time.monotonic_ns()

    def sleep_us(self, us: float) -> None:
        if us > 0:
            time.sleep(us * 1e-6)


class MissingHardwareDependency(ImportError):
    """spidev / RPi.GPIO (rpi-lgpio) are not installed."""


_PI_HINT = ("pip install 'vsense[pi]' (Raspberry Pi 1-4) or pip install 'vsense[pi5]' "
            "(Raspberry Pi 5: rpi-lgpio provides RPi.GPIO)")


def open_hardware(pins: Pins = Pins(), spi_bus: int = 0, spi_dev: int = 0,
                  speed_hz: int = 1_000_000):
    """Open the real SPI device and GPIO for the ADS1256.

    Parameters
    ----------
    pins : Pins
        BCM pin numbers (Waveshare AD/DA defaults).
    spi_bus, spi_dev : int
        ``/dev/spidev<bus>.<dev>``.
    speed_hz : int
        SCLK [Hz]; the driver rejects more than f_CLKIN/4.

    Returns
    -------
    (spi, gpio, clock)
        An opened ``spidev.SpiDev``, the ``RPi.GPIO`` module (BCM mode set) and a
        :class:`RealClock`. The driver configures SPI mode, speed, ``no_cs`` and the pins.
    """
    try:
        import spidev  # noqa: PLC0415  (hardware extra, imported only here)
    except ImportError as exc:
        raise MissingHardwareDependency(f"'spidev' is needed for the ADS1256 but not "
                                        f"installed: {_PI_HINT}") from exc
    try:
        import RPi.GPIO as GPIO  # noqa: N814, PLC0415
    except ImportError as exc:
        raise MissingHardwareDependency(f"'RPi.GPIO' is needed for the ADS1256 but not "
                                        f"installed: {_PI_HINT}") from exc
    except RuntimeError as exc:  # RPi.GPIO raises this when not on a Pi / no /dev/gpiomem
        raise MissingHardwareDependency(f"RPi.GPIO cannot access the GPIO: {exc}") from exc
    spi = spidev.SpiDev()
    try:
        spi.open(int(spi_bus), int(spi_dev))
    except OSError as exc:
        raise OSError(f"cannot open /dev/spidev{spi_bus}.{spi_dev} (SPI enabled in "
                      f"raspi-config / dtparam=spi=on?): {exc}") from exc
    spi.max_speed_hz = int(speed_hz)
    GPIO.setmode(GPIO.BCM)
    check_edge_detection(GPIO, pins.drdy)
    return spi, GPIO, RealClock()


_EDGE_HINT = ("Linux 6.6 and later number the SoC's GPIOs from 512 in sysfs, where RPi.GPIO "
              "0.7 looks for them; use rpi-lgpio, which gives the same RPi.GPIO API on "
              "/dev/gpiochip: sudo apt remove python3-rpi.gpio && sudo apt install "
              "python3-rpi-lgpio (Raspberry Pi OS), or pip install 'vsense[pi5]' in a venv "
              "without RPi.GPIO")


def check_edge_detection(gpio, drdy: int) -> None:
    """Fail at start-up, with the fix, when the GPIO module cannot wait for an edge on DRDY.

    RPi.GPIO 0.7 waits for edges through ``/sys/class/gpio``; on Linux 6.6+ its numbers are
    wrong there and every ``wait_for_edge`` raises ``RuntimeError("Failed to add edge
    detection")``, which the driver needs once per sample. One wait of 1 ms on the DRDY input
    (pulled up, as the driver sets it) tells; an edge or none are both fine.

    Raises
    ------
    MissingHardwareDependency
        The wait raised ``RuntimeError``: the message names the module's error and the fix.
    """
    gpio.setup(drdy, gpio.IN, pull_up_down=gpio.PUD_UP)
    try:
        gpio.wait_for_edge(drdy, gpio.FALLING, timeout=1)
    except RuntimeError as exc:
        raise MissingHardwareDependency(
            f"the GPIO module cannot wait for an edge on DRDY (BCM {drdy}): {exc}. "
            f"{_EDGE_HINT}") from exc
