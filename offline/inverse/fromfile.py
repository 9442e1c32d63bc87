"""Parametric reduced model from a model file ([[parameters]], [experiment], [inverse]).

The full FE model is built at the nominal parameters and once per parameter at a perturbed
point (a copy of ``spec.raw`` edited: ``materials.<m>.E``, the named ``[[spring]]``'s ``k``, the
named ``[[mass]]``'s ``m``); all are projected with the nominal reduction basis T, whose
coordinates are those of the bundle (masters first: sensors, forces, declared masters; then
slave modal coordinates), so the parts can ship in the same bundle.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from edge.kinds import kind_order
from offline.inverse import spec as ispec
from offline.inverse.chained import experiment_measurement
from offline.inverse.parametric import ParametricModel, from_builder
from offline.model import build_fe_model, load_model_file, spec_from_dict
from offline.model.sections import EstimatorSpec
from offline.reduced import ReducedModel, reduce_model, unit_rows


@dataclass
class ModelFileSetup:
    """Everything the inverse-map pipeline needs from one model file."""

    pm: ParametricModel
    parameters: list
    experiment: ispec.Experiment
    settings: ispec.InverseSettings
    name: str
    reduction: object
    #: the chain the device records through (the file's [acquisition], the ADS1256 by
    #: default, and the sensors' dynamics: :meth:`offline.model.ModelSpec.chain`), the
    #: :class:`Measurement` of the experiment's channels the windows go through (None: point
    #: samples) and why the chain cannot be modelled (None: it is, or there is none);
    #: :func:`offline.inverse.chained.experiment_measurement`
    chain: object = None
    measurement: object = None
    chain_reason: str | None = None


def _edit(raw: dict, params, theta, where: str) -> dict:
    r = copy.deepcopy(raw)
    for p, v in zip(params, theta):
        if p.kind == "modulus":
            mats = r.get("materials", {})
            if p.target not in mats:
                raise ValueError(f"{where}: [[parameters]] {p.name!r}: no material {p.target!r} "
                                 f"(have {sorted(mats)})")
            mats[p.target]["E"] = float(v)
        elif p.kind in ("spring", "mass"):
            key, field = ("spring", "k") if p.kind == "spring" else ("mass", "m")
            hits = [e for e in r.get(key, []) if e.get("name") == p.target]
            if len(hits) != 1:
                raise ValueError(f"{where}: [[parameters]] {p.name!r}: needs exactly one [[{key}]] "
                                 f"named {p.target!r}, found {len(hits)}")
            hits[0][field] = float(v)
        elif p.kind == "damage":
            # E_z = (1 - ω) E on the region's elements (offline.model.damage); an entry of the
            # same name (a calibrated file) is replaced, not added to
            r["damage"] = [e for e in r.get("damage", []) if e.get("name") != p.name]
            r["damage"].append(
                {"name": p.name, "region": {"box": [list(c) for c in p.region]}, "omega": float(v)})
    return r


def _nominal(raw: dict, p) -> float:
    """θ0 of a parameter: ``nominal`` if given, else the model file's own value (so the nominal
    reduction basis is the one ``offline.build`` computes), else the box centre."""
    if p.nominal is not None:
        return float(p.nominal)
    if p.kind == "damage":  # the file's [[damage]] of the same name, else intact
        hits = [e for e in raw.get("damage", []) if isinstance(e, dict) and e.get("name") == p.name]
        return float(hits[0].get("omega", 0.0)) if len(hits) == 1 else 0.0
    try:
        if p.kind == "modulus":
            return float(raw["materials"][p.target]["E"])
        if p.kind in ("spring", "mass"):
            key, field = ("spring", "k") if p.kind == "spring" else ("mass", "m")
            hits = [e for e in raw.get(key, []) if e.get("name") == p.target]
            if len(hits) == 1:
                return float(hits[0][field])
    except (KeyError, TypeError, ValueError):
        pass
    return p.theta0


def model_damping(spec, zeta_params, where: str) -> tuple[float, tuple | None]:
    """(zeta0, rayleigh) of the parametric model: the model's own damping, or a refusal.

    With a ``damping_ratio`` parameter the ratio is identified (Rayleigh, ratio ζ at its two
    modes) and the file's ``[damping]`` is only its starting point. Without one, the map must
    see exactly the model's damping: ``[damping]`` ``rayleigh = [a, b]`` or ``ratios`` (both
    give fixed coefficients, C = a M + b K, as ``build_fe_model`` and ``offline.build`` use).
    A model without ``[damping]`` and without a damping-ratio parameter is refused: the
    record's damping would be unknown to the map (issue 17: an assumed ζ = 1 % at modes 1-2
    biased an E-only map by 6.9 %).
    """
    if zeta_params:
        return float(zeta_params[0].theta0), None
    if spec.damping is None:
        raise ValueError(f"{where}: no [damping] table and no [[parameters]] of kind "
                         f"'damping_ratio': the map would have to assume a damping the model does "
                         f"not have; add [damping] (rayleigh = [a, b] or ratios) or a damping_ratio "
                         f"parameter")
    a, b = (float(c) for c in spec.damping.coefficients())
    return 0.0, (a, b)


def full_builder(spec0, params, where: str, n_dofs: int):
    """``theta -> (M, K)`` of the full constrained model with the parameters set to ``theta``
    (a copy of the file edited by :func:`_edit`); refuses a change of the model's DOFs."""

    def build(theta):
        m = build_fe_model(spec_from_dict(_edit(spec0.raw, params, theta, where), spec0.path),
                           progress=False)
        if m.n_dofs != n_dofs:
            raise ValueError(f"{where}: the model's DOFs change with the parameters")
        return m.M, m.K

    return build


def nominal_reduction(spec0, params, theta0, where, reduced=None,
                      progress=True) -> ReducedModel:
    """The reduced model at the nominal parameters ``theta0`` (reduced once).

    ``reduced``: an already reduced model of the same file (the build's); reused when
    ``theta0`` leaves the file unchanged, so a build with inverse maps reduces once.
    """
    raw0 = _edit(spec0.raw, params, theta0, where)
    if reduced is not None and raw0 == reduced.spec.raw:
        return reduced
    return reduce_model(spec_from_dict(raw0, spec0.path), n_report=0, progress=progress)


def from_model_file(path, progress: bool = True, extra: dict | None = None,
                    reduced: ReducedModel | None = None) -> ModelFileSetup:
    """Load a model file and build its parametric reduced model (see module docstring).

    ``extra`` adds or replaces top-level sections (e.g. ``parameters``, ``experiment``) of the
    parsed file before anything is built, for files that carry no ``[[parameters]]``.
    ``reduced``: the build's reduced model of the same file: its validated spec is used (the
    file is not read again) and its reduction reused (see :func:`nominal_reduction`).
    """
    spec0 = reduced.spec if reduced is not None else load_model_file(path)  # read once
    if extra:
        spec0 = spec_from_dict({**spec0.raw, **copy.deepcopy(extra)}, spec0.path)
    where = spec0.where("").rstrip(": ")
    params, exp, settings = ispec.parse(spec0.raw, where)
    theta0 = np.array([_nominal(spec0.raw, p) for p in params])
    bounds = np.array([p.bounds for p in params])
    zeta = [p for p in params if p.kind == "damping_ratio"]
    rm = nominal_reduction(spec0, params, theta0, where, reduced, progress)
    spec, model, red = rm.spec, rm.model, rm.reduction
    names = [s.name for s in spec.sensors]
    chans, kinds = [], []
    for ch in exp.channels:
        if ch not in names:
            raise ValueError(f"{where}: [experiment].channels: {ch!r} is not a [[sensors]] name "
                             f"(have {names})")
        i = names.index(ch)
        chans.append(rm.chan_dofs[i])
        kinds.append(kind_order(spec.sensors[i].kind))  # derivative order (strain: 0)
    rows = unit_rows(rm.masters, chans, rm.n)  # two sensors on one DOF share a row
    fnames = [f.name for f in spec.forces]
    at = exp.excitation.get("at", fnames[0] if fnames else None)
    if at not in fnames:
        raise ValueError(f"{where}: [experiment].excitation.at: {at!r} is not a [[forces]] name "
                         f"(have {fnames})")
    force = unit_rows(rm.masters, [rm.force_dofs[fnames.index(at)]], rm.n)[0]
    zeta0, rayleigh = model_damping(spec, zeta, where)

    build = full_builder(spec0, params, where, model.n_dofs)
    pm = from_builder(build, theta0, bounds, [p.name for p in params], [p.kind for p in params],
                      T=red.T, out_rows=rows, out_kind=np.array(kinds), force=force,
                      channels=exp.channels, zeta0=zeta0,
                      modes=zeta[0].modes if zeta else (1, 2), verify=True, rayleigh=rayleigh)
    # the chain is declared at the estimator's rate (ModelSpec.chain)
    rate = (spec.estimator or EstimatorSpec()).rate
    chain = spec.chain()
    meas, why = experiment_measurement(chain, names, exp, rate)
    return ModelFileSetup(pm=pm, parameters=params, experiment=exp, settings=settings,
                          name=spec.name, reduction=red, chain=chain, measurement=meas,
                          chain_reason=why)
