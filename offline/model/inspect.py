"""``inspect_model``: sizes, mass and first natural frequencies of a model file's full model."""

from __future__ import annotations

import numpy as np

from edge import DOF_NAMES
from offline._deps import need
from offline.model.checks import check_positions, mechanism_warning
from offline.model.modelfile import build_unconstrained, fixed_mask, load_model_file


def natural_frequencies(model, n_modes: int = 10, vectors: bool = False):
    """Lowest ``n_modes`` natural frequencies [Hz] of ``K phi = w^2 M phi``.

    Sparse shift-invert (``eigsh``) about ``sigma = -1 (rad/s)^2``, slightly negative so that
    rigid-body modes (``w = 0``) do not make ``K - sigma M`` singular; dense ``eigh`` for small
    models. Tiny negative eigenvalues from round-off are reported as 0 Hz. ``vectors``:
    return ``(f, Phi)`` with the mode shapes ``Phi`` (n_dofs, k) too.
    """
    n = model.n_dofs
    k = min(n_modes, n)
    if n <= 400 or k >= n - 1:
        sl = need("scipy.linalg")
        w2, V = sl.eigh(model.K.toarray(), model.M.toarray())
        w2, V = w2[:k], V[:, :k]
    else:
        sla = need("scipy.sparse.linalg")
        w2, V = sla.eigsh(model.K.tocsc(), k=k, M=model.M.tocsc(), sigma=-1.0, which="LM")
        o = np.argsort(w2)
        w2, V = w2[o], V[:, o]
    # f = sqrt(w^2) / (2 pi)
    f = np.sqrt(np.clip(w2, 0.0, None)) / (2.0 * np.pi)
    return (f, V) if vectors else f


def inspect_model(path, n_modes: int = 10, progress: bool = False) -> str:
    """The text of :func:`inspect_report`, its errors appended as ``ERROR: ...`` lines."""
    text, errors = inspect_report(path, n_modes, progress)
    return "\n".join([text] + [f"ERROR: {e}" for e in errors])


def inspect_report(path, n_modes: int = 10, progress: bool = False) -> tuple[str, list]:
    """Human-readable summary of a model file.

    Parameters
    ----------
    path : str or Path
        Model file.
    n_modes : int
        Number of natural frequencies to list.

    Returns
    -------
    text : str
        Sizes (nodes, elements when the builder reports them, DOFs before/after boundary
        conditions, nnz of K and M), mass [kg] per translation direction (with point masses,
        before constraints), the first natural frequencies [Hz] of the constrained model, and a
        ``WARNING`` line for a mechanism (:func:`offline.model.checks.mechanism_warning`).
    errors : list of str
        Signals and reduction masters that sit on no free DOF of a node
        (:func:`offline.model.checks.check_positions`), each naming its key and the nearest
        nodes.
    """
    spec = load_model_file(path)
    full = build_unconstrained(spec, progress)
    fixed = fixed_mask(spec, full)
    model = full.constrain(fixed)
    if spec.damping is not None:
        model.rayleigh = spec.damping.coefficients()
    lines = [f"model {spec.name!r} ({spec.type}) from {spec.path}"]
    ne = getattr(full, "n_elements", None)
    lines.append(f"  nodes     {full.coords.shape[0]:>10,d}")
    lines.append(f"  elements  {ne:>10,d}" if ne is not None else "  elements         n/a")
    lines.append(f"  DOFs      {full.n_dofs:>10,d} total, {int(fixed.sum()):,d} constrained, "
                 f"{model.n_dofs:,d} free")
    lines.append(f"  nnz       K {model.K.nnz:,d}, M {model.M.nnz:,d} (free DOFs)")
    for k in (0, 1, 2):
        sel = full.dof_kind == k
        if sel.any():
            r = sel.astype(float)
            # mass along a direction = r^T M r with r the unit rigid translation
            lines.append(f"  mass {DOF_NAMES[k]:<4} {float(r @ (full.M @ r)):.6g} kg")
    if model.rayleigh is not None:
        a, b = model.rayleigh
        lines.append(f"  Rayleigh  a = {a:.6g} 1/s, b = {b:.6g} s")
    f, V = natural_frequencies(model, n_modes, vectors=True)
    lines.append(f"  first {f.size} natural frequencies [Hz]:")
    lines += [f"    {i + 1:3d}  {fi:12.4f}" for i, fi in enumerate(f)]
    warn = mechanism_warning(spec, f, model, V)
    if warn:
        lines.append(warn)
    errors = check_positions(spec, model)
    lines.append("  positions: every sensor, force, output and reduction master on a node"
                 if not errors else f"  positions: {len(errors)} problem(s), below")
    return "\n".join(lines), errors
