"""Exit codes of ``vsense-edge run`` (systemd, scripts) and the hardware failure type."""

from __future__ import annotations

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_CONFIG = 2
EXIT_BUNDLE = 3
EXIT_HARDWARE = 4
EXIT_RECORDER = 5
EXIT_REPLAY_INPUT = 6
EXIT_BROKER = 7
EXIT_CODES = {
    EXIT_OK: "clean stop (SIGTERM/SIGINT, or the simulated duration ended)",
    EXIT_INTERNAL: "unexpected internal error (traceback in the journal)",
    EXIT_CONFIG: "bad configuration (file, key, or channels not matching the bundle)",
    EXIT_BUNDLE: "bad bundle (missing, corrupt, hash mismatch, estimator cannot be built)",
    EXIT_HARDWARE: "hardware error (SPI/GPIO not available, ADS1256 not answering, DRDY dead)",
    EXIT_RECORDER: "recording directory not usable",
    EXIT_REPLAY_INPUT: "replay: bad input file (edge.replay)",
    EXIT_BROKER: "broker not reachable at start with --require-broker / [mqtt] require_broker",
}
#: Exit codes for which a restart cannot help (systemd RestartPreventExitStatus).
EXIT_NO_RESTART = (EXIT_CONFIG, EXIT_BUNDLE, EXIT_RECORDER)


class HardwareError(RuntimeError):
    """The ADC/SPI/GPIO failed (e.g. DRDY timeout); the daemon exits with code 4."""
