"""Status, meta and health of the daemon, and its supervisor (run by the I/O thread).

A :class:`Status` object owned by :class:`edge.daemon.loop.Daemon` (one job: what the device
says about itself). It reads the sample path's counters (:class:`edge.daemon.samplepath.
SamplePath`), which only the estimating thread writes, and owns the state and its reason.

* status (retained): ``starting``, ``running``, ``degraded`` (with the reason: conversions
  missed at the ADC, samples lost at the ring, estimates dropped by the publisher, recorder
  dropping data, MQTT thread dead, a topic the broker denies, wrong sample rate),
  ``paused``, ``sensor_fault``, ``stopped``;
* meta (retained): bundle, channels, columns, rate, delay, publishing format;
* health (every ``[mqtt] health_interval_s``): counters, latency percentiles, CPU, memory;
* supervisor: health messages, systemd watchdog pings only while the loop advances,
  degraded/recovered status changes, the model check's verdict changes in the log (at most
  one line per :data:`MODEL_LOG_MIN_S`), scheduled identifications.
"""

from __future__ import annotations

import json
import logging
import time

import numpy as np

from edge.daemon.health import CpuMeter, LossWatch, RowRate, cpu_temperature_c, rss_mb
from edge.daemon.notify import ProgressWatchdog

log = logging.getLogger("vsense.loop")


#: What is lost where, and the reason the status names while it happens (health counter)
LOSSES = (
    ("missed_conversions", "conversions missed at the ADC: the acquisition thread read them "
     "too late and the converter overwrote them (count: health missed_conversions)"),
    ("lost_samples", "samples lost at the ring: the estimator fell behind the ADC (count: "
     "health lost_samples)"),
    ("publish_drops", "estimates dropped: the MQTT queue is full (count: health publish "
     "drops_samples)"),
)


#: Fewest seconds between two log lines of the model check's verdict (a verdict that flips
#: faster is logged as it stands when the time has passed)
MODEL_LOG_MIN_S = 10.0


def model_verdict(mc: dict | None) -> str | None:
    """``"suspect"``, ``"ok"``, or None while the check has not judged (its window not full
    yet, or no model check: a Tikhonov estimator) of a ``model_check`` payload."""
    if not isinstance(mc, dict):
        return None
    if mc.get("suspect") is True:
        return "suspect"
    return None if mc.get("nis") is None else "ok"


def verdict_line(mc: dict) -> str:
    """The log line of a verdict: ``model check: SUSPECT (NIS/dof 14.3 (1 for a right
    model), load level 17.8x the designed force RMS): <reasons>`` or ``model check: ok
    (NIS/dof 1.02 (1 for a right model), ...)``."""
    lv, r = mc.get("load_level"), mc.get("ratio")
    what = ("NIS/dof " + ("not judged yet" if r is None else f"{r:.3g} (1 for a right model)")
            + (f", load level {lv:.3g}x the designed force RMS" if lv is not None else ""))
    if model_verdict(mc) == "suspect":
        return f"model check: SUSPECT ({what}): " + "; ".join(mc.get("reasons") or [])
    return f"model check: ok ({what})"


class Status:
    """Status/meta/health payloads and the supervisor of one daemon.

    Parameters
    ----------
    cfg : edge.daemon.config.Config
    est : edge.estimator.Estimator (bundle, std, delay, model_check, self_resets)
    acq : the acquisition (``missed_conversions`` when it can miss any)
    ring : edge.daemon.ring.Ring
    path : edge.daemon.samplepath.SamplePath (counters, latency, faults, inverse)
    pub, rec, notifier : publisher, recorder, systemd notifier, each or None
    """

    def __init__(self, cfg, est, acq, ring, path, pub=None, rec=None, notifier=None):
        self.cfg, self.est, self.acq, self.ring, self.path = cfg, est, acq, ring, path
        self.pub, self.rec, self.notifier = pub, rec, notifier
        self.names = [c["name"] for c in cfg.channels]
        self.rate = 1.0 / est.bundle.dt
        # the rate the samples really arrive at, against 1/dt (_row_rate)
        self.row_rate = RowRate(self.rate, cfg["faults"]["rate_tolerance"],
                                cfg["mqtt"]["health_interval_s"])
        self.std = getattr(est, "std", None)  # (nf + nout,) or None (Tikhonov)
        self.cpu = CpuMeter()
        self.t_start = time.monotonic()
        self.state = "starting"
        self.degraded_reason: str | None = None
        self._loss_watch: dict | None = None  # counter name: LossWatch (made on first use)
        self._self_resets_logged = 0
        self._verdict_logged, self._verdict_next_s = "ok", 0.0

    def ok_state(self) -> str:
        """``running``, or ``degraded`` while a part is failing."""
        return "running" if self.degraded_reason is None else "degraded"

    def set_state(self, state: str, **extra) -> None:
        """Change the state; publish the retained status and tell systemd."""
        if state == "degraded" and "reason" not in extra and self.degraded_reason:
            extra["reason"] = self.degraded_reason
        self.state = state
        if self.pub is not None:
            self.pub.set_retained(self.pub.topics.status, self.status_payload(**extra))
        if self.notifier is not None:
            self.notifier.status(state)

    def faults_changed(self, paused: bool) -> None:
        """A channel went into fault or recovered: ``sensor_fault`` while one is, else back
        (not while paused: resuming sets it)."""
        if not paused:
            self.set_state("sensor_fault" if self.path.faults.fault.any() else self.ok_state())

    def status_payload(self, **extra) -> dict:
        d = {"state": self.state, "t": round(time.time(), 3),
             "device": self.cfg["device"]["id"], "bundle": self.est.bundle.bundle_id}
        faulty = [self.names[c] for c in np.nonzero(self.path.faults.fault)[0]]
        if faulty:
            d["faulty_channels"] = faulty
        d.update(extra)
        return d

    def meta_payload(self) -> dict:
        b = self.est.bundle
        return {"bundle_id": b.bundle_id, "bundle_hash": b.content_hash,
                "channels": [{"name": c["name"], "unit": c["unit"]} for c in self.cfg.channels],
                "forces": [{"name": f.name, "unit": f.unit} for f in b.forces],
                "outputs": [{"name": o.name, "unit": o.unit, "kind": o.kind} for o in b.outputs],
                "columns": [f.name for f in b.forces] + [o.name for o in b.outputs],
                "estimator": b.method,
                **({"std_columns": [f"{x.name}_std" for x in (*b.forces, *b.outputs)]}
                   if self.std is not None else {}),
                "rate": self.rate, "delay_samples": self.est.delay,
                "delay_s": self.est.delay / self.rate,
                "format": self.cfg["mqtt"]["format"], "batch": self.cfg["mqtt"]["batch"],
                "raw_decimation": self.cfg["mqtt"]["raw_decimation"],
                "method": {"window": int(b.window), "alpha": float(b.alpha),
                           "discretization": b.discretization,
                           "regularization": b.regularization}}

    def publish_meta(self) -> None:
        if self.pub is not None:
            self.pub.set_retained(self.pub.topics.meta, self.meta_payload())

    def missed_conversions(self) -> int:
        """Conversions the ADC overwrote unread (the driver's count; 0 for acquisitions
        that cannot lose any, e.g. the signal-level simulation)."""
        return int(getattr(self.acq, "missed_conversions", 0))

    def _loss_counts(self) -> dict:
        return {"missed_conversions": self.missed_conversions(),
                "lost_samples": self.ring.lost,
                "publish_drops": 0 if self.pub is None else self.pub.stats["drops_samples"]}

    def health(self) -> dict:
        r, p = self.ring, self.path
        drdy = p.t_off is not None
        d = {"t": round(time.time(), 3), "state": self.state,
             "uptime_s": round(time.monotonic() - self.t_start, 3),
             "samples": p.processed, "estimates": p.estimates,
             "latency_us": (p.latency if drdy else p.latency_ring).summary(),
             "latency_from": "drdy" if drdy else "ring",
             "latency_ring_us": p.latency_ring.summary(),
             "missed_conversions": self.missed_conversions(),
             "overruns": r.overruns, "lost_samples": r.lost, "ring_depth": r.available(),
             "ring_capacity": r.capacity, "bad_samples": p.bad_samples,
             "estimator_resets": p.resets, "cpu_percent": self.cpu.percent(),
             "rss_mb": round(rss_mb(), 1), "cpu_temp_c": cpu_temperature_c()}
        rr = self._row_rate()
        d["rate_hz"] = None if rr.rate is None else round(rr.rate, 4)
        d["rate_deviation"] = None if rr.deviation is None else round(rr.deviation, 6)
        check = getattr(self.est, "model_check", None)
        mc = check() if check is not None else None
        if mc is not None:  # smoother: innovation statistics (edge.estimator.smoother)
            d["model_check"] = mc
        if self.pub is not None:
            st = self.pub.stats
            d["publish"] = {"queue_depth": self.pub.queue_depth(),
                            "drops_messages": st["drops_messages"],
                            "drops_samples": st["drops_samples"],
                            "published": st["published"],
                            "connected": self.pub.connected,
                            "unsent_samples": self.pub.unsent_samples(),
                            "connects": st["connects"], "disconnects": st["disconnects"],
                            "connect_failures": st["connect_failures"],
                            "last_error": self.pub.last_error,
                            "cmd_rejected": st["cmd_rejected"], "cmd_errors": st["cmd_errors"]}
            d["mqtt"] = self.pub.acks.health()
        if self.rec is not None:
            d["recorder"] = dict(self.rec.stats, queue_depth=self.rec.queue_depth(),
                                 problem=self.rec.degraded_reason())
        if self.degraded_reason is not None:
            d["degraded"] = self.degraded_reason
        return d

    def _row_rate(self) -> RowRate:
        """The delivered sample rate (:class:`edge.daemon.health.RowRate`), updated with the
        newest sample in the ring (I/O thread; the producer only appends)."""
        rr = self.row_rate
        r = self.ring
        h = r.head
        if h > 0:
            k = (h - 1) % r.capacity
            rr.update(int(r.seq[k]), int(r.t_ns[k]))
        return rr

    def _problems(self) -> str | None:
        """Why the device is degraded now (data lost within the last
        :data:`edge.daemon.health.LOSS_HOLD_S`: :data:`LOSSES`, the recorder; samples
        arriving at another rate than the bundle's, MQTT thread dead)."""
        reasons = []
        if self._loss_watch is None:
            self._loss_watch = {name: LossWatch() for name, _ in LOSSES}
        now = time.monotonic()
        counts = self._loss_counts()
        for name, why in LOSSES:
            if self._loss_watch[name].update(counts[name], now):
                reasons.append(why)
        r = self._row_rate().problem()
        if r:
            reasons.append(r)
        if self.pub is not None:
            for r in (self.pub.threads_problem(), self.pub.acks.problem()):
                if r:
                    reasons.append(r)
        if self.rec is not None:
            r = self.rec.degraded_reason()
            if r:
                reasons.append(r)
        return "; ".join(reasons) or None

    def check_degraded(self) -> None:
        """Supervisor: status ``degraded`` (with the reason) while a part is failing; back
        to ``running`` when it recovered. Other states (paused, sensor_fault) take
        precedence; the reason is in every health message either way."""
        reason = self._problems()
        changed = reason != self.degraded_reason
        self.degraded_reason = reason
        if reason is not None and (self.state == "running" or
                                   (self.state == "degraded" and changed)):
            log.warning("degraded: %s", reason)
            self.set_state("degraded", reason=reason)
        elif reason is None and self.state == "degraded":
            log.info("recovered: status running again")
            self.set_state("running")

    def _log_estimator_resets(self) -> None:
        """Supervisor: one warning when the estimator has reset itself since the last tick
        (after a non-finite state: ``self_resets``), not one per sample."""
        n = int(getattr(self.est, "self_resets", 0))
        seen = self._self_resets_logged
        if n > seen:
            self._self_resets_logged = n
            log.warning("estimator: the state became non-finite and the estimator reset "
                        "itself (%d time(s) since the last message, %d since the start; "
                        "health model_check resets)", n - seen, n)

    def _log_model_check(self, now: float) -> None:
        """Supervisor: one log line when the model check's verdict changed since the last
        line (ok -> suspect -> ok), at most one per :data:`MODEL_LOG_MIN_S`; the first
        verdict is logged when it is suspect."""
        check = getattr(self.est, "model_check", None)
        if check is None or now < self._verdict_next_s:
            return
        mc = check()
        v = model_verdict(mc)
        if v is None or v == self._verdict_logged:
            return
        self._verdict_logged, self._verdict_next_s = v, now + MODEL_LOG_MIN_S
        (log.warning if v == "suspect" else log.info)("%s", verdict_line(mc))

    def supervisor(self):
        """The supervisor as a generator the I/O thread advances once per tick: scheduled
        identifications, degraded/recovered status, systemd watchdog pings (only while
        samples advance, and not with the MQTT network thread dead), health messages."""
        wd = ProgressWatchdog(self.notifier) if self.notifier is not None else None
        period_wd = (self.notifier.watchdog_s / 2) if (
            self.notifier is not None and self.notifier.watchdog_s) else None
        hi = self.cfg["mqtt"]["health_interval_s"]
        step = min(hi, period_wd or hi, 0.5)
        next_s = time.monotonic() + step
        next_h = time.monotonic() + hi
        every = self.cfg["inverse"]["identify_every_s"]
        next_id = time.monotonic() + every if every > 0 else None
        while True:
            yield
            now = time.monotonic()
            if now < next_s:
                continue
            next_s = now + step
            if next_id is not None and now >= next_id and self.path.inverse is not None:
                next_id = now + every
                self.path.identify_due = True  # picked up by the acquisition thread
            self.check_degraded()
            self._log_estimator_resets()
            self._log_model_check(now)
            if wd is not None and period_wd:
                # a paused loop still consumes samples, so progress = samples processed;
                # a dead MQTT thread stops the pings too: systemd restarts the service
                mqtt_dead = self.pub is not None and self.pub.threads_problem() is not None
                if not mqtt_dead:
                    wd.tick(self.path.processed)
            if now >= next_h:
                next_h = now + hi
                if self.pub is not None:
                    self.pub.send(self.pub.topics.health, json.dumps(self.health()).encode())
