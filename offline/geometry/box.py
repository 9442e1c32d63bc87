"""Structured hexahedral meshes of a rectangular block (no gmsh needed).

Used for bars and plates in tests and examples: ``nx x ny x nz`` elements of type hex8,
hex20 or hex27 on ``[0, Lx] x [0, Ly] x [0, Lz]``, node order of meshio/VTK.
"""

from __future__ import annotations

from itertools import product

import numpy as np

from offline.fem.mesh import Mesh
from offline.fem.solid import element_type


def box_mesh(size, n, kind: str = "hex20", origin=(0.0, 0.0, 0.0)) -> Mesh:
    """Structured hexahedral mesh of a block.

    Parameters
    ----------
    size : sequence of 3 floats
        Edge lengths (Lx, Ly, Lz) [m].
    n : sequence of 3 ints
        Elements along x, y, z.
    kind : str
        ``"hex8"``, ``"hex20"`` or ``"hex27"`` (or the meshio names).
    origin : sequence of 3 floats
        Corner with the smallest coordinates [m].

    Returns
    -------
    Mesh
        Node ids 1..n_nodes; groups ``x0, x1, y0, y1, z0, z1`` (nodes on the six faces).
    """
    et = element_type(kind)
    if et.shape != "hex":
        raise ValueError(f"box_mesh makes hexahedra, not {et.name!r}")
    size = np.asarray(size, dtype=float)
    nx, ny, nz = (int(v) for v in n)
    if size.shape != (3,) or np.any(size <= 0) or min(nx, ny, nz) < 1:
        raise ValueError("box_mesh: size must be 3 positive lengths and n 3 positive counts")
    q = 1 if et.degree == 1 else 2  # lattice points per element edge - 1
    axes = [np.linspace(0.0, s, q * m + 1) for s, m in zip(size, (nx, ny, nz))]
    X, Y, Z = np.meshgrid(*axes, indexing="ij")
    pts = np.c_[X.ravel(), Y.ravel(), Z.ravel()] + np.asarray(origin, dtype=float)
    lattice = np.arange(pts.shape[0]).reshape(X.shape)
    ref = np.rint((et.nodes + 1.0) / 2.0 * q).astype(np.int64)  # lattice offsets of the nodes
    conn = np.array([lattice[q * i + ref[:, 0], q * j + ref[:, 1], q * k + ref[:, 2]]
                     for i, j, k in product(range(nx), range(ny), range(nz))])
    used = np.unique(conn)  # hex20 leaves face and body centres unused
    row = np.full(pts.shape[0], -1, dtype=np.int64)
    row[used] = np.arange(used.size)
    pts = pts[used]
    ids = np.arange(1, used.size + 1, dtype=np.int64)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    tol = 1e-9 * float(size.max())
    groups = {}
    for a, ax in enumerate("xyz"):
        groups[f"{ax}0"] = ids[np.abs(pts[:, a] - lo[a]) <= tol]
        groups[f"{ax}1"] = ids[np.abs(pts[:, a] - hi[a]) <= tol]
    return Mesh(points=pts, node_ids=ids, cells=[(et.name, row[conn])], groups=groups,
                source=f"box_mesh({kind})")
