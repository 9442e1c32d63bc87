"""A gearbox-like housing generated with gmsh (OpenCASCADE kernel).

Geometry (metres, z up, centred on the z axis)::

    thick-walled box L x W x H, wall t, closed top, open bottom
    bottom flange: outward rim of width e and thickness tf, n_bolts bolt holes (diameter d_bolt)
    two bearing bores of diameter d_bearing along y through the front and back walls
    (one seat per wall: bearing1_front, bearing1_back, bearing2_front, bearing2_back)
    four cover-bolt holes (diameter d_cover) through the top wall

Every hole surface is a physical group ``hole_<name>``; :func:`spider_tables` gives the
``[[solid.spiders]]`` tables that tie each hole to a master node named ``<name>``. The flange
bolt spiders (``bolt1`` ..) are the ones to clamp; the bearing and cover spiders carry the
master DOFs of a reduction (8 spiders x 6 = 48 DOFs).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from offline._deps import need
from offline.fem.mesh import Mesh, from_gmsh


@dataclass(frozen=True)
class HousingParams:
    """Dimensions [m] of the housing."""

    L: float = 0.40         # outer length (x)
    W: float = 0.30         # outer width (y)
    H: float = 0.25         # outer height (z), flange bottom at z = 0
    t: float = 0.02         # wall thickness
    e: float = 0.05         # flange rim width
    tf: float = 0.02        # flange thickness
    d_bolt: float = 0.014   # flange bolt hole diameter
    d_bearing: float = 0.062  # bearing bore diameter
    bearing_x: float = 0.095  # bearing bores at x = +-bearing_x
    bearing_z: float = 0.14   # bearing bore axis height
    d_cover: float = 0.010  # cover bolt hole diameter


def _bolt_positions(p: HousingParams):
    """Flange bolt hole centres (x, y): corners and mid-sides of the rim (8 holes)."""
    xo, yo = p.L / 2 + p.e / 2, p.W / 2 + p.e / 2
    return [(-xo, -yo), (0.0, -yo), (xo, -yo), (xo, 0.0), (xo, yo), (0.0, yo), (-xo, yo),
            (-xo, 0.0)]


def _cover_positions(p: HousingParams):
    xo, yo = 0.5 * (p.L / 2 - p.t), 0.5 * (p.W / 2 - p.t)
    return [(-xo, -yo), (xo, -yo), (xo, yo), (-xo, yo)]


def hole_names(p: HousingParams = HousingParams()) -> dict[str, list[str]]:
    """Spider names by kind: ``{"bolt": [...], "bearing": [...], "cover": [...]}``."""
    return {"bolt": [f"bolt{i + 1}" for i in range(len(_bolt_positions(p)))],
            "bearing": [f"bearing{i}_{s}" for i in (1, 2) for s in ("front", "back")],
            "cover": [f"cover{i + 1}" for i in range(len(_cover_positions(p)))]}


def spider_tables(p: HousingParams = HousingParams()) -> list[dict]:
    """``[[solid.spiders]]`` tables: one spider per hole, selected by its physical group."""
    names = hole_names(p)
    return [{"name": n, "select": {"group": f"hole_{n}"}}
            for kind in ("bolt", "bearing", "cover") for n in names[kind]]


def _build_geometry(p: HousingParams):
    gmsh = need("gmsh")
    occ = gmsh.model.occ
    outer = occ.addBox(-p.L / 2, -p.W / 2, 0, p.L, p.W, p.H)
    rim = occ.addBox(-p.L / 2 - p.e, -p.W / 2 - p.e, 0, p.L + 2 * p.e, p.W + 2 * p.e, p.tf)
    body, _ = occ.fuse([(3, outer)], [(3, rim)])
    inner = occ.addBox(-p.L / 2 + p.t, -p.W / 2 + p.t, -0.01, p.L - 2 * p.t, p.W - 2 * p.t,
                       p.H - p.t + 0.01)
    tools = [(3, inner)]
    for x, y in _bolt_positions(p):
        tools.append((3, occ.addCylinder(x, y, -0.01, 0, 0, p.tf + 0.02, p.d_bolt / 2)))
    for x in (-p.bearing_x, p.bearing_x):
        tools.append((3, occ.addCylinder(x, -p.W / 2 - 0.01, p.bearing_z, 0, p.W + 0.02, 0,
                                         p.d_bearing / 2)))
    for x, y in _cover_positions(p):
        tools.append((3, occ.addCylinder(x, y, p.H - p.t - 0.01, 0, 0, p.t + 0.02,
                                         p.d_cover / 2)))
    occ.cut(body, tools)
    occ.synchronize()
    # physical groups of the hole surfaces ----------------------------------------------
    d = 1e-4

    def surfaces(x0, y0, z0, x1, y1, z1):
        return [t for _, t in gmsh.model.getEntitiesInBoundingBox(
            x0 - d, y0 - d, z0 - d, x1 + d, y1 + d, z1 + d, 2)]

    names = hole_names(p)
    groups = {}
    for n, (x, y) in zip(names["bolt"], _bolt_positions(p)):
        r = p.d_bolt / 2
        groups[n] = surfaces(x - r, y - r, 0, x + r, y + r, p.tf)
    for i, x in enumerate((-p.bearing_x, p.bearing_x)):
        r = p.d_bearing / 2
        for side, (y0, y1) in (("front", (-p.W / 2, -p.W / 2 + p.t)),
                               ("back", (p.W / 2 - p.t, p.W / 2))):
            groups[f"bearing{i + 1}_{side}"] = surfaces(x - r, y0, p.bearing_z - r, x + r, y1,
                                                         p.bearing_z + r)
    for n, (x, y) in zip(names["cover"], _cover_positions(p)):
        r = p.d_cover / 2
        groups[n] = surfaces(x - r, y - r, p.H - p.t, x + r, y + r, p.H)
    for n, tags in groups.items():
        if not tags:
            raise RuntimeError(f"housing geometry: no surface found for hole {n!r}")
        gmsh.model.addPhysicalGroup(2, tags, name=f"hole_{n}")
    gmsh.model.addPhysicalGroup(3, [t for _, t in gmsh.model.getEntities(3)], name="housing")


def _mesh(h: float, order: int, threads: int):
    gmsh = need("gmsh")
    gmsh.model.mesh.clear()
    gmsh.option.setNumber("Mesh.MeshSizeMax", h)
    gmsh.option.setNumber("Mesh.MeshSizeMin", 0.25 * h)
    gmsh.option.setNumber("Mesh.MeshSizeFromCurvature", 12)  # elements per 2 pi
    gmsh.option.setNumber("Mesh.Algorithm3D", 10)  # HXT: parallel Delaunay
    gmsh.option.setNumber("General.NumThreads", threads)
    gmsh.model.mesh.generate(3)
    if order == 2:
        # straight-sided tet10: curved mid-edge nodes on the small holes can invert coarse
        # elements; faceted holes are fine for spiders (the hole surface moves rigidly anyway)
        gmsh.option.setNumber("Mesh.SecondOrderLinear", 1)
        gmsh.model.mesh.setOrder(2)
    tags, _, _ = gmsh.model.mesh.getNodes()
    return len(tags)


def housing_mesh(params: HousingParams = HousingParams(), target_dofs: int | None = 200_000,
                 h: float | None = None, order: int = 2, path: str | Path | None = None,
                 threads: int = 2, progress: bool = False) -> tuple[Mesh, dict]:
    """Generate and mesh the housing.

    Parameters
    ----------
    params : HousingParams
    target_dofs : int, optional
        Smallest number of solid DOFs (3 per node) wanted; the element size is found by
        meshing at a coarse size and scaling with ``(n / target)^(1/3)`` until the count lies
        in [target, 1.25 target] (at most 5 meshes; the last one is kept).
        Ignored when ``h`` is given.
    h : float, optional
        Maximum element size [m].
    order : int
        1 (tet4) or 2 (tet10).
    path : path, optional
        Also write the mesh (gmsh ``.msh``, or any format gmsh writes by extension).
    threads : int
        gmsh meshing threads.
    progress : bool
        gmsh terminal output.

    Returns
    -------
    mesh : Mesh
    info : dict
        ``h`` [m], ``n_nodes``, ``n_cells``, ``n_dofs`` (3 per node), ``meshes`` (attempts),
        ``seconds``, ``params``.
    """
    gmsh = need("gmsh")
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2, got {order!r}")
    t0 = time.perf_counter()
    own = not gmsh.isInitialized()
    if own:
        gmsh.initialize(interruptible=False)
    try:
        gmsh.option.setNumber("General.Terminal", 1 if progress else 0)
        gmsh.model.add("housing")
        _build_geometry(params)
        attempts = 0
        if h is None:
            if target_dofs is None or target_dofs <= 0:
                raise ValueError("give h or a positive target_dofs")
            h = 0.05
            n = _mesh(h, order, threads)
            attempts += 1
            while not target_dofs <= 3 * n <= 1.25 * target_dofs and attempts < 5:
                # DOFs ~ h^-3 (volume mesh); aim 4 % above the target
                h = h * (3 * n / (1.04 * target_dofs)) ** (1.0 / 3.0)
                n = _mesh(h, order, threads)
                attempts += 1
        else:
            n = _mesh(h, order, threads)
            attempts += 1
        if path is not None:
            gmsh.write(str(path))
        mesh = from_gmsh(source="housing (gmsh)")
        gmsh.model.remove()
    finally:
        if own:
            gmsh.finalize()
    info = {"h": h, "n_nodes": int(mesh.points.shape[0]), "n_cells": mesh.n_cells,
            "n_dofs": 3 * int(mesh.points.shape[0]), "meshes": attempts,
            "seconds": time.perf_counter() - t0, "params": asdict(params), "order": order}
    return mesh, info


def main(argv=None) -> int:
    """``python -m offline.geometry.housing out.msh [--target-dofs N] [--order 1|2]``."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="mesh file to write (.msh)")
    ap.add_argument("--target-dofs", type=int, default=200_000)
    ap.add_argument("--h", type=float, default=None, help="element size [m]")
    ap.add_argument("--order", type=int, default=2)
    a = ap.parse_args(argv)
    mesh, info = housing_mesh(target_dofs=a.target_dofs, h=a.h, order=a.order, path=a.out)
    print(f"{a.out}: {info['n_nodes']} nodes, {info['n_cells']} cells, {info['n_dofs']} DOFs, "
          f"h = {info['h'] * 1e3:.2f} mm, {info['seconds']:.1f} s")
    print(f"spiders: {', '.join(s['name'] for s in spider_tables())}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())


__all__ = ["HousingParams", "housing_mesh", "spider_tables", "hole_names", "main"]
