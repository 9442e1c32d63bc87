"""ADS1256 datasheet facts (TI SBAS288K) as data: command opcodes, register addresses, data
rates and their settling times, PGA codes, input names, the conversion data format, and the
driver's errors. Used by the driver (:mod:`edge.hw.ads1256`, which re-exports them) and the
simulator (:mod:`edge.hw.sim_ads1256`).

Protocol facts the driver follows (datasheet section in brackets):

* SPI mode 1 (CPOL=0, CPHA=1); SCLK period at least 4 tCLKIN, i.e. at most f_CLKIN/4
  = 1.92 MHz for the 7.68 MHz crystal [Timing Characteristics].
* CS must stay low during a whole command sequence, including the data read that follows
  RDATA/RREG [Command Definitions]. spidev's own CS is disabled (``no_cs``) and CS is a GPIO.
* t6 = 50 tCLKIN (6.51 µs) between the end of RDATA/RDATAC/RREG and the first SCLK of the
  data [Figures 30, 31, 34]; t11 = 4 tCLKIN after RREG/WREG/RDATA/WAKEUP and 24 tCLKIN after
  SYNC/RESET/RDATAC before the next command [Timing Characteristics].
* Conversion data: 24-bit two's complement, MSB first; +FS = 7FFFFFh, -FS = 800000h, LSB
  weight 2 VREF / (PGA 2^23) [Data Format, Table 16].
* Input multiplexer cycling: WREG MUX right after DRDY falls, SYNC, WAKEUP, then RDATA of the
  *previous* conversion [Settling Time Using the Input Multiplexer, Table 14].
"""

from __future__ import annotations

import math

import numpy as np

#: Command opcodes [Table 24]. RREG/WREG take the register address in the low nibble.
CMD = {
    "WAKEUP": 0x00, "RDATA": 0x01, "RDATAC": 0x03, "SDATAC": 0x0F, "RREG": 0x10, "WREG": 0x50,
    "SELFCAL": 0xF0, "SELFOCAL": 0xF1, "SELFGCAL": 0xF2, "SYSOCAL": 0xF3, "SYSGCAL": 0xF4,
    "SYNC": 0xFC, "STANDBY": 0xFD, "RESET": 0xFE, "WAKEUP2": 0xFF,
}
WAKEUP, RDATA, RDATAC, SDATAC = 0x00, 0x01, 0x03, 0x0F
RREG, WREG = 0x10, 0x50
SELFCAL, SELFOCAL, SELFGCAL, SYSOCAL, SYSGCAL = 0xF0, 0xF1, 0xF2, 0xF3, 0xF4
SYNC, STANDBY, RESET = 0xFC, 0xFD, 0xFE

#: Register addresses [Table 23].
REG = {"STATUS": 0, "MUX": 1, "ADCON": 2, "DRATE": 3, "IO": 4, "OFC0": 5, "OFC1": 6,
       "OFC2": 7, "FSC0": 8, "FSC1": 9, "FSC2": 10}
STATUS, MUX, ADCON, DRATE, IO = 0, 1, 2, 3, 4
OFC0, FSC0 = 5, 8
N_REGS = 11
CHIP_ID = 3  # STATUS bits 7:4 of the ADS1256

#: DRATE register codes [DRATE register description] (f_CLKIN = 7.68 MHz).
DRATE_CODES = {
    30000.0: 0xF0, 15000.0: 0xE0, 7500.0: 0xD0, 3750.0: 0xC0, 2000.0: 0xB0, 1000.0: 0xA1,
    500.0: 0x92, 100.0: 0x82, 60.0: 0x72, 50.0: 0x63, 30.0: 0x53, 25.0: 0x43, 15.0: 0x33,
    10.0: 0x23, 5.0: 0x13, 2.5: 0x03,
}
_RATE_OF_CODE = {c: r for r, c in DRATE_CODES.items()}
#: Settling time t18 after SYNC/WAKEUP [Table 13], seconds.
SETTLING_TIME_S = {
    30000.0: 0.21e-3, 15000.0: 0.25e-3, 7500.0: 0.31e-3, 3750.0: 0.44e-3, 2000.0: 0.68e-3,
    1000.0: 1.18e-3, 500.0: 2.18e-3, 100.0: 10.18e-3, 60.0: 16.84e-3, 50.0: 20.18e-3,
    30.0: 33.51e-3, 25.0: 40.18e-3, 15.0: 66.84e-3, 10.0: 100.18e-3, 5.0: 200.18e-3,
    2.5: 400.18e-3,
}
#: Multiplexer cycling throughput 1/t19, all channels together [Table 14], Hz
#: (3-byte WREG, SCLK = f_CLKIN/4).
CYCLING_THROUGHPUT_HZ = {
    30000.0: 4374.0, 15000.0: 3817.0, 7500.0: 3043.0, 3750.0: 2165.0, 2000.0: 1438.0,
    1000.0: 837.0, 500.0: 456.0, 100.0: 98.0, 60.0: 59.0, 50.0: 50.0, 30.0: 30.0, 25.0: 25.0,
    15.0: 15.0, 10.0: 10.0, 5.0: 5.0, 2.5: 2.5,
}


def row_rates(n_channels: int, mode: str = "cycle") -> dict[float, float]:
    """Rows per second for every data rate: ``{drate [SPS]: rows/s}``, fastest first.

    ``continuous`` (one channel, RDATAC): the data rate itself; ``cycle``: Table 14's
    multiplexer cycling throughput shared by ``n_channels`` channels.
    """
    if mode == "continuous":
        return {r: r for r in sorted(CYCLING_THROUGHPUT_HZ, reverse=True)}
    n = max(1, int(n_channels))
    return {r: CYCLING_THROUGHPUT_HZ[r] / n for r in sorted(CYCLING_THROUGHPUT_HZ, reverse=True)}


def rate_mismatch_message(drate: float, n_channels: int, mode: str, bundle_rate: float) -> str:
    """Why ``[adc] drate`` cannot feed a bundle of ``bundle_rate`` samples/s, and what can:
    the drate that gives exactly that row rate, or the row rates this channel count can have
    (for ``[estimator] rate`` of the model file) nearest to the bundle's."""
    rates = row_rates(n_channels, mode)
    row = rates.get(float(drate), float("nan"))
    msg = (f"[adc] drate: {drate:g} SPS gives {row:g} rows/s in {mode} mode with "
           f"{n_channels} channel(s), but the bundle expects {bundle_rate:g} samples/s (1/dt)")
    fit = [d for d, r in rates.items() if abs(r - bundle_rate) <= 1e-6 * bundle_rate]
    if fit:
        return msg + f"; set [adc] drate = {fit[0]:g}"
    near = sorted(rates.items(), key=lambda dr: abs(dr[1] - bundle_rate))[:3]
    opts = ", ".join(f"{r:g} (drate {d:g})" for d, r in sorted(near, key=lambda dr: -dr[1]))
    hint = (" (or one channel with [adc] mode = \"continuous\")"
            if mode == "cycle" and n_channels == 1 else "")
    return (msg + f"; no data rate gives that with {n_channels} channel(s){hint}: build the "
            f"bundle with [estimator] rate = one of the row rates, e.g. {opts}")


#: PGA gain -> ADCON bits 2:0.
PGA_CODES = {1: 0, 2: 1, 4: 2, 8: 3, 16: 4, 32: 5, 64: 6}
#: Input names -> MUX nibble (AINCOM = 1xxx).
INPUTS = {f"AIN{i}": i for i in range(8)} | {"AINCOM": 8}

CODE_MAX = 0x7FFFFF
CODE_MIN = -0x800000


class ADS1256Error(RuntimeError):
    """Any ADS1256 hardware/protocol failure (the daemon maps it to its hardware exit code)."""


class DrdyTimeout(ADS1256Error, TimeoutError):
    """DRDY did not fall within the timeout. ``pin`` is the BCM pin, ``n_read`` the rows
    already filled by :meth:`edge.hw.acquire.Acquisition.read` before the timeout."""

    def __init__(self, pin: int, timeout_s: float, what: str = "data", n_read: int = 0):
        self.pin, self.timeout_s, self.n_read = pin, timeout_s, n_read
        super().__init__(f"ADS1256: DRDY (GPIO{pin}, BCM) did not fall within "
                         f"{timeout_s * 1e3:.1f} ms waiting for {what} (line stuck or "
                         f"chip not converting?)")


class ChipIdError(ADS1256Error):
    """STATUS bits 7:4 are not the ADS1256 ID (3): wrong chip, wiring or SPI mode."""


class RegisterVerifyError(ADS1256Error):
    """A register read back different from what was written (after retries)."""


def input_index(name_or_index) -> int:
    """``"AIN3"`` / 3 -> 3; ``"AINCOM"`` / 8 -> 8."""
    if isinstance(name_or_index, str):
        key = name_or_index.strip().upper()
        if key not in INPUTS:
            raise ValueError(f"input {name_or_index!r}: expected one of {sorted(INPUTS)}")
        return INPUTS[key]
    i = int(name_or_index)
    if not 0 <= i <= 8:
        raise ValueError(f"input {name_or_index!r}: index 0..7 (AIN0..7) or 8 (AINCOM)")
    return i


def mux_byte(pos, neg="AINCOM") -> int:
    """MUX register value: PSEL in bits 7:4, NSEL in bits 3:0."""
    p, n = input_index(pos), input_index(neg)
    if p == n:
        raise ValueError(f"MUX: positive and negative input are both {pos!r}")
    return (p << 4) | n


def sign_extend_24(raw: int) -> int:
    """24-bit two's complement -> Python int (0x800000 -> -8388608, 0xFFFFFF -> -1)."""
    raw &= 0xFFFFFF
    return raw - 0x1000000 if raw & 0x800000 else raw


def code_from_bytes(b) -> int:
    """Three data bytes, MSB first -> signed code."""
    raw = (b[0] << 16) | (b[1] << 8) | b[2]
    return raw - 0x1000000 if raw & 0x800000 else raw


def lsb_volts(vref: float, pga: int) -> float:
    """Weight of one code [V]: 2 VREF / (PGA 2^23)."""
    return 2.0 * vref / (pga * 8388608.0)


def codes_to_volts(codes, vref: float, pga) -> np.ndarray:
    """Signed codes -> volts.

    Parameters
    ----------
    codes : array_like of int
    vref : float  [V]
    pga : int or array_like (broadcast against codes' last axis)

    Returns
    -------
    ndarray of float64 [V]
    """
    # V = code / 2^23 * 2 VREF / PGA   [Data Format]
    V = np.asarray(codes, dtype=np.float64) * (2.0 * vref / 8388608.0) / np.asarray(pga, float)
    return V


def _nearest_rate(rate: float) -> float:
    r = float(rate)
    for k in DRATE_CODES:
        if math.isclose(k, r, rel_tol=1e-9):
            return k
    raise ValueError(f"data rate {rate!r} SPS: not an ADS1256 rate; choose one of "
                     f"{sorted(DRATE_CODES)}")
