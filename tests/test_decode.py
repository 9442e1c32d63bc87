"""ADS1256 code post-processing (edge.hw.decode._post) against its NumPy twin."""

from __future__ import annotations

import numpy as np

from edge.flags import FLAG_GAP, FLAG_SATURATED, FLAG_SUSPECT
from edge.hw.ads1256 import CODE_MAX, CODE_MIN
from edge.hw.decode import _post


class PostTwin:
    """The former array implementation of ``Acquisition._post`` (NumPy, per read)."""

    def __init__(self, lsb, off, sens, sat_v, step_codes, nan_on_sat, period_ns):
        self.lsb, self.off, self.sens, self.sat_v = lsb, off, sens, sat_v
        self.step = [None if np.isnan(x) else x for x in step_codes]
        self.nan_on_sat, self.period_ns = nan_on_sat, period_ns
        nch = lsb.shape[0]
        self.last_t = None
        self.ref = np.zeros((nch, 2), np.int64)
        self.n_ref = np.zeros(nch, np.int64)
        self.n_bad = np.zeros(nch, np.int64)
        self.counts = np.zeros(4, np.int64)

    def post(self, c, values, t, flags):
        n = c.shape[0]
        flags[:] = 0
        V = c * self.lsb
        np.divide(V - self.off, self.sens, out=values)
        sat = (c >= CODE_MAX) | (c <= CODE_MIN) | (np.abs(V) >= self.sat_v)
        sat_row = sat.any(axis=1)
        flags[sat_row] |= FLAG_SATURATED
        if self.nan_on_sat:
            values[sat] = np.nan
        self.counts[1] += int(sat_row.sum())
        dt = np.empty(n)
        dt[1:] = np.diff(t)
        dt[0] = (t[0] - self.last_t) if self.last_t is not None else 0.0
        gap = dt > 1.5 * self.period_ns
        flags[gap] |= FLAG_GAP
        self.counts[2] += int(gap.sum())
        self.last_t = int(t[-1])
        for j, lim in enumerate(self.step):
            if lim is None:
                continue
            r1, r2 = int(self.ref[j, 0]), int(self.ref[j, 1])
            nref, bad = int(self.n_ref[j]), int(self.n_bad[j])
            for i in range(n):
                x = int(c[i, j])
                if nref >= 2 and bad < 3 and abs(x - r1) > lim and abs(x - r2) > 2.0 * lim:
                    flags[i] |= FLAG_SUSPECT
                    self.counts[3] += 1
                    bad += 1
                else:
                    r2, r1, bad = r1, x, 0
                    nref = min(nref + 1, 2)
            self.ref[j] = r1, r2
            self.n_ref[j], self.n_bad[j] = nref, bad
        self.counts[0] += n


def test_post_matches_numpy_twin():
    rng = np.random.default_rng(11)
    nch = 3
    lsb = np.array([2.98e-7, 1.49e-7, 5.96e-7])
    off = np.array([0.0, 0.01, -0.02])
    sens = np.array([0.1, -2.0, 1e-3])
    sat_v = np.array([np.inf, 1.2, 2.0])
    step = np.array([np.nan, 2e5, 5e4])
    period = 1e6
    for nan_on_sat in (False, True):
        twin = PostTwin(lsb, off, sens, sat_v, step, nan_on_sat, period)
        last_t, counts = np.zeros(2, np.int64), np.zeros(4, np.int64)
        ref, n_ref, n_bad = (np.zeros((nch, 2), np.int64), np.zeros(nch, np.int64),
                             np.zeros(nch, np.int64))
        t0 = 0
        for _ in range(60):
            n = int(rng.integers(1, 12))
            codes = rng.integers(-3_000_000, 3_000_000, (n, nch))
            codes[rng.random((n, nch)) < 0.05] = CODE_MAX  # rails
            codes[rng.random((n, nch)) < 0.05] = CODE_MIN
            codes[rng.random((n, nch)) < 0.1] += 4_000_000  # bit-error-like jumps
            dt = np.where(rng.random(n) < 0.1, 3 * period, period).astype(np.int64)
            t = t0 + np.cumsum(dt)
            t0 = int(t[-1])
            v_ref, f_ref = np.zeros((n, nch)), np.zeros(n, np.uint8)
            twin.post(codes, v_ref, t, f_ref)
            v, f = np.zeros((n + 2, nch)), np.full(n + 2, 99, np.uint8)
            _post(codes, n, lsb, off, sens, sat_v, CODE_MAX, CODE_MIN, nan_on_sat, v, t, f,
                  last_t, period, step, ref, n_ref, n_bad, counts)
            # the same IEEE operations in the same order: bit-identical (tolerance 0)
            np.testing.assert_array_equal(v[:n], v_ref)
            np.testing.assert_array_equal(f[:n], f_ref)
            assert (f[n:] == 99).all()  # rows beyond n untouched
        np.testing.assert_array_equal(counts, twin.counts)
        np.testing.assert_array_equal(ref, twin.ref)
        assert counts[1] > 0 and counts[2] > 0 and counts[3] > 0  # every branch exercised


def test_packed_post_equals_post_on_separate_arrays():
    """_post_packed (what Acquisition.read runs) is _post on views of two arrays."""
    from edge.hw.decode import COUNTS, LAST_T, N_BAD, N_REF, REF, PostState, _post_packed

    rng = np.random.default_rng(5)
    nch = 2
    lsb, off = np.array([2.98e-7, 5.96e-7]), np.array([0.01, -0.02])
    sens, sat_v, step = np.array([-2.0, 1e-3]), np.array([1.2, np.inf]), np.array([2e5, 5e4])
    period = 1e6
    for nan_on_sat in (False, True):
        ps = PostState(lsb, off, sens, sat_v, step, CODE_MAX, CODE_MIN, nan_on_sat, period)
        last_t, counts = np.zeros(2, np.int64), np.zeros(4, np.int64)
        ref, n_ref, n_bad = (np.zeros((nch, 2), np.int64), np.zeros(nch, np.int64),
                             np.zeros(nch, np.int64))
        t0 = 0
        for _ in range(40):
            n = int(rng.integers(1, 6))
            codes = rng.integers(-3_000_000, 3_000_000, (n, nch))
            codes[rng.random((n, nch)) < 0.1] = CODE_MAX
            codes[rng.random((n, nch)) < 0.1] += 4_000_000
            t = t0 + np.cumsum(np.where(rng.random(n) < 0.1, 3 * period, period)
                               .astype(np.int64))
            t0 = int(t[-1])
            v, f = np.zeros((n, nch)), np.zeros(n, np.uint8)
            vr, fr = np.zeros((n, nch)), np.zeros(n, np.uint8)
            _post_packed(codes, n, v, t, f, *ps.args)
            _post(codes, n, lsb, off, sens, sat_v, CODE_MAX, CODE_MIN, nan_on_sat, vr, t, fr,
                  last_t, period, step, ref, n_ref, n_bad, counts)
            # the same compiled code on the same numbers: bit-identical (tolerance 0)
            np.testing.assert_array_equal(v, vr)
            np.testing.assert_array_equal(f, fr)
        for field, a in ((LAST_T, last_t), (REF, ref), (N_REF, n_ref), (N_BAD, n_bad),
                         (COUNTS, counts)):
            np.testing.assert_array_equal(ps.view(field), a)
        assert counts[1] > 0 and counts[2] > 0 and counts[3] > 0  # every branch exercised
