"""The measurement chain of ``vsense-offline simulate``: what the converter makes of the
simulated response (issue 35).

``ideal``: point samples of the response at the row times (the old behaviour). ``ads1256``:
each channel's conversion is the chip's, the taps of
:func:`edge.hw.ads1256_filter.conversion_taps` over the modulator instants of a window ending
at the channel's own instant::

    y_j[r] = sum_i h_i x_j(t_r + o_j - i / F_MOD),    o = channel_instants(drate, mode, n)

(``o_j``: 0 in continuous mode, ``(j - n + 1) / CYCLING_THROUGHPUT_HZ`` in multiplexer
cycling, the row stamped with its last channel's DRDY as the device does; the same function
the simulated chip's timing is checked against). The response is known on the
simulation's fine grid and linearly interpolated between its nodes; the taps then become
weights on the nodes (:func:`edge.hw.ads1256_filter.grid_weights`, exact for that
interpolant). Linear interpolation on a grid of ``s`` steps per row passes a sine at
frequency ``f`` with the gain ``sinc^2(f h)`` seen through a long window: at half the row
rate the error is ``pi^2 / (12 s^2)``; :data:`MIN_STEPS_PER_ROW` = 32 keeps it below 8e-4
(:func:`interpolation_gain_error`), against 1 % sensor noise.

Pure functions on arrays; :func:`offline.simulate.simulate_model` calls them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from edge.hw.ads1256_filter import F_MOD, channel_instants, conversion_taps, grid_weights
from edge.hw.ads1256_spec import DRATE_CODES, row_rates

#: the chains ``simulate`` knows
CHAINS = ("ads1256", "ideal")
#: fine steps per row at least, for the ads1256 chain (module docstring)
MIN_STEPS_PER_ROW = 32


def interpolation_gain_error(steps_per_row: int) -> float:
    """Relative gain error at half the row rate of a window mean over the linear
    interpolation of a grid with ``steps_per_row`` nodes per row: ``pi^2 / (12 s^2)``
    (``1 - sinc^2(1 / (2 s))`` to leading order)."""
    return math.pi ** 2 / (12.0 * steps_per_row ** 2)


@dataclass(frozen=True)
class Chain:
    """A resolved chain: ``kind``, ``drate`` [SPS] and ``mode`` (None for ideal), each
    channel's window end relative to the row's time ``offsets`` [s] and ``refine``, the
    factor the simulation's fine grid is refined by (1 for ideal)."""

    kind: str
    drate: float | None
    mode: str | None
    offsets: np.ndarray
    refine: int
    taps: tuple | None = None  # (h, spacing [s]) of a converter other than the ADS1256

    def pad_steps(self, dt_fine: float) -> int:
        """Fine steps simulated after the last row so that every window ends inside."""
        return int(math.ceil(float(np.max(self.offsets, initial=0.0)) / dt_fine)) + 1 \
            if self.kind != "ideal" else 0


def plan_chain(kind: str, rate: float, n_channels: int, drate=None, mode=None,
               oversample: int = 10) -> Chain:
    """Resolve ``--chain/--drate/--mode`` for a model of ``rate`` rows/s and ``n_channels``.

    ``mode`` defaults to continuous for one channel, cycle for several (as the edge's
    ``[adc] mode = "auto"``); ``drate`` to the rate that gives ``rate`` rows/s in that mode.
    A drate that gives another row rate is refused, naming the one that fits."""
    if kind not in CHAINS:
        raise ValueError(f"chain (--chain): one of {', '.join(CHAINS)}, got {kind!r}")
    if kind == "ideal":
        if drate is not None or mode is not None:
            raise ValueError("drate/mode (--drate/--mode) belong to --chain ads1256, not ideal")
        return Chain("ideal", None, None, np.zeros(n_channels), 1)
    mode = mode or ("continuous" if n_channels == 1 else "cycle")
    if mode not in ("continuous", "cycle"):
        raise ValueError(f"mode (--mode): 'continuous' or 'cycle', got {mode!r}")
    if mode == "continuous" and n_channels != 1:
        raise ValueError(f"mode (--mode) continuous converts one channel; the model has "
                         f"{n_channels} sensors: use --mode cycle")
    rates = row_rates(n_channels, mode)
    fit = [d for d, r in rates.items() if abs(r - rate) <= 1e-6 * rate]
    if drate is None:
        if not fit:
            near = ", ".join(f"{r:.10g} (drate {d:g})" for d, r in rates.items()
                             if 0.25 * rate <= r <= 4 * rate)
            raise ValueError(f"drate (--drate): no ADS1256 data rate gives the model's "
                             f"{rate:.10g} samples/s in {mode} mode with {n_channels} "
                             f"channel(s); row rates near it: {near or 'none'}")
        drate = fit[0]
    drate = float(drate)
    if drate not in DRATE_CODES:
        raise ValueError(f"drate (--drate) {drate:g} SPS: not an ADS1256 rate; choose one "
                         f"of {sorted(DRATE_CODES)}")
    if drate not in fit:
        hint = f"; use --drate {fit[0]:g}" if fit else ""
        raise ValueError(f"drate (--drate) {drate:g} SPS gives {rates[drate]:g} rows/s in "
                         f"{mode} mode with {n_channels} channel(s), but the model's rate "
                         f"is {rate:g} samples/s{hint}")
    refine = max(1, int(math.ceil(MIN_STEPS_PER_ROW / oversample)))
    return Chain("ads1256", drate, mode, row_offsets(drate, mode, n_channels), refine)


def plan_daq(chain, n_channels: int, oversample: int = 10) -> Chain:
    """The resolved chain of a model file's ``daq`` (:class:`edge.acquisition.Chain`): its
    FIR taps (:func:`edge.acquisition.daq_taps`), each channel's window end relative to the
    row (its ``offsets`` negated), the grid refined to :data:`MIN_STEPS_PER_ROW` steps per row
    as for the ADS1256."""
    refine = max(1, int(math.ceil(MIN_STEPS_PER_ROW / oversample)))
    return Chain("daq", float(chain.drate), chain.mode, -chain.offsets_for(n_channels), refine,
                 taps=chain.taps())


def row_offsets(drate: float, mode: str, n_channels: int) -> np.ndarray:
    """Each channel's window end relative to the row's time [s] (<= 0), the row's time being
    its last channel's conversion, as the estimator's measurement model counts it
    (``[acquisition] offsets`` are these values negated): with the multiplexer cycling,
    channel ``j`` ends ``(n - 1 - j) / CYCLING_THROUGHPUT_HZ[drate]`` before it, the
    instant the device stamps the row with (:func:`edge.hw.ads1256_filter.channel_instants`)."""
    return channel_instants(drate, mode, n_channels)


def refine_grid(F: np.ndarray, refine: int, pad: int = 0) -> np.ndarray:
    """A history on a grid ``refine`` times finer, linear between the given steps (what the
    first-order-hold integrators assume anyway), then ``pad`` more steps holding the last
    value. ``F``: ``(nt, m)``; returns ``((nt - 1) refine + 1 + pad, m)``."""
    F = np.asarray(F, dtype=float)
    nt = F.shape[0]
    x = np.arange((nt - 1) * refine + 1) / refine
    out = np.column_stack([np.interp(x, np.arange(nt), F[:, j]) for j in range(F.shape[1])]) \
        if F.shape[1] else np.zeros((x.size, 0))
    return np.vstack([out, np.repeat(out[-1:], pad, axis=0)]) if pad else out


def conversions(y_fine: np.ndarray, dt_fine: float, steps_per_row: int, n_rows: int,
                drate: float, offsets_s, taps=None) -> np.ndarray:
    """Each column of ``y_fine`` (the response on the fine grid, node 0 at row 0) converted
    at ``t_r + offsets_s[j]`` for rows ``r = 0 .. n_rows - 1``, shape ``(n_rows, nch)``.

    Before node 0 the structure is at rest (0); after the last node the last value holds.
    The weights of a window are the same for every row (a row is a whole number of fine
    steps), so each channel is one FIR filter on the fine grid. ``taps``: ``(h, spacing
    [s])`` of another converter (:meth:`edge.acquisition.Chain.taps`) instead of the
    ADS1256's at ``drate``."""
    y = np.asarray(y_fine, dtype=float)
    taps, spacing = (conversion_taps(drate), 1.0 / F_MOD) if taps is None else taps
    spacing = spacing / dt_fine
    out = np.zeros((n_rows, y.shape[1]))
    for j, off in enumerate(np.asarray(offsets_s, dtype=float)):
        first, w = grid_weights(taps, off / dt_fine, spacing)
        front = max(0, -first)
        need = (n_rows - 1) * steps_per_row + first + w.size
        back = max(0, need - y.shape[0])
        x = np.concatenate([np.zeros(front), y[:, j], np.full(back, y[-1, j])])
        win = np.lib.stride_tricks.sliding_window_view(x, w.size)
        start = first + front
        out[:, j] = win[start:start + (n_rows - 1) * steps_per_row + 1:steps_per_row] @ w
    return out


# ------------------------------------------------------------------ the sensors' own dynamics
@dataclass(frozen=True)
class SensorDynamics:
    """Each sensor's dynamics before the converter (``[[sensors]]`` highpass_hz, average_s,
    drift; 0 = none; :mod:`edge.acquisition`), as ``(nch,)`` arrays."""

    highpass_hz: np.ndarray
    average_s: np.ndarray
    drift: np.ndarray

    @classmethod
    def of(cls, sensors) -> SensorDynamics:
        return cls(*(np.array([float(getattr(s, k, 0.0)) for s in sensors]) for k in
                     ("highpass_hz", "average_s", "drift")))

    @property
    def any(self) -> bool:
        return bool(np.any(self.highpass_hz) or np.any(self.average_s)
                    or np.any(self.drift))


def highpass(u: np.ndarray, dt: float, corner_hz: float) -> np.ndarray:
    """The first-order high-pass ``s / (s + a)`` (``a = 2 pi corner_hz``) of the linear
    interpolant of ``u`` (at rest before node 0), exact at the nodes: ``r' = u - a r``, ``y =
    u - a r``, ``r_j+1 = E r_j + (g0 - g1) u_j + g1 u_j+1`` with ``E = e^{-a h}``, ``g0 = (1 -
    E) / a``, ``g1 = g0 - (1 - E (1 + a h)) / (a^2 h)`` (the input linear over the step)."""
    from scipy.signal import lfilter

    a = 2 * math.pi * corner_hz
    E = math.exp(-a * dt)
    g0 = -math.expm1(-a * dt) / a
    g1 = g0 - (1.0 - E * (1.0 + a * dt)) / (a * a * dt)
    r = lfilter([g1, g0 - g1], [1.0, -E], np.asarray(u, dtype=float))
    return u - a * r


def moving_average(u: np.ndarray, dt: float, window_s: float) -> np.ndarray:
    """``(1 / T) int_{t-T}^{t} u`` of the linear interpolant of ``u`` (0 before node 0) at
    the nodes, exact: ``J`` the cumulative trapezoid, ``J(t_j - T)`` by the quadratic
    between its nodes."""
    u = np.asarray(u, dtype=float)
    n = u.size
    J = np.concatenate([[0.0], np.cumsum(0.5 * dt * (u[1:] + u[:-1]))])
    x = window_s / dt
    m = int(math.floor(x + 1e-9))           # a window of whole steps to round-off: theta 0
    theta = max(x - m, 0.0)
    # t_j - T = t_{j-m-1} + (1 - theta) dt:  J_{j-m-1} + dt [(1-th) u0 + (1-th)^2 / 2 (u1 - u0)]
    pad = m + 2
    Jp = np.concatenate([np.zeros(pad), J])
    up = np.concatenate([np.zeros(pad), u])
    i0 = np.arange(n) + pad - m - 1
    w = 1.0 - theta
    Jb = Jp[i0] + dt * (w * up[i0] + 0.5 * w * w * (up[i0 + 1] - up[i0]))
    return (J - Jb) / window_s


def sensor_outputs(y: np.ndarray, dt: float, dyn: SensorDynamics) -> np.ndarray:
    """Each column of ``y`` (the response on a fine grid) through its sensor's high-pass and
    moving average (the offset: :func:`offset_walks`)."""
    out = np.array(y, dtype=float, copy=True)
    for j in range(out.shape[1]):
        if dyn.highpass_hz[j] > 0:
            out[:, j] = highpass(out[:, j], dt, dyn.highpass_hz[j])
        if dyn.average_s[j] > 0:
            out[:, j] = moving_average(out[:, j], dt, dyn.average_s[j])
    return out


def offset_walks(n: int, dt: float, drift, seed) -> np.ndarray:
    """``(n, nch)`` random-walk offsets on a grid of step ``dt``, 0 at node 0: ``b_j+1 =
    b_j + drift sqrt(dt) N(0, 1)`` (seeded by ``seed``, apart from the noise's generator)."""
    drift = np.asarray(drift, dtype=float)
    rng = np.random.default_rng([0x0FF5E7, int(seed or 0)])
    steps = rng.standard_normal((max(n - 1, 0), drift.size)) * (drift * math.sqrt(dt))
    return np.vstack([np.zeros((1, drift.size)), np.cumsum(steps, axis=0)])


def with_walks(runs, chain) -> list:
    """The calibration runs ``runs`` (:class:`offline.calibration_runs.CalRun`) as the device
    records them: each channel whose ``chain`` declares a drifting offset gets its walk
    (:func:`offset_walks` at the rows, seeded by the run's seed) added to ``Y``; the runs
    themselves when no channel drifts."""
    if chain is None or not any(getattr(chain, "drift", ())):
        return list(runs)
    out = []
    for r in runs:
        drift = chain.drift_for(r.Y.shape[1])
        b = offset_walks(r.Y.shape[0], float(r.t[1] - r.t[0]), drift, r.seed)
        out.append(replace(r, Y=r.Y + b))
    return out
