"""Fleet benchmark: N simulated devices x 1 kHz through one Mosquitto on loopback.

    .venv/bin/python benchmarks/fleet.py [--devices 10,30,100] [--formats json,binary]
        [--batch 50] [--duration 20] [--procs 2] [--quick]

Every device publishes through the daemon's real publisher path
(:class:`edge.daemon.mqtt.Publisher`: batching, bounded queue, paho client,
retained status/meta, last will) at 1,000 samples/s; the estimates come from a precomputed
record (the chain bundle's estimator run once over a seeded response) so that the two cores
of this machine are spent on publishing, brokering and subscribing, not on estimating. A
subscriber in its own process counts every sample of every device (QoS 1), deduplicates by
``seq`` and measures the end-to-end latency of each sample: arrival (``time.time_ns``) minus
the sample's time stamp (``t_ns`` = the wall-clock instant the sample was due), so the batching
delay (up to ``batch`` samples) is included. Reported per run: delivered/expected,
duplicates, latency p50/p99/max per sample, broker CPU (``/proc/<pid>/stat`` over the run),
the CPU of the device processes and of the counting subscriber, publisher drops, and the load
average (the machine is shared).

:class:`Fleet` is also what ``tests/test_dashboard.py`` uses to drive the browser page with
10 devices.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from edge.daemon.config import config_from_dict
from edge.daemon.loop import IO_TICK_S
from edge.daemon.mqtt import CommandRegistry, Publisher

RATE = 1000.0
COLUMNS = [{"name": "F", "unit": "N"}, {"name": "u_mid", "unit": "m"},
           {"name": "a_mid", "unit": "m/s^2"}]


def record(n: int = 5000, seed: int = 7) -> np.ndarray:
    """Precomputed estimates ``(n, 3)``: the 8-DOF chain bundle's estimator (tests/helpers)
    over a seeded random-phase multisine displacement of its free end, 1 kHz."""
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import chain_bundle

    from edge.estimator import Estimator

    rng = np.random.default_rng(seed)
    t = np.arange(n) / RATE
    f = np.array([3.0, 7.0, 13.0, 29.0])
    y = (1e-4 * np.sin(2 * np.pi * f[None, :] * t[:, None] + rng.uniform(0, 2 * np.pi, 4))
         ).sum(1)
    F, Z, _ = Estimator(chain_bundle()).run(y[:, None])
    return np.hstack([F, Z])


def mqtt_cfg(host: str, port: int, fmt: str, batch: int, qos: int = 1,
             base: str = "vsense") -> dict:
    """The ``[mqtt]`` section the daemon would use (validated defaults + these keys)."""
    return config_from_dict({"device": {"id": "x"}, "channels": [{"name": "y0", "pin": "AIN0"}],
                             "mqtt": {
        "host": host, "port": port, "format": fmt, "batch": batch, "qos": qos,
        "base_topic": base, "reconnect_min_s": 0.2, "reconnect_max_s": 2.0}})["mqtt"]


class Fleet:
    """``n`` simulated devices ``<prefix>000..`` publishing ``rec`` at ``rate`` each.

    :meth:`start` connects all (status ``running`` and ``meta`` retained), :meth:`run`
    publishes for ``duration_s`` (or until :attr:`stop_event`), :meth:`stop` flushes and
    publishes the final status (``None``: leave the connection to die -> last will).
    """

    def __init__(self, n, host, port, fmt="json", batch=50, rate=RATE, rec=None,
                 prefix="sim", first=0, qos=1, base="vsense", std=False):
        self.rate = rate
        self.rec = record() if rec is None else rec
        self.ids = [f"{prefix}{i:03d}" for i in range(first, first + n)]
        self.first = first
        cfg = mqtt_cfg(host, port, fmt, batch, qos, base)
        ncol = self.rec.shape[1]
        self.pubs = [Publisher(cfg, d, CommandRegistry(), ncol) for d in self.ids]
        self.meta = {"bundle_id": "chain-fleet", "bundle_hash": "0" * 16, "channels":
                     [{"name": "y0", "unit": "m"}], "forces": COLUMNS[:1],
                     "outputs": COLUMNS[1:], "columns": [c["name"] for c in COLUMNS],
                     "rate": rate, "delay_samples": 0, "delay_s": 0.0, "format": fmt,
                     "batch": batch, "method": "fleet benchmark (precomputed record)"}
        self.sent = np.zeros(n, np.int64)
        self.stop_event = threading.Event()

    def start(self, timeout: float = 20.0) -> None:
        for p, d in zip(self.pubs, self.ids):
            p.set_retained(p.topics.meta, self.meta)
            p.set_retained(p.topics.status, {"state": "running", "t": time.time(),
                                             "device": d, "bundle": "chain-fleet"})
            p.start()
        deadline = time.monotonic() + timeout
        while not all(p.connected for p in self.pubs):
            if time.monotonic() > deadline:
                raise ConnectionError(f"{sum(not p.connected for p in self.pubs)} devices "
                                      f"not connected within {timeout} s")
            time.sleep(0.05)

    def run(self, duration_s: float, tick_s: float = IO_TICK_S) -> dict:
        """Publish ``duration_s`` seconds of samples: as the daemon's I/O thread does once
        per tick, every ``tick_s`` each device hands the rows that came due to its publisher
        and polls it. Device i's samples fall due ``i/n`` of a batch later than device 0's
        and its ticks come at a phase of its own (seeded, uniform over a tick), so the fleet's
        ticks and batches do not all come at the same instant (independent devices)."""
        n, rate = len(self.pubs), self.rate
        total = int(round(duration_s * rate))
        nrec = self.rec.shape[0]
        V = self.rec[np.arange(total) % nrec]
        seq = np.arange(total, dtype=np.int64)
        flags = np.zeros(total, np.uint8)
        batch = self.pubs[0].batch
        offs = np.arange(n) / n * batch / rate
        t0 = time.monotonic()
        unix0 = time.time_ns()
        # t_ns[k] = the wall-clock instant sample k of device i is due
        tns = [unix0 + ((seq / rate + offs[i]) * 1e9).astype(np.int64) for i in range(n)]
        # [s after t0]; the seed differs between device processes (first device)
        next_tick = np.random.default_rng(1000 + self.first).uniform(0.0, tick_s, n)
        left = n
        while left and not self.stop_event.is_set():
            el = time.monotonic() - t0
            for i in np.nonzero(next_tick <= el)[0]:
                p = self.pubs[i]
                due = min(total, int((el - offs[i]) * rate) + 1) if el >= offs[i] else 0
                k = int(self.sent[i])
                if due > k:
                    p.add_estimates(seq[k:due], tns[i][k:due], V[k:due], flags[k:due])
                    self.sent[i] = due
                p.poll()
                next_tick[i] = np.inf if due >= total else next_tick[i] + tick_s
                left -= due >= total
            if left:
                time.sleep(max(0.0, float(next_tick.min()) - (time.monotonic() - t0)))
        return {"expected_per_device": total, "sent": int(self.sent.sum())}

    def stop(self, final_state: str | None = "stopped") -> dict:
        st = {"drops_samples": 0, "published_samples": 0}
        for p, d in zip(self.pubs, self.ids):
            if final_state is None:  # die without DISCONNECT: the broker sends the will
                p._stop = True
                p.client.socket().close() if p.client.socket() else None
                p.client.loop_stop()
            else:
                p.stop(final_status={"state": final_state, "t": time.time(), "device": d})
            st["drops_samples"] += p.stats["drops_samples"]
            st["published_samples"] += p.stats["published_samples"]
        return st


# ------------------------------------------------------------------------ subscriber
def subscribe(host, port, n_dev, total, prefix, idle_s=5.0, out=sys.stdout) -> dict:
    """Count every sample of ``n_dev`` devices (``total`` each) until all arrived or
    ``idle_s`` without a message; returns the statistics (also printed as JSON)."""
    import orjson
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    from edge.daemon.mqtt import BIN_HEADER, BIN_MAGIC

    seen = np.zeros((n_dev, total), bool)
    lat_us = np.empty(n_dev * total + 1000, np.int64)
    msg_lat = []
    st = {"messages": 0, "samples": 0, "duplicates": 0, "bad": 0, "first": None, "last": None}
    idx = {f"{prefix}{i:03d}": i for i in range(n_dev)}
    lock = threading.Lock()
    done = threading.Event()
    ready = threading.Event()

    def on_message(client, userdata, msg):
        now = time.time_ns()
        try:
            dev = idx[msg.topic.split("/")[1]]
            pl = msg.payload
            if pl[:4] == BIN_MAGIC:
                _, _, ncol, n, _, seq0 = BIN_HEADER.unpack_from(pl)
                t = np.frombuffer(pl, "<i8", n, BIN_HEADER.size)
            else:
                d = orjson.loads(pl)
                seq0, n, t = d["seq"], d["n"], np.asarray(d["t_ns"], np.int64)
        except (KeyError, ValueError, IndexError):
            st["bad"] += 1
            return
        if seq0 < 0 or seq0 + n > total or t.shape[0] != n:
            st["bad"] += 1
            return
        with lock:
            s = seen[dev, seq0:seq0 + n]
            fresh = ~s
            s[:] = True
            new = int(fresh.sum())
            dup = n - new
            k = st["samples"]
            if new:
                lat_us[k:k + new] = ((now - t) // 1000)[fresh]
            st["samples"] += new
            st["duplicates"] += dup
            st["messages"] += 1
            msg_lat.append((now - int(t[-1])) // 1000)
            st["first"] = st["first"] or time.monotonic()
            st["last"] = time.monotonic()
            if st["samples"] >= n_dev * total:
                done.set()

    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="fleet-counter")
    c.on_connect = lambda cl, u, f, rc, p: cl.subscribe("vsense/+/estimates", qos=1)
    c.on_subscribe = lambda *a: ready.set()
    c.on_message = on_message
    c.max_inflight_messages_set(1000)
    c.connect(host, port, 30)
    c.loop_start()
    ready.wait(10)
    print("ready", file=out, flush=True)
    while not done.wait(0.2):
        with lock:
            last = st["last"]
        if last is not None and time.monotonic() - last > idle_s:
            break
    c.disconnect()
    c.loop_stop()
    lat = lat_us[:st["samples"]] / 1e3
    ml = np.asarray(msg_lat) / 1e3
    res = {"expected": n_dev * total, "delivered": st["samples"],
           "duplicates": st["duplicates"], "bad": st["bad"], "messages": st["messages"],
           "lost": n_dev * total - st["samples"], "cpu_s": time.process_time(),
           "lat_ms": {q: float(np.percentile(lat, p)) if lat.size else None
                      for q, p in (("p50", 50), ("p99", 99), ("max", 100))},
           "msg_lat_ms": {q: float(np.percentile(ml, p)) if ml.size else None
                          for q, p in (("p50", 50), ("p99", 99), ("max", 100))}}
    print(json.dumps(res), file=out, flush=True)
    return res


# ------------------------------------------------------------------------ orchestration
def cpu_s(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def start_broker(tmp: Path) -> tuple[subprocess.Popen, int]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    conf = tmp / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                    "max_queued_messages 100000\nmax_inflight_messages 1000\n")
    p = subprocess.Popen(["/usr/sbin/mosquitto", "-c", str(conf)], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return p, port
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise RuntimeError("mosquitto did not start")


def _result(proc, what: str, err: Path, timeout: float | None = None) -> dict:
    """The JSON result line a helper process printed last; RuntimeError naming the process,
    its exit code and the end of its stderr when it crashed or printed none."""
    out = proc.communicate(timeout=timeout)[0] or ""
    lines = out.strip().splitlines()
    try:
        if proc.returncode == 0 and lines:
            return json.loads(lines[-1])
    except ValueError:
        pass
    tail = err.read_text(errors="replace")[-1500:] if err.exists() else ""
    raise RuntimeError(f"{what} exited with code {proc.returncode} without a result"
                       + (f"; its stderr ends with:\n{tail}" if tail.strip() else ""))


def run_one(n_dev, fmt, batch, duration, procs, tick=IO_TICK_S) -> dict:
    with tempfile.TemporaryDirectory() as td:
        broker, port = start_broker(Path(td))
        try:
            total = int(round(duration * RATE))
            py = [sys.executable, __file__]
            sub_err = Path(td) / "sub.err"
            sub = subprocess.Popen(py + ["--role", "sub", "--port", str(port), "--n", str(n_dev),
                                         "--duration", str(duration)],
                                   stdout=subprocess.PIPE, stderr=open(sub_err, "wb"), text=True)
            procs_started = [sub]
            if sub.stdout.readline().strip() != "ready":
                _result(sub, "the counting subscriber", sub_err, 30)
            per = [len(a) for a in np.array_split(np.arange(n_dev), procs) if len(a)]
            firsts = np.cumsum([0] + per[:-1])
            b0, l0 = cpu_s(broker.pid), os.getloadavg()[0]
            t0 = time.monotonic()
            errs = [Path(td) / f"dev{i}.err" for i in range(len(per))]
            devs = [subprocess.Popen(py + ["--role", "dev", "--port", str(port), "--n", str(k),
                                           "--first", str(f), "--fmt", fmt, "--batch",
                                           str(batch), "--duration", str(duration),
                                           "--tick", str(tick)],
                                     stdout=subprocess.PIPE, stderr=open(e, "wb"), text=True)
                    for k, f, e in zip(per, firsts, errs)]
            procs_started += devs
            dres = [_result(d, f"device process {i} (devices {f}..{f + k - 1})", e)
                    for i, (d, k, f, e) in enumerate(zip(devs, per, firsts, errs))]
            wall = time.monotonic() - t0
            bcpu = cpu_s(broker.pid) - b0
            res = _result(sub, "the counting subscriber", sub_err, 120)
            res.update(devices=n_dev, format=fmt, batch=batch, duration_s=duration,
                       broker_cpu=bcpu / wall, wall_s=wall, load_before=l0,
                       load_after=os.getloadavg()[0],
                       dev_cpu=sum(d["cpu_s"] for d in dres) / wall,
                       sub_cpu=res["cpu_s"] / wall,
                       drops=sum(d["drops_samples"] for d in dres))
            return res
        finally:
            for p in locals().get("procs_started", []):
                if p.poll() is None:
                    p.kill()
                    p.wait(5)
            broker.terminate()
            broker.wait(5)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", default="10,30,100", metavar="N[,N...]",
                    help="fleet sizes, one run each (default %(default)s)")
    ap.add_argument("--formats", default="json,binary", metavar="FMT[,FMT...]",
                    help="payload formats of estimates, json and/or binary; one run each "
                         "(default %(default)s)")
    ap.add_argument("--batch", default="50", metavar="B[,B...]",
                    help="samples per estimates message; one run each (default %(default)s)")
    ap.add_argument("--duration", type=float, default=20.0, metavar="S",
                    help="seconds of publishing per run (default %(default)s)")
    ap.add_argument("--procs", type=int, default=2,
                    help="processes the devices are spread over (default %(default)s)")
    ap.add_argument("--tick", type=float, default=IO_TICK_S, metavar="S",
                    help="I/O tick of the emulated daemons (default: the daemon's, "
                         "%(default)s s)")
    ap.add_argument("--quick", action="store_true", help="10 devices, json, 5 s")
    # internal: the helper processes this script starts (not for the command line)
    ap.add_argument("--role", choices=("main", "sub", "dev"), default="main",
                    help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=1883, help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=10, help=argparse.SUPPRESS)
    ap.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--fmt", default="json", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.role == "sub":
        subscribe("127.0.0.1", a.port, a.n, int(round(a.duration * RATE)), "sim")
        return 0
    if a.role == "dev":
        fl = Fleet(a.n, "127.0.0.1", a.port, a.fmt, int(a.batch), first=a.first)
        fl.start()
        c0 = time.process_time()
        fl.run(a.duration, a.tick)
        st = fl.stop()
        st["cpu_s"] = time.process_time() - c0
        print(json.dumps(st), flush=True)
        return 0
    if a.quick:
        a.devices, a.formats, a.duration = "10", "json", 5.0
    print(f"fleet benchmark: {os.cpu_count()} CPUs, load average {os.getloadavg()}, "
          f"{a.duration:g} s per run, {a.procs} device processes, I/O tick {a.tick:g} s",
          flush=True)
    hdr = (f"{'N':>4} {'fmt':>6} {'batch':>5} {'delivered/expected':>20} {'dup':>4} "
           f"{'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} {'newest p99':>10} {'broker':>7} "
           f"{'devices':>8} {'counter':>8} {'drops':>6} {'load':>9}")
    print(hdr, flush=True)
    for n in [int(x) for x in a.devices.split(",")]:
        for fmt in a.formats.split(","):
            for b in [int(x) for x in a.batch.split(",")]:
                try:
                    r = run_one(n, fmt, b, a.duration, min(a.procs, n), a.tick)
                except RuntimeError as e:
                    print(f"fleet benchmark: {n} devices, {fmt}, batch {b}: {e}",
                          file=sys.stderr, flush=True)
                    return 1
                la, ml = r["lat_ms"], r["msg_lat_ms"]
                print(f"{n:>4} {fmt:>6} {b:>5} {r['delivered']:>10}/{r['expected']:<9} "
                      f"{r['duplicates']:>4} {la['p50']:>7.1f} {la['p99']:>7.1f} "
                      f"{la['max']:>7.1f} {ml['p99']:>10.1f} {100 * r['broker_cpu']:>6.1f}% "
                      f"{100 * r['dev_cpu']:>7.1f}% {100 * r['sub_cpu']:>7.1f}% {r['drops']:>6} "
                      f"{r['load_before']:>4.1f}>{r['load_after']:<4.1f}", flush=True)
    print("latency: arrival minus the sample's due time, per sample (includes the batching "
          "delay); 'newest p99': the newest sample of each message; broker and devices: CPU "
          "as a fraction of one core over the run", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
