"""The MQTT side of the monitor: a subscriber feeding a :class:`DeviceView`, the CSV
recorder of received estimates, and the redraw loop shared with ``--fleet``."""

from __future__ import annotations

import csv
import threading
import time

from edge.monitor.connect import BrokerSession, plain_settings
from edge.monitor.payload import csv_name
from edge.monitor.view import CLEAR, DeviceView


class CsvRecorder:
    """Writes estimates as ``time,seq,<columns>,flags``; rows before ``meta`` are held."""

    def __init__(self, path: str, view: DeviceView):
        self.path = path
        try:
            self.fh = open(path, "w", newline="")
        except OSError as e:
            raise ValueError(f"--csv: cannot write {path}: {e.strerror or e}") from None
        self.w = csv.writer(self.fh)
        self.view = view
        self.header = None
        self.pending: list = []
        self.rows = 0

    def __call__(self, rows: dict) -> None:  # called under view.lock
        if self.header is None:
            if self.view.meta is None or "columns" not in self.view.meta:
                self.pending.append(rows)
                return
            self.header = ["time", "seq", *map(csv_name, self.view.meta["columns"]), "flags"]
            self.w.writerow(self.header)
            for r in self.pending:
                self._write(r)
            self.pending.clear()
        self._write(rows)

    def _write(self, rows: dict) -> None:
        for s, t, v, f in zip(rows["seq"], rows["t_ns"], rows["v"], rows["flags"]):
            self.w.writerow([repr(int(t) / 1e9), int(s), *(repr(float(x)) for x in v), int(f)])
            self.rows += 1

    def close(self) -> None:
        with self.view.lock:
            if self.header is None and self.pending:  # never got meta: generic names
                ncol = self.pending[0]["v"].shape[1]
                self.header = ["time", "seq", *[f"c{i}" for i in range(ncol)], "flags"]
                self.w.writerow(self.header)
                for r in self.pending:
                    self._write(r)
        self.fh.close()


class DeviceSubscriber:
    """A broker session (:class:`edge.monitor.connect.BrokerSession`) feeding a
    :class:`DeviceView` from ``<base>/<device>/#``; ``settings`` (from
    :func:`edge.monitor.connect.broker_settings`) carry login and TLS, else an anonymous
    plain connection to ``host:port``."""

    def __init__(self, host: str, port: int, device: str, base: str = "vsense",
                 view: DeviceView | None = None, client_id: str | None = None,
                 settings: dict | None = None):
        self.view = view or DeviceView()
        self.prefix = f"{base}/{device}/"
        self.view.topic_prefix = self.prefix  # malformed messages are named by topic
        cid = client_id or f"vsense-monitor-{device}-{threading.get_ident() % 100000}"

        def on_message(topic, payload):
            if topic.startswith(self.prefix):
                self.view.feed(topic[len(self.prefix):], payload)

        s = settings if settings is not None else plain_settings(host, port, base)
        self.session = BrokerSession(s, [(self.prefix + "#", 1)], on_message, cid)
        self.client = self.session.client
        self.subscribed = self.session.subscribed

    @property
    def connected(self) -> bool:
        return self.session.connected

    def start(self, timeout: float = 10.0) -> None:
        """Connect, log in and subscribe; ConnectionError names the broker and why not."""
        self.session.start(timeout)

    def stop(self) -> None:
        self.session.stop()


def redraw(out, frame, clear: bool, interval: float, duration: float | None) -> None:
    """Write ``frame()`` every ``interval`` s (the screen cleared first when ``clear``) until
    ``duration`` s have passed (None: until interrupted). Used by both monitor views."""
    t0 = time.monotonic()
    while duration is None or time.monotonic() - t0 < duration:
        out.write((CLEAR if clear else "") + frame() + ("\n" if clear else "\n\n"))
        out.flush()
        time.sleep(interval)
