"""ADS1256 driver (edge.hw.ads1256, edge.hw.acquire) against the byte-level simulated chip.

Reference numbers: the ADS1256 datasheet (TI SBAS288K): code format (Data Format, Table 16),
settling time t18 (Table 13), multiplexer cycling throughput (Table 14), timing t6/t11;
otherwise the analytic value stated next to the assertion.
"""

import math
import time

import numpy as np
import pytest

from edge.hw import ads1256 as A
from edge.flags import FLAG_GAP, FLAG_SATURATED, FLAG_SUSPECT
from edge.hw.acquire import Acquisition, Channel
from edge.hw.ads1256 import (
    ADS1256, ChipIdError, DrdyTimeout, RegisterVerifyError, code_from_bytes, codes_to_volts,
    sign_extend_24,
)
from edge.hw.ads1256_filter import F_MOD, conversion_taps, frequency_response
from edge.hw.ports import MissingHardwareDependency, Pins, open_hardware
from edge.hw.sim_ads1256 import Faults, ProtocolViolation
from edge.hw.sim_ports import make_simulated_hardware
from edge.hw.sources import FunctionSource

VREF = 2.5
LSB1 = 2 * VREF / 2**23  # V per code at PGA 1 (datasheet Data Format)


def sine_source(f=50.0, amp=1.0):
    # numpy callables: the chip evaluates them on the modulator instants of each window
    return FunctionSource({
        "AIN0": lambda t: amp * np.sin(2 * np.pi * f * t),
        "AIN1": lambda t: 0.5,
        "AIN2": lambda t: -0.3 + 0.01 * np.sin(2 * np.pi * 7 * t),
        "AIN3": lambda t: 0.02 * np.cos(2 * np.pi * 3 * t),
        "AINCOM": lambda t: 0.0,
    })


def chip_sine(amp, f, t_ns, rate, fn=np.sin):
    """What the chip converts of ``amp fn(2 pi f t)`` at DRDY times ``t_ns``: the datasheet's
    gain |H(f)| (ads1256_filter.frequency_response) and the taps' linear-phase delay
    (L - 1) / (2 F_MOD) (the taps are symmetric)."""
    tau = (len(conversion_taps(rate)) - 1) / (2 * F_MOD)
    return amp * frequency_response(rate, f) * fn(2 * np.pi * f * (t_ns * 1e-9 - tau))


def make(source=None, speed_hz=1_000_000, seed=0, faults=None, pins=Pins(), cls=ADS1256,
         virtual=True, **chip_kw):
    spi, gpio, clock = make_simulated_hardware(source or sine_source(), seed=seed,
                                               faults=faults, virtual_clock=virtual, pins=pins,
                                               **chip_kw)
    adc = cls(spi, gpio, clock, pins, vref=VREF, speed_hz=speed_hz)
    return adc, spi.chip


def buffers(n, nch):
    return np.zeros((n, nch)), np.zeros(n, np.int64), np.zeros(n, np.uint8)


# ---------------------------------------------------------------- codes and volts
def test_sign_extension_at_the_extremes():
    # two's complement 24 bit (datasheet Table 16: 7FFFFFh = +FS, 800000h = -FS, FFFFFFh = -1 LSB)
    assert sign_extend_24(0x800000) == -8388608
    assert sign_extend_24(0x7FFFFF) == 8388607
    assert sign_extend_24(0xFFFFFF) == -1
    assert sign_extend_24(0x000001) == 1
    assert sign_extend_24(0) == 0
    assert code_from_bytes([0x80, 0x00, 0x00]) == -8388608
    assert code_from_bytes([0x7F, 0xFF, 0xFF]) == 8388607
    assert code_from_bytes([0xFF, 0xFF, 0xFF]) == -1


def test_codes_to_volts():
    # V = code / 2^23 * 2 VREF / PGA: 2^22 at PGA 1 -> VREF; at PGA 64 -> VREF/64 (analytic)
    assert codes_to_volts(2**22, VREF, 1) == pytest.approx(2.5, abs=1e-15)
    assert codes_to_volts(-(2**23), VREF, 64) == pytest.approx(-5.0 / 64, abs=1e-15)
    v = codes_to_volts(np.array([[2**22, 2**22]]), VREF, np.array([1, 4]))
    np.testing.assert_allclose(v, [[2.5, 0.625]], rtol=0, atol=1e-15)


@pytest.mark.parametrize("volts,code", [(6.0, 8388607), (-6.0, -8388608),
                                        (-LSB1, -1), (5.0 - LSB1, 8388607)])
def test_extreme_inputs_through_the_chip(volts, code):
    # Data Format: outputs clip at 7FFFFFh / 800000h; -1 LSB reads FFFFFFh = -1
    adc, chip = make(FunctionSource({"AIN0": lambda t: volts}))
    adc.reset()
    adc.configure(mux=A.mux_byte("AIN0", "AINCOM"), pga=1, rate=1000, buffer=False)
    assert adc.read_data() == code
    assert not chip.violations


# ---------------------------------------------------------------- registers
def test_register_round_trip_every_writable_register():
    adc, chip = make()
    adc.reset()
    rng = np.random.default_rng(7)
    # STATUS: bits 3:1 writable (ID 7:4 and DRDY 0 read-only)
    for v in (0x02, 0x04, 0x06, 0x00):
        adc.write_registers(A.STATUS, [v])
        got = adc.read_registers(A.STATUS)[0]
        assert got & 0x0E == v and got >> 4 == 3
    for mux in rng.integers(0, 256, 20):
        if mux >> 4 == mux & 0x0F:
            continue
        adc.write_registers(A.MUX, [int(mux)])
        assert adc.read_registers(A.MUX) == [int(mux)]
    for adcon in range(0x00, 0x80, 0x0B):
        adc.write_registers(A.ADCON, [adcon])
        assert adc.read_registers(A.ADCON) == [adcon]
    for code in A.DRATE_CODES.values():
        adc.write_registers(A.DRATE, [code])
        assert adc.read_registers(A.DRATE) == [code]
    for io in (0x00, 0xF0, 0x5A, 0xE0):
        adc.write_registers(A.IO, [io])
        assert adc.read_registers(A.IO) == [io]
    vals = [int(x) for x in rng.integers(0, 256, 6)]
    adc.write_registers(A.OFC0, vals)  # OFC0..2, FSC0..2 in one WREG
    assert adc.read_registers(A.OFC0, 6) == vals
    assert adc.stats["register_retries"] == 0
    assert not chip.violations


def test_reset_values_and_chip_id():
    adc, chip = make()
    adc.reset()
    regs = adc.read_registers(0, 11)
    # register map reset values: MUX 01h, ADCON 20h, DRATE F0h, IO E0h; STATUS ID = 3
    assert regs[1:5] == [0x01, 0x20, 0xF0, 0xE0]
    assert adc.chip_id() == 3
    adc.check_id()
    chip.regs[A.STATUS] = 0x51  # another part's ID
    with pytest.raises(ChipIdError, match="expected 3"):
        adc.check_id()


def test_command_reset_when_reset_pin_not_wired():
    adc, chip = make(pins=Pins(reset=None))
    adc.write_registers(A.DRATE, [0x82])
    adc.reset()  # RESET command
    assert adc.read_registers(A.DRATE) == [0xF0]
    assert not chip.violations


# ---------------------------------------------------------------- continuous mode
@pytest.mark.parametrize("rate", [30000.0, 1000.0])
def test_continuous_values_equal_source_quantised(rate):
    src = sine_source(f=37.0, amp=2.0)
    adc, chip = make(src)
    acq = Acquisition(adc, [Channel("a", "AIN0", sensitivity=0.1, offset=0.05, unit="m/s^2")],
                      rate=rate)
    acq.start()
    n = 3000 if rate > 1000 else 400
    v, t, f = buffers(n, 1)
    assert acq.read(v, t, f) == n
    # timestamps at DRDY: exactly one data period apart (ns rounding of 1/rate)
    assert np.all(np.abs(np.diff(t) - 1e9 / rate) <= 1)
    # reference: the chip's conversion of the sine ending at the DRDY instant, converted to
    # units (V - 0.05) / 0.1; quantisation error <= 1/2 LSB, asserted to 1 LSB
    ref = (chip_sine(2.0, 37.0, t, rate) - 0.05) / 0.1
    assert np.max(np.abs(v[:, 0] - ref)) <= LSB1 / 0.1
    assert not f.any()
    acq.stop()
    assert not chip.violations and chip.stats["overwritten"] <= 1


def test_continuous_pga_volts():
    src = FunctionSource({"AIN3": lambda t: 0.02 * np.cos(2 * np.pi * 3 * t)})
    adc, chip = make(src)
    acq = Acquisition(adc, [Channel("s", "AIN3", "AINCOM", pga=64)], rate=2000)
    acq.start()
    v, t, f = buffers(200, 1)
    acq.read(v, t, f)
    ref = chip_sine(0.02, 3.0, t, 2000.0, np.cos)
    assert np.max(np.abs(v[:, 0] - ref)) <= LSB1 / 64  # 1 LSB at PGA 64
    assert not chip.violations


# ---------------------------------------------------------------- cycling mode
def test_cycling_values_and_throughput():
    adc, chip = make(speed_hz=1_000_000)
    chans = [Channel("a", "AIN0"), Channel("b", "AIN1", pga=2), Channel("c", "AIN2", pga=4),
             Channel("d", "AIN3", pga=64)]
    acq = Acquisition(adc, chans, rate=30000)
    acq.start()
    v, t, f = buffers(300, 4)
    acq.read(v, t, f)
    assert not chip.violations and not f.any()
    # the row is stamped with its last channel's DRDY (d); a, b, c were converted 3, 2 and 1
    # channel periods (tc) before it; column a over the window ending then, 1 LSB tolerance
    tc = np.mean(np.diff(t)) / 4
    assert np.max(np.abs(v[:, 0] - chip_sine(1.0, 50.0, t - 3 * tc, 30000.0))) <= LSB1
    assert np.max(np.abs(v[:, 1] - 0.5)) <= LSB1 / 2
    tb = t - tc
    assert np.max(np.abs(v[:, 2] - (-0.3 + chip_sine(0.01, 7.0, tb, 30000.0)))) <= 2e-6
    # per channel: t18 (Table 13: 0.21 ms) + WREG MUX+ADCON (4 bytes) + SYNC + WAKEUP at
    # 1 MHz (8 us/byte) + t11 (4 + 24 tCLKIN) = 210 + 48 + 0.521 + 3.125 us
    expect = 210e3 + 6 * 8e3 + math.ceil(4e9 / 7.68e6) + math.ceil(24e9 / 7.68e6)
    assert tc == pytest.approx(expect, abs=2.0)


def test_cycling_throughput_close_to_datasheet_table14():
    # Table 14: 4374 Hz at 30 kSPS with a 3-byte WREG and SCLK = f_CLKIN/4
    adc, chip = make(speed_hz=1_920_000)
    acq = Acquisition(adc, [Channel("a", "AIN0"), Channel("b", "AIN1")], rate=30000)
    acq.start()
    v, t, f = buffers(200, 2)
    acq.read(v, t, f)
    total = 2 * 1e9 / np.mean(np.diff(t))
    assert total == pytest.approx(4374, rel=0.03)
    assert acq.nominal_rate == pytest.approx(4374 / 2)
    assert not chip.violations


# ---------------------------------------------------------------- calibration
def test_self_calibration_removes_offset_after_pga_change():
    off = 5e-3
    src = FunctionSource({"AIN0": lambda t: 0.0})
    adc, chip = make(src, offset_error_v=off, gain_error=0.01)
    adc.reset()  # post-reset self-calibration at PGA 1
    adc.configure(mux=0x08, pga=8, rate=1000, buffer=True)
    v_before = adc.volts(adc.read_data())
    # calibrated at PGA 1, used at PGA 8 (analytic, datasheet eq. 3 with OFC/alpha =
    # off (1+g) / 2VREF and FSC = FSC_ideal / (1+g)): V = (8 - 1)/8 off; gain error cancels
    assert v_before == pytest.approx(7 / 8 * off, rel=1e-3)
    adc.self_calibrate()
    v_after = adc.volts(adc.read_data())
    assert abs(v_after) <= 3 * LSB1 / 8  # OFC/FSC integer rounding: a few LSB
    assert not chip.violations


# ---------------------------------------------------------------- faults
def test_drdy_timeout_names_the_pin():
    adc, chip = make(faults=Faults(stuck_drdy_after_s=0.2))
    acq = Acquisition(adc, [Channel("a", "AIN0")], rate=1000)
    acq.start()
    v, t, f = buffers(10_000, 1)
    t_start = adc.clock.monotonic_ns()
    with pytest.raises(DrdyTimeout, match="GPIO17") as ei:
        acq.read(v, t, f)
    n = ei.value.n_read
    # stuck from 0.2 s: every conversion before it was read (about 0.2 s * 1000 SPS)
    assert 0 < n < 200 and t[n - 1] < 0.2e9 <= t[n - 1] + 1e6 + 1
    # the timeout (0.1 s) elapsed on the clock before raising, not more than 1 ms later
    waited = adc.clock.monotonic_ns() - t[n - 1]
    assert 0.1e9 <= waited <= 0.1e9 + 2e6
    assert t_start <= t[0]


def test_saturation_and_dropout_flagged():
    faults = Faults(saturation=((0.10, 0.12, "AIN0", 9.0),), dropouts=((0.15, 0.16, "AIN1"),))
    adc, chip = make(faults=faults)
    acq = Acquisition(adc, [Channel("a", "AIN0", saturation_v=1.5), Channel("b", "AIN1")],
                      rate=30000, nan_on_saturation=True)
    acq.start()
    v, t, f = buffers(900, 2)
    acq.read(v, t, f)
    tc = np.mean(np.diff(t)) / 2
    ts = t * 1e-9  # the row's stamp: channel b's DRDY; channel a was converted tc before
    in_sat = (ts - tc * 1e-9 >= 0.10) & (ts - tc * 1e-9 < 0.12)
    in_drop = (ts >= 0.15) & (ts < 0.16)
    sat = (f & FLAG_SATURATED) != 0
    assert in_sat.sum() > 10 and in_drop.sum() > 5
    np.testing.assert_array_equal(sat, in_sat | in_drop)
    assert np.isnan(v[in_sat, 0]).all() and np.isnan(v[in_drop, 1]).all()
    assert np.isfinite(v[~sat]).all()
    assert not chip.violations


def test_missing_drdy_pulses_flag_gaps():
    adc, chip = make(faults=Faults(missing_drdy_prob=0.02), seed=3)
    acq = Acquisition(adc, [Channel("a", "AIN0")], rate=15000)
    acq.start()
    missing0 = chip.stats["drdy_missing"]
    v, t, f = buffers(3000, 1)
    acq.read(v, t, f)
    period = 1e9 / 15000
    lost = np.round(np.diff(t) / period).astype(int) - 1
    gap = (f[1:] & FLAG_GAP) != 0
    np.testing.assert_array_equal(gap, lost > 0)
    # every lost DRDY pulse shows as a longer interval (sim's own count is the reference)
    assert lost.sum() == chip.stats["drdy_missing"] - missing0
    assert 20 < lost.sum() < 100  # 2 % of ~3000 (binomial, 4 sigma ~ 30)
    # values stay exact (the sample after a gap is a valid conversion)
    assert np.max(np.abs(v[:, 0] - chip_sine(1.0, 50.0, t, 15000.0))) <= LSB1


def test_bit_errors_detected():
    src = FunctionSource({"AIN0": lambda t: math.sin(2 * math.pi * 5 * t)})
    adc, chip = make(src, seed=11)
    acq = Acquisition(adc, [Channel("a", "AIN0", max_step=0.01)], rate=7500)
    acq.start()
    chip.set_faults(Faults(bit_error_prob=2e-3))
    v, t, f = buffers(4000, 1)
    acq.read(v, t, f)
    err = np.abs(v[:, 0] - np.sin(2 * np.pi * 5 * t * 1e-9))
    suspect = (f & FLAG_SUSPECT) != 0
    # a 1 V, 5 Hz sine at 7.5 kSPS moves < 2 pi 5 / 7500 = 0.0042 V per sample (analytic), so
    # a corruption larger than 2 max_step + 2 * 0.0042 V exceeds both reference distances
    assert chip.stats["bit_flips"] > 50
    big = err > 2 * 0.01 + 2 * 0.0042
    assert big.sum() > 5
    assert suspect[big].all()
    # no clean sample flagged (a clean sample is within 2 * 0.0042 V < 2 max_step of r2)
    assert not suspect[err <= LSB1].any()
    # register writes are verified: bit errors on the read-back are retried
    chip.set_faults(Faults(bit_error_prob=0.02))
    acq.stop()
    for _ in range(20):
        try:
            adc.write_registers(A.IO, [0xE0])
        except RegisterVerifyError:
            pass
    assert adc.stats["register_retries"] > 0
    chip.set_faults(Faults(bit_error_prob=0.5))
    with pytest.raises(RegisterVerifyError, match="read back"):
        adc.write_registers(A.MUX, [0x23])


# ---------------------------------------------------------------- protocol violations
class NoT6(ADS1256):
    def _read_after_command(self, n):  # broken: no t6 delay
        return self.spi.readbytes(n)


class CsReleased(ADS1256):
    def rdata(self):  # broken: CS raised between RDATA and its data
        self._cs(True)
        self._command([A.RDATA], self.t11_short_ns)
        self._cs(False)
        self._cs(True)
        self.clock.sleep_us(10)
        b = self.spi.readbytes(3)
        self._cs(False)
        return code_from_bytes(b)


class SyncWakeupTogether(ADS1256):
    def sync_wakeup(self):  # broken: no t11 between SYNC and WAKEUP
        self._cs(True)
        self.spi.xfer2([A.SYNC, A.WAKEUP])
        self._cs(False)


def test_violation_no_t6():
    adc, chip = make(cls=NoT6)
    with pytest.raises(ProtocolViolation) as ei:
        adc.reset()
        adc.check_id()
    assert ei.value.kind == "t6"


def test_violation_cs_released_between_command_and_read():
    adc, chip = make(cls=CsReleased)
    adc.reset()
    with pytest.raises(ProtocolViolation) as ei:
        adc.read_data()
    assert ei.value.kind == "cs_released"


def test_violation_hardware_cs_breaks_rdata():
    # pins.cs=None: spidev's own CS, released between transfers (why no_cs + GPIO CS)
    adc, chip = make(pins=Pins(cs=None))
    with pytest.raises(ProtocolViolation) as ei:
        adc.reset()
        adc.check_id()
    assert ei.value.kind == "cs_released"


def test_violation_t11_sync_wakeup():
    adc, chip = make(cls=SyncWakeupTogether)
    adc.reset()
    with pytest.raises(ProtocolViolation) as ei:
        adc.sync_wakeup()
    assert ei.value.kind == "t11"


def test_violation_spi_mode_and_sclk():
    adc, chip = make()
    adc.spi.mode = 0
    with pytest.raises(ProtocolViolation) as ei:
        adc.reset()
        adc.check_id()
    assert ei.value.kind == "spi_mode"
    adc, chip = make()
    adc.spi.max_speed_hz = 4_000_000
    with pytest.raises(ProtocolViolation) as ei:
        adc.reset()
        adc.check_id()
    assert ei.value.kind == "sclk"
    with pytest.raises(ValueError, match="speed_hz"):
        make(speed_hz=2_000_000)


def test_violation_read_without_conversion_ready():
    adc, chip = make()
    adc.reset()
    adc.configure(mux=0x08, rate=100)
    adc.read_data()
    with pytest.raises(ProtocolViolation) as ei:
        adc.rdata()  # no DRDY wait: the same conversion again
    assert ei.value.kind == "read_not_ready"


def test_wrong_spi_mode_non_strict_fails_chip_id():
    adc, chip = make(strict=False)
    adc.spi.mode = 0
    adc.reset()
    with pytest.raises(ChipIdError):
        adc.check_id()
    assert chip.violations["spi_mode"] > 0


def test_correct_driver_has_no_violations_non_strict():
    adc, chip = make(strict=False)
    for mode, chans in (("continuous", [Channel("a", "AIN0")]),
                        ("cycle", [Channel("a", "AIN0"), Channel("b", "AIN1", pga=2)])):
        acq = Acquisition(adc, chans, rate=30000, mode=mode)
        acq.start()
        v, t, f = buffers(500, len(chans))
        acq.read(v, t, f)
        acq.stop()
    assert sum(chip.violations.values()) == 0, chip.log[:5]


# ---------------------------------------------------------------- real-time clock
def test_real_time_clock_paces_at_the_data_rate():
    adc, chip = make(virtual=False)
    acq = Acquisition(adc, [Channel("a", "AIN0")], rate=2000)
    acq.start()
    ow0 = chip.stats["overwritten"]
    v, t, f = buffers(200, 1)
    w0 = time.monotonic()
    acq.read(v, t, f)
    wall = time.monotonic() - w0
    # 200 samples at 2 kSPS = 0.1 s of wall time (minus at most the 2 ms lead allowance)
    assert wall >= 0.1 - 2.5e-3
    # the machine is shared: a descheduled process may lose conversions (flagged as gaps; how
    # many depends on the load: 21 of 200 seen at load 18), but each flagged gap is a
    # conversion the chip itself counted as overwritten, nothing else may be flagged and the
    # protocol must hold
    gaps = int(np.count_nonzero(f & FLAG_GAP))
    assert not (f & ~np.uint8(FLAG_GAP)).any() and not chip.violations
    assert gaps <= chip.stats["overwritten"] - ow0 and gaps < f.size // 2
    # timestamps are the clock when DRDY was *seen* low: exact unless the process was
    # descheduled, then late by the scheduling delay. Most rows are exact to 1 LSB.
    err = np.abs(v[:, 0] - chip_sine(1.0, 50.0, t, 2000.0))
    assert np.median(err) <= LSB1


# ---------------------------------------------------------------- validation
def test_bad_input_errors_name_the_field():
    with pytest.raises(ValueError, match="sensitivity"):
        Channel("a", "AIN0", sensitivity=0.0)
    with pytest.raises(ValueError, match="pga"):
        Channel("a", "AIN0", pga=3)
    with pytest.raises(ValueError, match="same input"):
        Channel("a", "AIN0", "AIN0")
    with pytest.raises(ValueError, match="input 'AIN9'"):
        Channel("a", "AIN9")
    with pytest.raises(ValueError, match="Pins.drdy"):
        Pins(drdy=40)
    adc, chip = make()
    with pytest.raises(ValueError, match="data rate 123"):
        Acquisition(adc, [Channel("a")], rate=123)
    with pytest.raises(ValueError, match="duplicate"):
        Acquisition(adc, [Channel("a"), Channel("a", "AIN1")])
    acq = Acquisition(adc, [Channel("a")], rate=1000)
    acq.start()
    with pytest.raises(ValueError, match="out_values"):
        acq.read(np.zeros((4, 2)), np.zeros(4, np.int64), np.zeros(4, np.uint8))
    with pytest.raises(ValueError, match="out_flags"):
        acq.read(np.zeros((4, 1)), np.zeros(4, np.int64), np.zeros(4, np.int8))


def test_open_hardware_names_the_pi_extra():
    try:
        import spidev  # noqa: F401
        import RPi.GPIO  # noqa: F401
        pytest.skip("spidev/RPi.GPIO installed")
    except ImportError:
        pass
    with pytest.raises(MissingHardwareDependency, match=r"vsense\[pi\]"):
        open_hardware()


class _StandInGPIO:
    """The part of RPi.GPIO's module interface open_hardware uses, with the behaviour of
    RPi.GPIO 0.7 on Linux 6.6+ (``edge_error``): every wait for an edge raises the
    RuntimeError that module raises there."""

    BCM, IN, PUD_UP, FALLING = 11, 1, 22, 32

    def __init__(self, edge_error: bool):
        self.edge_error = edge_error
        self.calls = []

    def setmode(self, mode):
        self.calls.append(("setmode", mode))

    def setup(self, pin, direction, pull_up_down=None):
        self.calls.append(("setup", pin, direction, pull_up_down))

    def wait_for_edge(self, pin, edge, timeout=None):
        self.calls.append(("wait_for_edge", pin, edge, timeout))
        if self.edge_error:
            raise RuntimeError("Failed to add edge detection")
        return None


@pytest.mark.parametrize("edge_error", [False, True])
def test_open_hardware_checks_edge_detection_on_drdy(monkeypatch, edge_error):
    """open_hardware waits once (1 ms) for an edge on DRDY; RPi.GPIO's failure on Linux 6.6+
    becomes a start-up error that names the fix (rpi-lgpio), not a crash at the first sample."""
    import sys
    import types

    gpio = _StandInGPIO(edge_error)
    spidev = types.ModuleType("spidev")
    spidev.SpiDev = type("SpiDev", (), {"open": lambda self, b, d: None})
    rpi = types.ModuleType("RPi")
    rpi.GPIO = gpio
    monkeypatch.setitem(sys.modules, "spidev", spidev)
    monkeypatch.setitem(sys.modules, "RPi", rpi)
    monkeypatch.setitem(sys.modules, "RPi.GPIO", gpio)
    if edge_error:
        with pytest.raises(MissingHardwareDependency,
                           match=r"DRDY \(BCM 17\): Failed to add edge detection.*"
                                 r"python3-rpi-lgpio"):
            open_hardware(Pins())
    else:
        spi, g, clock = open_hardware(Pins())
        assert g is gpio and spi.max_speed_hz == 1_000_000
    assert gpio.calls[-2:] == [("setup", 17, gpio.IN, gpio.PUD_UP),
                               ("wait_for_edge", 17, gpio.FALLING, 1)]
