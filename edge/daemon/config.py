"""Daemon configuration: one TOML file described by one schema.

The schema (:data:`SCHEMA`) lists every key with its type, default, unit, limits and a
description. :func:`load_config` validates a file against it and returns a frozen-ish
:class:`Config` (nested dicts with defaults filled in); every error names the file and the key
(``edge.toml: [mqtt] port: must be <= 65535, got 70000``). :func:`reference_markdown` renders
the same schema as the Markdown reference embedded in ``docs/daemon.md``.

Secrets never live in the file: ``[mqtt] password_env`` names an environment variable that is
read at start (:func:`mqtt_password`).
"""

from __future__ import annotations

import logging
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge.daemon.gauge import resolve_bridges
from edge.daemon.schema import (ADS1256_DRATES, ADS1256_PGA, ADS1256_PINS,  # noqa: F401
                                 DEFAULT_PATH, DEPRECATED, EXAMPLE, REQUIRED, SCHEMA, Key,
                                 Section,
                                 reference_markdown)

log = logging.getLogger("vsense.config")


class ConfigError(ValueError):
    """A configuration file is missing, unreadable or invalid; the message names the key."""


@dataclass
class Config:
    """Validated configuration: ``cfg.section("mqtt")["port"]``; ``cfg.channels`` a list."""

    data: dict[str, Any]
    path: Path | None = None
    base_dir: Path = field(default_factory=Path.cwd)

    def __getitem__(self, section: str):
        return self.data[section]

    @property
    def channels(self) -> list[dict]:
        return self.data["channels"]

    def resolve(self, p: str | os.PathLike) -> Path:
        """A path from the file, relative to the directory of the config file."""
        p = Path(os.path.expanduser(str(p)))
        return p if p.is_absolute() else (self.base_dir / p)



_SECTIONS = {s.name: s for s in SCHEMA}


#: Longest accepted string value (paths, names, host); control characters are refused too.
MAX_STR = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _type_ok(t: str, v: Any) -> bool:
    if t == "str":
        return isinstance(v, str)
    if t == "bool":
        return isinstance(v, bool)
    if t == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "float":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t.startswith("list["):
        inner = t[5:-1]
        return isinstance(v, list) and all(_type_ok(inner, x) for x in v)
    raise AssertionError(t)


def _check_key(key: Key, v: Any, where: str) -> Any:
    if not _type_ok(key.type, v):
        raise ConfigError(f"{where} {key.name}: expected {key.type}, got {type(v).__name__} "
                          f"{v!r}")
    if key.type == "float":
        v = float(v)
        if not math.isfinite(v):
            raise ConfigError(f"{where} {key.name}: must be finite, got {v!r}")
    items = v if isinstance(v, list) else [v]
    for x in items:
        if isinstance(x, str) and (len(x) > MAX_STR or _CONTROL.search(x)):
            raise ConfigError(f"{where} {key.name}: {x[:40]!r}{'...' if len(x) > 40 else ''} "
                              f"is not a usable value (control characters, or longer than "
                              f"{MAX_STR} characters)")
        if key.choices is not None and x not in key.choices:
            raise ConfigError(f"{where} {key.name}: must be one of "
                              f"{', '.join(map(str, key.choices))}; got {x!r}")
        if key.min is not None and isinstance(x, (int, float)) and x < key.min:
            raise ConfigError(f"{where} {key.name}: must be >= {key.min:g}, got {x!r}")
        if key.max is not None and isinstance(x, (int, float)) and x > key.max:
            raise ConfigError(f"{where} {key.name}: must be <= {key.max:g}, got {x!r}")
        if key.pattern is not None and isinstance(x, str) and not re.match(key.pattern, x):
            if not x:
                raise ConfigError(f"{where} {key.name}: must not be empty")
            raise ConfigError(f"{where} {key.name}: {x!r} does not match {key.pattern}")
    return list(v) if isinstance(v, list) else v


def _drop_deprecated(sec: str, table: dict, where: str) -> dict:
    """``table`` without the keys of :data:`edge.daemon.schema.DEPRECATED` (a warning names
    each); the old memory-release switches map to ``release_startup_memory``."""
    old = [k for k in table if (sec, k) in DEPRECATED]
    if not old:
        return table
    table = dict(table)
    for k in old:
        log.warning("%s %s: deprecated key, ignored (%s); remove it from the file", where, k,
                    DEPRECATED[(sec, k)])
        v = table.pop(k)
        if DEPRECATED[(sec, k)] == "use `release_startup_memory`" and v is False:
            table.setdefault("release_startup_memory", False)
    return table


def _check_table(sec: Section, table: Any, where: str) -> dict:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table, got {type(table).__name__}")
    table = _drop_deprecated(sec.name, table, where)
    known = {k.name for k in sec.keys}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"{where} {unknown[0]}: unknown key (known: {', '.join(sorted(known))})")
    out = {}
    for key in sec.keys:
        if key.name in table:
            out[key.name] = _check_key(key, table[key.name], where)
        elif key.default is REQUIRED:
            raise ConfigError(f"{where} {key.name}: required key is missing")
        else:
            out[key.name] = list(key.default) if isinstance(key.default, list) else key.default
    return out


def validate(raw: dict, name: str = "config") -> dict:
    """Validate a parsed TOML document against :data:`SCHEMA`; return it with defaults."""
    if isinstance(raw.get("loop"), dict):  # a removed section: every key is deprecated
        raw = dict(raw)
        rest = _drop_deprecated("loop", raw.pop("loop"), f"{name}: [loop]")
        if rest:
            raise ConfigError(f"{name}: [loop] {sorted(rest)[0]}: unknown key (the section "
                              "was removed)")
    unknown = sorted(set(raw) - set(_SECTIONS))
    if unknown:
        raise ConfigError(f"{name}: [{unknown[0]}]: unknown section "
                          f"(known: {', '.join(_SECTIONS)})")
    data: dict[str, Any] = {}
    for sec in SCHEMA:
        if sec.array:
            items = raw.get(sec.name, [])
            if not isinstance(items, list):
                raise ConfigError(f"{name}: [[{sec.name}]]: expected an array of tables "
                                  f"(write [[{sec.name}]])")
            if len(items) < sec.min_items:
                raise ConfigError(f"{name}: [[{sec.name}]]: at least {sec.min_items} "
                                  f"required, got {len(items)}")
            if sec.max_items is not None and len(items) > sec.max_items:
                raise ConfigError(f"{name}: [[{sec.name}]]: at most {sec.max_items}, "
                                  f"got {len(items)}")
            data[sec.name] = [_check_table(sec, t, f"{name}: [[{sec.name}]] #{i}")
                              for i, t in enumerate(items)]
            if sec.name == "channels":  # a bridge's sensitivity (edge/daemon/gauge.py)
                try:
                    resolve_bridges(data[sec.name], items, name + ":")
                except ValueError as e:
                    raise ConfigError(str(e)) from None
        else:
            data[sec.name] = _check_table(sec, raw.get(sec.name, {}), f"{name}: [{sec.name}]")
    _cross_checks(data, name)
    return data


def _cross_checks(d: dict, name: str) -> None:
    names = [c["name"] for c in d["channels"]]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ConfigError(f"{name}: [[channels]] name: duplicate {sorted(dup)[0]!r}")
    for i, c in enumerate(d["channels"]):
        if c["sensitivity"] == 0.0:
            raise ConfigError(f"{name}: [[channels]] #{i} sensitivity: must not be 0")
        if c["pin"] == c["pin_neg"]:
            raise ConfigError(f"{name}: [[channels]] #{i} pin_neg: equals pin {c['pin']}")
    m = d["mqtt"]
    if m["reconnect_max_s"] < m["reconnect_min_s"]:
        raise ConfigError(f"{name}: [mqtt] reconnect_max_s: must be >= reconnect_min_s")
    if m["password_env"] and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", m["password_env"]):
        raise ConfigError(f"{name}: [mqtt] password_env: {m['password_env']!r} is not an "
                          "environment variable name (put the NAME of the variable here, "
                          "not the password)")
    for c in m["commands"]:
        if c != "*" and not re.match(r"^[A-Za-z0-9_]{1,64}$", c):
            raise ConfigError(f"{name}: [mqtt] commands: {c!r} is not a command name")
    b = d["bundle"]
    if b["require_signature"] and not b["public_key"]:
        raise ConfigError(f"{name}: [bundle] require_signature: needs public_key")
    if bool(m["cert_file"]) != bool(m["key_file"]):
        raise ConfigError(f"{name}: [mqtt] key_file: cert_file and key_file go together")
    s = d["simulate"]
    if s["source"] == "file" and not s["file"]:
        raise ConfigError(f"{name}: [simulate] file: required when source = \"file\"")
    _fatigue_checks(d["fatigue"], name)


def _fatigue_checks(entries: list, name: str) -> None:
    from edge.fatigue.sn_curve import SNCurveError, curve

    outs = [e["output"] for e in entries]
    for i, e in enumerate(entries):
        where = f"{name}: [[fatigue]] #{i}"
        if outs.count(e["output"]) > 1:
            raise ConfigError(f"{where} output: {e['output']!r} counted twice")
        try:
            curve(e["curve"])
        except SNCurveError as exc:
            raise ConfigError(f"{where} curve: {exc}") from None
        if e["mean_hi"] <= e["mean_lo"]:
            raise ConfigError(f"{where} mean_hi: must be > mean_lo")


def load_config(path: str | os.PathLike | None = None) -> Config:
    """Read and validate a TOML file (default ``/etc/vsense/edge.toml``).

    Raises
    ------
    ConfigError
        File missing, not TOML, or a key invalid; the message names file and key.
    """
    if path is not None and not str(path):  # Path("") is "." (a directory)
        raise ConfigError("the config file name is empty")
    p = Path(path) if path is not None else DEFAULT_PATH
    try:
        if p.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"{p}: config file larger than {MAX_CONFIG_BYTES} bytes")
        text = p.read_bytes()
    except OSError as e:
        raise ConfigError(f"{p}: cannot read config file: {e.strerror or e}") from None
    return Config(validate(parse_toml(text, str(p)), str(p)), p, p.parent.resolve())


#: A daemon config is a few KB; anything far larger is not one.
MAX_CONFIG_BYTES = 1 << 20


def parse_toml(data: bytes, where: str) -> dict:
    """TOML bytes -> dict; every failure (not UTF-8, syntax, nesting so deep that the
    parser recurses out) is a :class:`ConfigError` naming ``where``."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{where}: not valid TOML: not UTF-8 ({e.reason} at byte "
                          f"{e.start})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{where}: not valid TOML: {e}") from None
    except RecursionError:
        raise ConfigError(f"{where}: not valid TOML: arrays/tables nested too deeply") from None


def config_from_dict(raw: dict, base_dir: str | os.PathLike | None = None) -> Config:
    """Validate an in-memory document (tests, programmatic use)."""
    return Config(validate(raw, "config"), None, Path(base_dir or Path.cwd()))


def mqtt_password(cfg: Config) -> str | None:
    """The MQTT password from the environment variable named by ``[mqtt] password_env``."""
    env = cfg["mqtt"]["password_env"]
    if not env:
        return None
    if env not in os.environ:
        raise ConfigError(f"[mqtt] password_env: environment variable {env} is not set")
    return os.environ[env]


def check_section(name: str, table: dict, where: str = "options") -> dict:
    """Validate one table against section ``name`` of :data:`SCHEMA` (defaults filled in);
    used by the client commands (:mod:`edge.monitor.connect`) for the ``[mqtt]`` keys they
    share with the daemon. ConfigError names ``where`` and the key."""
    return _check_table(_SECTIONS[name], table, f"{where}: [{name}]")
