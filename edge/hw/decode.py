"""Compiled post-processing of ADS1256 codes: engineering units and per-row flags.

One call per driver read (:meth:`edge.hw.acquire.Acquisition.read`), in place on
preallocated arrays, nothing allocated per sample. The NumPy twin is in
``tests/test_decode.py`` (the former array implementation).

Per row ``i`` and channel ``j``::

    V        = code * LSB_j                                   [V]
    value    = (V - offset_j) / sensitivity_j                 [unit]
    saturated: code at a rail (CODE_MAX / CODE_MIN) or |V| >= saturation_j   (flags bit2;
               the value becomes NaN when nan_on_saturation)
    gap      : t[i] - t[i-1] > 1.5 nominal periods (the previous read's last row for i = 0)
               (flags bit3)
    suspect  : |x - r1| > max_step_j and |x - r2| > 2 max_step_j, with r1, r2 the last two
               accepted codes, at most 3 rejects in a row (flags bit4; max_step_j in codes,
               NaN = off)
"""

from __future__ import annotations

import numpy as np
from numba import njit

from edge.flags import FLAG_GAP, FLAG_SATURATED, FLAG_SUSPECT

_SAT = np.uint8(FLAG_SATURATED)
_GAP = np.uint8(FLAG_GAP)
_SUS = np.uint8(FLAG_SUSPECT)

#: indices into the ``counts`` array
ROWS, SATURATED, GAPS, SUSPECT = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def _post(codes, n, lsb, off, sens, sat_v, code_max, code_min, nan_on_sat, values, t_ns,
          flags, last_t, period_ns, step_codes, ref, n_ref, n_bad,
          counts):  # pragma: no cover - compiled
    """Codes of rows ``0 .. n-1`` to values and flags (see the module docstring).

    Parameters
    ----------
    codes : int64 (>= n, nch)         signed 24-bit codes
    lsb, off, sens, sat_v : float64 (nch,)   [V/code], [V], [V/unit], [V] (inf = off)
    code_max, code_min : int          rail codes
    nan_on_sat : bool
    values : float64 (>= n, nch)      out [unit]
    t_ns : int64 (>= n,)              DRDY times [ns] (in)
    flags : uint8 (>= n,)             out
    last_t : int64 (2,)               in/out: [previous row seen (0/1), its t_ns]
    period_ns : float                 nominal row period [ns]
    step_codes : float64 (nch,)       largest plausible step [codes], NaN = no check
    ref : int64 (nch, 2), n_ref, n_bad : int64 (nch,)   in/out: bit-error check state
    counts : int64 (4,)               in/out: rows, saturated, gaps, suspect
    """
    nch = codes.shape[1]
    for i in range(n):
        fl = np.uint8(0)
        sat_row = False
        for j in range(nch):
            c = codes[i, j]
            # V = code * LSB; value = (V - offset) / sensitivity
            V = c * lsb[j]
            y = (V - off[j]) / sens[j]
            if c >= code_max or c <= code_min or abs(V) >= sat_v[j]:
                sat_row = True
                if nan_on_sat:
                    y = np.nan
            values[i, j] = y
        if sat_row:
            fl |= _SAT
            counts[SATURATED] += 1
        t = t_ns[i]
        if last_t[0] != 0 and (t - last_t[1]) > 1.5 * period_ns:
            fl |= _GAP
            counts[GAPS] += 1
        last_t[0] = 1
        last_t[1] = t
        for j in range(nch):
            lim = step_codes[j]
            if np.isnan(lim):
                continue
            x = codes[i, j]
            r1 = ref[j, 0]
            r2 = ref[j, 1]
            if (n_ref[j] >= 2 and n_bad[j] < 3 and abs(x - r1) > lim
                    and abs(x - r2) > 2.0 * lim):
                fl |= _SUS
                counts[SUSPECT] += 1
                n_bad[j] += 1
            else:  # accepted (after 3 rejects in a row the new level is believed)
                ref[j, 1] = r1
                ref[j, 0] = x
                n_bad[j] = 0
                n_ref[j] = min(n_ref[j] + 1, 2)
        flags[i] = fl
    counts[ROWS] += n


# ------------------------------------------------------------------ packed (few arguments)
# int64 header of PostState.i8: channels, rail codes, NaN on saturation; then field offsets
Q_NCH, Q_CODE_MAX, Q_CODE_MIN, Q_NAN = range(4)
_QOFF = 4
LSB, OFF, SENS, SAT_V, STEP, PERIOD, LAST_T, REF, N_REF, N_BAD, COUNTS = range(11)
_KIND = ("f8",) * 6 + ("i8",) * 5


class PostState:
    """The calibration and running state of :func:`_post` in one float64 and one int64 array
    (:attr:`args`), so :func:`_post_packed` takes 7 arguments instead of 19 (numba's call
    costs per argument). :meth:`view` gives each field as a NumPy view.

    Parameters
    ----------
    lsb, off, sens, sat_v, step_codes : float64 (nch,)   see :func:`_post`
    code_max, code_min : int; nan_on_sat : bool; period_ns : float
    """

    def __init__(self, lsb, off, sens, sat_v, step_codes, code_max, code_min, nan_on_sat,
                 period_ns):
        nch = len(lsb)
        shapes = ((nch,),) * 5 + ((1,), (2,), (nch, 2), (nch,), (nch,), (4,))
        size = {"f8": 0, "i8": _QOFF + 11}
        offset = []
        for k in range(11):
            offset.append(size[_KIND[k]])
            size[_KIND[k]] += int(np.prod(shapes[k]))
        self.f8 = np.zeros(size["f8"])
        self.i8 = np.zeros(size["i8"], np.int64)
        self.i8[:_QOFF] = (nch, code_max, code_min, int(bool(nan_on_sat)))
        arrays = {"f8": self.f8, "i8": self.i8}
        self._views = []
        for k in range(11):
            self.i8[_QOFF + k] = offset[k]
            a = arrays[_KIND[k]]
            self._views.append(a[offset[k]:offset[k] + int(np.prod(shapes[k]))]
                               .reshape(shapes[k]))
        for k, v in zip((LSB, OFF, SENS, SAT_V, STEP), (lsb, off, sens, sat_v, step_codes)):
            self._views[k][:] = v
        self._views[PERIOD][0] = period_ns

    def view(self, field: int) -> np.ndarray:
        return self._views[field]

    @property
    def args(self) -> tuple:
        """``(f8, i8)``: the last two arguments of :func:`_post_packed`."""
        return self.f8, self.i8


@njit(cache=True, nogil=True)
def _post_packed(codes, n, values, t_ns, flags, f8, i8):  # pragma: no cover - compiled
    """:func:`_post` with its calibration and state from a :class:`PostState` ``f8, i8``."""
    nch = i8[Q_NCH]
    o = i8[_QOFF:_QOFF + 11]
    _post(codes, n, f8[o[LSB]:o[LSB] + nch], f8[o[OFF]:o[OFF] + nch],
          f8[o[SENS]:o[SENS] + nch], f8[o[SAT_V]:o[SAT_V] + nch], i8[Q_CODE_MAX],
          i8[Q_CODE_MIN], i8[Q_NAN] != 0, values, t_ns, flags, i8[o[LAST_T]:o[LAST_T] + 2],
          f8[o[PERIOD]], f8[o[STEP]:o[STEP] + nch],
          i8[o[REF]:o[REF] + 2 * nch].reshape((nch, 2)), i8[o[N_REF]:o[N_REF] + nch],
          i8[o[N_BAD]:o[N_BAD] + nch], i8[o[COUNTS]:o[COUNTS] + 4])
