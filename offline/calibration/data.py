"""Force-and-response records for calibration, prepared as paper 003 Sect. 2.4 asks.

A record is a CSV ``time,<columns>`` whose columns are named after the model file's
``[[forces]]`` (inputs) and ``[[sensors]]`` (outputs), SI units. Preparation, in order:

1. **sync**: every column is put on one uniform time grid (the median sample interval) by
   linear interpolation when the time stamps jitter; a per-channel ``delay`` [s] (a sensor
   whose clock or anti-alias filter lags) is removed by sampling that channel at t + delay.
2. **gaps and outliers**: non-finite samples and (sensors only) spikes (a jump of more than
   k = ``outlier_k`` robust stds of the first difference into and out of a sample) are replaced by linear interpolation; more than ``max_bad`` (fraction)
   in a channel is an error naming file and column (a dead sensor), and so is a column whose
   samples are all equal (a dead sensor or load cell, an empty force column) and rows missing
   from the time stamps (a gap of more than one row, or more than ``max_bad`` of the record).
3. **filter**: zero-phase Butterworth low-pass (order 4) at ``filter_hz`` on forces AND
   responses (the same linear filter on input and output keeps the LTI relation).
4. **decimation**: the residual is taken every ``decimate``-th sample (the model still runs at
   the record rate); residual autocorrelation left after that is accounted for by the noise
   groups' likelihood weights (see :mod:`offline.calibration.noise`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from edge.csvio import read_table
from offline._deps import need
from offline.model.update import parse_data


#: largest magnitude of a record's value: products and squares of the columns (the
#: interpolation's slopes, the residuals' sums of squares) overflow float64 from about 1e154
#: on (a cell of 1e308 interpolated to inf); no record in SI units comes near
ABS_MAX = 1e50


@dataclass(frozen=True)
class Prep:
    """Data-preparation settings (``[bayes.data]`` of the model file)."""

    filter_hz: float | None = None
    decimate: int = 1
    outlier_k: float = 8.0
    max_bad: float = 0.01
    delays: dict = field(default_factory=dict)
    skip_s: float = 0.0

    @classmethod
    def from_dict(cls, d: dict | None, where: str = "[bayes.data]") -> "Prep":
        """From a ``[bayes.data]`` table, checked through the model file's schema
        (:func:`offline.model.update.parse_data`)."""
        return cls(**parse_data(d, where))


@dataclass
class Record:
    """One prepared record.

    Attributes
    ----------
    name : str           file name
    dt : float           sample interval [s]
    F : (nt, nf)         forces [N], in ``[[forces]]`` order
    Y : (nt, nch)        responses, in ``[[sensors]]`` order
    used : (nu,) int     sample indices entering the residual
    repaired : dict      {column: number of samples replaced}
    sha256 : str         hash of the file
    """

    name: str
    dt: float
    F: np.ndarray
    Y: np.ndarray
    used: np.ndarray
    repaired: dict
    sha256: str


def _spikes(x, k):
    """Isolated spikes: a jump larger than k robust stds of the first difference into AND out
    of a sample, with opposite signs (a smooth vibration signal never does this: its
    differences are bounded by a few of their MAD)."""
    d = np.diff(x)
    T = k * 1.4826 * max(float(np.median(np.abs(d - np.median(d)))), 1e-300)
    bad = np.zeros(x.size, bool)
    bad[1:-1] = (np.abs(d[:-1]) > T) & (np.abs(d[1:]) > T) & (np.sign(d[:-1]) != np.sign(d[1:]))
    return bad


def _repair(x, bad, where):
    good = ~bad
    if good.sum() < 2:
        raise ValueError(f"{where}: no usable samples (all non-finite or outliers)")
    idx = np.arange(x.size)
    y = x.copy()
    y[bad] = np.interp(idx[bad], idx[good], x[good])
    return y


#: Most consecutive rows a gap in the time stamps may lack before the record is refused:
#: one missing sample is interpolated (as a non-finite one); a longer run is not data.
MAX_GAP_ROWS = 1


def _check_gaps(path, t, dts, dt, max_bad) -> None:
    """Rows missing from the time stamps (an interval of more than 1.5 median intervals):
    refused, naming the file, the row and the time, when a gap lacks more than
    :data:`MAX_GAP_ROWS` rows or the missing rows are more than ``max_bad`` of the record
    (they were interpolated silently: 200 missing rows moved a damping ratio from 0.016 to
    0.056)."""
    gap = dts > 1.5 * dt
    if not gap.any():
        return
    missing = np.rint(dts[gap] / dt).astype(np.int64) - 1
    worst = int(np.argmax(missing))
    row = int(np.flatnonzero(gap)[worst])
    total = int(missing.sum())
    if missing[worst] > MAX_GAP_ROWS or total > max_bad * (t.size + total):
        raise ValueError(f"{path}: {total} row(s) missing from the time stamps (the longest "
                         f"gap: {int(missing[worst])} row(s) after row {row + 2}, t = "
                         f"{t[row]:.6g} s): a record with gaps cannot be calibrated on; cut it "
                         f"at the gap into separate records (--data each)")


def read_record(path, forces, sensors, prep: Prep = Prep()) -> Record:
    """Read and prepare one CSV record (see module docstring). Errors name file and column."""
    path = Path(path)
    t, data, names = read_table(path, min_rows=16)
    want = list(forces) + list(sensors)
    missing = [c for c in want if c not in names]
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}: a calibration record needs the "
                         f"[[forces]] {list(forces)} and [[sensors]] {list(sensors)} (has {names})")
    t = np.asarray(t, float)
    dts = np.diff(t)
    if not np.all(np.isfinite(t)) or np.any(dts <= 0):
        k = int(np.argmax(~np.isfinite(dts) | (dts <= 0)))
        raise ValueError(f"{path}: time must increase strictly (row {k + 2})")
    dt = float(np.median(dts))
    _check_gaps(path, t, dts, dt, prep.max_bad)
    nt = int(np.floor((t[-1] - t[0]) / dt + 1e-9)) + 1
    grid = t[0] + dt * np.arange(nt)
    cols, repaired = {}, {}
    for c in want:
        x = np.asarray(data[:, names.index(c)], float)
        w = f"{path}: column {c!r}"
        bad = ~np.isfinite(x)
        top = float(np.max(np.abs(x[~bad]), initial=0.0))
        if top > ABS_MAX:
            raise ValueError(f"{w}: values up to {top:.3g} (more than {ABS_MAX:g}): not a "
                             "physical value in SI units (a corrupted cell or another unit)")
        xf = _repair(x, bad, w) if bad.any() else x
        if c in sensors:  # forces may be impulsive (a hammer): only non-finite samples there
            bad |= _spikes(xf, prep.outlier_k)
        if bad.mean() > prep.max_bad:
            raise ValueError(f"{w}: {int(bad.sum())} of {x.size} samples non-finite or outliers "
                             f"(more than {prep.max_bad:.1%}): dead or faulty sensor?")
        if bad.any():
            xf = _repair(x, bad, w)
        repaired[c] = int(bad.sum())
        if not np.ptp(xf) > 0:
            raise ValueError(f"{w}: every sample is {float(xf[0]):g}: "
                             + ("no force was applied or recorded (a dead load cell or an "
                                "empty column); for records without a force use --operational"
                                if c in forces else "a dead or disconnected sensor"))
        # sync: uniform grid, channel delay removed (sample at t + delay)
        delay = float(prep.delays.get(c, 0.0))
        cols[c] = np.interp(grid + delay, t, xf)
    F = np.column_stack([cols[c] for c in forces]) if forces else np.zeros((nt, 0))
    Y = np.column_stack([cols[c] for c in sensors])
    if prep.filter_hz is not None:
        if prep.filter_hz >= 0.5 / dt:
            raise ValueError(f"{path}: filter_hz {prep.filter_hz} is not below the Nyquist "
                             f"frequency {0.5 / dt:.1f} Hz")
        sig = need("scipy.signal")
        sos = sig.butter(4, prep.filter_hz, fs=1.0 / dt, output="sos")
        F = sig.sosfiltfilt(sos, F, axis=0) if F.shape[1] else F
        Y = sig.sosfiltfilt(sos, Y, axis=0)
    start = int(round(prep.skip_s / dt))
    used = np.arange(start, nt, prep.decimate)
    if used.size < 8:
        raise ValueError(f"{path}: only {used.size} samples left after skip_s/decimate")
    h = hashlib.sha256(path.read_bytes()).hexdigest()
    return Record(name=path.name, dt=dt, F=F, Y=Y, used=used, repaired=repaired, sha256=h)


#: A sensor's spectrum counts as white when its spectral flatness is at least this fraction of
#: what white noise of the same length gives (:func:`check_not_white`).
WHITE_FRACTION = 0.95


def _flatness(x: np.ndarray, fs: float) -> float:
    """Spectral flatness (geometric over arithmetic mean) of the Welch PSD without DC: 1 for
    a flat spectrum, near 0 for a resonant response."""
    sig = need("scipy.signal")
    _, p = sig.welch(x - x.mean(), fs=fs, nperseg=min(256, max(16, x.size // 4)))
    p = p[1:]
    p = p[p > 0]
    return float(np.exp(np.mean(np.log(p))) / np.mean(p)) if p.size else 1.0


def check_not_white(rec: Record, sensors) -> None:
    """Operational records: refuse (ValueError naming the file and its sensor columns) a
    record in which EVERY sensor's spectrum is as flat as white noise's (flatness at least
    :data:`WHITE_FRACTION` of the mean flatness of 8 seeded white-noise series of the same
    length, computed the same way): no resonance to calibrate on (white noise gave E = 74 +-
    1.3 GPa). Measured on the cantilever of tests/calib_truth.py, 4 s: flatness 0.0 at 1 %
    noise, 0.58 with noise as large as the response, 0.92 at three times it, against 0.98
    for white noise."""
    Y = rec.Y[rec.used[0]:]
    fs = 1.0 / rec.dt
    rng = np.random.default_rng(0)
    white = float(np.mean([_flatness(rng.standard_normal(Y.shape[0]), fs) for _ in range(8)]))
    flat = [_flatness(Y[:, i], fs) for i in range(Y.shape[1])]
    if min(flat) >= WHITE_FRACTION * white:
        cols = ", ".join(f"{c!r} {f:.3f}" for c, f in zip(sensors, flat))
        raise ValueError(f"{rec.name}: every sensor's spectrum is as flat as white noise's "
                         f"(spectral flatness {cols}; white noise of this length: {white:.3f}): "
                         f"no resonance of the structure to calibrate on (a record of noise, "
                         f"or sensors not on the structure)")
