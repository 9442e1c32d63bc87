"""The streaming rainflow counter (edge/fatigue/rainflow.py) against fatpack, the reference
ASTM E1049 four-point count with the residue (pyproject.toml `test` extra), and against its
NumPy twin (edge/fatigue/reference.py).

Reference numbers: fatpack.find_reversals + fatpack.find_rainflow_cycles on the whole record
(gaps removed). On integer records with ymin=0, ymax=k and k classes fatpack's classification
is the identity (class centres are the integers), so its reversals are exact.
"""

from __future__ import annotations

import fatpack
import numpy as np
import pytest

from edge.fatigue import HistogramBins, Hotspot, RainflowCounter, curve
from edge.fatigue import reference as twin
from tests.fatigue_signals import cuts, record

N = 1_000_000


def _counter(bins, log_cap=N, cap=4096, scale=1.0, name="EN-71"):
    return RainflowCounter([Hotspot("h", curve(name), scale, bins)], residue_cap=cap,
                           log_cap=log_cap)


def _stream(c, y, seed):
    b = cuts(len(y), seed)
    for i0, i1 in zip(b[:-1], b[1:]):
        c.update(y[i0:i1])
    return len(b) - 1


def _fatpack_whole(y, integer):
    y = y[np.isfinite(y)]
    if integer:
        k = int(y.max())
        rev, _ = fatpack.find_reversals(y, k=k, ymin=0.0, ymax=float(k))
    else:
        rev = twin.reversals(y)
    return fatpack.find_rainflow_cycles(rev)


@pytest.mark.parametrize("integer", [True, False], ids=["integer", "float"])
def test_stream_equals_fatpack_on_a_million_samples(integer):
    y = record(N, seed=11 if integer else 12, integer=integer)
    c = _counter(HistogramBins(200.0, -100.0, 200.0), scale=3.0)
    nblocks = _stream(c, y, seed=5)
    assert nblocks > 300                       # really cut into many blocks
    cyc_ref, res_ref = _fatpack_whole(y, integer)
    log = c.cycle_log()
    assert np.all(log[:, 2] == 1.0) and c.summary()["overflow"] == 0
    end_cyc, end_res = c.finish()
    got = np.vstack([log[:, :2], end_cyc])
    assert len(cyc_ref) > 20_000
    # every cycle, in the order fatpack finds them, and the residue: exactly equal
    np.testing.assert_array_equal(got, cyc_ref)
    np.testing.assert_array_equal(end_res, res_ref)
    # the record's gaps were skipped, not counted
    assert c.summary()["gaps"] == int(np.sum(~np.isfinite(y))) > 0


def test_integer_reversals_are_fatpacks():
    # the NumPy twin's turning points equal fatpack's on an integer record (exact classes)
    y = record(200_000, seed=3, integer=True, gaps=False)
    k = int(y.max())
    rev, _ = fatpack.find_reversals(y, k=k, ymin=0.0, ymax=float(k))
    np.testing.assert_array_equal(twin.reversals(y), rev)


def test_kernel_matches_numpy_twin():
    y = record(N, seed=21)
    bins = HistogramBins(80.0, -60.0, 60.0)    # narrow on purpose: some cycles are clipped
    c = _counter(bins, log_cap=0, scale=4.0, name="DNV-D-air")
    _stream(c, y, seed=9)
    ref = twin.count(y, c.sn[0], c.hbins[0], c.n_range, c.n_mean)
    np.testing.assert_array_equal(c.residue(), ref["residue"])
    assert c.pending() == ref["pending"]
    # histogram: the same float additions of 1.0 -> exact
    np.testing.assert_array_equal(c.hist[0], ref["hist"])
    assert c.summary()["clipped"] == ref["clipped"] > 0
    # damage: sequential sum (kernel) vs np.sum pairwise (twin) of ~2e5 positive terms;
    # the summation order changes the result by ~n eps: rtol 1e-10
    assert ref["damage"] > 0
    np.testing.assert_allclose(c.summary()["damage"], ref["damage"], rtol=1e-10)
    assert c.summary()["cycles"] == len(ref["cycles"])


def test_block_cut_does_not_matter():
    y = record(100_000, seed=31)
    states = []
    for seed in (1, 2, 3):
        c = _counter(HistogramBins(200.0, -100.0, 200.0), log_cap=0)
        b = cuts(len(y), seed, max_block=[1, 700, 20000][seed - 1])
        for i0, i1 in zip(b[:-1], b[1:]):
            c.update(y[i0:i1])
        states.append((c.stack.copy(), c.istate.copy(), c.fstate.copy(), c.hist.copy()))
    for s in states[1:]:
        for a, b in zip(states[0], s):
            np.testing.assert_array_equal(a, b)   # bit for bit: the same operations


def test_small_cases_by_hand():
    # ASTM E1049-85 Fig. 6 style sequence: -2 1 -3 5 -1 3 -4 4 -2 (by hand with the
    # four-point rule: (1,-3)? no: |1-(-3)|=4 > |-2-1|=3; (-1,3): 4 <= 6 and <= 7 -> cycle;
    # then -3 5 -4: (5,-4)? 9 > 8 no; (-4,4) at the end stays with -2 pending)
    c = _counter(HistogramBins(20.0, -10.0, 10.0))
    c.update(np.array([-2.0, 1, -3, 5, -1, 3, -4, 4, -2]))
    np.testing.assert_array_equal(c.cycle_log()[:, :2], [[-1.0, 3.0]])
    np.testing.assert_array_equal(c.residue(), [-2.0, 1, -3, 5, -4, 4])
    assert c.pending() == -2.0
    # plateaus, repeats and gaps change nothing
    d = _counter(HistogramBins(20.0, -10.0, 10.0))
    d.update(np.array([-2.0, -2, np.nan, 1, 1, 0.5, -3, -3, np.nan, np.nan, 5, -1, 3, 3,
                       -4, 4, 4, -2]))
    np.testing.assert_array_equal(d.cycle_log(), c.cycle_log())
    np.testing.assert_array_equal(d.residue(), c.residue())   # 0.5 lies inside a run
    assert d.summary()["gaps"] == 3


def test_residue_cap_retires_oldest_as_half_cycle():
    # a diverging sequence never closes a cycle: the residue grows until the cap
    y = np.array([(-1.0) ** i * (i + 1) for i in range(50)])
    c = _counter(HistogramBins(200.0, -100.0, 100.0), cap=8)
    c.update(y)
    s = c.summary()
    assert s["overflow"] == 49 - 8 and c.residue().size == 8
    log = c.cycle_log()
    assert np.all(log[:, 2] == 0.5) and s["cycles"] == 0.5 * s["overflow"]
    np.testing.assert_array_equal(log[0, :2], y[:2])   # the oldest range first


def test_empty_and_bad_blocks():
    c = _counter(HistogramBins(20.0, -10.0, 10.0))
    c.update(np.zeros(0))
    c.update(np.full(5, np.nan))
    assert c.pending() is None and c.residue().size == 0 and c.summary()["gaps"] == 5
    with pytest.raises(ValueError, match="float64"):
        c.update(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="float64"):
        c.update(np.zeros(3, dtype=np.float32))


def test_memory_is_bounded_and_stated():
    c = RainflowCounter([Hotspot("h", curve("EN-71"), 1.0, HistogramBins(1, 0, 1))])
    before = c.memory_bytes()
    c.update(record(200_000, seed=4))
    # state arrays do not grow with the record: residue 256*8 + hist 32*32*8 + rows
    assert c.memory_bytes() == before == 256 * 8 + 32 * 32 * 8 + 8 * 8 + 3 * 8 + 7 * 8 + 3 * 8


def test_huge_ranges_are_clipped_not_wrapped():
    # a range 1e300 times the histogram's must land in the last bin (float compare before
    # the integer cast), counted as clipped; reset zeroes in place (same arrays)
    c = _counter(HistogramBins(1e-3, -1e-3, 1e-3), log_cap=10)
    hist = c.hist
    c.update(np.array([0.0, 1e297, -1e297, 1e297, -1e297, 0.0]))
    assert c.summary()["clipped"] == 1 and c.hist[0, -1, :].sum() == 1.0
    c.reset()
    assert c.hist is hist and c.summary()["cycles"] == 0 and c.pending() is None
