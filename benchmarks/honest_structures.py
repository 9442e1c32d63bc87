"""Is the stated std honest on structures we did not build, and is ``--record`` never worse?
Everything through the public command line, the records through the model's converter chain.

The user's structures of ``benchmarks/load_user/`` (clamped beam, plate, frame; the interface
receiver with ``--cases interface``), each under a load that differs from its declaration
(:func:`benchmarks.load_user.true_load`: levels, roll-offs, a source resonance, correlation).
The records: the load history written as a CSV (:func:`offline.load.zoo.write_load_csv`) and
``vsense-offline simulate --load csv --warmup 1`` (the full model, the record starting on a
moving structure, converted as the model file's ``[acquisition]`` declares: the ADS1256 by
default, the files' rate moved to the chip's nearest row rate, :func:`on_the_chip`), without noise; the sensor noise added here, seeded, a fixed std per sensor: the
sensors' ``noise_std``, or the relative level times the channel's stationary std under the
true load (the noise the limit is computed with, ``ModelLimit.noise_std``), so that it stays
absolute when the load changes size and is the same in every record. (Before, a relative
level took each record's own std: a 9 s record of the clamped beam and the 8 s record a
bundle learned from carried different noise, and the stated std answered for the other.)

Per structure: ``build`` without a record and with ``--record`` of 8, 20 and 60 s (seed 11);
``vsense-edge replay`` of a 9 s test record (seed 23) and, for the second after a forced
reset, of the same record from 4 s on (a replay starts from the state :meth:`reset` gives:
state 0, the stated std from the stationary prior, the level at the designed one). Per
target: the normalised RMS error after 1 s (full band), its ratio to the MMSE limit at the
bundle's delay with the TRUE spectra (``offline.limit.model.model_limit``), and 1-sigma
coverage after 1 s, in the first second and in the first second after the reset (68 % for
a right model). The step case (``--step``): a 50 s record whose load runs at x1 for 15 s,
x0.1 for 20 s, x1 for 15 s (absolute noise), replayed with the declared bundle and the one of
the longest record; for each step the time until the 1 s running median of the stated std is
within 10 % of its level (the median of the segment's last 3 s) and stays there, and (in
brackets) until it first comes within 10 %; and the 1-sigma coverage over each segment
after its first second.

    python benchmarks/honest_structures.py [--cases ccbeam,plate,frame] [--lengths 8,20,60]
        [--step] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from edge.bundle import Bundle  # noqa: E402
from edge.csvio import read_table, write_table  # noqa: E402
from edge.estimator import Estimator  # noqa: E402
from edge.hw.ads1256_spec import row_rates  # noqa: E402
from load_user import FILES, true_load  # noqa: E402
from offline.limit.model import model_limit  # noqa: E402
from offline.model import build_fe_model, load_model_file  # noqa: E402

BIN = Path(sys.executable).parent
RESET_AT = 4.0        # [s] the replay after a forced reset starts here
STEPS = ((0.0, 1.0), (15.0, 0.1), (35.0, 1.0))   # (start [s], level) of the step case
STEP_LEN = 50.0
BOUNDS = [a for a, _ in STEPS[1:]] + [STEP_LEN]   # each segment's end


def cli(*args) -> str:
    p = subprocess.run([str(BIN / args[0]), *map(str, args[1:])], capture_output=True,
                       text=True)
    if p.returncode:
        raise RuntimeError(f"{' '.join(map(str, args[:2]))}: {p.stderr.strip()[-1500:]}")
    return p.stdout


def simulate(path, spec, lm, sd, work: Path, name: str, seconds: float, seed: int,
             levels=None) -> tuple:
    """``(t, Y noisy, T truth (forces then outputs))`` of a record through the CLI: the load
    CSV (times ``levels(t)``) from 1 s before the record, converted by the model's chain;
    ``sd`` (nch,): each channel's noise std [its unit]."""
    dt = 1.0 / spec.estimator.rate
    fine = dt / 10
    tl = np.arange(int(round((seconds + 1.0) / fine)) + 1) * fine
    F = lm.sample(tl, seed)
    if levels is not None:
        F = F * levels(tl - 1.0)[:, None]
    write_table(work / f"{name}_load.csv", tl, F, [f.name for f in spec.forces])
    cli("vsense-offline", "simulate", path, "--load", "csv", "--csv", work / f"{name}_load.csv",
        "--duration", seconds, "--warmup", 1.0, "--noise", 0.0, "--seed", seed,
        "-o", work / name, "--quiet")
    t, Yc, cols = read_table(work / f"{name}_measurement.csv")
    _, T, tc = read_table(work / f"{name}_truth.csv")
    targets = [f.name for f in spec.forces] + [o.name for o in spec.outputs]
    T = T[:, [tc.index(n) for n in targets]]
    Y = Yc + sd * np.random.default_rng(seed + 7).standard_normal(Yc.shape)
    write_table(work / f"{name}.csv", t, Y, cols)
    return t, Y, T


def replay(work: Path, meas: str, bundle: Path, out: str, start: float = 0.0):
    """The replay's ``(t, E, cols)``; from ``start`` on: a new estimator on a moving structure."""
    src = work / f"{meas}.csv"
    if start > 0:
        t, Y, cols = read_table(src)
        src = work / f"{meas}_from{start:g}.csv"
        write_table(src, t[t >= start], Y[t >= start], cols)
    cli("vsense-edge", "replay", src, "--bundle", bundle, "-o", work / f"{out}.csv")
    return read_table(work / f"{out}.csv")


def figures(est, T, targets, dt, keep) -> dict:
    """Per target over the rows ``keep(t)``: nrmse, coverage (None without std columns)."""
    te, E, cols = est
    idx = np.rint(te / dt).astype(int)
    k = keep(te) & (idx < T.shape[0])
    out = {}
    for i, n in enumerate(targets):
        e = E[k, cols.index(n)] - T[idx[k], i]
        sd = f"{n}_std"
        out[n] = {"nrmse": float(np.sqrt(np.mean(e ** 2)) / np.std(T[idx[k], i])),
                  "coverage": float(np.mean(np.abs(e) <= E[k, cols.index(sd)]))
                  if sd in cols else None}
    return out


def settle_times(est, targets) -> dict:
    """Per target and step: ``(for good, first)``, seconds from the step until the 1 s
    running median of the stated std is within 10 % of the segment's level (median of its
    last 3 s) and stays there, and until it first comes within 10 %."""
    te, E, cols = est
    dt = float(np.median(np.diff(te)))
    w = int(round(1.0 / dt))
    out = {}
    for n in targets:
        if f"{n}_std" not in cols:
            continue
        s = E[:, cols.index(f"{n}_std")]
        med = np.array([np.median(s[max(0, i - w + 1):i + 1]) for i in range(s.size)])
        res = []
        for j, (t0, _) in enumerate(STEPS[1:], start=1):
            t1 = STEPS[j + 1][0] if j + 1 < len(STEPS) else STEP_LEN
            seg = (te >= t0) & (te < t1)
            level = np.median(s[(te >= t1 - 3.0) & (te < t1)])
            near = np.abs(med / level - 1.0) <= 0.10
            bad, good = seg & ~near, seg & near
            res.append((float(te[bad][-1] - t0 + dt) if bad.any() else 0.0,
                        float(te[good][0] - t0) if good.any() else float("inf")))
        out[n] = res
    return out


def step_levels(t):
    """The step case's load factor at record times ``t`` (:data:`STEPS`)."""
    return np.select([t < a for a, _ in STEPS[1:]] + [True], [g for _, g in STEPS])


def step_figures(est, T, targets, dt) -> dict:
    """``step_s`` (:func:`settle_times`) and ``step_cov``: per target the 1-sigma coverage
    over each segment of :data:`STEPS` after its first second."""
    cov = {n: [figures(est, T, targets, dt, lambda t, a=a, b=b: (t >= a + 1.0) & (t < b))
               [n]["coverage"] for (a, _), b in zip(STEPS, BOUNDS)] for n in targets}
    return {"step_s": settle_times(est, targets), "step_cov": cov}


def on_the_chip(src: Path, work: Path) -> Path:
    """A copy of the model file ``src`` in ``work`` whose ``[estimator] rate`` is the ADS1256
    row rate nearest its own (multiplexer cycling for several sensors), so that the default
    chain is the chip's: at the files' 1,000 (500) rows/s with 3-4 sensors no data rate
    gives the rate, and the build fell back to point samples (its warning), the records too."""
    text = src.read_text()
    m = re.search(r"^rate = ([0-9.e+-]+)", text, re.M)
    n = text.count("[[sensors]]")
    rates = row_rates(n, "cycle" if n > 1 else "continuous").values()
    rate = min(rates, key=lambda r: abs(math.log(r / float(m.group(1)))))
    out = work / src.name
    out.write_text(text[:m.start(1)] + repr(float(rate)) + text[m.end(1):])
    return out


def run_case(name: str, work: Path, lengths, step: bool) -> dict:
    path = on_the_chip(FILES / f"{name}.toml", work)
    spec = load_model_file(path)
    model = build_fe_model(spec, progress=False)
    lm, noise = true_load(name, spec)
    dt = 1.0 / spec.estimator.rate
    targets = [f.name for f in spec.forces] + [o.name for o in spec.outputs]
    # each sensor's noise: fixed, the limit's (relative: of the stationary std, true load)
    sd = model_limit(spec, model, loads=lm, noise=noise, delays=(0.0,), exact=False).noise_std
    _, _, T = simulate(path, spec, lm, sd, work, "test", 9.0, 23)
    res, Ts = {}, None
    builds = [("declared", [])]
    for L in lengths:
        simulate(path, spec, lm, sd, work, f"run{L}", float(L), 11)
        builds.append((f"record {L} s", ["--record", work / f"run{L}.csv"]))
    for label, extra in builds:
        out = work / f"{label.replace(' ', '_')}.npz"
        stdout = cli("vsense-offline", "build", path, "-o", out, "--quiet", *extra)
        b = Bundle.load(out)
        delay = Estimator(b).delay * dt
        lim = np.concatenate(model_limit(spec, model, loads=lm, noise=noise,
                                         delays=(0.0, delay), exact=False)
                             .at_delay(delay + 1e-9))
        est = replay(work, "test", out, "est")
        after = figures(est, T, targets, dt, lambda t: t >= 1.0)
        first = figures(est, T, targets, dt, lambda t: t < 1.0)
        reset = figures(replay(work, "test", out, "est_reset", RESET_AT), T, targets, dt,
                        lambda t: t < RESET_AT + 1.0)
        r = {n: {"nrmse": after[n]["nrmse"], "ratio": after[n]["nrmse"] / float(lim[i]),
                 "cov": after[n]["coverage"], "cov_first": first[n]["coverage"],
                 "cov_reset": reset[n]["coverage"]} for i, n in enumerate(targets)}
        info = b.meta.get("load_model", {}).get("info", {})
        res[label] = {"targets": r, "method": b.method, "delay_ms": 1e3 * delay,
                      "shipped": info.get("choice", {}).get("shipped"),
                      "warnings": [x.strip() for x in stdout.splitlines() if "WARNING" in x]}
        if step and label in ("declared", builds[-1][0]):
            if Ts is None:
                _, _, Ts = simulate(path, spec, lm, sd, work, "step", STEP_LEN, 31,
                                    step_levels)
            res[label].update(step_figures(replay(work, "step", out, "est_step"), Ts,
                                           targets, dt))
    return res


def fmt(name: str, res: dict) -> str:
    def pc(x):
        return "    -" if x is None else f"{100 * x:4.0f}%"
    lines = []
    for label, r in res.items():
        for n, s in r["targets"].items():
            st = r.get("step_s", {}).get(n)
            sc = r.get("step_cov", {}).get(n)
            lines.append(f"{name:<9} {label:<12} {n:<6} {s['nrmse']:7.3f} {s['ratio']:6.2f} "
                         f"{pc(s['cov'])} {pc(s['cov_first'])} {pc(s['cov_reset'])}"
                         + ("" if st is None else "  " + "/".join(f"{a:.1f} ({b:.1f})" for a, b in st))
                         + ("" if sc is None or sc[0] is None else
                            "  cov " + "/".join(f"{100 * c:.0f}%" for c in sc))
                         + f"  {r['method']}" + (f", {r['shipped']}" if r["shipped"] else ""))
        lines += [f"{'':<23}{w}" for w in r["warnings"]]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", default="ccbeam,plate,frame", help="comma-separated")
    ap.add_argument("--lengths", default="8,20,60", help="record lengths [s], comma-separated")
    ap.add_argument("--step", action="store_true", help="the load-step case as well")
    ap.add_argument("--json", default=None, help="write the figures as JSON")
    a = ap.parse_args(argv)
    lengths = [int(x) for x in a.lengths.split(",") if x]
    print("case      bundle       target    nrmse  ratio   cov first reset  step s down/up: for good (first)")
    out = {}
    for name in a.cases.split(","):
        with tempfile.TemporaryDirectory(prefix=f"honest-{name}-") as d:
            out[name] = run_case(name, Path(d), lengths, a.step)
        print(fmt(name, out[name]), flush=True)
        if a.json:
            Path(a.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
