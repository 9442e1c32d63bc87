"""A throwaway PostgreSQL cluster for the historian's tests and benchmark.

Debian's ``postgresql`` package (``tests/run.sh`` installs it when missing) gives
``/usr/lib/postgresql/<major>/bin/{initdb,pg_ctl}``; :class:`PgServer` runs ``initdb`` into a
temporary folder and ``pg_ctl`` on a free loopback port, trust authentication, superuser
``vsense``. PostgreSQL refuses to run as root: as root the cluster belongs to ``nobody`` and the
commands run through ``runuser -u nobody``. :meth:`PgServer.stop` / :meth:`start` take the
server away and bring it back (the historian's outage test).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def pg_bindir() -> str | None:
    """The newest ``/usr/lib/postgresql/<major>/bin`` with initdb, else initdb's on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(Path(p).parts[-3]))
    if found:
        return str(Path(found[-1]).parent)
    p = shutil.which("initdb")
    return str(Path(p).resolve().parent) if p else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self, bindir: str, fsync: bool = False):
        self.bindir = bindir
        self.dir = Path(tempfile.mkdtemp(prefix="vsense-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self.fsync = fsync
        self.user = "nobody" if os.geteuid() == 0 else None
        if self.user:
            shutil.chown(self.dir, self.user)
        self._run("initdb", "-D", str(self.data), "-U", "vsense", "-A", "trust", "-E", "UTF8",
                  "--no-sync")

    @property
    def url(self) -> str:
        return f"postgresql://vsense@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        cmd = [os.path.join(self.bindir, tool), *args]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if r.returncode:
            log = self.dir / "log"
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr[-1500:]}"
                               + (log.read_text()[-1500:] if log.exists() else ""))

    def start(self) -> None:
        opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                f"-c fsync={'on' if self.fsync else 'off'}")
        self._run("pg_ctl", "-D", str(self.data), "-o", opts, "-l", str(self.dir / "log"),
                  "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def close(self) -> None:
        try:
            self.stop("immediate")
        except RuntimeError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)
