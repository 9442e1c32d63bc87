"""Schema of the model file's element tables: ``[beam]`` (its sections, members, lines),
``[plate]`` (its rectangle), ``[solid]`` (its spiders) and ``[matrices]``
(:mod:`offline.model.schema` gathers every table)."""

from __future__ import annotations

from offline.fem.beam import THEORIES
from offline.fem.matrices import SYMMETRY_RTOL
from offline.fem.plate import FORMULATIONS, PATTERNS
from offline.model.table import REQUIRED, Key, Section

_MATERIAL = Key("material", "str", REQUIRED, "A `[materials.<name>]` name.")

BEAM = Section("[beam]", "A frame of beam elements (6 DOFs per node).", (
    Key("theory", "str", "euler-bernoulli", "Beam theory.", choices=THEORIES),
    Key("nodes", "list", [], "Explicit nodes `[[id, x, y, z], ...]` (for `elements`).", "m"),
    Key("sections", "table", {}, "The `[beam.sections.<name>]` tables (at least one)."),
    Key("members", "list", [], "The `[[beam.members]]` entries (at least one)."),
))

BEAM_SECTION = Section("[beam.sections.<name>]", "A cross-section: exactly one of `A` (with "
                       "`Iy`, `Iz`, `J`), `rectangle`, `tube`.", (
    _MATERIAL,
    Key("A", "num", REQUIRED, "Area (with Iy, Iz, J).", "m^2", lo=0.0, lo_open=True,
        default_text="one form required"),
    Key("Iy", "num", REQUIRED, "Second moment about local y.", "m^4", lo=0.0, lo_open=True,
        default_text="required with A"),
    Key("Iz", "num", REQUIRED, "Second moment about local z.", "m^4", lo=0.0, lo_open=True,
        default_text="required with A"),
    Key("J", "num", REQUIRED, "Torsion constant.", "m^4", lo=0.0, lo_open=True,
        default_text="required with A"),
    Key("shear_factor", "any", None, "Timoshenko shear factor k or `[ky, kz]`, > 0.",
        default_text="Cowper's for the shape, 5/6 for A"),
    Key("rectangle", "table", REQUIRED, "`{b, h}` solid rectangle.",
        default_text="one form required"),
    Key("tube", "table", REQUIRED, "`{d, t}` circular tube (no `t`: solid).",
        default_text="one form required"),
))

RECTANGLE = Section("[beam.sections.<name>].rectangle", "A solid rectangular section.", (
    Key("b", "num", REQUIRED, "Width (local y).", "m", lo=0.0, lo_open=True),
    Key("h", "num", REQUIRED, "Height (local z).", "m", lo=0.0, lo_open=True),
))

TUBE = Section("[beam.sections.<name>].tube", "A circular tube or solid round section.", (
    Key("d", "num", REQUIRED, "Outer diameter.", "m", lo=0.0, lo_open=True),
    Key("t", "num", None, "Wall thickness (<= d/2; none: solid).", "m", lo=0.0,
        lo_open=True),
))

MEMBER = Section("[[beam.members]]", "A member: a straight `line` or explicit `elements` "
                 "(exactly one).", (
    Key("name", "str", None, "Member name."),
    Key("section", "str", REQUIRED, "A `[beam.sections.<name>]` name."),
    Key("line", "table", REQUIRED, "`{start, end, n}` straight line of n elements.",
        default_text="this or elements"),
    Key("elements", "list", REQUIRED, "`[[n1, n2], ...]` of `nodes` ids.",
        default_text="this or line"),
    Key("orientation", "list", None, "A vector `[x, y, z]` in the local x-z plane.",
        default_text="the builder's"),
))

LINE = Section("[[beam.members]].line", "A straight member.", (
    Key("start", "list", REQUIRED, "Start point `[x, y, z]`.", "m"),
    Key("end", "list", REQUIRED, "End point `[x, y, z]`.", "m"),
    Key("n", "int", REQUIRED, "Elements (at most 1,000,000).", lo=1),
))

PLATE = Section("[plate]", "A plate of triangles: a generated `rectangle` or `nodes` + "
                "`triangles` (exactly one mesh).", (
    _MATERIAL,
    Key("thickness", "num", REQUIRED, "Plate thickness.", "m", lo=0.0, lo_open=True),
    Key("formulation", "str", "mitc3", "Element formulation.", choices=FORMULATIONS),
    Key("shear_factor", "num", 5.0 / 6.0, "Transverse shear factor.", lo=0.0, hi=1.0,
        lo_open=True),
    Key("rectangle", "table", REQUIRED, "The generated mesh (its table below).",
        default_text="this or nodes + triangles"),
    Key("nodes", "list", REQUIRED, "Explicit nodes `[[id, x, y], ...]`.", "m",
        default_text="with triangles, or rectangle"),
    Key("triangles", "list", REQUIRED, "Triangles `[[n1, n2, n3], ...]` of node ids.",
        default_text="with nodes, or rectangle"),
))

PLATE_RECTANGLE = Section("[plate.rectangle]", "A rectangle of nx x ny divisions, two "
                          "triangles each (at most 2,000,000 triangles).", (
    Key("length", "num", REQUIRED, "Length along x.", "m", lo=0.0, lo_open=True),
    Key("width", "num", REQUIRED, "Width along y.", "m", lo=0.0, lo_open=True),
    Key("nx", "int", REQUIRED, "Divisions along x.", lo=1),
    Key("ny", "int", REQUIRED, "Divisions along y.", lo=1),
    Key("origin", "list", [0.0, 0.0], "Corner `[x, y]`.", "m"),
    Key("pattern", "str", "alternate", "Diagonal pattern.", choices=PATTERNS),
))

SOLID = Section("[solid]", "A solid meshed from a file (docs/solid.md).", (
    Key("mesh", "str", REQUIRED, "Mesh file (relative to the model file)."),
    _MATERIAL,
    Key("spiders", "list", [], "The `[[solid.spiders]]` entries."),
    Key("scale", "num", 1.0, "Factor from the mesh's length unit to m.", lo=0.0,
        lo_open=True),
    Key("mesh_size", "num", None, "Element size when gmsh meshes a geometry.", "m"),
    Key("order", "int", None, "Element order when gmsh meshes a geometry."),
))

SPIDER = Section("[[solid.spiders]]", "A rigid spider on the selected nodes.", (
    Key("name", "str", REQUIRED, "Spider name (also the node group of its master)."),
    Key("select", "table", REQUIRED, "The slave nodes (`select` table)."),
    Key("center", "list", None, "Master node `[x, y, z]`.", "m",
        default_text="the slaves' centroid"),
))

MATRICES = Section("[matrices]", "Imported matrices (Matrix Market; docs/solid.md).", (
    Key("mass", "str", REQUIRED, "Mass matrix file."),
    Key("stiffness", "str", REQUIRED, "Stiffness matrix file."),
    Key("damping", "str", None, "Damping matrix file."),
    Key("dofs", "str", REQUIRED, "DOF table file."),
    Key("symmetry_rtol", "num", SYMMETRY_RTOL, "Relative symmetry tolerance.", lo=0.0),
))

SECTIONS = (BEAM, BEAM_SECTION, RECTANGLE, TUBE, MEMBER, LINE, PLATE, PLATE_RECTANGLE, SOLID,
            SPIDER, MATRICES)
