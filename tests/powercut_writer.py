"""A recorder under load for the power-cut test (tests/test_recorder_runs.py), run as its own
process and killed with SIGKILL: ``python tests/powercut_writer.py DIR``.

Like the daemon's loop: a Recorder with the daemon's defaults (chunk age 0.5 s, fsync every
1 s) gets 10 raw samples and 10 estimate rows every 10 ms (1,000 samples/s, paced by the
monotonic clock: the simulated sensor) and is polled after each batch. Values are a known
function of ``seq`` (:func:`value`), so the test checks every row on the disk exactly.
Prints ``run <id> chunk <rows>`` once, then after each batch the number of samples appended
so far (the parent kills it when that passes its seeded target).
"""

import sys
import time

import numpy as np


def value(seq: np.ndarray) -> np.ndarray:
    """The raw value of sample ``seq``: exact in float64, distinct per sample."""
    return (seq % 1000) * 0.001 + seq * 1e-6


def main(directory: str) -> None:
    from edge.daemon.recorder import Recorder

    rec = Recorder(directory, ["y0"], ["m"], ["F", "u_mid", "a_mid"], ["N", "m", "m/s^2"],
                   rate=1000.0, device="powercut", clock="monotonic")
    print(f"run {rec.run_id} chunk {rec.streams['raw'].buf.shape[0]}", flush=True)
    n, t0 = 0, time.monotonic()
    flags = np.zeros(10, np.uint8)
    while True:
        seq = np.arange(n, n + 10, dtype=np.int64)
        v = value(seq)[:, None]
        rec.append_raw(seq, seq * 1_000_000, v, flags)
        rec.append_estimates(seq, seq * 1_000_000, np.hstack([v, v, v]), flags)
        rec.poll()
        n += 10
        print(n, flush=True)
        time.sleep(max(0.0, t0 + n / 1000.0 - time.monotonic()))


if __name__ == "__main__":
    main(sys.argv[1])
