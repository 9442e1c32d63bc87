"""The simulated ADS1256 converts like the chip (issue 35), with the datasheet as the
reference (TI SBAS288K): the conversion's frequency response and its first null (Digital
Filter section, closed form in edge/hw/ads1256_filter.frequency_response), settling after a
multiplexer change (Table 13, t18) and each cycled channel at its own instant (Table 14).

The real driver (edge/hw/ads1256.py, edge/hw/acquire.py) reads the simulator on a virtual
clock (deterministic, no sleeps)."""

import numpy as np
import pytest

from edge.hw.acquire import Acquisition, Channel
from edge.hw.ads1256 import ADS1256
from edge.hw.ads1256_filter import (F_MOD, NUM_AVE, channel_instants, conversion_taps,
                                    frequency_response, grid_weights, modulator_lags_s,
                                    window_s)
from edge.hw.ads1256_spec import CYCLING_THROUGHPUT_HZ, SETTLING_TIME_S
from edge.hw.sim_ports import make_simulated_hardware
from edge.hw.sources import ArraySource, FunctionSource, window_mean

VREF = 2.5
LSB1 = 2 * VREF / 2**23  # V per code at PGA 1 (datasheet Data Format)


def read(source, chans, drate, n, speed_hz=1_920_000, **chip_kw):
    spi, gpio, clock = make_simulated_hardware(source, virtual_clock=True, **chip_kw)
    adc = ADS1256(spi, gpio, clock, vref=VREF, speed_hz=speed_hz,
                  drdy_timeout_s=0.1 + 3 / drate)  # 2.5 SPS: 0.4 s per conversion
    acq = Acquisition(adc, chans, rate=drate)
    acq.start()
    v, t, f = np.zeros((n, len(chans))), np.zeros(n, np.int64), np.zeros(n, np.uint8)
    assert acq.read(v, t, f) == n
    assert not spi.chip.violations and not f.any()
    return v, t * 1e-9, spi.chip


def sine_gain(v, t, f_hz):
    """Amplitude of the sine at f_hz in v(t) (least squares on sin, cos and a constant)."""
    A = np.column_stack([np.sin(2 * np.pi * f_hz * t), np.cos(2 * np.pi * f_hz * t),
                         np.ones_like(t)])
    c = np.linalg.lstsq(A, v, rcond=None)[0]
    return float(np.hypot(c[0], c[1]))


# ---------------------------------------------------------------- frequency response
@pytest.mark.parametrize("drate", [30000.0, 3750.0, 1000.0])
@pytest.mark.parametrize("frac", [0.05, 0.23, 0.41, 0.77, 1.37])
def test_sine_gain_through_the_driver_is_the_datasheet_response(drate, frac):
    f = frac * drate  # 0.77 and 1.37: above Nyquist, aliased but still |H(f)|
    src = FunctionSource({"AIN0": lambda t: 2.0 * np.sin(2 * np.pi * f * t)})
    v, t, _ = read(src, [Channel("a", "AIN0")], drate, 200)
    # reference: the datasheet's closed form |H(f)|; 200 conversions of 1/2-LSB
    # quantisation on a 2 V sine: least-squares error ~1e-7, asserted to 1e-5
    assert sine_gain(v[:, 0], t, f) / 2.0 == pytest.approx(frequency_response(drate, f),
                                                           abs=1e-5)


@pytest.mark.parametrize("drate", sorted(NUM_AVE))
def test_every_rate_gain_and_first_null(drate):
    # every DRATE: a sine at 0.3 x the data rate has the closed form's gain, one at the data
    # rate itself (the first null: Num_Ave > 1 averager, or the sinc5 at 30 kHz) vanishes
    n = 24
    f = 0.3 * drate
    src = FunctionSource({"AIN0": lambda t: np.sin(2 * np.pi * f * t),
                          "AIN1": lambda t: np.sin(2 * np.pi * drate * t + 0.4)})
    v, t, _ = read(src, [Channel("a", "AIN0")], drate, n)
    assert sine_gain(v[:, 0], t, f) == pytest.approx(frequency_response(drate, f), abs=1e-5)
    v, t, _ = read(src, [Channel("b", "AIN1")], drate, n)
    # reference: |H(drate)| < 1e-12 (closed form); quantisation 1/2 LSB, asserted to 2 LSB
    assert np.max(np.abs(v[:, 0])) <= 2 * LSB1


def test_ideal_conversion_is_the_point_value():
    # conversion="ideal": the old point sample at DRDY (kept for comparisons), a 450 Hz sine
    # at 1000 SPS unattenuated, where the chip's gain is |H(450)| = 0.61
    src = FunctionSource({"AIN0": lambda t: np.sin(2 * np.pi * 450.0 * t)})
    v, t, _ = read(src, [Channel("a", "AIN0")], 1000.0, 100, conversion="ideal")
    assert np.max(np.abs(v[:, 0] - np.sin(2 * np.pi * 450.0 * t))) <= LSB1
    with pytest.raises(ValueError, match="conversion"):
        read(src, [Channel("a", "AIN0")], 1000.0, 1, conversion="sinc")


# ---------------------------------------------------------------- settling and timing
def test_window_fits_in_the_settling_time_at_every_rate():
    # Table 13's t18 is longer than the conversion's window at every rate: the first
    # conversion after SYNC/WAKEUP (or a MUX write) sees only the new input
    for drate in NUM_AVE:
        assert window_s(drate) < SETTLING_TIME_S[drate], drate


@pytest.mark.parametrize("drate", [30000.0, 3750.0, 1000.0])
def test_step_response_is_the_window_mean(drate):
    # a 1 V step at t_s: every conversion is the fraction of the taps after the step
    # (reference: the taps summed directly), 0 before the window reaches it, 1 once settled
    t_s = 0.0101234
    src = FunctionSource({"AIN0": lambda t: np.where(t >= t_s, 1.0, 0.0)})
    n = int(0.02 * drate)
    v, t, _ = read(src, [Channel("a", "AIN0")], drate, n)
    h, lags = conversion_taps(drate), modulator_lags_s(drate)
    ref = np.array([h[tk - lags >= t_s].sum() for tk in t])
    assert np.max(np.abs(v[:, 0] - ref)) <= LSB1  # quantisation 1/2 LSB
    assert ((ref > 0) & (ref < 1)).sum() >= 1  # some conversions straddle the step
    assert np.all(v[t >= t_s + window_s(drate), 0] == pytest.approx(1.0, abs=LSB1))


@pytest.mark.parametrize("drate", [30000.0, 3750.0, 1000.0])
def test_multiplexer_change_is_settled_at_the_first_conversion(drate):
    # cycling between +1.5 V and -0.7 V: with a mixed window a conversion would lie between
    # them; the chip's (t18 after the MUX change) is exactly its own input, to 1/2 LSB
    src = FunctionSource({"AIN0": lambda t: 1.5, "AIN1": lambda t: -0.7})
    v, _, _ = read(src, [Channel("a", "AIN0"), Channel("b", "AIN1")], drate, 50)
    assert np.max(np.abs(v[:, 0] - 1.5)) <= LSB1 and np.max(np.abs(v[:, 1] + 0.7)) <= LSB1


@pytest.mark.parametrize("drate", [30000.0, 3750.0, 1000.0])
def test_cycled_channels_are_the_ramp_at_their_own_window_centroid(drate):
    # ramps: a conversion of a ramp is the ramp at the taps' centroid, (L - 1) / (2 F_MOD)
    # before the window's end (the taps are symmetric); channel j's window ends at its own
    # DRDY, j channel periods after the row's stamp
    a, b = 40.0, -25.0  # V/s
    src = FunctionSource({"AIN0": lambda t: a * t - 1.0, "AIN1": lambda t: b * t + 2.0,
                          "AIN2": lambda t: 0.5 * a * t})
    v, t, chip = read(src, [Channel(c, p) for c, p in
                            (("a", "AIN0"), ("b", "AIN1"), ("c", "AIN2"))], drate, 30)
    tau = (len(conversion_taps(drate)) - 1) / (2 * F_MOD)
    tc = np.mean(np.diff(t)) / 3  # the simulator's channel period (driver's SPI timing)
    # the row is stamped with its last channel's DRDY: channel j ended (2 - j) periods before
    assert np.max(np.abs(v[:, 0] - (a * (t - 2 * tc - tau) - 1.0))) <= 2 * LSB1
    assert np.max(np.abs(v[:, 1] - (b * (t - tc - tau) + 2.0))) <= 2 * LSB1
    assert np.max(np.abs(v[:, 2] - 0.5 * a * (t - tau))) <= 2 * LSB1
    # channel_instants: (j - 2) / CYCLING_THROUGHPUT_HZ (Table 14, SCLK = f_CLKIN/4, 3-byte
    # WREG); the simulated driver's SPI overhead gives the same to 3 % of a channel period (as
    # test_ads1256's Table 14 check)
    off = channel_instants(drate, "cycle", 3)
    assert off[2] == 0.0 and off[0] == pytest.approx(-2 / CYCLING_THROUGHPUT_HZ[drate])
    assert -off[1] == pytest.approx(tc, rel=0.03)


def test_channel_instants_validation():
    assert channel_instants(1000.0, "continuous", 1).tolist() == [0.0]
    with pytest.raises(ValueError, match="n_channels=2"):
        channel_instants(1000.0, "continuous", 2)
    with pytest.raises(ValueError, match="mode"):
        channel_instants(1000.0, "cycling!", 2)
    with pytest.raises(ValueError, match="1234"):
        channel_instants(1234.0, "cycle", 2)


# ---------------------------------------------------------------- sources
@pytest.mark.parametrize("kind", ["linear", "hold"])
@pytest.mark.parametrize("x_end,grid_hz", [(100.31, 10000.0), (-3.2, 60000.0),
                                           (12345.678, 1000.0)])
def test_grid_weights_equal_the_taps_on_the_interpolant(kind, x_end, grid_hz):
    # reference: every modulator instant interpolated directly (np.interp / floor)
    h = conversion_taps(1000.0)
    x = x_end - np.arange(h.size) * grid_hz / F_MOD
    y = np.random.default_rng(3).standard_normal(int(x_end) + 300)
    xs = x + 100  # shift the grid so that every node used exists
    direct = h @ (np.interp(xs, np.arange(y.size), y) if kind == "linear"
                  else y[np.floor(xs).astype(int)])
    first, w = grid_weights(h, x_end, grid_hz / F_MOD, kind)
    assert w.sum() == pytest.approx(1.0, abs=1e-12)
    assert w @ y[first + 100:first + 100 + w.size] == pytest.approx(direct, abs=1e-9)


@pytest.mark.parametrize("beyond", ["hold", "loop", "zero"])
def test_array_source_window_mean_is_the_taps_over_volts_at(beyond):
    # the fast path (grid weights) equals the taps over the vectorised interpolation, also
    # where the window reaches beyond the record (the `beyond` rule)
    rng = np.random.default_rng(5)
    src = ArraySource(0.01, 5000.0, rng.standard_normal((40, 2)), inputs=["AIN3", "AINCOM"],
                      beyond=beyond)
    h = conversion_taps(3750.0)
    for t_end in (0.0105, 0.0123456, 0.0185, 0.0191, 0.02):
        ref = h @ src.volts_at(t_end - modulator_lags_s(3750.0))
        np.testing.assert_allclose(src.window_mean(t_end, h), ref, atol=1e-9)
    # volts_at agrees with the scalar volts inside the record
    for t in (0.0101, 0.0133, 0.0177):
        np.testing.assert_allclose(src.volts_at([t])[0], src.volts(t), atol=1e-12)


def test_window_mean_falls_back_to_volts_for_plain_sources():
    class Plain:  # only volts(t): evaluated at every modulator instant (slow but exact)
        def volts(self, t):
            out = np.zeros(9)
            out[0] = 3.0 * t
            return out

    h = conversion_taps(7500.0)
    tau = (h.size - 1) / (2 * F_MOD)
    # a ramp's conversion is the ramp at the centroid (to round-off)
    assert window_mean(Plain(), 0.5, h)[0] == pytest.approx(3.0 * (0.5 - tau), abs=1e-12)
    # scalar-only callables (math) in a FunctionSource: called one instant at a time
    import math
    f = FunctionSource({"AIN0": lambda t: 3.0 * math.fsum([t])})
    assert window_mean(f, 0.5, h)[0] == pytest.approx(3.0 * (0.5 - tau), abs=1e-12)


def test_function_source_window_mean_is_the_taps_over_volts_at():
    src = FunctionSource({"AIN0": lambda t: np.sin(2 * np.pi * 61.0 * t), "AIN4": lambda t: 0.25,
                          "AINCOM": lambda t: 1e-3 * t})
    for drate in (30000.0, 1000.0):
        h = conversion_taps(drate)
        ref = h @ src.volts_at(0.3 - modulator_lags_s(drate))
        np.testing.assert_allclose(src.window_mean(0.3, h), ref, atol=1e-12)


def test_daemon_staircase_source_window_mean_is_the_taps_over_its_volts():
    # the daemon's --simulate adapter holds each sample of the bundle rate: its fast window
    # mean equals the taps over its own volts(t) at every modulator instant
    from edge.daemon.simulate import InputSource

    class Chunks:
        def __init__(self):
            self.rng = np.random.default_rng(2)

        def volts(self, n):
            return self.rng.standard_normal((n, 2))

    fast, slow = InputSource(Chunks(), 1000.0, [0, 3]), InputSource(Chunks(), 1000.0, [0, 3])
    fast.t0 = slow.t0 = 1.0
    h = conversion_taps(1000.0)
    # away from the staircase's steps (a tap exactly on a step may fall on either side)
    for t_end in 1.0 + np.array([0.0023, 0.0105, 0.5004, 1.2347]):
        ref = h @ np.array([slow.volts(t)[[0, 3]] for t in t_end - modulator_lags_s(1000.0)])
        np.testing.assert_allclose(fast.window_mean(t_end, h)[[0, 3]], ref, atol=1e-9)
