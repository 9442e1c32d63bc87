"""Calibration setup from a model file: parameters, parametric reduced model, sensors, forces.

Same construction as the inverse maps (``offline.inverse.fromfile``): the full FE model at θ0
and once per parameter at a perturbed point, projected with the nominal reduction basis
(K̂ linear in θ: the differences are the exact derivatives dK̂/dθ). The model file's damping
is used as the inverse maps now do (``model_damping``). All ``[[sensors]]`` are observed, all
``[[forces]]`` are inputs; no ``[experiment]`` is needed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

import numpy as np

from edge import DOF_NAMES
from edge.kinds import (AUTO_REDUCTION_BASE, DEFAULT_REDUCTION_METHOD, DEFAULT_REDUCTION_MODES,
                        KIND_CODE)
from offline.reduced import master_dofs
from offline.calibration import sensitivity as sv
from offline.calibration.bilinear import with_products
from offline.inverse import spec as ispec
from offline.inverse.fromfile import _edit, _nominal, full_builder, model_damping
from offline.inverse.parametric import ParametricModel, from_builder
from offline.model import build_fe_model, load_model_file, spec_from_dict
from offline.reduced import unit_rows
from offline.reduction import reduce


@dataclass
class CalibrationSetup:
    """What the calibration needs from one model file.

    Attributes
    ----------
    pm : ParametricModel       parts (M̂0, K̂0, dM̂, dK̂, θ0, damping), bounds
    parameters : list of ParameterSpec
    sensors, forces : list of str        names (CSV columns)
    out_rows : (nch, n), out_kind : (nch,), B : (n, nf)
    spec : ModelSpec          the model file as loaded
    reduction : Reduction
    reduction_method : str    the method of ``reduction`` (Craig-Bampton when GMR+ missed one)
    sensitivity : list of dict   per parameter: relative error of the reduced model's
                                 eigenvalue changes (:mod:`offline.calibration.sensitivity`)
    added_masters : list of dict   master DOFs added for it (node id, DOF name)
    """

    pm: ParametricModel
    parameters: list
    sensors: list
    forces: list
    out_rows: np.ndarray
    out_kind: np.ndarray
    B: np.ndarray
    spec: object
    reduction: object
    where: str
    sensitivity: list = field(default_factory=list)
    added_masters: list = field(default_factory=list)
    reduction_method: str = ""
    refine: object = None     # () -> (pm, out_rows, B) on a richer basis, or None

    @property
    def names(self) -> tuple:
        return tuple(p.name for p in self.parameters)


def from_model_file(path, progress: bool = False, extra: dict | None = None) -> CalibrationSetup:
    """Build the parametric reduced model of a model file with ``[[parameters]]``.

    ``extra`` adds or replaces top-level sections of the parsed file (as in the inverse maps).
    """
    spec0 = load_model_file(path)
    if extra:
        spec0 = spec_from_dict({**spec0.raw, **copy.deepcopy(extra)}, spec0.path)
    where = spec0.where("").rstrip(": ")
    params = ispec.parse_parameters(spec0.raw, where)
    theta0 = np.array([_nominal(spec0.raw, p) for p in params])
    bounds = np.array([p.bounds for p in params])
    zeta = [p for p in params if p.kind == "damping_ratio"]
    spec = spec_from_dict(_edit(spec0.raw, params, theta0, where), spec0.path)
    if not spec.sensors:
        raise ValueError(f"{where}: no [[sensors]]: nothing to calibrate against")
    gauges = [s.name for s in spec.sensors if hasattr(s, "at")]
    if gauges:  # its reduced rows are unit rows of the masters (offline/gauge_basis.py)
        raise ValueError(f"{where}: [[sensors]] {gauges[0]!r} is a strain gauge; model "
                         "calibration reads displacement, velocity or acceleration channels "
                         "only (remove the gauge from the calibration's model file)")
    model = build_fe_model(spec, progress=progress)
    masters, chan_dofs, force_dofs = master_dofs(spec, model)
    rs = spec.reduction
    full = full_builder(spec0, params, where, model.n_dofs)

    def build(theta):
        # the nominal full model is ``model`` itself (the file edited at theta0): the reduction
        # check, the parametric model and its products all start from it
        return (model.M, model.K) if np.array_equal(theta, theta0) else full(theta)

    red, masters, sens, added, how = _reduction(model, masters, rs, build, theta0, bounds, params,
                                           where, progress)
    zeta0, rayleigh = model_damping(spec, zeta, where)
    damping = dict(channels=[s.name for s in spec.sensors], zeta0=zeta0,
                   modes=zeta[0].modes if zeta else (1, 2), rayleigh=rayleigh)
    args = (build, theta0, bounds, [p.name for p in params], [p.kind for p in params])

    def parametric(red_):
        """(ParametricModel, observation rows, their kinds, force rows) on ``red_``'s basis."""
        return _parametric(args, red_, masters, chan_dofs, force_dofs, spec, damping, where)

    def refine():
        """(ParametricModel, out_rows, B) on a basis with twice the slave modes (at most all
        but one of them): the reduction part of the discretisation check
        (:mod:`offline.calibration.discretisation`); None when no richer basis exists."""
        n_slaves = model.n_dofs - masters.size
        n_modes = int(rs.modes if rs else DEFAULT_REDUCTION_MODES)
        n2 = min(2 * n_modes, n_slaves - 1)
        if how == "guyan" or n2 <= n_modes:
            return None
        pm2, rows2, _, B2 = parametric(reduce(model, masters, n_modes=n2, method=how,
                                              n_report=0, progress=False))
        return pm2, rows2, B2

    pm, rows, kinds, B = parametric(red)
    for j, p in enumerate(params):
        if p.kind != "damping_ratio" and not (np.abs(pm.parts.dK[j]).max() > 0
                                              or np.abs(pm.parts.dM[j]).max() > 0):
            raise ValueError(f"{where}: [[parameters]] {p.name!r} does not change the model"
                             + (" (no element centroid inside its region?)" if p.kind == "damage" else ""))
    return CalibrationSetup(pm=pm, parameters=params, sensors=[s.name for s in spec.sensors],
                            forces=[f.name for f in spec.forces], out_rows=rows, out_kind=kinds,
                            B=B, spec=spec, reduction=red, where=where, sensitivity=sens,
                            added_masters=added, reduction_method=how, refine=refine)


def _parametric(args, red, masters, chan_dofs, force_dofs, spec, damping, where):
    """The parametric model of ``from_builder`` on the basis ``red.T`` (exact bilinear terms
    for a product of parameters), with the observation rows, their kinds and the force rows."""
    n = red.M.shape[0]
    rows = unit_rows(masters, chan_dofs, n)
    kinds = np.array([KIND_CODE[s.kind] for s in spec.sensors], np.int8)
    B = unit_rows(masters, force_dofs, n).T
    kw = dict(T=red.T, out_rows=rows, out_kind=kinds, force=B[:, 0] if B.shape[1] else None,
              **damping)
    try:
        pm = from_builder(*args, verify=True, **kw)
    except ValueError as exc:
        if "not linear in the parameters" not in str(exc):
            raise
        # a product of parameters (a modulus and zone damage): exact bilinear terms
        pm = from_builder(*args, verify=False, **kw)
        pm = replace(pm, parts=with_products(pm.parts, args[0], args[2], red.T, where))
    return pm, rows, kinds, B


def _reduction(model, masters, rs, build, theta0, bounds, params, where, progress):
    """The nominal reduction, with the boundary DOFs of the parameters it does not see added
    as masters (:mod:`offline.calibration.sensitivity`); a refusal naming the parameters it
    still does not see. Returns (Reduction, masters, sensitivity dicts, added DOFs, method).

    Each parameter is judged on its own (its probe moves it alone), and each candidate basis
    (the file's method, then Craig-Bampton) gets the boundaries of what *it* misses as
    masters; the first basis that sees every parameter is used. A parameter one basis sees
    alone is therefore not refused because another parameter of the family is missed by
    that basis: the refusal names, per basis, exactly the parameters it missed."""
    n_modes = int(rs.modes if rs else DEFAULT_REDUCTION_MODES)
    method = rs.method if rs else DEFAULT_REDUCTION_METHOD
    method = AUTO_REDUCTION_BASE if method == "auto" else method
    names, kinds = [p.name for p in params], [p.kind for p in params]

    def run(m, how):
        red = reduce(model, m, n_modes=n_modes, method=how, n_report=0, progress=progress)
        return red, sv.check(build, theta0, bounds, names, kinds, red.T)

    tried = []
    for how in [method] + (["cb"] if method != "cb" else []):
        red, m, sens, added = _with_boundaries(model, masters, how, run, progress)
        bad = sv.failing(sens)
        tried.append((how, bad))
        if not bad:
            if how != method and progress:
                print(f"reduction: the {method} basis does not see "
                      + ", ".join(s.name for s in tried[0][1])
                      + "; the calibration uses Craig-Bampton (masters at the boundaries of what it "
                      "missed)", flush=True)
            return red, m, [{"name": q.name, "probe": q.probe, "error": q.e, "effect": q.effect}
                            for q in sens], added, how
    raise ValueError(
        f"{where}: the reduced model does not see [[parameters]] "
        + "; ".join(", ".join(
            f"{q.name!r} (its effect on the first eigenvalues is off by {100 * q.e:.0f} % at "
            f"{q.probe:g})" for q in bad) + f" with {how}" for how, bad in tried)
        + "; add [[reduction.masters]] over the parameter's region, or more [reduction] "
          "modes, or use method = \"cb\" with the region's nodes as masters")


def _with_boundaries(model, masters, how, run, progress):
    """``run`` the ``how`` basis; add the boundary DOFs of the parameters it misses as masters
    and run again (once). Returns (Reduction, masters, sensitivities, added DOF dicts)."""
    red, sens = run(masters, how)
    bad = sv.failing(sens)
    extra = (np.setdiff1d(np.concatenate([q.boundary for q in bad]), masters) if bad
             else np.zeros(0, np.int64))
    if not extra.size or masters.size + extra.size >= model.n_dofs:
        return red, masters, sens, []
    added = [{"node": int(model.dof_node[d]), "dof": DOF_NAMES[int(model.dof_kind[d])]}
             for d in extra]
    if progress:
        print(f"reduction: the {how} basis does not see "
              + ", ".join(f"{q.name} (eigenvalue changes off by {100 * q.e:.0f} %)" for q in bad)
              + f"; added {extra.size} master DOF(s) at their boundaries", flush=True)
    masters = np.concatenate([masters, extra])
    red, sens = run(masters, how)
    return red, masters, sens, added
