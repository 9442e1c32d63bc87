"""``vsense-offline calibrate --operational`` and ``--output-only N_MODES``: calibration from
operational records (``time,<sensors>``, the force unknown).

``--operational``: the likelihood of the records with the force as a stochastic input
(:mod:`offline.calibration.operational`); ``--output-only N``: N natural frequencies (and the
damping of the resolved ones) identified from the records (:mod:`offline.calibration.modal`),
implausible peaks dropped with the reason. Both write ``posterior.json`` and
``calibrated.toml``, and with ``--bundle`` the calibrated bundle. The model-inadequacy test
and the MCMC check compare force-and-response calibrations: refused here with the reason.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from offline.calibration.calibrate import hash_file
from offline.calibration.data import check_not_white, read_record
from offline.calibration.modal import calibrate_frequencies, frequency_model, identify_modes
from offline.calibration.operational import calibrate_operational
from offline.calibration.outcome import EXIT_NOT_CONVERGED, calibrated_bundle, outside_bounds
from offline.calibration.result import calibrated_raw
from offline.calibration.spectral_chain import measurement_label, records_chain
from offline.calibration.tomlout import dumps


def _refuse(args, n_records: int, say):
    """Options that need force-and-response records: an error naming them."""
    route = "--operational" if args.operational else "--output-only"
    if args.operational and args.output_only is not None:
        raise ValueError("choose one of --operational (the records' likelihood) and "
                         "--output-only N_MODES (identified natural frequencies)")
    if args.kfold:
        raise ValueError(f"--kfold is not available with {route}: the model-inadequacy test "
                         f"compares calibrations from force-and-response records (time,"
                         f"<forces>,<sensors>); drop --kfold or record the force")
    if args.check:
        raise ValueError(f"--check mcmc is not available with {route} (it samples the "
                         f"force-and-response likelihood); drop --check")
    if n_records >= 2 and args.kfold is None:
        say(f"note: no model-inadequacy test with {route} (it needs force-and-response records)")


def _modal(args, setup, settings, recs, say) -> tuple[dict, np.ndarray]:
    if args.output_only < 1:
        raise ValueError("--output-only needs at least one mode")
    fs, zs = [], []
    for r in recs:
        try:
            f, z, dropped = identify_modes(r.Y[r.used[0]:], r.dt, args.output_only,
                                           tuple(args.f_range or (1.0, None)))
        except ValueError as exc:
            raise ValueError(f"{r.name}: {exc}") from None
        for f0, why in dropped:
            say(f"  {r.name}: peak at {f0:.1f} Hz dropped ({why})")
        fs.append(f)
        zs.append(z)
    fs, zs = np.array(fs), np.array(zs)
    f_hat = fs.mean(axis=0)
    # each mode's damping: the mean over the records that resolve it (nan: none does)
    z_hat = np.array([zs[np.isfinite(zs[:, r]), r].mean() if np.isfinite(zs[:, r]).any()
                      else np.nan for r in range(zs.shape[1])])
    say(f"identified natural frequencies [Hz]: {np.round(f_hat, 3).tolist()}, damping ratios "
        f"{[None if not np.isfinite(z) else round(float(z), 4) for z in z_hat]} (None: not "
        f"resolved by the Welch segments)")
    res, tr = calibrate_frequencies(setup, f_hat, settings, zeta_hat=z_hat)
    th = np.array([t.to_theta(x) for t, x in zip(tr, res.m)])
    sd = np.array([abs(float(t.dtheta_dxi(x))) for t, x in zip(tr, res.m)]) * res.std
    f_mod = frequency_model(setup.pm.parts, range(1, f_hat.size + 1))(th)[0]
    info = {"names": list(setup.names), "kinds": [p.kind for p in setup.parameters],
            "mean": th.tolist(), "std": sd.tolist(), "correlation": res.corr.tolist(),
            "free_energy": res.F, "converged": bool(res.converged), "output_only": True,
            "method": "modal (identified natural frequencies)",
            "frequencies_identified": f_hat.tolist(), "frequencies_per_record": fs.tolist(),
            "damping_identified": [None if not np.isfinite(z) else float(z) for z in z_hat],
            "frequencies_model": f_mod.tolist(),
            # what the records are (as --operational decides); a per-channel linear map
            # moves no natural frequency (the chip's sinc slope across a peak: measured
            # < 5e-5 in frequency, < 1.2 % in damping, benchmarks/calibrate_operational.py
            # --chain), so the identifier takes the spectra as they are
            "measurement": measurement_label(records_chain(setup.spec, recs[0].dt)[0])}
    return info, th


def _likelihood(args, setup, settings, recs, say) -> tuple[dict, np.ndarray]:
    if settings.offsets:
        raise ValueError("[bayes].offsets: sensor offsets are not calibrated from operational "
                         "records (the likelihood uses the records' spectra, blind to offsets)")
    say(f"calibrating {list(setup.names)} from {len(recs)} operational record(s) by their "
        f"likelihood (force unknown, load model fitted jointly)")
    res = calibrate_operational(setup, settings.priors, recs, n_draws=args.starts,
                                progress=say)
    if res.info.get("chain_warning"):
        print(f"warning: {res.info['chain_warning']}", flush=True)
    else:
        say(f"  the records through the model file's measurement chain: "
            f"{res.info['measurement']}")
    if res.modes:
        for m in res.modes:
            say(f"  competing optimum from {m['start']}: nll +{m['delta_nll']:.2f}, "
                f"{np.round(m['theta'], 6).tolist()}")
    return res.to_dict(), res.theta


def output_only(args, setup, settings, say) -> int:
    """The operational routes of ``vsense-offline calibrate`` (module docstring)."""
    _refuse(args, len(args.data), say)
    recs = [read_record(p, [], setup.sensors, settings.prep) for p in args.data]
    for r in recs:
        check_not_white(r, setup.sensors)
    run = _likelihood if args.operational else _modal
    info, th = run(args, setup, settings, recs, say)
    info["data"] = [{"file": r.name, "sha256": r.sha256} for r in recs]
    info["model_sha256"] = hash_file(args.model)
    for n, m, s in zip(info["names"], info["mean"], info["std"]):
        say(f"  {n}: {m:.6g} +- {s:.3g}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "posterior.json").write_text(json.dumps(info, indent=1) + "\n")
    if not info["converged"]:
        print(f"vsense-offline calibrate: error: the {info['method']} calibration did not "
              f"converge; no calibrated model written (where it stopped: "
              f"{out / 'posterior.json'}); a longer record or a narrower prior helps",
              file=sys.stderr)
        return EXIT_NOT_CONVERGED
    outside = outside_bounds(info, setup.parameters)
    if outside:
        info["converged"] = False
        info["outside_bounds"] = outside
        (out / "posterior.json").write_text(json.dumps(info, indent=1) + "\n")
        print(f"vsense-offline calibrate: error: the {info['method']} calibration's mean is "
              f"outside the prior's bounds: {'; '.join(outside)}; the records "
              f"({', '.join(args.data)}) cannot identify the model as given; no calibrated "
              f"model written", file=sys.stderr)
        return EXIT_NOT_CONVERGED
    raw = calibrated_raw(setup, th)
    head = (f"calibrated by vsense-offline calibrate ({info['method']}) from "
            f"{Path(args.model).name} and {', '.join(r.name for r in recs)}\n"
            f"posterior medians applied; see posterior.json")
    (out / "calibrated.toml").write_text(dumps(raw, head))
    say(f"wrote {out / 'posterior.json'}, {out / 'calibrated.toml'}")
    if args.bundle:
        calibrated_bundle(args, raw, head, info, False, say)
    return 0
