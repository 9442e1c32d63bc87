"""The daemon's per-sample call from the driver's bytes (edge.daemon.fastpath._sample_wire)
against the two calls it replaces (edge.hw.decode._post_one into the ring slot, then
edge.daemon.fastpath._sample), and the daemon at adc level with and without it."""

from __future__ import annotations

import numpy as np
from helpers import chain_bundle

from edge.daemon import arena as A
from edge.daemon.fastpath import CLOCK_OK, _sample, _sample_wire
from edge.estimator import Estimator
from edge.hw.ads1256 import CODE_MAX, CODE_MIN
from edge.hw.decode import COUNTS, LAST_T, PostState, _post_one


def _rig(cap=8):
    from edge.daemon.arena import Arena
    from edge.daemon.ring import Ring

    est = Estimator(chain_bundle(window=3, kinds=("displacement",)))
    ar = Arena(cap, 1, est.n_forces, est.n_outputs, 1, est.delay, 16)
    ps = PostState(np.array([2.98e-7]), np.array([0.0]), np.array([1000.0]),
                   np.array([np.inf]), np.array([2e5]), CODE_MAX, CODE_MIN, True, 1e6)
    return est, ar, Ring(cap, 1, slot_views=True, arena=ar), ps


def test_sample_wire_equals_post_one_then_sample():
    if not CLOCK_OK:
        return
    rng = np.random.default_rng(23)
    est, ar, ring, ps = _rig()
    est_r, ar_r, ring_r, ps_r = _rig()
    codes, codes_r = np.zeros((1, 1), np.int64), np.zeros((1, 1), np.int64)
    skip = ("STAMP", "LAT_R", "LAT_D", "LAT_RS", "LAT_DS", "TS")  # clock readings
    fields = [k for k in ("VALUES", "T_NS", "FLAGS", "SEQ", "RSTATE", "COUNT", "SV", "SSEQ",
                          "ST", "SF", "SOK", "HSEQ", "HT", "HF", "HCOUNT")
              if k not in skip]
    got_m2 = 0
    for k in range(60):
        b = rng.integers(0, 256, 3).tolist()
        b[0] &= 0x07  # small codes, a rail now and then (NaN: nan_on_saturation)
        if k % 17 == 9:
            b = [0x7F, 0xFF, 0xFF]
        t = 1_000_000 * k + (3_000_000 if k % 11 == 5 else 0)  # a gap now and then
        got = _sample_wire(b[0], b[1], b[2], t, codes, *ps.args, *ar.args, *est.packed.args)
        i = ring_r.head % ring_r.capacity
        v, tt, f = ring_r._slot[i]
        _post_one(b[0], b[1], b[2], t, codes_r, v, tt, f, *ps_r.args)
        ref = _sample(*ar_r.args, *est_r.packed.args)
        assert got == ref
        if got == -2:  # the general path would take it: publish it by hand, both alike
            got_m2 += 1
            for r in (ring, ring_r):
                assert r.stage(1)
                r.publish(1)
        for name in fields:
            np.testing.assert_array_equal(ar.view(getattr(A, name)), ar_r.view(getattr(A, name)),
                                          err_msg=name)
        for fld in (COUNTS, LAST_T):
            np.testing.assert_array_equal(ps.view(fld), ps_r.view(fld))
        for r in (ring, ring_r):
            if r.available() > 4:
                r.release(r.available())
    assert got_m2 >= 3 and ps.view(COUNTS)[2] > 0  # NaN rows and gaps exercised
    assert ar.view(A.COUNT)[A.ESTIMATES] > 40


def _run(tmp_path, tag, wire: bool):
    from edge.daemon import app
    from edge.daemon.config import config_from_dict
    from edge.daemon.recorder import read_recording_full

    p = tmp_path / "chain1.npz"
    if not p.exists():
        chain_bundle(window=3, kinds=("displacement",)).save(p)
    cfg = config_from_dict({
        "device": {"id": "wire"}, "bundle": {"path": str(p)},
        "channels": [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0, "unit": "m"}],
        "adc": {"drate": 1000.0, "mode": "continuous"}, "mqtt": {"enabled": False},
        "recorder": {"dir": str(tmp_path / f"rec_{tag}")},
        "simulate": {"clock": "virtual", "duration_s": 1.0, "seed": 3, "level": "adc",
                     "noise": 0.01}})
    d = app.build_daemon(cfg, simulate=True)
    calls = [0]
    if wire:
        fn, read = d._wire_fn, d._wire_read

        def counted(*a):
            calls[0] += 1
            return fn(*a)

        def due_once(k=[0]):  # an identification falls due during the 500th read (no maps:
            k[0] += 1         # nothing to arm; the row takes the general path)
            if k[0] == 500:
                d._identify_due = True
            return read()

        d._wire_fn, d._wire_read = counted, due_once
    else:
        d._wire_read = None
    assert d.run() == 0
    rec = tmp_path / f"rec_{tag}"
    return (read_recording_full(rec), read_recording_full(rec, kind="estimates"), d,
            calls[0])


def test_daemon_at_adc_level_same_record_with_and_without_the_wire_call(tmp_path):
    if not CLOCK_OK:
        return
    a, ea, da, n_wire = _run(tmp_path, "wire", True)
    b, eb, db, _ = _run(tmp_path, "two", False)
    # every sample but the first (the general path learns the DRDY clock offset) and the one
    # whose identification fell due mid-read (the general path armed nothing, reset the flag)
    assert n_wire == 998 and not da._identify_due
    for x, y in ((a, b), (ea, eb)):  # raw samples, then estimates
        for name in ("seq", "t_ns", "flags"):
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name))
        # same driver bytes, same compiled arithmetic: bit-identical (tolerance 0)
        np.testing.assert_array_equal(x.values, y.values)
    assert a.seq.size == 1000 and ea.seq.size == 1000 - da.delay
    assert (da.processed, da.estimates, da.resets) == (db.processed, db.estimates, db.resets)
