"""Summary text and figures of a placement: the predicted error against the sensor count,
and the chosen layout drawn on the structure (matplotlib PNG)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from offline._deps import need


def summary(pm, res, blind) -> str:
    """Table of the predicted NRMSE of every target for 0..N added sensors."""
    names = pm.targets
    w = max(10, *(len(n) + 2 for n in names))
    head = f"{'k':>3}  {'added':<14}{'cost':>7}  " + "".join(f"{n:>{w}}" for n in names)
    lines = ["predicted normalised RMS error on the build's calibration runs (its smoother, lag "
             f"{pm.lag} samples = {pm.lag * pm.dt * 1e3:g} ms; sensors kept: "
             f"{', '.join(pm.sensors) or 'none'})", head]
    for k, row in enumerate(res.nrmse):
        add = pm.candidates[res.added[k]] if k else "-"
        cost = float(pm.cost[res.layouts[k]].sum()) if k else 0.0
        ex = ", ".join(f"{pm.candidates[a]} -> {pm.candidates[b]}" for a, b in res.swaps[k])
        lines.append(f"{k:>3}  {add:<14}{cost:>7.3g}  " + "".join(f"{v:>{w}.4g}" for v in row)
                     + (f"   exchanged {ex}" if ex else ""))
    # candidates' order: the channels' order scored (with a cycling multiplexer, their
    # conversion instants: offline/placement/chained.py)
    lines.append(f"order written: {', '.join(pm.candidates[i] for i in sorted(res.order))} "
                 f"({res.evaluations} Riccati evaluations, {res.exchanges} exchange(s))")
    for n, v in blind.items():
        lines.append(f"not identifiable: {n} (predicted NRMSE {v:.3f} even with every "
                     f"candidate: no layout of these candidates sees it)")
    return "\n".join(lines)


def plot_curve(pm, res, path) -> str:
    """Predicted NRMSE of each target against the number of added sensors."""
    need("matplotlib").use("Agg")
    plt = need("matplotlib.pyplot")
    fig, ax = plt.subplots(figsize=(6, 3.8))
    k = np.arange(res.nrmse.shape[0])
    for j, name in enumerate(pm.targets):
        ax.plot(k, res.nrmse[:, j], "o-", label=name)
    ax.set_yscale("log")
    ax.set_xlabel("sensors added (best layout found of each size)")
    ax.set_ylabel("predicted normalised RMS error")
    ax.set_xticks(k)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title("error against sensor count")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def plot_layout(pm, res, path) -> str:
    """The structure's nodes, the candidates, the chosen sensors (numbered in order), the
    forces and the outputs, seen along the axis of least extent (beam: x-z, plate: x-y)."""
    need("matplotlib").use("Agg")
    plt = need("matplotlib.pyplot")
    model = pm.rm.model
    xyz = model.coords
    ext = np.ptp(xyz, axis=0)
    a, b = [int(i) for i in np.argsort(-ext)[:2]]
    if ext[b] <= 1e-9 * max(ext[a], 1e-300):  # a line: draw along its axis
        b = (a + 2) % 3

    def at(dof):
        return xyz[int(np.flatnonzero(model.node_ids == model.dof_node[dof])[0])]

    fig, ax = plt.subplots(figsize=(8, 4))
    ax.plot(xyz[:, a], xyz[:, b], ".", ms=2, color="0.8", label="nodes")
    cp = np.array([at(d) for d in pm.cand_dofs])
    ax.plot(cp[:, a], cp[:, b], "o", mfc="none", color="0.45", label="candidates")
    for k, i in enumerate(res.order):
        p = cp[i]
        ax.plot(p[a], p[b], "o", color="C0", ms=9, label="chosen" if k == 0 else None)
        ax.annotate(f"{k + 1}", (p[a], p[b]), textcoords="offset points", xytext=(4, 5),
                    fontsize=9, color="C0", weight="bold")
    rm = pm.rm
    for k, d in enumerate(rm.chan_dofs):
        p = at(d)
        ax.plot(p[a], p[b], "s", color="k", ms=7, label="kept sensors" if k == 0 else None)
    for k, (d, name) in enumerate(zip(rm.force_dofs, pm.targets)):
        p = at(d)
        ax.plot(p[a], p[b], "x", color="C3", ms=11, mew=2, label="forces" if k == 0 else None)
        ax.annotate(name, (p[a], p[b]), textcoords="offset points", xytext=(4, -12),
                    fontsize=8, color="C3")
    outs = pm.targets[len(rm.force_dofs):]
    for k, (d, name) in enumerate(zip(rm.out_dofs, outs)):
        p = at(d)
        ax.plot(p[a], p[b], "^", color="C2", ms=8, label="outputs" if k == 0 else None)
        ax.annotate(name, (p[a], p[b]), textcoords="offset points", xytext=(4, -12),
                    fontsize=8, color="C2")
    ax.set_xlabel("xyz"[a] + " [m]")
    ax.set_ylabel("xyz"[b] + " [m]")
    ax.set_aspect("equal" if ext[b] > 0.05 * ext[a] else "auto")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title("chosen layout (numbers: order chosen)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def write_report(pm, res, blind, out_dir) -> Path:
    """``placement_summary.txt``, ``placement_curve.png``, ``placement_layout.png``."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    (d / "placement_summary.txt").write_text(summary(pm, res, blind) + "\n")
    plot_curve(pm, res, d / "placement_curve.png")
    plot_layout(pm, res, d / "placement_layout.png")
    return d
