"""The daemon's compiled per-sample path (edge.daemon.fastpath) against its NumPy twins."""

from __future__ import annotations

import time

import numpy as np
from helpers import chain_bundle

from edge.daemon.fastpath import _align
from edge.estimator import Estimator
from edge.flags import FLAG_GAP, FLAG_SATURATED


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


def _fast_rig(cap=8, w=16):
    from edge.daemon.arena import Arena
    from edge.daemon.ring import Ring

    b = chain_bundle(window=3, kinds=("displacement",))
    est = Estimator(b)
    ar = Arena(cap, 1, est.n_forces, est.n_outputs, 1, est.delay, w)
    return est, ar, Ring(cap, 1, arena=ar)


def test_compiled_clock_reads_time_monotonic_ns():
    from edge.daemon.arena import TS
    from edge.daemon.fastpath import CLOCK_OK, _now_ns

    if not CLOCK_OK:
        return
    _, ar, _ = _fast_rig()
    a = time.monotonic_ns()
    t = _now_ns(ar.view(TS))
    b = time.monotonic_ns()
    assert a <= t <= b  # the same clock (CLOCK_MONOTONIC): ordered, no tolerance


def test_sample_equals_stage_estimate_align_latency_publish():
    """One compiled call per sample == the Python path it replaces: Ring.stage, a reset on
    a gap, the estimator, the alignment twin, two LatencyStats.add, counters,
    Ring.publish."""
    from edge.daemon import arena as A
    from edge.daemon.fastpath import CLOCK_OK, _sample
    from edge.daemon.health import LatencyStats

    if not CLOCK_OK:
        return
    rng = np.random.default_rng(11)
    est, ar, ring = _fast_rig()
    ref, ar_r, ring_r = _fast_rig()
    d, cap = est.delay, ring.capacity
    nf, nout = est.n_forces, est.n_outputs
    twin = AlignTwin(d, cap, nf + nout)
    lat_r, lat_d = LatencyStats(16), LatencyStats(16)
    Fr, Zr, efr = np.zeros((1, nf)), np.zeros((1, nout)), np.zeros(1, np.uint8)
    count = ar.view(A.COUNT)
    toff = 123_456
    count[A.T_OFF], count[A.T_OFF_KNOWN] = toff, 1
    args = (*ar.args, *est.packed.args)
    resets = 0
    for k in range(60):
        y, t = 1e-3 * rng.normal(), 1_000_000 * k
        # saturated rows carry their flag through; a gap flagged by the driver, or samples
        # lost before this one (the ring's pending gap), reset the estimator first
        fl = np.uint8((4 if k % 7 == 3 else 0) | (FLAG_GAP if k % 11 == 5 else 0))
        for r in (ring, ring_r):
            v, tt, f = r.write_span(1)
            v[0, 0], tt[0], f[0] = y, t, fl
            r._st[A.GAP_PENDING] = k % 13 == 7
        i = ring_r.head % cap
        got = _sample(*args)
        assert ring_r.stage(1)
        if ring_r.flags[i] & FLAG_GAP:
            ref.reset()
            resets += 1
        assert ar.view(A.COUNT)[A.RESETS] == resets and ring.flags[i] == ring_r.flags[i]
        ref.process(ring_r.values[i:i + 1], Fr, Zr, efr)
        twin.sok[:] = False
        m = twin.align(Fr, Zr, efr, ring_r.seq[i:i + 1], ring_r.t_ns[i:i + 1],
                       ring_r.flags[i:i + 1], i)
        ring_r.publish(1)
        # the next sample's slot (-1: the ring is full)
        assert got == (ring_r.head % cap if ring_r.available() < cap else -1)
        assert ring.head == ring_r.head == k + 1 and ring.seq[i] == ring_r.seq[i] == k
        assert ar.view(A.COUNT)[A.PROCESSED] == k + 1
        assert ar.view(A.COUNT)[A.ESTIMATES] == sum(1 for j in range(k + 1) if j >= d)
        ok = twin.sok
        sok = ar.view(A.SOK)
        assert np.array_equal(sok[ok], ok[ok]) and m == int(ok.sum())
        # the same compiled kernel on the same inputs; 1e-12 relative: another instruction
        # order once inlined
        np.testing.assert_allclose(ar.view(A.SV)[ok], twin.sV[ok], rtol=1e-12, atol=1e-300)
        assert np.array_equal(ar.view(A.SSEQ)[ok], twin.sseq[ok])
        assert np.array_equal(ar.view(A.ST)[ok], twin.st[ok])
        assert np.array_equal(ar.view(A.SF)[ok], twin.sf[ok])
        sok[:] = False
        # latencies: both end at the same instant, so DRDY - ring = stamp - (t_ns + offset)
        lr = ar.view(A.LAT_R)[k % 16]
        ld = ar.view(A.LAT_D)[k % 16]
        assert lr >= 0 and ld - lr == ring.stamp_ns[i] - (t + toff)
        lat_r.add(np.array([lr]))
        lat_d.add(np.array([ld]))
        ls = LatencyStats(16, ar.view(A.LAT_R), ar.view(A.LAT_RS))
        assert (ls.n, ls.max_ns) == (lat_r.n, lat_r.max_ns)
        assert np.array_equal(ls.buf, lat_r.buf)
        if k % 3 == 2:  # the consumer frees what was published (ring of 8: wraps often)
            for r in (ring, ring_r):
                r.release(r.available())


def test_sample_leaves_everything_untouched_on_a_non_finite_sample():
    from edge.daemon import arena as A
    from edge.daemon.fastpath import CLOCK_OK, _sample

    if not CLOCK_OK:
        return
    est, ar, ring = _fast_rig()
    args = (*ar.args, *est.packed.args)
    for pending in (False, True):
        v, t, f = ring.write_span(1)
        v[0, 0], f[0] = np.nan, FLAG_GAP
        ar.view(A.RSTATE)[A.GAP_PENDING] = pending
        before = [a.copy() for a in (*ar.args, *est.packed.args)]
        assert _sample(*args) == -2  # the general path counts the bad sample
        after = (*ar.args, *est.packed.args)
        assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(before, after))


def test_arena_fields_are_named_and_compiled_code_reads_their_lengths():
    """One table (edge.daemon.arena.FIELDS): the index constants follow its order, every field
    is an attribute by its name, and the compiled accessor returns exactly the Python view
    (same memory, same length read from the arena, no literal) for every field."""
    from edge.daemon import arena as A
    from edge.daemon.fastpath import _field

    for k, (name, kind, _) in enumerate(A.FIELDS):
        assert getattr(A, name.upper()) == k, name  # VALUES == 0 ... LENGTHS == 24
    # sizes all different, so a length read from the wrong place shows
    ar = A.Arena(7, 2, 3, 4, 5, 6, 11)
    arrays = {"f8": ar.f8, "i8": ar.i8, "u8": ar.u8}
    for k, (name, kind, _) in enumerate(A.FIELDS):
        py = getattr(ar, name)
        assert py is ar.view(k) or np.shares_memory(py, ar.view(k))
        got = _field(arrays[kind], ar.i8, k)
        flat = ar.view(k).view(np.uint8) if name == "sok" else ar.view(k)
        assert got.size == flat.size, name
        assert got.size == 0 or np.shares_memory(got, flat), name
    assert ar.values.shape == (7, 2) and ar.sV.shape == (7, 3 + 4) and ar.hseq.shape == (7,)
    assert ar.rstate.shape == (len(A.RSTATE_ITEMS),) and ar.count.shape == (len(A.COUNT_ITEMS),)


def test_done_equals_latency_stats_and_counter():
    """The end of the per-sample work on both paths (fastpath._done: two latency stores and
    `processed` per span of slots) against its NumPy twin, LatencyStats.add on the same spans;
    the DRDY latency only once the clock offset is known. Integers: exact."""
    from edge.daemon import arena as A
    from edge.daemon.fastpath import _done
    from edge.daemon.health import LatencyStats

    rng = np.random.default_rng(5)
    _, ar, ring = _fast_rig(cap=8, w=16)
    lat_r, lat_d = LatencyStats(16), LatencyStats(16)
    count, done = ar.view(A.COUNT), 0
    for k in range(40):
        i = int(rng.integers(0, 8))
        n = int(rng.integers(1, 9 - i))
        ring.stamp_ns[i:i + n] = rng.integers(0, 10**9, n)
        ring.t_ns[i:i + n] = rng.integers(0, 10**9, n)
        if k == 10:  # the DRDY clock offset becomes known
            count[A.T_OFF], count[A.T_OFF_KNOWN] = 777, 1
        now = 2 * 10**9 + k
        _done(*ar.args, i, n, now)
        lat_r.add(now - ring.stamp_ns[i:i + n])
        if k >= 10:
            lat_d.add(now - (ring.t_ns[i:i + n] + 777))
        done += n
        for got, ref in ((LatencyStats(16, ar.view(A.LAT_R), ar.view(A.LAT_RS)), lat_r),
                         (LatencyStats(16, ar.view(A.LAT_D), ar.view(A.LAT_DS)), lat_d)):
            assert (got.n, got.max_ns) == (ref.n, ref.max_ns)
            assert np.array_equal(got.buf, ref.buf)
        assert count[A.PROCESSED] == done
