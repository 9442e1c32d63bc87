"""``vsense-offline calibrate`` on force-and-response records (:mod:`offline.calibration.cli`
parses the command line; the operational routes are :mod:`offline.calibration.operational_cli`):
calibrate, check (MCMC, the model-inadequacy test), write posterior.json, calibrated.toml,
report.html and the bundle."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from offline.calibration.calibrate import calibrate, hash_file, settings_from_raw
from offline.calibration.checks import kfold_inadequacy, mcmc_check
from offline.calibration.data import read_record
from offline.calibration.folds import check_independent, fold_groups
from offline.calibration.operational_cli import output_only
from offline.calibration.outcome import (EXIT_INADEQUATE, EXIT_NOT_CONVERGED, calibrated_bundle,
                                         not_converged_reason, outside_bounds, say_posterior)
from offline.calibration.report import write_report
from offline.calibration.setup import from_model_file
from offline.calibration.tomlout import dumps


def run(args) -> int:
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, flush=True))
    out = Path(args.out)
    setup = from_model_file(args.model, progress=not args.quiet)
    settings = settings_from_raw(setup.spec.raw, setup.parameters, setup.where)
    if args.output_only is not None or args.operational:
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
        say(f"MCMC cross-check (emcee, {args.mcmc_steps} steps) ...")
        info["check"] = mcmc_check(res, steps=args.mcmc_steps)
        say(f"  max |mean_mcmc - mean_vb| = {info['check']['max_mean_dev_sigma']:.3f} sigma, "
            f"std ratio {[round(x, 3) for x in info['check']['std_ratio']]}")
        extra.append(("MCMC: max |Δmean| / σ", f"{info['check']['max_mean_dev_sigma']:.3f}"))
    failed = False
    if kfold:
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
        calibrated_bundle(args, raw, head, info, failed, say)
    if failed:
        print(f"vsense-offline calibrate: the model family failed the inadequacy test "
              f"(p-value {info['inadequacy']['p_family']:.3g} < {args.test_level}: the parameters "
              f"from different inputs disagree; see the folds in posterior.json)", file=sys.stderr)
        return EXIT_INADEQUATE
    return 0


def _plan_kfold(args, setup, settings, records, say) -> dict | None:
    """Groups of the inadequacy test, checked BEFORE calibrating: independent records (or one
    record long enough for blocks of five decay times), each split into two bands
    (offline.calibration.folds). ValueError (exit 2) when --kfold was asked for and cannot
    run; without --kfold the test runs when it can and a line says why when it cannot;
    records that are not independent are refused in both cases."""
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
