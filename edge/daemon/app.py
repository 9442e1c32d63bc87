"""Assemble and run the daemon from a config: bundle, estimator, hardware, MQTT, recorder.

:func:`run_daemon` maps every start-up failure to its documented exit code
(:data:`edge.daemon.loop.EXIT_CODES`) with a one-line error that names the cause.
"""

from __future__ import annotations

import logging
import os
import signal
import threading

import numpy as np

from edge.daemon import realtime
from edge.daemon.config import Config, ConfigError, mqtt_password
from edge.daemon.loop import (EXIT_BUNDLE, EXIT_CONFIG, EXIT_HARDWARE, EXIT_RECORDER, Daemon,
                              HardwareError)

log = logging.getLogger("vsense.app")


class StartupError(RuntimeError):
    def __init__(self, code: int, msg: str):
        super().__init__(msg)
        self.code = code


def load_estimator(cfg: Config):
    """Load the bundle and build the estimator (exit code 3 on failure); check that the
    configured channels match the bundle's channels (exit code 2)."""
    from edge.bundle import BundleError
    from edge.estimator import Estimator

    path = cfg.resolve(cfg["bundle"]["path"])
    try:
        est = Estimator(str(path))
    except BundleError as e:
        raise StartupError(EXIT_BUNDLE, f"bad bundle: {e}") from None
    except (ValueError, np.linalg.LinAlgError) as e:
        raise StartupError(EXIT_BUNDLE, f"bad bundle: {path}: estimator cannot be built: "
                                        f"{e}") from None
    names = [c["name"] for c in cfg.channels]
    if names != est.channel_names:
        where = cfg.path or "config"
        raise StartupError(EXIT_CONFIG, f"{where}: [[channels]] name: {names} do not match "
                                        f"the bundle's channels {est.channel_names} "
                                        f"(same names, same order) in {path}")
    drate = cfg["adc"]["drate"]
    rate = 1.0 / est.bundle.dt
    return est, rate, drate


def make_acquisition(cfg: Config, est, simulate: bool):
    """The ADC (real or simulated). Returns ``(acquisition, virtual_clock)``."""
    sim = cfg["simulate"]
    ch = cfg.channels
    sens = np.array([c["sensitivity"] for c in ch])
    off = np.array([c["offset"] for c in ch])
    rate = 1.0 / est.bundle.dt
    if simulate:
        from edge.daemon.simulate import FileSource, SignalAcquisition, StructureSource

        if sim["source"] == "file":
            try:
                src = FileSource(cfg.resolve(sim["file"]), [c["name"] for c in ch], sens, off)
            except ValueError as e:
                raise StartupError(EXIT_CONFIG, f"[simulate] file: {e}") from None
        else:
            src = StructureSource(est.bundle, sens, off, sim["load"], sim["amplitude"],
                                  sim["frequency"], sim["noise"], sim["seed"])
        from edge.daemon.simulate import parse_faults

        try:
            faults, dead = parse_faults(sim["faults"], len(ch))
        except ValueError as e:
            raise StartupError(EXIT_CONFIG, str(e)) from None
        acq = SignalAcquisition(src, rate, sim["clock"], sim["duration_s"],
                                cfg["adc"]["drdy_timeout_ms"] / 1e3, dead, faults=faults,
                                full_scale=cfg["adc"]["vref"] * 2 / cfg["adc"]["pga"])
        return acq, sim["clock"] == "virtual"
    try:
        from edge.hw import acquire as hw_acquire  # noqa: F401
    except ImportError as e:
        raise StartupError(EXIT_HARDWARE, f"hardware: ADS1256 driver not available ({e})") \
            from None
    try:
        return hw_acquire.open_acquisition(cfg), False
    except HardwareError as e:
        raise StartupError(EXIT_HARDWARE, f"hardware: {e}") from None
    except (OSError, RuntimeError, ImportError) as e:
        raise StartupError(EXIT_HARDWARE, f"hardware: {type(e).__name__}: {e}") from None


def build_daemon(cfg: Config, simulate: bool = False, notifier=None, registry=None) -> Daemon:
    """Everything but starting: raises :class:`StartupError` with the exit code."""
    from edge.daemon.mqtt import CommandRegistry, Publisher
    from edge.daemon.recorder import Recorder, RecordingError

    est, rate, drate = load_estimator(cfg)
    if not simulate and abs(drate - rate) > 1e-9 * rate and len(cfg.channels) == 1:
        raise StartupError(EXIT_CONFIG, f"[adc] drate: {drate:g} samples/s but the bundle "
                                        f"expects {rate:g} samples/s (1/dt)")
    acq, virtual = make_acquisition(cfg, est, simulate)
    b = est.bundle
    cols = [f.name for f in b.forces] + [o.name for o in b.outputs]
    units = [f.unit for f in b.forces] + [o.unit for o in b.outputs]
    rec = None
    r = cfg["recorder"]
    if r["enabled"]:
        try:
            rec = Recorder(cfg.resolve(r["dir"]), [c["name"] for c in cfg.channels],
                           [c["unit"] for c in cfg.channels],
                           cols if r["estimates"] else None, units, rate=rate,
                           device=cfg["device"]["id"], bundle_hash=b.content_hash,
                           clock="virtual" if virtual else "monotonic",
                           rotate_s=r["rotate_s"], rotate_mb=r["rotate_mb"],
                           fsync_interval_s=r["fsync_interval_s"],
                           max_disk_mb=r["max_disk_mb"], queue_s=r["queue_s"])
        except RecordingError as e:
            raise StartupError(EXIT_RECORDER, f"[recorder] dir: {e}") from None
    pub = None
    registry = registry if registry is not None else CommandRegistry()
    if cfg["mqtt"]["enabled"]:
        try:
            pw = mqtt_password(cfg)
        except ConfigError as e:
            raise StartupError(EXIT_CONFIG, str(e)) from None
        for k in ("ca_file", "cert_file", "key_file"):
            f = cfg["mqtt"][k]
            if f and not cfg.resolve(f).is_file():
                raise StartupError(EXIT_CONFIG, f"[mqtt] {k}: {cfg.resolve(f)} does not exist")
        m = dict(cfg["mqtt"])
        for k in ("ca_file", "cert_file", "key_file"):
            if m[k]:
                m[k] = str(cfg.resolve(m[k]))
        pub = Publisher(m, cfg["device"]["id"], registry, len(cols), pw)
    return Daemon(cfg, acq, est, pub, rec, notifier, virtual, registry)


def run_daemon(cfg: Config, simulate: bool = False, install_signals: bool = True,
               registry=None) -> int:
    """Build, start and run; return the exit code."""
    from edge.daemon.notify import Notifier

    notifier = Notifier()
    realtime.apply(cfg["realtime"])
    try:
        d = build_daemon(cfg, simulate, notifier, registry)
    except StartupError as e:
        log.error("%s", e)
        notifier.notify(f"STATUS=failed: {e}")
        return e.code
    if install_signals and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, d.stop)
        signal.signal(signal.SIGINT, d.stop)
    if d.pub is not None:
        d.pub.start()
    log.info("vsense-edge %s: device %s, bundle %s, %d channels at %g samples/s%s (pid %d)",
             "simulated" if simulate else "hardware", cfg["device"]["id"],
             d.est.bundle.bundle_id, d.nch, d.rate,
             ", virtual clock" if d.virtual else "", os.getpid())
    return d.run()
