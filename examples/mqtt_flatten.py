"""Republish a device's estimates as one flat JSON object per sample (docs/howto-grafana-nodered.md).

    python examples/mqtt_flatten.py --broker localhost:1883 --device cantilever-01

The daemon publishes batches (``vsense/<id>/estimates``: ``{"seq", "n", "t_ns": [...], "v":
[[...], ...], "flags": [...]}``, or the binary layout) and the column names once, retained, on
``vsense/<id>/meta``. Dashboards that map one JSON object to one row (Grafana's MQTT data
source, Node-RED's chart) want ``{"time": <ms>, "seq": k, "F110": .., "d60": .., "flags": 0}``;
this bridge subscribes to both topics and publishes such objects on ``vsense/<id>/flat``
(QoS 0, not retained). Decimate with ``--every N`` for slow dashboards. Stops on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import threading

try:
    from edge.daemon.mqtt import decode_estimates
    from edge.monitor import parse_broker
except ImportError as _exc:  # run by a Python without vsense installed
    sys.exit(f"mqtt_flatten: {_exc}: run it with the Python of an environment vsense is "
             "installed in: `.venv/bin/python examples/mqtt_flatten.py ...` (the demo's "
             "environment: `bash examples/demo.sh` creates it), or `source .venv/bin/activate` "
             "first, or `pip install -e .` in the repository")


def flat_rows(batch: dict, columns: list[str], every: int = 1) -> list[dict]:
    """One dict per sample of a decoded estimates batch (every ``every``-th sequence number);
    NaN becomes None (JSON null)."""
    rows = []
    for k, seq in enumerate(batch["seq"]):
        if seq % every:
            continue
        row = {"time": int(batch["t_ns"][k]) // 1_000_000, "seq": int(seq)}
        for name, x in zip(columns, batch["v"][k]):
            row[name] = None if math.isnan(x) else float(x)
        row["flags"] = int(batch["flags"][k])
        rows.append(row)
    return rows


def run(host: str, port: int, device: str, base: str = "vsense", every: int = 1,
        ready: threading.Event | None = None, stop: threading.Event | None = None) -> None:
    """Bridge until ``stop`` is set (or forever); ``ready`` is set once subscribed."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    prefix = f"{base}/{device}"
    columns: list[str] = []
    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"flatten-{device}")

    def on_connect(client, userdata, flags, rc, props):
        client.subscribe([(f"{prefix}/meta", 1), (f"{prefix}/estimates", 1)])

    def on_subscribe(client, userdata, mid, rcs, props):
        if ready is not None:
            ready.set()

    def on_message(client, userdata, msg):
        if msg.topic.endswith("/meta"):
            if msg.payload:
                columns[:] = json.loads(msg.payload).get("columns", [])
            return
        if not columns:
            return  # the column names come with meta (retained): nothing to label yet
        try:
            rows = flat_rows(decode_estimates(msg.payload), columns, every)
        except (ValueError, KeyError) as exc:
            print(f"mqtt_flatten: {msg.topic}: bad estimates message: {exc}", file=sys.stderr)
            return
        for row in rows:
            client.publish(f"{prefix}/flat", json.dumps(row), qos=0)

    c.on_connect, c.on_subscribe, c.on_message = on_connect, on_subscribe, on_message
    c.connect(host, port)
    c.loop_start()
    try:
        (stop or threading.Event()).wait()
    finally:
        c.disconnect()
        c.loop_stop()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--broker", default="localhost:1883", help="HOST[:PORT] (default: %(default)s)")
    p.add_argument("--device", required=True, help="device id (topic level vsense/<id>)")
    p.add_argument("--base", default="vsense", help="topic root (default: %(default)s)")
    p.add_argument("--every", type=int, default=1,
                   help="publish every N-th sample only (default: %(default)s)")
    a = p.parse_args(argv)
    host, port = parse_broker(a.broker)
    try:
        run(host, port, a.device, a.base, max(1, a.every))
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        print(f"mqtt_flatten: cannot connect to {host}:{port}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
