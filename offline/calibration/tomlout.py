"""Minimal TOML writer for model files (tables, arrays of tables, inline values).

Python reads TOML (tomllib) but does not write it; this covers what model files contain:
strings, numbers, booleans, lists, nested tables, arrays of tables.
"""

from __future__ import annotations

import json
import math


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)


def _val(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_val(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_val(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def _is_aot(v) -> bool:
    return isinstance(v, list) and v and all(isinstance(x, dict) for x in v)


def _emit(d: dict, path: list, out: list) -> None:
    simple = [(k, v) for k, v in d.items() if not isinstance(v, dict) and not _is_aot(v)]
    for k, v in simple:
        out.append(f"{_key(k)} = {_val(v)}")
    for k, v in d.items():
        if isinstance(v, dict):
            out.append("")
            out.append("[" + ".".join(_key(x) for x in path + [k]) + "]")
            _emit(v, path + [k], out)
        elif _is_aot(v):
            for item in v:
                out.append("")
                out.append("[[" + ".".join(_key(x) for x in path + [k]) + "]]")
                _emit(item, path + [k], out)


def dumps(d: dict, header: str = "") -> str:
    """TOML text of ``d`` (``header`` lines are written as comments first)."""
    out = [f"# {line}" for line in header.splitlines()]
    _emit(d, [], out)
    return "\n".join(out).strip() + "\n"
