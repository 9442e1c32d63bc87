"""The release after start-up comes last: every kernel the running daemon calls is loaded
before it (edge.daemon.recstream warms the recorder's kernel), the kernels' linking IR is
dropped (edge.daemon.kernelir) and a later compilation still links them, and the releases
do not change the estimates."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from edge.daemon.vsr import read_recording_full
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


def test_release_switches_do_not_change_the_estimates(tmp_path):
    runs = {}
    for on in (False, True):
        rt = {"release_compiler_memory": on, "release_file_pages": on,
              "release_kernel_ir": on, "numba_lazy_registries": on}
        cfg = _cfg(tmp_path, None, realtime=rt, recorder={"dir": str(tmp_path / f"r{on}")},
                   simulate={"clock": "virtual", "duration_s": 2.0})
        assert _run(cfg)["code"] == 0
        runs[on] = read_recording_full(cfg["recorder"]["dir"], "estimates")
    off, on = runs[False], runs[True]
    assert len(on.seq) > 1000  # 2 s at 1,000 samples/s, less the fixed-lag delay
    # the same machine code on the same samples (seeded simulator, virtual clock): the
    # releases change memory only, so the estimates are equal bit for bit (tolerance 0)
    np.testing.assert_array_equal(on.seq, off.seq)
    np.testing.assert_array_equal(on.values, off.values)
    np.testing.assert_array_equal(on.flags, off.flags)


#: a cached kernel, loaded from numba's cache in the second interpreter
IRMOD = """
import numba


@numba.njit(cache=True)
def f(a):
    s = 0.0
    for x in a:
        s += x * x
    return s
"""

#: drop f's linking IR, then compile a new function that calls f (numba links f's IR in)
LINK = r"""
import json
import numba
import numpy as np
from edge.daemon import kernelir
import irmod

a = np.arange(10.0)
v = irmod.f(a)
lib = irmod.f.overloads[irmod.f.signatures[0]].library
had = lib._shared_module is not None
first = kernelir.release_kernel_ir([irmod.f])
dropped = lib._shared_module is None


@numba.njit
def g(a):
    return irmod.f(a) + 1.0


w = g(a)
reparsed = lib._shared_module is not None
again = kernelir.release_kernel_ir([irmod.f])
print(json.dumps({"v": v, "w": w, "f": irmod.f(a), "had": had, "first": first,
                  "dropped": dropped, "reparsed": reparsed, "again": again,
                  "gone": lib._shared_module is None,
                  "found": irmod.f in kernelir.loaded_dispatchers("irmod")}))
"""


def test_kernel_ir_release_keeps_linking(tmp_path):
    (tmp_path / "irmod.py").write_text(IRMOD)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, str(tmp_path)]),
               NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    runs = []
    for _ in range(2):  # 1: f compiled into the cache, 2: f loaded from it
        r = subprocess.run([sys.executable, "-c", LINK], capture_output=True, text=True,
                           env=env, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        runs.append(json.loads(r.stdout))
    ref = float(np.sum(np.arange(10.0) ** 2))  # plain NumPy twin of f: 285, exact in float64
    for out in runs:
        assert out["had"] and out["found"]
        n, kept = out["first"]
        assert n == 1 and kept > 0 and out["dropped"]
        # g links f's IR: parsed again from the bitcode kept; same result (exact: the sums
        # of small integers are exact in float64, tolerance 0)
        assert out["reparsed"]
        assert out["v"] == ref and out["f"] == ref and out["w"] == ref + 1.0
        assert out["again"] == [1, 0] and out["gone"]  # dropped again, no new bitcode
