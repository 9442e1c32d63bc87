"""Cross-machine checks of tests/arm64.sh (not a pytest module): x86-64 against arm64.

    python tests/arm64_compare.py collect --port P --devices x86,arm64 --out DIR [--timeout S]
    python tests/arm64_compare.py csv REFERENCE.csv OTHER.csv [--tol 1e-7]
    python tests/arm64_compare.py daemon DIR --devices x86,arm64 [--tol 1e-7]

Only invariants are compared: estimates (forces and outputs in physical units), never modal
arrays whose eigenvector signs may flip between BLAS builds. The agreement figure is
``max |other - reference| / RMS(reference)`` over samples, taken per column, worst column
reported; it must be below ``--tol`` (1e-7 of the signal RMS, issue 14).

``collect`` subscribes to ``vsense/<device>/estimates`` and ``.../status`` on the broker at
127.0.0.1:P, writes DIR/ready once subscribed, and DIR/<device>.npz (seq, values, flags) when
the device publishes the retained status ``stopped``; it exits when every device has stopped,
or with status 1 naming the devices still running after ``--timeout`` seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np


def agreement(ref: np.ndarray, other: np.ndarray) -> tuple[float, int]:
    """Worst column of ``max|other - ref| / RMS(ref)`` (finite rows of both) and its index."""
    ok = np.isfinite(ref).all(axis=1) & np.isfinite(other).all(axis=1)
    d = np.abs(other[ok] - ref[ok]).max(axis=0)
    rms = np.sqrt(np.mean(ref[ok] ** 2, axis=0))
    rel = d / np.where(rms > 0, rms, 1.0)
    j = int(np.argmax(rel))
    return float(rel[j]), j


def cmd_collect(a) -> int:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    from edge.daemon.mqtt import decode_estimates

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    devices = a.devices.split(",")
    chunks = {d: [] for d in devices}
    done = {d: False for d in devices}
    cond = threading.Condition()
    subscribed = threading.Event()

    def on_connect(c, u, flags, rc, props):
        c.subscribe([(f"vsense/{d}/{t}", 1) for d in devices for t in ("estimates", "status")])

    def on_subscribe(c, u, mid, rcs, props):
        subscribed.set()

    def on_message(c, u, msg):
        dev, kind = msg.topic.split("/")[1:3]
        if dev not in chunks:
            return
        with cond:
            if kind == "estimates":
                chunks[dev].append(decode_estimates(msg.payload))
            elif json.loads(msg.payload).get("state") == "stopped" and not msg.retain:
                # a retained "stopped" is from an earlier run; the live one ends this run
                done[dev] = True
                cond.notify_all()

    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"arm64-collect-{time.time_ns()}")
    c.on_connect, c.on_subscribe, c.on_message = on_connect, on_subscribe, on_message
    c.connect("127.0.0.1", a.port, 30)
    c.loop_start()
    if not subscribed.wait(30):
        print("collect: no SUBACK from the broker within 30 s", file=sys.stderr)
        return 1
    (out / "ready").write_text("ready\n")
    deadline = time.monotonic() + a.timeout
    with cond:
        while not all(done.values()):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            cond.wait(left)
        for d in devices:
            if done[d]:
                cs = chunks[d]
                np.savez(out / f"{d}.npz",
                         seq=np.concatenate([x["seq"] for x in cs]) if cs else np.zeros(0, int),
                         v=np.concatenate([x["v"] for x in cs]) if cs else np.zeros((0, 0)),
                         flags=np.concatenate([x["flags"] for x in cs]) if cs else np.zeros(0))
    c.loop_stop()
    c.disconnect()
    missing = [d for d in devices if not done[d]]
    if missing:
        print(f"collect: no 'stopped' status from {missing} within {a.timeout} s",
              file=sys.stderr)
        return 1
    return 0


def cmd_csv(a) -> int:
    from edge.csvio import read_table

    t0, ref, names0 = read_table(a.reference)
    t1, oth, names1 = read_table(a.other)
    if names0 != names1 or ref.shape != oth.shape or not np.array_equal(t0, t1):
        print(f"replay: {a.other} does not match {a.reference} in columns/rows/time "
              f"({names1} {oth.shape} vs {names0} {ref.shape})", file=sys.stderr)
        return 1
    rel, j = agreement(ref, oth)
    ok = rel <= a.tol
    print(f"replay agreement: {rel:.2e} of the signal RMS (worst column {names0[j]!r}, "
          f"{ref.shape[0]} rows x {ref.shape[1]} columns; tolerance {a.tol:g}) "
          f"{'OK' if ok else 'FAIL'}")
    return 0 if ok else 1


def cmd_daemon(a) -> int:
    ref_name, oth_name = a.devices.split(",")
    ref = np.load(Path(a.dir) / f"{ref_name}.npz")
    oth = np.load(Path(a.dir) / f"{oth_name}.npz")
    n_ref, n_oth = len(ref["seq"]), len(oth["seq"])
    common, i, k = np.intersect1d(ref["seq"], oth["seq"], return_indices=True)
    complete = (n_ref == n_oth == len(common) and len(np.unique(ref["seq"])) == n_ref
                and len(common) > 0 and common[-1] - common[0] + 1 == len(common))
    rel, j = agreement(ref["v"][i], oth["v"][k]) if len(common) else (np.inf, 0)
    flags_equal = np.array_equal(ref["flags"][i], oth["flags"][k])
    ok = complete and flags_equal and rel <= a.tol
    print(f"daemon: {oth_name} published {n_oth} estimates, {ref_name} {n_ref}; "
          f"{len(common)} sequence numbers in common (contiguous, no duplicate: {complete}); "
          f"flags equal: {flags_equal}; agreement {rel:.2e} of the signal RMS (worst column "
          f"{j}; tolerance {a.tol:g}) {'OK' if ok else 'FAIL'}")
    return 0 if ok else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--devices", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--timeout", type=float, default=600.0)
    s = sub.add_parser("csv")
    s.add_argument("reference")
    s.add_argument("other")
    s.add_argument("--tol", type=float, default=1e-7)
    d = sub.add_parser("daemon")
    d.add_argument("dir")
    d.add_argument("--devices", required=True)
    d.add_argument("--tol", type=float, default=1e-7)
    a = p.parse_args(argv)
    return {"collect": cmd_collect, "csv": cmd_csv, "daemon": cmd_daemon}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
