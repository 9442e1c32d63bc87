"""Check the unit's SystemCallFilter against the system calls the daemon really makes.

    .venv/bin/python benchmarks/syscall_filter.py [--seconds 8]

Runs ``vsense-edge run --simulate`` (byte-level ADS1256 simulator, real clock, recorder on,
MQTT to a private Mosquitto, SCHED_FIFO, mlockall, CPU affinity, GC freeze) under
``strace -f -c``, then asks ``systemd-analyze syscall-filter`` which of the traced calls
``SystemCallFilter=@system-service`` + ``~@privileged`` (systemd/vsense-edge.service)
would refuse. Needs strace and systemd-analyze; not in CI.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def _group(name: str) -> set[str]:
    out = subprocess.run(["systemd-analyze", "syscall-filter", name], capture_output=True,
                         text=True, check=True).stdout
    calls, groups = set(), []
    for line in out.splitlines():
        s = line.strip()
        if not s or s.startswith("#") or s.endswith(":") and not s.startswith("@"):
            continue
        if s.startswith("@"):
            if s.split()[0] != name:
                groups.append(s.split()[0])
            continue
        calls.add(s.split()[0])
    for g in groups:
        calls |= _group(g)
    return calls


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    a = ap.parse_args(argv)
    from helpers import chain_bundle

    work = Path(tempfile.mkdtemp(prefix="vsense-sys-"))
    bundle = work / "b.npz"
    chain_bundle(window=3, kinds=("displacement",)).save(bundle)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (work / "m.conf").write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
    broker = subprocess.Popen(["mosquitto", "-c", str(work / "m.conf")])
    (work / "edge.toml").write_text(f"""
[device]
id = "sys"
[bundle]
path = "{bundle}"
[adc]
drate = 1000.0
mode = "continuous"
[[channels]]
name = "y0"
pin = "AIN0"
sensitivity = 1000.0
[mqtt]
port = {port}
health_interval_s = 0.5
[recorder]
dir = "{work / 'rec'}"
fsync_interval_s = 0.2
[realtime]
sched_fifo_priority = 20
sched_fifo_others = true
mlockall = true
cpu_affinity = [0]
gc = "freeze"
[simulate]
level = "adc"
clock = "real"
duration_s = {a.seconds}
""")
    time.sleep(0.5)
    trace = work / "strace.txt"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(work / "numba"))
    subprocess.run(["strace", "-f", "-qq", "-c", "-o", str(trace), sys.executable, "-m",
                    "edge.cli", "run", "--simulate", "-c", str(work / "edge.toml")],
                   cwd=str(ROOT), env=env, check=False)
    broker.terminate()
    used = set()
    for line in trace.read_text().splitlines():
        m = re.match(r"\s*[\d.]+\s+[\d.]+\s+\d+\s+\d+\s+(?:\d+\s+)?(\w+)$", line)
        if m and m.group(1) != "total":
            used.add(m.group(1))
    allowed = _group("@system-service") - _group("@privileged")
    refused = sorted(used - allowed)
    print(f"{len(used)} distinct system calls traced; allowed by the filter: "
          f"{len(used) - len(refused)}; refused: {refused or 'none'}")
    return 1 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
