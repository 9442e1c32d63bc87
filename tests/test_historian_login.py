"""vsense-edge historian logs in like the monitor: against the installer's Mosquitto
(deploy/mosquitto.sh: password file, access list, no anonymous access, TLS listener; the
``secured`` fixture of tests/test_client_login.py), as ``viewer`` over TLS with a password
file, its shared subscription allowed by the viewer's ``topic read vsense/#``; a refused login
is named."""

from __future__ import annotations

import pytest

from historian_fleet import query
from test_client_login import Device, secured  # noqa: F401 - the module's broker fixture

pytestmark = pytest.mark.mqtt


def _historian(capsys, *args):
    from edge.cli import main

    code = main(["historian", *args])
    out = capsys.readouterr()
    return code, out.err


def test_viewer_over_tls_stores_a_device(secured, capsys, tmp_path):  # noqa: F811
    db = f"sqlite:{tmp_path / 'h.db'}"
    with Device(secured):
        code, err = _historian(capsys, "--db", db, "--broker",
                               f"127.0.0.1:{secured.tls_port}", "--tls-ca", str(secured.ca),
                               "--username", "viewer", "--password-file",
                               str(secured.viewer_file), "--client-id", "hist-login",
                               "--duration", "3", "--status-interval", "0.5")
    assert code == 0, err
    (n, lo, hi, distinct), = query(db, "SELECT count(*), min(seq), max(seq), "
                                       "count(DISTINCT seq) FROM vsense_estimates")
    assert n > 500 and n == distinct == hi - lo + 1  # every sample once while it ran
    assert query(db, "SELECT device FROM vsense_meta") == [("dev1",)]


def test_a_refused_login_is_named(secured, capsys, tmp_path):  # noqa: F811
    code, err = _historian(capsys, "--db", f"sqlite:{tmp_path / 'h.db'}", "--broker",
                           f"127.0.0.1:{secured.port}")
    assert code == 2
    assert f"broker 127.0.0.1:{secured.port}" in err and "refused the login" in err
