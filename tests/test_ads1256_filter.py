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
