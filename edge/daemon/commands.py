"""Commands on ``<base>/<device>/cmd``: validation (bounded before decoding) and the registry.

A payload is ``{"cmd": name, "id": any, "args": {...}}``; :meth:`CommandRegistry.parse`
returns the command or raises :class:`CommandError` with the reason sent on ``cmd/reply``,
and never anything else (it runs on paho's network thread: an escaping exception would end
it). ``[mqtt] commands`` restricts which registered commands are accepted.
"""

from __future__ import annotations

import json
import logging
import math
import queue
from dataclasses import dataclass, field
from typing import Any, Callable

log = logging.getLogger("vsense.loop")


#: a handler's return value: the command is under way and replies later (its completion,
#: queued as a command of its own: :mod:`edge.daemon.tare`)
DEFERRED = object()


class CommandError(ValueError):
    """A command was rejected; the message is the reason sent on ``cmd/reply``.

    ``cid`` is the command's ``id`` when it could be read (echoed in the reply)."""

    def __init__(self, msg: str, cid: Any = None):
        super().__init__(msg)
        self.cid = cid


#: Largest accepted ``cmd`` payload [bytes]; the largest legitimate command (update_model
#: with a few parameters) is well under 1 KB.
MAX_COMMAND_BYTES = 16_384
#: Deepest accepted JSON nesting of a command (``{"args": {"params": {...}}}`` is 3).
MAX_COMMAND_DEPTH = 8


def _json_depth(payload: str) -> int:
    """Nesting depth of a JSON text, counted on the raw characters (strings skipped) so
    that a deeply nested payload is refused before the recursive decoder sees it."""
    depth = deepest = 0
    in_str = esc = False
    for ch in payload:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


@dataclass
class Command:
    name: str
    handler: Callable[[Any, dict], dict | None]  # (controller, args) -> extra reply fields
    args: dict[str, type | tuple] = field(default_factory=dict)  # name -> type(s)
    required: tuple[str, ...] = ()
    doc: str = ""


class CommandRegistry:
    """Named commands with argument validation; a hook for other parts of vsense.

    ``registry.register("identify", fn, args={"window_s": float}, required=("window_s",),
    doc="...")``; ``fn(controller, args) -> dict | None`` runs on the loop thread between two
    estimator blocks with the daemon's :class:`edge.daemon.control.Controller` and raises
    :class:`CommandError` to reject.

    ``allowed`` (``[mqtt] commands``): names accepted from the network; ``None`` = all
    registered commands. Others are rejected with the reason "not allowed on this device".
    """

    def __init__(self, allowed: list[str] | tuple[str, ...] | None = None):
        self.commands: dict[str, Command] = {}
        self.allowed: set[str] | None = None if allowed is None else set(allowed)

    def register(self, name: str, handler, args: dict | None = None,
                 required: tuple[str, ...] = (), doc: str = "") -> None:
        if name in self.commands:
            raise ValueError(f"command {name!r} already registered")
        self.commands[name] = Command(name, handler, dict(args or {}), tuple(required), doc)

    def parse(self, payload: bytes) -> tuple[Command, dict, Any]:
        """Validate a raw payload; return ``(command, args, id)`` or raise CommandError.

        Never raises anything else: size and nesting are bounded before decoding (a deeply
        nested payload would otherwise raise RecursionError in the decoder)."""
        if len(payload) > MAX_COMMAND_BYTES:
            raise CommandError(f"payload too large ({len(payload)} bytes, at most "
                               f"{MAX_COMMAND_BYTES})")
        try:
            text = bytes(payload).decode("utf-8")
        except UnicodeDecodeError as e:
            raise CommandError(f"payload is not JSON: not UTF-8 ({e.reason} at byte "
                               f"{e.start})") from None
        if _json_depth(text) > MAX_COMMAND_DEPTH:
            raise CommandError(f"payload is nested deeper than {MAX_COMMAND_DEPTH} levels")
        try:
            msg = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise CommandError(f"payload is not JSON: {e}") from None
        if not isinstance(msg, dict):
            raise CommandError("payload must be a JSON object {\"cmd\": ..., \"args\": {...}}")
        cid = msg.get("id")
        if not (cid is None or isinstance(cid, (str, int, float)) and not isinstance(cid, bool)):
            cid = None
            raise CommandError("field 'id' must be a string or a number")
        if isinstance(cid, str) and len(cid) > 128:
            raise CommandError("field 'id' longer than 128 characters")
        extra = sorted(set(msg) - {"cmd", "id", "args"})
        if extra:
            raise CommandError(f"unknown field {extra[0]!r} (allowed: cmd, id, args)", cid)
        name = msg.get("cmd")
        if not isinstance(name, str):
            raise CommandError("field 'cmd' missing or not a string", cid)
        cmd = self.commands.get(name)
        if cmd is None:
            raise CommandError(f"unknown command {name[:64]!r} (known: "
                               f"{', '.join(sorted(self.commands))})", cid)
        if self.allowed is not None and name not in self.allowed:
            raise CommandError(f"command {name!r} is not allowed on this device "
                               f"([mqtt] commands)", cid)
        args = msg.get("args", {})
        if not isinstance(args, dict):
            raise CommandError("field 'args' must be an object", cid)
        for k, v in args.items():
            if k not in cmd.args:
                raise CommandError(f"{name}: unknown argument {k[:64]!r}", cid)
            t = cmd.args[k]
            if isinstance(v, bool) and t is not bool and bool not in (t if isinstance(t, tuple) else (t,)):
                raise CommandError(f"{name}: argument {k!r} must be {t}, got bool", cid)
            if not isinstance(v, t):
                raise CommandError(f"{name}: argument {k!r} has the wrong type "
                                   f"({type(v).__name__})", cid)
            if isinstance(v, float) and not math.isfinite(v):
                raise CommandError(f"{name}: argument {k!r} is not finite", cid)
        for k in cmd.required:
            if k not in args:
                raise CommandError(f"{name}: missing argument {k!r}", cid)
        return cmd, args, cid


# ----------------------------------------------------------- running (daemon side)
def run_commands(pub, ctl) -> None:
    """Run the accepted commands queued by the MQTT thread on publisher ``pub``, on the
    estimating thread (between two estimator calls: the estimator needs no lock), each with
    the daemon's :class:`edge.daemon.control.Controller` ``ctl``; reply to each."""
    pub.cmd_flag = False  # cleared before draining: a later command sets it again
    while True:
        try:
            cmd, args, cid = pub.commands.get_nowait()
        except queue.Empty:
            return
        try:
            ctl.command_id = cid  # for a handler that replies later (DEFERRED)
            extra = cmd.handler(ctl, args) or {}
            if extra is DEFERRED:
                continue
            pub.reply({"id": cid, "cmd": cmd.name, "ok": True, **extra})
        except CommandError as e:
            pub.reply({"id": cid, "cmd": cmd.name, "ok": False, "reason": str(e)})
        except Exception as e:  # noqa: BLE001 - a hook failed: reject, keep running
            log.exception("command %s failed", cmd.name)
            pub.reply({"id": cid, "cmd": cmd.name, "ok": False,
                       "reason": f"{type(e).__name__}: {e}"})


# the handlers: (controller (edge.daemon.control.Controller), args) -> extra reply fields
def _cmd_pause(c, args: dict):
    if c.paused:
        raise CommandError("already paused")
    c.pause()


def _cmd_resume(c, args: dict):
    if not c.paused:
        raise CommandError("not paused")
    c.resume()


def _cmd_reset_state(c, args: dict):
    c.reset()


def _cmd_status(c, args: dict):
    return {"status": c.publish_status()}


def _cmd_health(c, args: dict):
    return {"health": c.health()}


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
