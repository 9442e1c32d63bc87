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
    from edge.estimator import Estimator  # numba + llvmlite: ~90 MB resident after import

    rt = cfg["realtime"]
    if rt["release_compiler_memory"] and not rt["mlockall"]:
        # LLVM pages touched by the import itself (initialisation): drop them before the
        # kernel load touches its own, so the start-up peak is not the sum of both
        realtime.release_library_pages("libllvmlite.so")
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


def _hw_channels(cfg: Config):
    from edge.hw.acquire import Channel

    return [Channel(c["name"], c["pin"], c["pin_neg"], cfg["adc"]["pga"], c["sensitivity"],
                    c["offset"], c["unit"], c["saturation"]) for c in cfg.channels]


def _driver_acquisition(cfg: Config, spi, gpio, clock, rate: float):
    """ADS1256 driver + Acquisition on the given ports; checks the row rate."""
    from edge.hw.acquire import Acquisition
    from edge.hw.ads1256 import ADS1256
    from edge.hw.ports import Pins

    a = cfg["adc"]
    try:
        pins = Pins.from_config(a["cs_pin"], a["drdy_pin"], a["reset_pin"], a["pdwn_pin"])
    except ValueError as e:
        raise StartupError(EXIT_CONFIG, f"[adc] pins: {e}") from None
    adc = ADS1256(spi, gpio, clock, pins, vref=a["vref"], speed_hz=a["spi_speed_hz"],
                  drdy_timeout_s=a["drdy_timeout_ms"] / 1e3)
    mode = "continuous" if len(cfg.channels) == 1 and a["mode"] == "continuous" else "auto"
    acq = Acquisition(adc, _hw_channels(cfg), rate=a["drate"], mode=mode, buffer=a["buffer"],
                      nan_on_saturation=True)
    if abs(acq.nominal_rate - rate) > 1e-6 * rate:
        adc.close()
        raise StartupError(EXIT_CONFIG, f"[adc] drate: {a['drate']:g} SPS gives "
                                        f"{acq.nominal_rate:g} rows/s in {acq.mode} mode with "
                                        f"{len(cfg.channels)} channel(s), but the bundle "
                                        f"expects {rate:g} samples/s (1/dt)")
    acq.start()
    return acq


def make_acquisition(cfg: Config, est, simulate: bool):
    """The ADC (real or simulated). Returns ``(acquisition, virtual_clock)``."""
    sim = cfg["simulate"]
    ch = cfg.channels
    sens = np.array([c["sensitivity"] for c in ch])
    off = np.array([c["offset"] for c in ch])
    sat = np.array([c["saturation"] for c in ch])
    rate = 1.0 / est.bundle.dt
    if simulate:
        from edge.daemon.simulate import (FileSource, InputSource, LimitedAcquisition,
                                          SignalAcquisition, StructureSource, parse_faults)

        if sim["source"] == "file":
            try:
                src = FileSource(cfg.resolve(sim["file"]), [c["name"] for c in ch], sens, off)
            except ValueError as e:
                raise StartupError(EXIT_CONFIG, f"[simulate] file: {e}") from None
        else:
            src = StructureSource(est.bundle, sens, off, sim["load"], sim["amplitude"],
                                  sim["frequency"], sim["noise"], sim["seed"])
        try:
            faults, dead = parse_faults(sim["faults"], len(ch))
        except ValueError as e:
            raise StartupError(EXIT_CONFIG, str(e)) from None
        virtual = sim["clock"] == "virtual"
        full_scale = 2 * cfg["adc"]["vref"] / cfg["adc"]["pga"]
        if sim["level"] == "signal":
            acq = SignalAcquisition(src, rate, sim["clock"], sim["duration_s"],
                                    cfg["adc"]["drdy_timeout_ms"] / 1e3, dead, faults=faults,
                                    full_scale=full_scale, sensitivity=sens, offset=off,
                                    saturation=sat)
            return acq, virtual
        from edge.hw.ads1256 import input_index
        from edge.hw.sim_ads1256 import Faults, make_simulated_hardware

        inputs = [input_index(c["pin"]) for c in ch]
        hw_faults = Faults(
            stuck_drdy_after_s=dead,
            saturation=tuple((at, at + n / rate, ch[c]["pin"], 1.02 * full_scale)
                             for kind, c, at, n in faults if kind == "saturate"),
            dropouts=tuple((at, at + n / rate, ch[c]["pin"])
                           for kind, c, at, n in faults if kind == "nan"))
        spi, gpio, clock = make_simulated_hardware(InputSource(src, rate, inputs),
                                                   sim["seed"], hw_faults,
                                                   virtual_clock=virtual,
                                                   max_lead_us=sim["max_lead_us"])
        try:
            acq = _driver_acquisition(cfg, spi, gpio, clock, rate)
        except (RuntimeError, ValueError) as e:
            if isinstance(e, StartupError):
                raise
            raise StartupError(EXIT_HARDWARE, f"hardware (simulated): {e}") from None
        total = int(round(sim["duration_s"] * rate)) if sim["duration_s"] > 0 else None
        return LimitedAcquisition(acq, total), virtual
    try:
        from edge.hw.ports import MissingHardwareDependency, Pins, open_hardware
    except ImportError as e:
        raise StartupError(EXIT_HARDWARE, f"hardware: ADS1256 driver not available ({e})") \
            from None
    a = cfg["adc"]
    try:
        spi, gpio, clock = open_hardware(
            Pins.from_config(a["cs_pin"], a["drdy_pin"], a["reset_pin"], a["pdwn_pin"]),
            a["spi_bus"], a["spi_device"], a["spi_speed_hz"])
        return _driver_acquisition(cfg, spi, gpio, clock, rate), False
    except StartupError:
        raise
    except MissingHardwareDependency as e:
        raise StartupError(EXIT_HARDWARE, f"hardware: {e}") from None
    except (OSError, RuntimeError, ValueError) as e:
        raise StartupError(EXIT_HARDWARE, f"hardware: {type(e).__name__}: {e}") from None


def build_daemon(cfg: Config, simulate: bool = False, notifier=None, registry=None) -> Daemon:
    """Everything but starting: raises :class:`StartupError` with the exit code."""
    from edge.daemon.mqtt import CommandRegistry, Publisher
    from edge.daemon.recorder import Recorder, RecordingError

    est, rate, drate = load_estimator(cfg)
    rt = cfg["realtime"]
    if rt["release_compiler_memory"] and not rt["mlockall"]:
        # the kernel is compiled/loaded (Estimator warms it up): LLVM's pages can go now,
        # before the rest of start-up adds its own memory on top of them (peak RSS)
        realtime.release_library_pages("libllvmlite.so")
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
    if "identify" not in registry.commands:  # inverse maps: identify, update_model
        from edge.inverse import register_commands

        register_commands(registry)
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
    d = Daemon(cfg, acq, est, pub, rec, notifier, virtual, registry)
    if "inverse" in b.meta:  # ONNX sessions created and check sets verified at start-up
        from edge.inverse import InverseHook, InverseMapError

        try:
            InverseHook.attach(d, auto_update=cfg["inverse"]["auto_update"])
        except InverseMapError as e:
            raise StartupError(EXIT_BUNDLE, f"[bundle] inverse maps: {e}") from None
    return d


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
