"""Placement's prediction against the built bundle's calibration runs, through the chain.

    python benchmarks/placement_chain_runs.py [--only strip,cycle,beam,beam_ideal]

Per structure and layout: ``placement_model(spec).nrmse(layout)`` (the prediction) and
``build(write_placed(...), limit=False).bundle.meta["selection"]["best"]["nrmse"]`` (the
built bundle's 3 calibration runs of 2 s, errors over the truth's stationary std), and
``pred / runs - 1``. Structures: the strip of tests/test_placement_chain.py (``strip``: the
default ADS1256 at 1000 SPS continuous; ``cycle``: 719 rows/s, 2000 SPS, two channels
cycling) with candidates L170 (laser, 4 ms average), a170 (IEPE, 10 Hz high-pass) and d170;
the README beam (examples/my_beam.toml without its sensor, ``[estimator] method =
"smoother"``, lag 20, model error 0; ``beam``: ADS1256 1000 SPS; ``beam_ideal``: point
samples) with L10 (laser, 5 ms), a10 (IEPE, 5 Hz) and d10 at the tip.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from offline.build import build  # noqa: E402
from offline.model import load_model_file  # noqa: E402
from offline.placement import placement_model  # noqa: E402
from offline.placement.write import write_placed  # noqa: E402
from tests.test_placement_chain import CYCLE, STRIP  # noqa: E402


def _candidate(name, kind, extra=""):
    return (f'[[placement.candidates]]\nname = "{name}"\nselect = {{ at = [1.0, 0.0, 0.0] }}\n'
            f'dof = "uz"\nkind = "{kind}"\nnoise = 0.01\n{extra}')


def beam(ideal: bool) -> str:
    """examples/my_beam.toml without its sensor, the smoother at lag 20, three candidates."""
    text = (ROOT / "examples" / "my_beam.toml").read_text()
    text = re.sub(r'\[\[sensors\]\]\nname = "d_tip".*?\n\n', "", text, flags=re.S)
    text = re.sub(r'\[estimator\].*?window = "auto"[^\n]*\n', '[estimator]\nrate = 1000.0\n'
                  'method = "smoother"\nlag = 20\nmodel_error = 0.0\n', text, flags=re.S)
    if ideal:
        text += '[acquisition]\nconverter = "ideal"\n'
    return (text + "[placement]\n" + _candidate("L10", "displacement", "average_s = 0.005\n")
            + _candidate("a10", "acceleration", "highpass_hz = 5.0\n")
            + _candidate("d10", "displacement"))


CASES = {"strip": (STRIP, [["L170"], ["a170"], ["d170"]]),
         "cycle": (CYCLE, [["L170", "a170"], ["L170", "d170"], ["a170", "d170"]]),
         "beam": (beam(False), [["L10"], ["a10"], ["d10"]]),
         "beam_ideal": (beam(True), [["d10"]])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(CASES))
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="placement_chain_runs_"))
    for name in args.only.split(","):
        text, layouts = CASES[name]
        p = tmp / f"{name}.toml"
        p.write_text(text)
        pm = placement_model(load_model_file(p), progress=False)
        for lay in layouts:
            pred = pm.nrmse([pm.candidates.index(c) for c in lay])
            t0 = time.perf_counter()
            b = build(write_placed(p, tmp / f"{name}_placed.toml", lay), progress=False,
                      limit=False, maps=False).bundle
            runs = np.array(b.meta["selection"]["best"]["nrmse"])
            print(f"{name:10s} {'+'.join(lay):10s} targets {pm.targets} pred "
                  f"{np.array2string(pred, precision=4)} runs "
                  f"{np.array2string(runs, precision=4)} pred/runs-1 "
                  f"{np.array2string(100 * (pred / runs - 1), precision=1)} % "
                  f"({time.perf_counter() - t0:.0f} s build)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
