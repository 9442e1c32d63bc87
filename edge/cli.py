"""``vsense-edge``: the command line of the device.

    vsense-edge run [-c PATH] [--simulate] [--duration S] [--clock real|virtual]
                    [--broker HOST[:PORT]] [--require-broker]
    vsense-edge check-config [PATH] [--bundle] [--simulate]
    vsense-edge config-reference
    vsense-edge replay RECORDING|MEASUREMENT.csv --bundle B [-o OUT.csv] [--run K]
    vsense-edge monitor --broker HOST[:PORT] --device ID [--csv FILE] [--once]
                        [-c edge.toml] [--username U --password-file F] [--tls-ca CA]
    vsense-edge monitor --broker HOST[:PORT] --fleet [--once]
    vsense-edge dashboard [-c PATH] [--url ws://HOST:9001] [--port 8090] [--export DIR]
    vsense-edge historian --db sqlite:PATH|postgresql://... [--broker HOST[:PORT]] [--group G]

Exit codes: listed by `vsense-edge --help` (edge.daemon.exitcodes.EXIT_CODES).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import textwrap

from edge import __version__
from edge.daemon.config import (
    DEFAULT_PATH,
    ConfigError,
    load_config,
    reference_markdown,
)
from edge.daemon.exitcodes import EXIT_CODES, EXIT_CONFIG
from edge.helpformat import HelpFormatter
from edge.lazy import resolve

#: What the commands borrow from modules that load NumPy, numba or paho: imported by
#: :func:`edge.lazy.resolve` when the parser is built (after :func:`single_threaded_math`) or
#: the command runs, never at ``import edge.cli``.
LAZY = {
    "monitor": "edge.monitor:run_monitor",
    "monitor.arguments": "edge.monitor:add_arguments",
    "monitor.parse_broker": "edge.monitor:parse_broker",
    "dashboard": "edge.dashboard:run_dashboard",
    "dashboard.arguments": "edge.dashboard:add_arguments",
    "historian": "edge.historian:run_historian",
    "historian.arguments": "edge.historian:add_arguments",
    "historian.codes": "edge.historian:HISTORIAN_CODES",
    "replay": "edge.replay:replay",
    "run": "edge.daemon.app:run_daemon",
    "check-config.preflight": "edge.daemon.app:preflight",
    "check-config.error": "edge.daemon.app:StartupError",
}

#: the daemon never multiplies large matrices and numba's kernels are single-threaded: no BLAS
#: or OpenMP thread pool (OpenBLAS otherwise starts one thread per core at NumPy's import)
SINGLE_THREAD_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def single_threaded_math(env=os.environ) -> bool:
    """Ask the math libraries for one thread each (unless the environment already says)
    before NumPy is imported; False when it is too late (NumPy already loaded)."""
    if "numpy" in sys.modules:
        return False
    for k in SINGLE_THREAD_ENV:
        env.setdefault(k, "1")
    return True


#: The exit codes of the commands other than ``run`` (``run``: :data:`EXIT_CODES`).
CHECK_CONFIG_CODES = {
    0: "the file is valid (with --bundle: every start-up check passed)",
    EXIT_CONFIG: EXIT_CODES[EXIT_CONFIG],
    3: EXIT_CODES[3] + " - with --bundle",
}
REPLAY_CODES = {0: "estimates written", 2: "bad arguments, or the -o file cannot be written",
                3: EXIT_CODES[3],
                6: "bad input file (not a recording or measurement CSV, or its channels do "
                   "not match the bundle's)"}
MONITOR_CODES = {0: "ok", 1: "--once: no estimates within --timeout",
                 2: "bad arguments or config, unwritable --csv, broker not reachable, or the "
                    "broker refused the login (the message says why)"}
DASHBOARD_CODES = {0: "stopped (Ctrl-C) or --export written",
                   2: "bad arguments or config, the HTTP port not free, broker not reachable "
                      "or login refused (relay mode; the message says why)"}


def exit_code_lines(codes=None, title: str = "exit codes") -> str:
    """The exit codes, one wrapped line each (the epilog of ``--help``); ``codes``: a dict
    ``{code: text}``, or codes of :data:`EXIT_CODES`."""
    if codes is None:
        codes = EXIT_CODES
    elif not isinstance(codes, dict):
        codes = {k: EXIT_CODES[k] for k in codes}
    return f"{title}:\n" + "\n".join(
        textwrap.fill(f"{k}  {v}", width=90, initial_indent="  ", subsequent_indent="     ")
        for k, v in codes.items())


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vsense-edge", description=__doc__.split("\n")[0],
                                epilog=exit_code_lines(title="exit codes of run (the other "
                                                       "commands: their --help)"),
                                formatter_class=HelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    def command(name: str, help: str, codes=None) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, formatter_class=HelpFormatter,
                              epilog=exit_code_lines(codes) if codes else None)

    r = command("run", "run the daemon (hardware, or --simulate)", codes=EXIT_CODES)
    r.add_argument("-c", "--config", default=str(DEFAULT_PATH), help="TOML config")
    r.add_argument("--simulate", action="store_true",
                   help="simulated ADS1256 driven by [simulate] instead of the hardware")
    r.add_argument("--duration", type=float, default=None,
                   help="override [simulate] duration_s (seconds of simulated time)")
    r.add_argument("--clock", choices=("real", "virtual"), default=None,
                   help="override [simulate] clock")
    r.add_argument("--log-level", default=None, help="override [device] log_level")
    r.add_argument("--broker", default=None, metavar="HOST[:PORT]",
                   help="override [mqtt] host (and port)")
    r.add_argument("--require-broker", action="store_true",
                   help="exit with code 7 unless the MQTT broker accepts the connection "
                        "within [mqtt] connect_timeout_s (also [mqtt] require_broker)")
    c = command("check-config", "validate a config file and exit (without --bundle: its keys "
                "and values only; the line says what was not checked)",
                codes=CHECK_CONFIG_CODES)
    c.add_argument("path", nargs="?", default=str(DEFAULT_PATH), help="TOML config")
    c.add_argument("--bundle", action="store_true",
                   help="also run every start-up check of `run` short of opening the "
                        "hardware: bundle, channels, signature, ADC row rate, inverse maps, "
                        "MQTT password and TLS files")
    c.add_argument("--simulate", action="store_true",
                   help="check for `run --simulate` (the [simulate] level decides the rate "
                        "check)")
    command("config-reference", "print the Markdown config reference")
    rp = command("replay", "run the estimator over a recording or a measurement CSV "
                 "(edge.replay)", codes=REPLAY_CODES)
    rp.add_argument("recording", help="recording directory, raw-*.vsr file, or measurement CSV "
                                      "(a `time` column [s] and one column per channel, named "
                                      "as the bundle's channels, in physical units)")
    rp.add_argument("--bundle", required=True, help="bundle .npz")
    rp.add_argument("-o", "--out", default=None, help="estimates CSV (stdout when not given)")
    rp.add_argument("--run", type=int, default=None, metavar="K",
                    help="a recording directory holding several runs (one per daemon start): "
                         "replay only the K-th, oldest = 1 (default: all, one after another, "
                         "the estimator reset between runs)")
    resolve(LAZY["monitor.arguments"])(command(
        "monitor", "live terminal view of a device over MQTT (edge.monitor)",
        codes=MONITOR_CODES))
    resolve(LAZY["dashboard.arguments"])(command(
        "dashboard", "serve the live browser dashboard (edge.dashboard)",
        codes=DASHBOARD_CODES))
    resolve(LAZY["historian.arguments"])(command(
        "historian", "store a fleet's estimates and health in a database (edge.historian)",
        codes=resolve(LAZY["historian.codes"])))
    return p


def _logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main(argv: list[str] | None = None) -> int:
    single_threaded_math()  # first: the parser's imports (edge.monitor) load NumPy
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except BrokenPipeError:  # e.g. `vsense-edge replay ... | head`: the reader left, not an error
        # Python docs ("Note on SIGPIPE"): point stdout at devnull so the exit flush is quiet
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def apply_overrides(cfg, args) -> None:
    """Command-line overrides of a loaded daemon config (``run``); ValueError names the option."""
    if args.duration is not None:
        cfg["simulate"]["duration_s"] = args.duration
    if args.clock is not None:
        cfg["simulate"]["clock"] = args.clock
    if args.broker is not None:
        parse_broker = resolve(LAZY["monitor.parse_broker"])
        cfg["mqtt"]["host"], cfg["mqtt"]["port"] = parse_broker(args.broker,
                                                                cfg["mqtt"]["port"])


def _dispatch(args) -> int:
    if args.command == "config-reference":
        sys.stdout.write(reference_markdown())
        return 0
    if args.command == "check-config":
        try:
            cfg = load_config(args.path)
            if args.bundle:
                preflight = resolve(LAZY["check-config.preflight"])
                startup_error = resolve(LAZY["check-config.error"])
                try:
                    preflight(cfg, simulate=args.simulate)
                except startup_error as e:
                    print(f"error: {e}", file=sys.stderr)
                    return e.code
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_CONFIG
        names = ", ".join(str(c["name"]) for c in cfg.channels)
        head = (f"{args.path}: ok ({len(cfg.channels)} channels: {names}; device "
                f"{cfg['device']['id']})")
        if args.bundle:
            print(head + "; every start-up check of `run` short of opening the hardware passed")
        else:  # say what a file alone cannot tell
            print(head + f"; the file's keys and values only. Not checked without --bundle: "
                  f"the channel names and order against the bundle "
                  f"{cfg.resolve(cfg['bundle']['path'])}, the ADC's row rate against the "
                  f"bundle's rate, the bundle's hash and signature, inverse maps, MQTT "
                  f"password and TLS files")
        return 0
    if args.command in ("monitor", "dashboard", "historian"):
        return resolve(LAZY[args.command])(args)
    if args.command == "replay":
        replay = resolve(LAZY["replay"])
        return int(replay(args.recording, args.bundle, args.out, args.run) or 0)
    # run
    try:
        cfg = load_config(args.config)
        apply_overrides(cfg, args)
    except (ConfigError, ValueError) as e:  # stderr reaches the journal under systemd too
        print(f"vsense-edge run: error: {e}", file=sys.stderr)
        return EXIT_CONFIG
    _logging(args.log_level or cfg["device"]["log_level"])
    return resolve(LAZY["run"])(cfg, simulate=args.simulate, require_broker=args.require_broker)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
