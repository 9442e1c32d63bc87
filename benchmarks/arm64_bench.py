"""Per-sample figures of the edge on arm64 (emulated) next to x86-64: the workload of
``benchmarks/arm64_bench.sh``, which runs it natively and in the Debian arm64 root.

    python benchmarks/arm64_bench.py prepare DIR            # x86 host, offline extra: bundles
    python benchmarks/arm64_bench.py time DIR --port P --out X.json [--seconds 3] [--repeat 1]
    python benchmarks/arm64_bench.py insn DIR --port P --out X.json [--seconds 3]
    python benchmarks/arm64_bench.py steps DIR --steps N   # block kernel only (counter check)
    python benchmarks/arm64_bench.py report X86_TIME X86_INSN X86_MARKS ARM_TIME ARM_INSN ARM_MARKS

``time``: wall/CPU time in this process: the estimator kernel (benchmarks/kernel.py's
``time_kernel``: block call and one call per sample, cantilever 71 DOF), the wake-up floor at
1 kHz (benchmarks/wake_floor.py) and the daemon's per-stage CPU per sample at 1 kHz in the
default configuration, signal and adc level (benchmarks/daemon_costs.py, simulator apart).

``insn``: the same workloads bracketed by marks for the instruction-counting qemu plugin
(benchmarks/arm64_bench_insn.c): the script calls ``lseek(-1, MARK_BASE + id, 0)`` before and
after each phase and writes the phase's sample count; ``report`` divides the plugin's count
between two marks by it: user-space guest instructions per sample, every thread of the
process (the kernel's side of system calls, such as the wait itself, is not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

MARK_BASE = 0x76530000000  # as in arm64_bench_insn.c
RATE = 1000.0
#: phase -> (first mark, what one unit is)
PHASES = {
    "kernel, one call per sample": (1, "step"),
    "kernel, block call": (3, "step"),
    "wake-up floor, python loop": (5, "wake-up"),
    "wake-up floor, numba loop": (7, "wake-up"),
    "daemon 1 kHz signal, default config": (9, "sample"),
    "daemon 1 kHz adc, default config (simulator included)": (11, "sample"),
}


def mark(i: int) -> None:
    """A marker system call for the counting plugin (fails with EBADF, no other effect)."""
    try:
        os.lseek(-1, MARK_BASE + i, 0)
    except OSError:
        pass


def _env() -> dict:
    import llvmlite.binding as ll
    import numba

    return {"machine": platform.machine(), "python": platform.python_version(),
            "numba": numba.__version__, "llvm_cpu": ll.get_host_cpu_name(),
            "qemu_cpu": os.environ.get("QEMU_CPU", ""),
            "load": " ".join(open("/proc/loadavg").read().split()[:3]),
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}


def _bundle(d: Path):
    from edge.bundle import Bundle

    return Bundle.load(d / "cantilever.npz")


def cmd_prepare(a) -> int:
    import daemon  # noqa: F401  (puts tests/ on sys.path, as benchmarks/daemon.py does)
    import kernel
    from helpers import chain_bundle

    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    kernel.cantilever_bundle(50).save(d / "cantilever.npz")
    # the daemon benchmark's bundle (benchmarks/daemon.py _bundle: 8-DOF chain, window 3)
    chain_bundle(window=3, kinds=("displacement",), dt=1.0 / RATE).save(
        d / f"chain_{int(RATE)}.npz")
    print(f"prepare: bundles in {d}")
    return 0


def _configs():
    import daemon_costs as costs

    return tuple(c for c in costs.CONFIGS if c[2] == RATE and c[3] == 1)


def cmd_time(a) -> int:
    import daemon
    import daemon_costs as costs
    import kernel
    import wake_floor

    d = Path(a.dir)
    out = {"env": _env()}
    b = _bundle(d)
    print(f"time ({out['env']['machine']}): kernel", flush=True)
    out["kernel"] = {"block_us": kernel.time_kernel(b, a.steps, reps=3) * 1e6,
                     "single_us": kernel.time_kernel(b, a.steps // 4, single=True,
                                                     reps=1) * 1e6}
    print(f"  {out['kernel']}", flush=True)
    fl = wake_floor.wake_floor(RATE, a.seconds, methods=("python", "numba"))
    out["floor"] = {m: x["cpu_us"] for m, x in fl["methods"].items()}
    print(f"  floor {out['floor']}", flush=True)
    _, res = costs.section_costs(daemon.run_once, daemon.loadavg, d, a.port, a.seconds + 1,
                                 a.repeat, configs=_configs())
    out["daemon"] = {k: {s: float(np.median([r["stages"][s] for r in rs]))
                         for s in rs[0]["stages"]} | {
                             "kept_up": float(np.median([r["window"]["samples"]
                                                          / r["window"]["wall"] / RATE
                                                          for r in rs]))}
                     for k, rs in res.items()}
    out["env"]["load_end"] = daemon.loadavg()
    Path(a.out).write_text(json.dumps(out, indent=1))
    return 0


class _MarkWindow:
    """Stands in for ``daemon_costs.Window`` in ``daemon.run_once(instrument=True)``: marks
    the steady state (0.5 s after the first sample to the end of the acquisition thread)
    for the counting plugin and counts the samples in it; no wrapper is installed."""

    def __init__(self, d, first: int, store: dict, key: str):
        self.d, self.first, self.store, self.key = d, first, store, key
        self.tcpu = self  # run_once calls win.tcpu.start()
        self._t = threading.Thread(target=self._run, name="bench-marks", daemon=True)
        self._started = False

    def start(self) -> None:
        if not self._started:  # tcpu.start() and start() are the same object's
            self._started = True
            self._t.start()

    def _run(self) -> None:
        d = self.d
        d.first_sample.wait()
        if d.stop_event.wait(0.5):
            return
        n0, t0 = d.processed, time.monotonic()
        mark(self.first)
        acq = d._acq_thread
        while acq.is_alive():
            acq.join(0.02)
        mark(self.first + 1)
        n1, t1 = d.processed, time.monotonic()
        self.store[self.key] = {"units": n1 - n0, "wall": t1 - t0}

    def finish(self) -> dict:
        self._t.join()
        return {}


def cmd_insn(a) -> int:
    import daemon
    import daemon_costs as costs
    import wake_floor

    from edge.estimator import Estimator

    d = Path(a.dir)
    out = {"env": _env(), "phases": {}}
    ph = out["phases"]
    rng = np.random.default_rng(0)
    est = Estimator(_bundle(d), check_stability=False)
    n = a.steps
    Y = 1e-5 * rng.standard_normal((n, est.n_channels))
    F, Z = np.empty((n, est.n_forces)), np.empty((n, est.n_outputs))
    fl = np.empty(n, dtype=np.uint8)
    for i in range(200):  # compiled and warm before the marks
        est.process(Y[i:i + 1], F[i:i + 1], Z[i:i + 1], fl[i:i + 1])
    est.process(Y, F, Z, fl)
    est.reset()
    first = PHASES["kernel, one call per sample"][0]
    mark(first)
    for i in range(n):
        est.process(Y[i:i + 1], F[i:i + 1], Z[i:i + 1], fl[i:i + 1])
    mark(first + 1)
    ph["kernel, one call per sample"] = {"units": n}
    est.reset()
    first = PHASES["kernel, block call"][0]
    mark(first)
    est.process(Y, F, Z, fl)
    mark(first + 1)
    ph["kernel, block call"] = {"units": n}
    print(f"insn ({out['env']['machine']}): kernel phases done", flush=True)

    # the floor loops, marks inside the measuring thread (wake_floor's own loops)
    for m, name in (("python", "wake-up floor, python loop"),
                    ("numba", "wake-up floor, numba loop")):
        wake_floor.wake_floor(RATE, 0.05, methods=(m,))  # warm (numba: compiled)
        first = PHASES[name][0]
        mark(first)
        r = wake_floor.wake_floor(RATE, a.seconds, methods=(m,))
        mark(first + 1)
        ph[name] = {"units": r["methods"][m]["waits"]}
    print("  floor phases done", flush=True)

    saved = costs.Window, costs.instrument
    try:
        defaults = {c[0]: c[:5] for c in _configs()}  # the two default configurations
        for (label, level, rate, block, where), name in zip(
                (defaults["1 kHz signal, default config"],
                 defaults["1 kHz adc, default config"]),
                ("daemon 1 kHz signal, default config",
                 "daemon 1 kHz adc, default config (simulator included)")):
            first = PHASES[name][0]
            costs.Window = lambda dm, acc, tcpu, f=first, k=name, **kw: _MarkWindow(dm, f, ph, k)
            costs.instrument = lambda dm, lv: None
            r = daemon.run_once(d, rate, a.seconds + 1, a.port, instrument=True, level=level,
                                block=block, read_max=block, estimate_in=where, tag="insn")
            ph[name]["lost"] = r["lost"]
            print(f"  {name}: {ph[name]}", flush=True)
    finally:
        costs.Window, costs.instrument = saved
    out["env"]["load_end"] = daemon.loadavg()
    Path(a.out).write_text(json.dumps(out, indent=1))
    return 0


MEANING = (
    "- A (time): thread CPU per sample under qemu-user on this machine against native x86. "
    "The ratio is qemu's cost of translating arm64 code (floating point in numba kernels "
    "the most), not a Raspberry Pi's speed; system calls run natively under qemu-user, so "
    "the wait and wake-up (DRDY wait, floor) hardly change. Figures move with the load.",
    "- B (instructions): user-space instructions executed by every thread of the process "
    "per step, wake-up or sample, counted by the plugin between two marks (the same Python "
    "code and the same numba kernels compiled by LLVM for each target: x86 for haswell, "
    "arm64 for the Pi 3's cortex-a53). Not counted: the kernel's side of system calls (the "
    "sleep, futex and socket work: on this VM the floor of the wait is 15-45 us of CPU per "
    "wake-up, mostly kernel), cache misses and the in-order core's stalls. The daemon "
    "phases include the simulated source (signal level: precomputed values through the "
    "source's Python; adc level: the byte-level ADS1256 simulator, about half the total: "
    "see A's simulator rows).",
    "- The last column turns the arm64 count into time on a Raspberry Pi 3 (Cortex-A53, "
    "1.2 GHz) for an assumed 1.0 and 0.5 instructions per cycle: an assumption, not a "
    "measurement; the kernel's side of the wait and the memory system come on top.",
)


def cmd_steps(a) -> int:
    """Only the estimator's block call of ``--steps`` steps (after a warm-up): run with two
    step counts under any instruction counter (valgrind, the plugin's exit total), the
    difference over the step difference is the kernel's count per step without marks."""
    from edge.estimator import Estimator

    est = Estimator(_bundle(Path(a.dir)), check_stability=False)
    Y = 1e-5 * np.random.default_rng(0).standard_normal((a.steps, est.n_channels))
    F, Z = np.empty((a.steps, est.n_forces)), np.empty((a.steps, est.n_outputs))
    fl = np.empty(a.steps, dtype=np.uint8)
    est.process(Y[:10], F[:10], Z[:10], fl[:10])  # compiled (or loaded) before
    est.reset()
    est.process(Y, F, Z, fl)
    return 0


def _marks(path: Path) -> dict[int, int]:
    m = {}
    for line in path.read_text().splitlines():
        p = line.split()
        if len(p) == 3 and p[0] == "mark":
            m[int(p[1])] = int(p[2])
    return m


def per_unit(insn: dict, marks: dict[int, int]) -> dict[str, float]:
    """Instructions per unit (step, wake-up, sample) of every phase with both marks."""
    out = {}
    for name, (first, _unit) in PHASES.items():
        ph = insn["phases"].get(name)
        if ph and first in marks and first + 1 in marks and ph["units"] > 0:
            out[name] = (marks[first + 1] - marks[first]) / ph["units"]
    return out


def cmd_report(a) -> int:
    xt, xi = json.loads(Path(a.x86_time).read_text()), json.loads(Path(a.x86_insn).read_text())
    at, ai = json.loads(Path(a.arm_time).read_text()), json.loads(Path(a.arm_insn).read_text())
    xm, am = _marks(Path(a.x86_marks)), _marks(Path(a.arm_marks))
    rows = []

    def env(e):
        return (f"{e['machine']}, Python {e['python']}, numba {e['numba']}, LLVM target "
                f"{e['llvm_cpu']}{', QEMU_CPU=' + e['qemu_cpu'] if e['qemu_cpu'] else ''}, "
                f"{e['date']}, load {e['load']} -> {e.get('load_end', '?')}")

    rows.append(f"time runs: x86 {env(xt['env'])}; arm64 {env(at['env'])}")
    rows.append(f"instruction counts: x86 {env(xi['env'])}; arm64 {env(ai['env'])}")
    rows.append("")
    rows.append("### A. Time per sample: arm64 under qemu-user (emulation) vs x86 native")
    rows.append("| figure | x86 native | arm64 emulated | arm64 / x86 |")
    rows.append("| --- | --- | --- | --- |")

    def row(name, x, y, fmt="{:.2f}"):
        r = y / x if x else float("nan")
        rows.append(f"| {name} | {fmt.format(x)} | {fmt.format(y)} | {r:.1f} |")

    row("estimator kernel, block call [us/step]", xt["kernel"]["block_us"], at["kernel"]["block_us"])
    row("estimator kernel, one call per sample [us/step]", xt["kernel"]["single_us"],
        at["kernel"]["single_us"])
    for m in ("python", "numba"):
        row(f"wake-up floor 1 kHz, {m} loop [us CPU/wake-up]", xt["floor"][m], at["floor"][m],
            "{:.1f}")
    for label in xt["daemon"]:
        if label not in at["daemon"]:
            continue
        xs, ys = xt["daemon"][label], at["daemon"][label]
        for s in ("DRDY wait", "SPI transfer + decode", "estimate step", "ring", "latency",
                  "publish", "recording", "health", "glue", "daemon", "simulator"):
            if xs.get(s, 0) > 0.05 or ys.get(s, 0) > 0.05:
                row(f"{label}: {s} [us CPU/sample]", xs[s], ys[s], "{:.1f}")
        rows.append(f"| {label}: samples per second kept / nominal | {xs['kept_up']:.2f} | "
                    f"{ys['kept_up']:.2f} | - |")
    rows.append("")
    rows.append("### B. User-space instructions per unit, counted by the qemu plugin "
                "(x86 under qemu-x86_64, arm64 under qemu-aarch64)")
    rows.append("| phase | unit | x86-64 | arm64 | arm64 / x86 | arm64 at 1.2 GHz, IPC 1.0"
                " / 0.5 [us] |")
    rows.append("| --- | --- | --- | --- | --- | --- |")
    xp, ap = per_unit(xi, xm), per_unit(ai, am)
    for name, (_f, unit) in PHASES.items():
        if name in xp and name in ap:
            x, y = xp[name], ap[name]
            rows.append(f"| {name} | {unit} | {x:,.0f} | {y:,.0f} | {y / x:.2f} | "
                        f"{y / 1.2e3:.1f} / {y / 0.6e3:.1f} |")
        else:
            rows.append(f"| {name} | {unit} | {xp.get(name, 'n/a')} | {ap.get(name, 'n/a')}"
                        f" | - | - |")
    lost = {k: (xi["phases"].get(k, {}).get("lost"), ai["phases"].get(k, {}).get("lost"))
            for k in PHASES if k.startswith("daemon")}
    rows.append(f"lost samples in the counted daemon runs (x86, arm64): {lost}")
    rows += ["", "What the figures mean:", *MEANING]
    print("\n".join(rows))
    if a.out:
        Path(a.out).write_text("\n".join(rows) + "\n")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("prepare")
    s.add_argument("dir")
    for name in ("time", "insn"):
        s = sub.add_parser(name)
        s.add_argument("dir")
        s.add_argument("--port", type=int, default=None, help="Mosquitto on 127.0.0.1")
        s.add_argument("--out", required=True)
        s.add_argument("--seconds", type=float, default=3.0)
        s.add_argument("--steps", type=int, default=20000 if name == "time" else 2000)
        s.add_argument("--repeat", type=int, default=1)
    s = sub.add_parser("steps")
    s.add_argument("dir")
    s.add_argument("--steps", type=int, default=2000)
    s = sub.add_parser("report")
    for k in ("x86_time", "x86_insn", "x86_marks", "arm_time", "arm_insn", "arm_marks"):
        s.add_argument(k)
    s.add_argument("--out")
    a = p.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.ERROR)
    return {"prepare": cmd_prepare, "time": cmd_time, "insn": cmd_insn, "steps": cmd_steps,
            "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
