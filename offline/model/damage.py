"""``[[damage]]``: stiffness reduction of the elements in a region (paper 003 eq. 23).

    [[damage]]
    name = "zone3"                                     # optional
    region = { box = [[0.05, -1, -1], [0.07, 1, 1]] }   # element centroids inside [m]
    omega = 0.4                                         # E_z = (1 - ω) E, ω < 1

Applied while the elements are assembled (``offline.fem.assembly.stiffness_zones``): beams,
plates and solids; a ``matrices`` model has no elements and refuses it. The calibration's
``damage`` parameters write their posterior here (``calibrated.toml``).
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

from offline.fem.assembly import stiffness_zones
from offline.model.table import ModelFileError


def parse_box(region, where: str) -> np.ndarray:
    """``region = {box = [[x0, y0, z0], [x1, y1, z1]]}`` -> (2, 3) [m]."""
    if not isinstance(region, dict) or set(region) != {"box"}:
        raise ModelFileError(f"{where}.region must be a table {{box = [[x0, y0, z0], [x1, y1, z1]]}}, "
                         f"got {region!r}")
    try:
        b = np.array(region["box"], dtype=float)
    except (TypeError, ValueError):
        b = None
    if b is None or b.shape != (2, 3) or not np.all(np.isfinite(b)):
        raise ModelFileError(f"{where}.region.box must be two finite points [[x0, y0, z0], "
                         f"[x1, y1, z1]], got {region.get('box')!r}")
    return b


def zones(raw: dict, where: str) -> list[tuple[np.ndarray, float]]:
    """Validated ``[[damage]]`` entries -> [(box (2, 3), stiffness factor 1 - ω)]."""
    items = raw.get("damage", [])
    if not isinstance(items, list):
        raise ModelFileError(f"{where}: 'damage' must be an array of tables ([[damage]])")
    out = []
    for i, it in enumerate(items):
        w = f"{where}: [[damage]][{i}]"
        if not isinstance(it, dict):
            raise ModelFileError(f"{w} must be a table")
        extra = sorted(set(it) - {"name", "region", "omega"})
        if extra:
            raise ModelFileError(f"{w}: unknown key(s) {extra}; allowed ['name', 'omega', 'region']")
        om = it.get("omega")
        if isinstance(om, bool) or not isinstance(om, (int, float)) or not np.isfinite(om) or om >= 1:
            raise ModelFileError(f"{w}.omega must be a number below 1 (E_z = (1 - omega) E), got {om!r}")
        out.append((parse_box(it.get("region"), w), 1.0 - float(om)))
    return out


def context(raw: dict, where: str, model_type: str):
    """Context manager applying the file's ``[[damage]]`` during element assembly."""
    zs = zones(raw, where)
    if not zs:
        return nullcontext()
    if model_type == "matrices":
        raise ModelFileError(f"{where}: [[damage]] needs elements; a 'matrices' model has none")
    return stiffness_zones([b for b, _ in zs], [f for _, f in zs])
