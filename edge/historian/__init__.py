"""``vsense-edge historian``: a fleet's estimates and health from MQTT into a database.

    vsense-edge historian --db sqlite:/var/lib/vsense/history.db [--broker HOST[:PORT]]
    vsense-edge historian --db postgresql://vsense@dbhost/vsense --group hist --client-id h1

The pieces: :mod:`edge.historian.messages` (topics and payloads to rows),
:mod:`edge.historian.store` (the tables, SQLite), :mod:`edge.historian.postgres` (PostgreSQL
with psycopg 3), :mod:`edge.historian.ingest` (MQTT v5, the writer, acknowledgements, status),
:mod:`edge.historian.rollup` (per-second aggregates, retention of the raw rows).
docs/historian.md describes how to run it and the tables.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from edge.daemon.config import ConfigError
from edge.historian.gaps import Gaps
from edge.historian.ingest import Historian
from edge.historian.rollup import Rollup
from edge.historian.store import open_store
from edge.monitor.connect import add_broker_arguments, broker_settings

#: exit codes of ``vsense-edge historian``
HISTORIAN_CODES = {0: "stopped (SIGTERM, Ctrl-C or --duration)",
                   2: "bad arguments, database URL or config, broker not reachable, or the "
                      "broker refused the login or the subscription (the message says why)"}


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--db", required=True, metavar="URL",
                   help="database: sqlite:PATH (or PATH.db; the embedded default, no server) "
                        "or postgresql://USER@HOST:PORT/DBNAME (needs the historian extra; "
                        "password from PGPASSWORD or ~/.pgpass)")
    add_broker_arguments(p)
    p.add_argument("--group", default="vsense-historian", metavar="NAME",
                   help="shared-subscription group ($share/NAME/...): historians with the "
                        "same group split the fleet's messages")
    p.add_argument("--no-share", action="store_true",
                   help="plain subscriptions instead of a shared one: for a single historian "
                        "(Mosquitto restores plain subscriptions after its restart, shared "
                        "ones not)")
    p.add_argument("--client-id", default=None, metavar="ID",
                   help="MQTT client id, the name of the persistent session: give each "
                        "instance its own, and the same one again after a restart "
                        "(default: vsense-historian-<host name>)")
    p.add_argument("--receive-max", type=int, default=500, metavar="N",
                   help="messages the broker may have in flight unacknowledged to this "
                        "historian: the bound on its buffer while the database is away")
    p.add_argument("--session-expiry", type=float, default=3600.0, metavar="S",
                   help="how long the broker keeps the session (and queues messages) while "
                        "the historian is away [s]")
    p.add_argument("--keep-raw", type=float, default=None, metavar="S",
                   help="delete raw rows older than S seconds (at least 60; default: keep "
                        "them); the per-second aggregates stay")
    p.add_argument("--no-downsample", action="store_true",
                   help="do not write the per-second aggregates (vsense_estimates_1s)")
    p.add_argument("--gap-settle", type=float, default=30.0, metavar="S",
                   help="report a hole in a device's stored sequence numbers (estimates "
                        "missing in the database) once it is still open S seconds after it "
                        "was seen; 0: do not look for holes")
    p.add_argument("--status-interval", type=float, default=10.0, metavar="S",
                   help="period of the status line (logged, and published retained to "
                        "<base>/historian/<client id>/status) [s]")
    p.add_argument("--duration", type=float, default=None, metavar="S",
                   help="stop after S seconds (tests, benchmarks)")
    p.add_argument("--log-level", default="info", help="debug, info, warning or error")
    return p


def run_historian(args) -> int:
    """``vsense-edge historian``: exit code (:data:`HISTORIAN_CODES`)."""
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.INFO),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("vsense.historian")
    try:
        if args.session_expiry < 0 or args.status_interval <= 0 or args.gap_settle < 0:
            raise ValueError("--session-expiry and --gap-settle must be >= 0 and "
                             "--status-interval > 0")
        settings = broker_settings(args)
        store = open_store(args.db)
        rollup = Rollup(enabled=not args.no_downsample, keep_raw_s=args.keep_raw)
        hist = Historian(settings, store, group=args.group, client_id=args.client_id,
                         receive_max=args.receive_max, session_expiry_s=args.session_expiry,
                         status_interval_s=args.status_interval, rollup=rollup,
                         share=not args.no_share,
                         gaps=Gaps(settle_s=args.gap_settle) if args.gap_settle > 0 else None)
    except (ConfigError, ValueError) as e:
        print(f"vsense-edge historian: error: {e}", file=sys.stderr)
        return 2
    try:
        store.connect()  # a bad path or URL stops here; a database that is away is retried
    except ValueError as e:
        print(f"vsense-edge historian: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - the database is away: the writer retries
        log.warning("database %s: %s: %s (retrying)", store.url, type(e).__name__, e)
        store.close()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        hist.start()
    except ConnectionError as e:
        print(f"vsense-edge historian: error: {e}", file=sys.stderr)
        return 2
    log.info("historian %s: %s -> %s, group %s", hist.client_id, ", ".join(hist.topics),
             store.url, hist.group)
    stop.wait(args.duration)
    hist.stop()
    log.info("%s (stopped)", hist.status_line())
    return 0
