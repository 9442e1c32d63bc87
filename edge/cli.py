"""``vsense-edge``: the command line of the device.

    vsense-edge run [-c PATH] [--simulate] [--duration S] [--clock real|virtual]
                    [--require-broker]
    vsense-edge check-config [PATH] [--bundle] [--simulate]
    vsense-edge config-reference
    vsense-edge replay RECORDING --bundle B [-o OUT.csv]
    vsense-edge monitor --broker HOST[:PORT] --device ID [--csv FILE] [--once]
    vsense-edge monitor --broker HOST[:PORT] --fleet [--once]
    vsense-edge dashboard [-c PATH] [--url ws://HOST:9001] [--port 8090] [--export DIR]

Exit codes: 0 clean, 1 internal error, 2 bad config, 3 bad bundle, 4 hardware error,
5 recording directory unusable, 6 bad replay input, 7 broker not reachable with
``--require-broker`` (``edge.daemon.loop.EXIT_CODES``).
"""

from __future__ import annotations

import argparse
import logging
import sys

from edge.daemon.config import (
    DEFAULT_PATH,
    ConfigError,
    load_config,
    reference_markdown,
)
from edge.daemon.loop import EXIT_CODES, EXIT_CONFIG


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vsense-edge", description=__doc__.split("\n")[0],
                                epilog="exit codes: " + "; ".join(
                                    f"{k} {v}" for k, v in EXIT_CODES.items()),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the daemon (hardware, or --simulate)")
    r.add_argument("-c", "--config", default=str(DEFAULT_PATH),
                   help=f"TOML config (default {DEFAULT_PATH})")
    r.add_argument("--simulate", action="store_true",
                   help="simulated ADS1256 driven by [simulate] instead of the hardware")
    r.add_argument("--duration", type=float, default=None,
                   help="override [simulate] duration_s (seconds of simulated time)")
    r.add_argument("--clock", choices=("real", "virtual"), default=None,
                   help="override [simulate] clock")
    r.add_argument("--log-level", default=None, help="override [device] log_level")
    r.add_argument("--require-broker", action="store_true",
                   help="exit with code 7 unless the MQTT broker accepts the connection "
                        "within [mqtt] connect_timeout_s (also [mqtt] require_broker)")
    c = sub.add_parser("check-config", help="validate a config file and exit (0 ok, 2 bad)")
    c.add_argument("path", nargs="?", default=str(DEFAULT_PATH))
    c.add_argument("--bundle", action="store_true",
                   help="also run every start-up check of `run` short of opening the "
                        "hardware: bundle, channels, signature, ADC row rate, inverse maps, "
                        "MQTT password and TLS files")
    c.add_argument("--simulate", action="store_true",
                   help="check for `run --simulate` (the [simulate] level decides the rate "
                        "check)")
    sub.add_parser("config-reference", help="print the Markdown config reference")
    rp = sub.add_parser("replay", help="run the estimator over a recording (edge.replay)")
    rp.add_argument("recording", help="recording directory or raw-*.vsr file")
    rp.add_argument("--bundle", required=True, help="bundle .npz")
    rp.add_argument("-o", "--out", default=None, help="estimates CSV (default stdout)")
    from edge.monitor import add_arguments as monitor_arguments

    monitor_arguments(sub.add_parser("monitor", help="live terminal view of a device over MQTT "
                                                     "(edge.monitor)"))
    from edge.dashboard import add_arguments as dashboard_arguments

    dashboard_arguments(sub.add_parser("dashboard", help="serve the live browser dashboard "
                                                         "(edge.dashboard)"))
    return p


def _logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "config-reference":
        sys.stdout.write(reference_markdown())
        return 0
    if args.command == "check-config":
        try:
            cfg = load_config(args.path)
            if args.bundle:
                from edge.daemon.app import StartupError, preflight

                try:
                    preflight(cfg, simulate=args.simulate)
                except StartupError as e:
                    print(f"error: {e}", file=sys.stderr)
                    return e.code
        except ConfigError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_CONFIG
        print(f"{args.path}: ok ({len(cfg.channels)} channels, device {cfg['device']['id']})")
        return 0
    if args.command == "monitor":
        from edge.monitor import run_monitor

        return run_monitor(args)
    if args.command == "dashboard":
        from edge.dashboard import run_dashboard

        return run_dashboard(args)
    if args.command == "replay":
        from edge.replay import replay

        return int(replay(args.recording, args.bundle, args.out) or 0)
    # run
    try:
        cfg = load_config(args.config)
    except ConfigError as e:
        _logging("info")
        logging.getLogger("vsense").error("%s", e)
        print(f"error: {e}", file=sys.stderr)
        return EXIT_CONFIG
    if args.duration is not None:
        cfg["simulate"]["duration_s"] = args.duration
    if args.clock is not None:
        cfg["simulate"]["clock"] = args.clock
    _logging(args.log_level or cfg["device"]["log_level"])
    from edge.daemon.app import run_daemon

    return run_daemon(cfg, simulate=args.simulate, require_broker=args.require_broker)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
