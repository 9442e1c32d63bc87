"""The ADS1256 conversion's frequency response two ways, side by side in one run: the taps'
direct sum (``sum_i h_i exp(-2 pi j f i / f_mod)``, 256 frequencies per chunk, what
``edge.acquisition.Chain.response`` did) and the closed form it uses now
(``edge.hw.ads1256_filter.conversion_response``). Prints each time, the ratio and the largest
difference, on the accuracy limit's grid (65,536 points at the row rate: 32,769 bins).

    python benchmarks/chain_response.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from edge.hw.ads1256_filter import F_MOD, conversion_response, conversion_taps
from edge.hw.ads1256_spec import row_rates


def direct(drate: float, f: np.ndarray, chunk: int = 256) -> np.ndarray:
    h = conversion_taps(drate)
    lag = np.arange(h.size) / F_MOD
    out = np.empty(f.size, dtype=complex)
    for a in range(0, f.size, chunk):
        out[a:a + chunk] = np.exp(-2j * np.pi * np.outer(f[a:a + chunk], lag)) @ h
    return out


def best(fn, repeat: int) -> tuple:
    times, r = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        r = fn()
        times.append(time.perf_counter() - t)
    return min(times), r


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    print(f"{'DRATE':>7} {'bins':>6} {'taps':>5} {'direct [s]':>11} {'closed [s]':>11} "
          f"{'ratio':>8} {'max |diff|':>11}")
    for drate, mode, nch in [(1000.0, "continuous", 1), (3750.0, "cycle", 2),
                             (30000.0, "continuous", 1)]:
        f = np.fft.rfftfreq(65536, 1.0 / row_rates(nch, mode)[drate])
        td, rd = best(lambda: direct(drate, f), a.repeat)
        tc, rc = best(lambda: conversion_response(drate, f), a.repeat)
        print(f"{drate:7g} {f.size:6d} {conversion_taps(drate).size:5d} {td:11.3f} {tc:11.4f} "
              f"{td / tc:8.0f} {np.abs(rd - rc).max():11.2e}")


if __name__ == "__main__":
    main()
