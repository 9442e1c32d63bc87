"""Signal sources for the simulated ADS1256: volts on the nine inputs as a function of time.

A source is any object with ``volts(t_s) -> ndarray (9,)``: the voltages [V] on AIN0..AIN7
and AINCOM (index 8) at time ``t_s`` [s] of the simulation clock. The chip converts like the
real one, the taps of :func:`edge.hw.ads1256_filter.conversion_taps` over the modulator
instants of the window: a source may offer ``window_mean(t_end_s, taps, inputs=None) ->
(9,)`` (exact and fast; ``inputs``: the ones the multiplexer selects, the others may stay 0)
or a vectorised ``volts_at(times_s) -> (n, 9)``; :func:`window_mean` picks the best one a
source has. Three kinds:

* :class:`FunctionSource`: a callable per input, ``f(t_s) -> volts`` (unset inputs at 0 V).
* :class:`ArraySource`: uniformly sampled volts ``(n, n_inputs)`` from ``t0`` at ``rate``,
  linearly interpolated (the base for replays and for simulated structures).
* :func:`csv_source`: a measurement CSV ``time,<channels>`` in SI units (the
  ARCHITECTURE "Measurement" format) mapped to inputs with ``volts = offset +
  sensitivity * value`` per channel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping, Protocol

import numpy as np

from edge.csvio import read_table
from edge.hw.ads1256 import input_index
from edge.hw.ads1256_filter import F_MOD, grid_weights

__all__ = ["Source", "FunctionSource", "ArraySource", "csv_source", "window_mean", "N_INPUTS"]

#: AIN0..AIN7 plus AINCOM.
N_INPUTS = 9


class Source(Protocol):
    def volts(self, t_s: float) -> np.ndarray:
        """Voltages on AIN0..AIN7, AINCOM [V], shape (9,)."""
        ...


class FunctionSource:
    """One callable per input: ``FunctionSource({"AIN0": f, 3: g})``; others at 0 V.

    Parameters
    ----------
    funcs : mapping input -> callable(t_s: float) -> float [V]
        Keys are input names (``"AIN0"``..``"AIN7"``, ``"AINCOM"``) or indices 0..8.
    """

    def __init__(self, funcs: Mapping[object, Callable[[float], float]]):
        self._f = []
        for k, f in funcs.items():
            if not callable(f):
                raise TypeError(f"FunctionSource[{k!r}]: a callable f(t_s) -> volts expected")
            self._f.append((input_index(k), f))
        self._out = np.zeros(N_INPUTS)
        self._lags = None

    def volts(self, t_s: float) -> np.ndarray:
        out = self._out
        for i, f in self._f:
            out[i] = f(t_s)
        return out

    @staticmethod
    def _at(f, t: np.ndarray) -> np.ndarray:
        """``f`` at every instant of ``t``: the whole array at once (numpy functions) or, if
        ``f`` refuses one (``math.sin``), one instant at a time."""
        try:
            v = np.asarray(f(t), dtype=float)
        except (TypeError, ValueError):
            return np.array([f(float(x)) for x in t])
        return v if v.ndim == 0 or v.shape == t.shape else v.reshape(t.shape)

    def volts_at(self, times_s) -> np.ndarray:
        """Voltages at many instants, shape ``(n, 9)``."""
        t = np.asarray(times_s, dtype=float)
        out = np.zeros((t.size, N_INPUTS))
        for i, f in self._f:
            out[:, i] = self._at(f, t)
        return out

    def window_mean(self, t_end_s: float, taps, inputs=None) -> np.ndarray:
        """``sum_i taps_i volts(t_end_s - i / F_MOD)``: each callable of ``inputs`` (default
        all) on the window's modulator instants, weighted by the taps; the others 0."""
        if self._lags is None or self._lags[0] is not taps:
            self._lags = (taps, np.arange(len(taps)) / F_MOD, float(np.sum(taps)))
        t = t_end_s - self._lags[1]
        out = np.zeros(N_INPUTS)
        for i, f in self._f:
            if inputs is not None and i not in inputs:
                continue
            v = self._at(f, t)
            out[i] = v * self._lags[2] if v.ndim == 0 else np.dot(taps, v)  # constant: sum h
        return out


class ArraySource:
    """Uniformly sampled input voltages, linearly interpolated in time.

    Parameters
    ----------
    t0 : float
        Time of row 0 [s].
    rate : float
        Rows per second [Hz].
    volts : ndarray (n, n_inputs)
        Voltages [V]; column j is input j (AIN0.., then AINCOM at 8); ``n_inputs <= 9``,
        missing inputs are 0 V. Non-finite values are rejected.
    inputs : sequence, optional
        Input (name or index) of each column, instead of columns 0, 1, ...
    beyond : "hold" | "loop" | "zero"
        Outside ``[t0, t0 + (n-1)/rate]``: hold the end rows, wrap around, or 0 V.
    """

    def __init__(self, t0: float, rate: float, volts, inputs=None, beyond: str = "hold"):
        v = np.asarray(volts, dtype=np.float64)
        if v.ndim == 1:
            v = v[:, None]
        if v.ndim != 2 or v.shape[0] < 1:
            raise ValueError(f"ArraySource volts: shape (n, n_inputs) expected, got {v.shape}")
        if not np.all(np.isfinite(v)):
            bad = np.argwhere(~np.isfinite(v))[0]
            raise ValueError(f"ArraySource volts: non-finite value at row {bad[0]}, column "
                             f"{bad[1]}")
        if not rate > 0 or not np.isfinite(rate):
            raise ValueError(f"ArraySource rate: must be > 0 Hz, got {rate!r}")
        if beyond not in ("hold", "loop", "zero"):
            raise ValueError(f"ArraySource beyond: 'hold', 'loop' or 'zero', got {beyond!r}")
        cols = list(range(v.shape[1])) if inputs is None else [input_index(i) for i in inputs]
        if len(cols) != v.shape[1] or len(set(cols)) != len(cols) or max(cols) >= N_INPUTS:
            raise ValueError(f"ArraySource inputs: {v.shape[1]} distinct inputs 0..8 needed, "
                             f"got {cols}")
        full = np.zeros((v.shape[0] + 1, N_INPUTS))
        full[:-1, cols] = v
        full[-1] = full[0] if beyond == "loop" else full[-2]
        self._v = full
        self.n = v.shape[0]
        self.t0, self.rate, self.beyond = float(t0), float(rate), beyond
        self._zero = np.zeros(N_INPUTS)
        self._out = np.empty(N_INPUTS)

    def volts(self, t_s: float) -> np.ndarray:
        x = (t_s - self.t0) * self.rate
        n = self.n
        if self.beyond == "loop":
            x %= n
        elif x <= 0.0:
            return self._zero if (self.beyond == "zero" and x < 0.0) else self._v[0]
        elif x >= n - 1:
            return self._zero if (self.beyond == "zero" and x > n - 1) else self._v[n - 1]
        i = int(x)
        f = x - i
        out = self._out
        # linear interpolation between rows i and i+1
        np.multiply(self._v[i], 1.0 - f, out=out)
        out += f * self._v[i + 1]
        return out

    def _rows(self, idx: np.ndarray) -> np.ndarray:
        """Rows ``idx`` (may lie outside 0..n-1) under the ``beyond`` rule, ``(len, 9)``."""
        n = self.n
        if self.beyond == "loop":
            return self._v[idx % n]
        rows = self._v[np.clip(idx, 0, n - 1)]
        if self.beyond == "zero":
            rows = np.where(((idx < 0) | (idx > n - 1))[:, None], 0.0, rows)
        return rows

    def volts_at(self, times_s) -> np.ndarray:
        """:meth:`volts` at many instants, shape ``(n, 9)`` (vectorised)."""
        x = (np.asarray(times_s, dtype=float) - self.t0) * self.rate
        if self.beyond == "hold":
            x = np.clip(x, 0.0, self.n - 1)
        i = np.floor(x).astype(np.intp)
        f = (x - i)[:, None]
        return (1.0 - f) * self._rows(i) + f * self._rows(i + 1)

    def window_mean(self, t_end_s: float, taps, inputs=None) -> np.ndarray:
        """``sum_i taps_i volts(t_end_s - i / F_MOD)``, exact for the linear interpolation
        (the taps become weights on the rows: :func:`edge.hw.ads1256_filter.grid_weights`)."""
        first, w = grid_weights(taps, (t_end_s - self.t0) * self.rate, self.rate / F_MOD)
        return w @ self._rows(first + np.arange(w.size))


def csv_source(path, mapping: Mapping[str, tuple], beyond: str = "hold") -> ArraySource:
    """Replay a measurement CSV (``time,<channels>``, SI units) as input voltages.

    Parameters
    ----------
    path : path-like
        CSV with header ``time,<channel names>``, uniform time step.
    mapping : {channel name: (input, sensitivity [V/unit], offset [V])}
        Each listed column drives ``input`` (name or index) with
        ``volts = offset + sensitivity * value``.
    beyond : see :class:`ArraySource`.

    Returns
    -------
    ArraySource starting at the file's first time stamp.
    """
    path = Path(path)
    t0, values, names = read_table(path, min_rows=2)
    header = ["time", *names]
    data = np.column_stack([t0, values])
    t = data[:, 0]
    dt = np.diff(t)
    if not np.all(dt > 0) or not np.allclose(dt, dt[0], rtol=1e-6, atol=1e-12):
        raise ValueError(f"{path}: column 'time' must be uniformly increasing")
    cols, inputs = [], []
    for name, spec in mapping.items():
        if name not in header[1:]:
            raise ValueError(f"{path}: channel {name!r} not in header {header[1:]}")
        inp, sens, off = spec
        j = header.index(name)
        if not np.all(np.isfinite(data[:, j])):
            raise ValueError(f"{path}: column {name!r} has non-finite values")
        cols.append(float(off) + float(sens) * data[:, j])
        inputs.append(inp)
    rate = 1.0 / float(np.mean(dt))
    return ArraySource(t[0], rate, np.stack(cols, axis=1), inputs=inputs, beyond=beyond)


def window_mean(source, t_end_s: float, taps, inputs=None) -> np.ndarray:
    """One conversion of ``source``: ``sum_i taps_i volts(t_end_s - i / F_MOD)``, shape (9,)
    (at least the ``inputs`` given, e.g. the multiplexer's two).

    Uses the source's own ``window_mean`` if it has one, else its vectorised ``volts_at``,
    else ``volts`` at every modulator instant (exact but slow: thousands of calls)."""
    if hasattr(source, "window_mean"):
        return np.asarray(source.window_mean(t_end_s, taps, inputs), dtype=float)
    taps = np.asarray(taps, dtype=float)
    times = t_end_s - np.arange(taps.size) / F_MOD
    if hasattr(source, "volts_at"):
        return taps @ np.asarray(source.volts_at(times), dtype=float)
    return taps @ np.array([np.array(source.volts(float(t)), dtype=float) for t in times])
