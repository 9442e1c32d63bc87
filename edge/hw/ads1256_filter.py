"""The ADS1256's digital filter as data: what one conversion is, as a weighting of the input
over time (TI SBAS288K, Digital Filter section, Figure 13 and the DRATE register table).

The delta-sigma modulator samples the input at ``f_mod = f_CLKIN / 4`` (1.92 MHz for the
7.68 MHz crystal). A fixed sinc5 filter decimates by 64 to 30 kSPS; a programmable averager
(a first-order sinc) then averages ``Num_Ave = 30000 / DRATE`` of those outputs. One
conversion is therefore a finite impulse response over the modulator's samples::

    y_k = sum_i h_i x(t_k - i / f_mod),      i = 0 .. 64 (Num_Ave + 4) - 4

    h = (box_64 * box_64 * box_64 * box_64 * box_64) * up_64(box_Num_Ave),  sum(h) = 1

(``box_n``: n ones; ``*``: convolution; ``up_64``: the averager's taps spaced 64 modulator
samples apart.) Its frequency response is the product of the two sinc filters::

    |H(f)| = |sin(64 pi f / f_mod) / (64 sin(pi f / f_mod))|^5
             x |sin(Num_Ave pi f / 30 kHz) / (Num_Ave sin(pi f / 30 kHz))|

with its first null at the data rate (``Num_Ave > 1``) and at 30 kHz for DRATE 30000. The
window is ``(Num_Ave + 4) / 30 kHz`` long (1.133 ms at 1000 SPS, 0.4 ms at 3750 SPS), which
with the filter's pipeline is the settling time t18 of Table 13 (1.18 ms, 0.44 ms).

``t_k`` is the instant the conversion's window ends (DRDY falls right after it). The
simulator (:mod:`edge.hw.sim_ads1256`), ``vsense-offline simulate`` and the estimator's
measurement model all use :func:`conversion_taps`, so that they agree by construction.
"""

from __future__ import annotations

import math

import numpy as np

#: crystal and modulator rate [Hz]
F_CLKIN = 7.68e6
F_MOD = F_CLKIN / 4.0
#: sinc5 decimation and output rate
SINC_DECIMATION = 64
SINC_ORDER = 5
F_SINC = F_MOD / SINC_DECIMATION  # 30 kSPS

#: Num_Ave of each data rate [DRATE register table]: the averager's length
NUM_AVE = {
    30000.0: 1, 15000.0: 2, 7500.0: 4, 3750.0: 8, 2000.0: 15, 1000.0: 30, 500.0: 60,
    100.0: 300, 60.0: 500, 50.0: 600, 30.0: 1000, 25.0: 1200, 15.0: 2000, 10.0: 3000,
    5.0: 6000, 2.5: 12000,
}


def num_ave(drate: float) -> int:
    """``Num_Ave`` of a data rate [SPS]; ValueError naming the valid rates otherwise."""
    for r, n in NUM_AVE.items():
        if math.isclose(r, float(drate), rel_tol=1e-9):
            return n
    raise ValueError(f"data rate {drate!r} SPS: not an ADS1256 rate; choose one of "
                     f"{sorted(NUM_AVE)}")


def conversion_taps(drate: float) -> np.ndarray:
    """The taps ``h_i`` of one conversion at the modulator rate ``F_MOD``, ``h_0`` weighting
    the newest modulator sample (the window's end); ``sum(h) = 1`` (unity DC gain).

    Length ``64 (Num_Ave + 4) - 4`` (2172 at 1000 SPS)."""
    n = num_ave(drate)
    sinc = np.ones(SINC_DECIMATION)
    h = sinc
    for _ in range(SINC_ORDER - 1):
        h = np.convolve(h, sinc)
    avg = np.zeros(SINC_DECIMATION * (n - 1) + 1)
    avg[::SINC_DECIMATION] = 1.0
    h = np.convolve(h, avg)
    return h / h.sum()


def window_s(drate: float) -> float:
    """Length of one conversion's window [s]: ``(len(taps) - 1) / F_MOD``."""
    return (SINC_DECIMATION * (num_ave(drate) + SINC_ORDER - 1) - SINC_ORDER + 1) / F_MOD


def frequency_response(drate: float, f) -> np.ndarray:
    """``|H(f)|`` of the datasheet's closed form (module docstring) at frequencies ``f`` [Hz]
    (the reference the taps are tested against)."""
    f = np.asarray(f, dtype=float)
    n = num_ave(drate)

    def dirichlet(m, x):
        s = np.sin(np.pi * x)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.sin(m * np.pi * x) / (m * s)
        return np.where(np.abs(s) < 1e-15, 1.0, r)

    return np.abs(dirichlet(SINC_DECIMATION, f / F_MOD)) ** SINC_ORDER \
        * np.abs(dirichlet(n, f / F_SINC))
