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
from historian_fleet import Fleet, query, wait_for  # noqa: E402
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


def publish_live(fleet: Fleet, seconds: float, stop: threading.Event, late: list) -> None:
    """One message per device every 50 ms (1 kHz at 50 rows), paced on the clock; paho
    queues what it cannot send while the broker is away. ``late``: [worst lateness of a
    round behind the clock, s] (the devices' rate on a busy machine)."""
    t0 = time.monotonic()
    k = 0
    while not stop.is_set() and k * 0.05 < seconds:
        for i, dev in enumerate(fleet.devices):
            fleet.send(f"{fleet.base}/{dev}/estimates", fleet.payload(i, dev))
        fleet.resend_due()
        k += 1
        behind = time.monotonic() - (t0 + k * 0.05)
        late[0] = max(late[0], behind)
        time.sleep(max(0.0, -behind))


def published(fleet: Fleet) -> dict[str, int]:
    return dict(fleet.next_seq)


class Stored:
    """How far each device's rows are stored without a hole, found cheaply on a long run:
    from where the last look ended, the next stored ``seq`` in order (at most ``chunk`` per
    query, on the key's index) while they follow on. A hole that stays ``stuck_s`` is
    stepped over (and counted at the end as missing)."""

    def __init__(self, url: str, chunk: int = 5000, stuck_s: float = 120.0):
        self.url, self.chunk, self.stuck_s, self.conn = url, chunk, stuck_s, None
        self.base: dict[str, int] = {}  # device: every seq below is stored
        self.stuck: dict[str, float] = {}  # device: since when base has not moved

    def __call__(self, pub: dict[str, int]) -> dict[str, int] | None:
        """Rows of each device stored without a hole (None: the database is away)."""
        import psycopg

        try:
            if self.conn is None:
                self.conn = psycopg.connect(self.url, autocommit=True, connect_timeout=2)
            for d, n in pub.items():
                self._advance(d, n)
        except Exception:  # noqa: BLE001 - the database is away, or the table not there yet
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            return None
        return {d: self.base.get(d, 0) for d in pub}

    def _advance(self, d: str, n: int) -> None:
        base0 = base = self.base.get(d, 0)
        for _ in range(40):
            seq = [r[0] for r in self.conn.execute(
                "SELECT seq FROM vsense_estimates WHERE device = %s AND seq >= %s AND seq < %s"
                " ORDER BY seq LIMIT %s", (d, base, n, self.chunk))]
            k = 0
            while k < len(seq) and seq[k] == base + k:
                k += 1
            base += k
            if k < self.chunk:
                break
        now = time.monotonic()
        if base != base0 or base >= n:
            self.stuck.pop(d, None)
        elif now - self.stuck.setdefault(d, now) > self.stuck_s and k < len(seq):
            base = seq[k]  # a hole that does not fill: step over it
            self.stuck.pop(d, None)
        self.base[d] = base


def sample_lag(fleet: Fleet, url: str, stop: threading.Event, out: list) -> None:
    """Every 0.5 s: (time, rows published so far, rows stored) per device (stored None
    while the database is away)."""
    stored = Stored(url)
    while not stop.wait(0.5):
        pub = published(fleet)
        out.append((time.monotonic(), pub, stored(pub)))


def lag_series(samples: list) -> list[tuple[float, float]]:
    """(time, lag [s]): how long ago the rows now stored without a hole had all been
    published (the worst device)."""
    out = []
    for t, pub_t, got in samples:
        if got is None:
            continue
        worst = 0.0
        for d, n in got.items():
            if n >= pub_t.get(d, 0):  # all stored that was published
                continue
            first = next((tp for tp, pub, _ in samples if pub.get(d, 0) >= n), t)
            worst = max(worst, t - first)
        out.append((t, worst))
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


def check(url: str, pub: dict[str, int]) -> tuple[int, int, int, list]:
    """Counted in the database: (rows, distinct (device, seq), missing, [(device, first,
    last) of each missing range])."""
    n, distinct = query(url, "SELECT count(*), count(DISTINCT (device, seq)) "
                             "FROM vsense_estimates")[0]
    holes = query(url, "SELECT device, seq + 1, nxt - 1 FROM (SELECT device, seq, lead(seq) "
                       "OVER (PARTITION BY device ORDER BY seq) AS nxt FROM (SELECT DISTINCT "
                       "device, seq FROM vsense_estimates) d) g WHERE nxt > seq + 1")
    ends = dict((d, (int(a), int(b))) for d, a, b in query(
        url, "SELECT device, min(seq), max(seq) FROM vsense_estimates GROUP BY device"))
    ranges = [(d, int(a), int(b)) for d, a, b in holes]
    for d, total in pub.items():
        lo, hi = ends.get(d, (total, -1))
        if lo > 0:
            ranges.append((d, 0, min(lo, total) - 1))
        if hi < total - 1:
            ranges.append((d, max(hi + 1, 0), total - 1))
    missing = sum(b - a + 1 for _, a, b in ranges)
    return int(n), int(distinct), missing, sorted(ranges)


def report(url: str, fleet: Fleet, faults: list, samples: list, status: list,
           t0: float, wait_s: float) -> None:
    """Wait for the database to hold what was published, then count and print the lags."""
    pub = published(fleet)
    total = sum(pub.values())
    print(f"{time.monotonic() - t0:6.1f} s  published {total:,} rows; waiting for the "
          "database", flush=True)
    try:  # the sampler's last look: every row stored (or a hole stepped over)
        wait_for(lambda: samples and samples[-1][2] is not None
                 and sum(samples[-1][2].values()) >= total, wait_s, "every row", poll=0.5)
    except AssertionError as e:
        print(f"  {e}")
    done = time.monotonic()
    n, distinct, missing, ranges = check(url, pub)
    print(f"{done - t0:6.1f} s  stored {n:,} rows: missing {missing}, duplicates "
          f"{n - distinct}, unexpected {distinct - (total - missing)}", flush=True)
    for d, a, b in ranges:  # seq / 1000 = seconds into the run
        print(f"  missing {d}: {b - a + 1} rows, seq {a}..{b} ({a / 1000:.1f}-{b / 1000:.1f} s)")
    lags = lag_series(samples)
    for (tf, what), nxt in zip(faults, [f[0] for f in faults[1:]] + [done]):
        lag = max((g for t, g in lags if tf <= t <= nxt), default=float("nan"))
        back = next((t for t, g in lags if t > tf and g <= 0.5), None)
        q = max((s["queue"] for t, s in status if tf <= t <= nxt), default=0)
        caught = ("" if "started" not in what else " caught up (<= 0.5 s) after "
                  + ("-" if back is None else f"{back - tf:.1f} s;"))
        print(f"  after '{what}':{caught} rows stored up to {lag:.1f} s of publishing "
              f"behind; historians' queue up to {q}")
    gaps = {s["client_id"]: s for _, s in status if "gaps" in s}
    for cid, g in sorted(gaps.items()):
        print(f"  historian {cid} reports {g['missing']} estimates missing in {g['gaps']} "
              f"gaps: {g['gap_list']}")


def progress(fleet: Fleet, samples: list, stop: threading.Event, t0: float,
             every: float) -> None:
    while not stop.wait(every):
        lags = lag_series(samples[-1200:])  # the last 10 min: a longer lag shows as 10 min
        print(f"{time.monotonic() - t0:6.1f} s  published {sum(published(fleet).values()):,}"
              f", lag {lags[-1][1] if lags else float('nan'):.1f} s", flush=True)


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
                      client_id="fault-fleet", track=False,
                      resend_unheard_s=None if args.resend < 0 else args.resend)
        samples, faults, late = [], [], [0.0]
        pub = threading.Thread(target=publish_live, args=(fleet, args.seconds, stop, late))
        threading.Thread(target=sample_lag, args=(fleet, url, stop, samples),
                         daemon=True).start()
        t0 = time.monotonic()
        pub.start()
        threading.Thread(target=progress, args=(fleet, samples, stop, t0,
                                                max(10.0, args.seconds / 20)),
                         daemon=True).start()

        def at(t, what, fn):
            time.sleep(max(0.0, t0 + t - time.monotonic()))
            fn()
            faults.append((time.monotonic(), what))
            print(f"{time.monotonic() - t0:6.1f} s  {what}", flush=True)

        s, (dh, dd, db) = args.seconds, args.down
        at(0.20 * s, "historian h1 killed (SIGKILL)", lambda: hs[1].send_signal(signal.SIGKILL))
        at(0.20 * s + dh, "historian h1 started again",
           lambda: hs.__setitem__(1, historian(url, port, base, 1)))
        at(0.45 * s, "database stopped", pg.stop)
        at(0.45 * s + dd, "database started", pg.start)
        at(0.70 * s, "broker stopped", broker.stop)
        at(0.70 * s + db, "broker started", broker.start)
        pub.join()
        rate = sum(published(fleet).values()) / (time.monotonic() - t0) / args.devices
        print(f"devices: {rate:.0f} rows/s each (1000 asked); publishing fell behind the "
              f"clock by up to {late[0]:.2f} s", flush=True)
        # messages published while the broker was away report NO_CONN (paho keeps QoS 1 ones
        # and sends them on the reconnection): the report waits for the database instead
        report(url, fleet, faults, samples, status, t0, args.wait)
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
    p.add_argument("--down", type=float, nargs=3, default=(4.0, 3.7, 2.0),
                   metavar=("HISTORIAN", "DATABASE", "BROKER"),
                   help="how long each fault lasts [s]; they start at 20, 45 and 70 %% of "
                        "the run")
    p.add_argument("--resend", type=float, default=10.0, metavar="S",
                   help="the devices' [mqtt] resend_unheard_s (MQTT v5); -1: MQTT 3.1.1, "
                        "nothing sent again (the loss after a broker restart shows)")
    p.add_argument("--wait", type=float, default=300.0,
                   help="how long the end waits for the database to catch up [s]")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        run(args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
