"""The daemon configuration's schema: every key with its type, default, unit, limits and
description, and the Markdown reference generated from it (``vsense-edge config-reference``,
embedded in ``docs/daemon.md``). Validation and loading: :mod:`edge.daemon.config`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_PATH = Path("/etc/vsense/edge.toml")

#: ADS1256 data rates (samples/s) selectable with the DRATE register (datasheet table 13).
ADS1256_DRATES = (2.5, 5.0, 10.0, 15.0, 25.0, 30.0, 50.0, 60.0, 100.0, 500.0, 1000.0, 2000.0,
                  3750.0, 7500.0, 15000.0, 30000.0)
#: ADS1256 programmable gain amplifier settings.
ADS1256_PGA = (1, 2, 4, 8, 16, 32, 64)
ADS1256_PINS = ("AIN0", "AIN1", "AIN2", "AIN3", "AIN4", "AIN5", "AIN6", "AIN7", "AINCOM")

REQUIRED = object()  # marker: the key has no default


@dataclass(frozen=True)
class Key:
    """One configuration key: type, default, unit, limits and description."""

    name: str
    type: str  # "str", "int", "float", "bool", "list[int]", "list[str]", "list[float]"
    default: Any
    description: str
    unit: str = ""
    min: float | None = None
    max: float | None = None
    choices: tuple | None = None
    pattern: str | None = None


@dataclass(frozen=True)
class Section:
    name: str
    description: str
    keys: tuple[Key, ...]
    array: bool = False  # [[name]] array of tables
    min_items: int = 0
    max_items: int | None = None


_ID = r"^[A-Za-z0-9_.-]{1,64}$"

SCHEMA: tuple[Section, ...] = (
    Section("device", "Identity of this device.", (
        Key("id", "str", REQUIRED, "Device id: MQTT client id and topic level "
            "`vsense/<id>/`; letters, digits, `_ . -`.", pattern=_ID),
        Key("log_level", "str", "info", "Log level.",
            choices=("debug", "info", "warning", "error")),
    )),
    Section("bundle", "The model bundle built offline (`vsense-offline build`).", (
        Key("path", "str", "/var/lib/vsense/bundle.npz", "Bundle file (.npz); relative paths "
            "are relative to the config file.", pattern=r"^.+$"),
        Key("block", "int", 1, "Samples per estimator call (1 = per sample, lowest latency; "
            "larger blocks raise throughput).", unit="samples", min=1, max=4096),
        Key("public_key", "str", "", "Ed25519 public key (PEM file) of the bundle signer. "
            "When set, `update_model` only applies parameters to a bundle whose signature "
            "file `<bundle>.sig` verifies with this key (needs the `sign` extra: "
            "`cryptography`)."),
        Key("require_signature", "bool", False, "Refuse to start (exit code 3) unless the "
            "bundle's signature verifies with `public_key`."),
    )),
    Section("adc", "ADS1256 analog-to-digital converter (Waveshare High-Precision AD/DA "
            "board pinout by default, BCM numbering).", (
        Key("spi_bus", "int", 0, "SPI bus (`/dev/spidev<bus>.<device>`).", min=0, max=6),
        Key("spi_device", "int", 0, "SPI chip select of the bus.", min=0, max=3),
        Key("spi_speed_hz", "int", 1_920_000, "SPI clock; at most f_CLKIN/4 = 1.92 MHz "
            "for the 7.68 MHz crystal.", unit="Hz", min=10_000, max=1_920_000),
        Key("cs_pin", "int", 22, "Chip-select GPIO driven by software (-1: SPI hardware "
            "CS).", min=-1, max=27),
        Key("drdy_pin", "int", 17, "DRDY GPIO (input, active low).", min=0, max=27),
        Key("reset_pin", "int", 18, "RESET GPIO (-1: not wired).", min=-1, max=27),
        Key("pdwn_pin", "int", 27, "PDWN/SYNC GPIO (-1: not wired).", min=-1, max=27),
        Key("drate", "float", 1000.0, "Output data rate of the converter. With more than "
            "one channel the mux is cycled, so the per-channel rate is lower; it must equal "
            "the bundle's 1/dt.", unit="samples/s", choices=ADS1256_DRATES),
        Key("pga", "int", 1, "Programmable gain.", choices=ADS1256_PGA),
        Key("buffer", "bool", False, "Enable the analog input buffer."),
        Key("vref", "float", 2.5, "Reference voltage.", unit="V", min=0.5, max=5.0),
        Key("mode", "str", "cycle", "`cycle`: mux cycled through the channels each sample; "
            "`continuous`: one channel read with RDATAC. One channel is always read "
            "continuously, several always cycled.", choices=("cycle", "continuous")),
        Key("drdy_timeout_ms", "float", 100.0, "DRDY not seen for this long = hardware "
            "error (exit code 4).", unit="ms", min=1.0, max=10_000.0),
    )),
    Section("channels", "Measured channels, in the bundle's channel order (names must match "
            "the bundle). Physical value = (volts - offset) / sensitivity.", (
        Key("name", "str", REQUIRED, "Channel name as in the bundle meta.", pattern=_ID),
        Key("pin", "str", REQUIRED, "Positive input.", choices=ADS1256_PINS),
        Key("pin_neg", "str", "AINCOM", "Negative input.", choices=ADS1256_PINS),
        Key("sensitivity", "float", 1.0, "Sensor sensitivity, volts per physical unit "
            "(e.g. 0.1 V/(m/s^2)); must not be 0.", unit="V/unit", min=-1e12, max=1e12),
        Key("offset", "float", 0.0, "Voltage at zero physical value.", unit="V", min=-100.0,
            max=100.0),
        Key("unit", "str", "m/s^2", "Physical unit (documentation, published in `meta`)."),
        Key("saturation", "float", 4.9, "|volts| at or above this = saturated sample "
            "(flag bit2, treated like a missing value); full scale is 2 VREF/PGA.",
            unit="V", min=0.0, max=100.0),
        Key("bridge", "str", "", "Strain-gauge channel: its Wheatstone bridge, `quarter`, "
            "`half` or `full` (empty: not a gauge). The sensitivity then follows from "
            "V_out / V_ex = k GF eps / 4 with k = 1, 2, 4 active arms (the quarter bridge "
            "linearised; docs/strain-gauges.md) and `sensitivity` must not be given; `unit` "
            "is `strain` or `microstrain`, as the bundle's channel.",
            choices=("", "quarter", "half", "full")),
        Key("gauge_factor", "float", 2.0, "Gauge factor GF of a bridge channel (dR/R = GF "
            "eps; > 0, about 2 for metal foil gauges).", min=-1e6, max=1e6),
        Key("excitation_v", "float", 5.0, "Bridge excitation voltage of a bridge channel "
            "(> 0).", unit="V", min=-1e3, max=1e3),
        Key("tare_samples", "int", 0, "Tare at start: the mean of this channel's first N "
            "samples (the structure at rest) is subtracted from all its samples; during "
            "them the running mean is (0: no tare).", unit="samples", min=0,
            max=10_000_000),
        Key("range", "float", 0.0, "Expected largest |value| of the channel in its unit; "
            "a bridge channel whose peak (this, or 4x the channel std the bundle states) "
            "exceeds the input range 2 VREF/PGA is refused at start-up (0: from the "
            "bundle).", min=0.0, max=1e12),
    ), array=True, min_items=1, max_items=8),
    Section("faults", "Handling of bad (non-finite or saturated) samples.", (
        Key("bad_sample_limit", "int", 50, "After this many consecutive bad samples of a "
            "channel the device publishes status `sensor_fault`; when the channel recovers "
            "the estimator state is reset.", unit="samples", min=1, max=10_000_000),
        Key("rate_tolerance", "float", 0.005, "Largest accepted relative difference between "
            "the rate the samples really arrive at (from their DRDY times, over each health "
            "interval) and the bundle's 1/dt; beyond it the status is `degraded` (the "
            "estimator's time step then differs from the samples': multiplexer cycling "
            "slowed by the driver, conversions missed). 0 = no check; health always reports the measured "
            "`rate_hz`.", min=0.0, max=0.5),
    )),
    Section("inverse", "Inverse maps of the bundle (built from a model file with "
            "`[[parameters]]`): scheduled identification and model update. The rig applies the "
            "known excitation of the map's experiment when a capture is armed.", (
        Key("identify_every_s", "float", 0.0, "Arm an identification (the `identify` command) "
            "this often; 0 = only on command.", unit="s", min=0.0, max=1e7),
        Key("map", "str", "", "Map to use for scheduled identifications (empty: the bundle's "
            "default map)."),
        Key("auto_update", "bool", False, "Apply an in-range identification to the estimator "
            "at once (otherwise: the `update_model` command). Not with a Kalman-smoother "
            "bundle, whose gains are computed offline (refused at start-up)."),
    )),
    Section("mqtt", "MQTT publishing (paho-mqtt 2.x).", (
        Key("enabled", "bool", True, "Publish over MQTT."),
        Key("host", "str", "localhost", "Broker host (name or address).",
            pattern=r"^[A-Za-z0-9_.:%-]{1,253}$"),
        Key("port", "int", 1883, "Broker port (8883 usual for TLS).", min=1, max=65535),
        Key("keepalive", "int", 30, "Keep-alive interval.", unit="s", min=5, max=3600),
        Key("protocol", "str", "auto", "MQTT version: `auto` = v5, and 3.1.1 when the broker "
            "refuses v5 ('unsupported protocol version') or closes the connection before answering "
            "it; `5` or `3.1.1` forces one (`3.1.1` for amqtt, which leaves a v5 CONNECT "
            "unanswered). Only v5 "
            "shows a topic the broker denies (health `mqtt` `denied`, status `degraded`).",
            choices=("auto", "5", "3.1.1")),
        Key("base_topic", "str", "vsense", "Topic root: topics are `<base>/<device id>/...`.",
            pattern=r"^[^#+\s]{1,64}$"),
        Key("qos", "int", 1, "QoS of `estimates` and `health` (status/meta/replies use "
            "QoS 1).", choices=(0, 1, 2)),
        Key("format", "str", "json", "Payload of `estimates`: `json` or `binary` (layout in "
            "docs/daemon.md).", choices=("json", "binary")),
        Key("batch", "int", 50, "Samples per `estimates` message.", unit="samples", min=1,
            max=100_000),
        Key("max_batch_delay_s", "float", 0.1, "A partial batch is sent after this long.",
            unit="s", min=0.0, max=60.0),
        Key("queue_messages", "int", 2000, "Outgoing queue bound; when full the OLDEST "
            "estimates message is dropped and counted (`publish_drops`).", unit="messages",
            min=1, max=10_000_000),
        Key("raw_decimation", "int", 0, "Also publish the measured channels on `raw`, every "
            "N-th sample (physical units, no anti-alias filter: for live displays); 0 = off.",
            unit="samples", min=0, max=100_000),
        Key("health_interval_s", "float", 5.0, "Period of `health` messages.", unit="s",
            min=0.1, max=3600.0),
        Key("reconnect_min_s", "float", 1.0, "First reconnect delay (doubles up to the "
            "maximum).", unit="s", min=0.1, max=600.0),
        Key("reconnect_max_s", "float", 30.0, "Largest reconnect delay.", unit="s", min=0.1,
            max=3600.0),
        Key("resend_unheard_s", "float", 10.0, "For this long after each (re)connection a "
            "QoS 1 message the broker acknowledges with 'No matching subscribers' (MQTT v5) "
            "is published again (after 0.25, 0.5, 1, ... s): consumers that subscribe again "
            "after a broker restart (Mosquitto 2.0 does not restore shared subscriptions) "
            "still get what was sent before; 0 = off.", unit="s", min=0.0, max=600.0),
        Key("tls", "bool", False, "Use TLS."),
        Key("ca_file", "str", "", "CA certificate (PEM); empty = system store."),
        Key("cert_file", "str", "", "Client certificate (PEM) for mutual TLS."),
        Key("key_file", "str", "", "Client key (PEM) for mutual TLS."),
        Key("username", "str", "", "User name; empty = anonymous."),
        Key("password_env", "str", "", "Name of the environment variable holding the "
            "password (never the password itself)."),
        Key("commands", "list[str]", [], "Commands accepted on `cmd` (allow-list); `[]` "
            "(the default) = none: a read-only device, every command is answered 'not "
            "allowed on this device ([mqtt] commands)'; list the ones the device takes, e.g. "
            "`[\"status\", \"health\", \"pause\", \"resume\"]`, or `[\"*\"]` for every "
            "registered command."),
        Key("require_broker", "bool", False, "Fail fast: exit with code 7 when the broker "
            "has not accepted the connection within `connect_timeout_s` of the start (same "
            "as `vsense-edge run --require-broker`)."),
        Key("connect_timeout_s", "float", 10.0, "Time allowed for the first connection "
            "with `require_broker`.", unit="s", min=0.1, max=600.0),
    )),
    Section("recorder", "Local recording of raw samples and estimates. It never stalls "
            "estimation or MQTT: data it cannot write in time is dropped, counted in health "
            "(`dropped_samples`) and the status says `degraded` with the reason.", (
        Key("enabled", "bool", True, "Record raw samples (and estimates)."),
        Key("dir", "str", "/var/lib/vsense/recordings", "Directory of the recording files.",
            pattern=r"^.+$"),
        Key("estimates", "bool", True, "Also record estimates (`est-*.vsr`)."),
        Key("rotate_s", "float", 3600.0, "Start a new file after this long.", unit="s",
            min=1.0, max=86400.0 * 7),
        Key("rotate_mb", "float", 64.0, "... or after this size.", unit="MB", min=0.01,
            max=1e5),
        Key("fsync_interval_s", "float", 1.0, "Flush and fsync at least this often (bounds "
            "what a power cut can lose).", unit="s", min=0.01, max=600.0),
        Key("max_disk_mb", "float", 2048.0, "Cap on the recording directory; the oldest "
            "files are deleted (counted in health). A full disk deletes only earlier runs' "
            "files, never this run's: past that, new data is dropped and counted and the "
            "status is `degraded`.", unit="MB", min=0.01, max=1e7),
        Key("close_timeout_s", "float", 10.0, "At shutdown, time the writer gets to write "
            "what is queued; whatever the disk does, the daemon stops after this (the rest "
            "is counted as dropped).", unit="s", min=0.1, max=600.0),
        Key("queue_s", "float", 60.0, "Recorder queue capacity in seconds of data; a disk "
            "stalled longer than this makes the recorder drop (and count) chunks; estimation "
            "and MQTT go on.", unit="s", min=1.0, max=3600.0),
    )),
    Section("realtime", "Optional real-time settings; each one that is not permitted logs a "
            "warning and the daemon continues.", (
        Key("sched_fifo_priority", "int", 0, "SCHED_FIFO priority of the acquisition thread "
            "(0 = normal scheduling; needs LimitRTPRIO). Set it (e.g. 50) on a device that "
            "runs other work: the one wake-up per sample then is not delayed by it, which "
            "bounds the DRDY-to-estimate latency and keeps samples from being lost.",
            min=0, max=99),
        Key("cpu_affinity", "list[int]", [], "CPUs of the process (empty = all): keep the "
            "daemon off a core reserved for other work.", min=0, max=1023),
        Key("mlockall", "bool", False, "Lock all pages in memory (needs LimitMEMLOCK): no "
            "page fault in the sample path on a device that swaps; costs the start-up "
            "memory (`release_startup_memory` is skipped)."),
        Key("release_startup_memory", "bool", True, "Before the first sample, give back the "
            "memory start-up used and the running daemon does not (the LLVM compiler's "
            "library pages, the C heap's free memory, the clean pages of the other mapped "
            "libraries; `madvise(MADV_DONTNEED)`, `malloc_trim`): about half the resident "
            "memory of the base install; pages used again fault back from the page cache. "
            "Switch off only to measure without it; skipped with `mlockall`."),
    )),
    Section("simulate", "`vsense-edge run --simulate`: a simulated ADS1256 instead of the "
            "hardware.", (
        Key("level", "str", "adc", "`adc`: byte-level ADS1256 simulator read by the real "
            "driver (one channel: continuous mode at `[adc] drate`; several: mux cycling, "
            "whose row rate must equal the bundle's); `signal`: values injected after the "
            "driver (any channel count, all fault kinds).", choices=("adc", "signal")),
        Key("source", "str", "structure", "`structure`: the bundle's own model driven by "
            "`load`; `file`: a measurement CSV (`time,<channels>`, SI units).",
            choices=("structure", "file")),
        Key("file", "str", "", "Measurement CSV for `source = \"file\"`."),
        Key("load", "str", "model", "Load for `structure`: `model` (default) is the "
            "bundle's own load model, the one it was built for (learned with `build "
            "--record`, else the model file's `[design_load]` declaration; the load `limit "
            "--bundle` uses) times `amplitude`, with each sensor's noise the bundle's own, so "
            "the model check says ok unless `amplitude` departs from 1 by more than the "
            "tracked load levels (a bundle without a load model, not made by `vsense-offline "
            "build`, falls back to `random` with a warning); `random` is white noise of "
            "standard deviation `amplitude` through a one-pole low-pass at `frequency` "
            "(10 Hz by default), not the bundle's load model, so the model check may say "
            "SUSPECT; `sine` at `frequency`; `impulse` a 5 ms half-sine once a second; "
            "`chirp` 0 to `frequency` over 10 s, repeating.",
            choices=("model", "random", "sine", "impulse", "chirp")),
        Key("amplitude", "float", 1.0, "Load amplitude; with `load = \"model\"` the factor "
            "on the load model's forces (1: the bundle's load).", unit="N", min=0.0,
            max=1e12),
        Key("frequency", "float", 10.0, "Sine frequency / chirp end frequency.", unit="Hz",
            min=0.0, max=1e6),
        Key("noise", "float", 0.0, "Measurement noise, standard deviation relative to the "
            "signal's (with `load = \"model\"`: in addition to the bundle's own sensor "
            "noise).", min=0.0, max=10.0),
        Key("seed", "int", 0, "Random seed.", min=0, max=2**63 - 1),
        Key("faults", "list[str]", [], "Injected faults, e.g. `nan:ch=0:at=1.5:n=10`, "
            "`saturate:...`, `drdy_dead:at=2.0` (see the simulator)."),
        Key("clock", "str", "real", "`real`: samples paced by the wall clock; `virtual`: "
            "as fast as the loop runs (tests, benchmarks).", choices=("real", "virtual")),
        Key("duration_s", "float", 0.0, "Stop after this much simulated time (0 = run "
            "until stopped).", unit="s", min=0.0, max=1e9),
    )),
    Section("fatigue", "Fatigue at a hotspot (docs/fatigue.md): a streaming rainflow count "
            "of one estimated force or output, its Miner damage on an S-N curve and the "
            "range-mean histogram, saved atomically and published retained on "
            "`vsense/<id>/fatigue/<output>`.", (
        Key("output", "str", REQUIRED, "The bundle's force or output to count (its name).",
            pattern=_ID),
        Key("curve", "str", REQUIRED, "S-N curve preset: `EN-36` .. `EN-160` (EN 1993-1-9), "
            "`DNV-<detail>-air` or `DNV-<detail>-cp` (DNV-RP-C203)."),
        Key("scale", "float", 1e-6, "Factor from the output's unit to MPa: 1e-6 for Pa, "
            "E * 1e-6 for strain (E in Pa).", min=1e-30, max=1e30),
        Key("range_max", "float", REQUIRED, "Histogram: largest range, in the output's "
            "unit (larger ranges go to the last bin, counted as clipped).", min=1e-300),
        Key("mean_lo", "float", REQUIRED, "Histogram: lowest mean, in the output's unit."),
        Key("mean_hi", "float", REQUIRED, "Histogram: highest mean (> mean_lo)."),
        Key("bins", "int", 32, "Histogram bins along range and along mean.", min=1,
            max=256),
        Key("state_file", "str", "", "Counter state file, saved atomically (empty: "
            "`fatigue-<output>.state` beside the bundle); restored at start."),
        Key("save_every_s", "float", 60.0, "Save the state this often (and at a clean "
            "stop); a power cut loses at most this much counting.", unit="s", min=0.1,
            max=86400.0),
        Key("publish_every_s", "float", 10.0, "Publish the retained summary this often.",
            unit="s", min=0.1, max=86400.0),
    ), array=True, min_items=0, max_items=16),
)


#: keys that were removed (section, key) -> what replaces them: a configuration file that
#: still sets one loads with a warning naming it (:func:`edge.daemon.config.validate`)
DEPRECATED: dict[tuple[str, str], str] = {
    **{("loop", k): "the ring holds 2 s, the driver reads `[bundle] block` samples per call "
       "and the estimator runs on the acquisition thread" for k in
       ("ring_s", "read_max", "latency_window", "estimate_in", "handover_ms")},
    **{("realtime", k): "no longer configurable" for k in
       ("gc", "sched_fifo_others", "timer_slack_ns", "switch_interval_us", "release_kernel_ir",
        "numba_lazy_registries")},
    ("realtime", "release_compiler_memory"): "use `release_startup_memory`",
    ("realtime", "release_file_pages"): "use `release_startup_memory`",
    ("mqtt", "read_interval_s"): "paho's network thread reads as packets arrive",
    ("simulate", "max_lead_us"): "the simulator's default is used",
}


def _fmt_default(k: Key) -> str:
    if k.default is REQUIRED:
        return "**required**"
    if isinstance(k.default, bool):
        return "`true`" if k.default else "`false`"
    if isinstance(k.default, str):
        return f'`"{k.default}"`'
    if isinstance(k.default, list):
        return "`[]`" if not k.default else f"`{k.default}`"
    return f"`{k.default:g}`" if isinstance(k.default, float) else f"`{k.default}`"


def _fmt_limits(k: Key) -> str:
    parts = []
    if k.choices is not None:
        parts.append("one of " + ", ".join(f"`{c:g}`" if isinstance(c, float) else f"`{c}`"
                                           for c in k.choices))
    if k.min is not None:
        parts.append(f">= {k.min:g}")
    if k.max is not None:
        parts.append(f"<= {k.max:g}")
    return "; ".join(parts)


def reference_markdown() -> str:
    """The configuration reference (Markdown), generated from :data:`SCHEMA`."""
    out = ["<!-- generated by `vsense-edge config-reference`; do not edit by hand -->", ""]
    for sec in SCHEMA:
        head = f"[[{sec.name}]]" if sec.array else f"[{sec.name}]"
        out += [f"#### `{head}`", "", sec.description, "",
                "| key | type | default | unit | limits | description |",
                "| --- | --- | --- | --- | --- | --- |"]
        for k in sec.keys:
            desc = k.description.replace("|", "\\|")
            out.append(f"| `{k.name}` | {k.type} | {_fmt_default(k)} | {k.unit} | "
                       f"{_fmt_limits(k)} | {desc} |")
        out.append("")
    return "\n".join(out)


EXAMPLE = """\
# /etc/vsense/edge.toml – minimal example (all other keys take their defaults)
[device]
id = "cantilever-01"

[bundle]
path = "/var/lib/vsense/bundle.npz"

[[channels]]
name = "acc_tip"
pin = "AIN0"
sensitivity = 0.1       # V per m/s^2
unit = "m/s^2"

[mqtt]
host = "localhost"

[recorder]
dir = "/var/lib/vsense/recordings"
"""
