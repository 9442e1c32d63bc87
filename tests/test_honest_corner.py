"""The stated std with a load learned from a short record whose lowest Welch bin lies above the
declared band's corner (offline/load/corner.py), through the public command line as
``benchmarks/honest_structures.py`` measures it.

The strip of the load zoo with an accelerometer at its tip instead of the laser, declared
2-160 Hz; the truth a pink load (tilt 1) from 2 Hz, 0.3x the declared level, most of its
power below 4 Hz, where the accelerometer sees little above its noise. An 8 s record is fitted
on its first 5.6 s (the held-out choice), in Welch segments of 1.024 s: lowest bin 3.9 Hz.
Before, the fit's corner was bounded there and ended on it (band 3.91-187 Hz, high-pass order
8): no force below 3.9 Hz in the smoother's model, its stated std 1-sigma coverage 58 % on the
force and 57 % on the tip's neighbour's displacement (57.5 / 57.3 % by this test on main).
Now the corner may reach the declared 2 Hz; the records reject 2 Hz here (the declared corner
is not kept, offline/load/corner.py) and the fit ends at 2.6 Hz, order 1: 67 / 67 %.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edge.csvio import read_table, write_table
from offline.forcing.force_model import ForceModel
from offline.load.model import LoadModel
from offline.load.zoo import STRIP

BIN = Path(sys.executable).parent
NOISE = 0.05  # [m/s^2] the accelerometer's noise std, declared and added
#: the truth: pink from 2 Hz at 0.3x the declared 1 N (benchmarks/load_user's frame, scaled)
TRUE = LoadModel([ForceModel("bandpass", (2.0, 160.0), 0.3, 2, tilt=1.0)])
DT = 1e-3


def cli(*args):
    p = subprocess.run([str(BIN / args[0]), *map(str, args[1:])], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def record(path, work: Path, name: str, seconds: float, seed: int):
    """A record ``NAME.csv`` through ``simulate --load csv`` (the full model, the ideal
    converter; the truth ``NAME_truth.csv``), the sensor noise added here, seeded."""
    fine = DT / 10
    tl = np.arange(int(round((seconds + 1.0) / fine)) + 1) * fine
    write_table(work / f"{name}_load.csv", tl, TRUE.sample(tl, seed), ["F110"])
    cli("vsense-offline", "simulate", path, "--load", "csv", "--csv", work / f"{name}_load.csv",
        "--duration", seconds, "--warmup", 1.0, "--noise", 0.0, "--seed", seed,
        "-o", work / name, "--quiet")
    t, Y, cols = read_table(work / f"{name}_measurement.csv")
    Y = Y + NOISE * np.random.default_rng(seed + 7).standard_normal(Y.shape)
    write_table(work / f"{name}.csv", t, Y, cols)


@pytest.mark.slow  # 268 s at load average 10-12 on 2 cores (one smoother build)
def test_a_learned_load_keeps_the_declared_corner_below_the_records_band(tmp_path):
    path = tmp_path / "strip.toml"
    path.write_text(STRIP.replace('name = "d110"', 'name = "a110"')
                    .replace('kind = "displacement"\nnoise = 0.01',
                             f'kind = "acceleration"\nnoise_std = {NOISE}')
                    .replace("band = [5.0, 160.0]", "band = [2.0, 160.0]"))
    record(path, tmp_path, "run", 8.0, 11)
    record(path, tmp_path, "test", 9.0, 23)
    cli("vsense-offline", "build", path, "-o", tmp_path / "b.npz", "--quiet",
        "--record", tmp_path / "run.csv")
    cli("vsense-edge", "replay", tmp_path / "test.csv", "--bundle", tmp_path / "b.npz",
        "-o", tmp_path / "est.csv")
    rows = json.loads(cli("vsense-offline", "score", tmp_path / "est.csv",
                          tmp_path / "test_truth.csv", "--skip", 1.0, "--json"))["rows"]
    cov = {r["name"]: r["coverage"] for r in rows}       # after the start-up, as the benchmark
    # 1-sigma coverage within 61-75 %: the goal with a record (68 % for a right std, the
    # band the record's sampling spread and a learned model leave); before: 58 %, 57 %
    assert all(0.61 <= cov[n] <= 0.75 for n in ("F110", "d60")), cov
