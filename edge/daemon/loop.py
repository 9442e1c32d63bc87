"""The acquisition/estimation loop of the edge daemon: its threads and the sample path.

The other layers live beside it: exit codes (:mod:`edge.daemon.exitcodes`), sequence
alignment and the compiled per-sample step (:mod:`edge.daemon.fastpath`), sensor faults
(:mod:`edge.daemon.faults`), commands (:mod:`edge.daemon.commands`), status, health and the
supervisor (:mod:`edge.daemon.status`, :mod:`edge.daemon.health`).

Threads
-------
* **acquisition** (optionally SCHED_FIFO): ``acq.read`` straight into the preallocated
  :class:`~edge.daemon.ring.Ring`; never waits for anything else. If the ring is full the
  samples are counted lost (real clock). With the virtual clock there is no real converter
  that could overflow, so the thread waits for space instead (lossless simulation).
  With ``[loop] estimate_in = "acquisition"`` (the default for ``[bundle] block = 1``) this
  thread also flags and estimates each sample right after the driver returned it, before
  the sample becomes visible in the ring: no thread hand-over (GIL, condition variable,
  wake-up) lies between DRDY and the estimate. A clean sample (no gap, finite, no fault
  pending, not paused, Tikhonov estimator) takes one compiled call
  (:func:`edge.daemon.fastpath._sample`; with the ADS1256 in continuous mode the driver's
  ``read_one`` and :func:`edge.daemon.fastpath._sample_wire`, which also decodes its bytes);
  anything else the general path below.
* **loop** (the calling thread, :meth:`Daemon.run`): with ``estimate_in = "loop"`` it takes
  up to ``[bundle] block`` samples from the ring, flags them, runs
  ``Estimator.process``; in both modes it hands raw samples and estimates to the recorder
  in blocks (every ``[loop] handover_ms`` with ``estimate_in = "acquisition"``)
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
or at an ADC rail (bit2; the driver returns NaN for it). The estimator gets NaN there and
holds the channel's last finite value (kernel behaviour). After ``[faults] bad_sample_limit`` consecutive bad samples the channel is in
fault: status ``sensor_fault`` (with the channel names). When it delivers a good sample again
the estimator state is reset right before that sample and the status returns to ``running``.
Lost samples (flags bit3, ring overrun) also reset the estimator before the next sample.

Sequence numbers
----------------
``seq`` counts ADC samples from 0 (lost ones included). Each estimate row carries the
``seq``/``t_ns`` of the sample it describes: ``delay`` samples earlier in the stream that
was fed to the estimator (:func:`edge.daemon.fastpath._align`, for both paths). Rows in
warm-up (after start or a reset) are NaN with bit1.

Exit codes: see :data:`EXIT_CODES`.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import numpy as np

from edge.daemon import arena, realtime
from edge.daemon.arena import Arena
from edge.daemon.commands import CommandRegistry, register_builtin_commands, run_commands
from edge.daemon.fastpath import CLOCK_OK
from edge.daemon.samplepath import SamplePath
from edge.daemon.exitcodes import EXIT_CODES, EXIT_HARDWARE, EXIT_INTERNAL, EXIT_OK
from edge.daemon.faults import FaultTracker
from edge.daemon.health import CpuMeter, LatencyStats, RowRate, drdy_offset_ns
from edge.daemon.raw import RawPublisher
from edge.daemon.ring import Ring
from edge.daemon.status import StatusMixin
from edge.daemon.summary import run_summary

log = logging.getLogger("vsense.loop")


# ----------------------------------------------------------------------------- daemon
class Daemon(SamplePath, StatusMixin):
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
        # the rate the samples really arrive at, against 1/dt (StatusMixin._row_rate)
        self.row_rate = RowRate(self.rate, cfg["faults"]["rate_tolerance"],
                                cfg["mqtt"]["health_interval_s"])
        loop = cfg["loop"]
        self.block = cfg["bundle"]["block"]
        self.read_max = loop["read_max"]
        cap = max(int(loop["ring_s"] * self.rate), 2 * self.read_max, 2 * self.block)
        self.nf, self.nout = estimator.n_forces, estimator.n_outputs
        self.delay = estimator.delay
        # the per-sample state in three arrays (ring, alignment, rows by slot, latency
        # windows, counters): the compiled per-sample call takes them as three arguments
        self.arena = ar = Arena(cap, self.nch, self.nf, self.nout, self.block, self.delay,
                                loop["latency_window"])
        # per-slot views for one-sample reads, up to ~5 MB of them
        self.ring = Ring(cap, self.nch, slot_views=self.read_max == 1 and cap <= 16384,
                         arena=ar)
        self.raw_pub = None
        if publisher is not None and cfg["mqtt"].get("raw_decimation", 0) > 0:
            self.raw_pub = RawPublisher(publisher, self.nch, cfg["mqtt"]["raw_decimation"],
                                        publisher.topics.raw)
        self.std = getattr(estimator, "std", None)  # (nf + nout,) or None (Tikhonov)
        if publisher is not None and self.std is not None:
            publisher.std = np.asarray(self.std, dtype=np.float64)
        # estimator output rows of one block; circular history of the stream fed to the
        # estimator (edge.daemon.fastpath._align): seq, t_ns, flags of the last delay + 1 fed
        # samples; samples fed so far
        self._F, self._Z, self._ef = ar.view(arena.F), ar.view(arena.Z), ar.view(arena.EF)
        self._hseq, self._ht = ar.view(arena.HSEQ), ar.view(arena.HT)
        self._hf, self._hcount = ar.view(arena.HF), ar.view(arena.HCOUNT)
        self.faults = FaultTracker(self.nch, cfg["faults"]["bad_sample_limit"])
        mode = loop["estimate_in"]
        self.inline = mode == "acquisition" or (mode == "auto" and self.block == 1)
        self.handover_s = loop["handover_ms"] / 1e3
        # estimate rows by ring slot: the row produced when the slot's sample was estimated
        self._sV, self._sseq, self._st = ar.view(arena.SV), ar.view(arena.SSEQ), ar.view(arena.ST)
        self._sf, self._sok = ar.view(arena.SF), ar.view(arena.SOK)
        self._count = ar.view(arena.COUNT)  # processed, estimates, DRDY offset (+ known)
        self._fast_op = None  # estimator operator that self._fast_args were taken from
        self._fast_args: tuple | None = None  # (edge.daemon.fastpath._step arguments)
        self._sample_args: tuple | None = None  # (edge.daemon.fastpath._sample arguments)
        self._sample_fn = None  # _sample's compiled entry point (edge.daemon.fastpath.direct)
        self._wire_read = None  # the driver's one-row read (SamplePath._bind_wire) or None
        self._fast_ok = False  # see SamplePath._refresh_fast
        self.inverse = None  # edge.inverse.InverseHook when the bundle carries maps
        self.updates_locked: str | None = None  # reason update_model is refused (signature)
        self._identify_due = False  # set by the supervisor ([inverse] identify_every_s)
        self.scheduled_identifications = 0
        w = loop["latency_window"]
        # DRDY -> estimate ready; ring entry -> ready
        self.latency = LatencyStats(w, ar.view(arena.LAT_D), ar.view(arena.LAT_DS))
        self.latency_ring = LatencyStats(w, ar.view(arena.LAT_R), ar.view(arena.LAT_RS))
        self._t_off: int | None = None  # DRDY clock -> time.monotonic_ns offset [ns]
        self._t_off_known = False
        self.cpu = CpuMeter()
        self.state = "starting"
        self.degraded_reason: str | None = None
        self.paused = False
        self.stop_event = threading.Event()
        self.bad_samples = 0
        self.hw_error: BaseException | None = None
        self.finished = False
        self.first_sample = threading.Event()
        self._acq_thread = threading.Thread(target=self._acquire, name="vsense-acq",
                                            daemon=True)
        self._sup_thread = threading.Thread(target=self._supervise, name="vsense-sup",
                                            daemon=True)
        self.t_start = time.monotonic()
        if self._fast() is not None:  # the Tikhonov estimator: compiled step on both threads
            self._warm_up()

    # ------------------------------------------------------------------ counters
    def _counter(k: int, doc: str):  # noqa: N805 - a property factory used in the class body
        def get(self):
            return int(self._count[k])

        def put(self, v):
            self._count[k] = v
        return property(get, put, doc=doc)

    processed = _counter(arena.PROCESSED, "samples through the loop (watchdog progress)")
    estimates = _counter(arena.ESTIMATES, "estimate rows attached to samples")
    resets = _counter(arena.RESETS, "estimator resets (gaps, sensor recoveries)")
    del _counter

    # ------------------------------------------------------------------ acquisition
    def _acquire(self) -> None:
        rt = self.cfg["realtime"]
        realtime.set_fifo(rt["sched_fifo_priority"])
        realtime.set_timer_slack(rt["timer_slack_ns"])
        ring = self.ring
        inline, virtual, read_max = self.inline, self.virtual, self.read_max
        stopped, read, stage, publish = (self.stop_event.is_set, self.acq.read, ring.stage,
                                         ring.publish)
        # one compiled call per clean sample (edge.daemon.fastpath._sample) when estimating
        # here one sample per read into the ring's ready-made slot views
        slots = ring._slot if inline and read_max == 1 and CLOCK_OK else None
        pub = self.pub
        i = -1  # slot of the next sample when known to be free (compiled path), else -1
        try:
            while not stopped():
                own = i >= 0  # a free slot's views, without write_span
                if own:
                    v, t, f = slots[i]
                else:
                    if virtual:
                        while ring.capacity - ring.available() < 1 and not stopped():
                            time.sleep(0.0005)
                    v, t, f = ring.write_span(read_max)
                # the driver's bytes straight into one compiled call (_sample_wire)?
                wire = self._wire_read if own and self._fast_ok else None
                try:
                    if wire is not None:
                        b, tw = wire()
                    else:
                        n = read(v, t, f)
                except BaseException as e:
                    if own:
                        ring._span_scratch = False
                    k = int(getattr(e, "n_read", 0) or 0)  # rows before the error
                    if stage(k):
                        if inline:
                            self._estimate_staged(k)
                        publish(k)
                    raise
                if wire is not None:
                    n = 1
                    if not self._identify_due and not (pub is not None and pub.cmd_flag):
                        i = self._wire_fn(b[0], b[1], b[2], tw, *self._wire_args)
                        if i != -2:
                            continue
                    else:  # due meanwhile: the row into the slot, then the general path
                        post, codes, pf8, pi8 = self._wire_post
                        post(b[0], b[1], b[2], tw, codes, v, t, f, pf8, pi8)
                elif slots is not None and n == 1 and self._fast_ok \
                        and (own or not ring._span_scratch) and not self._identify_due \
                        and not (pub is not None and pub.cmd_flag):
                    i = self._sample_fn(*self._sample_args)
                    if i != -2:
                        continue
                if own:
                    ring._span_scratch = False
                i = -1
                if stage(n):
                    if not self._t_off_known:
                        self._t_off = drdy_offset_ns(self.acq, self.virtual)
                        self._t_off_known = True
                        if self._t_off is not None:
                            self._count[arena.T_OFF] = self._t_off
                            self._count[arena.T_OFF_KNOWN] = 1
                        self.first_sample.set()
                    if inline:
                        self._estimate_staged(n)
                    publish(n)
                    if slots is not None:
                        self._refresh_fast()
                        if self._fast_ok:
                            i = ring.next_slot()
        except EOFError as e:
            log.info("acquisition finished: %s", e)
            self.finished = True
        except BaseException as e:  # noqa: BLE001 - reported by the loop, exit code 4
            log.error("acquisition failed: %s", e)
            self.hw_error = e
        finally:
            self.first_sample.set()
            ring.close()

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
        # every kernel is compiled or loaded now (estimator, decode, fast path)
        realtime.release_after_startup(rt)
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
            if not inline and self.pub is not None and self.pub.cmd_flag:
                run_commands(self)
            self._idle()

    def _idle(self) -> None:
        if self.rec is not None:
            self.rec.poll()
        if self.pub is not None:
            self.pub.poll()
            if self.raw_pub is not None:
                self.raw_pub.poll()
            # commands run on the estimating thread: here only when that is the loop thread
            # or the acquisition thread (estimate_in = "acquisition") has ended
            if not self.pub.commands.empty() and not (self.inline
                                                      and self._acq_thread.is_alive()):
                run_commands(self)

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
