"""Model file (TOML) -> :class:`ModelSpec` -> constrained :class:`FEModel`.

Dispatch by ``type`` to the element builders, which receive the section's typed spec
(``build_<type>(spec, progress) -> FEModel``, docs/ARCHITECTURE.md). Optional packages (gmsh,
meshio) are imported by the mesh reader where used, so a missing one only matters for a solid.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np

from edge import DOF_NAMES
from offline._deps import need
from offline.fem.beam import build_beam
from offline.fem.femodel import FEModel
from offline.fem.matrices import build_matrices
from offline.fem.plate import build_plate
from offline.fem.solid import build_solid
from offline.fem.strain import field_probe, user_probe
from offline.model.damage import context as damage_context
from offline.model.selection import Selection, nodes_of, parse_selection
from offline.model.spec import ModelFileError, ModelSpec, spec_from_dict

#: type -> builder of the unconstrained model from the section's typed spec.
BUILDERS = {"beam": build_beam, "plate": build_plate, "solid": build_solid,
            "matrices": build_matrices}
_TRANSLATIONS = (0, 1, 2)


def load_model_file(path) -> ModelSpec:
    """Parse and validate a model file.

    Parameters
    ----------
    path : str or Path
        The ``.toml`` file.

    Returns
    -------
    ModelSpec
    """
    if not str(path):  # Path("") is "." (a directory): say what is wrong
        raise ModelFileError("the model file name is empty")
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_MODEL_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ModelFileError(f"{path}: model file not found") from None
    except IsADirectoryError:
        raise ModelFileError(f"{path}: is a directory, expected a .toml model file") from None
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > MAX_MODEL_FILE_BYTES:
        raise ModelFileError(f"{path.name}: larger than {MAX_MODEL_FILE_BYTES} bytes; node and "
                             "element tables belong in a mesh or matrix file")
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ModelFileError(f"{path.name}: not UTF-8 text ({exc.reason} at byte "
                             f"{exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ModelFileError(f"{path.name}: TOML syntax error: {exc}") from None
    except RecursionError:
        raise ModelFileError(f"{path.name}: TOML syntax error: arrays/tables nested too "
                             "deeply") from None
    return spec_from_dict(raw, path)


#: A model file is text written by hand (large tables live in mesh/matrix files).
MAX_MODEL_FILE_BYTES = 16 << 20


# ------------------------------------------------------------------------ selections
def select_nodes(model: FEModel, select, where: str = "select") -> np.ndarray:
    """Node ids of a selection (given order for ``nodes``, ascending id otherwise).

    Parameters
    ----------
    model : FEModel
    select : Selection or dict
        A parsed selection or its TOML form (:mod:`offline.model.selection`: nodes, box,
        group, cylinder, at).
    where : str
        Key path for error messages (used when ``select`` is a dict).

    Raises
    ------
    ModelFileError
        Empty selection, unknown node or group (the message names ``where``).
    """
    sel = select if isinstance(select, Selection) else parse_selection(select, where)
    return nodes_of(sel, model.coords, model.node_ids, model.groups, where)


def resolve_dofs(model: FEModel, select, dofs, where: str = "select") -> list[int]:
    """Indices into ``model``'s DOFs of a selection and DOF names.

    Order: nodes in selection order, then ``dofs`` in the given order for each node.

    Parameters
    ----------
    model : FEModel
        Usually the constrained model returned by :func:`build_fe_model`.
    select : Selection or dict
    dofs : str or sequence of str
        DOF names (``edge.DOF_NAMES``).
    where : str
        Key path for error messages.

    Raises
    ------
    ModelFileError
        Unknown DOF name, empty selection, or a selected DOF that is not a free DOF of the
        model (constrained, or not carried by its elements).
    """
    if isinstance(dofs, str):
        dofs = [dofs]
    kinds = []
    for d in dofs:
        if d not in DOF_NAMES:
            raise ModelFileError(f"{where}: unknown DOF {d!r} (expected one of {', '.join(DOF_NAMES)})")
        kinds.append(DOF_NAMES.index(d))
    nodes = select_nodes(model, select, where)
    # lookup (node id, kind) -> DOF index through the sorted key node * 8 + kind
    order = np.lexsort((model.dof_kind, model.dof_node))
    key_sorted = model.dof_node[order].astype(np.int64) * 8 + model.dof_kind[order]
    q = (nodes[:, None] * 8 + np.asarray(kinds, np.int64)[None, :]).ravel()
    pos = np.minimum(np.searchsorted(key_sorted, q), max(key_sorted.size - 1, 0))
    found = key_sorted[pos] == q if key_sorted.size else np.zeros(q.size, bool)
    if not found.all():
        i = int(np.flatnonzero(~found)[0])
        n, k = int(q[i] // 8), int(q[i] % 8)
        raise ModelFileError(f"{where}: DOF {DOF_NAMES[k]} of node {n} is not a free DOF of "
                             f"the model (constrained, or not carried by its elements)")
    return [int(x) for x in order[pos]]


def output_probe(model: FEModel, o, where: str | None = None) -> int:
    """Where an ``[[outputs]]`` entry reads ``model``: its DOF index, or for a strain/stress
    output a :class:`offline.fem.strain.Probe` (an index carrying its row over the DOFs).

    Raises
    ------
    ModelFileError
        As :func:`resolve_dofs`; for strain/stress a point outside the elements, a model
        without element data, a missing surface or direction (the message names ``where``).
    """
    w = where or o.where or f"[[outputs]] {o.name}"
    if not hasattr(o, "at"):
        return resolve_dofs(model, o.select, o.dof, w)[0]

    try:
        if o.row is not None:
            return user_probe(model, o.row, o.scale, f"{w}.row")
        return field_probe(model, o.kind, o.at, o.surface, o.direction, o.scale, f"{w}.at")
    except ValueError as exc:
        raise ModelFileError(str(exc)) from None


def sensor_probe(model: FEModel, s, where: str | None = None) -> int:
    """Where a ``[[sensors]]`` entry reads ``model``: its DOF index, or for a strain gauge the
    :class:`offline.fem.strain.Probe` of its recovery row (as :func:`output_probe`)."""
    w = where or s.where or f"[[sensors]] {s.name}"
    if hasattr(s, "at"):
        return output_probe(model, s, w)
    return resolve_dofs(model, s.select, s.dof, w)[0]


# ---------------------------------------------------------------------------- build
def build_unconstrained(spec: ModelSpec, progress: bool = False) -> FEModel:
    """The element model with ``[[spring]]`` and ``[[mass]]`` added, before ``[[boundary]]``."""
    sp = need("scipy.sparse")
    element = spec.element()
    with damage_context(spec.raw, spec.where("").rstrip(": "), spec.type):
        try:
            model = BUILDERS[spec.type](element, progress)
        except ModelFileError:
            raise
        except ValueError as exc:  # mesh/matrix file, spider or mechanics check (zero-length
            msg = str(exc)        # member, clockwise triangle): one error class, key path named
            raise ModelFileError(msg if msg.startswith(Path(spec.path).name)
                                 else f"{element.where}: {msg}") from None
    model.name = spec.name
    N = model.n_dofs
    dK = np.zeros(N)
    dM = np.zeros(N)
    for s in spec.springs:
        nodes = select_nodes(model, s.select)
        idx = resolve_dofs(model, s.select, [s.dof], s.where)
        # k split equally over the selected nodes (parallel springs summing to k)
        np.add.at(dK, idx, s.k / len(nodes))
    for pm in spec.masses:
        nodes = select_nodes(model, pm.select)
        carried = [k for k in _TRANSLATIONS if np.any(model.dof_kind == k)]
        names = [DOF_NAMES[k] for k in carried]
        idx = resolve_dofs(model, pm.select, names, pm.where)
        # m split equally over the selected nodes, on every translation they carry
        np.add.at(dM, idx, pm.m / len(nodes))
    if dK.any():
        model.K = (model.K + sp.diags(dK)).tocsr()
    if dM.any():
        model.M = (model.M + sp.diags(dM)).tocsr()
    return model


def fixed_mask(spec: ModelSpec, model: FEModel) -> np.ndarray:
    """Boolean mask (N,) of DOFs held by ``[[boundary]]`` entries."""
    fixed = np.zeros(model.n_dofs, bool)
    carried = set(np.unique(model.dof_kind).tolist())
    for b in spec.boundary:
        nodes = select_nodes(model, b.select)
        on = np.isin(model.dof_node, nodes)
        if b.dofs is None:
            fixed |= on
            continue
        for d in b.dofs:
            k = DOF_NAMES.index(d)
            if k not in carried:
                raise ModelFileError(f"{b.where}.dofs: DOF {d!r} is not carried by a "
                                     f"{spec.type} model (it has "
                                     f"{', '.join(DOF_NAMES[c] for c in sorted(carried))})")
            fixed |= on & (model.dof_kind == k)
    return fixed


def build_fe_model(spec: ModelSpec, progress: bool = True) -> FEModel:
    """Constrained model: elements, springs, masses, boundary conditions and damping.

    Parameters
    ----------
    spec : ModelSpec
        From :func:`load_model_file` or :func:`spec_from_dict`.
    progress : bool
        Show progress bars of long steps.

    Returns
    -------
    FEModel
        With the ``[[boundary]]`` DOFs removed and ``rayleigh`` set from ``[damping]``.
    """
    model = build_unconstrained(spec, progress)
    fixed = fixed_mask(spec, model)
    out = model.constrain(fixed)
    if out.n_dofs == 0:
        raise ModelFileError(f"{spec.where('[[boundary]]')}: every DOF is constrained")
    if spec.damping is not None:
        out.rayleigh = tuple(float(c) for c in spec.damping.coefficients())
    elif model.rayleigh is not None:
        out.rayleigh = model.rayleigh
    return out
