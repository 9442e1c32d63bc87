"""The one-row continuous read (``Acquisition.read`` -> ``ADS1256.read_one`` ->
``edge.hw.decode._post_one``, the daemon's per-sample read) against the block read it
replaces, on the byte-level simulated chip (virtual clock: deterministic timing)."""

import math

import numpy as np
import pytest

from edge.hw.acquire import Acquisition, Channel
from edge.hw.ads1256 import ADS1256, DrdyTimeout, code_from_bytes
from edge.hw.sim_ads1256 import Faults
from edge.hw.sim_ports import make_simulated_hardware
from edge.hw.sources import FunctionSource


def _source():
    return FunctionSource({"AIN0": lambda t: 1.5 * math.sin(2 * math.pi * 23 * t),
                           "AINCOM": lambda t: 0.0})


def _traced(faults=None, seed=3):
    """Driver and acquisition on a simulated chip whose port calls are recorded with their
    arguments, answers and the clock time (the bytes on the wire and their timing)."""
    spi, gpio, clock = make_simulated_hardware(_source(), seed=seed, faults=faults,
                                               virtual_clock=True)
    trace = []
    for obj, names in ((spi, ("readbytes", "xfer2")),
                       (gpio, ("input", "wait_for_edge", "output"))):
        for name in names:
            fn = getattr(obj, name)

            def rec(*a, _fn=fn, _name=name, **k):
                t = clock.monotonic_ns()
                out = _fn(*a, **k)
                trace.append((_name, a, tuple(sorted(k.items())), t, out))
                return out

            setattr(obj, name, rec)
    adc = ADS1256(spi, gpio, clock)
    acq = Acquisition(adc, [Channel("a", "AIN0", sensitivity=0.5, max_step=0.2)], rate=1000)
    return acq, spi.chip, trace


def _count_calls(obj, name):
    fn, n = getattr(obj, name), [0]

    def counted(*a, **k):
        n[0] += 1
        return fn(*a, **k)

    setattr(obj, name, counted)
    return n


def test_one_row_reads_equal_block_reads_byte_for_byte():
    faults = Faults(missing_drdy_prob=0.02, bit_error_prob=2e-4)
    n = 400
    one, chip1, tr1 = _traced(faults)
    blk, chip2, tr2 = _traced(faults)
    for a in (one, blk):
        a.start()
    rc = _count_calls(one.adc, "read_continuous")
    ro = _count_calls(one.adc, "read_one")
    one.bind()
    v1, t1, f1 = np.zeros((n, 1)), np.zeros(n, np.int64), np.zeros(n, np.uint8)
    vs, ts, fs = np.zeros((1, 1)), np.zeros(1, np.int64), np.zeros(1, np.uint8)
    for i in range(n):  # the daemon's pattern: the same one-row arrays again and again
        assert one.read(vs, ts, fs) == 1
        v1[i], t1[i], f1[i] = vs[0], ts[0], fs[0]
    v2, t2, f2 = np.zeros((n, 1)), np.zeros(n, np.int64), np.zeros(n, np.uint8)
    for k in range(0, n, 16):  # block reads of 16 rows
        assert blk.read(v2[k:k + 16], t2[k:k + 16], f2[k:k + 16]) == 16
    # the first read checks the arrays and takes the block path; every later one the new one
    assert rc[0] == 1 and ro[0] == n - 1
    assert tr1 == tr2  # the same port calls, arguments, answers and clock times
    np.testing.assert_array_equal(t1, t2)
    np.testing.assert_array_equal(f1, f2)
    np.testing.assert_array_equal(v1, v2)  # same codes, same compiled arithmetic
    assert one.counts == blk.counts
    assert one.counts["gaps"] > 0 and one.counts["suspect"] > 0  # faults exercised
    assert not chip1.violations and not chip2.violations


def test_one_row_read_timeout_reports_no_row():
    acq, chip, _ = _traced(Faults(stuck_drdy_after_s=0.05))
    acq.start()
    vs, ts, fs = np.zeros((1, 1)), np.zeros(1, np.int64), np.zeros(1, np.uint8)
    rows = 0
    with pytest.raises(DrdyTimeout, match="GPIO17") as ei:
        for _ in range(1000):
            rows += acq.read(vs, ts, fs)
    assert ei.value.n_read == 0
    assert 40 <= rows <= 50 and acq.counts["rows"] == rows  # 0.05 s at 1000 SPS
    assert ts[0] < 0.05e9 + 1e6


def test_read_one_right_after_rdatac_waits_t6():
    """The first read after RDATAC must wait t6 (strict simulator: a violation raises)."""
    acq, chip, trace = _traced()
    acq.start()
    adc = acq.adc
    t_rdatac = adc._last_cmd_end
    b, t = adc.read_one()
    name, _, _, t_read, _ = trace[-1]
    assert name == "readbytes" and t_read >= t_rdatac + adc.t6_ns
    assert abs(code_from_bytes(b) * 5.0 / 2**23 - 1.5 * math.sin(2 * math.pi * 23 * t * 1e-9)) \
        <= 5.0 / 2**23
    assert not chip.violations
