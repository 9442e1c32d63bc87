"""Historian throughput: rows/s, CPU and memory of one ``vsense-edge historian`` into SQLite and
into PostgreSQL, and of two instances sharing the subscription, side by side in one run.

    .venv-test/bin/python benchmarks/historian.py [--devices 10] [--seconds 20] [--batch 50]

For each case: a private Mosquitto (loopback, free port), a fresh database (SQLite file; a
throwaway PostgreSQL cluster from Debian's package with fsync on, tests/pgserver.py), the
historian process(es) started once to create their persistent sessions and stopped; then
``devices`` simulated devices publish ``seconds`` of 1 kHz estimates (messages of ``batch``
rows, the daemon's encoder, JSON and binary alternating: tests/historian_fleet.py) into the
broker, which queues them for the sessions; then the historians start again and drain the
backlog. Measured from the first stored row to the last: rows/s, the historians' CPU
(``/proc/<pid>/stat``, % of one core) and peak RSS (``VmHWM``); then, for one instance, how fast
the per-second aggregates of all the stored rows are recomputed (edge.historian.rollup, which
the historian runs every 5 s on the seconds it touched). The publisher does not compete
for the CPU while the historians drain. The machine is shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from historian_fleet import Fleet, count, query, wait_for  # noqa: E402
from pgserver import PgServer, pg_bindir  # noqa: E402


RECEIVE_MAX = 500  # --receive-max


def cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_broker(tmp: Path) -> tuple[subprocess.Popen, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = tmp / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                    "max_queued_messages 1000000\nmax_inflight_messages 0\n")
    p = subprocess.Popen(["/usr/sbin/mosquitto", "-c", str(conf)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    wait_for(lambda: _listens(port), 10, "mosquitto")
    return p, port


def _listens(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def historians(url: str, port: int, base: str, n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-m", "edge.cli", "historian", "--db", url,
                              "--broker", f"127.0.0.1:{port}", "--base", base, "--client-id",
                              f"{base}-{i}", "--log-level", "warning",
                              "--status-interval", "0.2", "--receive-max", str(RECEIVE_MAX)],
                             cwd=ROOT, stdout=subprocess.DEVNULL)
            for i in range(n)]


def wait_subscribed(port: int, topics: list[str]) -> None:
    """Until every historian has published a status while connected (it has subscribed)."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    seen: set[str] = set()
    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="bench-watch")
    c.on_connect = lambda cl, *a: cl.subscribe([(t, 0) for t in topics])
    c.on_message = lambda cl, u, m: seen.add(m.topic) if b'"mqtt":true' in m.payload else None
    c.connect("127.0.0.1", port)
    c.loop_start()
    try:
        wait_for(lambda: seen >= set(topics), 60, "the historians' subscriptions")
    finally:
        c.disconnect()
        c.loop_stop()


def stop(procs) -> None:
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(60)


def case(name: str, url: str, port: int, n: int, args) -> dict:
    base = f"bench{abs(hash((name, n))) % 10**6}"
    procs = historians(url, port, base, n)  # create the sessions (and the tables)
    wait_subscribed(port, [f"{base}/historian/{base}-{i}/status" for i in range(n)])
    stop(procs)
    fleet = Fleet("127.0.0.1", port, base, args.devices, rows=args.batch, seed=1,
                  client_id=base + "-fleet")
    msgs = args.seconds * 1000 // args.batch
    fleet.publish(msgs, health=False)
    fleet.close()
    total = len(fleet.sent)
    procs = historians(url, port, base, n)
    first = wait_for(lambda: count(url) > 0 and count(url), 120, "the first rows", poll=0.01)
    t0, c0 = time.monotonic(), sum(cpu_s(p.pid) for p in procs)
    wait_for(lambda: count(url) >= total, 600, "every row", poll=0.05)
    dt = time.monotonic() - t0
    cpu = sum(cpu_s(p.pid) for p in procs) - c0
    rss = max(peak_rss_mb(p.pid) for p in procs)
    stop(procs)
    got = count(url)
    res = {"case": name, "instances": n, "rows": total, "stored": got,
           "rows_per_s": (total - first) / dt, "cpu_percent": 100 * cpu / dt,
           "rows_per_cpu_s": (total - first) / cpu if cpu else float("nan"),
           "peak_rss_mb": rss}
    print(f"{name:<11} x{n}  {res['rows_per_s']:>9,.0f} rows/s  CPU {res['cpu_percent']:5.0f} % "
          f"({res['rows_per_cpu_s']:>8,.0f} rows per CPU-s)  peak RSS {rss:5.0f} MB  "
          f"stored {got}/{total}", flush=True)
    if n == 1:
        res["rollup_rows_per_s"] = rollup_speed(name, url, total)
    return res


def rollup_speed(name: str, url: str, total: int) -> float:
    """Recompute the per-second aggregates of every stored second at once (in this process,
    as the historian does every 5 s for the seconds it touched): raw rows per second."""
    from edge.historian.rollup import Rollup
    from edge.historian.store import open_store

    store = open_store(url)
    store.connect()
    sec = "CAST(t AS INTEGER)" if name == "sqlite" else "floor(extract(epoch FROM t))::bigint"
    r = Rollup(late_s=0.0)
    r.dirty = {(d, int(s)) for d, s in query(url, f"SELECT DISTINCT device, {sec} "
                                                  "FROM vsense_estimates")}
    t0 = time.perf_counter()
    r.run(store)
    dt = time.perf_counter() - t0
    store.close()
    print(f"{'':<15}per-second aggregates of all {total:,} rows ({len(r.dirty) or '':}"
          f"{r.stats['seconds_aggregated']} device-seconds): {dt:.2f} s, "
          f"{total / dt:,.0f} rows/s", flush=True)
    return total / dt


def summary(res: list[dict], devices: int) -> None:
    """One line per database: one instance, two, their ratio; and what a fleet of
    ``devices`` at 1 kHz costs one instance (its CPU per row times the fleet's rows/s)."""
    print(f"{'':<11} {'1 instance':>27} {'2 instances':>27}  ratio  "
          f"{'CPU at ' + str(devices) + ' x 1 kHz':>18}")
    for name in ("sqlite", "postgresql"):
        one = next((r for r in res if r["case"] == name and r["instances"] == 1), None)
        two = next((r for r in res if r["case"] == name and r["instances"] == 2), None)
        if one is None or two is None:
            continue
        cells = [f"{r['rows_per_s']:>9,.0f} rows/s {r['peak_rss_mb']:4.0f} MB RSS"
                 for r in (one, two)]
        live = 100 * devices * 1000 / one["rows_per_cpu_s"]
        print(f"{name:<11} {cells[0]:>27} {cells[1]:>27}  {two['rows_per_s'] / one['rows_per_s']:4.2f}x"
              f"  {live:14.1f} % of a core", flush=True)


def main(argv=None) -> int:
    global RECEIVE_MAX
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", type=int, default=10)
    p.add_argument("--seconds", type=int, default=20, help="seconds of 1 kHz per device")
    p.add_argument("--batch", type=int, default=50, help="rows per message ([mqtt] batch)")
    p.add_argument("--receive-max", type=int, default=500,
                   help="the historians' --receive-max")
    args = p.parse_args(argv)
    RECEIVE_MAX = args.receive_max
    bindir = pg_bindir()
    print(f"{args.devices} devices x {args.seconds} s x 1 kHz = "
          f"{args.devices * args.seconds * 1000:,} rows, {args.batch} rows per message; "
          f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        broker, port = start_broker(tmp)
        pg = PgServer(bindir, fsync=True) if bindir else None
        try:
            if pg:
                pg.start()
            import psycopg

            res = []
            for n in (1, 2):
                res.append(case("sqlite", f"sqlite:{tmp / f'h{n}.db'}", port, n, args))
                if pg:
                    db = f"b{n}"
                    with psycopg.connect(pg.url, autocommit=True) as c:
                        c.execute(f"CREATE DATABASE {db}")
                    res.append(case("postgresql", pg.url.rsplit("/", 1)[0] + "/" + db, port,
                                    n, args))
            summary(res, args.devices)
        finally:
            if pg:
                pg.close()
            broker.terminate()
            broker.wait(10)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
