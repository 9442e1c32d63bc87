"""``vsense-offline calibrate``: Bayesian calibration of a model file from records.

    vsense-offline calibrate MODEL.toml --data RUN.csv [--data ...] -o OUTDIR
                             [--bundle OUT.npz] [--check mcmc] [--kfold] [--test-level 0.05]
                             [--model-tolerance 0.005]

Writes OUTDIR/posterior.json, OUTDIR/report.html, OUTDIR/calibrated.toml (the model file with
the posterior medians applied). ``--kfold`` runs the model-inadequacy test (by default when
the records allow it): the records (two or more independent ones, or one record at least ten
decay times of the first mode long, cut into blocks) are each split into a band below and
above the model's first two modes; the parameters calibrated on each group alone are compared
with those calibrated on the others, and the model family is rejected when they differ by more
than chance and the model's fidelity (``--model-tolerance``) allow at the test level
(``--test-level``: the probability of rejecting a model that is right; docs/glossary.md).
Records that are not independent (same data, shared samples, overlapping time stamps) or too
few are refused before calibrating.

Operational records (``time,<sensors>``, the force unknown): ``--operational`` calibrates by
the likelihood of the records with the force as a stochastic input, ``--output-only N`` by N
natural frequencies identified from them; ``--bundle`` works with both, the inadequacy test
(``--kfold``) and ``--check mcmc`` need force-and-response records and are refused.

Exit codes: 0 ok, 2 bad input (a column that is constant, e.g. an all-zero force or a dead
sensor; rows missing from the time stamps), 4 the model family failed the inadequacy test
(the outputs are still written; the bundle's meta says so), 5 the calibration did not
converge or a posterior mean is outside its parameter's bounds (only posterior.json and
report.html are written, to show where it stopped).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

EXIT_INADEQUATE = 4
EXIT_NOT_CONVERGED = 5


def build_parser() -> argparse.ArgumentParser:
    from edge.helpformat import HelpFormatter

    p = argparse.ArgumentParser(prog="vsense-offline calibrate",
                                description=__doc__.split("\n")[0].split(": ", 1)[1],
                                formatter_class=HelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("model", help="model file with [[parameters]] (and optionally [bayes])")
    p.add_argument("--data", action="append", required=True,
                   help="force-and-response CSV (time,<forces>,<sensors>); repeat for records")
    p.add_argument("-o", "--out", required=True, help="output directory")
    p.add_argument("--bundle", default=None, help="also build the calibrated bundle (.npz)")
    p.add_argument("--check", choices=("mcmc",), default=None,
                   help="cross-check the variational-Bayes result with a Markov-chain Monte "
                        "Carlo sampler (emcee; small problems)")
    p.add_argument("--mcmc-steps", type=int, default=1500, metavar="N",
                   help="--check mcmc: steps of each emcee walker")
    p.add_argument("--kfold", dest="kfold", action="store_true", default=None,
                   help="model-inadequacy test, k-fold by record and band (default: when the "
                        "records allow it; asked for and not possible: exit 2 before calibrating)")
    p.add_argument("--no-kfold", dest="kfold", action="store_false", default=None,
                   help="skip the model-inadequacy test (also with >= 2 records)")
    p.add_argument("--test-level", type=float, default=0.05, metavar="P",
                   help="test level of the model-inadequacy test: the probability of "
                        "rejecting a right model (not the regularisation alpha of `build`)")
    p.add_argument("--model-tolerance", type=float, default=None, metavar="R",
                   help="relative fidelity of the model's parameters that the model-inadequacy "
                        "test accepts between inputs (default: 0.005, i.e. 0.5 %%; the stiffness "
                        "1 - omega for a damage zone)")
    p.add_argument("--alpha", type=float, default=None, dest="alpha_deprecated",
                   help=argparse.SUPPRESS)  # the former spelling of --test-level
    p.add_argument("--output-only", type=int, default=None, metavar="N_MODES",
                   help="operational records (no force columns): calibrate to the N_MODES "
                        "natural frequencies identified from the responses")
    p.add_argument("--f-range", type=float, nargs=2, default=None, metavar=("F0", "F1"),
                   help="frequency range [Hz] searched by --output-only (default: 1 Hz to "
                        "half the sample rate)")
    p.add_argument("--operational", action="store_true",
                   help="operational records (no force columns): calibrate by the likelihood "
                        "of the records with the force as a stochastic input (the load model "
                        "fitted jointly; docs/calibration.md)")
    p.add_argument("--starts", type=int, default=3, metavar="N",
                   help="--operational: prior draws among the optimiser's starts (besides the "
                        "prior mean and one start per damage zone)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def run(args) -> int:
    from offline.calibration.calibrate import calibrate, hash_file, settings_from_raw
    from offline.calibration.data import read_record
    from offline.calibration.report import write_report
    from offline.calibration.setup import from_model_file
    from offline.calibration.tomlout import dumps

    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, flush=True))
    out = Path(args.out)
    setup = from_model_file(args.model, progress=not args.quiet)
    settings = settings_from_raw(setup.spec.raw, setup.parameters, setup.where)
    if args.output_only is not None or args.operational:
        from offline.calibration.operational_cli import output_only
        return output_only(args, setup, settings, say)
    records = [read_record(p, setup.forces, setup.sensors, settings.prep) for p in args.data]
    kfold = _plan_kfold(args, setup, settings, records, say)
    say(f"calibrating {list(setup.names)} from {len(records)} record(s) "
        f"({sum(r.used.size for r in records)} samples per sensor)")
    res = calibrate(setup, None, settings, progress=not args.quiet, records=records)
    info = res.to_dict(model_sha256=hash_file(args.model))
    say_posterior(info, say)
    if not info["converged"]:
        out.mkdir(parents=True, exist_ok=True)
        (out / "posterior.json").write_text(json.dumps(info, indent=1) + "\n")
        write_report(res, out, [("converged", "NO")])
        print(f"vsense-offline calibrate: error: {not_converged_reason(info, settings)}; no "
              f"calibrated model written; where it stopped: {out / 'posterior.json'}, "
              f"{out / 'report.html'}", file=sys.stderr)
        return EXIT_NOT_CONVERGED
    outside = outside_bounds(info, setup.parameters)
    if outside:
        out.mkdir(parents=True, exist_ok=True)
        info["converged"] = False
        info["outside_bounds"] = outside
        (out / "posterior.json").write_text(json.dumps(info, indent=1) + "\n")
        write_report(res, out, [("converged", "NO: posterior outside the bounds")])
        print(f"vsense-offline calibrate: error: posterior mean outside the prior's bounds: "
              f"{'; '.join(outside)}. The records cannot support this model as given: check "
              f"the units (N, SI) and sign of the force and sensor columns of "
              f"{', '.join(args.data)}; no calibrated model written (where it stopped: "
              f"{out / 'posterior.json'})",
              file=sys.stderr)
        return EXIT_NOT_CONVERGED
    extra = []
    if args.check == "mcmc":
        from offline.calibration.checks import mcmc_check
        say(f"MCMC cross-check (emcee, {args.mcmc_steps} steps) ...")
        info["check"] = mcmc_check(res, steps=args.mcmc_steps)
        say(f"  max |mean_mcmc - mean_vb| = {info['check']['max_mean_dev_sigma']:.3f} sigma, "
            f"std ratio {[round(x, 3) for x in info['check']['std_ratio']]}")
        extra.append(("MCMC: max |Δmean| / σ", f"{info['check']['max_mean_dev_sigma']:.3f}"))
    failed = False
    if kfold:
        from offline.calibration.checks import kfold_inadequacy
        say(f"model-inadequacy test ({kfold['k']}-fold by input: {kfold['how']}; test level "
            f"{args.test_level}) ...")
        kw = {} if args.model_tolerance is None else {"tolerance": args.model_tolerance}
        info["inadequacy"] = kfold_inadequacy(setup, records, settings, alpha=args.test_level,
                                              progress=not args.quiet, paths=args.data, **kw)
        failed = not info["inadequacy"]["passed"]
        nin = sum(not f["conclusive"] for f in info["inadequacy"]["folds"])
        if nin:
            say(f"WARNING: {nin} of {len(info['inadequacy']['folds'])} folds inconclusive (a "
                f"fit's nonlinearity measure above 0.5: its posterior is not Gaussian)"
                + ("" if info["inadequacy"]["conclusive"] else
                   "; the test could not judge this family"))
        extra.append(("inadequacy test: p-value (Bonferroni over the folds)",
                      f"{info['inadequacy']['p_family']:.3g}"
                      + (" (FAILED)" if failed else " (passed)")))
    out.mkdir(parents=True, exist_ok=True)
    (out / "posterior.json").write_text(json.dumps(info, indent=1) + "\n")
    raw = res.calibrated_raw()
    head = (f"calibrated by vsense-offline calibrate from {Path(args.model).name} and "
            f"{', '.join(r.name for r in records)}\nposterior medians applied; see posterior.json"
            + ("\nWARNING: the model family FAILED the inadequacy test" if failed else ""))
    (out / "calibrated.toml").write_text(dumps(raw, head))
    write_report(res, out, extra)
    say(f"wrote {out / 'posterior.json'}, {out / 'calibrated.toml'}, {out / 'report.html'}")
    if args.bundle:
        _bundle(args, raw, head, info, failed, say)
    if failed:
        print(f"vsense-offline calibrate: the model family failed the inadequacy test "
              f"(p-value {info['inadequacy']['p_family']:.3g} < {args.test_level}: the parameters "
              f"from different inputs disagree; see the folds in posterior.json)", file=sys.stderr)
        return EXIT_INADEQUATE
    return 0


def say_posterior(info: dict, say) -> None:
    """Each parameter (NOT DETERMINED ones with their 95 % interval, not as a finding), what
    the records do not determine, the free energy and the cost."""
    for n, m, s, iv in zip(info["names"], info["mean"], info["std"], info["interval95"]):
        say(f"  {n}: {m:.6g} +- {s:.3g} (nonlinearity {info['nonlinearity'][n]:.3g})"
            + ("" if info["determined"].get(n, True) else
               f" NOT DETERMINED alone by these records (95 % interval {iv[0]:.3g} .. "
               f"{iv[1]:.3g}): not a finding"))
    for u in info["identifiability"]["undetermined"]:
        say(f"  NOT DETERMINED: {u['text']}")
    say(f"  free energy {info['free_energy']:.6g}, {info['model_evaluations']} model runs, "
        f"{info['seconds']:.2f} s")


def not_converged_reason(info: dict, settings) -> str:
    """Why VB stopped, with the limit that stopped it (``VBResult.stop``)."""
    it, F = info["iterations"], info["free_energy"]
    if info.get("stop") == "backtrack":
        from offline.calibration.vb import MAX_HALVINGS
        return (f"the calibration stopped after {it} iterations (free energy {F:.6g}): no step "
                f"raised the free energy after {MAX_HALVINGS} halvings of the step, so the "
                f"linearised posterior points nowhere better; more iterations would not help "
                f"([bayes] max_iter is {settings.max_iter}, not reached). Typical causes: "
                f"parameters the records cannot separate (NOT DETERMINED above), or a prior "
                f"or damping the records contradict")
    return (f"the calibration did not converge in {it} iterations, the [bayes] max_iter limit "
            f"(free energy {F:.6g}). Raise [bayes] max_iter, or check the records and priors")


def outside_bounds(info: dict, parameters) -> list:
    """``"name = mean outside [lo, hi]"`` for each posterior mean outside its parameter's
    ``bounds`` (a damping ratio of 17.8 for [0.003, 0.05] from a force column in mN)."""
    out = []
    for p, m in zip(parameters, info["mean"]):
        lo, hi = (float(b) for b in p.bounds)
        if not lo <= m <= hi:
            out.append(f"{p.name} = {m:.6g} outside [{lo:g}, {hi:g}]")
    return out


def _plan_kfold(args, setup, settings, records, say) -> dict | None:
    """Groups of the inadequacy test, checked BEFORE calibrating: independent records (or one
    record long enough for blocks of five decay times), each split into two bands
    (offline.calibration.folds). ValueError (exit 2) when --kfold was asked for and cannot
    run; without --kfold the test runs when it can and a line says why when it cannot;
    records that are not independent are refused in both cases."""
    from offline.calibration.folds import check_independent, fold_groups

    if args.kfold is False:
        return None
    if args.model_tolerance is not None and not args.model_tolerance >= 0:
        raise ValueError(f"--model-tolerance must be >= 0 (a relative fidelity), got "
                         f"{args.model_tolerance}")
    # records that are not independent are refused whether or not --kfold was given: the
    # test would compare a record with itself and the posterior would count data twice
    check_independent(records, args.data)
    try:
        groups, plan = fold_groups(setup, records, settings, paths=args.data)
    except ValueError as exc:
        if args.kfold:
            raise ValueError(f"--kfold: {exc}") from None
        say(f"model-inadequacy test not run: {exc}")
        return None
    how = (f"{len(groups) // 2} blocks of one record" if plan["blocks"]
           else f"{len(records)} independent records") + \
        f" x 2 bands split at {plan['f_split']:.1f} Hz"
    return {"k": len(groups), "how": how}


def _bundle(args, raw, head, info, failed, say):
    """Build the calibrated model next to the original (relative mesh paths keep working)."""
    from offline.build import build
    from offline.calibration.tomlout import dumps

    src = Path(args.model).resolve()
    fd, tmp = tempfile.mkstemp(suffix=".toml", prefix=f".{src.stem}.calibrated.", dir=src.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(dumps(raw, head))
        res = build(tmp, progress=not args.quiet, maps=False)
    finally:
        Path(tmp).unlink(missing_ok=True)
    meta = dict(res.bundle.meta)
    meta["calibration"] = {k: info[k] for k in ("names", "kinds", "mean", "std", "correlation",
                                                "noise_std", "free_energy", "nonlinearity",
                                                "converged", "determined", "interval95",
                                                "model_sha256") if k in info}
    meta["calibration"]["undetermined"] = [u["text"] for u in
                                           info.get("identifiability", {}).get("undetermined", [])]
    meta["calibration"]["data"] = [d["sha256"] for d in info["data"]]
    if "inadequacy" in info:
        meta["calibration"]["inadequacy"] = {"passed": info["inadequacy"]["passed"],
                                             "p_min": info["inadequacy"]["p_min"],
                                             "p_family": info["inadequacy"]["p_family"],
                                             "alpha": info["inadequacy"]["alpha"]}
    meta["calibration"]["model_inadequate"] = bool(failed)
    res.bundle.replace(meta=meta).save(args.bundle)
    say(f"wrote {args.bundle}")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.alpha_deprecated is not None:
        print("vsense-offline calibrate: --alpha is deprecated, use --test-level (the test "
              "level of the model-inadequacy test)", file=sys.stderr)
        args.test_level = args.alpha_deprecated
    from offline.model.spec import ModelFileError

    try:
        return run(args)
    except (ModelFileError, FileNotFoundError, ValueError) as exc:
        print(f"vsense-offline calibrate: error: {exc}", file=sys.stderr)
        return 2
