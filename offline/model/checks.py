"""Early checks of a model file against its full model, shared by ``inspect`` and ``build``:
every signal and reduction master on a node (:func:`check_positions`), mechanisms of a model
meant to be fixed (:func:`mechanism_warning`) and in-band eigenvalue errors of the reduction
(:func:`eigen_error_warning`).
"""

from __future__ import annotations

import numpy as np

from edge import DOF_NAMES
from offline.model.modelfile import output_probe, resolve_dofs
from offline.model.table import ModelFileError

#: A mode below this frequency [Hz] of a model whose ``[[boundary]]`` fixes it is a mechanism
#: (a rigid-body motion nothing restrains): a fixed structure's first mode lies far above
#: (a 100 m footbridge: ~1 Hz; a stay cable: ~0.5 Hz).
MECHANISM_HZ = 0.01

#: In-band |eigenvalue error| [%] of the reduction above which the build warns: GMR+ with the
#: default modes stays below 0.01 % on the examples; Craig-Bampton a few 0.1 %.
EIG_ERROR_WARN_PCT = 1.0


def check_positions(spec, model) -> list[str]:
    """Error messages (empty: all fine) for every ``[[sensors]]``, ``[[forces]]``,
    ``[[outputs]]`` and ``[[reduction.masters]]`` selection that does not resolve to a free
    DOF of ``model`` (the constrained full model): the key path, and for an ``at`` point the
    nearest nodes with their distances (:func:`offline.model.selection.nodes_of`)."""
    items = [(s.select, s.dof, s.where or f"[[sensors]] {s.name}") for s in spec.sensors
             if not hasattr(s, "at")]
    items += [(f.select, f.dof, f.where or f"[[forces]] {f.name}") for f in spec.forces]
    items += [(o.select, o.dof, o.where or f"[[outputs]] {o.name}") for o in spec.outputs
              if not hasattr(o, "at")]
    if spec.reduction is not None:
        items += [(m.select, m.dofs, m.where or "[[reduction.masters]]")
                  for m in spec.reduction.masters]
    errors = []
    for select, dofs, where in items:
        try:
            resolve_dofs(model, select, dofs, where)
        except ModelFileError as exc:
            errors.append(str(exc))
    for o in list(spec.sensors) + list(spec.outputs):
        if hasattr(o, "at"):  # strain/stress, gauges: the point must lie in an element
            try:
                output_probe(model, o)
            except ModelFileError as exc:
                errors.append(str(exc))
    return errors


def mechanism_warning(spec, freqs, model=None, vectors=None) -> str | None:
    """A ``WARNING: ...`` line when ``[[boundary]]`` is given yet modes lie below
    :data:`MECHANISM_HZ`; with ``model`` and the modes' ``vectors`` (n_dofs, k) it names the
    DOF and the node that move most in the first of them."""
    f = np.asarray(freqs, float)
    low = np.flatnonzero(f < MECHANISM_HZ)
    if not spec.boundary or low.size == 0:
        return None
    where = spec.where("[[boundary]]")
    detail = ""
    if model is not None and vectors is not None and vectors.shape[1] > low[0]:
        v = np.abs(np.asarray(vectors)[:, low[0]])
        i = int(np.argmax(v))
        detail = (f"; mode {low[0] + 1} moves DOF {DOF_NAMES[int(model.dof_kind[i])]} of node "
                  f"{int(model.dof_node[i])} most")
    return (f"WARNING: {where}: the boundary conditions should fix the model, yet "
            f"{low.size} mode(s) lie below {MECHANISM_HZ:g} Hz "
            f"({', '.join(f'{x:.3g}' for x in f[low])} Hz): a mechanism, a motion no boundary "
            f"condition or spring restrains (e.g. a pinned-pinned girder free to twist about "
            f"its axis: hold rx at a support){detail}")


def eigen_error_warning(report, f_band: float, spec=None) -> str | None:
    """A ``WARNING: ...`` line when the reduction's largest in-band |eigenvalue error|
    exceeds :data:`EIG_ERROR_WARN_PCT` (a ReductionReport and half the sample rate)."""
    f = np.asarray(report.freqs_full, float)
    e = np.abs(np.asarray(report.eig_error, float))
    inb = f <= f_band
    if not inb.any() or e[inb].max() <= EIG_ERROR_WARN_PCT:
        return None
    i = int(np.flatnonzero(inb)[np.argmax(e[inb])])
    where = spec.where("[reduction]") if spec is not None else "[reduction]"
    return (f"WARNING: {where}: the reduced model misses mode {i + 1} ({f[i]:.4g} Hz), "
            f"within the band, by {e[i]:.3g} % in eigenvalue (above {EIG_ERROR_WARN_PCT:g} %):"
            " its estimates rest on wrong dynamics; add modes or masters (or fix a mechanism:"
            " a near-zero eigenvalue makes any relative error large)")
