"""Throughput of the ADS1256 driver running on the byte-level simulated chip.

    /work/venv/bin/python benchmarks/ads1256_sim.py [--seconds 2]

Continuous mode (RDATAC, one channel): samples/s sustained
* with the virtual clock (time jumps to the next DRDY: CPU-bound speed of driver + simulator),
* with the real-time clock at 1 kSPS and 30 kSPS (the ADS1256 has no 20 kSPS setting; 30 kSPS
  is the next rate above the 20 kSPS the daemon benchmark needs) and 15 kSPS,
  reporting lost conversions (gap flags) and the CPU share used.
Multiplexer cycling: per-channel row rate for 1, 2, 4, 8 channels at DRATE 30 kSPS (virtual
clock, i.e. simulated bus timing) next to datasheet Table 14.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from edge.flags import FLAG_GAP
from edge.hw.acquire import Acquisition, Channel
from edge.hw.ads1256 import ADS1256, CYCLING_THROUGHPUT_HZ
from edge.hw.sim_ports import make_simulated_hardware
from edge.hw.sources import FunctionSource


def source():
    # numpy callables: the chip evaluates each on the modulator instants of every window
    return FunctionSource({f"AIN{i}": (lambda t, i=i: np.sin(2 * np.pi * (10 + i) * t))
                           for i in range(8)})


def run_continuous(rate, virtual, seconds, speed_hz=1_920_000, block=256):
    spi, gpio, clock = make_simulated_hardware(source(), virtual_clock=virtual)
    adc = ADS1256(spi, gpio, clock, speed_hz=speed_hz)
    acq = Acquisition(adc, [Channel("a", "AIN0")], rate=rate)
    acq.start()
    v, t, f = np.zeros((block, 1)), np.zeros(block, np.int64), np.zeros(block, np.uint8)
    n = gaps = 0
    w0, c0 = time.perf_counter(), time.process_time()
    s0 = clock.monotonic_ns()
    while time.perf_counter() - w0 < seconds:
        acq.read(v, t, f)
        n += block
        gaps += int(((f & FLAG_GAP) != 0).sum())
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    sim_s = (clock.monotonic_ns() - s0) * 1e-9
    viol = sum(spi.chip.violations.values())
    lost = spi.chip.stats["overwritten"] + spi.chip.stats["read_during_update"]
    acq.stop()
    return dict(n=n, wall=wall, cpu=cpu, sim_s=sim_s, gaps=gaps, lost=lost, viol=viol)


def run_cycling(nch, speed_hz, rows=200):
    spi, gpio, clock = make_simulated_hardware(source(), virtual_clock=True)
    adc = ADS1256(spi, gpio, clock, speed_hz=speed_hz)
    acq = Acquisition(adc, [Channel(f"c{i}", f"AIN{i}") for i in range(nch)], rate=30000,
                      mode="cycle")
    acq.start()
    v, t, f = np.zeros((rows, nch)), np.zeros(rows, np.int64), np.zeros(rows, np.uint8)
    w0 = time.perf_counter()
    acq.read(v, t, f)
    wall = time.perf_counter() - w0
    row_hz = 1e9 / np.mean(np.diff(t))
    return row_hz, rows / wall, sum(spi.chip.violations.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=2.0)
    a = ap.parse_args()
    print("continuous mode (RDATAC), SCLK 1.92 MHz")
    print(f"{'clock':>9} {'DRATE':>7} {'samples/s (wall)':>17} {'sim s / wall s':>15} "
          f"{'CPU %':>6} {'gaps':>6} {'lost conv':>9} {'violations':>10}")
    for virtual, rate in ((True, 30000.0), (True, 1000.0), (False, 1000.0), (False, 15000.0),
                          (False, 30000.0)):
        r = run_continuous(rate, virtual, a.seconds)
        print(f"{'virtual' if virtual else 'real':>9} {rate:>7.0f} {r['n'] / r['wall']:>17.0f} "
              f"{r['sim_s'] / r['wall']:>15.2f} {100 * r['cpu'] / r['wall']:>6.0f} "
              f"{r['gaps']:>6d} {r['lost']:>9d} {r['viol']:>10d}")
    print("\nmultiplexer cycling at DRATE 30 kSPS (virtual clock = simulated bus timing)")
    print(f"{'channels':>8} {'SCLK MHz':>8} {'rows/s (sim)':>12} {'total conv/s':>12} "
          f"{'Table 14 / n':>12} {'rows/s (wall)':>13}")
    for speed in (1_000_000, 1_920_000):
        for nch in (1, 2, 4, 8):
            row_hz, wall_rows, viol = run_cycling(nch, speed)
            assert viol == 0
            print(f"{nch:>8d} {speed / 1e6:>8.2f} {row_hz:>12.1f} {row_hz * nch:>12.0f} "
                  f"{CYCLING_THROUGHPUT_HZ[30000.0] / nch:>12.1f} {wall_rows:>13.0f}")


if __name__ == "__main__":
    main()
