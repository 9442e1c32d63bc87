"""Glue between the daemon and the inverse maps: the hook, its port, the commands.

The daemon hands the hook a :class:`InversePort` at attach time: the callables through which
the hook reads the running bundle, swaps the estimator's model, publishes, and (simulated rig
only) injects the known excitation. The hook never looks inside the daemon; the commands
``identify`` and ``update_model`` find the hook as the controller's ``inverse``
(:class:`edge.daemon.control.Controller`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from edge.admissible import allow
from edge.daemon.commands import CommandError
from edge.inverse.parametric import InverseMapError, RejectedUpdate, check_parameters
from edge.inverse.runtime import InverseRuntime, WindowCapture, check_bounds
from edge.inverse.update import calibration_params, model_id, update_model


def _unlocked() -> str | None:
    return None


@dataclass
class InversePort:
    """What the inverse hook may do to the daemon (all callables, handed over at attach time).

    Attributes
    ----------
    bundle : callable () -> Bundle
        The running bundle (model updates start from its channels, forces, outputs, dt).
    swap : callable (op, bundle) -> None
        Swap the estimator's step operator and bundle between two blocks.
    publish : callable (topic name, dict) -> None, or None
        Publish a JSON payload on ``params`` or ``meta``; None: publish nothing.
    nch : int or None
        Physical channels per sample (checked against a map before a capture).
    inject : callable (f, substeps) -> first sample seq, or None
        Simulated rig only: apply the known excitation itself.
    locked : callable () -> str or None
        Why model updates are refused now (e.g. the bundle's signature did not verify, or
        the estimator cannot take a new model: the Kalman smoother).
    """

    bundle: Callable[[], Any]
    swap: Callable[[Any, Any], None]
    publish: Callable[[str, dict], None] | None = None
    nch: int | None = None
    inject: Callable | None = None
    locked: Callable[[], str | None] = _unlocked

    @classmethod
    def of(cls, est, pub=None, nch: int | None = None, source=None,
           locked: Callable[[], str | None] | None = None) -> "InversePort":
        """The port of an estimator (``est.bundle``, ``est.swap``), a publisher (``send``,
        ``topics``) and a signal source (``inject_excitation`` when it simulates the rig)."""

        def bundle():
            return est.bundle

        def swap(op, b):
            est.swap(op, bundle=b)

        publish = None
        if pub is not None:
            def publish(topic: str, obj: dict) -> None:
                pub.send(getattr(pub.topics, topic), json.dumps(obj).encode())
        inject = getattr(source, "inject_excitation", None)
        signature = locked or _unlocked

        def why_locked() -> str | None:  # the estimator's own refusal first (smoother)
            return est.update_refused() or signature()
        return cls(bundle, swap, publish, nch, inject if callable(inject) else None,
                   why_locked)


class InverseHook:
    """The inverse maps in the daemon (created once at start-up, acts through its port).

    :meth:`start` arms a capture (the simulated rig injects the excitation); :meth:`push`
    takes every block of physical channel samples (nb, nch) on the loop thread and returns
    the ``params`` payload (also published) when the window is complete; ``auto_update``
    (config) applies an accepted in-range identification at once; :meth:`apply` updates the
    estimator's model between two blocks.
    """

    def __init__(self, runtime: InverseRuntime, port: InversePort, auto_update: bool = False):
        self.rt = runtime
        self.port = port
        self.auto_update = bool(auto_update)
        self.pending: str | None = None
        self.model_id: str | None = None
        self.base_id = getattr(port.bundle(), "bundle_id", "bundle")

    @classmethod
    def attach(cls, daemon, port: InversePort, auto_update: bool = False,
               runtime: InverseRuntime | None = None) -> "InverseHook":
        """Set ``daemon.inverse`` (:class:`edge.daemon.control.Controller`) to a hook on
        ``runtime``, by default the runtime of the port's bundle (sessions, check sets; raises
        :class:`InverseMapError`). The daemon's sample path calls :meth:`start` (a scheduled
        identification) and :meth:`push` (every block while a window is armed)."""
        rt = runtime if runtime is not None else InverseRuntime.from_bundle(port.bundle())
        hook = cls(rt, port, auto_update)
        daemon.inverse = hook
        return hook

    def start(self, name: str | None = None) -> dict:
        """Arm a capture for map ``name`` (default map when None); returns the reply."""
        m = self.rt.get(name)
        nch = self.port.nch if self.port.nch is not None else m.nch
        if m.nch != nch:
            raise ValueError(f"map {m.name!r} expects {m.nch} channels, the daemon has {nch}")
        self.rt.capture = WindowCapture(m.n, m.nch)
        start = None
        if self.port.inject is not None:  # simulated rig: it applies the known excitation itself
            sub = int(m.experiment.get("substeps", 1))  # as the training data were simulated
            start = self.port.inject(self.rt.excitation(m.name, sub), substeps=sub)
        self.rt.capture.arm(start if isinstance(start, (int, np.integer)) else None)
        self.pending = m.name
        return {"map": m.name, "samples": m.n, "duration_s": m.n / m.rate}

    def push(self, Y, seq0: int | None = None) -> dict | None:
        """Add a block (nb, nch) whose first row is stream sample ``seq0``; the ``params``
        payload when the window completes, else None."""
        if self.pending is None:
            return None
        w = self.rt.capture.push(Y, seq0)
        if w is None:
            return None
        name, self.pending = self.pending, None
        try:
            res = self.rt.identify(w, name)
        except ValueError as exc:
            res = {"map": name, "error": str(exc)}
        if self.auto_update and "values" in res and not res["out_of_range"] \
                and allow(res, self.port.bundle().meta):   # edge.admissible (issue 17)
            try:
                res["model_id"] = self.apply(dict(zip(res["names"], res["values"])))
            except RejectedUpdate as exc:
                res["update_rejected"] = str(exc)
        self.publish("params", res)
        return res

    def apply(self, params) -> str:
        """Update the estimator's model between two blocks; publish the new model id on meta."""
        if self.rt.parts is None:
            raise RejectedUpdate("the bundle carries no parametric model: parameters cannot be applied")
        locked = self.port.locked()
        if locked:  # [bundle] public_key set and the bundle's signature did not verify
            raise RejectedUpdate(locked)
        t0 = time.perf_counter()
        th = check_parameters(self.rt.parts, params)
        check_bounds(self.rt, self.rt.parts.names, th)
        op, nb, th = update_model(self.rt.parts, self.port.bundle(), th)
        self.port.swap(op, nb)
        self.model_id = model_id(self.base_id, self.rt.parts.names, th)
        self.publish("meta", {"model_id": self.model_id,
                              "params": dict(zip(self.rt.parts.names, th.tolist())),
                              "update_ms": (time.perf_counter() - t0) * 1e3})
        return self.model_id

    def publish(self, topic: str, obj: dict) -> None:
        if self.port.publish is not None:
            self.port.publish(topic, obj)


# =========================================================================== commands
def _hook(daemon) -> InverseHook:
    hook = getattr(daemon, "inverse", None)
    if hook is None:
        raise CommandError("this device runs no inverse maps (the bundle was built without "
                           "[[parameters]], or they did not load at start-up)")
    return hook


def _cmd_identify(daemon, args: dict):
    try:
        return {"identify": _hook(daemon).start(args.get("map"))}
    except (KeyError, ValueError) as exc:
        if isinstance(exc, CommandError):
            raise
        raise CommandError(str(exc).strip("'\"")) from None


def _cmd_update_model(daemon, args: dict):
    hook = _hook(daemon)
    calib = args.get("calibration")
    if calib is not None:
        try:
            params, info = calibration_params(calib, force=bool(args.get("force", False)))
            mid = hook.apply(params)
        except RejectedUpdate as exc:
            raise CommandError(str(exc)) from None
        # posterior std and free energy published with the applied values on `params`
        hook.publish("params", {"source": "calibration", "model_id": mid,
                                "names": list(params), "values": list(params.values()), **info})
        return {"model_id": mid}
    params = args.get("params")
    if params is None:
        last = hook.rt.last
        if last is None or "values" not in last:
            raise CommandError("no identification result to apply; send 'params' or run 'identify'")
        if last["out_of_range"] and not args.get("force", False):
            raise CommandError("the last identification is out of range; send force=true to apply it")
        params = dict(zip(last["names"], last["values"]))
    try:
        return {"model_id": hook.apply(params)}
    except RejectedUpdate as exc:
        raise CommandError(str(exc)) from None


def register_commands(registry) -> None:
    """Register ``identify`` and ``update_model`` on the daemon's command registry."""
    registry.register("identify", _cmd_identify, args={"map": str},
                      doc="capture the known experiment, infer parameters, publish on params")
    registry.register("update_model", _cmd_update_model,
                      args={"params": dict, "force": bool, "calibration": dict},
                      doc="apply parameters (default: the last identification, or a calibration "
                          "posterior) to the estimator; publishes the new model id on meta")


__all__ = ["InverseHook", "InverseMapError", "InversePort", "register_commands"]
