"""systemd notification protocol (``sd_notify``) over ``$NOTIFY_SOCKET``, no dependency.

``READY=1`` once the estimator kernel is compiled (or loaded from the numba cache) and the
first sample is in; ``WATCHDOG=1`` only while the loop makes progress; ``STOPPING=1`` on
shutdown; ``STATUS=...`` free text. Outside systemd (no ``NOTIFY_SOCKET``) every call is a
no-op returning False.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger("vsense.notify")


class Notifier:
    def __init__(self, env: dict | None = None):
        env = os.environ if env is None else env
        addr = env.get("NOTIFY_SOCKET", "")
        self.addr = None
        self.sock = None
        if addr:
            # "@name" = Linux abstract namespace socket
            self.addr = "\0" + addr[1:] if addr.startswith("@") else addr
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            except OSError as e:  # pragma: no cover - no AF_UNIX
                log.warning("sd_notify disabled: %s", e)
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        self.watchdog_s = None
        if usec.isdigit() and int(usec) > 0 and (not pid or pid == str(os.getpid())):
            self.watchdog_s = int(usec) / 1e6

    @property
    def enabled(self) -> bool:
        return self.sock is not None

    def notify(self, state: str) -> bool:
        """Send one datagram, e.g. ``"READY=1\\nSTATUS=running"``; False when not possible."""
        if self.sock is None:
            return False
        try:
            self.sock.sendto(state.encode("utf-8"), self.addr)
            return True
        except OSError as e:
            log.warning("sd_notify(%r) failed: %s", state.split("\n")[0], e)
            return False

    def ready(self, status: str = "") -> bool:
        return self.notify("READY=1" + (f"\nSTATUS={status}" if status else ""))

    def status(self, status: str) -> bool:
        return self.notify(f"STATUS={status}")

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class ProgressWatchdog:
    """Pings ``WATCHDOG=1`` only when a progress counter advanced since the last ping.

    ``tick(counter)`` is called from the supervising thread at least every
    ``watchdog_s / 2``; if the loop is stuck (counter unchanged) no ping is sent and systemd
    restarts the service after ``WatchdogSec``.
    """

    def __init__(self, notifier: Notifier):
        self.n = notifier
        self.last = None
        self.pings = 0

    def tick(self, counter: int) -> bool:
        if counter == self.last:
            return False
        self.last = counter
        if self.n.watchdog():
            self.pings += 1
            return True
        return False
