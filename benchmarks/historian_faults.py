"""A fleet live through two historians while things break: every estimate exactly once?

    .venv-test/bin/python benchmarks/historian_faults.py [--devices 10] [--seconds 40]

``devices`` simulated devices publish 1 kHz estimates live (a 50-row message each per 50 ms,
QoS 1, the daemon's encoder; tests/historian_fleet.py) to a private Mosquitto (persistence on,
so a restart keeps the sessions and their queues) while two ``vsense-edge historian``
processes share the subscription into a throwaway PostgreSQL (fsync on; tests/pgserver.py).
During the run: one historian is killed (SIGKILL) and started again, the database is stopped
and started, the broker is stopped and started. Then the run waits for the database to hold
what was published and counts ``(device, seq)``: missing, duplicates. The historians'
status messages give the lag (age of the oldest uncommitted message) after each fault.
A short version of issue-scale runs (the 20-minute run is not this script).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from historian import _listens  # noqa: E402
from historian_fleet import Fleet, count, query, wait_for  # noqa: E402
from pgserver import PgServer, pg_bindir  # noqa: E402


class Broker:
    def __init__(self, tmp: Path, port: int):
        self.conf = tmp / "mosquitto.conf"
        self.conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n"
                             f"persistence true\npersistence_location {tmp}/\n"
                             "max_queued_messages 1000000\nmax_inflight_messages 0\n"
                             # as root Mosquitto drops to its own user, which cannot write
                             # the persistence file into this temporary folder
                             "user root\n")
        self.port, self.proc = port, None

    def start(self):
        self.proc = subprocess.Popen(["/usr/sbin/mosquitto", "-c", str(self.conf)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: _listens(self.port), 10, "mosquitto")

    def stop(self):
        self.proc.terminate()  # SIGTERM: Mosquitto saves its persistence file
        self.proc.wait(30)


def historian(url: str, port: int, base: str, i: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "edge.cli", "historian", "--db", url,
                             "--broker", f"127.0.0.1:{port}", "--base", base, "--client-id",
                             f"{base}-h{i}", "--status-interval", "0.5", "--log-level",
                             "error"], cwd=ROOT, stdout=subprocess.DEVNULL)


def publish_live(fleet: Fleet, seconds: float, stop: threading.Event, sent: list) -> None:
    """One message per device every 50 ms (1 kHz at 50 rows), paced on the clock; paho
    queues what it cannot send while the broker is away."""
    t0 = time.monotonic()
    k = 0
    while not stop.is_set() and k * 0.05 < seconds:
        for i, dev in enumerate(fleet.devices):
            sent.append(fleet.client.publish(f"{fleet.base}/{dev}/estimates",
                                              fleet.payload(i, dev), qos=1))
        k += 1
        time.sleep(max(0.0, t0 + k * 0.05 - time.monotonic()))


def sample_lag(fleet: Fleet, url: str, stop: threading.Event, out: list) -> None:
    """Every 0.25 s: (time, rows published so far, rows stored) (stored -1 while the
    database is away)."""
    while not stop.wait(0.25):
        out.append((time.monotonic(), len(fleet.sent), count(url)))


def lag_series(samples: list) -> list[tuple[float, float]]:
    """(time, lag [s]): how long ago the rows now stored had all been published."""
    out = []
    for t, _, stored in samples:
        if stored < 0:
            continue
        first = next((tp for tp, pub, _ in samples if pub >= stored), t)
        out.append((t, max(0.0, t - first)))
    return out


def watch_status(port: int, base: str, status: list):
    """A client collecting the historians' status messages as (time, dict)."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    watch = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="fault-watch")
    watch.on_connect = lambda c, *a: c.subscribe(f"{base}/historian/+/status")
    watch.on_message = lambda c, u, m: status.append((time.monotonic(),
                                                      orjson.loads(m.payload)))
    watch.connect("127.0.0.1", port)
    watch.loop_start()
    return watch


def report(url: str, fleet: Fleet, faults: list, samples: list, status: list,
           t0: float) -> None:
    """Wait for the database to hold what was published, then count and print the lags."""
    total = len(fleet.sent)
    print(f"{time.monotonic() - t0:6.1f} s  published {total:,} rows; waiting for the "
          "database", flush=True)
    try:
        wait_for(lambda: count(url) >= total, 60, "every row", poll=0.5)
    except AssertionError as e:
        print(f"  {e}")
    done = time.monotonic()
    rows = query(url, "SELECT device, seq FROM vsense_estimates")
    keys = {(d, int(s)) for d, s in rows}
    missing = sorted(fleet.sent - keys)
    print(f"{done - t0:6.1f} s  stored {len(rows):,} rows: missing {len(missing)}, "
          f"duplicates {len(rows) - len(keys)}, unexpected {len(keys - fleet.sent)}")
    by_dev: dict = {}
    for d, q in missing:  # where: device, seq range (seq / 1000 = seconds into the run)
        by_dev.setdefault(d, []).append(q)
    for d, qs in sorted(by_dev.items()):
        print(f"  missing {d}: {len(qs)} rows, seq {qs[0]}..{qs[-1]} "
              f"({qs[0] / 1000:.1f}-{qs[-1] / 1000:.1f} s)")
    lags = lag_series(samples)
    for (tf, what), nxt in zip(faults, [f[0] for f in faults[1:]] + [done]):
        lag = max((g for t, g in lags if tf <= t <= nxt), default=float("nan"))
        back = next((t for t, g in lags if t > tf and g < 0.5), None)
        q = max((s["queue"] for t, s in status if tf <= t <= nxt), default=0)
        caught = ("" if "started" not in what else " caught up (< 0.5 s) after "
                  + ("-" if back is None else f"{back - tf:.1f} s;"))
        print(f"  after '{what}':{caught} rows stored up to {lag:.1f} s of publishing "
              f"behind; historians' queue up to {q}")


def run(args, tmp: Path) -> None:
    from historian import start_broker  # a free port

    probe, port = start_broker(tmp)
    probe.terminate()
    probe.wait(10)
    broker = Broker(tmp, port)
    broker.start()
    pg = PgServer(pg_bindir(), fsync=True)
    pg.start()
    url, base = pg.url, "fault"
    status: list[tuple[float, dict]] = []
    watch = watch_status(port, base, status)
    hs = [historian(url, port, base, i) for i in range(2)]
    fleet, stop = None, threading.Event()
    try:
        wait_for(lambda: len({s["client_id"] for _, s in status if s["mqtt"]}) == 2, 60,
                 "both historians subscribed")
        fleet = Fleet("127.0.0.1", port, base, args.devices, rows=50, seed=2,
                      client_id="fault-fleet")
        sent, samples, faults = [], [], []
        pub = threading.Thread(target=publish_live, args=(fleet, args.seconds, stop, sent))
        threading.Thread(target=sample_lag, args=(fleet, url, stop, samples),
                         daemon=True).start()
        t0 = time.monotonic()
        pub.start()

        def at(frac, what, fn):
            time.sleep(max(0.0, t0 + frac * args.seconds - time.monotonic()))
            fn()
            faults.append((time.monotonic(), what))
            print(f"{time.monotonic() - t0:6.1f} s  {what}", flush=True)

        at(0.20, "historian h1 killed (SIGKILL)", lambda: hs[1].send_signal(signal.SIGKILL))
        at(0.30, "historian h1 started again",
           lambda: hs.__setitem__(1, historian(url, port, base, 1)))
        at(0.45, "database stopped", pg.stop)
        at(0.55, "database started", pg.start)
        at(0.70, "broker stopped", broker.stop)
        at(0.75, "broker started", broker.start)
        pub.join()
        # messages published while the broker was away report NO_CONN (paho keeps QoS 1 ones
        # and sends them on the reconnection): the report waits for the database instead
        report(url, fleet, faults, samples, status, t0)
    finally:
        stop.set()
        for h in hs:
            if h.poll() is None:
                h.send_signal(signal.SIGTERM)
                h.wait(60)
        if fleet is not None:
            fleet.close()
        watch.loop_stop()
        pg.close()
        broker.stop()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", type=int, default=10)
    p.add_argument("--seconds", type=float, default=40.0)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        run(args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
