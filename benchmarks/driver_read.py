"""The driver's own CPU per one-row read, the one-row path beside the general read path.

    python benchmarks/driver_read.py [--n 3000]

Three simulated ADS1256 (virtual clock: the simulator never sleeps) in continuous mode at
1,000 SPS, read one row at a time into the same one-row arrays, as the daemon does:

* ``one-row``: ``Acquisition.read`` as it is (``ADS1256.read_one`` + ``decode._post_one``);
* ``general``: the same with the one-row path switched off (``read_continuous`` into the
  code buffer, then ``decode._post_packed``: the read before the one-row path);
* ``ports only``: the port calls a read makes (DRDY level, edge wait, clock, three bytes)
  and nothing else: the simulator's share.

Each call is timed with the thread's CPU clock in two conditions: back to back (blocks of
100 calls of one variant), and right after a 1 ms sleep (the variants interleaved: what the
daemon meets at 1 kHz, cold caches). Medians;
the differences to ``ports only`` are the driver's (acquisition + decode) own cost, the clock
reads' own cost cancelling out.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge.hw.acquire import Acquisition, Channel  # noqa: E402
from edge.hw.ads1256 import ADS1256  # noqa: E402
from edge.hw.sim_ports import make_simulated_hardware  # noqa: E402
from sim_replay import _Volts  # noqa: E402


def _acq(general: bool):
    spi, gpio, clock = make_simulated_hardware(_Volts(1000.0), 0, virtual_clock=True)
    acq = Acquisition(ADS1256(spi, gpio, clock), [Channel("y0", "AIN0")], rate=1000.0)
    acq.start()
    out = (np.zeros((1, 1)), np.zeros(1, np.int64), np.zeros(1, np.uint8))
    acq.read(*out)  # checks and remembers the arrays
    if general:
        acq._one = None
    return acq, out


def variants() -> dict:
    one, o1 = _acq(False)
    gen, o2 = _acq(True)
    ports, _ = _acq(False)
    adc = ports.adc
    ginput, wait_edge, falling, pin, now, readbytes, slice_ms = adc._ports

    def ports_only():
        if ginput(pin) != 0:
            wait_edge(pin, falling, timeout=slice_ms)
        now()
        return readbytes(3)

    return {"one-row": (one.read, o1), "general": (gen.read, o2), "ports only": (ports_only, ())}


def measure(n: int) -> dict:
    calls = variants()
    clock = time.thread_time_ns
    res = {(m, c): [] for m in calls for c in ("tight", "after 1 ms sleep")}
    for _ in range(n // 100):
        for m, (f, a) in calls.items():  # blocks of 100 calls of one variant
            for _ in range(100):
                t0 = clock()
                f(*a)
                res[(m, "tight")].append(clock() - t0)
        for _ in range(100):
            for m, (f, a) in calls.items():
                time.sleep(0.001)
                t0 = clock()
                f(*a)
                res[(m, "after 1 ms sleep")].append(clock() - t0)
    return {k: float(np.median(v)) / 1e3 for k, v in res.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=3000, help="calls per variant and condition")
    args = ap.parse_args(argv)
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}, {os.cpu_count()} CPUs, load {load}")
    r = measure(args.n)
    conds = ("tight", "after 1 ms sleep")
    print("| one-row read, thread CPU [us, median] | " + " | ".join(conds) + " |")
    print("| --- | --- | --- |")
    for m in ("one-row", "general", "ports only"):
        print(f"| {m} | " + " | ".join(f"{r[(m, c)]:.2f}" for c in conds) + " |")
    for m in ("one-row", "general"):
        print(f"| {m} minus ports only (the driver's own) | "
              + " | ".join(f"{r[(m, c)] - r[('ports only', c)]:.2f}" for c in conds) + " |")
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"load at the end {load}")


if __name__ == "__main__":
    main()
