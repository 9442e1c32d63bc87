"""The cost of one call of a compiled function by its number of array arguments (printed by
``benchmarks/daemon.py --only costs`` before the stage table)."""

from __future__ import annotations

import time

import numpy as np


def dispatch_probe(n: int = 2000) -> list[str]:
    """The cost of one call of a compiled function by its number of array arguments, through
    numba's dispatcher and through the compiled entry point (:func:`edge.compiled.direct`),
    in a tight loop and right after a 1 ms sleep (the per-sample situation at 1 kHz), next
    to an empty Python function: thread CPU [us] per call, interleaved, medians."""
    from numba import njit

    from edge.compiled import direct

    fns = {}
    for k in (1, 6, 35):
        names = ", ".join(f"a{j}" for j in range(k))
        ns: dict = {}
        exec(f"def f({names}):\n    a0[0] += 1.0\n    return 0\n", ns)  # noqa: S102
        fns[k] = njit(ns["f"])
    kinds = (np.zeros(4), np.zeros(4, np.int64), np.zeros(4, np.uint8), np.zeros((2, 2)))
    args = {k: tuple(kinds[j % 4] if j else kinds[0] for j in range(k)) for k in fns}

    def empty(*a):
        return 0

    calls = {"empty Python function (6 args)": (empty, args[6])}
    for k, f in fns.items():
        f(*args[k])
        calls[f"{k} arrays, dispatcher"] = (f, args[k])
        calls[f"{k} arrays, entry point"] = (direct(f, args[k]), args[k])
    clock = time.thread_time_ns
    tight, slept = {}, {m: [] for m in calls}
    for name, (f, a) in calls.items():
        t0 = clock()
        for _ in range(n):
            f(*a)
        tight[name] = (clock() - t0) / n / 1e3
    for _ in range(n):
        for name, (f, a) in calls.items():
            time.sleep(0.001)
            t0 = clock()
            f(*a)
            slept[name].append(clock() - t0)
    rows = ["| call | tight loop [us] | after a 1 ms sleep [us] |", "| --- | --- | --- |"]
    for name in calls:
        rows.append(f"| {name} | {tight[name]:.2f} | "
                    f"{float(np.median(slept[name])) / 1e3:.2f} |")
    return rows
