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

from offline.fem.assembly import stiffness_zones
from offline.model.table import ModelFileError
from offline.model.update import parse_damage, parse_region


def parse_box(region, where: str):
    """``region = {box = [[x0, y0, z0], [x1, y1, z1]]}`` of the entry at ``where`` -> (2, 3)
    [m] (:func:`offline.model.update.parse_region`)."""
    return parse_region(region, f"{where}.region")


def zones(raw: dict, where: str) -> list:
    """Validated ``[[damage]]`` entries -> [(box (2, 3), stiffness factor 1 - omega)]."""
    return [(box, 1.0 - float(om)) for _, box, om in parse_damage(raw, where)]


def context(raw: dict, where: str, model_type: str):
    """Context manager applying the file's ``[[damage]]`` during element assembly."""
    zs = zones(raw, where)
    if not zs:
        return nullcontext()
    if model_type == "matrices":
        raise ModelFileError(f"{where}: [[damage]] needs elements; a 'matrices' model has none")
    return stiffness_zones([b for b, _ in zs], [f for _, f in zs])
