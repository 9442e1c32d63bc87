"""Accuracy with DEFAULT settings next to the MMSE limit (issue 11, "Must reach").

For each model, load, noise level and sensor kind: the model file's ``[design_load]`` load and
sensor ``noise`` are set to the case (what a user declares), the bundle is built with default
settings (``window = "auto"``, ``alpha = "auto"``, ``max_delay = 20 ms``), and every estimator
candidate's best setting from the build runs on independent test records of the FULL model
(exact modal integration, other seeds, 4 s each after a 1 s warm-up). Reported per target:
normalised RMS error ``RMS(est - truth) / std(truth)`` (full band), FDE 0-200 Hz and full
band (paper eq. 33), the MMSE limit non-causal and at the estimator's delay bound, the
ratios error / limit (non-causal, at the delay bound) and the share of samples within the
stated 1 sigma (the smoother; 68 % for a right std). Sine rows: the limit of a
known-frequency line is near zero, so their ratio is not a goal (random rows are).

The test records are converted as the bundle's chain converts (a model file without
``[acquisition]``: the ADS1256); the smoother of such a bundle is also designed for point
samples and run on point-sample records of the same seeds, so that ``chip / point`` is the
chain's own cost and the rest of the gap to the limit is the estimator's. The test loads have
ideal band edges; the smoother's force model rolls off at second order unless the model file
declares an order (docs/load.md "Without a record"): ``--order 16`` declares it for every
force.

Models: the paper cantilever (examples/paper_cantilever.toml, MITC3 plate, 5,610 DOFs), an
imported-matrices Euler-Bernoulli strip of the same geometry (Matrix Market, 680 DOFs,
``type = "matrices"``), and a multi-force case: a free-free beam, two forces and two moments
at an interface, ten accelerometers at 400 Hz, white forces up to the Nyquist frequency.

    python benchmarks/accuracy.py [--quick] [--order N] [--json OUT.json]

Realistic loads against a declared band (roll-offs of order 1-4, pink, a source resonance,
a load 50x below its declaration, a source's correlated forces and moments at a receiver),
with and without ``build --record``: ``python benchmarks/accuracy.py --zoo [ZOO OPTIONS]``
runs ``benchmarks/load_zoo.py`` with the options that follow ``--zoo``.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.acquisition import Chain  # noqa: E402
from edge.estimator import Estimator, EstimatorError  # noqa: E402
from offline.build import build  # noqa: E402
from offline.calibration_runs import calibration_runs  # noqa: E402
from offline.forcing.component import Component  # noqa: E402
from offline.forcing.force_model import ForceModel  # noqa: E402
from offline.load.declared import declared_force_models  # noqa: E402
from offline.metrics import fde  # noqa: E402
from offline.calibration_score import nrmse  # noqa: E402
from offline.model import spec_from_dict  # noqa: E402
from offline.model.strip import strip_head  # noqa: E402
from offline.smoother import attach_smoother, design_smoother  # noqa: E402

STRIP_BEAM = strip_head(170, "strip-eb") + """
[[boundary]]
select = { at = [0.0, 0.0, 0.0] }
[[boundary]]
select = { box = [[0.0005, -0.01, -0.01], [0.2, 0.01, 0.01]] }
dofs = ["ux", "rx"]
"""

MATRICES_TAIL = """
[damping]
ratios = [[34.0, 0.01], [600.0, 0.01]]
[reduction]
method = "gmr+"
modes = 50
{masters}
[estimator]
rate = 1000.0
[[sensors]]
name = "d110"
select = {{ at = [0.110, 0.0, 0.0] }}
dof = "uz"
noise = 0.01
[[forces]]
name = "F110"
select = {{ at = [0.110, 0.0, 0.0] }}
dof = "uz"
[[outputs]]
name = "d60"
select = {{ at = [0.060, 0.0, 0.0] }}
dof = "uz"
[design_load]
load = {{ type = "random", band = [5.0, 160.0], rms = 1.0 }}
duration = 2.0
"""


def matrices_model(d: Path) -> Path:
    """Write the strip as Matrix Market files and a ``type = "matrices"`` model file."""
    from offline.fem.matrices import write_matrices
    from offline.model import build_fe_model

    beam = d / "strip_beam.toml"
    beam.write_text(STRIP_BEAM)
    m = build_fe_model(spec_from_dict(tomllib.loads(STRIP_BEAM), beam), progress=False)
    paths = write_matrices(m, d)
    masters = "".join(f'[[reduction.masters]]\nselect = {{ at = [{x}, 0.0, 0.0] }}\n'
                      f'dofs = ["uz", "ry"]\n'
                      for x in (0.11, 0.02, 0.04, 0.06, 0.085, 0.14, 0.17))
    text = ('name = "strip-matrices"\ntype = "matrices"\n[matrices]\n'
            + "".join(f'{k} = "{Path(v).name}"\n' for k, v in paths.items())
            + MATRICES_TAIL.format(masters=masters))
    p = d / "strip_matrices.toml"
    p.write_text(text)
    return p


def free_free_model(d: Path) -> Path:
    """Free-free receiver beam (1 m steel, 40 elements, bending in x-z), interface at x = 0:
    force and moment at two interface nodes; ten accelerometers; 400 Hz; white forces up to
    Nyquist with N and N m scales (the load zoo's receiver, :data:`offline.load.zoo.RECEIVER`,
    with its mid-span acceleration as the one output)."""
    from offline.load.zoo import RECEIVER

    tip = '[[outputs]]\nname = "u_tip"\nselect = { at = [1.0, 0.0, 0.0] }\ndof = "uz"\n' \
          'kind = "displacement"\n'
    text = (RECEIVER.replace('name = "zoo-receiver"', 'name = "free-free-interface"')
            .replace(tip, "").replace("band = [5.0, 160.0]", "band = [0.0, 200.0]"))
    assert tip not in text and "band = [0.0, 200.0]" in text
    p = d / "free_free.toml"
    p.write_text(text)
    return p


def case_spec(path: Path, load: dict, noise: float, kind: str | None,
              max_delay: float | None = None, order: int | None = None):
    """The model file with its calibration load, sensor noise and (optionally) kind,
    ``[estimator] max_delay`` [s] and every force's ``[[forces]] model`` roll-off ``order``
    (what docs/load.md asks of a user whose load's band is sharp) set."""
    raw = tomllib.loads(path.read_text())
    raw = copy.deepcopy(raw)
    if max_delay is not None:
        raw.setdefault("estimator", {})["max_delay"] = max_delay
    raw["design_load" if "design_load" in raw else "calibration"]["load"] = load
    for s in raw["sensors"]:
        s["noise"] = noise
        if kind is not None:
            s["kind"] = kind
            s["unit"] = {"displacement": "m", "acceleration": "m/s^2"}[kind]
    if order is not None:
        for f in raw["forces"]:
            f["model"] = {**f.get("model", {}), "order": int(order)}
    return spec_from_dict(raw, path)


def _smoother_of(tik, spec, b, best, chain=None):
    """The smoother of a candidate row: the bundle's own (``b`` a smoother, ``chain`` None),
    else designed from ``best`` (lag, model error) with the bundle's force models (the
    declared ones when ``b`` is not a smoother) for ``chain`` (default the bundle's)."""
    if b.method == "smoother" and chain is None:
        return Estimator(b)
    if b.method == "smoother":
        e = b.meta["estimator"]
        fms = [ForceModel.from_dict(d) for d in e["force_models"]]
        corr = None if e.get("force_corr") is None else np.array(e["force_corr"])
        comps = [Component.from_dict(c) for c in e.get("force_components", [])]
    else:
        fms, corr, comps = declared_force_models(spec, b.rate), None, []
    tb = tik if chain is None else tik.replace(chain=chain)
    d = design_smoother(tb, fms, best["delay"], best["model_error"], corr=corr,
                        components=comps)
    return Estimator(attach_smoother(tb, d, fms, best["model_error"], corr=corr,
                                     components=comps))


def _scores(est, runs, dt):
    """Per run and target: normalised RMS error, FDE 0-200 Hz and full band, and the share
    of scored samples within the estimator's stated 1 sigma (NaN without one)."""
    per, fb, ff, cov = [], [], [], []
    for r in runs:
        est.reset()
        Fe, Ze, _ = est.run(r.Y)
        d = est.delay
        E = np.hstack([Fe, Ze])[d + r.start:]
        T = np.hstack([r.F, r.Z])[r.start: r.F.shape[0] - d]
        per.append(nrmse(np.hstack([Fe, Ze]), np.hstack([r.F, r.Z]), d, r.start))
        fb.append([fde(E[:, j], T[:, j], dt, band=(0.0, min(200.0, 0.5 / dt))).value
                   for j in range(T.shape[1])])
        ff.append([fde(E[:, j], T[:, j], dt).value for j in range(T.shape[1])])
        sd = getattr(est, "std", None)  # the smoother's steady stated std (after the run)
        cov.append(np.full(T.shape[1], np.nan) if sd is None
                   else np.mean(np.abs(E - T) <= np.asarray(sd), axis=0))
    return tuple(np.array(x) for x in (per, fb, ff, cov))


def run_case(path, load, noise, kind, n_test=3, test_s=4.0, max_delay=None, order=None,
             point_markov=False):
    """Build with defaults, test every candidate on independent full-model records. A
    smoother through a converter (the bundle's chain not point samples) is also run, as the
    same design for point samples (``design_smoother(..., chain=ideal)``, no load levels), on
    point-sample records of the same seeds: ``point`` and ``chip/point`` (the chain's own
    cost). ``point_markov``: each Tikhonov candidate of a converter's bundle also with the
    point-sample Markov parameters (``chain.markov = False``, a schema <= 9 bundle's)."""
    from dataclasses import replace

    spec = case_spec(path, load, noise, kind, max_delay, order)
    t0 = time.perf_counter()
    res = build(spec, progress=False, maps=False)
    t_build = time.perf_counter() - t0
    b = res.bundle
    model = res.model
    cd, fd, od = (res.full_dofs[k] for k in ("channels", "forces", "outputs"))
    tspec = copy.copy(spec)
    tspec.calibration = replace(spec.calibration, duration=test_s, seed=100, seeds=n_test)
    # the test records converted as the bundle's chain converts (the model file's default:
    # the ADS1256); point samples here made a chip bundle 30x worse than its limit
    runs = calibration_runs(tspec, model, cd, fd, od, b.dt, chain=b.chain)
    # the same seeds as point samples (the chain's own cost; a chain with sensor dynamics:
    # not compared)
    pruns = None if b.chain.point or b.chain.dynamic else calibration_runs(
        tspec, model, cd, fd, od, b.dt)
    lim = b.meta["limit"]
    sel = b.meta["selection"]
    names = lim["force_names"] + lim["output_names"]
    nc = np.array(lim["force_nrmse"] + lim["output_nrmse"])
    i_d = int(np.argmin(np.abs(np.array(lim["delays_ms"]) - sel["max_delay_s"] * 1e3)))
    at_d = np.array(lim["lag_force_nrmse"][i_d] + lim["lag_output_nrmse"][i_d])
    rows = []
    tik = b.replace(meta={k: v for k, v in b.meta.items() if k != "estimator"}, kf={})
    todo = [(n, c["best"], True) for n, c in sel["candidates"].items()]
    if point_markov and not b.chain.ideal:
        todo += [(n + " [point Markov]", c["best"], False)
                 for n, c in sel["candidates"].items() if c["best"].get("kind") != "smoother"]
    for cname, best, markov in todo:
        point = None
        if best.get("kind") == "smoother":  # the smoother of that row
            est = _smoother_of(tik, spec, b, best)
            if pruns is not None:
                point = _scores(_smoother_of(tik, spec, b, best, Chain()), pruns, b.dt)[0]
        else:
            try:
                est = Estimator(tik.replace(chain=replace(tik.chain, markov=markov),
                                            **best.get("changes", {})),
                                alpha=best["alpha"], window=best["window"])
            except EstimatorError as exc:  # no stable setting of this candidate: say so
                print(f"  {cname}: not run ({exc})", file=sys.stderr, flush=True)
                continue
        per, fb, ff, cov = _scores(est, runs, b.dt)
        rows.append({"estimator": cname, "chosen": cname == sel["chosen"],
                     "window": best["window"], "delay_ms": (best["window"] - 1) * b.dt * 1e3,
                     "alpha": best.get("alpha", float("nan")),
                     "targets": {n: {"nrmse": float(per[:, j].mean()),
                                     "spread": float(per[:, j].std()),
                                     "fde_0_200": float(np.mean(fb[:, j])),
                                     "fde_full": float(np.mean(ff[:, j])),
                                     "coverage": float(np.mean(cov[:, j])),
                                     "point": (float("nan") if point is None
                                               else float(point[:, j].mean())),
                                     "limit": float(nc[j]), "limit_at_delay": float(at_d[j]),
                                     "ratio": float(per[:, j].mean() / nc[j]),
                                     "ratio_at_delay": float(per[:, j].mean() / at_d[j])}
                                 for j, n in enumerate(names)}})
    return {"model": spec.name, "load": load, "noise": noise, "kind": kind or "as file",
            "order": order, "chain": b.chain.as_dict(), "build_s": t_build, "rows": rows}


def fmt(case) -> str:
    ld = case["load"]
    lname = (f"random {ld['band'][0]:g}-{ld['band'][1]:g} Hz" if ld["type"] == "random"
             else f"sine {ld['freq']:g} Hz")
    if case.get("order"):
        lname += f" (order {case['order']})"
    out = []
    for r in case["rows"]:
        for n, t in r["targets"].items():
            pt, cv = t.get("point", float("nan")), t.get("coverage", float("nan"))
            # "-": no stated std (Tikhonov), no point-sample twin (point samples already)
            cov = "-" if np.isnan(cv) else f"{100 * cv:.0f} %"
            vs = "- | -" if np.isnan(pt) else f"{pt:.3g} | {t['nrmse'] / pt:.3f}"
            out.append(f"| {case['model']} | {case['kind']} | {lname} | {100 * case['noise']:g} % "
                       f"| {r['estimator']}{' *' if r['chosen'] else ''} (L={r['window']}) | {n} "
                       f"| {t['nrmse']:.3g} | {t['fde_0_200']:.3g} | {t['fde_full']:.3g} "
                       f"| {t['limit']:.3g} | {t['limit_at_delay']:.3g} | {t['ratio']:.2f} "
                       f"| {t['ratio_at_delay']:.2f} | {cov} | {vs} |")
    return "\n".join(out)


HEAD = ("| model | sensor | load | noise | estimator (* chosen) | target | nrmse | FDE 0-200 Hz "
        "| FDE full | limit non-causal | limit at max_delay | ratio | ratio at max_delay "
        "| 1-sigma coverage | point samples: nrmse | chip / point |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
        "| --- | --- |")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--zoo" in argv:  # the load zoo (module docstring)
        import load_zoo
        return load_zoo.main(argv[argv.index("--zoo") + 1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zoo", action="store_true",
                    help="run benchmarks/load_zoo.py with the options after --zoo")
    ap.add_argument("--quick", action="store_true",
                    help="paper cantilever (displacement, random 5-80/5-160 Hz, 1 %%) and the "
                         "free-free case only")
    ap.add_argument("--json", default=None, help="write all figures to this JSON file")
    ap.add_argument("--only", default=None, help="run only the models whose name contains this")
    ap.add_argument("--noises", type=float, nargs="+", default=None,
                    help="relative noise levels (default 0.001 0.01 0.03)")
    ap.add_argument("--kinds", nargs="+", default=None, choices=("displacement", "acceleration"),
                    help="sensor kinds (default both)")
    ap.add_argument("--loads", nargs="+", default=None, choices=("random", "sine"),
                    help="load types (default both)")
    ap.add_argument("--point-markov", action="store_true",
                    help="also run each Tikhonov candidate of a converter's bundle with the "
                         "point-sample Markov parameters (as a schema <= 9 bundle)")
    ap.add_argument("--max-delay", type=float, default=None,
                    help="[estimator] max_delay in ms (default: the model file's, 20 ms)")
    ap.add_argument("--order", type=int, default=None,
                    help="declare every force's roll-off order ([[forces]] model = { order "
                         "= N }: the test loads' ideal band edges; default: not declared, "
                         "the smoother's second order)")
    args = ap.parse_args(argv)
    loads = [{"type": "random", "band": [5.0, 80.0], "rms": 1.0},
             {"type": "random", "band": [5.0, 160.0], "rms": 1.0},
             {"type": "sine", "freq": 20.0, "amplitude": 1.0},
             {"type": "sine", "freq": 40.0, "amplitude": 1.0}]
    noises = [0.001, 0.01, 0.03]
    tmp = Path(tempfile.mkdtemp(prefix="vsense_accuracy_"))
    models = [ROOT / "examples" / "paper_cantilever.toml", matrices_model(tmp)]
    kinds = ["displacement", "acceleration"]
    if args.quick:
        models, loads, noises, kinds = models[:1], loads[:2], [0.01], ["displacement"]
    noises = args.noises or noises
    kinds = args.kinds or kinds
    loads = [ld for ld in loads if args.loads is None or ld["type"] in args.loads]
    cases = [(m, ld, nz, k) for m in models for k in kinds for ld in loads for nz in noises]
    ff = free_free_model(tmp)
    cases.append((ff, {"type": "random", "band": [0.0, 200.0], "rms": 1.0}, 0.1, None))
    if args.only:
        cases = [c for c in cases if args.only in c[0].stem]
    if args.noises or args.kinds or args.loads:  # the free-free case only when asked by name
        cases = [c for c in cases if c[3] is not None
                 or (args.only is not None and args.only in c[0].stem)]
    print(HEAD, flush=True)
    results = []
    for i, (m, ld, nz, k) in enumerate(cases):
        t0 = time.perf_counter()
        case = run_case(m, ld, nz, k, max_delay=None if args.max_delay is None
                        else args.max_delay * 1e-3, order=args.order,
                        point_markov=args.point_markov)
        results.append(case)
        print(fmt(case), flush=True)
        print(f"[{i + 1}/{len(cases)}] {m.stem} {k} {ld['type']} {100 * nz:g} %: "
              f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
