"""Dashboard benchmark: frame rate and memory of the browser page with N devices x 1 kHz.

    .venv/bin/python benchmarks/dashboard.py [--devices 5,10,20] [--fmt json] [--batch 50]
        [--seconds 5] [--direct]

Per N: a private Mosquitto (TCP + websockets listeners), ``vsense-edge dashboard``'s server
(relay by default; ``--direct``: the broker's websockets listener), N devices of
``benchmarks/fleet.py`` publishing 1,000 samples/s each, and Debian's headless Chromium
(selenium + chromedriver). Once every device has 10 s of data (full plot windows), the page's
own counters are read twice ``--seconds`` apart: frames per second (every frame redraws the
selected device's plots), milliseconds of script per frame, samples received per second,
then the JS heap (CDP ``Performance.getMetrics``) and the private memory and PSS of the
page's renderer process (``/proc/<pid>/smaps_rollup``). The load average is printed with
each row (the machine is shared).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def chromium(width: int = 1400, height: int = 1100):
    """Headless Chromium from Debian's packages through its chromedriver (selenium)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    o = webdriver.ChromeOptions()
    o.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu",
              f"--window-size={width},{height}", "--enable-precise-memory-info",
              "--disable-dev-shm-usage"):
        o.add_argument(a)
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=o)
    drv.set_script_timeout(30)
    return drv


def renderer_mem_mb(driver_pid: int) -> list[tuple[float, float]]:
    """``(private dirty, PSS)`` of each Chromium renderer process under this chromedriver
    [MB], largest first (the page's own renderer is the largest; the others are spare
    renderers or earlier pages). Private dirty memory is what Chromium's task manager calls
    the memory footprint; PSS adds the renderer's share of the shared libraries."""
    kids: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(p.name))
    todo, out = [driver_pid], []
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        try:
            if b"--type=renderer" in Path(f"/proc/{pid}/cmdline").read_bytes():
                kb = {ln.split(":")[0]: int(ln.split()[1]) for ln in Path(
                    f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]}
                out.append((kb["Private_Dirty"] / 1024, kb["Pss"] / 1024))
        except OSError:
            pass
    return sorted(out, reverse=True)


def wait_page(drv, pred, timeout=60.0, what="condition") -> dict:
    deadline = time.monotonic() + timeout
    while True:
        s = drv.execute_script("return window.vsense.stats()")
        if pred(s):
            return s
        if time.monotonic() > deadline:
            raise TimeoutError(f"page: {what} not reached within {timeout} s")
        time.sleep(0.1)


def measure(drv, ids: list[str], seconds: float) -> dict:
    """Counters of the page over ``seconds`` once every device in ``ids`` has 10 s of data."""
    def samples(s):
        return [s["devices"].get(d, {}).get("samples", 0) for d in ids]

    wait_page(drv, lambda s: min(samples(s)) >= 10_000, 120, "10 s of data at every device")
    a = drv.execute_script("return [window.vsense.stats(), performance.now()]")
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:  # the measurement interval itself (not a test wait)
        time.sleep(0.2)
    b = drv.execute_script("return [window.vsense.stats(), performance.now()]")
    span = (b[1] - a[1]) / 1000
    ca, cb = a[0]["counters"], b[0]["counters"]
    frames = cb["frames"] - ca["frames"]
    drv.execute_cdp_cmd("Performance.enable", {})
    m = {x["name"]: x["value"] for x in
         drv.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]}
    mem = renderer_mem_mb(drv.service.process.pid)
    return {"fps": frames / span, "drawn_fps": (cb["drawn"] - ca["drawn"]) / span,
            "ms_per_frame": (cb["drawMs"] - ca["drawMs"]) / max(1, frames),
            "samples_per_s": (sum(samples(b[0])) - sum(samples(a[0]))) / span,
            "js_heap_mb": m["JSHeapUsedSize"] / 2**20,
            "renderer_private_mb": mem[0][0] if mem else float("nan"),
            "renderer_pss_mb": mem[0][1] if mem else float("nan"),
            "uncaught": cb["uncaught"], "bad": cb["bad"]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_one(n: int, fmt: str, batch: int, seconds: float, direct: bool) -> dict:
    from edge.dashboard import page_config, serve

    spec = importlib.util.spec_from_file_location("fleet", ROOT / "benchmarks" / "fleet.py")
    fleet = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fleet)
    with tempfile.TemporaryDirectory() as td:
        port, ws = _free_port(), _free_port()
        conf = Path(td) / "mosquitto.conf"
        conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n"
                        f"max_queued_messages 100000\nlistener {ws} 127.0.0.1\n"
                        "protocol websockets\n")
        broker = subprocess.Popen(["/usr/sbin/mosquitto", "-c", str(conf)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        srv = drv = None
        fl = fleet.Fleet(n, "127.0.0.1", port, fmt, batch, prefix="db")
        th = threading.Thread(target=fl.run, args=(3600.0,), daemon=True)
        try:
            time.sleep(0.5)
            if direct:
                srv = serve(page_config(url=f"ws://127.0.0.1:{ws}"), "127.0.0.1", 0)
            else:
                srv = serve(page_config(relay=True), "127.0.0.1", 0,
                            mqtt_cfg={"host": "127.0.0.1", "port": port})
            drv = chromium()
            drv.get(f"http://127.0.0.1:{srv.server_address[1]}/index.html?device=db000")
            wait_page(drv, lambda s: s["conn"] == "connected", 20, "broker connection")
            fl.start()
            th.start()
            return measure(drv, fl.ids, seconds)
        finally:
            fl.stop_event.set()
            if th.is_alive():
                th.join(30)
            fl.stop()
            if drv is not None:
                drv.quit()
            if srv is not None:
                srv.shutdown()
            broker.terminate()
            broker.wait(5)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--devices", default="5,10,20")
    ap.add_argument("--fmt", default="json", choices=("json", "binary"))
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--direct", action="store_true",
                    help="page -> the broker's websockets listener instead of the relay")
    a = ap.parse_args(argv)
    print(f"dashboard benchmark: {os.cpu_count()} CPUs, {a.fmt}, batch {a.batch}, "
          f"{'direct websockets' if a.direct else 'relay'}", flush=True)
    print(f"{'N':>4} {'frames/s':>9} {'drawn/s':>8} {'ms/frame':>9} {'samples/s':>10} "
          f"{'JS heap MB':>10} {'private MB':>10} {'PSS MB':>7} {'load':>5}", flush=True)
    for n in [int(x) for x in a.devices.split(",")]:
        r = run_one(n, a.fmt, a.batch, a.seconds, a.direct)
        print(f"{n:>4} {r['fps']:>9.1f} {r['drawn_fps']:>8.1f} {r['ms_per_frame']:>9.2f} "
              f"{r['samples_per_s']:>10,.0f} {r['js_heap_mb']:>10.1f} "
              f"{r['renderer_private_mb']:>10.0f} {r['renderer_pss_mb']:>7.0f} "
              f"{os.getloadavg()[0]:>5.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
