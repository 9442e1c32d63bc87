"""``vsense-offline fatigue``: rainflow count, Miner damage and its uncertainty of one column
of a replay or score CSV, with the device's own counter (edge/fatigue, the same kernel and
curves), a JSON summary and a report figure.

    vsense-offline fatigue ESTIMATES.csv --column NAME --curve EN-71 [--unit MPa|Pa|strain
                           --E 210e9] [--rows-of ESTIMATES.csv] -o DIR

**Damage interval from the stated std.** A replay CSV carries ``<NAME>_std``, the estimator's
stated standard deviation of each row. The interval is a first-order bound, not a Monte
Carlo, with ``sigma`` the largest stated std of the counted rows and ``k = 1.96``; the Miner
sum is taken through the S-N curve (knee and cut-off included) at both ends:

* lower end: each counted cycle's range ``S`` moved to ``S - 2 k sigma`` (the truth at the
  estimate's two turning points, each within its two-sided 95 % bound). The cycles below
  ``2 k sigma`` vanish: those the error may create in the estimate;
* upper end: ``S + (k_a + k_b) sigma``. The truth's extremum near a turning point of the
  estimate is the largest (smallest) of ``x_hat_i + e_i`` over the turning point's dwell,
  the ``n_d`` contiguous samples within ``2 k sigma`` of it, so it selects the error's
  extreme there; by Bonferroni (any correlation of the error) that extreme is within
  ``k_j sigma``, ``k_j = Phi^-1(1 - 0.025 / n_d)`` (1.96 at a sharp turning point, 3.7 for
  a 200-sample dwell: :func:`turning_point_k`);
* upper end, plus the cycles the error may hide from the estimate (content it cannot see,
  a mode above what the sensors resolve): a record of ``n`` counted samples has at most
  ``n / 2`` cycles, closed or half, so at most ``n / 2 - sum(counted weights)`` more, each
  of range at most ``2 k sigma`` (a larger one would show in the estimate).

An MMSE estimate's shrinkage (``var(x_hat) = var(x) - sigma^2``: ranges short by about
``S sigma^2 / (2 var(x))``) is inside the ``2 k sigma`` move for any range below
``4 k std(x) / NRMSE``. Not covered: errors larger than the stated std (a level tracker's
lag), and hidden cycles larger than ``2 k sigma`` (only where the stated std understates
the error). The damage is that of the counted rows (warm-up rows are gaps); a truth
counted over other rows differs by their cycles: ``--rows-of ESTIMATES.csv`` counts a truth
CSV on the estimate's counted rows only (matched by time stamp). Why not count ``signal + error`` samples:
the CSV states the error's size, not its spectrum, and white perturbations of that size
would add small cycles the estimator's smooth error does not have (a bias, not an interval).
"""

from __future__ import annotations

import json
from pathlib import Path
from statistics import NormalDist

import numpy as np

from edge.csvio import read_table
from edge.flags import FLAG_WARMUP
from edge.fatigue import HistogramBins, Hotspot, RainflowCounter, equivalent_range
from edge.fatigue.reference import reversal_index
from edge.fatigue.damage import damage_rate, miner_damage, residue_half_cycles
from edge.fatigue.sn_curve import SNCurve, SNCurveError, curve
from offline._deps import need

UNITS = ("MPa", "Pa", "strain", "microstrain")
K_SIGMA = 1.96
#: two-sided probability of each turning point's bound (K_SIGMA is its quantile)
KEEP = 0.95
SECONDS_PER_YEAR = 365.25 * 86400.0


class FatigueInputError(ValueError):
    """A CSV, column, unit or curve the command cannot use (exit 2)."""


def scale_to_mpa(unit: str, E: float | None) -> float:
    """Factor from the column's unit to MPa (strain needs Young's modulus E in Pa)."""
    if unit == "MPa":
        return 1.0
    if unit == "Pa":
        return 1e-6
    if unit in ("strain", "microstrain"):
        if E is None or not (np.isfinite(E) and E > 0):
            raise FatigueInputError(f"--unit {unit} needs --E (Young's modulus in Pa, > 0)")
        return E * 1e-6 * (1e-6 if unit == "microstrain" else 1.0)
    raise FatigueInputError(f"--unit must be one of {', '.join(UNITS)}, got {unit!r}")


def parse_curve(text: str):
    """A preset name (``EN-71``, ``DNV-D-air``) or a user curve ``key=value,...`` with the
    keys of :meth:`edge.fatigue.sn_curve.SNCurve.from_dict` (``m1=5,S_ref=71,N_ref=2e6``:
    one slope through 71 MPa at 2e6 cycles, no knee, no cut-off)."""
    try:
        if "=" not in text:
            return curve(text)
        d = {}
        for part in text.split(","):
            key, sep, val = (x.strip() for x in part.partition("="))
            if not sep or not key:
                raise SNCurveError(f"--curve {text!r}: expected key=value pairs separated by "
                                   f"commas, got {part!r}")
            try:
                d[key] = float(val)
            except ValueError:
                raise SNCurveError(f"--curve {text!r}: {key} = {val!r} is not a number") \
                    from None
        return SNCurve.from_dict(d, name=f"user ({text})")
    except SNCurveError as exc:
        raise FatigueInputError(str(exc)) from None


def _column(path, name):
    t, data, names = read_table(path, min_rows=2)
    if name not in names:
        raise FatigueInputError(f"{path}: no column {name!r}; columns: {', '.join(names)}")
    y = data[:, names.index(name)].copy()
    n_warm = 0
    if "flags" in names:  # warm-up rows are gaps, as the device's counter sees them
        warm = (np.nan_to_num(data[:, names.index("flags")]).astype(np.int64)
                & FLAG_WARMUP) != 0
        y[warm], n_warm = np.nan, int(warm.sum())
    if not np.any(np.isfinite(y)):
        raise FatigueInputError(f"{path}: column {name!r} has no finite value"
                                + (f" outside the {n_warm} warm-up rows" if n_warm else ""))
    std = None
    if f"{name}_std" in names:
        std = np.where(np.isfinite(y), data[:, names.index(f"{name}_std")], np.nan)
        if np.any(np.isfinite(std) & (std < 0)):
            raise FatigueInputError(f"{path}: column {name}_std has negative values")
    return t, y, std, n_warm


def _counted_rows(ref, name):
    """Time stamps of the rows the CSV ``ref`` counts, and which of them are counted (not
    flagged warm-up, a finite value in ``name`` when it has that column)."""
    t_r, data_r, names_r = read_table(ref, min_rows=2)
    keep = np.ones(len(t_r), bool)
    if "flags" in names_r:
        keep &= (np.nan_to_num(data_r[:, names_r.index("flags")]).astype(np.int64)
                 & FLAG_WARMUP) == 0
    if name in names_r:
        keep &= np.isfinite(data_r[:, names_r.index(name)])
    return t_r, keep


def on_rows_of(path, t, y, std, ref, name):
    """``t, y, std`` of ``path`` on the rows of ``ref`` (``--rows-of``), the rows ``ref``
    does not count as gaps, and how many rows that leaves out. Rows are matched by time
    stamp (to 1e-3 of a sample interval); a row ``ref`` counts must exist in ``path``."""
    t_r, keep = _counted_rows(ref, name)
    tol = 1e-3 * float(np.median(np.diff(t)))
    j = np.clip(np.searchsorted(t, t_r), 1, len(t) - 1)
    j = np.where(np.abs(t[j - 1] - t_r) <= np.abs(t[j] - t_r), j - 1, j)
    match = np.abs(t[j] - t_r) <= tol
    if np.any(keep & ~match):
        k = int(np.flatnonzero(keep & ~match)[0])
        raise FatigueInputError(
            f"{path}: no row at time {t_r[k]:.9g} s, which {ref} counts "
            f"({int(np.count_nonzero(keep & ~match))} such rows): --rows-of needs the "
            "same time stamps (the estimate of this record)")
    rows, counted = j[match], keep[match]
    y = np.where(counted, y[rows], np.nan)
    std = None if std is None else np.where(counted, std[rows], np.nan)
    left = len(t) - int(np.count_nonzero(counted & np.isfinite(y)))
    return t[rows], y, std, left


def analyse(path, column: str, curve_name: str, unit: str = "MPa", E: float | None = None,
            n_bins: int = 32, n_points: int = 200, rows_of=None) -> dict:
    """Count ``column`` of ``path``; returns the summary and the arrays of the figure.
    ``rows_of``: a replay CSV whose counted rows are the only ones counted here (the truth
    over the estimate's rows: its warm-up rows and the rows past its end left out)."""
    sn = parse_curve(curve_name)
    scale = scale_to_mpa(unit, E)
    t, y, std, n_warm = _column(path, column)
    n_left = 0
    if rows_of is not None:
        t, y, std, n_left = on_rows_of(path, t, y, std, rows_of, column)
        if not np.any(np.isfinite(y)):
            raise FatigueInputError(f"{path}: column {column!r} has no finite value on the "
                                    f"rows {rows_of} counts")
    lo, hi = float(np.nanmin(y)), float(np.nanmax(y))
    span = max(hi - lo, abs(hi) * 1e-12, 1e-300)
    bins = HistogramBins(span * (1 + 1e-9), lo, lo + span * (1 + 1e-9))
    c = RainflowCounter([Hotspot(column, sn, scale, bins)], n_range=n_bins, n_mean=n_bins,
                        residue_cap=4096, log_cap=len(y))
    edges = np.unique(np.linspace(0, len(y), n_points + 1).astype(int))
    t_d, d = [], []
    for i0, i1 in zip(edges[:-1], edges[1:]):
        c.update(np.ascontiguousarray(y[i0:i1]))
        t_d.append(t[i1 - 1])
        d.append(c.summary()["damage"])
    s = c.summary()
    cyc = c.cycle_log()
    w = cyc[:, 2]
    _, res = c.finish()
    ra, rb = residue_half_cycles(res)
    ends = np.concatenate((cyc[:, :2], np.column_stack((ra, rb))))
    all_r = np.abs(ends[:, 1] - ends[:, 0])
    all_w = np.concatenate((w, np.full(ra.size, 0.5)))
    duration = float(t[-1] - t[0] + (t[1] - t[0]))
    rate = damage_rate(s["damage_with_residue"], duration)
    out = {"file": str(path), "column": column, "curve": sn.name, "curve_source": sn.source,
           "unit": unit, "scale_to_MPa": scale, "samples": s["samples"], "gaps": s["gaps"],
           "warmup_rows": n_warm, "rows_of": None if rows_of is None else str(rows_of),
           "rows_of_left_out": n_left,
           "duration_s": duration, "cycles": s["cycles"], "residue_points": s["residue"],
           "damage": s["damage"], "damage_with_residue": s["damage_with_residue"],
           "damage_rate_per_s": rate, "damage_rate_per_year": rate * SECONDS_PER_YEAR,
           "years_to_failure": (1.0 / (rate * SECONDS_PER_YEAR)) if rate > 0 else None,
           "equivalent_range_MPa": equivalent_range(all_r * scale, all_w, sn.m1),
           "equivalent_range_2e6_MPa": equivalent_range(all_r * scale, all_w, sn.m1,
                                                        n_eq=2e6),
           "overflow": s["overflow"]}
    out.update(_interval(std, y, ends, all_w, sn, scale))
    arrays = {"hist": c.hist[0], "edges": bins.edges(n_bins, n_bins),
              "t_damage": np.array(t_d), "damage": np.array(d)}
    return {"summary": out, "arrays": arrays}


def turning_point_k(y: np.ndarray, delta: float) -> dict:
    """Bound factor ``k_j`` of each turning point of ``y`` (gaps dropped, repeats merged, as
    the counter sees it), keyed by its value: the truth's extremum near a peak ``v`` of the
    estimate is the largest ``y_i + e_i`` over the dwell, the ``n_d`` contiguous samples with
    ``y_i >= v - delta`` (``<= v + delta`` at a valley), so its error is the largest of
    ``n_d`` errors; Bonferroni (any correlation): ``P(max e_i > k sigma) <= n_d P(e > k
    sigma)``, so ``k_j = Phi^-1(1 - 0.025 / n_d)`` (1.96 for ``n_d = 1``)."""
    y, turn = reversal_index(y)          # the counter's reversals (its NumPy twin's)
    if y.size < 3:
        return {}
    inv = NormalDist().inv_cdf
    out: dict = {}
    for j in turn.tolist():
        v = y[j]
        peak = (j > 0 and y[j - 1] < v) or (j == 0 and y[1] < v)
        n_d = 1 + _run_length(y, j, -1, v, delta, peak) + _run_length(y, j, 1, v, delta, peak)
        k = inv(1.0 - 0.5 * (1.0 - KEEP) / n_d)
        out[v] = max(out.get(v, 0.0), k)
    return out


def _run_length(y, j, step, v, delta, peak) -> int:
    """Samples next to ``j`` (towards ``step``) within ``delta`` of the extremum ``v``,
    scanned in growing windows."""
    n, w = 0, 16
    while True:
        a, b = (max(j - n - w, 0), j - n) if step < 0 else (j + n + 1, min(j + n + 1 + w, y.size))
        if b <= a:
            return n
        seg = y[a:b] if step > 0 else y[a:b][::-1]
        out = np.nonzero(seg < v - delta if peak else seg > v + delta)[0]
        if out.size:
            return n + int(out[0])
        n, w = n + (b - a), 2 * w


def _interval(std, y, ends, weights, sn, scale) -> dict:
    """Miner damage of the counted cycles (``ends``: from, to) with each range moved down by
    ``2 k sigma`` and up by ``(k_a + k_b) sigma`` (:func:`turning_point_k`), plus at the upper
    end the cycles the error may hide: at most ``n / 2 - sum(weights)`` cycles of range
    ``2 k sigma`` (a record of ``n`` samples has at most ``n / 2`` cycles, closed or half)."""
    if std is None or not np.any(np.isfinite(std)):
        return {"damage_interval": None,
                "damage_interval_note": "no <column>_std in the CSV: no interval"}
    sigma = float(np.nanmax(std))
    dS = 2.0 * K_SIGMA * sigma
    ranges = np.abs(ends[:, 1] - ends[:, 0])
    kj = turning_point_k(y, dS)
    k_far = max(kj.values(), default=K_SIGMA)  # an end not found: the record's largest k
    k_up = np.array([kj.get(a, k_far) + kj.get(b, k_far) for a, b in ends.tolist()])
    n_hidden = max(0.5 * int(np.count_nonzero(np.isfinite(std))) - float(np.sum(weights)),
                   0.0)
    d_hidden = miner_damage(np.array([dS]), np.array([n_hidden]), sn, scale)
    lo = miner_damage(np.maximum(ranges - dS, 0.0), weights, sn, scale)
    hi = miner_damage(ranges + k_up * sigma, weights, sn, scale) + d_hidden
    return {"damage_interval": [lo, hi], "sigma": sigma, "hidden_cycles_max": n_hidden,
            "damage_hidden_max": d_hidden,
            "k_turning_max": float(k_up.max() / 2) if k_up.size else K_SIGMA,
            "damage_interval_note": f"each range moved down by 2 x {K_SIGMA} x max std "
                                    f"({dS:.4g} column units), up by its turning points' "
                                    f"bounds (k up to {float(k_up.max(initial=0)) / 2:.3g}), "
                                    f"plus up to {n_hidden:.6g} hidden cycles of "
                                    f"{dS:.4g} at the upper end"}


def figure(result: dict, path) -> Path:
    """Range-mean histogram and damage over time, one PNG."""
    need("matplotlib").use("Agg")
    plt = need("matplotlib.pyplot")
    s, a = result["summary"], result["arrays"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    r_edges, m_edges = a["edges"]
    h = np.where(a["hist"] > 0, a["hist"], np.nan)
    k = s["scale_to_MPa"]
    im = ax1.pcolormesh(m_edges * k, r_edges * k, h, shading="flat",
                        norm=need("matplotlib.colors").LogNorm())
    fig.colorbar(im, ax=ax1, label="cycles")
    ax1.set_xlabel("mean [MPa]")
    ax1.set_ylabel("range [MPa]")
    ax1.set_title(f"rainflow {s['column']}: {s['cycles']:.0f} cycles")
    ax2.plot(a["t_damage"], a["damage"], color="C3")
    ax2.set_xlabel("time [s]")
    ax2.set_ylabel("Miner damage (closed cycles)")
    ax2.set_title(f"{s['curve']}: D = {s['damage_with_residue']:.3g} with the residue")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _rows_of_note(s: dict) -> str:
    if not s.get("rows_of"):
        return ""
    return f"; on the rows {s['rows_of']} counts: {s['rows_of_left_out']} rows left out"


def format_summary(s: dict) -> str:
    iv = s["damage_interval"]
    lines = [f"{s['file']} column {s['column']} ({s['unit']}), curve {s['curve']} "
             f"({s['curve_source']})",
             f"  samples {s['samples']} ({s['gaps']} gaps; {s['warmup_rows']} warm-up rows "
             f"left out{_rows_of_note(s)}), {s['duration_s']:.6g} s, "
             f"cycles {s['cycles']:.1f}, residue {s['residue_points']} points",
             f"  damage {s['damage']:.6g} (closed cycles), {s['damage_with_residue']:.6g} "
             "with the residue as half cycles",
             f"  damage rate {s['damage_rate_per_s']:.6g} /s = "
             f"{s['damage_rate_per_year']:.6g} /year",
             f"  equivalent range {s['equivalent_range_MPa']:.6g} MPa over the counted "
             f"cycles, {s['equivalent_range_2e6_MPa']:.6g} MPa at 2e6 cycles (m = "
             "first slope)"]
    if iv is None:
        lines.append(f"  damage interval: {s['damage_interval_note']}")
    else:
        lines.append(f"  damage interval [{iv[0]:.6g}, {iv[1]:.6g}] (closed cycles and "
                     f"residue; {s['damage_interval_note']})")
    return "\n".join(lines)


def run_fatigue(csv_path, column, curve_name, out_dir, unit="MPa", E=None,
                rows_of=None) -> str:
    """The command: count, write ``DIR/fatigue.json`` and ``DIR/fatigue.png``."""
    res = analyse(csv_path, column, curve_name, unit=unit, E=E, rows_of=rows_of)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "fatigue.json").write_text(json.dumps(res["summary"], indent=2) + "\n")
    png = figure(res, out / "fatigue.png")
    return format_summary(res["summary"]) + f"\nwrote {out / 'fatigue.json'} and {png}"
