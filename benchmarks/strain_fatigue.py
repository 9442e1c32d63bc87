"""Virtual strain at an unmeasured point and the fatigue damage it consumes, through the public
CLI: ``simulate`` (truth: exact modal integration of the full model, 10x oversampled),
``build --record``, ``vsense-edge replay``, ``score`` and ``fatigue``; the accuracy limit
from ``offline.limit.model.model_limit`` under the true load.

    python benchmarks/strain_fatigue.py [--case beam|plate|frame|all] [--duration 60]
                                        [--seed 5] [--out DIR] [--reuse]

Three structures (benchmarks/strain_cases.py: a cantilever's root, a plate's clamped edge, a
portal frame's joint), model files written as docs/modelfile.md shows them. The load is a
Gaussian force band-limited to 2-100 Hz times an envelope with changing levels (quiet 0.4,
normal 1.0) and bursts (2.5), written as a CSV and applied with ``simulate --load csv
--warmup 2`` (the structure is moving when the record starts); the records go through the
default measurement chain (a model file without ``[acquisition]``: the ADS1256 for the
cantilever's one channel; point samples for the two-channel plate and frame, since no
ADS1256 data rate gives 1000 rows/s for two cycled channels). Each
sensor's noise is a property of the sensor (``noise_std`` = 1 % of its response std in the
training record, the same absolute std in every record). The bundle learns the load from a
20 s burst record (seed 11); the test record is ``--duration`` s (``--seed``).

Reported per case: the strain's normalised RMS error (time domain, full band, ``score``'s
warm-up rows skipped) and 1-sigma coverage of the stated std; the accuracy limit at the
bundle's delay through the bundle's chain under the record's average load spectrum (the
band convolved with the envelope's spectrum, at the level of the record's true strain: the
best time-invariant estimator's error on the burst load; :func:`limits`) and, for reference,
the per-level ("oracle") limit; the Miner damage of the estimated strain for single-slope S-N
curves m = 3 and m = 5 (``vsense-offline fatigue --curve m1=..``: the device's rainflow
kernel, ``--unit microstrain --E 210e9``, closed cycles plus the residue as half cycles)
against the damage of the true strain by fatpack's rainflow count (reversals
``fatpack.find_reversals`` on 2^16 classes, ``find_rainflow_cycles``, residue as half cycles,
the same curve) over the rows the command counts (its warm-up rows left out), and whether
the stated damage interval covers it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.csvio import read_table, write_table  # noqa: E402
from edge.fatigue.damage import miner_damage  # noqa: E402
from edge.flags import FLAG_WARMUP  # noqa: E402
from offline.fatigue import parse_curve  # noqa: E402

from strain_cases import (BAND, CASES, AverageSpectrum, burst_load, envelope,  # noqa: E402
                          level_weights)

BIN = Path(sys.executable).parent
E_STEEL = 210e9
#: single-slope S-N curves through 71 MPa at 2e6 cycles (no knee, no cut-off): the damage
#: ratio estimate / truth of a slope m does not depend on the reference point
CURVES = {"m3": "m1=3,S_ref=71,N_ref=2e6", "m5": "m1=5,S_ref=71,N_ref=2e6"}
WARMUP = 2.0
TRAIN_S, TRAIN_SEED = 20.0, 11


def _run(*args) -> str:
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"{' '.join(map(str, args))} failed ({r.returncode}):\n{r.stderr}")
    return r.stdout


def _add_noise(path_in, path_out, stds: dict, seed: int):
    t, data, names = read_table(path_in)
    rng = np.random.default_rng(seed)
    for j, n in enumerate(names):
        data[:, j] += stds[n] * rng.standard_normal(data.shape[0])
    write_table(path_out, t, data, names)


def _truth_damage(stress_mpa, sn) -> float:
    """fatpack's rainflow count of the true stress history, residue as half cycles."""
    import fatpack

    rev, _ = fatpack.find_reversals(stress_mpa, k=2**16)
    cyc, res = fatpack.find_rainflow_cycles(rev)
    r = np.concatenate((np.abs(cyc[:, 1] - cyc[:, 0]), np.abs(np.diff(res))))
    w = np.concatenate((np.ones(len(cyc)), np.full(len(res) - 1, 0.5)))
    return miner_damage(r, w, sn, 1.0)


def run_case(case: str, work: Path, duration: float, reuse: bool = False,
             seed: int = 5) -> dict:
    tmpl, rms = CASES[case]
    off, edge = BIN / "vsense-offline", BIN / "vsense-edge"
    w = work / case
    w.mkdir(parents=True, exist_ok=True)
    if not (reuse and (w / "est.csv").exists()):
        _prepare(off, edge, case, tmpl, rms, w, duration, seed)
    return _measure(off, w, rms, duration, seed)


def _force_csv(path, name, duration, rms, seed):
    """The force history of ``simulate --load csv``: its time 0 is the warm-up's start, so
    the structure is moving when the record begins."""
    t, f = burst_load(WARMUP + duration, rms, seed)
    write_table(path, t, f[:, None], [name])


def _prepare(off, edge, case, tmpl, rms, w, duration, seed):
    """Model file, burst records through the default chain, noise, bundle (from the
    training record) and the replay of the test record."""
    model = w / "model.toml"
    base = tmpl.replace("RMS", repr(rms))
    model.write_text("\n".join(ln.split(" = NOISE_")[0] + " = 1.0" if " = NOISE_" in ln
                               else ln for ln in base.splitlines()))
    force = next(ln.split('"')[1] for ln in base.split("[[forces]]")[1].splitlines()
                 if ln.startswith("name"))
    _force_csv(w / "rec_force.csv", force, TRAIN_S, rms, TRAIN_SEED)
    _force_csv(w / "test_force.csv", force, duration, rms, seed)
    sim = ["--load", "csv", "--warmup", WARMUP, "--noise", 0, "--quiet"]  # default chain
    _run(off, "simulate", model, *sim, "--csv", w / "rec_force.csv", "--duration", TRAIN_S,
         "--seed", TRAIN_SEED, "-o", w / "rec")
    _run(off, "simulate", model, *sim, "--csv", w / "test_force.csv", "--duration", duration,
         "--seed", seed, "-o", w / "test")
    # each sensor's noise: 1 % of its response std in the training record, then fixed
    _, yr, names = read_table(w / "rec_measurement.csv")
    stds = {n: float(f"{0.01 * float(np.std(yr[:, j])):.4g}") for j, n in enumerate(names)}
    text = base
    for n in sorted(stds, key=len, reverse=True):
        text = text.replace(f"NOISE_{n}", f"{stds[n]:.4g}")
    model.write_text(text)
    _add_noise(w / "rec_measurement.csv", w / "rec_noisy.csv", stds, 111)
    _add_noise(w / "test_measurement.csv", w / "test_noisy.csv", stds, 100 + seed)
    bundle = w / "bundle.npz"
    _run(off, "build", model, "-o", bundle, "--record", w / "rec_noisy.csv", "--quiet")
    _run(edge, "replay", w / "test_noisy.csv", "--bundle", bundle, "-o", w / "est.csv")


def limits(model_path, bundle_path, rms: float, a: np.ndarray, truth_std: float) -> dict:
    """The strain's accuracy limit at the bundle's delay, through its chain, under the
    record's load: ``average``, the limit under the record's average spectrum (a fixed linear
    filter's error variance is linear in the load spectrum, so over segments of different
    levels it is its error under the average spectrum, and the best time-invariant
    estimator's is this limit). That spectrum is the band's convolved with the envelope's
    (:class:`strain_cases.AverageSpectrum`: the level changes spread the band), at the level
    the record shows: scaled so that the strain's stationary std is ``truth_std``, the std of
    the scored rows' true strain, which normalises the estimate's error too (the noise's
    std is fixed, so a record with less response has a larger relative error, the limit's
    with it). ``average_flat``: the former basis (flat over BAND, mean square
    ``rms^2 mean(a^2)``), for reference. ``per_level``: the limit of each level's stationary
    flat band (at the same record level), and ``oracle``, their mean-square combination
    weighted by each level's share of the response variance ``sqrt(sum_k w_k lim_k^2)`` (an
    estimator told the level; transitions ignored)."""
    from edge.bundle import Bundle
    from offline.limit.model import model_limit
    from offline.limit.ratio import bundle_delay_s
    from offline.limit.transfer import ForceSpectrum, modal_model
    from offline.model import build_fe_model, load_model_file, output_probe, resolve_dofs

    spec = load_model_file(model_path)
    model = build_fe_model(spec)
    b = Bundle.load(bundle_path)
    delay = bundle_delay_s(b)
    fd = [resolve_dofs(model, f.select, f.dof, f.name)[0] for f in spec.forces]
    cd = [resolve_dofs(model, s.select, s.dof, s.name)[0] for s in spec.sensors]
    mm = modal_model(model, fd, cd + [output_probe(model, o) for o in spec.outputs],
                     n_modes=80)
    j = [o.name for o in spec.outputs].index("eps")

    def lim(load, exact=True):
        """(limit at the delay, exact?, non-causal limit, stationary std) under a load."""
        res = model_limit(spec, model, delays=[delay], loads=load, chain=b.chain, mm=mm,
                          exact=exact)
        ex = bool(res._exact()[-1, len(spec.forces) + j])
        return (float(res.at_delay(delay)[1][j]), ex, float(res.output_nrmse[j]),
                float(res.info["output_std"][j]))

    avg = AverageSpectrum(a, rms, b.dt)
    level = (truth_std / lim(avg, exact=False)[3]) ** 2  # the record's level
    av, exact, av_nc, _ = lim(avg.scaled(level))
    flat = lim([ForceSpectrum("random", BAND, rms * float(np.sqrt(np.mean(a ** 2))))])
    wts = level_weights(a)
    per = {lv: lim([ForceSpectrum("random", BAND, rms * lv * np.sqrt(level))]) for lv in wts}

    def combine(k):  # sqrt(sum_k w_k lim_k^2)
        return float(np.sqrt(sum(wts[lv] * per[lv][k] ** 2 for lv in wts)))

    return {"average": av, "exact": exact, "average_nc": av_nc, "weights": wts,
            "record_level": level, "average_flat": flat[0], "average_flat_nc": flat[2],
            "per_level": {lv: per[lv][0] for lv in wts},
            "per_level_exact": all(per[lv][1] for lv in wts),
            "oracle": combine(0), "oracle_nc": combine(2), "delay_ms": delay * 1e3}


def _measure(off, w, rms, duration, seed) -> dict:
    """Score, limits, fatigue of the replay in ``w``."""
    sc = json.loads(_run(off, "score", w / "est.csv", w / "test_truth.csv", "--json"))
    row = next(r for r in sc["rows"] if r["name"] == "eps")
    te, ye, ne = read_table(w / "est.csv")
    tt, yt, nt = read_table(w / "test_truth.csv")
    eps_est = ye[:, ne.index("eps")]
    idx = np.searchsorted(tt, te)  # the estimate's rows are stamped with their sample time
    eps_true = yt[idx, nt.index("eps")]
    ok = np.isfinite(eps_est)
    # the rows ``fatigue`` counts: warm-up rows are gaps to it, so the truth skips them too
    counted = ok & ((np.nan_to_num(ye[:, ne.index("flags")]).astype(np.int64) & FLAG_WARMUP)
                    == 0)
    tf = np.arange(int(round((WARMUP + duration) * 1e4)) + 1) / 1e4
    a = np.interp(te[ok] + WARMUP, tf, envelope(tf, seed + 1))  # the scored rows' levels
    lm = limits(w / "model.toml", w / "bundle.npz", rms, a, float(np.std(eps_true[ok])))
    out = {"case": w.name, "nrmse": row["nrmse"], "coverage": row["coverage"],
           "limit": lm["average"], "ratio": row["nrmse"] / lm["average"],
           "ratio_oracle": row["nrmse"] / lm["oracle"],
           "ratio_oracle_nc": row["nrmse"] / lm["oracle_nc"], "limits": lm,
           "rows": sc["n_used"]}
    for key, text in CURVES.items():
        _run(off, "fatigue", w / "est.csv", "--column", "eps", "--curve", text, "--unit",
             "microstrain", "--E", E_STEEL, "-o", w / f"fat-{key}")
        s = json.loads((w / f"fat-{key}" / "fatigue.json").read_text())
        d_est = s["damage_with_residue"]
        d_true = _truth_damage(eps_true[counted] * 1e-6 * E_STEEL * 1e-6, parse_curve(text))
        lo, hi = s["damage_interval"]
        out[key] = {"damage_est": d_est, "damage_true": d_true, "rel": d_est / d_true - 1,
                    "interval": [lo, hi], "covered": bool(lo <= d_true <= hi)}
    out["stress_std_mpa"] = float(np.std(eps_true[ok]) * 1e-6 * E_STEEL * 1e-6)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--case", choices=(*CASES, "all"), default="all")
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--out", default=None, help="work directory (default: a temporary one)")
    p.add_argument("--seed", type=int, default=5, help="seed of the test record (load, noise)")
    p.add_argument("--reuse", action="store_true",
                   help="measure the replays already in --out (no simulate, build, replay)")
    a = p.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f}")
    work = Path(a.out or tempfile.mkdtemp(prefix="vsense-strain-"))
    cases = tuple(CASES) if a.case == "all" else (a.case,)
    res = []
    for c in cases:
        res.append(run_case(c, work, a.duration, a.reuse, a.seed))
        (work / "strain_fatigue.json").write_text(json.dumps(res, indent=1))
    print(f"work directory {work}; test record {a.duration:g} s, seed {a.seed}")
    print("limits at the bundle's delay ('+': an FIR upper bound) and non-causal (nc, exact):"
          " avg = under the record's average spectrum (best time-invariant estimator), "
          "lvl = per level, combined (an estimator that follows the level)")
    print("case   NRMSE   avg limit  lvl limit (nc)   ratio avg  lvl (to nc)  1-sigma  "
          "stress std  " + "  ".join(f"{k}: est / true damage (rel.) [interval] covered"
                                     for k in CURVES))
    for r in res:
        lm = r["limits"]
        dmg = "  ".join(f"{r[k]['damage_est']:.3g} / {r[k]['damage_true']:.3g} "
                        f"({100 * r[k]['rel']:+.1f} %) [{r[k]['interval'][0]:.3g}, "
                        f"{r[k]['interval'][1]:.3g}] {'yes' if r[k]['covered'] else 'NO'}"
                        for k in CURVES)
        print(f"{r['case']:5s}  {r['nrmse']:.4f}  {lm['average']:.4f}"
              f"{'' if lm['exact'] else '+'}    {lm['oracle']:.4f}"
              f"{'' if lm['per_level_exact'] else '+'} ({lm['oracle_nc']:.4f})  "
              f"{r['ratio']:.2f}x      {r['ratio_oracle']:.2f}x ({r['ratio_oracle_nc']:.2f}x)"
              f"  {100 * r['coverage']:5.1f} %  {r['stress_std_mpa']:6.1f} MPa  {dmg}  "
              f"[flat-band avg limit {lm['average_flat']:.4f}, record level "
              f"{lm['record_level']:.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
