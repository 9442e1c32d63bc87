"""``vsense-offline``: the workstation command line.

    vsense-offline inspect MODEL.toml [--modes N]
    vsense-offline build MODEL.toml -o BUNDLE.npz [--report DIR] [--alpha A|lcurve|gcv|...]
                                                  [--window L] [--no-maps] [--maps-cache DIR]
    vsense-offline simulate MODEL.toml --load random --band 5 160 --rms 1 --duration 2
                                       -o PREFIX [--noise 0.01] [--reduced] [--oversample 10]
    vsense-offline simulate MODEL.toml --load pulse --amplitude 5 --width 0.002 -o PREFIX
    vsense-offline simulate MODEL.toml --chain ads1256 [--drate 1000] [--mode continuous]
                                       -o PREFIX   (measurements converted like the ADS1256)
    vsense-offline score ESTIMATES.csv TRUTH.csv [--band F0 FMAX]
    vsense-offline calibrate MODEL.toml --data RUN.csv [--data ...] -o OUTDIR [--bundle OUT.npz]
                             [--check mcmc] [--kfold]          (docs/calibration.md)
    vsense-offline limit MODEL.toml [--noise LEVEL] [--delay MS ...] [--bundle BUNDLE.npz]
    vsense-offline place MODEL.toml -n N -o PLACED.toml [--for estimation|calibration]
                         [--report DIR]                 (docs/placement.md)
    vsense-offline fatigue ESTIMATES.csv --column NAME --curve EN-71 [--unit MPa|Pa|strain
                           --E 210e9] [--rows-of EST.csv] -o DIR   (docs/fatigue.md)

Exit codes: 0 ok, 2 bad input (model file, CSV, arguments), 3 the estimator was refused
(unstable or not identifiable, or a --hybrid network not better than the linear model), 4 calibrate: the model family failed the inadequacy test,
1 internal error.
"""

from __future__ import annotations

import argparse
import os
import sys

from edge.helpformat import HelpFormatter
from edge.lazy import resolve
from offline import __version__

#: What each command runs ("module:name") and the errors main() reports: imported by
#: :func:`edge.lazy.resolve` when the command runs, so `vsense-offline --help` and argument
#: errors stay fast and import neither numba nor scipy's solvers
#: (tests/test_offline_path.py::test_cli_help_imports_no_solver_or_numba,
#: tests/test_cli_startup.py).
LAZY = {
    "inspect": "offline.model.inspect:inspect_report",
    "build": "offline.build:build",
    "simulate": "offline.simulate:simulate_model",
    "place": "offline.placement.cli:run_place",
    "fatigue": "offline.fatigue:run_fatigue",
    "limit": "offline.limit.cli:run_limit",
    "score": "offline.score:main",
    "calibrate": "offline.calibration.cli:main",
    "EstimatorError": "edge.estimator:EstimatorError",
    "ModelFileError": "offline.model.spec:ModelFileError",
}


def _alpha(v: str):
    try:
        return float(v)
    except ValueError:
        if v not in ("auto", "lcurve", "gcv", "discrepancy"):
            raise argparse.ArgumentTypeError(
                f"alpha must be a number or one of auto, lcurve, gcv, discrepancy; got {v!r}")
        return v


def _window(v: str):
    if v == "auto":
        return v
    try:
        L = int(v)
    except ValueError:
        L = 0
    if L < 1:
        raise argparse.ArgumentTypeError(f"window must be an integer >= 1 or 'auto'; got {v!r}")
    return L


def _add_inspect(command) -> None:
    """``inspect``: sizes and natural frequencies."""
    i = command("inspect", "sizes and natural frequencies of the full model")
    i.add_argument("model", help="model file (TOML)")
    i.add_argument("--modes", type=int, default=10, help="natural frequencies to list")


def _add_build(command) -> None:
    """``build``: model file -> bundle."""
    b = command("build", "model file -> bundle (model reduction, regularisation alpha, "
                         "stability)")
    b.add_argument("model", help="model file (TOML)")
    b.add_argument("-o", "--out", required=True, help="bundle .npz to write")
    b.add_argument("--report", default=None, help="directory for the build report (PNG, HTML)")
    b.add_argument("--alpha", type=_alpha, default=None,
                   help="override [estimator].alpha (number or rule)")
    b.add_argument("--window", type=_window, default=None,
                   help="override [estimator].window: samples L >= 1, or 'auto'")
    b.add_argument("--record", action="append", default=None, metavar="RUN.csv",
                   help="a record of the structure in operation (time and one column per "
                        "[[sensors]] entry, the forces unknown; repeat for several): each "
                        "force's spectrum and level and each sensor's noise are learned from "
                        "it, the model file's declaration the prior (docs/load.md)")
    b.add_argument("--hybrid", action="append", default=None, metavar="RUN.csv",
                   help="a force-and-response record (time, [[forces]] and [[sensors]] "
                        "columns; repeat for several, three or more: the last one is the "
                        "validation record): a neural correction of the linear model is "
                        "trained on it, the hybrid twin (smoother only; docs/hybrid.md)")
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    # inverse maps (docs/inverse.md "Build")
    b.add_argument("--no-maps", action="store_true",
                   help="do not train/attach the inverse maps of [[parameters]]")
    b.add_argument("--maps-cache", default=None,
                   help="cache directory of the inverse-map training windows "
                        "(default $VSENSE_CACHE/inverse or ~/.cache/vsense/inverse)")


def _add_simulate(command) -> None:
    """``simulate``: a simulated rig's measurement and truth CSVs."""
    s = command("simulate", "simulated rig: measurement and truth CSVs")
    s.add_argument("model", help="model file (TOML)")
    s.add_argument("--load", default="random", choices=("sine", "chirp", "random", "pulse",
                                                         "csv"),
                   help="load profile on every force of the model file: each force its own "
                        "realisation (seed + 1000 i) times its scale, as in the build's "
                        "calibration runs")
    s.add_argument("--freq", type=float, default=None, help="sine frequency [Hz] (--load sine)")
    s.add_argument("--width", type=float, default=0.002,
                   help="half-sine pulse width [s] (--load pulse)")
    s.add_argument("--band", type=float, nargs=2, default=(5.0, 160.0),
                   help="random/chirp band [Hz]")
    s.add_argument("--rms", type=float, default=1.0, help="random load RMS [N] (times each force's scale)")
    s.add_argument("--amplitude", type=float, default=1.0,
                   help="sine/chirp/pulse amplitude [N] (times each force's scale)")
    s.add_argument("--csv", default=None, help="force history CSV (time,<force names>) for --load csv: the "
                        "column named after each force (else the first), in N, unscaled; "
                        "its time 0 is the start of --warmup, so the record's time 0 is the "
                        "CSV's time WARMUP; 0 outside its times")
    s.add_argument("--duration", type=float, default=2.0, help="record length [s]")
    s.add_argument("--noise", type=float, default=None,
                   help="noise std of every channel relative to its signal std (0.01 = 1 %%); "
                        "default: each sensor's declared noise_std (absolute) or noise "
                        "(relative), 0.01 for a sensor that declares neither")
    s.add_argument("--warmup", type=float, default=0.0,
                   help="seconds simulated before the record and dropped: the record starts "
                        "on a vibrating structure instead of at rest with a step of the load "
                        "(the build's calibration runs use 1 s); a --load csv history starts "
                        "with it")
    s.add_argument("--oversample", type=int, default=10,
                   help="integrator steps (and load points) per sample")
    s.add_argument("--engine", choices=("modal", "newmark"), default="modal",
                   help="full-model integrator: exact modal superposition of 80 modes with "
                        "static correction (the build's calibration runs use it), or sparse "
                        "Newmark on every DOF at the --oversample step (a different "
                        "integrator, slower)")
    s.add_argument("--reduced", action="store_true",
                   help="simulate the bundle's reduced model instead of the full FE model")
    s.add_argument("--chain", choices=("model", "ads1256", "ideal"), default="model",
                   help="what the measurement CSV holds: 'model' (the default), converted as "
                        "the model file's [acquisition] declares, which is the ADS1256 when "
                        "it declares nothing (docs/modelfile.md); 'ads1256', each channel "
                        "converted like the chip (sinc5 + averager over its window, at its "
                        "own instant in multiplexer cycling; docs/hardware.md); 'ideal', point "
                        "samples at the row times. The truth CSV is point values either way")
    s.add_argument("--drate", type=float, default=None,
                   help="ADS1256 data rate [SPS] of --chain ads1256 (default: the one that "
                        "gives the model's [estimator] rate rows/s in --mode)")
    s.add_argument("--mode", choices=("continuous", "cycle"), default=None,
                   help="--chain ads1256: one channel in continuous mode (RDATAC) or the "
                        "channels by multiplexer cycling (default: continuous for one "
                        "sensor, cycle for several)")
    s.add_argument("--seed", type=int, default=0,
                   help="seed of the load and the noise (with --load csv the load is the "
                        "CSV's: the seed draws the noise only)")
    s.add_argument("-o", "--out", required=True,
                   help="prefix: writes PREFIX_measurement.csv and PREFIX_truth.csv")
    s.add_argument("--quiet", action="store_true", help="no progress bars")


def _add_limit(command) -> None:
    """``limit``: the accuracy limit of each force and output."""
    lm = command("limit", "the smallest error any estimator can reach for each force and "
                          "output (MMSE or Wiener accuracy limit; docs/glossary.md)")
    lm.add_argument("model", help="model file (TOML)")
    lm.add_argument("--noise", type=float, default=None,
                    help="relative noise level of every sensor (default: each sensor's noise)")
    lm.add_argument("--delay", type=float, nargs="+", default=None,
                    help="delays [ms] of the causal limits (default: 0 5 10 20 100)")
    lm.add_argument("--modes", type=int, default=80,
                    help="full-model modes (the rest enters as residual flexibility)")
    lm.add_argument("--bundle", default=None,
                    help="the limit under this bundle's own load model (learned with build "
                         "--record, else declared) and at its delay; run its estimator on the "
                         "build's honest calibration runs and print its error and its ratio "
                         "to the limit at its delay (the build's ratio; docs/glossary.md); both "
                         "through the bundle's measurement chain ([acquisition])")
    lm.add_argument("--quiet", action="store_true", help="no progress bars")


def _add_place(command) -> None:
    """``place``: sensors chosen from [[placement.candidates]]."""
    pl = command("place", "choose sensors from [[placement.candidates]]")
    pl.add_argument("model", help="model file (TOML) with [[placement.candidates]]")
    pl.add_argument("-n", type=int, required=True, help="number of sensors to add")
    pl.add_argument("-o", "--out", required=True,
                    help="model file to write: MODEL.toml with the chosen sensors appended")
    pl.add_argument("--for", dest="target", choices=("estimation", "calibration"),
                    default="estimation",
                    help="estimation: predicted error of the forces and outputs (the build's "
                         "Kalman smoother); calibration: posterior std of the [[parameters]] "
                         "(E-criterion on the Fisher information)")
    pl.add_argument("--report", default=None,
                    help="directory of the figures (default: next to the written file)")
    pl.add_argument("--screen", type=int, default=6,
                    help="candidates per step evaluated exactly (best by the frequency-domain "
                         "proxy); 0: all")
    pl.add_argument("--passes", type=int, default=3, help="exchange passes after the greedy "
                    "choice")
    pl.add_argument("--quiet", action="store_true", help="no progress bars")


def _add_fatigue(command) -> None:
    """``fatigue``: rainflow count and Miner damage of one column."""
    fa = command("fatigue", "rainflow count, Miner damage and its interval of one CSV "
                            "column, with the device's counter (docs/fatigue.md)")
    fa.add_argument("csv", help="replay or score CSV (time, columns; <NAME>_std optional)")
    fa.add_argument("--column", required=True, help="the column to count")
    fa.add_argument("--curve", required=True,
                    help="S-N curve preset: EN-36 .. EN-160 (EN 1993-1-9), DNV-D-air, "
                         "DNV-D-cp ... (DNV-RP-C203); or a user curve as key=value pairs, "
                         "e.g. m1=5,S_ref=71,N_ref=2e6 (keys as [[fatigue]] curve tables)")
    fa.add_argument("--unit", default="MPa", help="unit of the column: MPa, Pa, strain, "
                    "microstrain")
    fa.add_argument("--E", type=float, default=None,
                    help="Young's modulus [Pa] for --unit strain or microstrain")
    fa.add_argument("--rows-of", metavar="ESTIMATES.csv", default=None,
                    help="count only the rows this replay CSV counts (same time stamps; its "
                         "warm-up and NaN rows are gaps, rows past its end left out): the "
                         "truth over the estimate's rows")
    fa.add_argument("-o", "--out", required=True, help="directory for fatigue.json and "
                    "fatigue.png")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vsense-offline", description=__doc__.split("\n")[0],
                                formatter_class=HelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def command(name: str, help: str, **kw) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, formatter_class=HelpFormatter,
                              **kw)

    for add in (_add_inspect, _add_build, _add_simulate, _add_limit, _add_place, _add_fatigue):
        add(command)
    sc = command("score", "compare an estimates CSV with a truth CSV", add_help=False)
    sc.add_argument("rest", nargs=argparse.REMAINDER)
    ca = sub.add_parser("calibrate", help="Bayesian calibration of [[parameters]] from records",
                        add_help=False)
    ca.add_argument("rest", nargs=argparse.REMAINDER)
    return p


def _run_inspect(args) -> int:
    text, errors = resolve(LAZY["inspect"])(args.model, n_modes=args.modes, progress=True)
    print(text)
    for e in errors:
        print(f"vsense-offline inspect: error: {e}", file=sys.stderr)
    return 2 if errors else 0


def _run_build(args) -> int:
    build = resolve(LAZY["build"])
    res = build(args.model, alpha=args.alpha, window=args.window,
                progress=not args.quiet, report_dir=args.report,
                maps=not args.no_maps, maps_cache=args.maps_cache,
                records=args.record, hybrid=args.hybrid)
    res.bundle.save(args.out)
    print(res.summary())
    print(res.reduction.report.format(f_band=res.bundle.rate / 2))
    print(f"wrote {args.out}")
    if args.report:
        print(f"build report in {args.report}")
    return 0


def _simulate_load(args) -> dict:
    """The load of ``simulate``'s arguments (:func:`offline.simulate.simulate_model`)."""
    load = {"type": args.load, "amplitude": args.amplitude}
    if args.load == "pulse":
        load["width"] = args.width
    if args.load == "sine":
        if args.freq is None:
            raise ValueError("--load sine needs --freq")
        load["freq"] = args.freq
    if args.load in ("random", "chirp"):
        if not 0 <= args.band[0] < args.band[1] < float("inf"):
            raise ValueError(f"--band {args.band[0]:g} {args.band[1]:g}: need "
                             "0 <= F0 < F1, finite [Hz]")
        load["band"] = tuple(args.band)
    if args.load == "random":
        load["rms"] = args.rms
    if args.load == "csv":
        if not args.csv:
            raise ValueError("--load csv needs --csv FILE")
        load["csv_path"] = args.csv
    return load


def _run_simulate(args) -> int:
    simulate_model = resolve(LAZY["simulate"])
    res = simulate_model(args.model, _simulate_load(args), args.duration, noise=args.noise,
                         oversample=args.oversample, reduced=args.reduced,
                         seed=args.seed, progress=not args.quiet,
                         warmup=args.warmup, engine=args.engine, chain=args.chain,
                         drate=args.drate, mode=args.mode)
    meas, truth = f"{args.out}_measurement.csv", f"{args.out}_truth.csv"
    res.write(meas, truth)
    snr = ", ".join(f"{n} {v:.1f} dB" for n, v in zip(res.channel_names, res.snr_db()))
    if res.info["chain"] != "ideal":
        name = "the ADS1256" if res.info["chain"] == "ads1256" else "the daq's FIR"
        print(f"measurements through {name} at {res.info['drate']:g} SPS, "
              f"{res.info['mode']} mode")
    else:
        print("measurements: point samples at the row times (ideal)")
    print(res.noise_summary("--noise"))
    print(f"wrote {meas} and {truth} ({len(res.t)} samples, {res.info['model']} model; "
          f"SNR {snr})")
    return 0


def _run_place(args) -> int:
    run_place = resolve(LAZY["place"])
    run_place(args.model, args.n, args.out, target=args.target, report=args.report,
              screen=args.screen, passes=args.passes, progress=not args.quiet)
    return 0


def _run_fatigue(args) -> int:
    run_fatigue = resolve(LAZY["fatigue"])
    print(run_fatigue(args.csv, args.column, args.curve, args.out, unit=args.unit, E=args.E,
                      rows_of=args.rows_of))
    return 0


def _run_limit(args) -> int:
    run_limit = resolve(LAZY["limit"])
    print(run_limit(args.model, noise=args.noise, delays_ms=args.delay,
                    n_modes=args.modes, bundle=args.bundle, progress=not args.quiet))
    return 0


RUN = {"inspect": _run_inspect, "build": _run_build, "simulate": _run_simulate,
       "place": _run_place, "fatigue": _run_fatigue, "limit": _run_limit}


def main(argv=None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # e.g. `vsense-offline fatigue ... | head`: the reader left
        # Python docs ("Note on SIGPIPE"): point stdout at devnull so the exit flush is quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["score"], ["calibrate"]):  # their own parsers
        return resolve(LAZY[argv[0]])(argv[1:])
    args = _parser().parse_args(argv)
    EstimatorError, ModelFileError = (resolve(LAZY[k]) for k in ("EstimatorError",
                                                                 "ModelFileError"))
    try:
        run = RUN.get(args.command)  # (score and calibrate are handled above)
        return run(args) if run is not None else 0
    except BrokenPipeError:
        raise
    except (ModelFileError, OSError, ValueError) as exc:
        if isinstance(exc, EstimatorError):
            print(f"vsense-offline {args.command}: estimator refused: {exc}", file=sys.stderr)
            return 3
        print(f"vsense-offline {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
