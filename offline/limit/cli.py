"""``vsense-offline limit MODEL.toml``: the MMSE limit, optionally next to a bundle's error."""

from __future__ import annotations

import numpy as np

from edge.bundle import Bundle
from edge.estimator import Estimator
from offline.calibration_runs import calibration_runs
from offline.limit.model import model_limit
from offline.limit.ratio import RATIO_DEFINITION, bundle_delay_s, bundle_load_model, stationary_std
from offline.model import build_fe_model, load_model_file, output_probe, resolve_dofs, sensor_probe
from offline.calibration_score import score_estimator


def run_limit(model_path, *, noise=None, delays_ms=None, n_modes: int = 80, bundle=None,
              progress: bool = True) -> str:
    """Text of the limit table (:meth:`offline.limit.model.ModelLimit.format`).

    With ``bundle`` (a path), the limit rests on the bundle's own load model (learned with
    ``build --record``, else the model file's declaration: :func:`offline.limit.ratio.
    bundle_load_model`) and is also computed at the bundle's delay; its estimator runs on
    the build's honest calibration runs under that load (:func:`offline.calibration_runs.
    calibration_runs`: full model, exact modal integration, the sensors' noise or ``noise``)
    and its normalised RMS errors are shown next to the limit, with the ratio to the limit at
    its delay (:mod:`offline.limit.ratio`, the build's ratio). Both go through the bundle's
    measurement chain (``[acquisition]``): the limit's channels see the conversion as a filter
    (``Chain.response`` times the structure's transfer) and the runs' channels are converted.
    Without ``bundle`` the limit goes through the model file's chain (``spec.chain()``: the
    ADS1256 when the file declares no ``[acquisition]``), as the build's does.
    """
    spec = load_model_file(model_path)
    if noise is not None:
        if not (np.isfinite(noise) and noise > 0):
            raise ValueError(f"--noise: expected a relative level > 0, got {noise}")
        from dataclasses import replace

        spec.sensors = [replace(s, noise=float(noise)) for s in spec.sensors]
    model = build_fe_model(spec, progress=progress)
    delays = np.array([0, 5, 10, 20, 100] if delays_ms is None else delays_ms, float) * 1e-3
    if np.any(delays < 0) or not np.all(np.isfinite(delays)):
        raise ValueError(f"--delay: delays must be finite and >= 0 ms, got {delays_ms}")
    if bundle is None:  # the model file's chain: its [acquisition], or the ADS1256 default
        chain = spec.chain()
        try:
            lim = model_limit(spec, model, delays=delays, n_modes=n_modes, progress=progress,
                              chain=chain)
        except ValueError as exc:  # a delay longer than the limit's filter memory
            if str(exc).startswith("fixed-lag limit") and delays_ms is not None:
                raise ValueError(f"--delay {' '.join(f'{d:g}' for d in delays_ms)}: "
                                 f"{exc}") from None
            raise
        return lim.format() + "\n" + chain_line(chain)

    b = Bundle.load(bundle)
    lm = bundle_load_model(b)
    delay = bundle_delay_s(b)
    lim = model_limit(spec, model, delays=np.union1d(delays, [delay]), n_modes=n_modes,
                      progress=progress, loads=lm, chain=b.chain)
    achieved, line = bundle_error(spec, model, bundle, n_modes=n_modes, progress=progress,
                                  load_model=lm, scale=stationary_std(lim.as_dict()))
    return lim.format(achieved, ratio_delay_s=delay) + "\n" + line


def bundle_error(spec, model, bundle_path, n_modes: int = 80, progress: bool = False,
                 load_model=None, scale=None):
    """Mean normalised RMS error of a bundle's estimator over the honest calibration runs
    (under ``load_model``, default the model file's declaration): ``({name: nrmse},
    description)``. ``scale``: the normaliser of each force and output (the limit's
    stationary std, :func:`offline.limit.ratio.stationary_std`), else the runs' own
    (``CalRun.scale``: the same stationary std, :mod:`offline.limit.truth_std`)."""
    b = Bundle.load(bundle_path)
    names_b = [f.name for f in b.forces] + [o.name for o in b.outputs]
    names_s = [f.name for f in spec.forces] + [o.name for o in spec.outputs]
    if names_b != names_s or [c.name for c in b.channels] != [s.name for s in spec.sensors]:
        raise ValueError(f"{bundle_path}: its channels/forces/outputs do not match "
                         f"{spec.path.name} (bundle {names_b}, model file {names_s})")
    cd = [sensor_probe(model, s) for s in spec.sensors]
    fd = [resolve_dofs(model, f.select, f.dof, f.where)[0] for f in spec.forces]
    od = [output_probe(model, o) for o in spec.outputs]
    runs = calibration_runs(spec, model, cd, fd, od, b.dt, n_modes=n_modes,
                            progress=progress, load_model=load_model, chain=b.chain)
    r = score_estimator(Estimator(b), runs, scale=scale)  # whichever estimator it selects
    if r is None:
        raise ValueError(f"{bundle_path}: the estimator diverges on the calibration runs")

    load = ("the load model learned from records" if load_model is not None
            else "the model file's declared load")
    return dict(zip(names_b, r["nrmse"])), (
        f"estimator of {bundle_path}: {b.method}, L={b.window} (delay "
        f"{(b.window - 1) * b.dt * 1e3:g} ms), alpha={b.alpha:.3g}, on {len(runs)} full-model "
        f"calibration runs (seeds {[x.seed for x in runs]}) under {load}; "
        + RATIO_DEFINITION)


def chain_line(chain) -> str:
    """The measurement chain the limit's channels went through, in words."""
    if chain.point:
        return "  measurement chain: point samples at the row times ([acquisition] ideal)"
    conv = "point samples through the sensors' dynamics" if chain.ideal else (
        f"{chain.converter} {chain.drate:g} SPS {chain.mode}" if chain.converter == "ads1256"
        else f"daq FIR cut-off {chain.cutoff:g} Hz, group delay {chain.group_delay * 1e3:g} ms")
    return (f"  measurement chain: {conv}, each channel's conversion response times the "
            f"structure's transfer ([acquisition]"
            + ("; the sensors' drifting offsets are in the channels' noise: a random walk's "
               "power q / (4 sin^2(pi f dt)), q = drift^2 dt)" if any(chain.drift) else ")"))
