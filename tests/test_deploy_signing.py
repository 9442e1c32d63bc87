"""Signed bundles by default: ``deploy/install.sh`` turns on ``[bundle] require_signature``
with a key it generates (deploy/signing.sh, the part of the installer that runs here in a
temporary directory instead of /etc/vsense), or with the workstation's public key
(``--public-key``), or not at all (``--no-signature``). The daemon's start-up check then
accepts a bundle signed with that key and refuses an unsigned one (exit code 3)."""

import os
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from edge.daemon.app import StartupError, preflight
from edge.daemon.config import config_from_dict, load_config
from tests.helpers import chain_bundle

pytest.importorskip("cryptography")

ROOT = Path(__file__).resolve().parents[1]


def _dry(*args):
    return subprocess.run(["bash", str(ROOT / "deploy" / "install.sh"), "--dry-run", "--no-mosquitto",
                           *args], capture_output=True, text=True, timeout=300)  # hang guard


def _setup(etc: Path, toml: Path, fresh: int = 1, pub: str = "") -> str:
    """deploy/signing.sh's vsense_signing_setup as install.sh runs it (run() executes)."""
    script = (f'run() {{ echo "+ $*"; "$@"; }}; DRY=0; . "{ROOT}/deploy/signing.sh"; '
              f'vsense_signing_setup "{etc}" "{sys.executable}" "{toml}" {fresh} "{pub}"')
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _cfg(bundle_section: dict, bundle: Path):
    base = {"device": {"id": "s"}, "channels": [{"name": "y0", "pin": "AIN0"}],
            "mqtt": {"enabled": False}, "recorder": {"enabled": False},
            "simulate": {"level": "signal", "clock": "virtual"}}
    return config_from_dict(dict(base, bundle={**bundle_section, "path": str(bundle)}))


def test_installer_generates_a_key_and_requires_signed_bundles(tmp_path):
    etc = tmp_path / "etc"
    etc.mkdir()
    toml = etc / "edge.toml"
    toml.write_text((ROOT / "deploy" / "edge.toml").read_text())
    out = _setup(etc, toml)
    key, pub = etc / "signing.key", etc / "signing.pub"
    assert "NEW bundle-signing key" in out and "shred -u" in out
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and pub.read_text().startswith(
        "-----BEGIN PUBLIC KEY-----")
    # the installed config: still a valid daemon config, signatures required with that key
    load_config(toml)
    section = tomllib.loads(toml.read_text())["bundle"]
    assert section["require_signature"] is True and section["public_key"] == str(pub)
    # the daemon's start-up check with that [bundle]: unsigned refused (exit 3), signed runs
    b = tmp_path / "bundle.npz"
    chain_bundle().save(b)
    cfg = _cfg(section, b)
    with pytest.raises(StartupError, match="no signature file") as e:
        preflight(cfg, simulate=True)
    assert e.value.code == 3
    r = subprocess.run([sys.executable, "-m", "edge.signing", "sign", str(b), str(key)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    preflight(cfg, simulate=True)
    # a bundle changed after signing no longer verifies
    chain_bundle(n=5).save(b)
    with pytest.raises(StartupError, match="does not verify") as e:
        preflight(cfg, simulate=True)
    assert e.value.code == 3
    # idempotent: a second run keeps the key (and does not edit a config it did not write)
    before = pub.read_bytes()
    out = _setup(etc, toml, fresh=0)
    assert "keeping the trusted bundle-signing key" in out and pub.read_bytes() == before
    assert "set [bundle] public_key" in out


def test_installer_takes_the_workstations_public_key(tmp_path):
    from edge import signing

    ws_key, ws_pub = signing.keygen(tmp_path / "workstation.key")
    etc = tmp_path / "etc"
    etc.mkdir()
    toml = etc / "edge.toml"
    toml.write_text((ROOT / "deploy" / "edge.toml").read_text())
    _setup(etc, toml, pub=str(ws_pub))
    assert not (etc / "signing.key").exists()  # no private key on the device
    assert (etc / "signing.pub").read_bytes() == ws_pub.read_bytes()
    b = tmp_path / "bundle.npz"
    chain_bundle().save(b)
    signing.sign_bundle(b, ws_key)
    preflight(_cfg(tomllib.loads(toml.read_text())["bundle"], b), simulate=True)


def test_dry_run_shows_the_signature_steps_and_the_opt_out():
    r = _dry()
    assert r.returncode == 0, r.stderr
    assert "-m edge.signing keygen /etc/vsense/signing.key" in r.stdout
    assert "require_signature = true" in r.stdout and "python3-cryptography" in r.stdout
    r = _dry("--no-signature")
    assert r.returncode == 0 and "edge.signing" not in r.stdout
    assert "require_signature" not in r.stdout and "--no-signature" in r.stdout
    r = _dry("--public-key", "/nonexistent/k.pub")
    assert r.returncode == 2 and "--public-key /nonexistent/k.pub" in r.stderr
    assert os.path.exists(ROOT / "deploy" / "signing.sh")
