"""Sensor placement against two baselines, predicted and simulated, and its run time.

    python benchmarks/placement.py [--n 8] [--duration 20] [--no-sim] [--skip-timing]
                                   [--kind acceleration|displacement] [--structure plate|solid]
                                   [--report DIR]

* **plate**: a simply supported steel plate 1.0 x 0.6 m x 5 mm (MITC3, 20 x 12 cells, GMR+ 1
  master + 30 modes), two forces (0.25, 0.20) and (0.70, 0.40), three virtual displacement
  outputs, 200 acceleration candidates (interior nodes, 1 % noise), random 5-150 Hz force
  models. Layouts of ``--n`` sensors from the same candidates by
  - ``place``: the smoother's predicted error (offline/placement),
  - EfI: effective independence (Kammer 1991) on the mode shapes of the ``n`` lowest modes
    at the candidates: drop the candidate of least ``diag(Phi (Phi^T Phi)^-1 Phi^T)`` until
    ``n`` remain (own textbook implementation),
  - QR: QR pivoting (python-sensors ``SSPOR`` with an SVD basis of ``n`` modes) on 2 s of the
    candidates' response snapshots (reduced model, the force models' load).
  For each: the predicted NRMSE of every target (the placement criterion) and the simulated
  one (each layout built; truth from the full model by sparse Newmark on 10x finer steps,
  a sample path of the force models, 1 % noise; offline/placement/replay.py), and the ratio
  of the baselines' errors to place's.
* **solid** (``--structure solid``): a clamped steel block 0.6 x 0.4 x 0.05 m (hex8, 12 x 8
  x 1), a vertical and a lateral force, three outputs (uz, uy, uz), candidates uz on the top
  face and uy on the long sides, 2 kHz, random 5-400 Hz; the same comparison.
* **timing**: ``place`` of 2 of 20 candidates on the paper cantilever (5,610 DOFs, GMR+ 21
  masters + 50 modes = 71 DOFs) and of 8 of the plate's 200, wall time of the set-up (FE model,
  reduction, smoother model) and of the search, with the number of Riccati evaluations.

python-sensors is imported here only; install it with ``pip install 'vsense[placement-bench]'``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PLATE = """name = "plate-2f3o"
type = "plate"
[materials.steel]
E = 210e9
nu = 0.3
rho = 7850.0
[plate]
material = "steel"
thickness = 5e-3
[plate.rectangle]
length = 1.0
width = 0.6
nx = 20
ny = 12
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
ratios = [[40.0, 0.01], [400.0, 0.01]]
[reduction]
method = "gmr+"
modes = 30
[[reduction.masters]]
select = { at = [0.5, 0.3, 0.0] }
dofs = ["uz"]
[estimator]
rate = 1000.0
method = "smoother"
lag = 20
[design_load]
load = { type = "random", band = [5.0, 150.0], rms = 1.0 }
[[forces]]
name = "F1"
select = { at = [0.25, 0.2, 0.0] }
dof = "uz"
[[forces]]
name = "F2"
select = { at = [0.7, 0.4, 0.0] }
dof = "uz"
[[outputs]]
name = "u1"
select = { at = [0.5, 0.3, 0.0] }
dof = "uz"
[[outputs]]
name = "u2"
select = { at = [0.15, 0.45, 0.0] }
dof = "uz"
[[outputs]]
name = "u3"
select = { at = [0.85, 0.15, 0.0] }
dof = "uz"
[placement]
"""
TAKEN = {(0.25, 0.2), (0.7, 0.4), (0.5, 0.3), (0.15, 0.45), (0.85, 0.15)}


def candidate(name, x, y, z, kind):
    return (f'[[placement.candidates]]\nname = "{name}"\nselect = {{ at = [{x:.4f}, {y:.4f}, '
            f'{z:.4f}] }}\ndof = "uz"\nkind = "{kind}"\nnoise = 0.01\n')


def plate_toml(n_cand=200, kind="acceleration"):
    pts = [(round(0.05 * i, 2), round(0.05 * j, 2)) for j in range(1, 12) for i in range(1, 20)]
    pts = [p for p in pts if p not in TAKEN][:n_cand]
    return PLATE + "".join(candidate(f"{kind[0]}{round(x * 100)}_{round(y * 100)}", x, y, 0.0,
                                     kind) for x, y in pts)


def cantilever_toml():
    text = (ROOT / "examples" / "paper_cantilever.toml").read_text()
    text = re.sub(r"\[\[sensors\]\].*?(?=\n\[\[forces\]\])", "", text, flags=re.S)
    text = text.replace('window = "auto"', 'window = "auto"\nmethod = "smoother"\nlag = 20')
    if "[design_load]" not in text and "[calibration]" not in text:
        text += '\n[design_load]\nload = { type = "random", band = [5.0, 160.0], rms = 1.0 }\n'
    text += "\n[placement]\n"
    for i in range(1, 11):
        x = 0.017 * i
        for kind in ("displacement", "acceleration"):
            text += candidate(f"{kind[0]}{round(x * 1000)}", x, 0.0065, 0.0, kind)
    return text


SOLID = """name = "block-2f3o"
type = "solid"
[materials.steel]
E = 210e9
nu = 0.3
rho = 7850.0
[solid]
mesh = "block.vtu"
material = "steel"
[[boundary]]
select = { box = [[0.0, 0.0, 0.0], [0.0, 0.4, 0.05]] }
[damping]
ratios = [[100.0, 0.01], [1000.0, 0.01]]
[reduction]
method = "gmr+"
modes = 30
[[reduction.masters]]
select = { at = [0.6, 0.2, 0.05] }
dofs = ["uz"]
[estimator]
rate = 2000.0
method = "smoother"
lag = 40
[design_load]
load = { type = "random", band = [5.0, 400.0], rms = 1.0 }
[[forces]]
name = "F1"
select = { at = [0.3, 0.1, 0.05] }
dof = "uz"
[[forces]]
name = "F2"
select = { at = [0.55, 0.3, 0.05] }
dof = "uy"
[[outputs]]
name = "u1"
select = { at = [0.6, 0.0, 0.05] }
dof = "uz"
[[outputs]]
name = "u2"
select = { at = [0.6, 0.4, 0.0] }
dof = "uy"
[[outputs]]
name = "u3"
select = { at = [0.15, 0.2, 0.05] }
dof = "uz"
[placement]
"""


def solid_toml(tmp, kind="acceleration"):
    """A steel block 0.6 x 0.4 x 0.05 m (hex8, 12 x 8 x 1), clamped at x = 0; candidates:
    uz on the top face and uy on the side faces, every node not a force or output node."""
    import meshio

    from offline.geometry.box import box_mesh

    mesh = box_mesh((0.6, 0.4, 0.05), (12, 8, 1), "hex8")
    meshio.write(str(tmp / "block.vtu"), meshio.Mesh(mesh.points, [("hexahedron",
                                                                    mesh.cells[0][1])]))
    taken = {(0.3, 0.1), (0.55, 0.3), (0.6, 0.0), (0.6, 0.4), (0.15, 0.2)}
    text = SOLID
    for x, y, z in mesh.points:
        x, y, z = round(float(x), 4), round(float(y), 4), round(float(z), 4)
        if x == 0.0 or (x, y) in taken:
            continue
        if z == 0.05:
            text += candidate(f"z{round(x * 100)}_{round(y * 100)}", x, y, z, kind)
        if y in (0.0, 0.4) and z == 0.0:
            text += candidate(f"y{round(x * 100)}_{round(y * 100)}", x, y, z,
                              kind).replace('dof = "uz"', 'dof = "uy"')
    return text


def efi(Phi, n):
    """Effective independence: drop the least independent candidate until n remain."""
    keep = list(range(Phi.shape[0]))
    while len(keep) > n:
        P = Phi[keep]
        # E = diag(Phi (Phi^T Phi)^-1 Phi^T)   (Kammer 1991)
        E = np.einsum("ij,ji->i", P, np.linalg.solve(P.T @ P, P.T))
        keep.pop(int(np.argmin(E)))
    return keep


def qr_pysensors(X, n):
    try:
        import pysensors as ps
    except ImportError:
        sys.exit("benchmarks/placement.py needs python-sensors: pip install "
                 "'vsense[placement-bench]' (or pip install python-sensors)")
    model = ps.SSPOR(basis=ps.basis.SVD(n_basis_modes=n), n_sensors=n)
    model.fit(X, seed=0)
    return [int(i) for i in model.get_selected_sensors()]


def baselines(pm, n, seconds=2.0, seed=0):
    """EfI and QR layouts (candidate indices) of ``n`` from the placement model ``pm``."""
    from edge.estimator.operator import modal_basis
    from offline.placement.replay import force_path
    from offline.simulate import simulate_dense

    rm = pm.rm
    M, K, C = rm.reduction.M, rm.reduction.K, rm.C
    w2, Phi = modal_basis(M, K)
    shapes = pm.cand_rows @ Phi[:, :n]                    # (ncand, n) lowest n modes
    lay_efi = efi(shapes, n)
    nt = int(seconds / pm.dt)
    F = np.column_stack([force_path(fm, pm.dt, nt, seed + 1000 * i)
                         for i, fm in enumerate(pm.force_models)])
    code = {"displacement": 0, "velocity": 1, "acceleration": 2}
    Fd = [int(np.flatnonzero(rm.masters == d)[0]) for d in rm.force_dofs]
    X = simulate_dense(M, C, K, Fd, F, pm.dt, pm.cand_rows,
                       [code[k] for k in pm.cand_kinds])
    return lay_efi, qr_pysensors(X, n)


def compare(n, duration, sim, tmp, kind="acceleration", structure="plate", report=None):
    from offline.model import load_model_file
    from offline.placement import place, placement_model
    from offline.placement.replay import replay
    from offline.placement.write import write_placed

    path = tmp / f"{structure}.toml"
    path.write_text(plate_toml(kind=kind) if structure == "plate" else solid_toml(tmp, kind))
    spec = load_model_file(path)
    t0 = time.perf_counter()
    pm = placement_model(spec, progress=False)
    t1 = time.perf_counter()
    r = place(pm, n, progress=False)
    t2 = time.perf_counter()
    if report is not None:
        from offline.placement.report import write_report

        write_report(pm, r, {}, Path(report) / f"{structure}_{kind}_{n}")
    print(f"{structure}: {pm.rm.model.n_dofs} FE DOFs, {pm.rm.n} reduced, {len(pm.candidates)} "
          f"candidates, state {pm.A.shape[0]}; place {n}: set-up {t1 - t0:.1f} s, search "
          f"{t2 - t1:.1f} s ({r.evaluations} Riccati evaluations)")
    lay_efi, lay_qr = baselines(pm, n)
    layouts = {"place": r.order, "EfI": lay_efi, "QR (pysensors)": lay_qr}
    rows = {}
    for name, lay in layouts.items():
        pred = pm.nrmse(lay)
        nan = np.full_like(pred, np.nan)
        simv, simb, lim = nan, nan, nan
        if sim:
            from offline.build import build
            from offline.limit.model import model_limit

            names = [pm.candidates[i] for i in lay]
            out = write_placed(path, tmp / f"{structure}_{name.split()[0]}.toml", names)
            res = build(out, progress=False, limit=False, maps=False)
            simv = replay(out, duration=duration, seed=7, result=res)
            simb = replay(out, duration=duration, seed=7, result=res, load="band")
            ml = model_limit(res.spec, res.model, delays=(pm.lag * pm.dt,), exact=False)
            lim = np.concatenate([ml.lag_force_nrmse[0], ml.lag_output_nrmse[0]])
        rows[name] = (pred, simv, simb, lim)
        print(f"  {name:15s} {' '.join(pm.candidates[i] for i in lay)}")
    head = " / ".join(pm.targets)
    print(f"\n| method | predicted {head} | simulated, force-model load | simulated, ideal-band "
          f"load | limit {pm.lag * pm.dt * 1e3:g} ms (ideal band) | ideal band / limit | "
          "baseline / place, outputs: predicted; simulated (force model) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    nf = len(pm.force_models)

    def fmt(v, f=".3g"):
        return " / ".join(f"{x:{f}}" for x in v)

    for name, (pred, simv, simb, lim) in rows.items():
        rp = pred[nf:] / rows["place"][0][nf:]
        rs = simv[nf:] / rows["place"][1][nf:]
        print(f"| {name} | {fmt(pred)} | {fmt(simv)} | {fmt(simb)} | {fmt(lim)} | "
              f"{fmt(simb / lim, '.2f')} | {fmt(rp, '.2f')}; {fmt(rs, '.2f')} |")
    if sim and report is not None:
        plot_predicted_simulated(rows, pm.targets, Path(report) / f"{structure}_{kind}_{n}"
                                 / "predicted_simulated.png")
    if sim:
        for name, (pred, simv, simb, lim) in rows.items():
            print(f"  {name}: simulated / predicted, force-model load {fmt(simv / pred, '.2f')}; "
                  f"ideal-band load {fmt(simb / pred, '.2f')}")
    return rows


def plot_predicted_simulated(rows, targets, path):
    """Simulated against predicted NRMSE of every target, per method and load."""
    from offline._deps import need

    need("matplotlib").use("Agg")
    plt = need("matplotlib.pyplot")
    fig, ax = plt.subplots(figsize=(5, 4.4))
    for (name, (pred, simv, simb, _)), mk in zip(rows.items(), "osD"):
        ax.plot(pred, simv, mk, mfc="none", label=f"{name}, force-model load")
        ax.plot(pred, simb, mk, alpha=0.5, label=f"{name}, ideal-band load")
    lo = min(np.nanmin(r[0]) for r in rows.values()) / 1.5
    hi = max(np.nanmax(r[0]) for r in rows.values()) * 1.5
    ax.plot([lo, hi], [lo, hi], "k-", lw=0.8)
    ax.fill_between([lo, hi], [lo * 0.85, hi * 0.85], [lo * 1.15, hi * 1.15], color="0.9")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticker = need("matplotlib.ticker")
    for axis in (ax.xaxis, ax.yaxis):  # decades only: minor labels overlap
        axis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel("predicted NRMSE")
    ax.set_ylabel("simulated NRMSE (full model)")
    ax.set_title(f"{', '.join(targets)}; band: +/-15 %", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def timing(tmp):
    from offline.placement.cli import run_place

    for label, text, n in (("paper cantilever, 2 of 20", cantilever_toml(), 2),
                           ("plate, 8 of 200", plate_toml(), 8)):
        p = tmp / "t.toml"
        p.write_text(text)
        t0 = time.perf_counter()
        res = run_place(p, n, tmp / "t_out.toml", progress=False, say=lambda *a: None)
        dt = time.perf_counter() - t0
        pl = res["placement"]
        print(f"timing {label}: {dt:.1f} s in all ({pl.evaluations} Riccati evaluations, "
              f"state {res['pm'].A.shape[0]}); chosen "
              f"{', '.join(res['names'])}; predicted "
              + ", ".join(f"{t} {v:.3g}" for t, v in zip(res["pm"].targets, pl.nrmse[-1])))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--duration", type=float, default=20.0)
    ap.add_argument("--no-sim", action="store_true")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--kind", default="acceleration", choices=("acceleration", "displacement"),
                    help="kind of the candidates")
    ap.add_argument("--structure", default="plate", choices=("plate", "solid"))
    ap.add_argument("--report", default=None, help="directory for the curve and layout PNGs")
    a = ap.parse_args(argv)
    print(f"load {os.getloadavg()[0]:.1f}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        if not a.skip_timing:
            timing(tmp)
        compare(a.n, a.duration, not a.no_sim, tmp, a.kind, a.structure, a.report)


if __name__ == "__main__":
    main()
