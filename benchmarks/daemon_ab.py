"""The daemon of this tree against the daemon of another source tree, interleaved.

    python benchmarks/daemon_ab.py --other /tmp/main-tree [--repeat 3] [--seconds 10]
                                   [--levels signal,adc] [--bundle my_beam.npz]

Each run is a fresh interpreter importing ``edge`` from one tree (``PYTHONPATH``), with the
default configuration (MQTT QoS 1 to one private Mosquitto, recorder on), 1,000 samples/s,
signal and adc level, a precomputed source; the trees alternate run by run so both see the
same machine load. Printed per run: CPU of the process in percent of one core (from 1 s
after the first sample), conversions missed (adc), samples lost, estimates undelivered,
resident memory at the end, latency p99 as health reports it; at the end, per level, the
median and range of each tree and of the paired differences (this - other, run by run). Get
another tree with e.g.
``git archive main | tar -x -C /tmp/main-tree``. ``--bundle``: a built bundle instead of the
Tikhonov chain bundle of ``benchmarks/daemon.py`` (e.g. the Kalman smoother that
``vsense-offline build examples/my_beam.toml`` ships), its channels read as in
``examples/my_beam_edge.toml`` (500 V per unit, 2.5 V offset), the simulated source its
own reduced model under its load model.
"""
import argparse, json, os, subprocess, sys, tempfile, statistics
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks")); sys.path.insert(0, str(ROOT / "tests"))
import daemon as B  # noqa: E402
CHILD = r'''
import json, os, sys, threading, time, resource, shutil
sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[1] + "/tests")
import numpy as np
from edge.daemon import app
from edge.daemon.config import config_from_dict
class AV:
    def __init__(s, v): s.v, s.k = v, 0
    def volts(s, n):
        i = (s.k + np.arange(n)) % s.v.shape[0]; s.k += n; return s.v[i]
cfg = config_from_dict(json.loads(sys.argv[2])); level = sys.argv[3]
d = app.build_daemon(cfg, simulate=True)
if level == "signal": d.acq.src = AV(d.acq.src.volts(2000))
else:
    inp = d.acq.acq.adc.spi.chip.source; inp.src = AV(inp.src.volts(2000))
d.pub.start(); d.pub.wait_connected(10)
cpu = lambda: sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
m = {}
def st():
    d.first_sample.wait(); time.sleep(1.0); m["t"], m["c"] = time.monotonic(), cpu()
th = threading.Thread(target=st, daemon=True); th.start()
d.run(); t1, c1 = time.monotonic(), cpu(); th.join()
h = d.health()
gaps = int(d.acq.acq.counts["gaps"]) if level == "adc" else 0
print(json.dumps({"cpu": (c1 - m["c"]) / (t1 - m["t"]) * 100, "gaps": gaps, "lost": d.ring.lost,
                  "und": h["publish"]["drops_samples"] + h["publish"]["unsent_samples"],
                  "rss": h["rss_mb"], "lat": h["latency_us"], "from": h["latency_from"]}))
'''
ap = argparse.ArgumentParser()
ap.add_argument("--other", required=True)
ap.add_argument("--repeat", type=int, default=3)
ap.add_argument("--seconds", type=float, default=10.0)
ap.add_argument("--levels", default="signal,adc")
ap.add_argument("--bundle", default=None, help="a built bundle (default: the chain bundle)")
a = ap.parse_args()
B.BUNDLE = a.bundle
tmp = Path(tempfile.mkdtemp()); broker, port = B._broker(tmp)
trees = {"other": a.other, "this": str(ROOT)}
res = {}
try:
    for r in range(a.repeat):
        for level in a.levels.split(","):
            for name, tree in trees.items():
                cfg = B._cfg(tmp, port, level, a.seconds + 1.0); cfg.pop("realtime", None)
                env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=tree)
                out = subprocess.run([sys.executable, "-c", CHILD, tree, json.dumps(cfg), level],
                                     capture_output=True, text=True, env=env, cwd=tree)
                try:
                    x = json.loads(out.stdout.strip().splitlines()[-1])
                except Exception:
                    print(out.stderr[-1500:]); raise
                res.setdefault((level, name), []).append(x)
                l = x["lat"]
                print(f"run {r+1} {level:6s} {name:5s}: cpu {x['cpu']:.2f} %  gaps {x['gaps']}  lost {x['lost']}  undelivered {x['und']}  rss {x['rss']} MB  latency({x['from']}) p99 {l['p99']} us  load {B.loadavg()}", flush=True)
finally:
    broker.terminate()
for k, v in res.items():
    c = [x["cpu"] for x in v]
    print(k, f"median {statistics.median(c):.2f} range {min(c):.2f}-{max(c):.2f}")
for level in a.levels.split(","):
    d = [x["cpu"] - y["cpu"] for x, y in zip(res[(level, "this")], res[(level, "other")])]
    print(f"{level}: this - other, paired: median {statistics.median(d):+.2f} pp, range "
          f"{min(d):+.2f}..{max(d):+.2f}, this lower in {sum(x < 0 for x in d)} of {len(d)}")
