"""The publisher's cost per message: ``Publisher.send`` of one 50-row JSON ``estimates`` batch
(QoS 1) to a private Mosquitto, MQTT 3.1.1 against v5 (v5 adds the PUBACK reason-code
callback on paho's network thread and the ``mid -> topic`` store on the publishing side).

    python benchmarks/publish_path.py [--messages 4000] [--repeat 5] [--other /tmp/main-tree]

Each run is a fresh interpreter (``PYTHONPATH`` = the tree); variants alternate run by run so
that they see the same machine load. Printed per variant, median over runs: the wall time
spent inside ``send`` per message [us] (the publishing thread's cost) and the process CPU
time per message [us] over the whole run including paho's network thread and the PUBACKs
(from the first ``send`` until every message is acknowledged). ``--other``: a tree without
``[mqtt] protocol`` (e.g. ``git archive <base> | tar -x -C /tmp/main-tree``) as a third
variant, its only protocol being 3.1.1.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from conftest import Broker, _mosquitto_binary, free_port  # noqa: E402

CHILD = r'''
import json, sys, threading, time
import numpy as np
from edge.daemon.config import config_from_dict
from edge.daemon.mqtt import CommandRegistry, Publisher, encode_estimates
port, n, proto = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
m = {"host": "127.0.0.1", "port": port, "queue_messages": 1_000_000}
if proto != "-":
    m["protocol"] = proto
cfg = config_from_dict({"device": {"id": "pb"}, "channels": [{"name": "y0", "pin": "AIN0"}],
                        "mqtt": m})["mqtt"]
pub = Publisher(cfg, "pb", CommandRegistry(), ncol=3)
acked, done = [0], threading.Event()
pub.start()
assert pub.wait_connected(10)
orig = pub.client.on_publish
def on_publish(*a):
    if orig is not None:
        orig(*a)
    acked[0] += 1
    if acked[0] >= n:
        done.set()
pub.client.on_publish = on_publish
payload = encode_estimates(0, np.arange(50, dtype=np.int64), np.zeros((50, 3)),
                           np.zeros(50, np.uint8), "json", None)
inside, c0 = 0, time.process_time_ns()
for i in range(n // 100):
    w = time.perf_counter_ns()
    for _ in range(100):
        pub.send(pub.topics.estimates, payload, nsamp=50)
    inside += time.perf_counter_ns() - w
    while pub.out:  # paho's own queue is full: wait for its network thread
        pub.poll()
        time.sleep(0.0005)
assert done.wait(60), acked[0]
cpu = time.process_time_ns() - c0
pub.stop()
print(json.dumps({"send_us": inside / n / 1e3, "cpu_us": cpu / n / 1e3}))
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--other", default=None)
    a = ap.parse_args()
    variants = [("this 3.1.1", str(ROOT), "3.1.1"), ("this 5", str(ROOT), "5")]
    if a.other:
        variants.append(("other (3.1.1)", a.other, "-"))
    d = Path(tempfile.mkdtemp(prefix="vsense-pubbench-"))
    port = free_port()
    conf = d / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                    "max_queued_messages 100000\nmax_inflight_messages 100\n")
    broker = Broker(_mosquitto_binary(), conf, port, d / "mosquitto.log")
    broker.start()
    res: dict[str, list] = {v[0]: [] for v in variants}
    try:
        for r in range(a.repeat):
            for name, tree, proto in variants:
                env = dict(os.environ, PYTHONPATH=tree)
                out = subprocess.run([sys.executable, "-c", CHILD, str(port), str(a.messages),
                                      proto], env=env, capture_output=True, text=True,
                                     timeout=300, check=True).stdout
                x = json.loads(out.strip().splitlines()[-1])
                res[name].append(x)
                print(f"run {r + 1} {name:14s}: send {x['send_us']:6.2f} us/message, "
                      f"cpu {x['cpu_us']:6.2f} us/message  load {os.getloadavg()[0]:.2f}")
    finally:
        broker.stop()
    for name, xs in res.items():
        s = [x["send_us"] for x in xs]
        c = [x["cpu_us"] for x in xs]
        print(f"{name:14s}: send median {statistics.median(s):.2f} us ({min(s):.2f}-"
              f"{max(s):.2f}), cpu median {statistics.median(c):.2f} us ({min(c):.2f}-"
              f"{max(c):.2f}) per message")


if __name__ == "__main__":
    main()
