"""Node selections: one grammar for every ``select`` table (boundaries, signals, spiders).

Forms (docs/modelfile.md, docs/solid.md)::

    {nodes = [ids]}                          listed nodes, in the given order
    {group = "name"}                         a node group (mesh physical group, spider master)
    {box = [[x0,y0,z0],[x1,y1,z1]], tol = t} nodes inside the box enlarged by t
    {cylinder = {point, axis, radius, tol = 0.01 radius, range = [s0, s1]}}
                                             nodes at distance radius +- tol from the axis line
    {at = [x,y,z], tol = t}                  the nearest node, which must lie within t

``nodes``, ``group``, ``box`` and ``cylinder`` may be combined: the nodes matching all of them.
``at`` stands alone. One tolerance rule: ``tol`` of ``box`` and ``at`` defaults to
:data:`REL_TOL` of the model's bounding-box diagonal. Parsing happens once, with the model file
(:func:`parse_selection`); resolving against a model (:func:`nodes_of`) only looks nodes up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from offline.model.schema_model import CYLINDER, SELECT
from offline.model.table import ModelFileError, Table, check, point

#: Default ``tol`` of ``box`` and ``at``, relative to the model's bounding-box diagonal.
REL_TOL = 1e-6
FORMS = ("nodes", "box", "group", "at", "cylinder")


@dataclass(frozen=True)
class Cylinder:
    """Nodes at ``radius +- tol`` [m] from the line through ``point`` along unit ``axis``;
    with ``range``, axial coordinate ``s = (x - point) . axis`` in ``[s0, s1]``."""

    point: tuple                 # (x, y, z) [m] on the axis
    axis: tuple                  # unit vector
    radius: float                # [m]
    tol: float                   # [m]
    range: tuple | None = None   # (s0, s1) [m]


@dataclass(frozen=True)
class Selection:
    """A parsed node selection, resolved against a model later (:func:`nodes_of`).

    ``forms``: ((kind, value), ...) intersected; value: tuple of ids (nodes), str (group),
    ((x0,y0,z0),(x1,y1,z1)) (box), (x,y,z) (at), :class:`Cylinder`.
    ``tol`` [m]: distance tolerance of ``box``/``at`` (None: :data:`REL_TOL` of the model size).
    ``where``: key path for error messages.
    """

    forms: tuple
    tol: float | None = None
    where: str = ""

    @property
    def kind(self) -> str:
        return "+".join(k for k, _ in self.forms)

    @property
    def value(self):
        return self.forms[0][1] if len(self.forms) == 1 else dict(self.forms)

    def nodes_in(self, coords, node_ids, groups, allow_empty: bool = False) -> np.ndarray:
        """Node ids of this selection (:func:`nodes_of`)."""
        return nodes_of(self, coords, node_ids, groups, allow_empty=allow_empty)


def _cylinder(v, where) -> Cylinder:
    t = Table(v, where, CYLINDER)
    p0 = point(t.get("point"), f"{where}.point")
    ax = np.asarray(point(t.get("axis"), f"{where}.axis"))
    n = float(np.linalg.norm(ax))
    if n == 0:
        raise ModelFileError(f"{where}.axis: must not be the zero vector")
    r = t.get("radius")
    tol = t.get("tol", default=0.01 * r)
    rg = t.get("range")
    t.done()
    if rg is not None:
        if len(rg) != 2:
            raise ModelFileError(f"{where}.range: expected [s0, s1] with s0 <= s1")
        rg = tuple(check(x, f"{where}.range[{i}]") for i, x in enumerate(rg))
        if rg[0] > rg[1]:
            raise ModelFileError(f"{where}.range: expected [s0, s1] with s0 <= s1")
    return Cylinder(p0, tuple(ax / n), r, tol, rg)


def parse_selection(v, where) -> Selection:
    """A ``select`` table (see the module docstring) -> :class:`Selection`."""
    t = Table(v, where, SELECT)
    kinds = [k for k in FORMS if k in v]
    if not kinds or ("at" in kinds and len(kinds) > 1):
        raise ModelFileError(f"{where}: give exactly one of {', '.join(FORMS)} (nodes, box, "
                             f"group and cylinder may also be combined; at stands alone)")
    forms = []
    for kind in kinds:
        if kind == "nodes":
            ids = t.get("nodes")
            if not ids:
                raise ModelFileError(f"{where}.nodes: empty list")
            value = tuple(check(n, f"{where}.nodes[{i}]", "int") for i, n in enumerate(ids))
        elif kind == "box":
            b = t.get("box")
            if len(b) != 2:
                raise ModelFileError(f"{where}.box: expected two points [[x0,y0,z0],[x1,y1,z1]]")
            p0, p1 = point(b[0], f"{where}.box[0]"), point(b[1], f"{where}.box[1]")
            if any(a > c for a, c in zip(p0, p1)):
                raise ModelFileError(f"{where}.box: first point must be the lower corner")
            value = (p0, p1)
        elif kind == "group":
            value = t.get("group")
        elif kind == "at":
            value = point(t.get("at"), f"{where}.at")
        else:
            value = _cylinder(t.get("cylinder"), f"{where}.cylinder")
        forms.append((kind, value))
    tol = None
    if "box" in kinds or "at" in kinds:
        tol = t.get("tol", lo_open="at" in kinds)
    t.done()
    return Selection(tuple(forms), tol, where)


def select_nodes(coords, node_ids, groups: dict, select: dict, where: str = "select"
                 ) -> np.ndarray:
    """Sorted node ids (possibly none) of a ``select`` table on bare node arrays.

    Parameters
    ----------
    coords : ndarray, shape (n_nodes, 3) [m]
    node_ids : ndarray of int, shape (n_nodes,)
    groups : dict of str -> node ids
    select : dict
        e.g. ``{cylinder = {point, axis, radius, tol = 0.01 r, range = [s0, s1]}}``.
    """
    return np.sort(nodes_of(parse_selection(select, where), coords, node_ids, groups,
                            allow_empty=True))


def model_scale(coords) -> float:
    """Bounding-box diagonal [m] of node coordinates (n, 3); 1e-12 for a point."""
    coords = np.asarray(coords, float)
    ext = np.ptp(coords, axis=0) if coords.shape[0] else np.zeros(3)
    return float(max(np.linalg.norm(ext), 1e-12))


def nodes_of(sel: Selection, coords, node_ids, groups, where: str = "select",
             allow_empty: bool = False) -> np.ndarray:
    """Node ids of a selection: given order for a lone ``nodes``, ascending id otherwise.

    Parameters
    ----------
    sel : Selection
    coords : ndarray, shape (n_nodes, 3) [m]
    node_ids : ndarray of int, shape (n_nodes,)
    groups : dict of str -> node ids
    where : str
        Key path for error messages when ``sel.where`` is empty.
    allow_empty : bool
        Return an empty array instead of raising when nothing matches.

    Raises
    ------
    ModelFileError
        Unknown node or group, empty selection (naming the key path).
    """
    w = sel.where or where
    coords = np.asarray(coords, float)
    node_ids = np.asarray(node_ids, np.int64)
    tol = sel.tol if sel.tol is not None else REL_TOL * model_scale(coords)
    if sel.forms[0][0] == "at":
        try:
            row = _nearest(coords, node_ids, sel.forms[0][1], tol)
        except ValueError as exc:
            raise ModelFileError(f"{w}.at: {exc}") from None
        return node_ids[[row]]
    mask = np.ones(node_ids.size, bool)
    for kind, value in sel.forms:
        mask &= _match(kind, value, coords, node_ids, groups, tol, w, allow_empty)
    if not mask.any() and not allow_empty:
        raise ModelFileError(f"{w}: selects no nodes (the forms {sel.kind.replace('+', ', ')} "
                             f"have no node in common)")
    if len(sel.forms) == 1 and sel.forms[0][0] == "nodes":
        return np.asarray(sel.forms[0][1], np.int64)
    return np.sort(node_ids[mask])


def _nearest(coords, node_ids, xyz, tol) -> int:
    """Row of the one node nearest ``xyz`` within ``tol``; a ValueError naming the nearest
    nodes and their distances when none is that near, or when two or more are equally near
    (within 1e-9 of the distance) and the point is on none of them, where ``tol`` cannot
    choose (coincident nodes exactly at the point: the first, as before)."""
    d = np.linalg.norm(coords - np.asarray(xyz, float), axis=1)
    order = np.argsort(d, kind="stable")
    i = int(order[0])
    near = order[d[order] <= d[i] * (1 + 1e-9) + 1e-15]
    listed = order[:max(3, near.size)][:6]
    names = ", ".join(f"node {int(node_ids[k])} at [{', '.join(f'{c:.6g}' for c in coords[k])}]"
                      f" ({d[k]:.3g} m)" for k in listed)
    if near.size > 1 and d[i] > 0:
        raise ValueError(f"{near.size} nodes are equally near {list(map(float, xyz))}: {names}; move the "
                         f"point onto one of them or select it with nodes = [id]")
    if d[i] > tol:
        raise ValueError(f"no node within {tol:.3g} m of {list(map(float, xyz))}; the nearest: {names}; "
                         f"move the point onto a node, or set tol >= {d[i]:.3g} to take "
                         f"node {int(node_ids[i])}")
    return i


def _match(kind, value, coords, node_ids, groups, tol, w, allow_empty) -> np.ndarray:
    """Boolean mask (n_nodes,) of one form; raises on a form that matches nothing."""
    if kind == "nodes":
        ids = np.asarray(value, np.int64)
        missing = ids[~np.isin(ids, node_ids)]
        if missing.size:
            raise ModelFileError(f"{w}.nodes: node {int(missing[0])} does not exist in the model")
        return np.isin(node_ids, ids)
    if kind == "group":
        if value not in groups:
            raise ModelFileError(f"{w}.group: unknown group {value!r} (model has: "
                                 f"{', '.join(sorted(groups)) or 'none'})")
        mask = np.isin(node_ids, np.asarray(groups[value], np.int64))
        if not mask.any() and not allow_empty:
            raise ModelFileError(f"{w}.group: group {value!r} is empty")
        return mask
    if kind == "box":
        lo, hi = np.asarray(value[0]), np.asarray(value[1])
        mask = np.all((coords >= lo - tol) & (coords <= hi + tol), axis=1)
        if not mask.any() and not allow_empty:
            raise ModelFileError(f"{w}.box: no node inside {lo.tolist()} .. {hi.tolist()} "
                                 f"(tolerance {tol:.3g} m)")
        return mask
    c = value
    d = coords - np.asarray(c.point)
    ax = np.asarray(c.axis)
    s = d @ ax
    # distance from the axis: |d - (d . a) a|
    rho = np.linalg.norm(d - s[:, None] * ax, axis=1)
    mask = np.abs(rho - c.radius) <= c.tol
    if c.range is not None:
        mask &= (s >= c.range[0]) & (s <= c.range[1])
    return mask
