"""Make docs/img/dashboard.png: the browser dashboard following a simulated device.

    python docs/make_dashboard_png.py DEMO_OUT [OUT.png]    # default docs/img/dashboard.png

DEMO_OUT is the output directory of the demo (``bash examples/demo.sh``: ``demo-out``). Starts
Mosquitto on a free port, runs ``vsense-edge run --simulate`` with the demo's ``edge.toml``
(its bundle, the full-model measurement of the run replayed in real time, measured channels
also published every 10th sample), serves the dashboard with its relay, and takes a
screenshot in Debian's headless Chromium (selenium, as tests/test_dashboard.py) once 15 s of
estimates and a judged model check are in: a force F110 [N] and a displacement d60 [m].
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent


def _toml(doc: dict) -> str:
    """Tables of scalars and arrays of such tables as TOML (JSON strings are TOML strings)."""
    out = []
    for name, table in doc.items():
        for t in table if isinstance(table, list) else [table]:
            out.append(f"[[{name}]]" if isinstance(table, list) else f"[{name}]")
            out += [f"{k} = {json.dumps(v)}" for k, v in t.items()]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from dashboard import chromium  # benchmarks/dashboard.py

    from edge.dashboard import page_config, serve
    from offline.broker import find_or_start_broker

    demo = Path(argv[0]).resolve()
    out = Path(argv[1]) if len(argv) == 2 else DOCS / "img" / "dashboard.png"
    doc = tomllib.loads((demo / "edge.toml").read_text())
    dev = doc["device"]["id"]
    with tempfile.TemporaryDirectory() as td, find_or_start_broker("mosquitto") as broker:
        doc["mqtt"].update(host=broker.host, port=broker.port, raw_decimation=10)
        doc["recorder"] = {"enabled": False}
        cfg = Path(td) / "edge.toml"
        cfg.write_text(_toml(doc))
        daemon = subprocess.Popen([sys.executable, "-m", "edge.cli", "run", "-c", str(cfg),
                                   "--simulate"], cwd=ROOT, stdout=subprocess.DEVNULL,
                                  stderr=open(Path(td) / "daemon.log", "wb"))
        srv = serve(page_config(relay=True, window_s=5.0), "127.0.0.1", 0,
                    mqtt_cfg={"host": broker.host, "port": broker.port})
        drv = chromium(1400, 1250)
        try:
            drv.get(f"http://127.0.0.1:{srv.server_address[1]}/index.html?device={dev}")
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline:
                s = drv.execute_script("return window.vsense.stats()")
                d = s["devices"].get(dev, {})
                card = drv.execute_script(
                    "return document.getElementById('card-check').textContent")
                if d.get("history_s", 0) > 15 and "NIS / dof" in card and "=" in card:
                    break
                if daemon.poll() is not None:
                    raise SystemExit("make_dashboard_png: the daemon stopped: "
                                     + (Path(td) / "daemon.log").read_text()[-2000:])
                time.sleep(0.5)
            else:
                raise SystemExit(f"make_dashboard_png: no data within 90 s: {s}")
            out.parent.mkdir(parents=True, exist_ok=True)
            drv.save_screenshot(str(out))
        finally:
            drv.quit()
            srv.shutdown()
            daemon.terminate()
            daemon.wait(20)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
