"""Streaming rainflow count (ASTM E1049-85 four-point method) of one or more hotspots.

**Turning points.** Non-finite samples (gaps) are skipped: the samples either side of a gap
are joined. Repeated equal samples are one sample. The first sample is a reversal (the start
of the record, as in ASTM E1049 and fatpack). After it the counter holds the *partial
extremum* ``c``, the latest sample, and the direction ``d`` of the run that ends in it: a
sample ``v`` with ``(v - c) d > 0`` extends the run (``c = v``); one with ``(v - c) d < 0``
confirms ``c`` as a turning point, which is pushed on the residue, and starts the opposite
run (``c = v, d = -d``).

**Four-point method.** With the residue ``S_0 .. S_{k-1}`` (``S_{k-1}`` the newest turning
point), whenever ``k >= 4`` and the inner range ``|S_{k-2} - S_{k-3}|`` is at most both
neighbouring ranges ``|S_{k-3} - S_{k-4}|`` and ``|S_{k-1} - S_{k-2}|``, the pair
``(S_{k-3}, S_{k-2})`` is a closed cycle: it is counted (range ``|S_{k-2} - S_{k-3}|``, mean
``(S_{k-3} + S_{k-2}) / 2``) and removed, and the test repeats. This is the rule of
Amzallag et al. (Int. J. Fatigue 16, 1994) and ISO 12110-2, the one fatpack's
``find_rainflow_cycles`` applies to a whole record.

**Why the count does not depend on the cut.** Every step reads only the state (residue,
``c``, ``d``) and the next sample, so blocks of any size give the same sequence of pushes. A
whole-record count (fatpack on ``find_reversals``) also takes the last sample as a reversal;
here it stays the partial extremum until a later sample confirms it. ``finish()`` pushes it on
a copy of the residue: committed cycles + ``finish()`` cycles = the whole-record count.

**Bounded residue.** After the four-point test the residue has no inner range smaller than
both neighbours: its ranges first grow then shrink (a diverging then converging sequence), and
each turning point of a signal with ``L`` distinct levels stands at a distinct level on each
side, so the residue holds at most about ``2 L`` points. Floats have many levels, so the
residue is capped (``residue_cap``, default 256; a million samples of white noise left 30
points, the test records 17-58). Beyond the cap the oldest turning point is retired: the range
from it to the next is counted as a half cycle (the ASTM residue rule applied early to that
one range) and the ``overflow`` counter says how often; the count then differs from an
uncapped one.

**Damage** is summed cycle by cycle, ``w / N(scale r)`` with the curve row of
:meth:`edge.fatigue.sn_curve.SNCurve.params`; the histogram gets ``w`` in its bin (``w = 1``
for a closed cycle, ``1/2`` for a retired one).

The compiled kernel ``_count_block`` works on preallocated arrays (per hotspot: residue
``(cap,)`` float64, integer and float state rows, histogram ``(n_range, n_mean)``, an optional
cycle log for tests); nothing is allocated, logged or locked per sample. Its NumPy twin is
``edge/fatigue/reference.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from edge.fatigue.damage import HistogramBins, miner_damage, residue_half_cycles
from edge.fatigue.sn_curve import (N_PARAMS, P_LOGA1, P_LOGA2, P_M1, P_M2, P_SCALE,
                                   P_SCUT, P_SKNEE, SNCurve)

# integer state row
I_N, I_STARTED, I_DIR, I_NLOG, I_OVERFLOW, I_GAPS, I_SAMPLES, I_CLIPPED = range(8)
N_ISTATE = 8
# float state row: partial extremum, damage, cycles (closed = 1, retired half = 1/2)
F_CAND, F_DAMAGE, F_CYCLES = range(3)
N_FSTATE = 3


@njit(cache=True, nogil=True)
def _record(h, a, b, w, fstate, istate, hist, hbins, sn, log):  # pragma: no cover - compiled
    """Count the cycle ``a -> b`` of weight ``w``: histogram, damage, cycles, log."""
    r = abs(b - a)
    mean = 0.5 * (a + b)
    nr = hist.shape[1]
    nm = hist.shape[2]
    # compare as floats before the cast: a huge range must not overflow the integer
    ir_f = r / hbins[h, 0] * nr
    im_f = (mean - hbins[h, 1]) / (hbins[h, 2] - hbins[h, 1]) * nm
    clipped = False
    if ir_f >= nr:
        ir = nr - 1
        clipped = True
    else:
        ir = int(ir_f)
    if im_f < 0.0:
        im = 0
        clipped = True
    elif im_f >= nm:
        im = nm - 1
        clipped = True
    else:
        im = int(im_f)
    if clipped:
        istate[h, I_CLIPPED] += 1
    hist[h, ir, im] += w
    fstate[h, F_CYCLES] += w
    s = r * sn[h, P_SCALE]
    if s > 0.0 and s >= sn[h, P_SCUT]:
        if s >= sn[h, P_SKNEE]:
            logn = sn[h, P_LOGA1] - sn[h, P_M1] * np.log10(s)
        else:
            logn = sn[h, P_LOGA2] - sn[h, P_M2] * np.log10(s)
        fstate[h, F_DAMAGE] += w * 10.0 ** (-logn)
    k = istate[h, I_NLOG]
    if k < log.shape[1]:
        log[h, k, 0] = a
        log[h, k, 1] = b
        log[h, k, 2] = w
        istate[h, I_NLOG] = k + 1


@njit(cache=True, nogil=True)
def _push(h, v, n, stack, fstate, istate, hist, hbins, sn, log):  # pragma: no cover
    """Push turning point ``v`` on residue ``stack[h, :n]``, apply the four-point test;
    returns the new length."""
    if n == stack.shape[1]:
        # cap reached: retire the oldest point as a half cycle
        _record(h, stack[h, 0], stack[h, 1], 0.5, fstate, istate, hist, hbins, sn, log)
        istate[h, I_OVERFLOW] += 1
        for i in range(n - 1):
            stack[h, i] = stack[h, i + 1]
        n -= 1
    stack[h, n] = v
    n += 1
    while n >= 4:
        s0 = stack[h, n - 4]
        s1 = stack[h, n - 3]
        s2 = stack[h, n - 2]
        s3 = stack[h, n - 1]
        d2 = abs(s2 - s1)
        if d2 <= abs(s1 - s0) and d2 <= abs(s3 - s2):
            _record(h, s1, s2, 1.0, fstate, istate, hist, hbins, sn, log)
            stack[h, n - 3] = s3
            n -= 2
        else:
            break
    return n


@njit(cache=True, nogil=True)
def _count_block(x, stack, istate, fstate, hist, hbins, sn, log):  # pragma: no cover
    """Count block ``x`` (nb, nh): column ``h`` is hotspot ``h``'s signal.

    State per hotspot ``h``: ``stack[h]`` the residue, ``istate[h]`` (``I_*``), ``fstate[h]``
    (``F_*``), ``hist[h]`` the range-mean histogram with bins ``hbins[h]`` (range_max,
    mean_lo, mean_hi), ``sn[h]`` the S-N row, ``log[h]`` (cap, 3) the cycle log (from, to,
    weight; capacity 0: no log).
    """
    nb = x.shape[0]
    for h in range(x.shape[1]):
        n = istate[h, I_N]
        started = istate[h, I_STARTED]
        d = istate[h, I_DIR]
        c = fstate[h, F_CAND]
        gaps = 0
        for j in range(nb):
            v = x[j, h]
            if not np.isfinite(v):
                gaps += 1
                continue
            if started == 0:
                n = _push(h, v, n, stack, fstate, istate, hist, hbins, sn, log)
                c = v
                started = 1
                d = 0
            elif d > 0:
                if v > c:
                    c = v
                elif v < c:
                    n = _push(h, c, n, stack, fstate, istate, hist, hbins, sn, log)
                    c = v
                    d = -1
            elif d < 0:
                if v < c:
                    c = v
                elif v > c:
                    n = _push(h, c, n, stack, fstate, istate, hist, hbins, sn, log)
                    c = v
                    d = 1
            elif v != c:
                # the first move away from the start point sets the direction
                d = 1 if v > c else -1
                c = v
        istate[h, I_N] = n
        istate[h, I_STARTED] = started
        istate[h, I_DIR] = d
        istate[h, I_GAPS] += gaps
        istate[h, I_SAMPLES] += nb
        fstate[h, F_CAND] = c


@dataclass(frozen=True)
class Hotspot:
    """One counted signal: its S-N curve, the factor from the signal's unit to MPa (e.g.
    1e-6 for Pa, ``E * 1e-6`` for strain with E in Pa) and the histogram's bins."""

    name: str
    curve: SNCurve
    scale: float
    bins: HistogramBins

    def __post_init__(self):
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"hotspot {self.name}: scale to MPa must be > 0, "
                             f"got {self.scale!r}")


@dataclass
class RainflowCounter:
    """Streaming rainflow count of ``len(hotspots)`` signals; :meth:`update` takes blocks
    ``(nb, n_hotspots)`` float64 of any size (``nb = 0`` too)."""

    hotspots: list[Hotspot]
    n_range: int = 32
    n_mean: int = 32
    residue_cap: int = 256
    log_cap: int = 0
    stack: np.ndarray = field(init=False, repr=False)
    istate: np.ndarray = field(init=False, repr=False)
    fstate: np.ndarray = field(init=False, repr=False)
    hist: np.ndarray = field(init=False, repr=False)
    log: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        self.hotspots = list(self.hotspots)
        nh = len(self.hotspots)
        if nh < 1:
            raise ValueError("RainflowCounter needs at least one hotspot")
        names = [h.name for h in self.hotspots]
        if len(set(names)) != nh:
            raise ValueError(f"hotspot names must be unique, got {names}")
        for k in ("n_range", "n_mean"):
            if int(getattr(self, k)) < 1:
                raise ValueError(f"{k} must be >= 1")
        if int(self.residue_cap) < 4:
            raise ValueError("residue_cap must be >= 4 (the four-point test needs 4)")
        self.sn = np.ascontiguousarray(
            np.array([h.curve.params(h.scale) for h in self.hotspots]).reshape(nh, N_PARAMS))
        self.hbins = np.ascontiguousarray(np.array([h.bins.row() for h in self.hotspots]))
        self.stack = np.zeros((nh, int(self.residue_cap)))
        self.log = np.zeros((nh, int(self.log_cap), 3))
        self.istate = np.zeros((nh, N_ISTATE), dtype=np.int64)
        self.fstate = np.zeros((nh, N_FSTATE))
        self.hist = np.zeros((nh, self.n_range, self.n_mean))

    @property
    def n_hotspots(self) -> int:
        return len(self.hotspots)

    def reset(self) -> None:
        """Forget everything counted (histogram, damage, residue), in place."""
        for a in (self.stack, self.istate, self.fstate, self.hist, self.log):
            a[...] = 0

    def update(self, x: np.ndarray) -> None:
        """Count one block ``(nb, n_hotspots)`` (a 1-D block for one hotspot is accepted)."""
        if x.ndim == 1 and self.n_hotspots == 1:
            x = x.reshape(-1, 1)
        if x.dtype != np.float64 or x.ndim != 2 or x.shape[1] != self.n_hotspots:
            raise ValueError(f"block must be float64 (nb, {self.n_hotspots}), got "
                             f"{x.dtype} {x.shape}")
        _count_block(x, self.stack, self.istate, self.fstate, self.hist, self.hbins,
                     self.sn, self.log)

    # ---- read-outs (copies; not for the per-sample path)
    def residue(self, h: int = 0) -> np.ndarray:
        """The unclosed turning points of hotspot ``h`` (oldest first), without the partial
        extremum."""
        return self.stack[h, :self.istate[h, I_N]].copy()

    def pending(self, h: int = 0) -> float | None:
        """The partial extremum (the latest sample), or None before a run has started."""
        return float(self.fstate[h, F_CAND]) if self.istate[h, I_DIR] != 0 else None

    def cycle_log(self, h: int = 0) -> np.ndarray:
        """Logged cycles ``(k, 3)``: from, to, weight (``log_cap`` > 0)."""
        return self.log[h, :self.istate[h, I_NLOG]].copy()

    def finish(self, h: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """What a whole-record count adds at the end: the partial extremum pushed on a copy
        of the residue. Returns ``(cycles (k, 2) from/to, residue)``; the state is unchanged."""
        res = list(self.residue(h))
        cyc = []
        p = self.pending(h)
        if p is not None:
            res.append(p)
            while len(res) >= 4:
                s0, s1, s2, s3 = res[-4:]
                if abs(s2 - s1) <= abs(s1 - s0) and abs(s2 - s1) <= abs(s3 - s2):
                    cyc.append((s1, s2))
                    del res[-3:-1]
                else:
                    break
        return np.array(cyc).reshape(-1, 2), np.array(res)

    def summary(self, h: int = 0) -> dict:
        """Counted cycles, damage (closed cycles; and with the residue as half cycles),
        gaps, overflows, clipped cycles, samples."""
        hs = self.hotspots[h]
        _, res = self.finish(h)
        a, b = residue_half_cycles(res)
        d_res = miner_damage(b - a, np.full(a.size, 0.5), hs.curve, hs.scale)
        return {"hotspot": hs.name, "curve": hs.curve.name,
                "cycles": float(self.fstate[h, F_CYCLES]),
                "damage": float(self.fstate[h, F_DAMAGE]),
                "damage_with_residue": float(self.fstate[h, F_DAMAGE]) + d_res,
                "residue": int(res.size), "samples": int(self.istate[h, I_SAMPLES]),
                "gaps": int(self.istate[h, I_GAPS]),
                "overflow": int(self.istate[h, I_OVERFLOW]),
                "clipped": int(self.istate[h, I_CLIPPED])}

    def memory_bytes(self) -> int:
        """Bytes of state per hotspot (residue, state rows, histogram, curve, bins, log)."""
        arrays = (self.stack, self.istate, self.fstate, self.hist, self.sn, self.hbins,
                  self.log)
        return sum(a.nbytes for a in arrays) // self.n_hotspots
