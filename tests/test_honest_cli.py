"""The stated std through the public command line, as ``benchmarks/honest_structures.py``
measures it on the user's structures (docs/benchmarks.md, honest std section)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edge.bundle import Bundle
from edge.csvio import read_table, write_table
from edge.estimator import Estimator
from offline.load.zoo import STRIP

BIN = Path(sys.executable).parent


def cli(*args):
    p = subprocess.run([str(BIN / args[0]), *map(str, args[1:])], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


@pytest.mark.slow  # 162 s at load average ~10 on 2 cores (a smoother build and design)
def test_a_replay_from_the_middle_of_a_record_is_a_forced_reset(tmp_path):
    """The benchmark scores "the second after a forced reset" as the replay of a record cut
    at 3 s: the same rows, values and stated std as the estimator reset after 3 s
    (``reset``: state 0, std from the stationary prior, the designed level)."""
    path = tmp_path / "strip.toml"
    path.write_text(STRIP.replace("[estimator]\n", "[estimator]\nmethod = \"smoother\"\n"))
    cli("vsense-offline", "build", path, "-o", tmp_path / "b.npz", "--quiet")
    cli("vsense-offline", "simulate", path, "--duration", 5.0, "--warmup", 1.0, "--seed", 3,
        "--noise", 0.01, "-o", tmp_path / "rec", "--quiet")
    t, Y, cols = read_table(tmp_path / "rec_measurement.csv")
    cut = t >= 3.0 - 1e-9
    write_table(tmp_path / "cut.csv", t[cut], Y[cut], cols)
    cli("vsense-edge", "replay", tmp_path / "cut.csv", "--bundle", tmp_path / "b.npz",
        "-o", tmp_path / "est.csv")
    te, E, ec = read_table(tmp_path / "est.csv")
    est = Estimator(Bundle.load(tmp_path / "b.npz"))
    d = est.delay
    est.run_std(np.ascontiguousarray(Y[~cut]))
    est.reset()
    F, Z, _, S = est.run_std(np.ascontiguousarray(Y[cut]))
    names = est.force_names + est.output_names
    ref = np.column_stack([F, Z, S])[d:]
    got = E[:, [ec.index(n) for n in names] + [ec.index(f"{n}_std") for n in names]]
    # the replay's rows are the estimates (the delay removed): one per row from the cut's
    # first sample; equal to the CSV's printed precision (read back from text, 1e-9 relative)
    assert got.shape == ref.shape and abs(te[0] - t[cut][0]) < 1e-9
    np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-12 * np.max(np.abs(ref)))
