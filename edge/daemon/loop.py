"""The acquisition/estimation loop of the edge daemon.

Threads
-------
* **acquisition** (optionally SCHED_FIFO): ``acq.read`` straight into the preallocated
  :class:`~edge.daemon.ring.Ring`; never waits for anything else. If the ring is full the
  samples are counted lost (real clock). With the virtual clock there is no real converter
  that could overflow, so the thread waits for space instead (lossless simulation).
  With ``[loop] estimate_in = "acquisition"`` (the default for ``[bundle] block = 1``) this
  thread also calibrates, flags and estimates each sample right after the driver returned
  it, before the sample becomes visible in the ring: no thread hand-over (GIL, condition
  variable, wake-up) lies between DRDY and the estimate.
* **loop** (the calling thread, :meth:`Daemon.run`): with ``estimate_in = "loop"`` it takes
  up to ``[bundle] block`` samples from the ring, calibrates and flags them, runs
  ``Estimator.process``; in both modes it hands raw samples and estimates to the recorder
  (never drops; back-pressure) and estimates to the publisher (bounded, drop-oldest), and
  runs accepted commands between two estimator calls. Commands always run on the thread that
  estimates (the acquisition thread with ``estimate_in = "acquisition"``), so the estimator
  and its state need no lock: the estimating thread polls a plain flag per call.
* **supervisor**: health messages every ``health_interval_s``, systemd watchdog pings only
  while the loop advances, status changes.
* **mqtt sender / paho network / recorder writer**: see :mod:`edge.daemon.mqtt` and
  :mod:`edge.daemon.recorder`.

Latency
-------
Per sample, ``time.monotonic_ns`` when its estimate is ready (the estimator returned and the
row sits in the daemon's output buffer, before recorder/publisher) minus its DRDY time (the
driver's ``t_ns``, the clock time DRDY was seen low, mapped to the monotonic clock by
:func:`drdy_offset_ns`): ``latency_us`` in health. ``latency_ring_us``: from the sample
entering the ring to the same point (the definition used before; also the fallback for
``latency_us`` when the acquisition clock is virtual).

Bad samples
-----------
A sample of a channel is *bad* when it is non-finite (flags bit0) or ``|volts| >= saturation``
or at an ADC rail (bit2; the driver returns NaN for it). The estimator gets NaN there and holds the channel's last finite value (kernel
behaviour). After ``[faults] bad_sample_limit`` consecutive bad samples the channel is in
fault: status ``sensor_fault`` (with the channel names). When it delivers a good sample again
the estimator state is reset right before that sample and the status returns to ``running``.
Lost samples (flags bit3, ring overrun) also reset the estimator before the next sample.

Sequence numbers
----------------
``seq`` counts ADC samples from 0 (lost ones included). Each estimate row carries the
``seq``/``t_ns`` of the sample it describes: ``delay`` samples earlier in the stream that
was fed to the estimator. Rows in warm-up (after start or a reset) are NaN with bit1.

Exit codes: see :data:`EXIT_CODES`.
"""

from __future__ import annotations

import logging
import math
import os
import queue
import threading
import time

import numpy as np

from edge.daemon import realtime
from edge.daemon.health import CpuMeter, LatencyStats, cpu_temperature_c, rss_mb
from edge.daemon.mqtt import CommandError, CommandRegistry
from edge.daemon.summary import run_summary
from edge.daemon.ring import FLAG_GAP, Ring

log = logging.getLogger("vsense.loop")

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_CONFIG = 2
EXIT_BUNDLE = 3
EXIT_HARDWARE = 4
EXIT_RECORDER = 5
EXIT_BROKER = 7
EXIT_CODES = {
    EXIT_OK: "clean stop (SIGTERM/SIGINT, or the simulated duration ended)",
    EXIT_INTERNAL: "unexpected internal error (traceback in the journal)",
    EXIT_CONFIG: "bad configuration (file, key, or channels not matching the bundle)",
    EXIT_BUNDLE: "bad bundle (missing, corrupt, hash mismatch, estimator cannot be built)",
    EXIT_HARDWARE: "hardware error (SPI/GPIO not available, ADS1256 not answering, DRDY dead)",
    EXIT_RECORDER: "recording directory not usable",
    6: "replay: bad input file (edge.replay)",
    EXIT_BROKER: "broker not reachable at start with --require-broker / [mqtt] require_broker",
}
#: Exit codes for which a restart cannot help (systemd RestartPreventExitStatus).
EXIT_NO_RESTART = (EXIT_CONFIG, EXIT_BUNDLE, EXIT_RECORDER)

FLAG_NONFINITE = np.uint8(1)
FLAG_WARMUP = np.uint8(2)
FLAG_SATURATED = np.uint8(4)
_SAT_GAP = int(FLAG_SATURATED | FLAG_GAP)


class HardwareError(RuntimeError):
    """The ADC/SPI/GPIO failed (e.g. DRDY timeout); the daemon exits with code 4."""


# ----------------------------------------------------------------------- conditioning
def calibrate(V, sensitivity, offset, saturation, Y, flags):
    """Volts to physical units and bad-sample flags (pure; outputs preallocated).

    What :class:`edge.hw.acquire.Acquisition` does on the Pi; used by the signal-level
    simulator. Saturated values are replaced by NaN (the driver's ``nan_on_saturation``).

    Parameters
    ----------
    V : float64 (n, nch)          channel voltages [V]
    sensitivity, offset, saturation : float64 (nch,)  [V/unit], [V], [V]
    Y : float64 (n, nch)          out: physical values, (V - offset) / sensitivity
    flags : uint8 (n,)            in/out: OR-ed with bit0 (non-finite) and bit2 (saturated)

    Returns
    -------
    bad : bool (n, nch)           non-finite or saturated
    """
    # y = (v - v0) / s
    np.subtract(V, offset, out=Y)
    np.divide(Y, sensitivity, out=Y)
    nonfinite = ~np.isfinite(V)
    with np.errstate(invalid="ignore"):
        sat = np.abs(V) >= saturation
    flags |= np.where(nonfinite.any(axis=1), FLAG_NONFINITE, 0).astype(np.uint8)
    flags |= np.where(sat.any(axis=1), FLAG_SATURATED, 0).astype(np.uint8)
    Y[sat] = np.nan
    return nonfinite | sat


class FaultTracker:
    """Consecutive-bad-sample counters per channel; reports fault and recovery events."""

    def __init__(self, nch: int, limit: int):
        self.count = np.zeros(nch, np.int64)
        self.fault = np.zeros(nch, bool)
        self.limit = int(limit)
        self.quiet = True  # no channel has a bad-sample count (the per-sample fast path)

    def update(self, bad: np.ndarray) -> list[tuple[int, int, str]]:
        """Feed ``bad (n, nch)``; return events ``(sample index, channel, "fault" |
        "recovered")`` in sample order. A recovery at index i means: reset before sample i."""
        events: list[tuple[int, int, str]] = []
        if not bad.any() and not self.count.any():
            return events
        n, nch = bad.shape
        for c in range(nch):
            col = bad[:, c]
            if not col.any() and self.count[c] == 0:
                continue
            cnt, flt = int(self.count[c]), bool(self.fault[c])
            for i in range(n):
                if col[i]:
                    cnt += 1
                    if not flt and cnt >= self.limit:
                        flt = True
                        events.append((i, c, "fault"))
                else:
                    if flt:
                        events.append((i, c, "recovered"))
                        flt = False
                    cnt = 0
            self.count[c], self.fault[c] = cnt, flt
        self.quiet = not self.count.any()
        events.sort()
        return events


def drdy_offset_ns(acq, virtual: bool) -> int | None:
    """Offset [ns] that maps an acquisition's ``t_ns`` (DRDY times) to
    ``time.monotonic_ns``, or None when there is none (virtual clock).

    * ``host_offset_ns`` attribute (:class:`edge.daemon.simulate.SignalAcquisition`,
      :class:`edge.daemon.simulate.LimitedAcquisition`): used as given;
    * the ADS1256 driver: its clock's ``origin_ns`` (0 for the real clock, whose
      ``monotonic_ns`` is ``time.monotonic_ns``; the simulator's real-time clock counts
      from its creation).
    """
    if virtual:
        return None
    off = getattr(acq, "host_offset_ns", None)
    if off is not None:
        return int(off)
    clock = getattr(getattr(acq, "adc", None), "clock", None)
    if clock is None:
        return None
    if getattr(clock, "virtual", False):
        return None
    if hasattr(clock, "origin_ns"):
        return int(clock.origin_ns)
    return int(getattr(clock, "_origin", 0))  # edge.hw.sim_ads1256.SimClock; RealClock: 0


# ----------------------------------------------------------------------------- daemon
class Daemon:
    """One running device: acquisition, estimation, publishing, recording.

    Parameters
    ----------
    cfg : edge.daemon.config.Config
    acquisition : object with ``read(values (n,nch), t_ns (n,), flags (n,)) -> n`` and
        ``close()`` (:class:`edge.hw.acquire.Acquisition` or
        :class:`edge.daemon.simulate.SignalAcquisition`): values in physical units, a
        saturated channel value NaN with flags bit2, lost samples flagged bit3. Any exception
        is a hardware failure (exit code 4; an ``n_read`` attribute = rows filled before it)
        except ``EOFError``, the end of a simulation (exit code 0).
    estimator : edge.estimator.Estimator
    publisher : edge.daemon.mqtt.Publisher or None
    recorder : edge.daemon.recorder.Recorder or None
    notifier : edge.daemon.notify.Notifier or None
    virtual_clock : bool
        True: acquisition waits for ring space instead of losing samples.
    """

    def __init__(self, cfg, acquisition, estimator, publisher=None, recorder=None,
                 notifier=None, virtual_clock: bool = False, registry=None):
        self.cfg = cfg
        self.acq = acquisition
        self.est = estimator
        self.pub = publisher
        self.rec = recorder
        self.notifier = notifier
        self.virtual = virtual_clock
        self.registry = registry if registry is not None else (
            publisher.registry if publisher is not None else CommandRegistry())
        register_builtin_commands(self.registry)
        ch = cfg.channels
        self.names = [c["name"] for c in ch]
        self.nch = len(ch)
        self.rate = 1.0 / estimator.bundle.dt
        loop = cfg["loop"]
        self.block = cfg["bundle"]["block"]
        self.read_max = loop["read_max"]
        self.ring = Ring(max(int(loop["ring_s"] * self.rate), 2 * self.read_max,
                             2 * self.block), self.nch)
        self.raw_pub = None
        if publisher is not None and cfg["mqtt"].get("raw_decimation", 0) > 0:
            from edge.daemon.raw import RawPublisher

            self.raw_pub = RawPublisher(publisher, self.nch, cfg["mqtt"]["raw_decimation"],
                                        publisher.topics.raw)
        self.nf, self.nout = estimator.n_forces, estimator.n_outputs
        self.delay = estimator.delay
        self.std = getattr(estimator, "std", None)  # (nf + nout,) or None (Tikhonov)
        if publisher is not None and self.std is not None:
            publisher.std = np.asarray(self.std, dtype=np.float64)
        b = self.block
        self._F = np.zeros((b, self.nf))
        self._Z = np.zeros((b, self.nout))
        self._ef = np.zeros(b, np.uint8)
        self._F1, self._Z1, self._ef1 = self._F[:1], self._Z[:1], self._ef[:1]
        # history of the stream fed to the estimator: seq, t_ns, flags of the last
        # `delay` samples followed by the current segment
        h = self.delay + b
        self._hseq = np.zeros(h, np.int64)
        self._ht = np.zeros(h, np.int64)
        self._hf = np.zeros(h, np.uint8)
        self._hn = 0  # valid history entries before the segment (<= delay)
        self.faults = FaultTracker(self.nch, cfg["faults"]["bad_sample_limit"])
        mode = loop["estimate_in"]
        self.inline = mode == "acquisition" or (mode == "auto" and self.block == 1)
        self.handover_s = loop["handover_ms"] / 1e3
        # estimate rows by ring slot: the row produced when the slot's sample was estimated
        cap, ncol = self.ring.capacity, self.nf + self.nout
        self._sV = np.zeros((cap, ncol))
        self._sseq = np.zeros(cap, np.int64)
        self._st = np.zeros(cap, np.int64)
        self._sf = np.zeros(cap, np.uint8)
        self._sok = np.zeros(cap, bool)
        self.inverse = None  # edge.inverse.InverseHook when the bundle carries maps
        self.updates_locked: str | None = None  # reason update_model is refused (signature)
        self._identify_due = False  # set by the supervisor ([inverse] identify_every_s)
        self.scheduled_identifications = 0
        self.latency = LatencyStats(loop["latency_window"])  # DRDY -> estimate ready
        self.latency_ring = LatencyStats(loop["latency_window"])  # ring entry -> ready
        self._t_off: int | None = None  # DRDY clock -> time.monotonic_ns offset [ns]
        self._t_off_known = False
        self.cpu = CpuMeter()
        self.state = "starting"
        self.degraded_reason: str | None = None
        self.paused = False
        self.stop_event = threading.Event()
        self.processed = 0  # samples through the loop (watchdog progress)
        self.estimates = 0
        self.resets = 0
        self.bad_samples = 0
        self.hw_error: BaseException | None = None
        self.finished = False
        self.first_sample = threading.Event()
        self._acq_thread = threading.Thread(target=self._acquire, name="vsense-acq",
                                            daemon=True)
        self._sup_thread = threading.Thread(target=self._supervise, name="vsense-sup",
                                            daemon=True)
        self.t_start = time.monotonic()

    # ------------------------------------------------------------------ acquisition
    def _acquire(self) -> None:
        rt = self.cfg["realtime"]
        realtime.set_fifo(rt["sched_fifo_priority"])
        realtime.set_timer_slack(rt["timer_slack_ns"])
        ring = self.ring
        inline = self.inline
        try:
            while not self.stop_event.is_set():
                if self.virtual:
                    while ring.capacity - ring.available() < 1 and not self.stop_event.is_set():
                        time.sleep(0.0005)
                v, t, f = ring.write_span(self.read_max)
                try:
                    n = self.acq.read(v, t, f)
                except BaseException as e:
                    k = int(getattr(e, "n_read", 0) or 0)  # rows before the error
                    if ring.stage(k):
                        if inline:
                            self._estimate_staged(k)
                        ring.publish(k)
                    raise
                if ring.stage(n):
                    if not self._t_off_known:
                        self._t_off = drdy_offset_ns(self.acq, self.virtual)
                        self._t_off_known = True
                    if inline:
                        self._estimate_staged(n)
                    ring.publish(n)
                if n and not self.first_sample.is_set():
                    self.first_sample.set()
        except EOFError as e:
            log.info("acquisition finished: %s", e)
            self.finished = True
        except BaseException as e:  # noqa: BLE001 - reported by the loop, exit code 4
            log.error("acquisition failed: %s", e)
            self.hw_error = e
        finally:
            self.first_sample.set()
            ring.close()

    def _estimate_staged(self, n: int) -> None:
        """Estimate ``n`` staged (not yet published) ring samples in the acquisition thread
        (``estimate_in = "acquisition"``)."""
        i = self.ring.head % self.ring.capacity
        if self._cmd_pending():  # commands run on the estimating thread, between samples
            self._run_commands()
        b = self.block
        for a in range(0, n, b):
            self._process(i + a, min(b, n - a))

    # --------------------------------------------------------------------- the loop
    def run(self) -> int:
        """Run until stopped (:meth:`stop`, a signal handler), the simulation ends, or the
        hardware fails; return the exit code."""
        rt = self.cfg["realtime"]
        self._publish_meta()
        self._set_state("starting")
        # start-up work that holds the GIL for tens of ms (a full collection over numba's
        # objects) is done before the first sample, not during it
        realtime.gc_setup(rt["gc"])
        self._acq_thread.start()
        self.first_sample.wait()
        if self.hw_error is None:
            self._set_state("running")
            if self.notifier is not None:
                self.notifier.ready(f"running: {self.nch} channels at {self.rate:g} samples/s")
        self._sup_thread.start()
        policy = None
        if rt["sched_fifo_others"] and rt["sched_fifo_priority"] > 1:
            policy = (os.sched_getscheduler(0), os.sched_getparam(0))
            realtime.set_fifo_threads(rt["sched_fifo_priority"] - 1,
                                      {self._acq_thread.native_id})
        code = EXIT_OK
        try:
            self._loop()
        except Exception:
            log.exception("loop failed")
            code = EXIT_INTERNAL
        finally:
            realtime.gc_restore(rt["gc"])
            if policy is not None:  # the calling thread (matters when embedded, tests)
                try:
                    os.sched_setscheduler(0, *policy)
                except OSError:
                    pass
            self.stop_event.set()
            code = self._shutdown(code)
        return code

    def stop(self, *_args) -> None:
        """Request a clean stop (safe from a signal handler)."""
        self.stop_event.set()

    def _loop(self) -> None:
        ring = self.ring
        inline = self.inline
        take = ring.capacity if inline else self.block
        while True:
            if ring.available() == 0:
                if ring.closed or self.stop_event.is_set():
                    # drain: the acquisition thread has stopped writing
                    if ring.closed or not self._acq_thread.is_alive():
                        break
                    self._acq_thread.join(0.5)
                    if ring.available() == 0 and not self._acq_thread.is_alive():
                        break
                    continue
                if inline:  # no per-sample wake-up: collect what arrived meanwhile
                    self.stop_event.wait(self.handover_s)
                else:
                    ring.wait(0.05)
                self._idle()
                continue
            i, n = ring.read_span(take)
            if not inline:
                self._process(i, n)
            self._handover(i, n)
            ring.release(n)
            if not inline and self._cmd_pending():
                self._run_commands()
            self._idle()

    def _idle(self) -> None:
        if self.rec is not None:
            self.rec.poll()
        if self.pub is not None:
            self.pub.poll()
            if self.raw_pub is not None:
                self.raw_pub.poll()
            if not self.pub.commands.empty():
                self._run_commands()

    def _arm_scheduled(self) -> None:
        self._identify_due = False
        inv = self.inverse
        if inv is None or inv.pending is not None:
            return
        try:
            inv.arm(self, self.cfg["inverse"]["map"] or None)
            self.scheduled_identifications += 1
        except (KeyError, ValueError) as e:
            log.warning("scheduled identification not armed: %s", e)

    def _cmd_pending(self) -> bool:
        return self.pub is not None and self.pub.cmd_flag

    def _process(self, i: int, n: int) -> None:
        """Flag, estimate and time ring slots ``i .. i+n-1`` (one contiguous span); the
        estimate rows go to the slot arrays (``_sV``...), see :meth:`_handover`."""
        ring = self.ring
        inv = self.inverse
        if self._identify_due:  # scheduled identification: arm on the estimating thread
            self._arm_scheduled()
        if inv is not None and inv.pending is not None:  # an armed identification window
            inv.on_block(self, ring.values[i:i + n], int(ring.seq[i]))
        if (n == 1 and not self.paused and self.faults.quiet
                and not ring.flags[i] & FLAG_GAP and self._isfinite_row(ring.values[i])):
            self._process_one(i)
            return
        V = ring.values[i:i + n]
        seq = ring.seq[i:i + n]
        t_ns = ring.t_ns[i:i + n]
        fl = ring.flags[i:i + n]  # bit0 is added in place: the raw record carries it
        Y = V  # physical units (the acquisition calibrated them)
        bad = ~np.isfinite(V)
        anybad = bad.any()
        if anybad:
            fl |= np.where(bad.any(axis=1), FLAG_NONFINITE, 0).astype(np.uint8)
        if not self.paused:
            cuts = []
            if anybad:
                self.bad_samples += int(bad.any(axis=1).sum())
            events = self.faults.update(bad)
            if events:
                self._fault_events(events, seq)
                cuts += [k for k, _, what in events if what == "recovered"]
            if n == 1:
                if fl[0] & FLAG_GAP:
                    cuts.append(0)
            else:
                cuts += np.nonzero(fl & FLAG_GAP)[0].tolist()
            if cuts:
                a = 0
                for c in sorted(set(cuts)):
                    if c > a:
                        self._estimate(Y[a:c], seq[a:c], t_ns[a:c], fl[a:c], i + a)
                    self._reset_estimator()
                    a = c
                self._estimate(Y[a:], seq[a:], t_ns[a:], fl[a:], i + a)
            else:
                self._estimate(Y, seq, t_ns, fl, i)
        else:
            self.faults.update(bad)
        now = time.monotonic_ns()
        off = self._t_off
        if n == 1:
            self.latency_ring.add_one(now - int(ring.stamp_ns[i]))
            if off is not None:
                self.latency.add_one(now - (int(t_ns[0]) + off))
        else:
            self.latency_ring.add(now - ring.stamp_ns[i:i + n])
            if off is not None:
                self.latency.add(now - (t_ns + off))
        self.processed += n

    @staticmethod
    def _isfinite_row(row) -> bool:
        for x in row.tolist():
            if not math.isfinite(x):
                return False
        return True

    def _process_one(self, i: int) -> None:
        """:meth:`_process` for one good sample in the running state (no gap, no fault
        count, finite values): the same result with scalar bookkeeping instead of array
        temporaries (tests compare both paths)."""
        ring = self.ring
        F, Z, ef = self._F1, self._Z1, self._ef1
        self.est.process(ring.values[i:i + 1], F, Z, ef)
        d, h = self.delay, self._hn
        seq, t, f = ring.seq.item(i), ring.t_ns.item(i), ring.flags.item(i)
        hseq, ht, hf = self._hseq, self._ht, self._hf
        if h >= d:  # the row describes the oldest history entry (this sample if d == 0)
            if d == 0:
                dseq, dt, df = seq, t, f
            else:
                dseq, dt, df = hseq.item(0), ht.item(0), hf.item(0)
                if d > 1:
                    hseq[:d - 1] = hseq[1:d]
                    ht[:d - 1] = ht[1:d]
                    hf[:d - 1] = hf[1:d]
                hseq[d - 1], ht[d - 1], hf[d - 1] = seq, t, f
            nf = self.nf
            V = self._sV[i]
            V[:nf] = F[0]
            V[nf:] = Z[0]
            # eflags = estimator flags | (saturated, gap) of the described sample
            self._sf[i] = ef.item(0) | (df & _SAT_GAP)
            self._sseq[i] = dseq
            self._st[i] = dt
            self._sok[i] = True
            self.estimates += 1
        else:  # warm-up after start or reset: the kernel's row is NaN, nothing described
            hseq[h], ht[h], hf[h] = seq, t, f
            self._hn = h + 1
        now = time.monotonic_ns()
        self.latency_ring.add_one(now - ring.stamp_ns.item(i))
        if self._t_off is not None:
            self.latency.add_one(now - (t + self._t_off))
        self.processed += 1

    def _estimate(self, Yk, seq, t_ns, fl, slot: int) -> None:
        """Run the estimator on one gap-free segment (ring slots ``slot ..``); estimate
        row ``j`` of the segment goes to slot ``slot + j`` (the sample whose arrival
        completed it)."""
        n = Yk.shape[0]
        F, Z, ef = self._F[:n], self._Z[:n], self._ef[:n]
        self.est.process(Yk, F, Z, ef)
        d, h = self.delay, self._hn
        # stream history: [last h fed samples | this segment]
        self._hseq[h:h + n] = seq
        self._ht[h:h + n] = t_ns
        self._hf[h:h + n] = fl
        # row j describes stream position (h + j) - delay; positions < 0 predate the stream
        first = max(0, d - h)
        m = n - first
        if m > 0:
            src = slice(h + first - d, h + n - d)
            s0 = slot + first
            V = self._sV[s0:s0 + m]
            V[:, :self.nf] = F[first:]
            V[:, self.nf:] = Z[first:]
            # eflags = estimator flags | (saturated, gap) of the described sample
            np.bitwise_or(ef[first:], self._hf[src] & (FLAG_SATURATED | FLAG_GAP),
                          out=self._sf[s0:s0 + m])
            self._sseq[s0:s0 + m] = self._hseq[src]
            self._st[s0:s0 + m] = self._ht[src]
            self._sok[s0:s0 + m] = True
            self.estimates += m
        # keep the last `delay` entries
        tot = h + n
        keep = min(d, tot)
        if keep:
            self._hseq[:keep] = self._hseq[tot - keep:tot]
            self._ht[:keep] = self._ht[tot - keep:tot]
            self._hf[:keep] = self._hf[tot - keep:tot]
        self._hn = keep

    def _handover(self, i: int, n: int) -> None:
        """Raw samples of ring slots ``i .. i+n-1`` to the recorder, their estimate rows to
        the recorder and the publisher (both copy)."""
        ring = self.ring
        if self.rec is not None:
            self.rec.append_raw(ring.seq[i:i + n], ring.t_ns[i:i + n], ring.values[i:i + n],
                                ring.flags[i:i + n])
        if self.raw_pub is not None:
            self.raw_pub.add(ring.seq[i:i + n], ring.t_ns[i:i + n], ring.values[i:i + n],
                             ring.flags[i:i + n])
        ok = self._sok[i:i + n]
        if self.pub is None and (self.rec is None or "estimates" not in self.rec.streams):
            ok[:] = False
            return
        if ok.all():
            sel = slice(i, i + n)
        elif ok.any():
            sel = i + np.nonzero(ok)[0]
        else:
            return
        seq, t, V, f = self._sseq[sel], self._st[sel], self._sV[sel], self._sf[sel]
        if self.pub is not None:
            self.pub.add_estimates(seq, t, V, f)
        if self.rec is not None:
            self.rec.append_estimates(seq, t, V, f)
        ok[:] = False

    def _reset_estimator(self) -> None:
        """Reset the estimator; samples still waiting for their delayed estimate get NaN
        warm-up rows from the kernel, so every fed sample is still described once."""
        self.est.reset()
        self.resets += 1
        # after reset the kernel's window restarts: rows describe stream position - delay
        # of the new stream; the pending history entries are described by its warm-up rows.
        # Positions before the pending entries are forgotten.

    def _fault_events(self, events, seq) -> None:
        changed = False
        for k, c, what in events:
            log.warning("channel %s: %s at seq %d", self.names[c],
                        "sensor fault" if what == "fault" else "recovered", int(seq[k]))
            changed = True
        if changed and not self.paused:
            self._set_state("sensor_fault" if self.faults.fault.any() else self._ok_state())

    # ---------------------------------------------------------------------- commands
    def _run_commands(self) -> None:
        self.pub.cmd_flag = False  # cleared before draining: a later command sets it again
        while True:
            try:
                cmd, args, cid = self.pub.commands.get_nowait()
            except queue.Empty:
                return
            try:
                extra = cmd.handler(self, args) or {}
                self.pub.reply({"id": cid, "cmd": cmd.name, "ok": True, **extra})
            except CommandError as e:
                self.pub.reply({"id": cid, "cmd": cmd.name, "ok": False, "reason": str(e)})
            except Exception as e:  # noqa: BLE001 - a hook failed: reject, keep running
                log.exception("command %s failed", cmd.name)
                self.pub.reply({"id": cid, "cmd": cmd.name, "ok": False,
                                "reason": f"{type(e).__name__}: {e}"})

    # ----------------------------------------------------------------- status/health
    def _ok_state(self) -> str:
        return "running" if self.degraded_reason is None else "degraded"

    def _set_state(self, state: str, **extra) -> None:
        if state == "degraded" and "reason" not in extra and self.degraded_reason:
            extra["reason"] = self.degraded_reason
        self.state = state
        if self.pub is not None:
            self.pub.set_retained(self.pub.topics.status, self.status_payload(**extra))
        if self.notifier is not None:
            self.notifier.status(state)

    def status_payload(self, **extra) -> dict:
        d = {"state": self.state, "t": round(time.time(), 3),
             "device": self.cfg["device"]["id"], "bundle": self.est.bundle.bundle_id}
        faulty = [self.names[c] for c in np.nonzero(self.faults.fault)[0]]
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
                "rate": self.rate, "delay_samples": self.delay,
                "delay_s": self.delay / self.rate,
                "format": self.cfg["mqtt"]["format"], "batch": self.cfg["mqtt"]["batch"],
                "raw_decimation": self.cfg["mqtt"]["raw_decimation"],
                "method": {"window": int(b.window), "alpha": float(b.alpha),
                           "discretization": b.discretization,
                           "regularization": b.regularization}}

    def _publish_meta(self) -> None:
        if self.pub is not None:
            self.pub.set_retained(self.pub.topics.meta, self.meta_payload())

    def health(self) -> dict:
        r = self.ring
        d = {"t": round(time.time(), 3), "state": self.state,
             "uptime_s": round(time.monotonic() - self.t_start, 3),
             "samples": self.processed, "estimates": self.estimates,
             "latency_us": (self.latency if self._t_off is not None
                            else self.latency_ring).summary(),
             "latency_from": "drdy" if self._t_off is not None else "ring",
             "latency_ring_us": self.latency_ring.summary(),
             "estimate_in": "acquisition" if self.inline else "loop",
             "overruns": r.overruns, "lost_samples": r.lost, "ring_depth": r.available(),
             "ring_capacity": r.capacity, "bad_samples": self.bad_samples,
             "estimator_resets": self.resets, "cpu_percent": self.cpu.percent(),
             "rss_mb": round(rss_mb(), 1), "cpu_temp_c": cpu_temperature_c()}
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
        if self.rec is not None:
            d["recorder"] = dict(self.rec.stats, queue_depth=self.rec.queue_depth(),
                                 problem=self.rec.degraded_reason())
        if self.degraded_reason is not None:
            d["degraded"] = self.degraded_reason
        return d

    def _problems(self) -> str | None:
        """Why the device is degraded now (recorder dropping data, MQTT thread dead)."""
        reasons = []
        if self.pub is not None:
            r = self.pub.threads_problem()
            if r:
                reasons.append(r)
        if self.rec is not None:
            r = self.rec.degraded_reason()
            if r:
                reasons.append(r)
        return "; ".join(reasons) or None

    def _check_degraded(self) -> None:
        """Supervisor: status ``degraded`` (with the reason) while a part is failing; back
        to ``running`` when it recovered. Other states (paused, sensor_fault) take
        precedence; the reason is in every health message either way."""
        reason = self._problems()
        changed = reason != self.degraded_reason
        self.degraded_reason = reason
        if reason is not None and (self.state == "running" or
                                   (self.state == "degraded" and changed)):
            log.warning("degraded: %s", reason)
            self._set_state("degraded", reason=reason)
        elif reason is None and self.state == "degraded":
            log.info("recovered: status running again")
            self._set_state("running")

    def _supervise(self) -> None:
        from edge.daemon.notify import ProgressWatchdog

        wd = ProgressWatchdog(self.notifier) if self.notifier is not None else None
        period_wd = (self.notifier.watchdog_s / 2) if (
            self.notifier is not None and self.notifier.watchdog_s) else None
        hi = self.cfg["mqtt"]["health_interval_s"]
        next_h = time.monotonic() + hi
        every = self.cfg["inverse"]["identify_every_s"]
        next_id = time.monotonic() + every if every > 0 else None
        while not self.stop_event.wait(min(hi, period_wd or hi, 0.5)):
            now = time.monotonic()
            if next_id is not None and now >= next_id and self.inverse is not None:
                next_id = now + every
                self._identify_due = True  # picked up by the estimating thread
            self._check_degraded()
            if wd is not None and period_wd:
                # a paused loop still consumes samples, so progress = samples processed;
                # a dead MQTT thread stops the pings too: systemd restarts the service
                mqtt_dead = self.pub is not None and self.pub.threads_problem() is not None
                if not mqtt_dead:
                    wd.tick(self.processed)
            if now >= next_h:
                next_h = now + hi
                if self.pub is not None:
                    import json

                    self.pub.send(self.pub.topics.health, json.dumps(self.health()).encode())

    # ---------------------------------------------------------------------- shutdown
    def abort(self) -> None:
        """Release what :func:`edge.daemon.app.build_daemon` opened, without running."""
        self.stop_event.set()
        try:
            self.acq.close()
        except Exception as e:  # noqa: BLE001
            log.warning("releasing the hardware failed: %s", e)
        if self.rec is not None:
            self.rec.close(timeout=2.0)
        if self.pub is not None:
            self.pub.stop(timeout=0.5)

    def _shutdown(self, code: int) -> int:
        if self.notifier is not None:
            self.notifier.stopping()
        self._acq_thread.join(timeout=5.0)
        try:
            self.acq.close()
        except Exception as e:  # noqa: BLE001
            log.warning("releasing the hardware failed: %s", e)
        if self.hw_error is not None and code == EXIT_OK:
            code = EXIT_HARDWARE
        if self.rec is not None:
            self.rec.close(timeout=self.cfg["recorder"]["close_timeout_s"])
        final = {"state": "stopped", "exit_code": code}
        if self.hw_error is not None:
            final["error"] = f"hardware: {self.hw_error}"
        self.state = "stopped"
        if self.pub is not None:
            if self.raw_pub is not None:
                self.raw_pub.flush()
            self.pub.stop(final_status=self.status_payload(**final))
        log.info("%s", run_summary(self.health()))
        log.info("stopped (exit code %d): %s", code, EXIT_CODES.get(code, ""))
        return code


# --------------------------------------------------------------------- built-in commands
def _cmd_pause(d: Daemon, args: dict):
    if d.paused:
        raise CommandError("already paused")
    d.paused = True
    d._set_state("paused")


def _cmd_resume(d: Daemon, args: dict):
    if not d.paused:
        raise CommandError("not paused")
    d.paused = False
    d._reset_estimator()  # the state is stale after a pause
    d._set_state("sensor_fault" if d.faults.fault.any() else d._ok_state())


def _cmd_reset_state(d: Daemon, args: dict):
    d._reset_estimator()


def _cmd_status(d: Daemon, args: dict):
    d._set_state(d.state)
    return {"status": d.status_payload()}


def _cmd_health(d: Daemon, args: dict):
    return {"health": d.health()}


def register_builtin_commands(reg: CommandRegistry) -> None:
    """pause, resume, reset_state, status, health (idempotent)."""
    for name, fn, doc in (
            ("pause", _cmd_pause, "stop estimating (acquisition and raw recording go on)"),
            ("resume", _cmd_resume, "estimate again (estimator state reset first)"),
            ("reset_state", _cmd_reset_state, "reset the estimator state (structure at rest)"),
            ("status", _cmd_status, "re-publish and return the status"),
            ("health", _cmd_health, "return the health statistics now")):
        if name not in reg.commands:
            reg.register(name, fn, doc=doc)
