"""The daemon's fatigue hotspots (``[[fatigue]]`` of the device configuration): one streaming
counter per hotspot fed with its estimate column, its state restored at start and saved
atomically every ``save_every_s`` and at a clean stop, its summary published retained every
``publish_every_s``. Runs on the daemon's I/O thread, per block, never on the sample path.
"""

from __future__ import annotations

import logging
import queue
import time

import numpy as np

from edge.daemon.commands import CommandError
from edge.fatigue.damage import HistogramBins
from edge.fatigue.persist import PeriodicSaver, restore
from edge.fatigue.rainflow import Hotspot, RainflowCounter
from edge.fatigue.sn_curve import curve

log = logging.getLogger("vsense.fatigue")


class FatigueMonitor:
    """``entries``: the validated ``[[fatigue]]`` tables; ``columns``: the estimate row's
    column names (forces, then outputs); ``resolve(path)``: a configured path to a Path;
    ``publish(output, dict)``: the retained publish (or None)."""

    def __init__(self, entries, columns, resolve, default_dir, publish=None,
                 clock=time.monotonic):
        self.publish, self.clock = publish, clock
        self.items = []
        #: reset requests from the command thread, applied on the I/O thread (feed, tick)
        self.resets: queue.SimpleQueue = queue.SimpleQueue()
        #: the last published summary per hotspot (built on the I/O thread: consistent)
        self.last: dict[str, dict] = {}
        for e in entries:
            if e["output"] not in columns:
                raise ValueError(f"[[fatigue]] output {e['output']!r} is not a force or "
                                 f"output of the bundle ({', '.join(columns)})")
            hs = Hotspot(e["output"], curve(e["curve"]), e["scale"],
                         HistogramBins(e["range_max"], e["mean_lo"], e["mean_hi"]))
            c = RainflowCounter([hs], n_range=e["bins"], n_mean=e["bins"])
            path = resolve(e["state_file"]) if e["state_file"] else \
                default_dir / f"fatigue-{e['output']}.state"
            how = restore(path, c)
            log.info("fatigue %s: state %s (%s), %d samples counted before", e["output"],
                     how, path, c.summary()["samples"])
            self.items.append({"col": columns.index(e["output"]), "counter": c,
                               "saver": PeriodicSaver(path, c, e["save_every_s"], clock),
                               "every": e["publish_every_s"], "last_pub": None,
                               "path": path})

    @property
    def names(self) -> list[str]:
        return [it["counter"].hotspots[0].name for it in self.items]

    def _apply_resets(self) -> None:
        while not self.resets.empty():
            name = self.resets.get_nowait()
            for it in self.items:
                if name is None or it["counter"].hotspots[0].name == name:
                    it["counter"].reset()
                    it["saver"].save()   # a restart must not bring the old count back
                    it["last_pub"] = None
                    log.info("fatigue %s: reset by command", it["counter"].hotspots[0].name)

    def feed(self, V: np.ndarray) -> None:
        """Estimate rows ``(n, ncol)`` of one handover (NaN rows are gaps)."""
        if not self.resets.empty():
            self._apply_resets()
        for it in self.items:
            c = it["col"]
            it["counter"].update(V[:, c:c + 1])

    def payload(self, it) -> dict:
        s = it["counter"].summary()
        c = it["counter"]
        s["histogram"] = {"range_max": c.hotspots[0].bins.range_max,
                          "mean_lo": c.hotspots[0].bins.mean_lo,
                          "mean_hi": c.hotspots[0].bins.mean_hi,
                          "counts": c.hist[0].tolist()}
        return s

    def tick(self) -> None:
        """Save and publish what is due (the I/O thread's idle tick)."""
        if not self.resets.empty():
            self._apply_resets()
        now = self.clock()
        for it in self.items:
            try:
                it["saver"].tick()
            except OSError as exc:
                log.warning("fatigue %s: saving %s failed: %s", it["counter"].hotspots[0].name,
                            it["path"], exc)
            if it["last_pub"] is None or now - it["last_pub"] >= it["every"]:
                self._publish(it)
                it["last_pub"] = now

    def _publish(self, it) -> None:
        p = self.payload(it)
        self.last[p["hotspot"]] = p
        if self.publish is not None:
            self.publish(p["hotspot"], p)

    def close(self) -> None:
        """A clean stop: save every state and publish the final summaries."""
        for it in self.items:
            try:
                it["saver"].save()
            except OSError as exc:
                log.warning("fatigue: saving %s failed: %s", it["path"], exc)
            self._publish(it)


def register_fatigue_commands(registry) -> None:
    """``fatigue_reset`` and ``fatigue_export`` (accepted only when listed in ``[mqtt]
    commands``). Both act through the I/O thread's copies: a reset is queued and applied
    before the next block is counted (and the zeroed state saved at once); an export returns
    the last published summaries."""
    def monitor(d, args):
        m = d.fatigue
        if m is None:
            raise CommandError("no [[fatigue]] hotspot on this device")
        out = args.get("output")
        if out is not None and out not in m.names:
            raise CommandError(f"no fatigue hotspot {out!r} (hotspots: {', '.join(m.names)})")
        return m, out

    def reset(d, args):
        m, out = monitor(d, args)
        m.resets.put(out)
        return {"reset": [out] if out is not None else m.names}

    def export(d, args):
        m, out = monitor(d, args)
        names = [out] if out is not None else m.names
        return {"fatigue": {n: m.last.get(n) for n in names}}

    for name, fn, doc in (
            ("fatigue_reset", reset, "zero a fatigue hotspot's count (args.output; all when "
                                     "omitted), applied before the next block"),
            ("fatigue_export", export, "the last published fatigue summaries (args.output; "
                                       "all when omitted)")):
        if name not in registry.commands:
            registry.register(name, fn, args={"output": str}, doc=doc)
