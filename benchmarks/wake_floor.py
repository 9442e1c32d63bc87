"""The wake-up floor: CPU a thread spends on one blocking wait and its wake-up, nothing else.

    python benchmarks/wake_floor.py [--rates 1000,10000] [--seconds 3] [--repeat 3]

A daemon sampling at ``rate`` must at least block until the next sample time and wake up
once per sample (block 1). This script measures what that alone costs here, as the waiting
thread's own CPU per wake-up, from two clocks read in that thread before and after the loop:
``time.thread_time_ns`` (CLOCK_THREAD_CPUTIME_ID) and ``/proc/self/task/<tid>/schedstat``
(run time [ns], and the number of times the thread was put on a CPU). Methods:

* ``python``: a Python loop sleeping to absolute deadlines ``t0 + k / rate``
  (``time.sleep`` of the remaining time; CPython 3.11+ sleeps in ``clock_nanosleep``);
* ``numba``: a numba nopython loop (``nogil``) calling ``clock_nanosleep(CLOCK_MONOTONIC,
  TIMER_ABSTIME)`` through a ctypes function pointer: no Python bytecode between waits;
* ``event``: a ``threading.Event`` handover: a pacer thread (the Python loop above) sets
  the event at each deadline, a waiter thread wakes on it, clears it and counts; the
  waiter's CPU is the figure (what a consumer woken by a producer pays), the pacer's is
  reported beside it.

Every method also reports the lateness of the wake-ups (now - deadline, p50 / p99 [us]).
``benchmarks/daemon.py --only costs`` prints the floor beside the daemon's per-sample CPU
(:func:`beside_costs`).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import threading
import time

import numpy as np

METHODS = ("python", "numba", "event")
CLOCK_MONOTONIC = 1
TIMER_ABSTIME = 1


def _schedstat(tid: int) -> tuple[int, int]:
    """(run time [ns], times put on a CPU) of thread ``tid``; (0, 0) without schedstat."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as f:
            run, _wait, slices = f.read().split()[:3]
        return int(run), int(slices)
    except (OSError, ValueError):
        return 0, 0


class _Probe:
    """Thread CPU (``thread_time_ns`` and schedstat) of the calling thread between
    :meth:`start` and :meth:`stop`; :meth:`start` also sets the thread's timer slack."""

    slack_ns = 0

    def start(self) -> None:
        if self.slack_ns > 0:
            from edge.daemon.realtime import set_timer_slack

            set_timer_slack(self.slack_ns)
        self.tid = threading.get_native_id()
        self.s0 = _schedstat(self.tid)
        self.c0 = time.thread_time_ns()

    def stop(self) -> None:
        self.c1 = time.thread_time_ns()
        self.s1 = _schedstat(self.tid)

    def result(self, waits: int) -> dict:
        n = max(waits, 1)
        return {"cpu_us": (self.c1 - self.c0) / 1e3 / n,
                "schedstat_us": (self.s1[0] - self.s0[0]) / 1e3 / n,
                "runs_per_wait": (self.s1[1] - self.s0[1]) / n}


def _python_loop(period_ns: int, n: int, late: np.ndarray) -> int:
    """Sleep to ``t0 + (k + 1) * period`` for k < n; lateness [ns] into ``late``."""
    mono, sleep = time.monotonic_ns, time.sleep
    t0 = mono()
    k = 0
    while k < n:
        due = t0 + (k + 1) * period_ns
        left = due - mono()
        if left > 0:
            sleep(left * 1e-9)
        late[k] = mono() - due
        k += 1
    return k


_NUMBA = None


def _numba_loop():
    """The compiled loop (built once): ``loop(period_ns, n, late, ts) -> waits``."""
    global _NUMBA
    if _NUMBA is not None:
        return _NUMBA
    import numba

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    # int clock_nanosleep(clockid_t, int flags, const struct timespec *, struct timespec *)
    sleep_fn = libc.clock_nanosleep
    sleep_fn.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
    sleep_fn.restype = ctypes.c_int
    # int clock_gettime(clockid_t, struct timespec *)
    now_fn = libc.clock_gettime
    now_fn.argtypes = (ctypes.c_int, ctypes.c_void_p)
    now_fn.restype = ctypes.c_int

    @numba.njit(nogil=True, cache=False)
    def loop(period_ns, n, late, ts):
        # ts: int64[4], [0:2] the deadline (tv_sec, tv_nsec), [2:4] the time now
        now_fn(CLOCK_MONOTONIC, ts[2:].ctypes)
        t0 = ts[2] * 1_000_000_000 + ts[3]
        k = 0
        while k < n:
            due = t0 + (k + 1) * period_ns
            ts[0] = due // 1_000_000_000
            ts[1] = due % 1_000_000_000
            rc = sleep_fn(CLOCK_MONOTONIC, TIMER_ABSTIME, ts.ctypes, ts[2:].ctypes)
            if rc != 0 and rc != 4:  # 4 = EINTR: sleep again to the same deadline
                return -rc
            if rc == 4:
                continue
            now_fn(CLOCK_MONOTONIC, ts[2:].ctypes)
            late[k] = ts[2] * 1_000_000_000 + ts[3] - due
            k += 1
        return k

    _NUMBA = loop
    return loop


def _run_in_thread(fn) -> dict:
    out: dict = {}

    def body():
        try:
            out.update(fn())
        except BaseException as e:  # reported to the caller, not lost in the thread
            out["error"] = e

    t = threading.Thread(target=body, name="wake-floor")
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out


def _one(method: str, rate: float, n: int, slack_ns: int) -> dict:
    _Probe.slack_ns = slack_ns
    period_ns = int(round(1e9 / rate))
    late = np.zeros(n, np.int64)
    if method == "python":
        def fn():
            p = _Probe()
            p.start()
            waits = _python_loop(period_ns, n, late)
            p.stop()
            return {"waits": waits, **p.result(waits)}
        res = _run_in_thread(fn)
    elif method == "numba":
        loop = _numba_loop()
        ts = np.zeros(4, np.int64)
        loop(period_ns, 1, late[:1], ts)  # compile outside the measured loop

        def fn():
            p = _Probe()
            p.start()
            waits = int(loop(period_ns, n, late, ts))
            p.stop()
            if waits < 0:
                raise OSError(-waits, f"clock_nanosleep failed: {os.strerror(-waits)}")
            return {"waits": waits, **p.result(waits)}
        res = _run_in_thread(fn)
    elif method == "event":
        res = _event(period_ns, n, late)
    else:
        raise ValueError(f"wake_floor: unknown method {method!r}; one of {METHODS}")
    done = late[:res["waits"]] / 1e3
    res["late_p50_us"], res["late_p99_us"] = (
        (float(np.percentile(done, 50)), float(np.percentile(done, 99))) if len(done)
        else (float("nan"), float("nan")))
    res["late_min_us"] = float(done.min()) if len(done) else float("nan")
    return res


def _event(period_ns: int, n: int, late: np.ndarray) -> dict:
    """Pacer sets an Event at each deadline; the waiter wakes, clears it and handles every
    deadline passed since (stamps its lateness). ``waits`` counts deadlines handled,
    ``wakeups`` the waiter's returns from ``Event.wait``."""
    ev = threading.Event()
    due = np.zeros(n, np.int64)
    pacer_probe, res = _Probe(), {}
    ready = threading.Barrier(2)

    def pacer():
        mono, sleep = time.monotonic_ns, time.sleep
        ready.wait()
        pacer_probe.start()
        t0 = mono()
        for k in range(n):
            d = t0 + (k + 1) * period_ns
            left = d - mono()
            if left > 0:
                sleep(left * 1e-9)
            due[k] = d  # written before the set: the waiter sees it once woken
            ev.set()
        pacer_probe.stop()

    def waiter():
        mono = time.monotonic_ns
        p = _Probe()
        ready.wait()
        p.start()
        k = wakes = 0
        while k < n:
            ev.wait()
            ev.clear()
            wakes += 1
            while k < n and due[k] != 0:
                late[k] = mono() - due[k]
                k += 1
        p.stop()
        res.update(waits=k, wakeups=wakes, **p.result(k))
        res["cpu_us_per_wakeup"] = res["cpu_us"] * k / max(wakes, 1)

    tp = threading.Thread(target=pacer, name="wake-floor-pacer")
    tw = threading.Thread(target=waiter, name="wake-floor-waiter")
    tw.start()
    tp.start()
    tp.join()
    tw.join()
    pr = pacer_probe.result(n)
    res["pacer_cpu_us"] = pr["cpu_us"]
    res["pacer_schedstat_us"] = pr["schedstat_us"]
    return res


def wake_floor(rate: float, seconds: float, methods=METHODS, timer_slack_ns: int = 1000) -> dict:
    """CPU of the bare wait-and-wake-up at ``rate`` [/s] for ``seconds``, per method.

    Parameters
    ----------
    rate : float
        Wake-ups per second (> 0).
    seconds : float
        Length of each method's loop (> 0); ``round(rate * seconds)`` wake-ups (>= 1).
    methods : sequence of str
        Any of :data:`METHODS`.
    timer_slack_ns : int
        Timer slack of the measuring threads [ns] (``prctl``; the benchmarks' daemon
        default: 1,000); 0 leaves the process default (50 us).

    Returns
    -------
    dict
        ``{"rate", "seconds", "requested", "methods": {name: {"waits", "cpu_us",
        "schedstat_us", "runs_per_wait", "late_p50_us", "late_p99_us", "late_min_us", ...}}}``:
        ``waits`` completed wake-ups, ``cpu_us`` and ``schedstat_us`` the waiting thread's
        CPU per wake-up [us] (thread_time and schedstat), ``runs_per_wait`` times the
        thread was put on a CPU per wake-up, lateness percentiles [us]; ``event`` adds
        ``wakeups`` (returns from ``Event.wait``; one may handle several deadlines),
        ``cpu_us_per_wakeup``, ``pacer_cpu_us`` and ``pacer_schedstat_us`` (the setting
        thread). ``waits`` counts deadlines passed: a loop already late skips its sleep
        (``runs_per_wait`` < 1 shows it).
    """
    if not rate > 0 or not seconds > 0:
        raise ValueError(f"wake_floor: rate and seconds must be > 0 (got {rate}, {seconds})")
    n = max(1, int(round(rate * seconds)))
    return {"rate": float(rate), "seconds": float(seconds), "requested": n,
            "timer_slack_ns": int(timer_slack_ns),
            "methods": {m: _one(m, rate, n, timer_slack_ns) for m in methods}}


def table(results: list[dict]) -> list[str]:
    """Markdown rows: one per (rate, method), medians over the results of one rate."""
    rows = ["| rate [/s] | method | wake-ups | thread_time [us/wake-up] | schedstat "
            "[us/wake-up] | runs/wake-up | late p50 / p99 [us] | % of a core |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    by_rate: dict[float, list[dict]] = {}
    for r in results:
        by_rate.setdefault(r["rate"], []).append(r)
    for rate, rs in by_rate.items():
        for m in rs[0]["methods"]:
            xs = [r["methods"][m] for r in rs]

            def med(k):
                return float(np.median([x[k] for x in xs]))

            cpu = [x["cpu_us"] for x in xs]
            extra = (f" (pacer {med('pacer_cpu_us'):.1f}; {xs[0]['wakeups']} wake-ups, "
                     f"{med('cpu_us_per_wakeup'):.1f} per wake-up)" if m == "event" else "")
            rows.append(
                f"| {rate:,.0f} | {m} | {xs[0]['waits']} | {med('cpu_us'):.1f} "
                f"({min(cpu):.1f}-{max(cpu):.1f}){extra} | {med('schedstat_us'):.1f} | "
                f"{med('runs_per_wait'):.2f} | {med('late_p50_us'):.0f} / "
                f"{med('late_p99_us'):.0f} | {med('cpu_us') * rate / 1e4:.2f} |")
    return rows


def beside_costs(res: dict, configs, seconds: float, repeat: int, loadavg) -> list[str]:
    """The floor beside ``daemon_costs.section_costs``' results ``res`` (label -> runs),
    measured in the same invocation right after them, for the configurations with one
    wake-up per sample (block 1): the Python and numba floors at its rate, "daemon minus
    floor" and "daemon / floor" (Python floor: at signal level the daemon waits in a Python
    sleep, at adc level in Python calls around ``wait_for_edge``). Block configurations
    get "-". Prints progress; returns markdown rows."""
    per_sample = [c for c in configs if c[3] == 1]
    rates = sorted({c[2] for c in per_sample})
    floors: dict[float, list[dict]] = {r: [] for r in rates}
    print(f"\n## 5b. Wake-up floor beside the daemon (same run; {seconds} s per method, "
          f"timer slack 1 us like the daemon)   load {loadavg()}")
    for i in range(repeat):
        for r in rates:
            f = wake_floor(r, seconds, methods=("python", "numba"))
            floors[r].append(f)
            print(f"  run {i + 1} {r:,.0f}/s: " + ", ".join(
                f"{m} {x['cpu_us']:.1f} us/wake-up" for m, x in f["methods"].items())
                + f"   load {loadavg()}", flush=True)

    def fl(c, m):
        return float(np.median([f["methods"][m]["cpu_us"] for f in floors[c[2]]]))

    def cells(fn):
        return " | ".join(fn(c) if c in per_sample else "-" for c in configs)

    def daemon(c):
        return float(np.median([r["stages"]["daemon"] for r in res[c[0]]]))

    rows = [f"| wake-up floor, {m} loop [us/wake-up] | "
            + cells(lambda c, m=m: f"{fl(c, m):.1f}") + " |" for m in ("python", "numba")]
    rows.append("| daemon minus floor (python) [us/sample] | "
                + cells(lambda c: f"{daemon(c) - fl(c, 'python'):.1f}") + " |")
    rows.append("| daemon / floor (python) | "
                + cells(lambda c: f"{daemon(c) / fl(c, 'python'):.1f}") + " |")
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="1000,10000", help="comma list of wake-ups per second")
    ap.add_argument("--seconds", type=float, default=3.0, help="per method and rate")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (median, range)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--slack", type=int, default=1000,
                    help="timer slack of the measuring threads [ns]; 0: process default")
    a = ap.parse_args(argv)
    rates = [float(x) for x in a.rates.split(",")]
    methods = a.methods.split(",")
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"# wake-up floor {time.strftime('%Y-%m-%d %H:%M:%S')}, {os.cpu_count()} CPUs, "
          f"load {load}; {a.seconds} s per method and rate, {a.repeat} runs, timer slack "
          f"{a.slack} ns", flush=True)
    results = []
    for i in range(a.repeat):
        for r in rates:
            res = wake_floor(r, a.seconds, methods, a.slack)
            results.append(res)
            print(f"  run {i + 1} {r:,.0f}/s: " + ", ".join(
                f"{m} {x['cpu_us']:.1f} us ({x['waits']} waits)"
                for m, x in res["methods"].items()), flush=True)
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"\n# median (min-max) of {a.repeat} runs; load {load}")
    print("\n".join(table(results)))


if __name__ == "__main__":
    main()
