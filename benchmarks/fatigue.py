"""Cost per sample per hotspot of the streaming rainflow kernel (edge/fatigue/rainflow.py)
next to its NumPy twin (edge/fatigue/reference.py), and the memory per hotspot.

    python benchmarks/fatigue.py [--samples 1000000] [--ref-samples 200000]

Records: tests/fatigue_signals.py (narrow-band vibration with bursts, level changes, gaps).
The kernel counts ``--samples`` samples of 1, 4 and 16 hotspots in blocks of 64 (the daemon's
block) and in one block; the twin counts ``--ref-samples`` of one hotspot (turning points by
NumPy, the four-point loop in Python, damage vectorised). Figures are medians of 5
repetitions, all in this process; the first call (numba compilation or cache load) is not
timed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.fatigue import HistogramBins, Hotspot, RainflowCounter, curve  # noqa: E402
from edge.fatigue import reference as twin  # noqa: E402
from tests.fatigue_signals import record  # noqa: E402


def _counter(nh):
    return RainflowCounter([Hotspot(f"h{i}", curve("EN-71"), 1.0,
                                    HistogramBins(200.0, -100.0, 200.0)) for i in range(nh)])


def time_kernel(y, block, reps=5):
    nh = y.shape[1]
    c = _counter(nh)
    c.update(np.ascontiguousarray(y[:10]))        # compile / load the cache
    times = []
    for _ in range(reps):
        c.reset()
        t0 = time.perf_counter()
        for i in range(0, len(y), block):
            c.update(y[i:i + block])
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) / (len(y) * nh), c


def time_twin(y, c, reps=5):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        twin.count(y, c.sn[0], c.hbins[0], c.n_range, c.n_mean)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) / len(y)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--samples", type=int, default=1_000_000)
    p.add_argument("--ref-samples", type=int, default=200_000)
    a = p.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f}; {a.samples} samples per hotspot")
    base = record(a.samples, seed=1)
    rows = []
    for nh in (1, 4, 16):
        y = np.ascontiguousarray(np.column_stack([np.roll(base, 997 * k) for k in range(nh)]))
        for block in (64, len(y)):
            us, c = time_kernel(y, block)
            rows.append((nh, block, us * 1e6, c.memory_bytes()))
    ref_us = time_twin(base[:a.ref_samples], _counter(1)) * 1e6
    print("hotspots  block    us/sample/hotspot  bytes/hotspot  twin/kernel")
    for nh, block, us, mem in rows:
        print(f"{nh:8d}  {block:7d}  {us:17.4f}  {mem:13d}  {ref_us / us:10.0f}x")
    print(f"NumPy twin (1 hotspot, whole record of {a.ref_samples}): {ref_us:.3f} us/sample")
    return 0


if __name__ == "__main__":
    sys.exit(main())
