"""The edge daemon's sample path: one acquisition thread, one I/O thread.

::

    ADC (driver or simulator)
      │ acq.read(slot views)                       acquisition thread (SCHED_FIFO optional)
      ▼
    ring slot ── one compiled call per clean sample (edge.daemon.fastpath._sample, the
      │          smoother's _sample_smooth): stage, estimate, align, latency, publish
      │          (head += 1), the next slot; otherwise the general path
      │          (edge.daemon.samplepath): faults, gaps, pause, commands, identification
      │          windows, blocks, the smoother's Python decisions
      ▼
    ring (preallocated; estimate rows by slot)
      │ every tick (<= 100 ms)                     I/O thread (Daemon.run)
      ▼
    batch, encode, publish (edge.daemon.mqtt) · record (edge.daemon.recorder)
    · health, status, systemd watchdog (edge.daemon.status)

Threads
-------
* **acquisition** (optionally SCHED_FIFO, ``[realtime] sched_fifo_priority``): reads
  ``[bundle] block`` samples (1 by default) into the next free ring slots and estimates them
  right there, before they become visible to the I/O thread: no thread hand-over lies
  between DRDY and the estimate. If the ring is full the samples are counted lost (real
  clock) and the next one carries the gap flag; with the virtual clock (simulation) the
  thread waits for space instead. Accepted commands run on this thread between two samples
  (it polls a plain flag the MQTT thread sets), so the estimator and its state need no lock.
* **I/O** (the calling thread, :meth:`Daemon.run`): every tick takes what the ring holds,
  gives raw samples and estimates to the recorder (its writer thread does the disk) and
  estimates to the publisher (paho's network thread does the socket), and supervises:
  health messages, status changes, systemd watchdog pings (only while samples advance).

Latency
-------
Per sample, ``time.monotonic_ns`` when its estimate is ready (the estimator returned and the
row sits in the ring, before recorder/publisher) minus its DRDY time (the driver's ``t_ns``,
mapped to the monotonic clock by :func:`drdy_offset_ns`): ``latency_us`` in health.
``latency_ring_us``: from the sample entering the ring to the same point (the fallback for
``latency_us`` when the acquisition clock is virtual).

Sequence numbers
----------------
``seq`` counts ADC samples from 0 (lost ones included). Each estimate row carries the
``seq``/``t_ns`` of the sample it describes: ``delay`` samples earlier in the stream that
was fed to the estimator (:func:`edge.daemon.fastpath._align`). Rows in warm-up (after
start or a reset) are NaN with bit1. Bad samples and faults: :mod:`edge.daemon.samplepath`.

Exit codes: see :data:`EXIT_CODES`.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np

from edge.daemon import realtime
from edge.daemon.arena import Arena
from edge.daemon.commands import CommandRegistry, register_builtin_commands, run_commands
from edge.daemon.exitcodes import EXIT_CODES, EXIT_HARDWARE, EXIT_INTERNAL, EXIT_OK
from edge.daemon.health import drdy_offset_ns
from edge.daemon.raw import RawPublisher
from edge.daemon.ring import Ring
from edge.daemon.samplepath import SamplePath
from edge.daemon.status import Status
from edge.daemon.summary import run_summary

log = logging.getLogger("vsense.loop")

#: seconds of samples the ring holds between the two threads
RING_S = 2.0
#: latencies kept for the percentiles in health
LATENCY_WINDOW = 100_000
#: longest I/O tick [s] (shorter when ``[mqtt] max_batch_delay_s`` is): the I/O thread wakes
#: once per tick, and at 1 kHz a tick of 0.1 s (the default batch delay) hands two batches of
#: 50 to paho per wake instead of one (measured: I/O + paho threads 0.9 instead of 1.4 % of a
#: core, docs/benchmarks.md)
IO_TICK_S = 0.1


# ----------------------------------------------------------------------------- daemon
class Daemon:
    """One running device: acquisition, estimation, publishing, recording; commands act on
    it through :class:`edge.daemon.control.Controller` (pause, resume, reset, status, health).

    It owns three parts, each with one job: :attr:`path` (:class:`edge.daemon.samplepath.
    SamplePath`: the per-sample state and its rules, on the acquisition thread), :attr:`status`
    (:class:`edge.daemon.status.Status`: state, meta, health, supervisor) and the ring
    between the two threads; this class runs the threads and wires the parts together.

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
        self.nch = len(cfg.channels)
        self.rate = 1.0 / estimator.bundle.dt
        self.command_id = None  # the command being run (edge.daemon.commands.run_commands)
        self.block = cfg["bundle"]["block"]
        cap = max(int(RING_S * self.rate), 4 * self.block)
        # the per-sample state in three arrays (ring, alignment, rows by slot, latency
        # windows, counters): the compiled per-sample call takes them as three arguments
        self.arena = Arena(cap, self.nch, estimator.n_forces, estimator.n_outputs, self.block,
                           estimator.delay, LATENCY_WINDOW)
        self.ring = Ring(cap, self.nch, arena=self.arena)
        self.raw_pub = None
        if publisher is not None and cfg["mqtt"].get("raw_decimation", 0) > 0:
            self.raw_pub = RawPublisher(publisher, self.nch, cfg["mqtt"]["raw_decimation"],
                                        publisher.topics.raw)
        if publisher is not None and getattr(estimator, "std", None) is not None:
            publisher.std = np.asarray(estimator.std, dtype=np.float64)
        self.path = SamplePath(estimator, self.ring, self.arena,
                               [c["name"] for c in cfg.channels],
                               cfg["faults"]["bad_sample_limit"],
                               cfg["inverse"]["map"] or None, publisher)
        self.status = Status(cfg, estimator, acquisition, self.ring, self.path, publisher,
                             recorder, notifier)
        self.path.run_commands = self._run_commands
        self.path.on_faults = lambda: self.status.faults_changed(self.path.paused)
        self.fatigue = None  # edge.fatigue.monitor.FatigueMonitor with [[fatigue]] hotspots
        self.updates_locked: str | None = None  # reason update_model is refused (signature)
        self.stop_event = threading.Event()
        self.stopping = False  # stop() was called: a plain flag the acquisition loop reads
        self.hw_error: BaseException | None = None
        self.finished = False
        self.first_sample = threading.Event()
        self._acq_thread = threading.Thread(target=self._acquire, name="vsense-acq",
                                            daemon=True)
        self.tick_s = min(IO_TICK_S, max(0.001, cfg["mqtt"]["max_batch_delay_s"]))

    def _run_commands(self) -> None:
        run_commands(self.pub, self)
        self.path.refresh_fast()

    # ------------------------------------------------------- what the parts report
    processed = property(lambda self: self.path.processed, doc="samples through the loop")
    estimates = property(lambda self: self.path.estimates, doc="estimate rows attached")
    resets = property(lambda self: self.path.resets, doc="estimator resets")
    latency = property(lambda self: self.path.latency, doc="DRDY -> estimate ready")
    latency_ring = property(lambda self: self.path.latency_ring, doc="ring -> ready")
    state = property(lambda self: self.status.state, doc="the published state")
    degraded_reason = property(lambda self: self.status.degraded_reason)

    def health(self) -> dict:
        return self.status.health()

    # ------------------------------------------------------- controller (edge.daemon.control)
    @property
    def paused(self) -> bool:
        return self.path.paused

    @property
    def inverse(self):
        return self.path.inverse

    @inverse.setter
    def inverse(self, hook) -> None:
        self.path.inverse = hook
        self.path.refresh_fast()

    def pause(self) -> None:
        self.path.paused = True
        self.status.set_state("paused")
        self.path.refresh_fast()

    def resume(self) -> None:
        self.path.paused = False
        self.path.reset()  # the state is stale after a pause
        self.status.faults_changed(False)
        self.path.refresh_fast()

    def reset(self) -> None:
        self.path.reset()

    def publish_status(self) -> dict:
        self.status.set_state(self.status.state)
        return self.status.status_payload()

    def later(self, command, cid) -> None:
        self.pub.commands.put_nowait((command, {}, cid))
        self.pub.cmd_flag = True

    # ------------------------------------------------------------------ acquisition
    def _acquire(self) -> None:
        realtime.set_fifo(self.cfg["realtime"]["sched_fifo_priority"])
        ring, path = self.ring, self.path
        virtual, block = self.virtual, self.block
        read, slots = self.acq.read, ring.slots
        pub = self.pub
        span = None  # the views the next read fills
        try:
            while not self.stopping:
                if span is None:
                    if virtual:
                        while ring.capacity - ring.available() < block and not self.stopping:
                            time.sleep(0.0005)
                    span = ring.write_span(block)
                try:
                    n = read(*span)
                except BaseException as e:
                    k = int(getattr(e, "n_read", 0) or 0)  # rows before the error
                    if ring.stage(k):
                        path.estimate_staged(k)
                        ring.publish(k)
                    raise
                # a clean sample in the plain running state: one compiled call (stage,
                # estimate, align, latency, publish) that also names the next free slot;
                # -2: it needs the general path
                if n == 1 and path.fast_ok and not ring.scratch and not path.identify_due \
                        and not (pub is not None and pub.cmd_flag):
                    i = path.call(*path.args)
                    if i != -2:
                        span = slots[i] if i >= 0 else None
                        continue
                span = None
                if ring.stage(n):
                    if not path.t_off_known:
                        self._first_sample()
                    path.estimate_staged(n)
                    ring.publish(n)
                    path.refresh_fast()
        except EOFError as e:
            log.info("acquisition finished: %s", e)
            self.finished = True
        except BaseException as e:  # noqa: BLE001 - reported by the loop, exit code 4
            log.error("acquisition failed: %s", e)
            self.hw_error = e
        finally:
            self.first_sample.set()
            ring.close()

    def _first_sample(self) -> None:
        """The DRDY clock's offset to ``time.monotonic_ns`` (latency), once."""
        self.path.set_clock_offset(drdy_offset_ns(self.acq, self.virtual))
        self.first_sample.set()

    # --------------------------------------------------------------------- the I/O loop
    def run(self) -> int:
        """Run until stopped (:meth:`stop`, a signal handler), the simulation ends, or the
        hardware fails; return the exit code."""
        self.status.publish_meta()
        self.status.set_state("starting")
        # start-up garbage is frozen, not scanned by every collection while running; what
        # start-up used and the running daemon does not is given back (every kernel is
        # compiled or loaded now)
        realtime.gc_setup()
        realtime.release_after_startup(self.cfg["realtime"])
        self._acq_thread.start()
        self.first_sample.wait()
        if self.hw_error is None:
            self.status.set_state("running")
            if self.notifier is not None:
                self.notifier.ready(f"running: {self.nch} channels at {self.rate:g} samples/s")
        code = EXIT_OK
        try:
            self._io_loop()
        except Exception:
            log.exception("loop failed")
            code = EXIT_INTERNAL
        finally:
            self.stop()
            code = self._shutdown(code)
        return code

    def stop(self, *_args) -> None:
        """Request a clean stop (safe from a signal handler)."""
        self.stopping = True
        self.stop_event.set()

    def _io_loop(self) -> None:
        ring = self.ring
        sup = self.status.supervisor()
        while True:
            n = ring.available()
            if n:
                i, n = ring.read_span(n)
                self._handover(i, n)
                ring.release(n)
                continue  # the rest of a wrapped span
            if ring.closed:  # the acquisition thread published its last samples
                if ring.available() == 0:
                    break
                continue
            if self.stop_event.is_set():  # drain: wait for the acquisition thread to end
                self._acq_thread.join(self.tick_s)
                if not self._acq_thread.is_alive() and ring.available() == 0:
                    break
                continue
            self._idle()
            next(sup)
            self.stop_event.wait(self.tick_s)

    def _idle(self) -> None:
        if self.rec is not None:
            self.rec.poll()
        if self.fatigue is not None:
            self.fatigue.tick()
        if self.pub is not None:
            self.pub.poll()
            if self.raw_pub is not None:
                self.raw_pub.poll()
            # commands run on the acquisition thread; here only once it has ended
            if not self.pub.commands.empty() and not self._acq_thread.is_alive():
                run_commands(self.pub, self)

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
        a = self.arena
        ok = a.sok[i:i + n]
        fat = self.fatigue
        if self.pub is None and fat is None and (self.rec is None
                                                 or "estimates" not in self.rec.streams):
            ok[:] = False
            return
        if ok.all():
            sel = slice(i, i + n)
        elif ok.any():
            sel = i + np.nonzero(ok)[0]
        else:
            return
        seq, t, V, f = a.sseq[sel], a.st[sel], a.sV[sel], a.sf[sel]
        if fat is not None:
            fat.feed(V)
        if self.pub is not None:
            self.pub.add_estimates(seq, t, V, f)
        if self.rec is not None:
            self.rec.append_estimates(seq, t, V, f)
        ok[:] = False

    # ---------------------------------------------------------------------- shutdown
    def abort(self) -> None:
        """Release what :func:`edge.daemon.app.build_daemon` opened, without running."""
        self.stop()
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
        if self.fatigue is not None:
            self.fatigue.close()
        final = {"state": "stopped", "exit_code": code}
        if self.hw_error is not None:
            final["error"] = f"hardware: {self.hw_error}"
        self.status.state = "stopped"
        if self.pub is not None:
            if self.raw_pub is not None:
                self.raw_pub.flush()
            self.pub.stop(final_status=self.status.status_payload(**final))
        log.info("%s", run_summary(self.health()))
        log.info("stopped (exit code %d): %s", code, EXIT_CODES.get(code, ""))
        return code
