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


# ------------------------------------------------------------------ the smoother's compiled path
def _smoother_bundle():
    """:func:`helpers.numpy_smoother_bundle` at 100 samples/s (the level tracker decides every
    100 samples, the chain check every 1,000) with what a built bundle adds that makes the
    smoother decide in Python: a start-up std (``kf_startup_var``, 40 rows), three load
    levels (the design's gains scaled; ``kf_level_nis`` the one-statistic table) and a chain
    check whose alternative is the bundle's own filter. Not a design: both paths run it."""
    from helpers import numpy_smoother_bundle

    b = numpy_smoother_bundle(n=3, lag=5, dt=0.01)
    kf = dict(b.kf)
    nq = kf["Cq"].shape[0]
    std = np.asarray(kf["std"])
    kf["startup_var"] = 3.0 * std ** 2 * np.exp(-np.arange(40.0) / 8.0)[:, None] * np.ones(nq)
    s = np.array([0.6, 0.8, 1.0])  # gains of the three levels (all stable)
    kf.update(level_grid=np.array([0.3, 1.0, 3.0]),
              level_nis=np.array([[1.0, 1.5, 4.0], [0.7, 1.0, 3.0], [0.5, 0.8, 1.0]]),
              level_K=np.stack([kf["K"] * x for x in s]),
              level_G=np.stack([kf["G"] * x for x in s]),
              level_Sinv=np.stack([kf["Sinv"] / x ** 2 for x in s]),
              level_Wt=np.stack([kf["Wt"] / x for x in s]),
              level_std=np.stack([std * x for x in s]))
    kf.update(alt_A=kf["A"], alt_H=kf["H"], alt_K=kf["K"], alt_Sinv=kf["Sinv"])
    return b.replace(kf=kf)


def _smoother_stream(n):
    """Samples, driver flags and what to inject: a displacement of about 0.1 mm, 3x louder from
    sample 700 (the tracker moves up), a gap at 450, a non-finite run at 1,200-1,203 (held,
    no fault: the limit is 10) and an input that overflows the state at 300."""
    rng = np.random.default_rng(23)
    y = 1e-4 * np.sin(0.07 * np.arange(n)) + 5e-5 * rng.normal(size=n)
    y[700:] *= 3.0
    y[1200:1204] = np.nan
    y[300] = 1e308
    fl = np.zeros(n, np.uint8)
    fl[450] = FLAG_GAP
    return y, fl


def _run_path(fast: bool, n: int):
    """:func:`helpers.run_sample_path` on :func:`_smoother_bundle` and :func:`_smoother_stream`."""
    from helpers import run_sample_path

    y, fl = _smoother_stream(n)
    return run_sample_path(Estimator(_smoother_bundle()), y[:, None], fl, fast)


def test_smoother_compiled_path_equals_the_general_path_bit_for_bit():
    """The same stream through the daemon's per-sample path twice: with the smoother's
    compiled call (edge.daemon.fastpath._sample_smooth) where it serves, and through the
    general path only (the estimator's block method). Every row (estimates, flags, seq,
    t_ns), the stated std after every sample (one sample late after an overflow), the level
    tracker's decisions, the chain check, the resets and the whole packed state at the end
    are equal bit for bit: both paths run the one compiled kernel on the same arrays (no
    tolerance)."""
    from edge.daemon.fastpath import CLOCK_OK

    if not CLOCK_OK:
        return
    n = 2500
    got, s_got, taken, est, path = _run_path(True, n)
    ref, s_ref, none, est_r, path_r = _run_path(False, n)
    assert none == 0
    # the compiled call served most samples; Python had the start-up (40 + lag rows after
    # the start, the gap and the overflow), each tracker window's last sample (every 100),
    # the chain check's evaluations, the non-finite run and the rest of its fault window
    assert taken > 0.8 * n, taken
    assert path.call.__name__ == "_sample_smooth"
    for k, (a, b) in enumerate(zip(got, ref)):
        assert a[:4] == b[:4], (k, a[:4], b[:4])
        assert np.array_equal(a[4], b[4], equal_nan=True), k
    # the stated std after every sample, but one: after the overflowing sample (300) the
    # compiled call leaves the reset pending and the smoother makes it at the next sample, so
    # its std restarts one sample period later (the publisher reads the std once a batch)
    same = np.all(s_got == s_ref, axis=1)
    assert np.array_equal(np.nonzero(~same)[0], [300])
    from edge.estimator.smoother_pack import QROW

    est.pack.view(QROW)[:] = est_r.pack.view(QROW)  # the compiled call's output row (scratch)
    for x, y in zip(est.pack.args, est_r.pack.args):
        assert np.array_equal(x, y, equal_nan=True)
    tr, tr_r = est.tracker, est_r.tracker
    assert tr.switches == tr_r.switches >= 1 and tr.level == tr_r.level
    assert est.self_resets == est_r.self_resets == 1
    assert est.chain_check.count == est_r.chain_check.count >= 1
    assert np.array_equal(est.chain_check.values, est_r.chain_check.values, equal_nan=True)
    assert path.resets == path_r.resets == 1  # the gap


def test_smoother_call_returns_to_python_with_nothing_changed():
    """_sample_smooth returns -2 and changes nothing (arena and smoother arrays) where the
    general path must take the sample: a non-finite channel, a gap (flagged, or samples lost
    before it), the smoother's budget spent (here: the start-up, each row its own std)."""
    from edge.daemon import arena as A
    from edge.daemon.arena import Arena
    from edge.daemon.fastpath import CLOCK_OK, _sample_smooth
    from edge.daemon.ring import Ring
    from edge.estimator.smoother_pack import BUDGET, TICK

    if not CLOCK_OK:
        return
    est = Estimator(_smoother_bundle())
    ar = Arena(8, 1, est.n_forces, est.n_outputs, 1, est.delay, 16)
    ring = Ring(8, 1, arena=ar)
    args = (*ar.args, *est.pack.args)
    assert est.pack.view(TICK)[BUDGET] == 0  # in the start-up
    est.pack.view(TICK)[BUDGET] = 5  # as after the start-up: the other three causes
    for value, flag, pending, budget in ((np.nan, 0, 0, 5), (1e-4, FLAG_GAP, 0, 5),
                                         (1e-4, 0, 1, 5), (1e-4, 0, 0, 0)):
        v, _, f = ring.write_span(1)
        v[0, 0], f[0] = value, flag
        ar.view(A.RSTATE)[A.GAP_PENDING] = pending
        est.pack.view(TICK)[BUDGET] = budget
        before = [a.copy() for a in args]
        assert _sample_smooth(*args) == -2
        assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(before, args))
    est.pack.view(TICK)[BUDGET] = 1
    ar.view(A.RSTATE)[A.GAP_PENDING] = 0
    ring.values[0, 0], ring.flags[0] = 1e-4, 0
    assert _sample_smooth(*args) == 1  # taken: published, the next slot
    assert est.pack.view(TICK)[BUDGET] == 0 and ring.head == 1


def test_chain_check_push_equals_its_numpy_twin():
    """edge.estimator.chain_check._push (the ring push of the chain check, compiled once for
    the block method and the smoother's compiled step) against its NumPy twin, the former
    block rule (pieces of min(rows left, slots to the ring's end, rows to the evaluation)),
    over uneven blocks: the same ring, counters and evaluation points. Copies: exact."""
    from edge.estimator.chain_check import EVERY, FILLED, HEAD, SINCE, _push

    rng = np.random.default_rng(3)
    n, every, nch = 8, 13, 2
    ring, st = np.zeros((n, nch)), np.array([0, 0, 0, every], np.int64)
    tw_ring, head, filled, since = np.zeros((n, nch)), 0, 0, 0
    due, tw_due = [], []
    k = 0
    while k < 200:
        Y = rng.normal(size=(int(rng.integers(1, 30)), nch))
        a = 0
        while a < Y.shape[0]:
            a = _push(Y, a, ring, st)
            if st[SINCE] >= st[EVERY] and st[FILLED] == n:
                st[SINCE] = 0
                due.append(k + a)
        a = 0
        while a < Y.shape[0]:  # the twin
            m = min(Y.shape[0] - a, n - head, every - since)
            tw_ring[head:head + m] = Y[a:a + m]
            head, filled, since, a = (head + m) % n, min(n, filled + m), since + m, a + m
            if since >= every and filled == n:
                since = 0
                tw_due.append(k + a)
        k += Y.shape[0]
        assert np.array_equal(ring, tw_ring)
        assert (st[HEAD], st[FILLED], st[SINCE]) == (head, filled, since)
    assert due == tw_due and len(due) == k // every  # one per 13 rows (the ring is full)
