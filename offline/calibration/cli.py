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
import sys

from edge.helpformat import HelpFormatter


def build_parser() -> argparse.ArgumentParser:
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


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.alpha_deprecated is not None:
        print("vsense-offline calibrate: --alpha is deprecated, use --test-level (the test "
              "level of the model-inadequacy test)", file=sys.stderr)
        args.test_level = args.alpha_deprecated
    # here, not at the top: `calibrate --help` answers without scipy and the build
    from offline.calibration.command import run
    from offline.model.spec import ModelFileError

    try:
        return run(args)
    except (ModelFileError, FileNotFoundError, ValueError) as exc:
        print(f"vsense-offline calibrate: error: {exc}", file=sys.stderr)
        return 2
