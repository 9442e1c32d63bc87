"""Reading TOML tables with checks: the one error class of a bad model file and its helpers.

Every error is a :class:`ModelFileError` whose message starts with the file name and the key
path, e.g. ``cantilever.toml: [[boundary]][1].select.box: expected two points``. List entries
(``[[boundary]]`` etc.) are numbered from 0. Each section family parses its tables with
:class:`Table` (typed reads, limits, unknown keys refused) and :func:`check`.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

from edge import DOF_NAMES

_REQ = object()
REQUIRED = _REQ  # a key without a default
_SCHEMA = object()  # Table.get: take this from the schema


@dataclass(frozen=True)
class Key:
    """One model-file key: kind (num, int, str, bool, list, table, any), default (``REQUIRED``:
    none), limits, choices, unit and a one-line description (:mod:`offline.model.schema`).
    ``default_text``: the default as the reference shows it when the parser computes it."""

    name: str
    kind: str
    default: Any
    description: str
    unit: str = ""
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple | None = None
    default_text: str = ""


@dataclass(frozen=True)
class Section:
    """One table of the model file (``name`` as the reference shows it, e.g. ``[[sensors]]``)
    and its keys; a :class:`Table` opened with it reads its keys through it."""

    name: str
    description: str
    keys: tuple

    def key(self, k: str) -> Key:
        for key in self.keys:
            if key.name == k:
                return key
        raise KeyError(f"schema drift: the parser reads {k!r} of {self.name}, which "
                       "offline/model/schema.py does not declare")

    @property
    def names(self) -> tuple:
        return tuple(k.name for k in self.keys)


#: every (section name, key) a parser has read (tests/test_modelfile_schema.py: no schema key
#: that no parser reads)
READ: set = set()


class ModelFileError(ValueError):
    """Invalid model file; the message names the file and the key path."""


# --------------------------------------------------------------------- table reader
class Table:
    """A TOML table being validated: typed reads with defaults/limits and unknown-key checks.

    Parameters
    ----------
    d : object
        The parsed value (must be a dict).
    where : str
        Key path of ``d`` including the file name, e.g. ``"x.toml: [plate]"``.
    section : Section, optional
        The schema of the table (:mod:`offline.model.schema`): :meth:`get` takes a key's kind,
        default and limits from it, and a key it does not declare is a programming error.
    strict : bool
        Refuse keys the section does not declare at once (otherwise :meth:`done` refuses keys
        never read).
    """

    def __init__(self, d, where: str, section: Section | None = None, strict: bool = False):
        if not isinstance(d, dict):
            raise ModelFileError(f"{where}: expected a table, got {_tname(d)}")
        self.d, self.where, self.seen, self.section = d, where, set(), section
        if strict:
            self.seen = set(section.names)
            self.done()

    def key(self, k: str) -> str:
        return f"{self.where}.{k}"

    def has(self, k: str) -> bool:
        return k in self.d

    def get(self, k, kind=_SCHEMA, default=_SCHEMA, lo=_SCHEMA, hi=_SCHEMA, lo_open=_SCHEMA,
            hi_open=_SCHEMA, choices=_SCHEMA):
        """Read key ``k``: of its schema's kind, default, limits and choices (an argument given
        here overrides one, e.g. a default that depends on another key); without a section,
        of ``kind`` (num, int, str, bool, list, table, any), required unless ``default``."""
        self.seen.add(k)
        if self.section is not None:
            s = self.section.key(k)
            READ.add((self.section.name, k))
        else:
            s = Key(k, "num", _REQ, "")
        a = {n: getattr(s, n) if v is _SCHEMA else v for n, v in (
            ("kind", kind), ("default", default), ("lo", lo), ("hi", hi), ("lo_open", lo_open),
            ("hi_open", hi_open), ("choices", choices))}
        if a["kind"] == "any":  # a number or a word: the parser checks each form
            a.update(lo=None, hi=None, choices=None)
        if k not in self.d:
            if a["default"] is _REQ:
                raise ModelFileError(f"{self.key(k)}: missing")
            # a list or table default is the caller's own (the schema's must not change)
            return copy.deepcopy(a["default"])
        return check(self.d[k], self.key(k), a["kind"], a["lo"], a["hi"], a["lo_open"],
                     a["hi_open"], a["choices"])

    def done(self):
        """Raise on keys that were never read (typos must not pass silently)."""
        extra = sorted(set(self.d) - self.seen)
        if extra:
            raise ModelFileError(f"{self.key(extra[0])}: unknown key (allowed here: "
                                 f"{', '.join(sorted(self.seen)) or 'none'})")


def _tname(v) -> str:
    return {dict: "a table", list: "an array", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(v), type(v).__name__)


def check(v, where, kind="num", lo=None, hi=None, lo_open=False, hi_open=False, choices=None):
    """Validate one value; returns it converted (num -> float)."""
    if kind == "num":
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ModelFileError(f"{where}: expected a number, got {_tname(v)} {v!r}")
        v = float(v)
        if not math.isfinite(v):
            raise ModelFileError(f"{where}: expected a finite number, got {v!r}")
    elif kind == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            raise ModelFileError(f"{where}: expected an integer, got {_tname(v)} {v!r}")
    elif kind == "str":
        if not isinstance(v, str):
            raise ModelFileError(f"{where}: expected a string, got {_tname(v)} {v!r}")
    elif kind == "bool":
        if not isinstance(v, bool):
            raise ModelFileError(f"{where}: expected true or false, got {_tname(v)} {v!r}")
    elif kind == "list":
        if not isinstance(v, list):
            raise ModelFileError(f"{where}: expected an array, got {_tname(v)}")
    elif kind == "table":
        if not isinstance(v, dict):
            raise ModelFileError(f"{where}: expected a table, got {_tname(v)}")
    for w, x in ([(f"{where}[{i}]", x) for i, x in enumerate(v)] if kind == "list" else
                 [(where, v)]) if choices is not None else ():  # an array: each item
        if x not in choices:
            raise ModelFileError(f"{w}: expected one of {', '.join(map(repr, choices))}, got {x!r}")
    if kind == "int" and lo is not None and not lo_open and v < lo:
        raise ModelFileError(f"{where}: expected an integer >= {lo}, got {v!r}")
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise ModelFileError(f"{where}: {v!r} is out of range (must be {'>' if lo_open else '>='} {lo:g})")
    if hi is not None and (v >= hi if hi_open else v > hi):
        raise ModelFileError(f"{where}: {v!r} is out of range (must be {'<' if hi_open else '<='} {hi:g})")
    return v


def point(v, where):
    if not (isinstance(v, list) and len(v) == 3):
        raise ModelFileError(f"{where}: expected a point [x, y, z]")
    return tuple(check(c, f"{where}[{i}]") for i, c in enumerate(v))


def dof_name(v, where):
    check(v, where, "str")
    if v not in DOF_NAMES:
        raise ModelFileError(f"{where}: unknown DOF {v!r} (expected one of {', '.join(DOF_NAMES)})")
    return v


def dof_names(v, where):
    check(v, where, "list")
    if not v:
        raise ModelFileError(f"{where}: empty DOF list")
    out = tuple(dof_name(x, f"{where}[{i}]") for i, x in enumerate(v))
    if len(set(out)) != len(out):
        raise ModelFileError(f"{where}: repeated DOF")
    return out


def entries(raw, key, where_file):
    v = raw.get(key, [])
    if not isinstance(v, list) or not all(isinstance(e, dict) for e in v):
        raise ModelFileError(f"{where_file}: [[{key}]]: expected an array of tables ([[{key}]])")
    return [(e, f"{where_file}: [[{key}]][{i}]") for i, e in enumerate(v)]
