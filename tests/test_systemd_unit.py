"""Issue 26 item 5: the unit must not restart a daemon whose config or bundle is refused.

systemd.service(5): ``RestartPreventExitStatus=`` takes exit statuses "returned by the main
service process"; a failing ``ExecStartPre=`` fails the unit with result ``exit-code`` and
``Restart=on-failure`` restarts it. The unit ran ``check-config --bundle`` as ExecStartPre, so
a refused bundle restarted every RestartSec forever. Checked here without a running systemd:
the unit's start sequence (every command whose refusal is final exits as the main process, or
as an ``ExecCondition=``), its exit-status lists against :mod:`edge.daemon.exitcodes`, that
``run`` exits with those codes where check-config does, and ``systemd-analyze verify``.
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edge.cli import main
from edge.daemon.exitcodes import EXIT_CODES, EXIT_NO_RESTART
from helpers import chain_bundle

ROOT = Path(__file__).resolve().parents[1]
UNIT = ROOT / "systemd" / "vsense-edge.service"


def _service() -> list[tuple[str, str]]:
    """(key, value) of the [Service] section in order (keys may repeat)."""
    out, sec = [], None
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            sec = line
        elif sec == "[Service]":
            k, v = line.split("=", 1)
            out.append((k, v))
    return out


def test_refusals_are_final_exit_codes_of_the_main_process():
    svc = _service()
    keys = [k for k, _ in svc]
    # a command that can refuse (exit 2/3/5) before the main process would be restarted:
    # only ExecCondition= (skips the unit) or the main process itself may run the checks
    pre = [v for k, v in svc if k == "ExecStartPre"]
    assert not [v for v in pre if not v.startswith("-")], \
        f"ExecStartPre failures are restarted whatever RestartPreventExitStatus says: {pre}"
    main_cmd = dict(svc)["ExecStart"]
    assert re.search(r"vsense-edge run\b", main_cmd)
    assert dict(svc)["Restart"] == "on-failure" and keys.count("ExecStart") == 1
    prevent = {int(x) for x in dict(svc)["RestartPreventExitStatus"].split()}
    assert prevent == set(EXIT_NO_RESTART) and prevent <= set(EXIT_CODES)
    assert "RestartForceExitStatus" not in keys and "SuccessExitStatus" not in keys


@pytest.mark.parametrize("broken, code", [("config", 2), ("bundle", 3), ("recorder", 5)])
def test_run_exits_with_the_refusal_code_of_check_config(tmp_path, broken, code):
    """The main process gives the code RestartPreventExitStatus= lists, for the same inputs
    check-config --bundle refuses (the checks the removed ExecStartPre ran)."""
    b = tmp_path / "b.npz"
    chain_bundle(kinds=("displacement",)).save(b)
    if broken == "bundle":
        b.write_bytes(b.read_bytes()[:100])
    rec = tmp_path / "file-not-dir"
    rec.write_text("")
    name = "nope" if broken == "config" else "y0"
    cfg = tmp_path / "edge.toml"
    cfg.write_text(f'[device]\nid = "u"\n[bundle]\npath = "{b}"\n[[channels]]\nname = "{name}"\n'
                   f'pin = "AIN0"\n[mqtt]\nenabled = false\n[recorder]\n'
                   f'dir = "{rec if broken == "recorder" else tmp_path / "rec"}"\n'
                   f'[simulate]\nlevel = "signal"\nclock = "virtual"\nduration_s = 0.1\n')
    assert main(["check-config", str(cfg), "--bundle", "--simulate"]) == code
    assert main(["run", "--config", str(cfg), "--simulate"]) == code
    assert code in EXIT_NO_RESTART


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path):
    """``systemd-analyze verify`` (offline: no running systemd needed) on the unit with the
    installed path of vsense-edge replaced by this environment's."""
    exe = Path(sys.executable).with_name("vsense-edge")
    unit = tmp_path / "vsense-edge.service"
    unit.write_text(UNIT.read_text().replace("/opt/vsense/venv/bin/vsense-edge", str(exe)))
    r = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "vsense-edge.service" not in r.stderr, r.stderr
