"""Section 4 of ``benchmarks/daemon.py``: resident memory of the daemon.

``vsense-edge run --simulate`` (adc level, real clock, MQTT and recorder on, 1,000
samples/s) runs in a subprocess of each interpreter given; a monitor samples its
``/proc/PID/status`` every 50 ms and takes one ``/proc/PID/smaps`` snapshot. The daemon's
own ``READY=1`` (``sd_notify`` over a private ``$NOTIFY_SOCKET``, as under systemd) marks
the end of start-up, its ``STOPPING=1`` the start of the shutdown: the steady state is every
sample from 1 s after READY to STOPPING. The latency windows (``[loop] latency_window``)
fill at one int64 per sample each, so at 1,000 samples/s the steady RSS grows by 16 kB/s
until they are full (100 s with the default): reported as "latency windows" below. The
variants switch the releases after start-up on one by one (``[realtime]
release_compiler_memory``, ``release_file_pages``, ``numba_lazy_registries``,
``release_kernel_ir``). Then, in the same interpreter, the
start-up stages one after the other (what each import and step adds) and the daemon's own
buffers as sized by the config.

Used by ``benchmarks/daemon.py --only memory [--python /tmp/edge-venv/bin/python]``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: variant name -> ([realtime] release_compiler_memory, release_file_pages,
#: numba_lazy_registries, release_kernel_ir)
VARIANTS = {
    "nothing released": (False, False, False, False),
    "LLVM pages + malloc_trim": (True, False, False, False),
    "+ every file's clean pages": (True, True, False, False),
    "+ no numba registry refresh": (True, True, True, False),
    "+ kernels' linking IR (default)": (True, True, True, True),
}

MONITOR = r"""
import json, os, socket, subprocess, sys, tempfile, time
py, cfg, smaps_at = sys.argv[1], sys.argv[2], float(sys.argv[3])
sock_path = os.path.join(tempfile.mkdtemp(prefix="vsense-notify-"), "notify")
sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
sock.bind(sock_path)
sock.setblocking(False)
env = dict(os.environ, NOTIFY_SOCKET=sock_path)
p = subprocess.Popen([py, "-m", "edge.cli", "run", "-c", cfg, "--simulate"], env=env,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
t0, samples, ready, stopping, smaps = time.monotonic(), [], None, None, None
while p.poll() is None:
    try:
        while True:
            msg = sock.recv(4096).decode().split("\n")
            if ready is None and "READY=1" in msg:
                ready = time.monotonic() - t0
            if stopping is None and "STOPPING=1" in msg:
                stopping = time.monotonic() - t0
    except BlockingIOError:
        pass
    try:
        d = {}
        for line in open(f"/proc/{p.pid}/status"):
            k = line.split(":")[0]
            if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads"):
                d[k] = int(line.split()[1]) * (1024 / 1e6 if k != "Threads" else 1)
        samples.append((time.monotonic() - t0, d))
        if smaps is None and ready is not None and time.monotonic() - t0 > ready + smaps_at:
            smaps = open(f"/proc/{p.pid}/smaps").read()
    except (OSError, ValueError):
        pass
    time.sleep(0.05)
print(json.dumps({"code": p.returncode, "ready": ready, "stopping": stopping,
                  "samples": samples, "smaps": smaps}))
"""

#: mapping -> component (first match of a substring of the path; anonymous memory apart)
COMPONENTS = (
    ("LLVM + numba (libllvmlite, numba's extensions)", ("llvmlite", "/numba/")),
    ("NumPy + OpenBLAS", ("/numpy", "openblas", "gfortran", "quadmath")),
    ("OpenSSL (paho imports ssl)", ("libssl", "libcrypto", "_ssl")),
    ("Python (libpython, extension modules)", ("libpython", "lib-dynload", "/bin/python")),
    ("C/C++ runtime (libc, libm, libstdc++, ...)", ("libc.", "libm.", "libstdc++", "libgcc",
                                                    "ld-linux", "libz", "liblzma", "libffi",
                                                    "libbz2", "libexpat")),
)


def by_component(smaps: str) -> dict[str, list[float]]:
    """``/proc/PID/smaps`` text -> {component: [Rss MB, of which anonymous MB]}."""
    out: dict[str, list[float]] = {}
    cur = None
    for line in smaps.splitlines():
        p = line.split()
        if p and "-" in p[0] and not p[0].endswith(":"):
            path = " ".join(p[5:]) if len(p) >= 6 else ""
            if path == "[heap]":
                cur = "C heap [heap] (malloc: LLVM, numba, Python objects > 512 B)"
            elif not path.startswith("/"):
                cur = "anonymous mappings (pymalloc arenas, large malloc blocks, stacks)"
            else:
                cur = next((name for name, keys in COMPONENTS
                            if any(k in path for k in keys)), "other files")
            out.setdefault(cur, [0.0, 0.0])
        elif cur is not None and p and p[0] in ("Rss:", "Anonymous:"):
            out[cur][0 if p[0] == "Rss:" else 1] += int(p[1]) / 1024
    return out


STAGES = r"""
import ctypes, os, sys, threading, time
cfg_path = sys.argv[1]
from edge import cli
cli.single_threaded_math()  # as `vsense-edge run` does first


class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks "
                "keepcost".split()]


try:
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = MallInfo2
except AttributeError:
    mallinfo2 = None


def pymalloc_mb():
    r, w = os.pipe()
    old = os.dup(2)
    os.dup2(w, 2)
    try:
        sys._debugmallocstats()
    finally:
        os.dup2(old, 2)
        os.close(w)
    text = b""
    while chunk := os.read(r, 1 << 16):
        text += chunk
    os.close(r)
    for line in text.decode().splitlines():
        if line.startswith("# bytes in allocated blocks"):
            return int(line.split("=")[1].replace(",", "")) / 1e6
    return float("nan")


rows = []


def stage(name):
    d = {}
    for line in open("/proc/self/status"):
        k = line.split(":")[0]
        if k in ("VmRSS", "RssAnon", "RssFile", "Threads"):
            d[k] = int(line.split()[1])
    m = mallinfo2() if mallinfo2 else None
    rows.append([name, d["VmRSS"] / 1024, d["RssAnon"] / 1024, d["RssFile"] / 1024,
                 m.uordblks / 1e6 if m else float("nan"), pymalloc_mb(), d["Threads"]])


stage("interpreter + edge.cli")
import numpy  # noqa: E402
stage("import numpy")
import numba  # noqa: E402
stage("import numba")
import paho.mqtt.client  # noqa: E402
stage("import paho.mqtt.client (ssl)")
from edge.daemon import app, realtime  # noqa: E402
from edge.daemon.config import load_config  # noqa: E402
stage("import edge.daemon.app")
cfg = load_config(cfg_path)
realtime.apply(cfg["realtime"])
est, _, _ = app.load_estimator(cfg)
stage("estimator (numba target, kernel from cache)")
del est
d = app.build_daemon(cfg, simulate=True)
stage("daemon built (all kernels, ADC, recorder, MQTT)")
buffers = {"ring (values, times, flags, seq, stamps, scratch)":
           sum(a.nbytes for a in (d.ring.values, d.ring.t_ns, d.ring.flags, d.ring.seq,
                                  d.ring.stamp_ns, *d.ring._scratch)),
           "ring one-sample slot views (objects)":
           (len(d.ring._slot) * sum(sys.getsizeof(v) + 16 for v in d.ring._slot[0])
            if getattr(d.ring, "_slot", None) else 0),
           "latency windows (2, int64)": d.latency.buf.nbytes + d.latency_ring.buf.nbytes}
if d.rec is not None:
    buffers["recorder chunk buffers"] = sum(s.buf.nbytes for s in d.rec.streams.values())


def later():
    time.sleep(3.0)
    stage("running 3 s (after the release)")
    d.stop()


threading.Thread(target=later, daemon=True).start()
if d.pub is not None:
    d.pub.start()
d.run()
print("JSON" + __import__("json").dumps({"rows": rows, "buffers": buffers}))
"""


def env_of(py: str) -> str:
    r = subprocess.run([py, "-c", "import importlib.util as u, numba, sys; print("
                        "'full (scipy installed: numba imports it)' if u.find_spec('scipy') "
                        "else 'base-only (no scipy)', numba.__version__, sys.prefix)"],
                       capture_output=True, text=True, cwd=str(ROOT))
    return r.stdout.strip() or r.stderr.strip()[-200:]


def toml_text(d: dict) -> str:
    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return repr(v)

    lines = []
    for sec, body in d.items():
        if isinstance(body, list):
            for item in body:
                lines.append(f"[[{sec}]]")
                lines += [f"{k} = {val(v)}" for k, v in item.items()]
        else:
            lines.append(f"[{sec}]")
            lines += [f"{k} = {val(v)}" for k, v in body.items()]
    return "\n".join(lines) + "\n"


def _cfg_file(cfg_dict, tmp: Path, port, seconds: float, compiler: bool, files: bool,
              lazy: bool, ir: bool):
    d = cfg_dict(tmp, 1000.0, seconds, port, level="adc", release=compiler, tag="mem")
    d["device"]["id"] = "benchmem"
    d["realtime"]["release_file_pages"] = files
    d["realtime"]["numba_lazy_registries"] = lazy
    d["realtime"]["release_kernel_ir"] = ir
    p = tmp / f"mem_{int(compiler)}{int(files)}{int(lazy)}{int(ir)}.toml"
    p.write_text(toml_text(d))
    return p, d


def _fmt(xs, fmt="{:.1f}"):
    if not xs:
        return "n/a"
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"


def section_memory(cfg_dict, loadavg, tmp: Path, port, pythons, repeat, seconds):
    """Print the section; return summary rows (``| figure | goal | measured |``)."""
    print(f"\n## 4. Resident memory of `vsense-edge run --simulate`   load {loadavg()}")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    summary = []
    for py in pythons:
        print(f"  interpreter {py}: {env_of(py)}", flush=True)
        comp = None
        for name, (compiler, files, lazy, ir) in VARIANTS.items():
            p, d = _cfg_file(cfg_dict, tmp, port, seconds, compiler, files, lazy, ir)
            steady, hwm, anon, filer = [], [], [], []
            for r_i in range(repeat + 1):  # the first run may compile: warm-up, not counted
                r = subprocess.run([sys.executable, "-c", MONITOR, py, str(p),
                                    str(0.6 * (seconds - 1.0))], capture_output=True,
                                   text=True, env=env, cwd=str(tmp))
                out = json.loads(r.stdout)
                if r_i == 0:
                    continue
                if out["ready"] is None:
                    print(f"    {name}, run {r_i}: exit {out['code']}, no READY=1: skipped")
                    continue
                end = out["stopping"] or float("inf")  # not the shutdown (files closed)
                s = [x for t, x in out["samples"]  # (a zombie has no VmRSS)
                     if "VmRSS" in x and out["ready"] + 1.0 <= t < end]
                if not s:
                    print(f"    {name}, run {r_i}: ended within 1 s of READY: skipped")
                    continue
                steady.append(statistics.median(x["VmRSS"] for x in s))
                hwm.append(max(x["VmHWM"] for x in s))
                anon.append(statistics.median(x["RssAnon"] for x in s))
                filer.append(statistics.median(x["RssFile"] for x in s))
                if files and lazy and ir and out["smaps"]:
                    comp = by_component(out["smaps"])
                print(f"    {name:38s} run {r_i}: exit {out['code']}, ready after "
                      f"{out['ready']:.1f} s, RSS steady {steady[-1]:.1f} MB (max "
                      f"{max(x['VmRSS'] for x in s):.1f}; anon {anon[-1]:.1f}, file "
                      f"{filer[-1]:.1f}), peak {hwm[-1]:.1f} MB, {s[len(s) // 2]['Threads']} threads"
                      f"   load {loadavg()}", flush=True)
            shutil.rmtree(d["recorder"]["dir"], ignore_errors=True)
            summary.append(f"| resident memory, {py}, {name} | < 70 MB (base install) | "
                           f"steady {_fmt(steady)} MB (anon {_fmt(anon)}, file "
                           f"{_fmt(filer)}), peak {_fmt(hwm)} MB |")
        if comp:
            print(f"\n  by mapping, steady state, default configuration ({py}):")
            print("  | mappings | resident MB | of which anonymous MB |")
            print("  | --- | --- | --- |")
            for k, (rss, an) in sorted(comp.items(), key=lambda kv: -kv[1][0]):
                print(f"  | {k} | {rss:.1f} | {an:.1f} |")
            print(f"  | total | {sum(v[0] for v in comp.values()):.1f} | "
                  f"{sum(v[1] for v in comp.values()):.1f} |")
        section_stages(cfg_dict, tmp, port, py, env)
    return summary


def section_stages(cfg_dict, tmp: Path, port, py: str, env: dict) -> None:
    """Start-up stage by stage in ``py`` (default configuration, one run after the warm-up
    runs above: kernels from the numba cache)."""
    p, d = _cfg_file(cfg_dict, tmp, port, 30.0, True, True, True, True)
    r = subprocess.run([py, "-c", STAGES, str(p)], capture_output=True, text=True, env=env,
                       cwd=str(tmp))
    shutil.rmtree(d["recorder"]["dir"], ignore_errors=True)
    line = next((x for x in r.stdout.splitlines() if x.startswith("JSON")), None)
    if line is None:
        print(f"  stages: failed: {r.stderr.strip()[-400:]}")
        return
    out = json.loads(line[4:])
    print(f"\n  start-up stages ({py}; MB; malloc = glibc bytes in use, pymalloc = Python "
          "objects <= 512 B):")
    print("  | stage | RSS | anon | file | + anon | malloc in use | pymalloc | threads |")
    print("  | --- | --- | --- | --- | --- | --- | --- | --- |")
    prev = None
    for name, rss, an, fi, mal, pym, th in out["rows"]:
        print(f"  | {name} | {rss:.1f} | {an:.1f} | {fi:.1f} | "
              f"{an - prev if prev is not None else an:+.1f} | {mal:.1f} | {pym:.1f} | {th} |")
        prev = an
    print("\n  the daemon's buffers (sized by the config; np.zeros pages count once written):")
    for k, v in out["buffers"].items():
        print(f"    {k}: {v / 1e6:.2f} MB")
