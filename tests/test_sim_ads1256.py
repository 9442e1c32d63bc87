"""The simulated ADS1256 itself (edge.hw.sim_ads1256) and its signal sources (edge.hw.sources).

Reference numbers: ADS1256 datasheet SBAS288K (register reset values, Table 13 settling
times, DRATE codes); numpy.interp as independent interpolation; binomial statistics for
injected fault rates.
"""

import math

import numpy as np
import pytest

from edge.hw import ads1256 as A
from edge.hw.ads1256 import ADS1256
from edge.hw.ports import Pins
from edge.hw.ads1256_filter import conversion_taps, modulator_lags_s
from edge.hw.sim_ads1256 import Faults, ProtocolViolation, SimulatedADS1256
from edge.hw.sim_ports import FakeGPIO, SimClock, make_simulated_hardware
from edge.hw.sources import ArraySource, FunctionSource, csv_source

TAU_NS = 1e9 / 7.68e6


def raw_chip(source=None, **kw):
    """Chip + fake ports driven by hand (no driver)."""
    spi, gpio, clock = make_simulated_hardware(source or FunctionSource({}), virtual_clock=True,
                                               **kw)
    spi.mode, spi.max_speed_hz, spi.no_cs = 1, 1_000_000, True
    gpio.setmode(gpio.BCM)
    for p in (22, 18, 27):
        gpio.setup(p, gpio.OUT, initial=gpio.HIGH)
    gpio.setup(17, gpio.IN, pull_up_down=gpio.PUD_UP)
    return spi, gpio, clock, spi.chip


def wait_drdy(gpio, ms=2000):
    assert gpio.wait_for_edge(17, gpio.FALLING, timeout=ms) == 17


# ---------------------------------------------------------------- registers / commands
def test_reset_values_by_rreg():
    spi, gpio, clock, chip = raw_chip()
    wait_drdy(gpio)
    gpio.output(22, 0)
    spi.xfer2([0x10, 0x0A])  # RREG 11 registers from STATUS
    clock.sleep_us(7)  # t6 = 6.51 us
    regs = spi.readbytes(11)
    gpio.output(22, 1)
    # register map reset values: STATUS x1h (ID 3, DRDY bit), MUX 01h, ADCON 20h, DRATE F0h,
    # IO E0h; the sim's OFC = 0 and FSC = 44AC08h (datasheet Table 18 ideal values)
    assert regs[0] >> 4 == 3
    assert regs[1:5] == [0x01, 0x20, 0xF0, 0xE0]
    assert regs[5:] == [0, 0, 0, 0x08, 0xAC, 0x44]
    assert not chip.violations


def test_rreg_wraps_and_wreg_respects_read_only_bits():
    spi, gpio, clock, chip = raw_chip()
    wait_drdy(gpio)
    gpio.output(22, 0)
    spi.xfer2([0x50, 0x00, 0xFB])  # WREG STATUS = FBh: only bits 3:1 writable (ACAL off)
    clock.sleep_us(1)
    spi.xfer2([0x52, 0x00, 0xFF])  # WREG ADCON = FFh: bit 7 reads 0
    clock.sleep_us(1)
    spi.xfer2([0x1A, 0x02])  # RREG from FSC2, 3 registers: wraps to STATUS, MUX
    clock.sleep_us(7)
    out = spi.readbytes(3)
    gpio.output(22, 1)
    assert out[0] == 0x44 and out[1] & 0xF0 == 0x30 and out[1] & 0x0E == 0x0A and out[2] == 0x01
    assert chip.regs[A.ADCON] == 0x7F
    assert not chip.violations


@pytest.mark.parametrize("rate", [30000.0, 1000.0, 100.0])
def test_settling_and_data_period_follow_the_datasheet(rate):
    spi, gpio, clock, chip = raw_chip()
    wait_drdy(gpio)
    gpio.output(22, 0)
    spi.xfer2([0x53, 0x00, A.DRATE_CODES[rate]])
    clock.sleep_us(1)
    spi.xfer2([A.SYNC])
    clock.sleep_us(4)  # t11 = 24 tCLKIN = 3.13 us
    spi.xfer2([A.WAKEUP])
    t_wake = clock.monotonic_ns()
    gpio.output(22, 1)
    wait_drdy(gpio)
    # Table 13: t18 after WAKEUP (0.21 ms at 30 kSPS, 1.18 ms at 1 kSPS, 10.18 ms at 100 SPS)
    assert clock.monotonic_ns() - t_wake == pytest.approx(A.SETTLING_TIME_S[rate] * 1e9, abs=1)
    t1 = clock.monotonic_ns()
    wait_drdy(gpio)  # unread data: DRDY pulses, next falling edge one data period later
    assert clock.monotonic_ns() - t1 == pytest.approx(1e9 / rate, abs=1)


def test_invalid_drate_and_unknown_command_rejected():
    spi, gpio, clock, chip = raw_chip()
    wait_drdy(gpio)
    gpio.output(22, 0)
    with pytest.raises(ProtocolViolation) as ei:
        spi.xfer2([0x53, 0x00, 0x55])
    assert ei.value.kind == "invalid_drate"
    clock.sleep_us(30)
    with pytest.raises(ProtocolViolation) as ei:
        spi.xfer2([0x20])
    assert ei.value.kind == "unknown_command"


def test_violations_counted_when_not_strict():
    spi, gpio, clock, chip = raw_chip(strict=False)
    wait_drdy(gpio)
    spi.xfer2([0x10, 0x00])  # CS high
    gpio.output(22, 0)
    spi.xfer2([0x10, 0x00, 0x00])  # RREG with data clocked at once: t6
    clock.sleep_us(1)
    spi.xfer2([A.SYNC, A.WAKEUP])  # t11
    clock.sleep_us(5)
    spi.xfer2([A.RDATA])
    gpio.output(22, 1)  # released before the data
    assert chip.violations == {"cs_high": 1, "t6": 1, "t11": 1, "cs_released": 1}


def test_calibration_busy_and_drdy_goes_high():
    spi, gpio, clock, chip = raw_chip()
    wait_drdy(gpio)
    gpio.output(22, 0)
    spi.xfer2([A.SELFCAL])
    assert gpio.input(17) == 1  # "DRDY goes high at the beginning of the calibration"
    clock.sleep_us(5)
    with pytest.raises(ProtocolViolation) as ei:
        spi.xfer2([0x10, 0x00])
    assert ei.value.kind == "busy"


def test_order_bit_sends_lsb_first():
    src = FunctionSource({"AIN0": lambda t: 1.0})
    spi, gpio, clock, chip = raw_chip(src)
    wait_drdy(gpio)
    gpio.output(22, 0)
    spi.xfer2([0x50, 0x03, 0x08, 0x08, 0x20, 0xA1])  # ORDER=1, AIN0-AINCOM, PGA 1, 1 kSPS
    gpio.output(22, 1)
    wait_drdy(gpio)
    gpio.output(22, 0)
    spi.xfer2([A.RDATA])
    clock.sleep_us(7)
    b = spi.readbytes(3)
    gpio.output(22, 1)
    raw = (b[0] << 16) | (b[1] << 8) | b[2]
    code = round(1.0 / 5.0 * 2**23)  # 1 V at VREF 2.5 V, PGA 1 (Data Format)
    assert int(f"{raw:024b}"[::-1], 2) == code


# ---------------------------------------------------------------- faults
def test_bit_error_rate_matches_probability():
    p = 0.01
    spi, gpio, clock, chip = raw_chip(faults=Faults(bit_error_prob=p), seed=5)
    wait_drdy(gpio)
    gpio.output(22, 0)
    n = 0
    for _ in range(400):
        spi.xfer2([0x10, 0x0A])
        clock.sleep_us(7)
        spi.readbytes(11)
        clock.sleep_us(1)
        n += 13 * 8
    # binomial(n, p): mean n p, sd sqrt(n p (1 - p)); 5 sd tolerance
    assert abs(chip.stats["bit_flips"] - n * p) < 5 * math.sqrt(n * p * (1 - p))


def test_missing_drdy_fraction_and_stuck_drdy():
    p = 0.1
    spi, gpio, clock, chip = raw_chip(faults=Faults(missing_drdy_prob=p), seed=9)
    wait_drdy(gpio)
    k0 = chip.stats["drdy_missing"] + chip.stats["conversions"]
    clock.sleep_until_ns(clock.monotonic_ns() + int(0.2e9))  # 6000 conversions at 30 kSPS
    gpio.input(17)
    n = chip.stats["drdy_missing"] + chip.stats["conversions"] - k0
    miss = chip.stats["drdy_missing"]
    assert abs(miss / n - p) < 5 * math.sqrt(p * (1 - p) / n)  # binomial, 5 sd
    chip.set_faults(Faults(stuck_drdy_after_s=0.0))
    t0 = clock.monotonic_ns()
    assert gpio.wait_for_edge(17, gpio.FALLING, timeout=50) is None
    assert clock.monotonic_ns() - t0 == 50_000_000  # virtual clock: exactly the timeout
    with pytest.raises(RuntimeError, match="block forever"):
        gpio.wait_for_edge(17, gpio.FALLING)


def test_faults_validation():
    with pytest.raises(ValueError, match="bit_error_prob"):
        Faults(bit_error_prob=1.5)
    with pytest.raises(ValueError, match="input 'AIN12'"):
        make_simulated_hardware(FunctionSource({}), faults=Faults(dropouts=((0, 1, "AIN12"),)))


def test_gpio_misuse_raises():
    chip_src = FunctionSource({})
    spi, gpio, clock = make_simulated_hardware(chip_src, virtual_clock=True)
    with pytest.raises(RuntimeError, match="setmode"):
        gpio.setup(22, gpio.OUT)
    gpio.setmode(gpio.BCM)
    with pytest.raises(RuntimeError, match="OUTPUT"):
        gpio.output(22, 0)
    spi.close()
    with pytest.raises(OSError, match="closed"):
        spi.xfer2([0])


# ---------------------------------------------------------------- clocks
def test_virtual_clock_is_exact():
    c = SimClock(virtual=True)
    c.sleep_us(6.51)
    assert c.monotonic_ns() == 6510
    c.sleep_until_ns(1000)  # never backwards
    assert c.monotonic_ns() == 6510


def test_real_clock_leads_by_at_most_max_lead():
    import time
    c = SimClock(virtual=False, max_lead_us=500)
    w0 = time.monotonic_ns()
    t0 = c.monotonic_ns()
    for _ in range(200):
        c.sleep_us(100)  # 20 ms of simulated time
    wall = time.monotonic_ns() - w0
    sim = c.monotonic_ns() - t0
    assert sim >= 20e6
    assert wall >= sim - 0.5e6  # the simulated time never leads by more than 0.5 ms


# ---------------------------------------------------------------- sources
def test_array_source_matches_numpy_interp():
    rng = np.random.default_rng(2)
    v = rng.normal(size=(50, 3))
    src = ArraySource(0.1, 1000.0, v, inputs=["AIN2", "AIN5", "AINCOM"])
    ts = 0.1 + rng.uniform(0, 0.049, 200)
    tgrid = 0.1 + np.arange(50) / 1000.0
    for t in ts:
        out = src.volts(t)
        # independent reference: numpy.interp per column
        for col, inp in enumerate((2, 5, 8)):
            assert out[inp] == pytest.approx(np.interp(t, tgrid, v[:, col]), abs=1e-12)
        assert out[0] == 0.0
    assert src.volts(0.0)[2] == v[0, 0]  # hold before t0
    assert src.volts(10.0)[5] == v[-1, 1]  # hold after the end
    loop = ArraySource(0.0, 10.0, np.arange(4.0))
    assert loop.volts(0.0)[0] == 0.0 and ArraySource(0.0, 10.0, np.arange(4.0),
                                                     beyond="loop").volts(0.45)[0] == 0.5
    zero = ArraySource(0.0, 10.0, np.ones(4), beyond="zero")
    assert zero.volts(-0.1)[0] == 0.0 and zero.volts(0.1)[0] == 1.0


def test_array_source_rejects_bad_input():
    with pytest.raises(ValueError, match="row 3, column 1"):
        ArraySource(0.0, 10.0, np.array([[0, 0]] * 3 + [[0, np.nan]]))
    with pytest.raises(ValueError, match="rate"):
        ArraySource(0.0, 0.0, np.zeros((3, 1)))
    with pytest.raises(ValueError, match="distinct"):
        ArraySource(0.0, 1.0, np.zeros((3, 2)), inputs=["AIN0", "AIN0"])


def test_csv_source_maps_sensitivity_and_offset(tmp_path):
    p = tmp_path / "meas.csv"
    t = np.arange(20) / 1000.0
    acc = np.sin(2 * np.pi * 25 * t)
    np.savetxt(p, np.column_stack([t, acc, 2 * acc]), delimiter=",",
               header="time,a1,a2", comments="")
    src = csv_source(p, {"a1": ("AIN0", 0.1, 2.5), "a2": (3, 0.05, 0.0)})
    out = src.volts(t[7])
    # volts = offset + sensitivity * value (ARCHITECTURE measurement CSV, SI units)
    assert out[0] == pytest.approx(2.5 + 0.1 * acc[7], abs=1e-12)
    assert out[3] == pytest.approx(0.05 * 2 * acc[7], abs=1e-12)
    with pytest.raises(ValueError, match="'a3' not in header"):
        csv_source(p, {"a3": ("AIN0", 1.0, 0.0)})
    bad = tmp_path / "bad.csv"
    bad.write_text("t,a1\n0,1\n1,2\n")
    with pytest.raises(ValueError, match="first column must be 'time'"):
        csv_source(bad, {"a1": ("AIN0", 1.0, 0.0)})


def test_csv_replay_through_driver(tmp_path):
    from edge.hw.acquire import Acquisition, Channel
    rate = 1000.0
    t = np.arange(300) / rate
    acc = 3.0 * np.sin(2 * np.pi * 12 * t)
    p = tmp_path / "m.csv"
    np.savetxt(p, np.column_stack([t, acc]), delimiter=",", header="time,acc", comments="")
    src = csv_source(p, {"acc": ("AIN1", 0.1, 0.0)})
    spi, gpio, clock = make_simulated_hardware(src, virtual_clock=True)
    adc = ADS1256(spi, gpio, clock)
    acq = Acquisition(adc, [Channel("acc", "AIN1", sensitivity=0.1, unit="m/s^2")], rate=rate)
    acq.start()
    v, tt, f = np.zeros((100, 1)), np.zeros(100, np.int64), np.zeros(100, np.uint8)
    acq.read(v, tt, f)
    # the ADC converts the linear interpolation of the file: the taps over the modulator
    # instants of the window ending at DRDY (edge.hw.ads1256_filter; np.interp as reference)
    h, lags = conversion_taps(rate), modulator_lags_s(rate)
    ref = np.array([h @ np.interp(te * 1e-9 - lags, t, acc) for te in tt])
    assert np.max(np.abs(v[:, 0] - ref)) <= (5.0 / 2**23) / 0.1  # 1 LSB in m/s^2
    assert not spi.chip.violations
    # conversion="ideal": the point value at DRDY (kept for comparisons)
    spi, gpio, clock = make_simulated_hardware(src, virtual_clock=True, conversion="ideal")
    acq = Acquisition(ADS1256(spi, gpio, clock), [Channel("acc", "AIN1", sensitivity=0.1)],
                      rate=rate)
    acq.start()
    acq.read(v, tt, f)
    ref = np.interp(tt * 1e-9, t, acc)
    assert np.max(np.abs(v[:, 0] - ref)) <= (5.0 / 2**23) / 0.1  # 1 LSB in m/s^2


def test_function_source_validation():
    with pytest.raises(TypeError, match="callable"):
        FunctionSource({"AIN0": 1.0})
    with pytest.raises(TypeError, match="volts"):
        SimulatedADS1256(object(), SimClock(virtual=True))
    assert isinstance(FakeGPIO.FALLING, int) and Pins().drdy == 17
