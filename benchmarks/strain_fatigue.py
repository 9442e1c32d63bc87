"""Virtual strain at an unmeasured point and the fatigue damage it consumes, through the public
CLI: ``simulate`` (truth: exact modal integration of the full model, 10x oversampled),
``build --record``, ``vsense-edge replay``, ``score``, ``limit --bundle`` and ``fatigue``.

    python benchmarks/strain_fatigue.py [--case beam|plate|both] [--duration 60] [--out DIR]

Two structures, model files written as docs/modelfile.md shows them:

* ``beam``: examples/my_beam.toml (1 m steel cantilever, 20 Euler-Bernoulli elements,
  40 x 10 mm, a displacement sensor at the tip, the force at 0.7 m) with a strain gauge on the
  top face 50 mm from the clamp instead of the displacement output;
* ``plate``: 600 x 400 x 4 mm steel plate clamped along x = 0 (12 x 8 MITC3 cells), two
  displacement sensors at the free corners, the force at (0.45, 0.3), a strain gauge (top
  surface, along x) 25 mm from the clamp.

Each sensor's noise is a property of the sensor (``noise_std`` = 1 % of the response std of
the training record, the same absolute std in every record). The bundle learns the load from
a 20 s record (seed 11); the test record is ``--duration`` s (``--seed``, 5), band-limited random
force 2-100 Hz. Reported per case: the strain's normalised RMS error (time domain, full band,
``score``'s warm-up rows skipped), the accuracy limit at the bundle's delay from ``limit
--bundle`` and their ratio, 1-sigma coverage of the stated std; the Miner damage of the
estimated strain (``vsense-offline fatigue``: the device's rainflow kernel, ``--unit
microstrain --E 210e9``, closed cycles plus the residue as half cycles) against the damage of
the true strain by fatpack's rainflow count (reversals ``fatpack.find_reversals`` on 2^16
classes, ``find_rainflow_cycles``, residue as half cycles, the same S-N curve) over the same
rows.
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
from edge.fatigue.sn_curve import curve  # noqa: E402

BIN = Path(sys.executable).parent
E_STEEL = 210e9
CURVES = ("DNV-D-air", "EN-71")

MATERIAL = """
[materials.steel]
E = 210e9
nu = 0.3
rho = 7850.0
"""
COMMON = """
[damping]
ratios = [[8.0, 0.01], [300.0, 0.01]]

[estimator]
rate = 1000.0
method = "smoother"
"""

BEAM = f"""name = "strain-beam"
type = "beam"
{MATERIAL}
[beam.sections.bar]
material = "steel"
rectangle = {{ b = 0.04, h = 0.01 }}

[[beam.members]]
section = "bar"
line = {{ start = [0.0, 0.0, 0.0], end = [1.0, 0.0, 0.0], n = 20 }}

[[boundary]]
select = {{ at = [0.0, 0.0, 0.0] }}
{COMMON}
[reduction]                        # as examples/my_beam.toml
method = "gmr+"
modes = 10
[[reduction.masters]]
select = {{ at = [1.0, 0.0, 0.0] }}
dofs = ["uz", "ry"]
[[reduction.masters]]
select = {{ at = [0.7, 0.0, 0.0] }}
dofs = ["uz", "ry"]
[[reduction.masters]]
select = {{ at = [0.5, 0.0, 0.0] }}
dofs = ["uz", "ry"]

[[sensors]]
name = "d_tip"
select = {{ at = [1.0, 0.0, 0.0] }}
dof = "uz"
noise_std = NOISE_d_tip

[[forces]]
name = "F07"
select = {{ at = [0.7, 0.0, 0.0] }}
dof = "uz"

[[outputs]]
name = "eps"
kind = "strain"
unit = "microstrain"
at = [0.05, 0.0, 0.005]

[calibration]
load = {{ type = "random", band = [2.0, 100.0], rms = RMS }}
"""

PLATE = f"""name = "strain-plate"
type = "plate"
{MATERIAL}
[plate]
material = "steel"
thickness = 4e-3

[plate.rectangle]
length = 0.6
width = 0.4
nx = 12
ny = 8

[[boundary]]
select = {{ group = "x0" }}
{COMMON}
[reduction]
method = "gmr+"
modes = 20
[[reduction.masters]]
select = {{ at = [0.05, 0.15, 0.0] }}
dofs = ["uz", "rx", "ry"]

[[sensors]]
name = "d_tip"
select = {{ at = [0.6, 0.0, 0.0] }}
dof = "uz"
noise_std = NOISE_d_tip

[[sensors]]
name = "d_tip2"
select = {{ at = [0.6, 0.4, 0.0] }}
dof = "uz"
noise_std = NOISE_d_tip2

[[forces]]
name = "F"
select = {{ at = [0.45, 0.3, 0.0] }}
dof = "uz"

[[outputs]]
name = "eps"
kind = "strain"
unit = "microstrain"
at = [0.025, 0.15, 0.0]
surface = "top"
direction = [1.0, 0.0, 0.0]

[calibration]
load = {{ type = "random", band = [2.0, 100.0], rms = RMS }}
"""

#: case -> (model template, force RMS [N]: root stress std ~20-30 MPa)
CASES = {"beam": (BEAM, 10.0), "plate": (PLATE, 20.0)}


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


def _limit_at(text: str, name: str, delay_ms: float) -> float:
    """The row ``name`` of ``limit``'s table at the column ``delay_ms``."""
    lines = text.splitlines()
    head = next(ln for ln in lines if ln.strip().endswith("ratio") and "ms" in ln)
    cols = head.split()
    j = [i for i in range(len(cols) - 1) if cols[i + 1] == "ms"
         and float(cols[i]) == delay_ms][0] // 2
    row = next(ln for ln in lines if ln.split() and ln.split()[0] == name).split()
    return float(row[1 + j].rstrip("+"))  # "+": the FIR upper bound (limit's legend)


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
        _prepare(off, edge, tmpl, rms, w, duration, seed)
    return _measure(off, w)


def _prepare(off, edge, tmpl, rms, w, duration, seed):
    """Model file, records, noise, bundle (from the record) and the replay of the test."""
    model = w / "model.toml"
    base = tmpl.replace("RMS", repr(rms))
    model.write_text(base.replace("NOISE_d_tip2", "1.0").replace("NOISE_d_tip", "1.0"))
    sim = ["--load", "random", "--band", 2, 100, "--rms", rms, "--noise", 0, "--quiet"]
    _run(off, "simulate", model, *sim, "--duration", 20, "--seed", 11, "-o", w / "rec")
    _run(off, "simulate", model, *sim, "--duration", duration, "--seed", seed, "-o", w / "test")
    # each sensor's noise: 1 % of its response std in the training record, then fixed
    _, yr, names = read_table(w / "rec_measurement.csv")
    stds = {n: 0.01 * float(np.std(yr[:, j])) for j, n in enumerate(names)}
    text = base
    for n in sorted(stds, key=len, reverse=True):
        text = text.replace(f"NOISE_{n}", f"{stds[n]:.4g}")
    model.write_text(text)
    stds = {n: float(f"{s:.4g}") for n, s in stds.items()}
    _add_noise(w / "rec_measurement.csv", w / "rec_noisy.csv", stds, 111)
    _add_noise(w / "test_measurement.csv", w / "test_noisy.csv", stds, 100 + seed)
    bundle = w / "bundle.npz"
    _run(off, "build", model, "-o", bundle, "--record", w / "rec_noisy.csv", "--quiet")
    _run(edge, "replay", w / "test_noisy.csv", "--bundle", bundle, "-o", w / "est.csv")


def _measure(off, w) -> dict:
    """Score, limit, fatigue of the replay in ``w``."""
    model, bundle = w / "model.toml", w / "bundle.npz"
    sc = json.loads(_run(off, "score", w / "est.csv", w / "test_truth.csv", "--json"))
    row = next(r for r in sc["rows"] if r["name"] == "eps")
    from edge.bundle import Bundle
    from offline.limit.ratio import bundle_delay_s

    delay_ms = round(bundle_delay_s(Bundle.load(bundle)) * 1e3, 6)
    lim_txt = _run(off, "limit", model, "--bundle", bundle, "--delay", delay_ms, "--quiet")
    lim = _limit_at(lim_txt, "eps", float(delay_ms))
    out = {"case": w.name, "nrmse": row["nrmse"], "limit": lim, "ratio": row["nrmse"] / lim,
           "coverage": row["coverage"], "delay_ms": delay_ms, "rows": sc["n_used"]}
    # fatigue: the estimate through the device's counter, the truth through fatpack
    te, ye, ne = read_table(w / "est.csv")
    tt, yt, nt = read_table(w / "test_truth.csv")
    eps_est = ye[:, ne.index("eps")]
    idx = np.searchsorted(tt, te)  # the estimate's rows are stamped with their sample time
    eps_true = yt[idx, nt.index("eps")]
    ok = np.isfinite(eps_est)
    for name in CURVES:
        _run(off, "fatigue", w / "est.csv", "--column", "eps", "--curve", name, "--unit",
             "microstrain", "--E", E_STEEL, "-o", w / f"fat-{name}")
        s = json.loads((w / f"fat-{name}" / "fatigue.json").read_text())
        d_est = s["damage_with_residue"]
        d_true = _truth_damage(eps_true[ok] * 1e-6 * E_STEEL * 1e-6, curve(name))
        out[name] = {"damage_est": d_est, "damage_true": d_true, "rel": d_est / d_true - 1}
    out["stress_std_mpa"] = float(np.std(eps_true[ok]) * 1e-6 * E_STEEL * 1e-6)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--case", choices=("beam", "plate", "both"), default="both")
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--out", default=None, help="work directory (default: a temporary one)")
    p.add_argument("--seed", type=int, default=5, help="seed of the test record (load, noise)")
    p.add_argument("--reuse", action="store_true",
                   help="measure the replays already in --out (no simulate, build, replay)")
    a = p.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.1f}")
    work = Path(a.out or tempfile.mkdtemp(prefix="vsense-strain-"))
    cases = ("beam", "plate") if a.case == "both" else (a.case,)
    res = [run_case(c, work, a.duration, a.reuse, a.seed) for c in cases]
    print(f"work directory {work}; test record {a.duration:g} s")
    print("case   NRMSE    limit    ratio  1-sigma  stress std  "
          + "  ".join(f"{c}: est / true damage (rel.)" for c in CURVES))
    for r in res:
        dmg = "  ".join(f"{r[c]['damage_est']:.3g} / {r[c]['damage_true']:.3g} "
                        f"({100 * r[c]['rel']:+.1f} %)" for c in CURVES)
        print(f"{r['case']:5s}  {r['nrmse']:.4f}  {r['limit']:.4f}  {r['ratio']:.2f}x  "
              f"{100 * r['coverage']:5.1f} %  {r['stress_std_mpa']:6.1f} MPa  {dmg}")
    (work / "strain_fatigue.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
