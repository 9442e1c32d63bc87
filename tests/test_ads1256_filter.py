"""The ADS1256 conversion filter (edge/hw/ads1256_filter.py) against the datasheet's closed
form of its frequency response (TI SBAS288K, Digital Filter section)."""

import numpy as np
import pytest

from edge.hw.ads1256_filter import (F_MOD, NUM_AVE, conversion_taps, frequency_response,
                                    num_ave, window_s)


@pytest.mark.parametrize("drate", [30000.0, 3750.0, 1000.0, 100.0])
def test_taps_have_the_datasheet_frequency_response(drate):
    h = conversion_taps(drate)
    assert h.size == 64 * (NUM_AVE[drate] + 4) - 4
    assert h.sum() == pytest.approx(1.0, abs=1e-12)  # unity DC gain
    f = np.array([1.0, 10.0, 0.1 * drate, 0.3 * drate, 0.5 * drate, 0.9 * drate, 2.5 * drate])
    H = np.abs(np.exp(-2j * np.pi * np.outer(f, np.arange(h.size)) / F_MOD) @ h)
    # DTFT of the taps = the closed form, to round-off (1e-12)
    np.testing.assert_allclose(H, frequency_response(drate, f), atol=1e-12)


@pytest.mark.parametrize("drate", [15000.0, 1000.0, 100.0])
def test_first_null_at_the_data_rate(drate):
    # the averager's first null is the data rate itself (Num_Ave > 1): below 1e-12
    assert frequency_response(drate, [drate])[0] < 1e-12
    # half the data rate passes (0.42 at 15000 SPS, where the sinc5 already drops)
    assert frequency_response(drate, [0.5 * drate])[0] > 0.4


def test_window_and_settling_agree():
    # window = (Num_Ave + 4) / 30 kHz - 4 / f_mod: 1.13125 ms at 1000 SPS; Table 13's
    # settling time t18 (1.18 ms) is that window plus a pipeline of 42-52 us at every rate
    from edge.hw.ads1256_spec import SETTLING_TIME_S
    for drate in NUM_AVE:
        w = window_s(drate)
        assert 0.040e-3 < SETTLING_TIME_S[drate] - w < 0.055e-3, drate


def test_unknown_rate_is_named():
    with pytest.raises(ValueError, match="1234"):
        num_ave(1234.0)


@pytest.mark.parametrize("drate", [r for r in NUM_AVE if NUM_AVE[r] <= 300])
def test_closed_form_response_is_the_taps_sum(drate):
    # H(f) = sum_i h_i exp(-2 pi j f i / f_mod), the taps' direct sum (the reference), against
    # the closed form, phase included, on a grid up to 100 kHz with the poles of both sincs
    # (multiples of 30 kHz and of the data rate) on it. 1e-12: the direct sum's rounding
    # over at most 19,452 taps (measured 7e-16 at 30000 SPS to 2.5e-14 at 100 SPS)
    from edge.hw.ads1256_filter import conversion_response

    h = conversion_taps(drate)
    f = np.unique(np.concatenate([np.linspace(0.0, 1e5, 401), [30000.0, 60000.0, 90000.0],
                                  drate * np.arange(1, 4), [1e-3, 0.5 * drate]]))
    lag = np.arange(h.size) / F_MOD
    ref = np.array([np.exp(-2j * np.pi * fk * lag) @ h for fk in f])
    np.testing.assert_allclose(conversion_response(drate, f), ref, rtol=0, atol=1e-12)


def test_chain_response_uses_the_same_numbers_for_every_channel_offset():
    # edge.acquisition.Chain.response for the ADS1256 (closed form) against the taps' sum
    # times each channel's delay exp(-2 pi j f o_c), two cycled channels at 3750 SPS
    from edge.acquisition import Chain

    off = (0.0, 4.6e-4)
    c = Chain("ads1256", 3750.0, "cycle", off)
    f = np.linspace(0.0, 600.0, 97)
    h = conversion_taps(3750.0)
    base = np.exp(-2j * np.pi * np.outer(f, np.arange(h.size) / F_MOD)) @ h
    ref = base[:, None] * np.exp(-2j * np.pi * np.outer(f, off))
    np.testing.assert_allclose(c.response(f, 2), ref, rtol=0, atol=1e-12)
