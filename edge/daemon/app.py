"""Assemble and run the daemon from a config: bundle, estimator, hardware, MQTT, recorder.

:func:`run_daemon` maps every start-up failure to its documented exit code
(:data:`edge.daemon.exitcodes.EXIT_CODES`) with a one-line error that names the cause.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge.bundle import BundleError
from edge.daemon import realtime
from edge.daemon.config import Config, ConfigError, mqtt_password
from edge.daemon.exitcodes import (EXIT_BROKER, EXIT_BUNDLE, EXIT_CONFIG, EXIT_HARDWARE,
                                   EXIT_RECORDER)
from edge.daemon.gauge import range_check
from edge.daemon.loop import Daemon
from edge.daemon.mqtt import CommandRegistry, Publisher
from edge.daemon.notify import Notifier
from edge.daemon.recorder import Recorder, RecordingError
from edge.daemon.sim_load import bundle_load_meta
from edge.daemon.sim_signal import LimitedAcquisition, SignalAcquisition, parse_faults
from edge.daemon.simulate import FileSource, InputSource, StructureSource
from edge.daemon.tare import TareAcquisition, register_tare_command
from edge.estimator import Estimator
from edge.fatigue.monitor import FatigueMonitor
from edge.hw.acquire import Acquisition, Channel
from edge.hw.ads1256 import ADS1256, input_index
from edge.hw.ads1256_spec import rate_mismatch_message, row_rates
from edge.hw.ports import MissingHardwareDependency, Pins, open_hardware
from edge.hw.sim_ads1256 import Faults
from edge.hw.sim_ports import make_simulated_hardware
from edge.inverse import (InverseHook, InverseMapError, InversePort, InverseRuntime,
                          register_commands)
from edge.signing import SignatureError, verify

log = logging.getLogger("vsense.app")


class StartupError(RuntimeError):
    def __init__(self, code: int, msg: str):
        super().__init__(msg)
        self.code = code


def load_estimator(cfg: Config):
    """Load the bundle and build the estimator (exit code 3 on failure); check that the
    configured channels match the bundle's channels (exit code 2)."""
    rt = cfg["realtime"]
    if rt["release_startup_memory"] and not rt["mlockall"]:
        # LLVM pages touched by the import itself (initialisation): drop them before the
        # kernel load touches its own, so the start-up peak is not the sum of both
        realtime.release_library_pages("libllvmlite.so")
    path = cfg.resolve(cfg["bundle"]["path"])
    try:
        est = Estimator(str(path))
    except BundleError as e:
        raise StartupError(EXIT_BUNDLE, f"bad bundle: {e}") from None
    except (ValueError, ArithmeticError, TypeError, IndexError, np.linalg.LinAlgError,
            MemoryError) as e:
        raise StartupError(EXIT_BUNDLE, f"bad bundle: {path}: estimator cannot be built: "
                                        f"{type(e).__name__}: {e}") from None
    names = [c["name"] for c in cfg.channels]
    if names != est.channel_names:
        where = cfg.path or "config"
        raise StartupError(EXIT_CONFIG, f"{where}: [[channels]] name: {names} do not match "
                                        f"the bundle's channels {est.channel_names} "
                                        f"(same names, same order) in {path}")
    cols = [f.name for f in est.bundle.forces] + [o.name for o in est.bundle.outputs]
    for i, e in enumerate(cfg["fatigue"]):
        if e["output"] not in cols:
            raise StartupError(EXIT_CONFIG, f"{cfg.path or 'config'}: [[fatigue]] #{i} output: "
                                            f"{e['output']!r} is not a force or output of "
                                            f"{path} ({', '.join(cols)})")
    drate = cfg["adc"]["drate"]
    rate = 1.0 / est.bundle.dt
    return est, rate, drate


def check_signature(cfg: Config, est) -> str | None:
    """``[bundle] public_key``: verify ``<bundle>.sig``. Returns None when model updates
    may be applied, else the reason they are locked; raises StartupError (exit code 3) when
    ``require_signature`` is set and the signature does not verify."""
    b = cfg["bundle"]
    if not b["public_key"]:
        return None
    path = cfg.resolve(b["path"])
    try:
        verify(path, est.bundle.content_hash, cfg.resolve(b["public_key"]))
    except SignatureError as e:
        if b["require_signature"]:
            raise StartupError(EXIT_BUNDLE, f"bad bundle: {e}") from None
        log.warning("model updates disabled: %s", e)
        return f"update_model refused: the bundle is not signed by the trusted key ({e})"
    log.info("bundle signature verified with %s", cfg.resolve(b["public_key"]))
    return None


def adc_mode(cfg: Config) -> str:
    """The ADS1256 read mode ``run`` uses: one channel is read continuously (RDATAC), several
    are cycled through (whatever ``[adc] mode`` says: the one definition for
    :func:`hardware_row_rate` and the driver)."""
    return "continuous" if len(cfg.channels) == 1 else "cycle"


def hardware_row_rate(cfg: Config) -> tuple[float, str]:
    """Rows per second the ADS1256 delivers for ``[adc]`` and the channel count, and the
    mode (:func:`adc_mode`), without opening hardware."""
    mode = adc_mode(cfg)
    return row_rates(len(cfg.channels), mode)[float(cfg["adc"]["drate"])], mode


@dataclass
class Checked:
    """What :func:`preflight` validated and built: the estimator, its sample rate
    [samples/s], why model updates are locked (None: they are not) and the inverse-map
    runtime (None without ``meta["inverse"]``)."""

    est: Any
    rate: float
    updates_locked: str | None
    inverse: InverseRuntime | None


def preflight(cfg: Config, simulate: bool = False) -> Checked:
    """Everything ``run`` checks before touching the hardware, in one place: ``check-config
    --bundle`` runs exactly this and :func:`build_daemon` starts with it. Bundle, channels,
    signature, row rate against the bundle's rate, inverse maps (and ``auto_update``), MQTT
    password and TLS files, the recording directory, with ``simulate`` the simulation's
    faults and file; raises StartupError (exit code 2, 3 or 5) naming the cause."""
    est, rate, _ = load_estimator(cfg)
    updates_locked = check_signature(cfg, est)
    try:  # strain-gauge channels: the expected peak within the PGA's range (edge/daemon/gauge.py)
        for w in range_check(cfg.channels, est.bundle, cfg["adc"]["vref"], cfg["adc"]["pga"]):
            log.warning(w)
    except ValueError as e:
        raise StartupError(EXIT_CONFIG, str(e)) from None
    if not simulate or cfg["simulate"]["level"] == "adc":
        row, mode = hardware_row_rate(cfg)
        if abs(row - rate) > 1e-6 * rate:
            raise StartupError(EXIT_CONFIG, rate_mismatch_message(
                cfg["adc"]["drate"], len(cfg.channels), mode, rate))
        _chain_matches(cfg, est.bundle.chain, mode)
    runtime = None
    if "inverse" in est.bundle.meta:
        try:
            runtime = InverseRuntime.from_bundle(est.bundle)
        except (InverseMapError, ValueError, KeyError, TypeError, IndexError, AttributeError,
                ArithmeticError) as e:  # a crafted entry: refused like any bad bundle
            raise StartupError(EXIT_BUNDLE, f"[bundle] inverse maps: {type(e).__name__}: "
                                            f"{e}") from None
    if cfg["inverse"]["auto_update"] and est.update_refused():  # e.g. the Kalman smoother
        raise StartupError(EXIT_CONFIG, f"[inverse] auto_update: {est.update_refused()}")
    _mqtt_settings(cfg)
    if cfg["recorder"]["enabled"]:
        _recording_dir_usable(cfg.resolve(cfg["recorder"]["dir"]))
    if simulate:  # the simulation's inputs (the structure source is built by the run)
        if cfg["simulate"]["source"] == "file":
            _simulation_source(cfg, est)
        _simulation_faults(cfg)
    return Checked(est, rate, updates_locked, runtime)


def _chain_matches(cfg: Config, chain, mode: str) -> None:
    """The ADC's data rate and mode against the measurement chain the bundle's estimator
    models (``bundle.chain``, :mod:`edge.acquisition`); StartupError (exit 2) naming both."""
    if chain.ideal:
        return
    if chain.converter != "ads1256":
        raise StartupError(EXIT_CONFIG, f"[bundle] path: the bundle's estimator models a "
                                        f"{chain.converter} acquisition ([acquisition] "
                                        f"converter = \"{chain.converter}\"); this device "
                                        f"reads an ADS1256: rebuild it for converter = "
                                        f"\"ads1256\"")
    drate = float(cfg["adc"]["drate"])
    if abs(drate - chain.drate) > 1e-9 * chain.drate:
        raise StartupError(EXIT_CONFIG, f"[adc] drate = {drate:g}: the bundle's estimator "
                                        f"models {chain.converter} conversions at "
                                        f"{chain.drate:g} SPS; set drate = {chain.drate:g} "
                                        f"or rebuild the bundle for {drate:g}")
    if mode != chain.mode:
        raise StartupError(EXIT_CONFIG, f"[adc] mode: the converter runs in {mode} mode, the "
                                        f"bundle's estimator models {chain.mode} mode; "
                                        f"rebuild the bundle with [acquisition] mode = "
                                        f"\"{mode}\"")


def _mqtt_settings(cfg: Config) -> tuple[dict, str | None]:
    """``[mqtt]`` with resolved file paths, and the password; StartupError (exit 2)."""
    try:
        pw = mqtt_password(cfg)
    except ConfigError as e:
        raise StartupError(EXIT_CONFIG, str(e)) from None
    m = dict(cfg["mqtt"])
    for k in ("ca_file", "cert_file", "key_file"):
        f = m[k]
        if f:
            if not cfg.resolve(f).is_file():
                raise StartupError(EXIT_CONFIG, f"[mqtt] {k}: {cfg.resolve(f)} does not exist")
            m[k] = str(cfg.resolve(f))
    return m, pw


def _hw_channels(cfg: Config):
    return [Channel(c["name"], c["pin"], c["pin_neg"], cfg["adc"]["pga"], c["sensitivity"],
                    c["offset"], c["unit"], c["saturation"]) for c in cfg.channels]


def _driver_acquisition(cfg: Config, spi, gpio, clock, rate: float):
    """ADS1256 driver + Acquisition on the given ports; checks the row rate."""
    a = cfg["adc"]
    try:
        pins = Pins.from_config(a["cs_pin"], a["drdy_pin"], a["reset_pin"], a["pdwn_pin"])
    except ValueError as e:
        raise StartupError(EXIT_CONFIG, f"[adc] pins: {e}") from None
    adc = ADS1256(spi, gpio, clock, pins, vref=a["vref"], speed_hz=a["spi_speed_hz"],
                  drdy_timeout_s=a["drdy_timeout_ms"] / 1e3)
    mode = adc_mode(cfg)
    acq = Acquisition(adc, _hw_channels(cfg), rate=a["drate"], mode=mode, buffer=a["buffer"],
                      nan_on_saturation=True)
    if abs(acq.nominal_rate - rate) > 1e-6 * rate:
        adc.close()
        raise StartupError(EXIT_CONFIG, rate_mismatch_message(
            a["drate"], len(cfg.channels), acq.mode, rate))
    acq.start()
    return acq


def _recording_dir_usable(path) -> None:
    """``[recorder] dir`` is a writable directory, or can be created (its nearest existing
    parent is a writable directory); StartupError (exit code 5). Creates nothing."""
    p = path
    while not os.path.lexists(p) and p.parent != p:
        p = p.parent
    if not p.is_dir():
        what = "not a directory" if p == path else f"{p} is not a directory"
        raise StartupError(EXIT_RECORDER, f"[recorder] dir: {path}: {what}")
    if not os.access(p, os.W_OK | os.X_OK):
        what = "recording directory" if p == path else f"cannot create it: {p}"
        raise StartupError(EXIT_RECORDER, f"[recorder] dir: {path}: {what} is not writable")


def _simulation_source(cfg: Config, est):
    """The simulated signal source of ``[simulate]`` (StartupError, exit code 2)."""
    sim, ch = cfg["simulate"], cfg.channels
    sens = np.array([c["sensitivity"] for c in ch])
    off = np.array([c["offset"] for c in ch])
    if sim["source"] == "file":
        try:
            return FileSource(cfg.resolve(sim["file"]), [c["name"] for c in ch], sens, off)
        except ValueError as e:
            raise StartupError(EXIT_CONFIG, f"[simulate] file: {e}") from None
    load = sim["load"]
    if load == "model" and bundle_load_meta(est.bundle) is None:
        log.warning("[simulate] load = \"model\": the bundle carries no load model (a bundle "
                    "not made by vsense-offline build): the simulated load is \"random\"")
        load = "random"
    try:
        return StructureSource(est.bundle, sens, off, load, sim["amplitude"],
                               sim["frequency"], sim["noise"], sim["seed"])
    except ValueError as e:
        raise StartupError(EXIT_CONFIG, f"[simulate] load: {e}") from None


def _simulation_faults(cfg: Config):
    """``[simulate] faults`` parsed: ``(faults, drdy_dead_at)`` (StartupError, exit 2)."""
    try:
        return parse_faults(cfg["simulate"]["faults"], len(cfg.channels))
    except ValueError as e:
        raise StartupError(EXIT_CONFIG, str(e)) from None


def make_acquisition(cfg: Config, est, simulate: bool):
    """The ADC (real or simulated), with the tare of the channels that ask for one
    (``tare_samples``, :class:`edge.daemon.tare.TareAcquisition`; with a bridge channel
    always, for the ``tare`` command). Returns ``(acquisition, virtual_clock)``."""
    acq, virtual = _make_acquisition(cfg, est, simulate)
    n = [c["tare_samples"] for c in cfg.channels]
    if any(c["bridge"] for c in cfg.channels) and not any(n):
        acq = TareAcquisition(acq, n)
    if any(n):
        log.info("tare: the mean of the first %s samples of %s subtracted (structure at rest)",
                 "/".join(str(k) for k in n if k),
                 ", ".join(c["name"] for c in cfg.channels if c["tare_samples"]))
        acq = TareAcquisition(acq, n)
    return acq, virtual


def _make_acquisition(cfg: Config, est, simulate: bool):
    sim = cfg["simulate"]
    ch = cfg.channels
    sens = np.array([c["sensitivity"] for c in ch])
    off = np.array([c["offset"] for c in ch])
    sat = np.array([c["saturation"] for c in ch])
    rate = 1.0 / est.bundle.dt
    if simulate:
        src = _simulation_source(cfg, est)
        faults, dead = _simulation_faults(cfg)
        virtual = sim["clock"] == "virtual"
        full_scale = 2 * cfg["adc"]["vref"] / cfg["adc"]["pga"]
        if sim["level"] == "signal":
            acq = SignalAcquisition(src, rate, sim["clock"], sim["duration_s"],
                                    cfg["adc"]["drdy_timeout_ms"] / 1e3, dead, faults=faults,
                                    full_scale=full_scale, sensitivity=sens, offset=off,
                                    saturation=sat)
            return acq, virtual
        inputs = [input_index(c["pin"]) for c in ch]
        hw_faults = Faults(
            stuck_drdy_after_s=dead,
            saturation=tuple((at, at + n / rate, ch[c]["pin"], 1.02 * full_scale)
                             for kind, c, at, n in faults if kind == "saturate"),
            dropouts=tuple((at, at + n / rate, ch[c]["pin"])
                           for kind, c, at, n in faults if kind == "nan"))
        spi, gpio, clock = make_simulated_hardware(InputSource(src, rate, inputs, seed=sim["seed"]),
                                                   sim["seed"], hw_faults,
                                                   virtual_clock=virtual)
        try:
            acq = _driver_acquisition(cfg, spi, gpio, clock, rate)
        except (RuntimeError, ValueError) as e:
            if isinstance(e, StartupError):
                raise
            raise StartupError(EXIT_HARDWARE, f"hardware (simulated): {e}") from None
        total = int(round(sim["duration_s"] * rate)) if sim["duration_s"] > 0 else None
        return LimitedAcquisition(acq, total), virtual
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
    """Everything but starting: raises :class:`StartupError` with the exit code. Starts
    with :func:`preflight`, so ``run`` refuses exactly what ``check-config --bundle`` does."""
    checked = preflight(cfg, simulate)
    est, rate, updates_locked = checked.est, checked.rate, checked.updates_locked
    rt = cfg["realtime"]
    if rt["release_startup_memory"] and not rt["mlockall"]:
        # the kernel is compiled/loaded (Estimator warms it up): LLVM's pages can go now,
        # before the rest of start-up adds its own memory on top of them (peak RSS)
        freed = realtime.release_library_pages("libllvmlite.so")
        if freed:
            log.info("released the LLVM compiler's resident pages (%.0f MB; the kernel is "
                     "compiled)", freed / 1e6)
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
    allowed = cfg["mqtt"]["commands"]
    registry.allowed = None if "*" in allowed else set(allowed)
    if cfg["mqtt"]["enabled"] and not allowed:
        log.info("MQTT commands: none accepted, a read-only device ([mqtt] commands is empty, "
                 "the default: list the commands to accept, e.g. [\"status\", \"pause\", "
                 "\"resume\"])")
    if "identify" not in registry.commands:  # inverse maps: identify, update_model
        register_commands(registry)
    if any(c["bridge"] for c in cfg.channels):
        register_tare_command(registry)
    if cfg["fatigue"]:
        from edge.fatigue.monitor import register_fatigue_commands

        register_fatigue_commands(registry)
    if cfg["mqtt"]["enabled"]:
        m, pw = _mqtt_settings(cfg)
        pub = Publisher(m, cfg["device"]["id"], registry, len(cols), pw)
    d = Daemon(cfg, acq, est, pub, rec, notifier, virtual, registry)
    d.updates_locked = updates_locked
    if cfg["fatigue"]:
        d.fatigue = _fatigue(cfg, cols, pub)
    if checked.inverse is not None:  # ONNX sessions and check sets verified by preflight
        InverseHook.attach(d, InversePort.of(est, pub, d.nch, getattr(acq, "source", None),
                                             lambda: d.updates_locked),
                           auto_update=cfg["inverse"]["auto_update"], runtime=checked.inverse)
    return d


def _fatigue(cfg: Config, cols: list[str], pub):
    """The [[fatigue]] hotspots (states restored now); StartupError for an unknown output."""
    publish = None
    if pub is not None:
        def publish(name, obj):
            pub.set_retained(f"{pub.topics.root}/fatigue/{name}", obj)
    try:
        return FatigueMonitor(cfg["fatigue"], cols, cfg.resolve,
                              cfg.resolve(cfg["bundle"]["path"]).parent, publish)
    except ValueError as e:
        raise StartupError(EXIT_CONFIG, str(e)) from None


def run_daemon(cfg: Config, simulate: bool = False, install_signals: bool = True,
               registry=None, require_broker: bool = False) -> int:
    """Build, start and run; return the exit code."""
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
        m = cfg["mqtt"]
        if (require_broker or m["require_broker"]) and not d.pub.wait_connected(
                m["connect_timeout_s"]):
            msg = (f"broker {d.pub.where} not reachable within {m['connect_timeout_s']:g} s: "
                   f"{d.pub.last_error or 'no answer'} (--require-broker)")
            log.error("%s", msg)
            notifier.notify(f"STATUS=failed: {msg}")
            d.abort()
            return EXIT_BROKER
    log.info("vsense-edge %s: device %s, bundle %s, %d channels at %g samples/s%s (pid %d)",
             "simulated" if simulate else "hardware", cfg["device"]["id"],
             d.est.bundle.bundle_id, d.nch, d.rate,
             ", virtual clock" if d.virtual else "", os.getpid())
    return d.run()
