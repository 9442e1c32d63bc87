"""Placement on three structures against the built and replayed layouts.

    python benchmarks/placement_structures.py [--only cantilever,plate,twospan] [--top 3]
                                              [--all] [--n 1,2] [--duration 8] [--json OUT]

For each structure (model files written from docs/modelfile.md and docs/placement.md, the
default ``[estimator] method = "auto"``, relative noise 1 %):

* **cantilever**: the paper's strip (170 x 13 x 1.2 mm aluminium, 34 Euler-Bernoulli beams,
  clamped), force F110, output d60, 9 displacement candidates (20..160 mm every 20 mm and the
  tip), random 5-160 Hz;
* **plate**: a simply supported steel plate 0.6 x 0.4 m x 5 mm (MITC3, 12 x 8 cells, GMR+
  1 master + 16 modes), force F1 at (0.15, 0.10), outputs u1 (0.40, 0.25) and u2 (0.50,
  0.10), 9 acceleration candidates, random 5-150 Hz;
* **twospan**: the strip over two spans of 170 mm (pinned at 0, 170 and 340 mm, 40 beams),
  force F80, output d250, 9 displacement candidates, random 5-160 Hz.

``place -n 1`` and ``-n 2`` (:func:`offline.placement.place`); every layout of 1 and 2
candidates is predicted (exhaustive on the prediction); the place layout and the ``--top``
best predicted layouts (``--all``: every layout) are each written, built
(:func:`offline.build.build`) and replayed (truth from the FULL model by sparse Newmark on 10x
finer steps under the ``[design_load]`` ideal-band load, 1 % noise; offline/placement/replay.py).
Printed per structure and n: the place layout, its predicted NRMSE, the built bundle's
calibration-run NRMSE and the chosen estimator, the replayed NRMSE, the largest
|predicted / calibration-run - 1|, and the replayed criterion (geometric mean over the targets,
the criterion place minimises) of the place layout over the best of the built layouts.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from tests.helpers import strip_toml  # noqa: E402


def _cand(name, at, kind):
    return (f'[[placement.candidates]]\nname = "{name}"\nselect = {{ at = [{at[0]:.4f}, '
            f'{at[1]:.4f}, 0.0] }}\ndof = "uz"\nkind = "{kind}"\nnoise = 0.01\n')


STRIP_TAIL = """[damping]
ratios = [[34.0, 0.01], [600.0, 0.01]]
[reduction]
method = "gmr+"
modes = 8
[[reduction.masters]]
select = { at = [%(m)s, 0.0, 0.0] }
dofs = ["uz"]
[[forces]]
name = "%(f)s"
select = { at = [%(fx)s, 0.0, 0.0] }
dof = "uz"
[[outputs]]
name = "%(o)s"
select = { at = [%(ox)s, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
[estimator]
rate = 1000.0
[design_load]
load = { type = "random", band = [5.0, 160.0], rms = 1.0 }
duration = 2.0
[placement]
"""


def cantilever_toml() -> str:
    t = strip_toml(34) + """[[boundary]]
select = { at = [0.0, 0.0, 0.0] }
[[boundary]]
select = { box = [[0.001, -0.01, -0.01], [0.2, 0.01, 0.01]] }
dofs = ["ux", "uy", "rx", "rz"]
""" + STRIP_TAIL % {"m": "0.17", "f": "F110", "fx": "0.11", "o": "d60", "ox": "0.06"}
    xs = [0.02 * i for i in range(1, 9)] + [0.17]
    return t + "".join(_cand(f"dz{round(x * 1000)}", (x, 0.0), "displacement") for x in xs)


def twospan_toml() -> str:
    t = strip_toml(40).replace("end = [0.17, 0.0, 0.0]", "end = [0.34, 0.0, 0.0]")
    t += """[[boundary]]
select = { box = [[-0.001, -0.01, -0.01], [0.35, 0.01, 0.01]] }
dofs = ["ux", "uy", "rx", "rz"]
[[boundary]]
select = { at = [0.0, 0.0, 0.0] }
dofs = ["uz"]
[[boundary]]
select = { at = [0.17, 0.0, 0.0] }
dofs = ["uz"]
[[boundary]]
select = { at = [0.34, 0.0, 0.0] }
dofs = ["uz"]
""" + STRIP_TAIL % {"m": "0.085", "f": "F85", "fx": "0.085", "o": "d255", "ox": "0.255"}
    xs = [0.034, 0.051, 0.119, 0.136, 0.204, 0.221, 0.289, 0.306, 0.323]
    return t + "".join(_cand(f"dz{round(x * 1000)}", (x, 0.0), "displacement") for x in xs)


PLATE = """name = "plate-1f2o"
type = "plate"
[materials.steel]
E = 210e9
nu = 0.3
rho = 7850.0
[plate]
material = "steel"
thickness = 5e-3
[plate.rectangle]
length = 0.6
width = 0.4
nx = 12
ny = 8
[[boundary]]
select = { group = "x0" }
dofs = ["uz", "rx"]
[[boundary]]
select = { group = "x1" }
dofs = ["uz", "rx"]
[[boundary]]
select = { group = "y0" }
dofs = ["uz", "ry"]
[[boundary]]
select = { group = "y1" }
dofs = ["uz", "ry"]
[damping]
ratios = [[60.0, 0.01], [600.0, 0.01]]
[reduction]
method = "gmr+"
modes = 16
[[reduction.masters]]
select = { at = [0.4, 0.25, 0.0] }
dofs = ["uz"]
[[forces]]
name = "F1"
select = { at = [0.15, 0.1, 0.0] }
dof = "uz"
[[outputs]]
name = "u1"
select = { at = [0.4, 0.25, 0.0] }
dof = "uz"
[[outputs]]
name = "u2"
select = { at = [0.5, 0.1, 0.0] }
dof = "uz"
[estimator]
rate = 1000.0
[design_load]
load = { type = "random", band = [5.0, 150.0], rms = 1.0 }
duration = 2.0
[placement]
"""


def plate_toml() -> str:
    pts = [(0.1, 0.1), (0.3, 0.1), (0.45, 0.3), (0.2, 0.25), (0.3, 0.3), (0.55, 0.35),
           (0.1, 0.3), (0.5, 0.25), (0.25, 0.15)]
    return PLATE + "".join(_cand(f"a{round(x * 100)}_{round(y * 100)}", (x, y),
                                 "acceleration") for x, y in pts)


STRUCTURES = {"cantilever": cantilever_toml, "plate": plate_toml, "twospan": twospan_toml}


def built(path, names, tmp, duration, cache):
    """(calibration-run NRMSE, replayed NRMSE, chosen estimator) of a layout, cached."""
    from offline.build import build
    from offline.placement.replay import replay
    from offline.placement.write import write_placed

    key = tuple(sorted(names))
    if key not in cache:
        out = write_placed(path, Path(tmp) / ("p_" + "_".join(key) + ".toml"), list(names))
        res = build(out, progress=False, maps=False)  # as vsense-offline build: with the limit
        sel = res.bundle.meta["selection"]
        rep = replay(out, result=res, load="band", duration=duration, seed=7)
        cache[key] = (np.array(sel["best"]["nrmse"]), rep, sel["chosen"])
    return cache[key]


def run_structure(name, top, every, duration, tmp, ns=(1, 2)) -> list[dict]:
    from offline.model import load_model_file
    from offline.placement import place, placement_model

    path = Path(tmp) / f"{name}.toml"
    path.write_text(STRUCTURES[name]())
    t0 = time.perf_counter()
    pm = placement_model(load_model_file(path), progress=False)
    cache, rows = {}, []
    for n in ns:
        pl = place(pm, n, progress=False)
        combos = list(itertools.combinations(range(len(pm.candidates)), n))
        pred = {c: pm.nrmse(list(c)) for c in combos}
        ranked = sorted(combos, key=lambda c: np.mean(np.log(pred[c])))
        evaluate = ranked if every else ranked[:top]
        lays = {tuple(sorted(pl.order))} | {tuple(c) for c in evaluate}
        res = {c: built(path, [pm.candidates[i] for i in c], tmp, duration, cache) for c in lays}
        mine = tuple(sorted(pl.order))
        gm = {c: float(np.exp(np.mean(np.log(r[1])))) for c, r in res.items()}
        best = min(gm, key=gm.get)
        cal, rep, chosen = res[mine]
        p = pl.nrmse[-1]
        rows.append({
            "structure": name, "n": n, "targets": pm.targets,
            "place": [pm.candidates[i] for i in pl.order], "predicted": p.tolist(),
            "calibration": cal.tolist(), "replayed": rep.tolist(), "chosen": chosen,
            "pred_vs_cal": float(np.max(np.abs(p / cal - 1))),
            "best_built": [pm.candidates[i] for i in best], "built": len(res),
            "of": len(combos), "ratio_to_best": gm[mine] / gm[best],
            "mean_ratio_to_best": float(np.mean(rep) / min(np.mean(r[1]) for r in res.values())),
            "seconds": time.perf_counter() - t0})
        print(_line(rows[-1]), flush=True)
    return rows


def _fmt(v):
    return " / ".join(f"{x:.3g}" for x in v)


def _line(r) -> str:
    return (f"| {r['structure']} | {r['n']} | {', '.join(r['place'])} | {_fmt(r['predicted'])} | "
            f"{_fmt(r['calibration'])} ({r['chosen']}) | {_fmt(r['replayed'])} | "
            f"{100 * r['pred_vs_cal']:.1f} % | {', '.join(r['best_built'])} "
            f"({r['built']} of {r['of']} built) | {r['ratio_to_best']:.3f} | "
            f"{r['mean_ratio_to_best']:.3f} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default=",".join(STRUCTURES))
    ap.add_argument("--top", type=int, default=3, help="best predicted layouts built (3)")
    ap.add_argument("--all", action="store_true", help="build every layout of 1 and 2")
    ap.add_argument("--duration", type=float, default=8.0, help="replayed seconds (8)")
    ap.add_argument("--n", default="1,2", help="sensor counts (1,2)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    print("| structure | n | place | predicted | calibration runs (chosen) | replayed | "
          "max pred/cal - 1 | best built | place / best (geo. mean) | place / best (mean) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.only.split(","):
            rows += run_structure(name, a.top, a.all, a.duration, tmp,
                                  [int(x) for x in a.n.split(",")])
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
