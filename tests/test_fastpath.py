"""The daemon's compiled per-sample path (edge.daemon.fastpath) against its NumPy twins."""

from __future__ import annotations

import numpy as np
from helpers import chain_bundle

from edge.daemon.fastpath import _align, _step, kernel_args
from edge.estimator import Estimator
from edge.flags import FLAG_GAP, FLAG_SATURATED, FLAG_WARMUP


class AlignTwin:
    """NumPy twin of :func:`edge.daemon.fastpath._align`: the daemon's former alignment
    (a linear history of the last ``delay`` fed samples, shifted after each segment)."""

    def __init__(self, delay, cap, ncol):
        self.d = delay
        self.hseq, self.ht = np.zeros(delay + cap, np.int64), np.zeros(delay + cap, np.int64)
        self.hf = np.zeros(delay + cap, np.uint8)
        self.hn = 0
        self.sV = np.zeros((cap, ncol))
        self.sseq, self.st = np.zeros(cap, np.int64), np.zeros(cap, np.int64)
        self.sf, self.sok = np.zeros(cap, np.uint8), np.zeros(cap, bool)

    def align(self, F, Z, ef, seq, t_ns, fl, slot):
        n, nf = F.shape
        d, h = self.d, self.hn
        self.hseq[h:h + n], self.ht[h:h + n], self.hf[h:h + n] = seq, t_ns, fl
        first = max(0, d - h)  # rows describing positions before the stream: none
        m = n - first
        if m > 0:
            src = slice(h + first - d, h + n - d)
            s0 = slot + first
            self.sV[s0:s0 + m, :nf] = F[first:]
            self.sV[s0:s0 + m, nf:] = Z[first:]
            self.sf[s0:s0 + m] = ef[first:] | (self.hf[src] & (FLAG_SATURATED | FLAG_GAP))
            self.sseq[s0:s0 + m], self.st[s0:s0 + m] = self.hseq[src], self.ht[src]
            self.sok[s0:s0 + m] = True
        tot = h + n
        keep = min(d, tot)
        if keep:
            for a in (self.hseq, self.ht, self.hf):
                a[:keep] = a[tot - keep:tot].copy()
        self.hn = keep
        return max(m, 0)


def _state(delay, cap, ncol):
    h = delay + 1
    return (np.zeros(h, np.int64), np.zeros(h, np.int64), np.zeros(h, np.uint8),
            np.zeros(1, np.int64), np.zeros((cap, ncol)), np.zeros(cap, np.int64),
            np.zeros(cap, np.int64), np.zeros(cap, np.uint8), np.zeros(cap, bool))


def test_align_matches_numpy_twin_over_random_segments():
    rng = np.random.default_rng(7)
    for delay in (0, 1, 4):
        cap, nf, nout = 64, 2, 3
        twin = AlignTwin(delay, cap, nf + nout)
        st = _state(delay, cap, nf + nout)
        seq0 = 0
        while seq0 < 400:
            n = int(rng.integers(1, 9))
            slot = int(rng.integers(0, cap - n))
            F, Z = rng.normal(size=(n, nf)), rng.normal(size=(n, nout))
            ef = rng.integers(0, 4, n).astype(np.uint8)
            seq = np.arange(seq0, seq0 + n, dtype=np.int64)
            t = seq * 1000 + 5
            fl = rng.choice(np.array([0, 4, 8, 16], np.uint8), n)
            twin.sok[:] = False
            st[8][:] = False
            m_ref = twin.align(F, Z, ef, seq, t, fl, slot)
            m = _align(F, Z, ef, seq, t, fl, slot, *st[:4], *st[4:], delay)
            assert m == m_ref
            ok = twin.sok
            assert np.array_equal(st[8], ok)
            # copies of the same numbers: exact equality (tolerance 0)
            assert np.array_equal(st[4][ok], twin.sV[ok])
            assert np.array_equal(st[5][ok], twin.sseq[ok])
            assert np.array_equal(st[6][ok], twin.st[ok])
            assert np.array_equal(st[7][ok], twin.sf[ok])
            seq0 += n


def test_step_equals_estimator_process_plus_alignment():
    """One compiled call per sample == Estimator.process + the NumPy alignment twin; a gap
    or a non-finite sample is left untouched (returns -1)."""
    rng = np.random.default_rng(3)
    b = chain_bundle(window=3, kinds=("displacement",))
    est, ref = Estimator(b), Estimator(b)
    d = est.delay
    cap, nf, nout = 32, est.n_forces, est.n_outputs
    rv = np.zeros((cap, 1))
    rseq, rt, rf = np.zeros(cap, np.int64), np.zeros(cap, np.int64), np.zeros(cap, np.uint8)
    F1, Z1, ef1 = np.zeros((1, nf)), np.zeros((1, nout)), np.zeros(1, np.uint8)
    st = _state(d, cap, nf + nout)
    twin = AlignTwin(d, cap, nf + nout)
    Fr, Zr, efr = np.zeros((1, nf)), np.zeros((1, nout)), np.zeros(1, np.uint8)
    for k in range(200):
        i = k % cap
        rv[i, 0] = 1e-3 * rng.normal()
        rseq[i], rt[i], rf[i] = k, 1000 * k, 4 if k % 17 == 0 else 0
        m = _step(i, rv, rseq, rt, rf, F1, Z1, ef1, *kernel_args(est), *st[:4], *st[4:], d)
        ref.process(rv[i:i + 1], Fr, Zr, efr)
        m_ref = twin.align(Fr, Zr, efr, rseq[i:i + 1], rt[i:i + 1], rf[i:i + 1], i)
        assert m == m_ref == (1 if k >= d else 0)
        if k < d:
            assert efr[0] & FLAG_WARMUP
            continue
        # same compiled kernel on the same inputs; 1e-12 relative allows for a different
        # instruction order once inlined into _step
        np.testing.assert_allclose(st[4][i], twin.sV[i], rtol=1e-12, atol=1e-300)
        assert (st[5][i], st[6][i], st[7][i]) == (twin.sseq[i], twin.st[i], twin.sf[i])
    before = [a.copy() for a in kernel_args(est)[8:]] + [a.copy() for a in st]
    i = 5
    rf[i] = FLAG_GAP
    assert _step(i, rv, rseq, rt, rf, F1, Z1, ef1, *kernel_args(est), *st[:4], *st[4:], d) == -1
    rf[i], rv[i, 0] = 0, np.nan
    assert _step(i, rv, rseq, rt, rf, F1, Z1, ef1, *kernel_args(est), *st[:4], *st[4:], d) == -1
    after = [a for a in kernel_args(est)[8:]] + list(st)
    assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(before, after))


def test_kernel_args_none_for_the_smoother():
    class NotTikhonov:
        op = None

    assert kernel_args(NotTikhonov()) is None
