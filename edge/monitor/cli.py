"""``vsense-edge monitor``: arguments and the run loop (``--fleet``: :mod:`edge.monitor.fleet`)."""

from __future__ import annotations

import argparse
import sys
import time

from edge.monitor.client import CsvRecorder, DeviceSubscriber, redraw
from edge.monitor.connect import add_broker_arguments, broker_settings, describe_settings
from edge.monitor.fleet import run_fleet
from edge.monitor.render import render
from edge.monitor.view import DeviceView


#: The options of ``vsense-edge monitor`` after the broker's
#: (:func:`edge.monitor.connect.add_broker_arguments`): (flag, type or "flag" for a switch,
#: default, help).
OPTIONS = (
    ("--device", str, None, "device id (default: [device] id of --config)"),
    ("--fleet", "flag", False, "every device under the topic root, one line each "
                               "(edge.monitor.fleet)"),
    ("--stale", float, 15.0, "--fleet: mark a device stale after S s of silence "
                             "(default %(default)s)"),
    ("--csv", str, None, "record received estimates to this CSV"),
    ("--once", "flag", False, "print one view when meta and estimates are in, then exit"),
    ("--duration", float, None, "exit after S seconds"),
    ("--timeout", float, 10.0, "--once: longest wait for data [s] (default %(default)s)"),
    ("--interval", float, 0.5, "redraw period [s] (default %(default)s)"),
    ("--no-clear", "flag", False, "do not clear the screen between views (also when not a "
                                  "terminal)"),
)


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the broker options and :data:`OPTIONS` to ``p`` (``vsense-edge monitor`` and
    ``python -m edge.monitor``)."""
    add_broker_arguments(p)
    for flag, kind, default, text in OPTIONS:
        if kind == "flag":
            p.add_argument(flag, action="store_true", help=text)
        else:
            p.add_argument(flag, type=kind, default=default, help=text)
    return p


def run_monitor(args, out=None) -> int:
    out = out or sys.stdout
    try:
        settings = broker_settings(args)
    except ValueError as e:  # ConfigError is one
        print(f"vsense-edge monitor: error: {e}", file=sys.stderr)
        return 2
    if getattr(args, "fleet", False):
        return run_fleet(args, out, settings)
    device = args.device or settings["device"]
    if not device:
        print("vsense-edge monitor: error: --device ID (or --config FILE) or --fleet is "
              "required", file=sys.stderr)
        return 2
    if args.interval <= 0 or args.timeout <= 0 or (args.duration is not None
                                                    and args.duration < 0):
        print("vsense-edge monitor: error: --interval, --timeout, --duration must be > 0",
              file=sys.stderr)
        return 2
    view = DeviceView()
    rec = None
    if args.csv:
        try:
            rec = CsvRecorder(args.csv, view)
        except ValueError as e:
            print(f"vsense-edge monitor: error: {e}", file=sys.stderr)
            return 2
        view.listeners.append(rec)
    sub = DeviceSubscriber(settings["host"], settings["port"], device,
                           settings["base_topic"], view, settings=settings)
    try:
        sub.start(timeout=min(args.timeout, 10.0))
    except ConnectionError as e:
        print(f"vsense-edge monitor: error: {e}", file=sys.stderr)
        if rec:
            rec.close()
        return 2
    clear = not args.no_clear and not args.once and out.isatty()
    addr = describe_settings(settings)
    t0 = time.monotonic()
    code = 0
    try:
        if args.once:
            deadline = t0 + args.timeout
            while time.monotonic() < deadline:
                if view.meta is not None and view.n_samples > 0:
                    break
                time.sleep(0.05)
            ok = view.meta is not None and view.n_samples > 0
            # a little longer for a health message and a second batch (measured rate)
            extra = time.monotonic() + min(2.0, max(0.0, deadline - time.monotonic()))
            while ok and time.monotonic() < extra and (view.health is None
                                                       or view.measured_rate() is None):
                time.sleep(0.05)
            out.write(render(view, device, addr, connected=sub.connected,
                             csv_path=args.csv) + "\n")
            code = 0 if ok else 1
            if not ok:
                who = (f"user {settings['username']}" if settings["username"]
                       else "an anonymous client")
                print(f"vsense-edge monitor: no estimates from {device} within "
                      f"{args.timeout:g} s" + ("" if view.n_messages else
                                               f"; nothing arrived on {sub.prefix}# (the "
                                               "device is not running, --device or --base "
                                               "is wrong, or the broker's access list does "
                                               f"not let {who} read it)"), file=sys.stderr)
        else:
            redraw(out, lambda: render(view, device, addr, connected=sub.connected,
                                       csv_path=args.csv), clear, args.interval, args.duration)
    except KeyboardInterrupt:
        pass
    finally:
        sub.stop()
        if rec:
            rec.close()
    return code


def main(argv=None) -> int:
    p = add_arguments(argparse.ArgumentParser(prog="vsense-edge monitor",
                                              description=__doc__.split("\n")[0]))
    return run_monitor(p.parse_args(argv))
