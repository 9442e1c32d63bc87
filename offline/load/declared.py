"""The load model a model file declares: the prior of a fit, and the estimator's model when
no record is given.

Each force's shaping filter takes, key by key, its ``[[forces]] model`` table, else the
``[design_load]`` load that drives it (its own entry, else the one for all) times its
``scale``: a random or chirp load gives its band and RMS, a sine load a band of +/-20 % around
its frequency. Without ``[design_load]``: 1 Hz .. 0.4 rate, RMS = scale.
"""

from __future__ import annotations

import numpy as np

from offline.forcing.force_model import DEFAULT_ORDER, ForceModel
from offline.limit.model import force_spectra
from offline.load.model import LoadModel

ROTATIONS = ("rx", "ry", "rz")


def declared_band_rms(spec, rate: float) -> list[tuple[tuple, float]]:
    """``[(band, rms)]`` per force from its ``[design_load]`` load times its ``scale``."""
    out = []
    for fs in force_spectra(spec):
        if fs.type == "random":
            lo, hi = fs.band
            out.append(((max(lo, 0.5), min(hi, 0.45 * rate)), float(fs.rms)))
        elif fs.type == "sine":
            out.append(((0.8 * fs.freq, min(1.2 * fs.freq, 0.45 * rate)),
                        float(fs.amplitude) / np.sqrt(2)))
        else:  # not loaded by the calibration: a small broadband prior
            out.append(((1.0, 0.4 * rate), 1e-3))
    return out


def declared_force_models(spec, rate: float, order: int | None = None) -> list[ForceModel]:
    """One :class:`ForceModel` per ``[[forces]]`` entry (module docstring). ``order``: the
    Butterworth order of forces whose ``model`` gives none (default :data:`DEFAULT_ORDER`);
    an order the user gave is always kept."""
    models = []
    for f, (band, rms) in zip(spec.forces, declared_band_rms(spec, rate)):
        m = f.model or {}
        o = m.get("order") or order or DEFAULT_ORDER
        fm = ForceModel(kind=m.get("kind") or "bandpass", band=tuple(m.get("band") or band),
                        rms=float(m.get("rms") or rms), order=int(o))
        fm.check(f.where or f"[[forces]] {f.name}")
        models.append(fm)
    return models


def user_orders(spec) -> list[int | None]:
    """The Butterworth order each ``[[forces]] model`` gives (None: not given)."""
    return [(f.model or {}).get("order") for f in spec.forces]


def mixed_units_warning(spec) -> str | None:
    """A warning when one calibration RMS drives forces [N] and moments [N m] alike.

    A moment and a force of the same number are not the same size: with no size of its own
    (a ``[[forces]] model.rms``, a ``scale`` other than 1 or a ``[design_load]`` load entry
    of its own) one of them is mis-stated by the ratio of a typical lever arm.
    """
    own = set()
    cal = spec.calibration
    for f in spec.forces:
        m = f.model or {}
        has_own_load = cal is not None and any(ld.force == f.name for ld in
                                               (cal.loads or (cal.load,)))
        if m.get("rms") or float(f.scale) != 1.0 or has_own_load:
            own.add(f.name)
    rot = [f.name for f in spec.forces if f.dof in ROTATIONS and f.name not in own]
    tra = [f.name for f in spec.forces if f.dof not in ROTATIONS and f.name not in own]
    if rot and tra:
        return (f"one load RMS drives the forces {', '.join(tra)} [N] and the moments "
                f"{', '.join(rot)} [N m] alike: give each its own size ([[forces]] scale or "
                f"model.rms, or a [design_load] load entry with force = NAME), or learn it "
                f"from a record (build --record RUN.csv)")
    return None


def declared_load_model(spec, rate: float, order: int | None = None,
                        noise_std=None) -> LoadModel:
    """The model file's load model (independent forces; noise: ``noise_std`` if given,
    else resolved by the build from each sensor's declaration)."""
    info = {}
    warn = mixed_units_warning(spec)
    if warn:
        info["warnings"] = [warn]
    return LoadModel(forces=declared_force_models(spec, rate, order), noise_std=noise_std,
                     source="declared", info=info)


def replaced_kinds(spec, prior_models, fitted_models) -> str | None:
    """A warning naming the forces whose declared ``model`` kind the fit replaced (the fit's
    family is the band-pass model: a random walk's static part is lost), or None."""
    other = [f"{f.name} ({pm.kind})" for f, pm, fm in zip(spec.forces, prior_models,
                                                          fitted_models) if pm.kind != fm.kind]
    if not other:
        return None
    return (f"[[forces]] model kind of {', '.join(other)} replaced by the learned band-pass "
            "model (the fit's family): a static or slowly drifting part of the load is not "
            "modelled; build without --record to keep it")
