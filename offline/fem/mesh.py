"""Volume meshes for solid models: read through meshio, or mesh .geo/.step files with gmsh.

A :class:`Mesh` holds what :func:`offline.fem.solid.solid_model` needs: node coordinates and
ids, volume cell blocks in meshio (VTK) node order, and named node groups from the file's
physical groups (gmsh), point sets and cell sets (Abaqus ``*NSET``/``*ELSET``, ...).

Node ids are 1-based row numbers of the file's point list (meshio renumbers points; for gmsh
files with contiguous node tags, which gmsh writes by default, they equal the gmsh tags).
Nodes that no volume cell uses (geometry points, nodes of lower-dimensional cells only) are
dropped; their ids are not reused.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from offline._deps import MissingDependency, need

#: Volume cell types understood by the solid elements.
VOLUME_TYPES = ("tetra", "tetra10", "hexahedron", "hexahedron20", "hexahedron27")
#: Volume cell types that are recognised but not supported (clear error instead of a skip).
_UNSUPPORTED_3D = ("wedge", "wedge15", "wedge18", "pyramid", "pyramid13", "pyramid14",
                   "tetra20", "hexahedron64")
#: Extensions read by gmsh (geometry to be meshed) instead of meshio.
GMSH_GEOMETRY = (".geo", ".step", ".stp", ".brep", ".iges", ".igs")


class MeshError(ValueError):
    """A mesh file is missing, unreadable or unusable (the message names the file)."""


@dataclass
class Mesh:
    """A volume mesh.

    Attributes
    ----------
    points : ndarray, shape (n_nodes, 3)
        Node coordinates [m].
    node_ids : ndarray of int64, shape (n_nodes,)
        Node ids.
    cells : list of (str, ndarray of int64 (ne, nn))
        Volume cell blocks: meshio type name and connectivity as rows of ``points``.
    groups : dict of str -> ndarray of int64
        Named node sets (node ids).
    source : str
        File the mesh came from.
    """

    points: np.ndarray
    node_ids: np.ndarray
    cells: list
    groups: dict = field(default_factory=dict)
    source: str = ""

    @property
    def n_cells(self) -> int:
        return int(sum(c.shape[0] for _, c in self.cells))


def from_meshio(m, source: str = "", scale: float = 1.0) -> Mesh:
    """Convert a ``meshio.Mesh`` (volume cells, groups) into a :class:`Mesh`.

    Parameters
    ----------
    m : meshio.Mesh
    source : str
        File name used in error messages.
    scale : float
        Factor from the mesh length unit to metres.
    """
    pts = np.asarray(m.points, dtype=float)
    if pts.ndim != 2 or pts.shape[1] not in (2, 3):
        raise MeshError(f"{source}: points have shape {pts.shape}, expected (n, 3)")
    if pts.shape[1] == 2:
        raise MeshError(f"{source}: the mesh is two-dimensional; a solid needs 3-D points")
    if not np.all(np.isfinite(pts)):
        raise MeshError(f"{source}: node coordinates contain NaN or inf")
    cells = []
    for blk in m.cells:
        if blk.type in VOLUME_TYPES:
            cells.append((blk.type, np.asarray(blk.data, dtype=np.int64)))
        elif blk.type in _UNSUPPORTED_3D:
            raise MeshError(f"{source}: cell type {blk.type!r} is not supported by the solid "
                            f"elements (supported: {', '.join(VOLUME_TYPES)})")
    if not cells:
        raise MeshError(f"{source}: no volume cells (tetrahedra or hexahedra) in the mesh; "
                        f"cell types found: {', '.join(b.type for b in m.cells) or 'none'}")
    n = pts.shape[0]
    used = np.zeros(n, dtype=bool)
    for _, c in cells:
        used[c.ravel()] = True
    # groups over the original rows ------------------------------------------
    groups_rows: dict[str, np.ndarray] = {}
    for name, blocks in (m.cell_sets or {}).items():
        if name.startswith("gmsh:"):
            continue
        rows = [np.asarray(m.cells[i].data)[np.asarray(idx, dtype=np.int64)].ravel()
                for i, idx in enumerate(blocks) if idx is not None and len(idx)]
        if rows:
            groups_rows[name] = np.unique(np.concatenate(rows))
    for name, idx in (m.point_sets or {}).items():
        r = np.asarray(idx, dtype=np.int64).ravel()
        groups_rows[name] = np.union1d(groups_rows.get(name, np.zeros(0, np.int64)), r)
    # drop unused nodes, keep ids = original row + 1 ---------------------------
    new_row = np.full(n, -1, dtype=np.int64)
    keep = np.flatnonzero(used)
    new_row[keep] = np.arange(keep.size)
    cells = [(t, new_row[c]) for t, c in cells]
    node_ids = keep.astype(np.int64) + 1
    groups = {}
    for name, r in groups_rows.items():
        r = r[used[r]]
        if r.size:
            groups[name] = node_ids[new_row[r]]
    return Mesh(points=pts[keep] * scale, node_ids=node_ids, cells=cells, groups=groups,
                source=source)


def read_mesh(path, scale: float = 1.0, mesh_size: float | None = None,
              order: int | None = None, where: str = "", progress: bool = False) -> Mesh:
    """Read a volume mesh file.

    Parameters
    ----------
    path : str or Path
        Any format meshio reads (``.msh``, ``.vtu``, ``.inp``, ``.med``, ...), or a geometry
        for gmsh (``.geo``, ``.step``/``.stp``, ``.brep``, ``.iges``) which is meshed here.
    scale : float
        Factor from the file's length unit to metres (e.g. 1e-3 for millimetres).
    mesh_size : float, optional
        Geometry files only: maximum element size [m] (before ``scale``: in file units).
    order : int, optional
        Geometry files only: element order, 1 (tet4) or 2 (tet10, the default).
    where : str
        Prefix for error messages (model-file key path).
    """
    path = Path(path)
    label = f"{where}: {path}" if where else str(path)
    if not path.is_file():
        raise MeshError(f"{label}: mesh file not found")
    if path.suffix.lower() in GMSH_GEOMETRY:
        return _mesh_geometry(path, scale, mesh_size, order, label, progress)
    if mesh_size is not None or order is not None:
        raise MeshError(f"{label}: mesh_size/order apply only to geometry files "
                        f"({', '.join(GMSH_GEOMETRY)}), not to an existing mesh")
    meshio = need("meshio")
    try:
        m = meshio.read(str(path))
    except (Exception, SystemExit) as exc:  # meshio raises many kinds, even SystemExit
        raise MeshError(f"{label}: cannot read the mesh ({type(exc).__name__}: {exc})") from exc
    return from_meshio(m, source=label, scale=scale)


def from_gmsh(source: str = "gmsh model", scale: float = 1.0) -> Mesh:
    """The current (already meshed) gmsh model as a :class:`Mesh`.

    gmsh must be initialised by the caller. The mesh goes through a temporary ``.msh`` file
    and meshio so that node ordering and physical groups are handled in one place. If the
    model has no 3-D physical group (gmsh then saves no volume cells), one named ``"volume"``
    holding all volumes is added.
    """
    gmsh = need("gmsh")
    meshio = need("meshio")
    if gmsh.model.getPhysicalGroups() and not gmsh.model.getPhysicalGroups(3):
        gmsh.model.addPhysicalGroup(3, [t for _, t in gmsh.model.getEntities(3)], name="volume")
    fd, tmp = tempfile.mkstemp(suffix=".msh")
    os.close(fd)
    binary = gmsh.option.getNumber("Mesh.Binary")
    try:
        gmsh.option.setNumber("Mesh.Binary", 1)
        gmsh.write(tmp)
        m = meshio.read(tmp)
    finally:
        gmsh.option.setNumber("Mesh.Binary", binary)
        os.unlink(tmp)
    return from_meshio(m, source=source, scale=scale)


def _mesh_geometry(path: Path, scale, mesh_size, order, label, progress) -> Mesh:
    try:
        gmsh = need("gmsh")
    except MissingDependency as exc:  # gmsh is the `mesh` extra (no aarch64 wheel)
        raise MissingDependency(f"{label}: meshing a geometry file needs gmsh: {exc}") from exc
    order = 2 if order is None else order
    if order not in (1, 2):
        raise MeshError(f"{label}: order must be 1 or 2, got {order!r}")
    if mesh_size is not None and not (isinstance(mesh_size, (int, float)) and mesh_size > 0):
        raise MeshError(f"{label}: mesh_size must be a positive number, got {mesh_size!r}")
    own = not gmsh.isInitialized()
    if own:
        gmsh.initialize(interruptible=False)
    try:
        gmsh.option.setNumber("General.Terminal", 1 if progress else 0)
        gmsh.model.add(path.stem)
        try:
            if path.suffix.lower() == ".geo":
                gmsh.open(str(path))
            else:
                gmsh.model.occ.importShapes(str(path))
                gmsh.model.occ.synchronize()
        except Exception as exc:
            raise MeshError(f"{label}: gmsh cannot read the geometry ({exc})") from exc
        if mesh_size is not None:
            gmsh.option.setNumber("Mesh.MeshSizeMax", float(mesh_size) / scale)
        gmsh.model.mesh.generate(3)
        if order == 2:
            gmsh.option.setNumber("Mesh.HighOrderOptimize", 2)  # untangle curved elements
            gmsh.model.mesh.setOrder(2)
        if not gmsh.model.getPhysicalGroups():
            gmsh.option.setNumber("Mesh.SaveAll", 1)
        return from_gmsh(source=label, scale=scale)
    finally:
        if own:
            gmsh.finalize()
        else:
            gmsh.model.remove()
