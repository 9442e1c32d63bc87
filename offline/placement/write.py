"""PLACED.toml: the model file with the chosen candidates appended to ``[[sensors]]``.

The chosen entries are appended as text (the user's comments and layout stay as written; a
``[[sensors]]`` entry may follow other tables in TOML). Where that does not parse back (e.g.
the file wrote ``sensors = [...]`` inline), the whole file is written again from its parsed
form (:mod:`offline.calibration.tomlout`; comments are then lost). Either way the result is
read back by the model parser before it is kept.
"""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path

from offline.calibration.tomlout import _key, _val, dumps
from offline.model import load_model_file

_SENSOR_KEYS = ("name", "select", "dof", "kind", "unit", "noise", "noise_std", "highpass_hz",
                "average_s", "drift", "at", "surface", "direction", "row")  # last 4: a gauge's


def sensor_entries(raw: dict, names) -> list[dict]:
    """The ``[[placement.candidates]]`` tables of ``names`` as ``[[sensors]]`` tables."""
    by = {c["name"]: c for c in raw.get("placement", {}).get("candidates", [])}
    return [{k: copy.deepcopy(by[n][k]) for k in _SENSOR_KEYS if k in by[n]} for n in names]


def placed_text(path, names, comment: str = "") -> str:
    """Text of the model file ``path`` with the candidates ``names`` appended as sensors."""
    text = Path(path).read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    entries = sensor_entries(raw, names)
    lines = [text.rstrip("\n"), ""]
    if comment:
        lines += [f"# {c}" for c in comment.splitlines()]
    for e in entries:
        lines.append("[[sensors]]")
        lines += [f"{_key(k)} = {_val(v)}" for k, v in e.items()]
        lines.append("")
    out = "\n".join(lines)
    try:
        tomllib.loads(out)
    except tomllib.TOMLDecodeError:
        raw2 = copy.deepcopy(raw)
        raw2["sensors"] = list(raw2.get("sensors", [])) + entries
        out = dumps(raw2, header=comment)
    return out


def write_placed(path, out_path, names, comment: str = "") -> Path:
    """Write PLACED.toml and check that the model parser reads it back."""
    out_path = Path(out_path)
    text = placed_text(path, names, comment)
    out_path.write_text(text, encoding="utf-8")
    spec = load_model_file(out_path)
    missing = [n for n in names if n not in {s.name for s in spec.sensors}]
    if missing:  # pragma: no cover - a writer bug, not bad input
        raise RuntimeError(f"{out_path}: the written sensors {missing} did not read back")
    return out_path
