"""Conversions the ADS1256 overwrote before the driver read them (issue 26 item 6): counted by
the driver (edge.hw.ads1256_rdatac), named in health, in the run summary and in the status.

Reference: the byte-level simulator's own count (``chip.stats["overwritten"]``: a conversion
completed while the previous one was unread; ``"drdy_missing"``: a DRDY pulse that never
came). The driver is made late deterministically through the simulator's clock port
(``SimClock.sleep_until_ns`` on the virtual clock: time jumps, nothing sleeps), by seeded
amounts of whole and fractional conversion periods.
"""

import logging

import numpy as np
import pytest

from edge.daemon.app import build_daemon
from edge.daemon.health import LossWatch
from edge.daemon.status import LOSSES, Status
from edge.daemon.summary import run_summary
from edge.flags import FLAG_GAP
from edge.hw.acquire import Acquisition, Channel
from edge.hw.ads1256 import ADS1256
from edge.hw.sim_ads1256 import Faults
from edge.hw.sim_ports import make_simulated_hardware
from edge.hw.sources import FunctionSource
from helpers import chain_bundle

#: late by these many conversion periods (exact multiples, just below and above one, far)
LATE = (0.3, 0.5, 0.99, 1.0, 1.01, 1.5, 2.5, 3.0, 7.2, 40.0)


def _acquisition(rate: float, faults=None, seed: int = 0):
    src = FunctionSource({"AIN0": lambda t: 0.1 * np.sin(2 * np.pi * 7 * t),
                          "AINCOM": lambda t: 0.0})
    spi, gpio, clock = make_simulated_hardware(src, seed=seed, faults=faults,
                                               virtual_clock=True, strict=False)
    acq = Acquisition(ADS1256(spi, gpio, clock), [Channel("a", "AIN0")], rate=rate)
    acq.start()
    return acq, spi.chip, clock


def _late_reads(acq, clock, n: int, seed: int, p_late: float = 0.3) -> np.ndarray:
    """``n`` one-row reads (the daemon's block of 1), each preceded with probability
    ``p_late`` by a jump of the clock by one of :data:`LATE` periods; the rows' flags."""
    rng = np.random.default_rng(seed)
    period = 1e9 / acq.rate
    v, t, f = np.zeros((1, 1)), np.zeros(1, np.int64), np.zeros(1, np.uint8)
    flags = np.zeros(n, np.uint8)
    for i in range(n):
        if rng.random() < p_late:
            clock.sleep_until_ns(clock.monotonic_ns() + int(rng.choice(LATE) * period))
        acq.read(v, t, f)
        flags[i] = f[0]
    return flags


@pytest.mark.parametrize("rate", [100.0, 1000.0, 7500.0])
def test_driver_counts_exactly_the_conversions_the_chip_overwrote(rate):
    acq, chip, clock = _acquisition(rate)
    v, t, f = np.zeros((10, 1)), np.zeros(10, np.int64), np.zeros(10, np.uint8)
    acq.read(v, t, f)  # on time: nothing missed (the conversion skipped by RDATAC's start
    assert acq.missed_conversions == 0  # is the chip's first overwrite, before sample 0)
    o0 = chip.stats["overwritten"]
    flags = _late_reads(acq, clock, 3000, seed=1)
    overwritten = chip.stats["overwritten"] - o0
    assert overwritten > 1000  # the jumps above one period lose conversions
    assert acq.missed_conversions == overwritten
    # every sample after a loss is flagged a gap (decode: > 1.5 periods since the last)
    assert acq.counts["gaps"] == int(np.count_nonzero(flags & FLAG_GAP)) > 0


def test_missing_drdy_pulses_and_late_reads_are_both_counted():
    acq, chip, clock = _acquisition(1000.0, Faults(missing_drdy_prob=0.02), seed=3)
    acq.read(np.zeros((1, 1)), np.zeros(1, np.int64), np.zeros(1, np.uint8))  # RDATAC's skip
    o0, m0 = chip.stats["overwritten"], chip.stats["drdy_missing"]
    k0 = acq.missed_conversions
    _late_reads(acq, clock, 2000, seed=2, p_late=0.1)
    lost = (chip.stats["overwritten"] - o0) + (chip.stats["drdy_missing"] - m0)
    assert chip.stats["drdy_missing"] - m0 > 10 and chip.stats["overwritten"] - o0 > 100
    assert acq.missed_conversions - k0 == lost


def test_cycling_never_counts_missed_conversions():
    """Multiplexer cycling restarts the converter on every channel (SYNC/WAKEUP): a late
    driver reads the channel's newest conversion later (the chip's repeated conversions of
    the same input are not samples of the stream): the row comes late, a gap in time."""
    src = FunctionSource({"AIN0": lambda t: 0.1, "AIN1": lambda t: 0.2,
                          "AINCOM": lambda t: 0.0})
    spi, gpio, clock = make_simulated_hardware(src, virtual_clock=True)
    acq = Acquisition(ADS1256(spi, gpio, clock), [Channel("a", "AIN0"), Channel("b", "AIN1")],
                      rate=1000.0)
    acq.start()
    v, t, f = np.zeros((1, 2)), np.zeros(1, np.int64), np.zeros(1, np.uint8)
    for _ in range(50):
        clock.sleep_until_ns(clock.monotonic_ns() + 5_000_000)
        acq.read(v, t, f)
    assert acq.missed_conversions == 0
    assert acq.counts["gaps"] == 49  # the delay shows as a gap in time


def test_daemon_reports_missed_conversions_in_health_and_the_summary(tmp_path, caplog):
    """The daemon at the ADC level (virtual clock): its acquisition thread is made late by
    3.5 conversion periods before every 50th read (from the same thread, through the
    simulator's clock): 3 conversions complete meanwhile, the newest is read, 2 are lost.
    health ``missed_conversions``, the run summary and the simulator's own count (logged at
    the close) equal that."""
    b = chain_bundle(window=3, kinds=("displacement",))
    b.save(tmp_path / "b.npz")
    from edge.daemon.config import config_from_dict
    cfg = config_from_dict({
        "device": {"id": "miss"}, "bundle": {"path": str(tmp_path / "b.npz")},
        "adc": {"drate": 1000.0, "mode": "continuous"},
        "channels": [{"name": "y0", "pin": "AIN0", "sensitivity": 1000.0, "unit": "m"}],
        "mqtt": {"enabled": False}, "recorder": {"enabled": False},
        "realtime": {"release_startup_memory": False},
        "simulate": {"level": "adc", "clock": "virtual", "duration_s": 2.0}})
    d = build_daemon(cfg, simulate=True)
    drv = d.acq.acq  # LimitedAcquisition -> Acquisition
    chip, clock = drv.adc.spi.chip, drv.adc.clock
    o0 = chip.stats["overwritten"]
    read, k = d.acq.read, [0]

    def late_read(v, t, f):
        k[0] += 1
        if k[0] % 50 == 0:
            clock.sleep_until_ns(clock.monotonic_ns() + 3_500_000)  # 3.5 periods
        return read(v, t, f)

    d.acq.read = late_read  # the acquisition thread takes acq.read when it starts
    with caplog.at_level(logging.INFO, logger="vsense"):
        assert d.run() == 0
    h = d.health()
    reads = k[0] - 1  # the last call ends the simulation
    assert h["missed_conversions"] == reads // 50 * 2
    line = run_summary(h)
    assert f"{h['missed_conversions']} missed conversions" in line
    assert any(line in r.getMessage() for r in caplog.records)
    sim = [r.getMessage() for r in caplog.records if "simulated ADS1256" in r.getMessage()]
    assert sim == [f"simulated ADS1256: {h['missed_conversions']} conversions lost while "
                   "streaming (overwritten before they were read, or their DRDY pulse "
                   f"missing); the driver counted {h['missed_conversions']} missed conversions"]
    # the chip's own count since the build (+ the one RDATAC's start skips)
    assert chip.stats["overwritten"] - o0 == h["missed_conversions"] + 1


def test_loss_watch_holds_then_clears():
    w = LossWatch(hold_s=5.0)
    assert not w.update(0, 0.0)
    assert w.update(3, 1.0) and w.update(3, 6.0)  # grew at 1 s: held 5 s
    assert not w.update(3, 6.01)
    assert w.update(4, 7.0) and not w.update(4, 12.5)


@pytest.mark.parametrize("counter", [name for name, _ in LOSSES])
def test_status_is_degraded_exactly_while_a_loss_counter_grows(counter):
    """Status.check_degraded with a hold of 0: `degraded` (the loss named) at the ticks
    where the counter grew, `running` at the next tick without growth; the reason text is
    the same every time, so the retained status is sent once per episode."""

    class _Pub:
        topics = type("T", (), {"status": "status"})()

        def __init__(self):
            from edge.daemon.mqttv5 import AckWatch

            self.sent = []
            self.acks = AckWatch("5")  # the real acknowledgement watch: no denial here

        def set_retained(self, topic, payload):
            self.sent.append(payload)

        def threads_problem(self):
            return None

    class _Dev(Status):
        def __init__(self):
            self.pub, self.notifier, self.rec = _Pub(), None, None
            self.state, self.degraded_reason = "running", None
            self._loss_watch = {name: LossWatch(0.0) for name, _ in LOSSES}
            self.counts = dict.fromkeys(self._loss_watch, 0)

        def _loss_counts(self):
            return dict(self.counts)

        def _row_rate(self):
            return type("R", (), {"problem": lambda self: None})()

        def status_payload(self, **extra):
            return dict(state=self.state, **extra)

    d = _Dev()
    seen = []
    for grow in (0, 2, 1, 0, 0, 5, 0):
        d.counts[counter] += grow
        d.check_degraded()
        seen.append(d.state)
    assert seen == ["running", "degraded", "degraded", "running", "running", "degraded",
                    "running"]
    why = dict(LOSSES)[counter]
    assert [p.get("reason") for p in d.pub.sent] == [why, None, why, None]
