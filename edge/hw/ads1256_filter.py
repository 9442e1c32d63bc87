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

from edge.hw.ads1256_spec import CYCLING_THROUGHPUT_HZ, _nearest_rate

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


def _dirichlet(m: int, x: np.ndarray) -> np.ndarray:
    """``sin(m pi x) / (m sin(pi x))``, at integer ``x = k`` its limit ``(-1)^(k (m - 1))``."""
    s = np.sin(np.pi * x)
    k = np.rint(x)
    at_pole = np.abs(x - k) < 1e-12
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.sin(m * np.pi * x) / (m * s)
    return np.where(at_pole, np.where((k * (m - 1)) % 2 == 0, 1.0, -1.0), r)


def frequency_response(drate: float, f) -> np.ndarray:
    """``|H(f)|`` of the datasheet's closed form (module docstring) at frequencies ``f`` [Hz]
    (the reference the taps are tested against)."""
    f = np.asarray(f, dtype=float)
    n = num_ave(drate)
    return np.abs(_dirichlet(SINC_DECIMATION, f / F_MOD)) ** SINC_ORDER \
        * np.abs(_dirichlet(n, f / F_SINC))


def conversion_response(drate: float, f) -> np.ndarray:
    """``H(f) = sum_i h_i exp(-2 pi j f i / f_mod)`` of :func:`conversion_taps` (complex, from
    the window's end) in closed form: each box of ``m`` taps is a geometric sum,
    ``sum_(i<m) z^i = exp(-j pi x (m - 1)) sin(m pi x) / sin(pi x)`` for ``z = exp(-2 pi j
    x)``, so with ``x = f / f_mod`` and ``L - 1 = 5 * 63 + 64 (Num_Ave - 1)``::

        H(f) = exp(-j pi x (L - 1)) D_64(x)^5 D_Num_Ave(64 x),   D_m(x) = sin(m pi x) / (m sin(pi x))

    The same numbers as the taps' direct sum (to 1e-12, tests/test_ads1256_filter.py) at a
    cost independent of the taps' length (2,172 at 1000 SPS)."""
    f = np.asarray(f, dtype=float)
    n = num_ave(drate)
    x = f / F_MOD
    span = SINC_ORDER * (SINC_DECIMATION - 1) + SINC_DECIMATION * (n - 1)   # L - 1
    return (np.exp(-1j * np.pi * x * span) * _dirichlet(SINC_DECIMATION, x) ** SINC_ORDER
            * _dirichlet(n, SINC_DECIMATION * x))


def modulator_lags_s(drate: float) -> np.ndarray:
    """``i / F_MOD`` for every tap of :func:`conversion_taps`: how long before the window's
    end each modulator sample is taken [s] (``y = taps @ x(t_end - lags)``)."""
    return np.arange(len(conversion_taps(drate))) / F_MOD


_PREFIX: dict = {}


def _prefix_sums(taps: np.ndarray):
    """``(0, cumsum(h)), (0, cumsum(h i))`` of a taps array, cached while it lives."""
    hit = _PREFIX.get(id(taps))
    if hit is not None and hit[0] is taps:
        return hit[1], hit[2]
    h = np.asarray(taps, dtype=float)
    c0 = np.concatenate([[0.0], np.cumsum(h)])
    c1 = np.concatenate([[0.0], np.cumsum(h * np.arange(h.size))])
    if len(_PREFIX) > 64:
        _PREFIX.clear()
    _PREFIX[id(taps)] = (taps, c0, c1)
    return c0, c1


def grid_weights(taps, x_end: float, spacing: float, kind: str = "linear"):
    """A conversion as weights on the nodes of a uniform grid the input is known on.

    The window ends at ``x_end`` (grid units: node ``k`` at ``x = k``); tap ``i`` samples
    the input at ``x_i = x_end - i spacing`` (``spacing``: grid steps per modulator period,
    ``grid rate / F_MOD``). Between nodes the input is linearly interpolated
    (``kind="linear"``) or held at the earlier node (``"hold"``, a staircase). Exact for that
    interpolant::

        sum_i taps_i x(x_end - i spacing) = sum_m w_m x[first + m]

    Per grid cell ``[k, k+1)`` only the sums of ``h_i`` and ``h_i i`` over its taps matter
    (prefix sums: a few operations per cell, not per tap). The window's end within its cell
    is rounded to 2^-32 of a cell and the weights of each such position are kept (a periodic
    sampler asks for the same few again and again). Returns ``(first, w)``: the first node's
    index (an int) and the weights (sum 1), not to be modified.
    """
    if kind not in ("linear", "hold"):
        raise ValueError(f"grid_weights kind: 'linear' or 'hold', got {kind!r}")
    k0 = math.floor(x_end)
    q = round((float(x_end) - k0) * _CELL_STEPS)
    if q == _CELL_STEPS:
        k0, q = k0 + 1, 0
    key = (id(taps), q, float(spacing), kind)
    hit = _WEIGHTS.get(key)
    if hit is None or hit[0] is not taps:
        if len(_WEIGHTS) > 4096:
            _WEIGHTS.clear()
        hit = _WEIGHTS[key] = (taps, *_cell_weights(taps, q / _CELL_STEPS, spacing, kind))
    return k0 + hit[1], hit[2]


_CELL_STEPS = 1 << 32
_WEIGHTS: dict = {}


def _cell_weights(taps, xr: float, spacing: float, kind: str):
    """:func:`grid_weights` for a window ending at ``xr`` in [0, 1) (node 0 at 0)."""
    c0, c1 = _prefix_sums(taps)
    n_taps, s = c0.size - 1, float(spacing)
    first = math.floor(xr - (n_taps - 1) * s)
    k = np.arange(first, 1)  # cells first..0 (relative)
    # taps in cell k: k <= xr - i s < k + 1  <=>  (xr - k - 1) / s < i <= (xr - k) / s
    hi = np.clip(np.floor((xr - k) / s).astype(np.intp) + 1, 0, n_taps)
    lo = np.clip(np.floor((xr - k - 1) / s).astype(np.intp) + 1, 0, n_taps)
    s0 = c0[hi] - c0[lo]
    if kind == "hold":
        return first, s0
    f1 = (xr - k) * s0 - s * (c1[hi] - c1[lo])  # sum h_i (x_i - k) over the cell
    w = np.zeros(k.size + 1)
    w[:-1] = s0 - f1
    w[1:] += f1
    return first, w


def channel_instants(drate: float, mode: str, n_channels: int) -> np.ndarray:
    """When each channel of a row is converted: the end of its conversion window relative to
    the row's time stamp [s] (<= 0), shape ``(n_channels,)``.

    The row's time stamp is the DRDY fall of its last channel (what
    :class:`edge.hw.acquire.Acquisition` records, and the instant the estimator's
    measurement model counts a row from). ``continuous`` (one channel, RDATAC): ``[0]``.
    ``cycle``: the datasheet's multiplexer cycling converts the channels one after another,
    each a settled conversion started by WREG MUX + SYNC + WAKEUP after the previous DRDY:
    t18 (Table 13) plus the SPI command overhead, ``1 / CYCLING_THROUGHPUT_HZ`` (Table 14,
    t19) per channel, so channel ``j`` ends ``(n - 1 - j) / CYCLING_THROUGHPUT_HZ[drate]``
    before the row's stamp and a row takes ``n_channels`` of them (``row_rates``).
    """
    n = int(n_channels)
    if n < 1:
        raise ValueError(f"n_channels: at least 1, got {n_channels!r}")
    r = _nearest_rate(drate)
    if mode == "continuous":
        if n != 1:
            raise ValueError(f"mode 'continuous' converts one channel, got n_channels={n}; "
                             "use mode 'cycle' for several")
        return np.zeros(1)
    if mode != "cycle":
        raise ValueError(f"mode: 'continuous' or 'cycle', got {mode!r}")
    return (np.arange(n) - (n - 1)) / CYCLING_THROUGHPUT_HZ[r]
