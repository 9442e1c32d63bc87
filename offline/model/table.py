"""Reading TOML tables with checks: the one error class of a bad model file and its helpers.

Every error is a :class:`ModelFileError` whose message starts with the file name and the key
path, e.g. ``cantilever.toml: [[boundary]][1].select.box: expected two points``. List entries
(``[[boundary]]`` etc.) are numbered from 0. Each section family parses its tables with
:class:`Table` (typed reads, limits, unknown keys refused) and :func:`check`.
"""

from __future__ import annotations

import math

from edge import DOF_NAMES

_REQ = object()


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
    keys : sequence of str, optional
        The allowed keys, checked at once (otherwise :meth:`done` refuses keys never read).
    """

    def __init__(self, d, where: str, keys=None):
        if not isinstance(d, dict):
            raise ModelFileError(f"{where}: expected a table, got {_tname(d)}")
        self.d, self.where, self.seen = d, where, set()
        if keys is not None:
            self.seen = set(keys)
            self.done()

    def key(self, k: str) -> str:
        return f"{self.where}.{k}"

    def has(self, k: str) -> bool:
        return k in self.d

    def get(self, k, kind="num", default=_REQ, lo=None, hi=None, lo_open=False, hi_open=False,
            choices=None):
        """Read key ``k`` of ``kind`` (num, int, str, bool, list, table, any)."""
        self.seen.add(k)
        if k not in self.d:
            if default is _REQ:
                raise ModelFileError(f"{self.key(k)}: missing")
            return default
        return check(self.d[k], self.key(k), kind, lo, hi, lo_open, hi_open, choices)

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
    if choices is not None and v not in choices:
        raise ModelFileError(f"{where}: expected one of {', '.join(map(repr, choices))}, got {v!r}")
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
