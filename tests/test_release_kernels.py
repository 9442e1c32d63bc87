"""The release after start-up comes last: every kernel the running daemon calls is loaded
before it (edge.daemon.recstream warms the recorder's kernel)."""

import json
import os
import subprocess
import sys

import pytest

from helpers import chain_bundle

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: run a daemon in a fresh interpreter, listing the kernels numba loads (from its cache or
#: compiled: a dispatcher gaining an overload) before and after the release after start-up
RUN = r"""
import json, sys
from numba.core import dispatcher as nd
from edge.daemon import app, realtime
from edge.daemon.config import config_from_dict

phase, loads = ["start-up"], {"start-up": [], "running": []}
compile_ = nd.Dispatcher.compile


def compile(self, sig):
    n = len(self.overloads)
    out = compile_(self, sig)
    if len(self.overloads) != n:
        loads[phase[0]].append(self.py_func.__qualname__)
    return out


nd.Dispatcher.compile = compile
release = realtime.release_after_startup


def release_then_run(rt):
    out = release(rt)
    phase[0] = "running"
    return out


realtime.release_after_startup = release_then_run
code = app.run_daemon(config_from_dict(json.loads(sys.argv[1])), simulate=True,
                      install_signals=False)
print(json.dumps(dict(loads, code=code)))
"""


def _run(cfg: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH",
                                                                            "")]))
    r = subprocess.run([sys.executable, "-c", RUN, json.dumps(cfg)], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _cfg(tmp_path, port, **sections) -> dict:
    b = tmp_path / "b.npz"
    if not b.exists():
        chain_bundle(window=3, kinds=("displacement",)).save(b)
    d = {"device": {"id": "rel"}, "bundle": {"path": str(b)},
         "channels": [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0, "unit": "m"}],
         "mqtt": {"enabled": port is not None, "host": "127.0.0.1", "port": port or 1883,
                  "health_interval_s": 0.3, "reconnect_min_s": 0.1},
         "recorder": {"dir": str(tmp_path / "rec"), "fsync_interval_s": 0.2},
         "simulate": {"clock": "real", "duration_s": 1.5, "level": "adc", "seed": 3}}
    for k, v in sections.items():
        d[k] = dict(d.get(k, {}), **v)
    return d


@pytest.mark.parametrize("variant", [
    {},  # the default: per-sample compiled call, JSON estimates, recorder, health
    {"bundle": {"block": 16}, "mqtt": {"format": "binary", "raw_decimation": 10},
     "simulate": {"level": "signal"}},  # block path, binary payloads, raw channel topic
], ids=["default", "block-binary-raw"])
def test_every_kernel_is_loaded_before_the_release(tmp_path, mosquitto, variant):
    out = _run(_cfg(tmp_path, mosquitto.port, **variant))
    assert out["code"] == 0
    # the premise: the hook sees the loads (start-up loads the estimator's, the fast
    # path's, the encoder's and the recorder's kernels)
    assert {"_process_packed", "_pack", "_batch_take"} <= set(out["start-up"])
    # nothing is loaded after the release (a load there faults LLVM's pages back in and
    # allocates after the heap trim: about 10 MB more resident, measured)
    assert out["running"] == []
