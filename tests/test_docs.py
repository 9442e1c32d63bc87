"""Every code block of the README and the guide runs (docs/index.md "Tests").

Convention: a block preceded by ``<!-- norun: reason -->`` is not run (the reason must say why:
Pi only, runs forever, is the suite itself, ...); a TOML block preceded by
``<!-- file: path -->`` must equal that file; other TOML blocks must parse; ``bash`` blocks run
with ``bash -eu`` and ``python`` blocks with this interpreter, in one scratch directory per page
holding a link to the repository's ``examples/``, with the environment's commands on the PATH;
the blocks of a page run in order (later ones use what earlier ones wrote). Blocks without a
language are displays (command synopses, output) and are not run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ["README.md", "docs/quickstart.md", "docs/howto-own-structure.md", "docs/deploy-pi.md",
         "docs/howto-grafana-nodered.md", "docs/deploy.md",
         "docs/dashboard.md", "docs/calibration.md", "docs/howto-fatigue.md"]
RUN = {"bash", "sh", "python"}
FENCE = re.compile(r"^```(\w*)\s*$")
MARK = re.compile(r"^<!--\s*(norun|file):\s*(.*?)\s*-->$")


def blocks(page: Path) -> list[dict]:
    """Fenced blocks of a Markdown page: ``{"lang", "code", "line", "mark", "arg"}``."""
    out, lines, i = [], page.read_text().splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        prev = next((x.strip() for x in reversed(lines[:i]) if x.strip()), "")
        mk = MARK.match(prev)
        out.append({"lang": m.group(1), "code": "\n".join(lines[i + 1:j]) + "\n",
                    "line": i + 1, "mark": mk.group(1) if mk else None,
                    "arg": mk.group(2) if mk else ""})
        i = j + 1
    return out


def test_block_parser_reads_marks_and_languages(tmp_path):
    p = tmp_path / "p.md"
    p.write_text("<!-- norun: Pi only -->\n```bash\nreboot\n```\n\n```python\nx = 1\n```\n"
                 "<!-- file: a.toml -->\n```toml\na = 1\n```\n```\nplain\n```\n")
    got = [(b["lang"], b["mark"], b["arg"], b["code"]) for b in blocks(p)]
    assert got == [("bash", "norun", "Pi only", "reboot\n"), ("python", None, "", "x = 1\n"),
                   ("toml", "file", "a.toml", "a = 1\n"), ("", None, "", "plain\n")]


@pytest.mark.parametrize("page", GUIDE)
def test_every_block_is_runnable_marked_or_a_display(page):
    bad = []
    for b in blocks(ROOT / page):
        where = f"{page}:{b['line']}"
        if b["mark"] == "norun":
            if len(b["arg"]) < 8:
                bad.append(f"{where}: norun needs a reason")
        elif b["mark"] == "file":
            if b["lang"] != "toml" or (ROOT / b["arg"]).read_text() != b["code"]:
                bad.append(f"{where}: block differs from {b['arg']}")
        elif b["lang"] == "toml":
            try:
                tomllib.loads(b["code"])
            except tomllib.TOMLDecodeError as exc:
                bad.append(f"{where}: not valid TOML: {exc}")
        elif b["lang"] and b["lang"] not in RUN:
            bad.append(f"{where}: a {b['lang']} block must be marked norun with a reason")
    assert not bad, "\n".join(bad)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """One scratch directory for all pages (the README and the how-to share their bundle)."""
    d = tmp_path_factory.mktemp("docs-run")
    (d / "examples").symlink_to(ROOT / "examples")
    return d, set()


@pytest.mark.slow
@pytest.mark.parametrize("page", GUIDE)
def test_guide_code_blocks_run(page, workdir):
    d, done = workdir
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}"
               f"{os.environ.get('PATH', '')}", PYTHONPATH=str(ROOT), MPLBACKEND="Agg")
    ran = 0
    for b in blocks(ROOT / page):
        if b["mark"] or b["lang"] not in RUN:
            continue
        if b["code"] in done:  # the same commands on another page: ran already, same directory
            continue
        cmd = ["bash", "-euo", "pipefail", "-c", b["code"]] if b["lang"] != "python" else \
            [sys.executable, "-c", b["code"]]
        r = subprocess.run(cmd, cwd=d, env=env, capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, (f"{page}:{b['line']} exited {r.returncode}\n"
                                   f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        done.add(b["code"])
        ran += 1
    if page == "docs/howto-own-structure.md":
        # what the walk-through promises: a bundle, a report, estimates and a recording
        assert (d / "my_beam.npz").is_file() and (d / "my_beam-report" / "index.html").is_file()
        est = np.genfromtxt(d / "my_beam_est.csv", delimiter=",", names=True)
        assert est.dtype.names[:3] == ("time", "F07", "d05") and est.size > 1900
        assert list((d / "recordings").glob("*.vsr"))
    if page == "docs/howto-fatigue.md":
        # the offline damage of the estimate and of the truth, and the device's saved count
        est, tru = (json.loads((d / k / "fatigue.json").read_text())
                    for k in ("strain_fatigue", "strain_fatigue_truth"))
        assert est["cycles"] > 100 and est["damage_interval"] is not None
        lo, hi = est["damage_interval"]
        assert lo <= tru["damage_with_residue"] <= hi, (lo, tru["damage_with_residue"], hi)
        # the truth counted on the estimate's rows (--rows-of): the same rows, the same gaps
        assert (tru["samples"], tru["gaps"]) == (est["samples"], est["gaps"]) and est["gaps"]
        assert (d / "fatigue-eps_root.state").stat().st_size > 1000


@pytest.mark.mqtt
def test_flatten_bridge_republishes_one_object_per_sample(mosquitto):
    """examples/mqtt_flatten.py (docs/howto-grafana-nodered.md) against the session broker."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    from edge.daemon.mqtt import encode_estimates

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import mqtt_flatten
    finally:
        sys.path.remove(str(ROOT / "examples"))
    ready, stop, got, done = (threading.Event(), threading.Event(), [], threading.Event())
    th = threading.Thread(target=mqtt_flatten.run, args=(mosquitto.host, mosquitto.port, "flat-1"),
                          kwargs={"every": 2, "ready": ready, "stop": stop}, daemon=True)
    th.start()
    assert ready.wait(10), "bridge did not subscribe"
    c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="flat-test")
    subscribed = threading.Event()

    def on_message(client, userdata, msg):
        got.append(__import__("json").loads(msg.payload))
        if len(got) == 3:
            done.set()

    c.on_message = on_message
    c.on_subscribe = lambda *a: subscribed.set()
    c.connect(mosquitto.host, mosquitto.port)
    c.loop_start()
    c.subscribe("vsense/flat-1/flat", qos=1)
    try:
        assert subscribed.wait(10)
        c.publish("vsense/flat-1/meta", '{"columns": ["F1", "d2"]}', qos=1).wait_for_publish(5)
        seq = np.arange(10, 16)
        v = np.column_stack([seq * 0.5, -seq * 1e-6])
        v[2, 1] = np.nan
        payload = encode_estimates(10, seq * 1_000_000, v, np.array([0, 0, 2, 0, 0, 0],
                                                                      np.uint8), "json")
        c.publish("vsense/flat-1/estimates", payload, qos=1).wait_for_publish(5)
        assert done.wait(10), f"got {got}"
    finally:
        stop.set()
        th.join(10)
        c.disconnect()
        c.loop_stop()
    # samples 10, 12, 14 (every 2nd seq), values exact (JSON floats round-trip), NaN as null,
    # time in ms from t_ns
    assert got == [{"time": int(s), "seq": int(s), "F1": float(v[k, 0]),
                    "d2": None if k == 2 else float(v[k, 1]), "flags": 2 if k == 2 else 0}
                   for k, s in enumerate(seq) if s % 2 == 0]


def test_flatten_bridge_outside_an_environment_says_what_to_do(tmp_path):
    """`python examples/mqtt_flatten.py` with a Python that has no vsense (isolated mode: no
    PYTHONPATH, no user site; the system's python3 when it is a different interpreter) names
    what to run instead of a bare ModuleNotFoundError traceback."""
    import shutil
    import subprocess

    py = shutil.which("python3", path="/usr/bin:/bin")
    if py is None:
        pytest.skip("no system python3")
    probe = subprocess.run([py, "-I", "-c", "import edge"], capture_output=True, cwd=tmp_path)
    if probe.returncode == 0:
        pytest.skip(f"{py} has vsense installed")
    r = subprocess.run([py, "-I", str(ROOT / "examples" / "mqtt_flatten.py"), "--help"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 1
    assert "No module named 'edge'" in r.stderr and ".venv/bin/python" in r.stderr
    assert "Traceback" not in r.stderr
