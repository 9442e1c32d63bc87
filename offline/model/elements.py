"""The element sections of a model file, ``[beam]``, ``[plate]``, ``[solid]``, ``[matrices]``, as
typed specs. The element builders (:mod:`offline.fem`) receive these and hold only mechanics.

Schemas: docs/modelfile.md (beam, plate), docs/solid.md (solid, spiders, matrices).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from offline.fem.matrices import SYMMETRY_RTOL
from offline.fem.mpc import Spider, spider_of
from offline.model.schema_elements import (BEAM, BEAM_SECTION, LINE, MATRICES, MEMBER, PLATE,
                                           PLATE_RECTANGLE, RECTANGLE, SOLID, SPIDER, TUBE)
from offline.model.sections import Material
from offline.model.selection import Selection, parse_selection
from offline.model.table import ModelFileError, Table, check, point

#: Upper bounds on generated elements (a model file asking for more is a mistake or an attack
#: on the workstation's memory; a reduced model needs far fewer).
MAX_BEAM_ELEMENTS = 1_000_000
MAX_PLATE_ELEMENTS = 2_000_000


def _material(t: Table, materials: dict) -> Material:
    name = t.get("material")
    if name not in materials:
        raise ModelFileError(f"{t.key('material')}: unknown material {name!r} (defined: "
                             f"{', '.join(sorted(materials)) or 'none'})")
    return materials[name]


def _path(v: str, base_dir) -> Path:
    p = Path(v)
    return p if p.is_absolute() else Path(base_dir) / p


def _node_rows(rows, where, n_coords: int) -> tuple:
    """``[[id, x, y(, z)], ...]`` -> ((id, (x, y, z)), ...) with unique integer ids."""
    out = []
    for i, row in enumerate(check(rows, where, "list")):
        w = f"{where}[{i}]"
        if not (isinstance(row, list) and len(row) == n_coords + 1):
            raise ModelFileError(f"{w}: expected [id, {', '.join('xyz'[:n_coords])}] with an "
                                 "integer id")
        nid = check(row[0], f"{w}[0]", "int")
        xyz = tuple(check(c, f"{w}[{k + 1}]") for k, c in enumerate(row[1:]))
        out.append((nid, xyz + (0.0,) * (3 - n_coords)))
    ids = [n for n, _ in out]
    if len(set(ids)) != len(ids):
        raise ModelFileError(f"{where}: duplicate node ids")
    return tuple(out)


def _connectivity(v, where, known: set, width: int) -> tuple:
    """``[[n1, n2, ...], ...]`` of node ids in ``known`` -> tuple of tuples."""
    out = []
    for k, e in enumerate(check(v, where, "list")):
        if not (isinstance(e, list) and len(e) == width):
            names = ", ".join(f"n{i + 1}" for i in range(width))
            raise ModelFileError(f"{where}[{k}]: expected [{names}]")
        for nid in e:
            if nid not in known:
                raise ModelFileError(f"{where}[{k}]: node {nid!r} is not in the nodes list")
        out.append(tuple(e))
    if not out:
        raise ModelFileError(f"{where}: empty list")
    return tuple(out)


# ---------------------------------------------------------------------------------- beam
@dataclass(frozen=True)
class BeamSectionSpec:
    """A ``[beam.sections.<name>]`` table: ``shape`` is ``("rectangle", b, h)``,
    ``("tube", d, t or None)`` or ``("general", A, Iy, Iz, J)`` [m, m^2, m^4];
    ``shear_factor`` (ky, kz) or None (Cowper's value for the shape, 5/6 for general)."""

    name: str
    material: Material
    shape: tuple
    shear_factor: tuple | None = None


@dataclass(frozen=True)
class BeamMember:
    """A ``[[beam.members]]`` entry: a straight ``line`` (start, end, n) or explicit
    ``elements`` ((id, id), ...); ``orientation`` a vector in the local x-z plane."""

    section: str
    line: tuple | None = None
    elements: tuple | None = None
    orientation: tuple | None = None
    name: str | None = None
    where: str = ""


@dataclass(frozen=True)
class BeamSpec:
    theory: str
    nodes: tuple          # ((id, (x, y, z)), ...) explicit nodes
    sections: dict        # name -> BeamSectionSpec
    members: tuple        # BeamMember, ...
    where: str = ""


def _beam_section(d, materials, where) -> BeamSectionSpec:
    t = Table(d, where, BEAM_SECTION, strict=True)
    mat = _material(t, materials)
    forms = [k for k in ("rectangle", "tube", "A") if k in d]
    if len(forms) != 1:
        raise ModelFileError(f"{where}: give exactly one of A (with Iy, Iz, J), rectangle, tube")
    if "rectangle" in d:
        r = Table(t.get("rectangle"), f"{where}.rectangle", RECTANGLE)
        shape = ("rectangle", r.get("b"), r.get("h"))
        r.done()
    elif "tube" in d:
        r = Table(t.get("tube"), f"{where}.tube", TUBE)
        dd, wall = r.get("d"), r.get("t")
        r.done()
        if wall is not None and wall > dd / 2:
            raise ModelFileError(f"{where}.tube.t: wall {wall} exceeds d/2 = {dd / 2}")
        shape = ("tube", dd, wall)
    else:
        shape = ("general",) + tuple(t.get(k) for k in ("A", "Iy", "Iz", "J"))
    sf = t.get("shear_factor")
    if isinstance(sf, list):
        if len(sf) != 2:
            raise ModelFileError(f"{where}.shear_factor: expected k or [ky, kz]")
        sf = tuple(check(s, f"{where}.shear_factor[{i}]", lo=0.0, lo_open=True)
                   for i, s in enumerate(sf))
    elif sf is not None:
        sf = (check(sf, f"{where}.shear_factor", lo=0.0, lo_open=True),) * 2
    t.done()
    return BeamSectionSpec(where.rpartition(".")[2], mat, shape, sf)


def _beam_member(d, sections, known, where) -> BeamMember:
    t = Table(d, where, MEMBER, strict=True)
    sname = t.get("section")
    if sname not in sections:
        raise ModelFileError(f"{where}.section: unknown section {sname!r} (defined: "
                             f"{', '.join(sorted(sections))})")
    ori = point(t.get("orientation"), f"{where}.orientation") \
        if t.has("orientation") else None
    name = t.get("name")
    if t.has("line") == t.has("elements"):
        raise ModelFileError(f"{where}: give exactly one of line or elements")
    line = elements = None
    if t.has("line"):
        ln = Table(t.get("line"), f"{where}.line", LINE)
        a, b = (point(ln.get(k), f"{where}.line.{k}") for k in ("start", "end"))
        n = ln.get("n")
        ln.done()
        if n > MAX_BEAM_ELEMENTS:
            raise ModelFileError(f"{where}.line.n: {n} elements; at most {MAX_BEAM_ELEMENTS:,} "
                                 "(a reduced model needs far fewer)")
        line = (a, b, n)
    else:
        elements = _connectivity(t.get("elements"), f"{where}.elements", known, 2)
        if any(e[0] == e[1] for e in elements):
            raise ModelFileError(f"{where}: element with identical end nodes")
    t.done()
    return BeamMember(sname, line, elements, ori, name, where)


def parse_beam(section: dict, materials: dict, where: str) -> BeamSpec:
    """``[beam]``: theory, optional explicit nodes, ``sections`` and ``members``."""
    t = Table(section, where, BEAM, strict=True)
    theory = t.get("theory")
    nodes = _node_rows(t.get("nodes"), f"{where}.nodes", 3)
    secs = t.get("sections")
    if not secs:
        raise ModelFileError(f"{where}.sections: expected at least one [beam.sections.<name>] "
                             "table")
    sections = {n: _beam_section(d, materials, f"{where}.sections.{n}") for n, d in secs.items()}
    members = t.get("members")
    if not members:
        raise ModelFileError(f"{where}.members: expected at least one [[beam.members]] entry")
    known = {n for n, _ in nodes}
    members = tuple(_beam_member(m, sections, known, f"{where}.members[{j}]")
                    for j, m in enumerate(members))
    t.done()
    return BeamSpec(theory, nodes, sections, members, where)


# --------------------------------------------------------------------------------- plate
@dataclass(frozen=True)
class PlateSpec:
    """``[plate]``: a generated ``rectangle`` (length, width, nx, ny, origin, pattern) or
    explicit ``nodes`` ((id, (x, y, 0)), ...) and ``triangles`` ((id, id, id), ...)."""

    material: Material
    thickness: float
    formulation: str = "mitc3"
    shear_factor: float = 5.0 / 6.0
    rectangle: tuple | None = None
    nodes: tuple = ()
    triangles: tuple = ()
    where: str = ""


def parse_plate(section: dict, materials: dict, where: str) -> PlateSpec:
    """``[plate]`` (docs/modelfile.md)."""
    t = Table(section, where, PLATE, strict=True)
    mat = _material(t, materials)
    thick, form, kappa = t.get("thickness"), t.get("formulation"), t.get("shear_factor")
    if t.has("rectangle") == (t.has("nodes") or t.has("triangles")):
        raise ModelFileError(f"{where}: give exactly one mesh: [plate.rectangle] or nodes + "
                             "triangles")
    rect, nodes, tris = None, (), ()
    if t.has("rectangle"):
        w = f"{where}.rectangle"
        r = Table(t.get("rectangle"), w, PLATE_RECTANGLE, strict=True)
        length, width = r.get("length"), r.get("width")
        nx, ny = r.get("nx"), r.get("ny")
        origin = r.get("origin")
        if len(origin) != 2:
            raise ModelFileError(f"{w}.origin: expected [x, y]")
        origin = tuple(check(o, f"{w}.origin[{i}]") for i, o in enumerate(origin))
        pattern = r.get("pattern")
        r.done()
        if 2 * nx * ny > MAX_PLATE_ELEMENTS:
            raise ModelFileError(f"{w}.nx: {nx} x {ny} divisions make {2 * nx * ny:,} "
                                 f"triangles; at most {MAX_PLATE_ELEMENTS:,}")
        rect = (length, width, nx, ny, origin, pattern)
    else:
        nodes = _node_rows(t.get("nodes"), f"{where}.nodes", 2)
        if not nodes:
            raise ModelFileError(f"{where}.nodes: expected a list of [id, x, y]")
        tris = _connectivity(t.get("triangles"), f"{where}.triangles",
                             {n for n, _ in nodes}, 3)
        used = {n for tr in tris for n in tr}
        unused = [n for n, _ in nodes if n not in used]
        if unused:
            raise ModelFileError(f"{where}.nodes: node {unused[0]} belongs to no triangle")
    t.done()
    return PlateSpec(mat, thick, form, kappa, rect, nodes, tris, where)


# --------------------------------------------------------------------------------- solid
@dataclass(frozen=True)
class SpiderSpec:
    """A ``[[solid.spiders]]`` entry: rigid spider ``name`` on the nodes of ``select``,
    master at ``center`` [m] (None: the slaves' centroid)."""

    name: str                    # also the node group of the master node
    select: Selection
    center: tuple | None = None  # (x, y, z) [m]
    where: str = ""


@dataclass(frozen=True)
class SolidSpec:
    mesh: Path
    material: Material
    scale: float = 1.0
    mesh_size: float | None = None
    order: int | None = None
    spiders: tuple = ()
    where: str = ""


def parse_spider(d, where: str) -> SpiderSpec:
    """One ``[[solid.spiders]]`` table (``name``, ``select``, ``center``)."""
    t = Table(d, where, SPIDER, strict=True)
    name = t.get("name")
    if not name:
        raise ModelFileError(f"{where}.name: empty name")
    if not t.has("select"):
        raise ModelFileError(f"{where}.select: missing (e.g. select = {{ group = \"hole1\" }})")
    sel = parse_selection(t.get("select"), f"{where}.select")
    center = t.get("center")
    t.done()
    return SpiderSpec(name, sel, None if center is None else point(center, f"{where}.center"),
                      where)


def spider_from_dict(d: dict, model, where: str) -> Spider:
    """A :class:`~offline.fem.mpc.Spider` from a ``[[solid.spiders]]`` table on ``model``'s
    nodes (``name``, ``select``, ``center``)."""
    return spider_of(parse_spider(d, where), model)


def parse_solid(section: dict, materials: dict, base_dir, where: str) -> SolidSpec:
    """``[solid]`` (docs/solid.md)."""
    t = Table(section, where, SOLID, strict=True)
    mesh = _path(t.get("mesh"), base_dir)
    mat = _material(t, materials)
    scale, mesh_size, order = t.get("scale"), t.get("mesh_size"), t.get("order")
    spiders = tuple(parse_spider(e, f"{where}.spiders[{i}]")
                    for i, e in enumerate(t.get("spiders")))
    t.done()
    return SolidSpec(mesh, mat, scale, mesh_size, order, spiders, where)


# ------------------------------------------------------------------------------ matrices
@dataclass(frozen=True)
class MatricesSpec:
    """``[matrices]``: Matrix Market ``mass``, ``stiffness`` (and ``damping``) and the DOF
    table ``dofs`` (paths), relative symmetry tolerance."""

    mass: Path
    stiffness: Path
    dofs: Path
    damping: Path | None = None
    symmetry_rtol: float = SYMMETRY_RTOL
    where: str = ""


def parse_matrices(section: dict, base_dir, where: str) -> MatricesSpec:
    """``[matrices]`` (docs/solid.md)."""
    t = Table(section, where, MATRICES, strict=True)
    paths = {k: _path(t.get(k), base_dir) for k in ("mass", "stiffness", "dofs")}
    damping, rtol = t.get("damping"), t.get("symmetry_rtol")
    t.done()
    return MatricesSpec(paths["mass"], paths["stiffness"], paths["dofs"],
                        None if damping is None else _path(damping, base_dir), rtol, where)


def parse_element(mtype: str, section: dict, materials: dict, base_dir, where: str):
    """The typed spec of the ``[<mtype>]`` table."""
    if mtype == "beam":
        return parse_beam(section, materials, where)
    if mtype == "plate":
        return parse_plate(section, materials, where)
    if mtype == "solid":
        return parse_solid(section, materials, base_dir, where)
    return parse_matrices(section, base_dir, where)
