"""The daemon's fatigue hotspots (``[[fatigue]]`` of the device configuration): one streaming
counter per hotspot fed with its estimate column, its state restored at start and saved
atomically every ``save_every_s`` and at a clean stop, its summary published retained every
``publish_every_s``. Runs on the daemon's I/O thread, per block, never on the sample path.
"""

from __future__ import annotations

import logging
import time

import numpy as np

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

    def feed(self, V: np.ndarray) -> None:
        """Estimate rows ``(n, ncol)`` of one handover (NaN rows are gaps)."""
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
        now = self.clock()
        for it in self.items:
            try:
                it["saver"].tick()
            except OSError as exc:
                log.warning("fatigue %s: saving %s failed: %s", it["counter"].hotspots[0].name,
                            it["path"], exc)
            if self.publish is not None and (it["last_pub"] is None
                                             or now - it["last_pub"] >= it["every"]):
                self.publish(it["counter"].hotspots[0].name, self.payload(it))
                it["last_pub"] = now

    def close(self) -> None:
        """A clean stop: save every state and publish the final summaries."""
        for it in self.items:
            try:
                it["saver"].save()
            except OSError as exc:
                log.warning("fatigue: saving %s failed: %s", it["path"], exc)
            if self.publish is not None:
                self.publish(it["counter"].hotspots[0].name, self.payload(it))
