"""Truth records for the calibration tests.

The truth is a DIFFERENT full model from the calibration model (twice the mesh density, and
whatever model error a test adds), integrated with the exact modal engine of
``offline.simulate.simulate_modal`` (first-order hold, no Newmark), driven by a band-limited
random force on a fine grid; sensors get seeded Gaussian noise (paper 004 eq. 28).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from tests.helpers import strip_toml

CAL_TOML = strip_toml("NEL") + """[[boundary]]
select = { at = [0.0, 0.0, 0.0] }
dofs = ["ux", "uy", "uz", "rx", "rz"]
[[boundary]]
select = { box = [[0.001, -0.01, -0.01], [0.2, 0.01, 0.01]] }
dofs = ["ux", "uy", "rx", "rz"]
[[spring]]
name = "root"
select = { at = [0.0, 0.0, 0.0] }
dof = "ry"
k = 10.0
[damping]
ratios = [[30.0, 0.01], [200.0, 0.01]]
[reduction]
method = "cb"
modes = 4
[[reduction.masters]]
select = { at = [0.0, 0.0, 0.0] }
dofs = ["ry"]
[[sensors]]
name = "d110"
select = { at = [0.11, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
[[sensors]]
name = "a170"
select = { at = [0.17, 0.0, 0.0] }
dof = "uz"
kind = "acceleration"
[[forces]]
name = "F160"
select = { at = [0.16, 0.0, 0.0] }
dof = "uz"
"""

#: the modulus alone (the calibration tests' one-parameter family)
E_ONLY = """
[[parameters]]
name = "E"
kind = "modulus"
material = "aluminium"
bounds = [55e9, 85e9]
"""

PARAMS_3 = E_ONLY + """[[parameters]]
name = "zeta"
kind = "damping_ratio"
bounds = [0.003, 0.05]
nominal = 0.01
[[parameters]]
name = "k_root"
kind = "spring"
spring = "root"
bounds = [3.0, 30.0]
"""


def model_text(nel: int = 17, E: float = 69e9, k_root: float = 10.0, ratios=(0.01, 0.01),
               params: str = PARAMS_3) -> str:
    t = CAL_TOML.replace("NEL", str(nel)).replace("E = 69e9", f"E = {E!r}")
    t = t.replace("k = 10.0", f"k = {k_root!r}")
    t = t.replace("ratios = [[30.0, 0.01], [200.0, 0.01]]",
                  f"ratios = [[30.0, {ratios[0]}], [200.0, {ratios[1]}]]")
    return t + params


def truth_record(path, truth_toml: str, duration: float = 1.0, rate: float = 1000.0,
                 noise: float = 0.01, seed: int = 0, band=(5.0, 80.0), rms: float = 0.05,
                 oversample: int = 8, n_modes: int = 20):
    """Write ``time,F160,d110,a170`` for the truth model file text; returns the clean record."""
    from edge.csvio import write_table
    path = Path(path)
    F, Yn, _, Y = truth_run(truth_toml, duration, rate, noise, seed, band, rms, oversample,
                            n_modes, where=path.with_suffix(".truth.toml"))
    write_table(path, np.arange(F.shape[0]) / rate, np.hstack([F, Yn]),
                ["F160"] + _sensor_names(truth_toml))
    return F, Y


def _sensor_names(truth_toml: str) -> list:
    import tomllib
    return [s["name"] for s in tomllib.loads(truth_toml).get("sensors", [])]


SENSORS_DAMAGE = """
[[sensors]]
name = "d040"
select = { at = [0.0425, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
[[sensors]]
name = "d085"
select = { at = [0.085, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
[[sensors]]
name = "d127"
select = { at = [0.1275, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
"""


def damage_params(n_zones: int = 10, length: float = 0.17) -> str:
    out = []
    for z in range(n_zones):
        x0, x1 = z * length / n_zones, (z + 1) * length / n_zones
        out.append(f"""
[[parameters]]
name = "w{z}"
kind = "damage"
region = {{ box = [[{x0!r}, -0.01, -0.01], [{x1!r}, 0.01, 0.01]] }}
bounds = [-0.1, 0.99]""")
    return "".join(out) + "\n"


def damage_truth(n_zones: int = 10, zone: int = 3, omega: float = 0.4, length: float = 0.17) -> str:
    x0, x1 = zone * length / n_zones, (zone + 1) * length / n_zones
    return f"""
[[damage]]
name = "truth"
region = {{ box = [[{x0!r}, -0.01, -0.01], [{x1!r}, 0.01, 0.01]] }}
omega = {omega!r}
"""


def damage_model_text(nel: int, params: str = "", modes: int | None = None) -> str:
    """Strip with five displacement sensors (nodes of a 20- or 40-element mesh), force at
    0.153 m, every uz a CB master; ``modes`` defaults to all interior modes (an exact basis,
    so the test sees the identification, not the nominal-basis error of a reduction)."""
    t = model_text(nel=nel, params=params).replace("[[forces]]", SENSORS_DAMAGE + "[[forces]]")
    t = t.replace('name = "a170"', 'name = "d170"').replace('kind = "acceleration"',
                                                           'kind = "displacement"')
    t = t.replace("at = [0.11, 0.0, 0.0]", "at = [0.102, 0.0, 0.0]")
    t = t.replace("at = [0.16, 0.0, 0.0]", "at = [0.153, 0.0, 0.0]")
    t = t.replace("modes = 4", f"modes = {modes if modes is not None else nel}")
    return t.replace('dofs = ["ry"]\n[[sensors]]', 'dofs = ["ry"]\n[[reduction.masters]]\n'
                     'select = { box = [[0.001, -0.01, -0.01], [0.2, 0.01, 0.01]] }\n'
                     'dofs = ["uz"]\n[[sensors]]', 1)


def zone_sensors(n: int, length: float = 0.17) -> str:
    """``n`` displacement sensors s0..s{n-1} at x = length (i + 1) / n (the zone ends)."""
    return "".join(f'[[sensors]]\nname = "s{i}"\nselect = {{ at = [{length * (i + 1) / n!r}, 0.0, 0.0] }}\n'
                   f'dof = "uz"\nkind = "displacement"\n' for i in range(n))


def localisation_text(nel: int, n_sensors: int = 10, params: str = "", modes: int | None = None) -> str:
    """:func:`damage_model_text` with its sensors replaced by ``n_sensors`` displacement
    sensors at the zone ends and the force at the tip (0.17 m)."""
    t = damage_model_text(nel, params, modes)
    a, b = t.index("[[sensors]]"), t.index("[[forces]]")
    t = t[:a] + zone_sensors(n_sensors) + t[b:]
    return t.replace("at = [0.153, 0.0, 0.0]", "at = [0.17, 0.0, 0.0]")


OUTPUT_D60 = """
[[outputs]]
name = "d60"
select = { at = [0.06, 0.0, 0.0] }
dof = "uz"
kind = "displacement"
"""


def truth_run(truth_toml: str, duration: float = 4.0, rate: float = 1000.0, noise: float = 0.01,
              seed: int = 0, band=(5.0, 80.0), rms: float = 0.05, oversample: int = 8,
              n_modes: int = 20, where=Path("truth.toml")):
    """Run of the truth model file text (exact modal engine, random force on the fine grid):
    force F (nt, nf), noisy sensors Y (nt, nch) (noise x each channel's std, seeded),
    clean [[outputs]] Z (nt, nout) and clean sensors (nt, nch)."""
    from offline.reduced import master_dofs
    from offline.model import build_fe_model, resolve_dofs, spec_from_dict
    from offline.simulate import load_profile, simulate_modal
    import tomllib

    spec = spec_from_dict(tomllib.loads(truth_toml), Path(where))
    model = build_fe_model(spec, progress=False)
    _, chans, forces = master_dofs(spec, model)
    outs = [resolve_dofs(model, o.select, o.dof, o.name)[0] for o in spec.outputs]
    n = int(round(duration * rate))
    t_fine = np.arange((n - 1) * oversample + 1) / (rate * oversample)
    f = load_profile("random", t_fine, band=band, rms=rms, seed=seed)
    kinds = [{"displacement": 0, "velocity": 1, "acceleration": 2}[s.kind] for s in spec.sensors]
    probes = list(zip(chans, kinds)) + [(d, 0) for d in outs]
    Y = simulate_modal(model, forces, f[:, None], 1 / (rate * oversample), oversample, probes,
                       n_modes=n_modes)
    nch = len(chans)
    rng = np.random.default_rng(seed + 1000)
    Yn = Y[:, :nch] + noise * Y[:, :nch].std(axis=0) * rng.normal(size=(n, nch))
    return f[::oversample][:, None], Yn, Y[:, nch:], Y[:, :nch]


# ---------------------------------------------------------------- FDE after calibration
ALPHA_FDE = 3e5      # one fixed Tikhonov alpha for every bundle compared (see fde_scenario)
ROOT_ZONE = "region = { box = [[-0.001, -0.01, -0.01], [0.0201, 0.01, 0.01]] }\n"
_P_E, _P_Z, _P_K = (PARAMS_3[PARAMS_3.index(a):PARAMS_3.index(b) if b else None] for a, b in [
    ('[[parameters]]\nname = "E"', '[[parameters]]\nname = "zeta"'),
    ('[[parameters]]\nname = "zeta"', '[[parameters]]\nname = "k_root"'),
    ('[[parameters]]\nname = "k_root"', None)])
SCENARIOS = {
    # name: (truth model_text kwargs, truth extra, calibration [[parameters]], true model)
    "E -7 %, damping 1.5 %": (dict(E=0.93 * 69e9, ratios=(0.015, 0.015)), "", _P_E + _P_Z,
                              dict(E=0.93 * 69e9, ratios=(0.015, 0.015))),
    "clamp spring, f1 -4 %": (dict(k_root=7.4), "", PARAMS_3, dict(k_root=7.4)),
    "root zone 20 mm at 60 %": ({}, '[[damage]]\nname = "root"\n' + ROOT_ZONE + "omega = 0.4\n",
                                _P_Z + '[[parameters]]\nname = "w_root"\nkind = "damage"\n'
                                + ROOT_ZONE + "bounds = [-0.1, 0.99]\n", {}),
}


def fde_scenario(name: str, d, nominal: bool = False, seed: int = 5, limit: bool = False) -> dict:
    """Calibrate the strip (17 elements) on a force-and-response record of a truth with one of
    issue 17's model errors (34 elements, exact modal engine, 1 % noise, 4 s, 5-250 Hz), then
    estimate force and 60 mm displacement from an operational record (8 s, 5-80 Hz, another
    seed) with bundles of the calibrated model and of the true model (the calibration family
    at the truth's values): {model: {force_fde, force_nrmse, d60_fde, d60_nrmse}}, FDE band
    0-200 Hz, NRMSE = RMS(error) / std(truth), first 0.5 s after the estimator delay skipped.

    Every bundle gets the same fixed-lag Tikhonov estimator (window 20, alpha ``ALPHA_FDE``):
    the automatic L-curve alpha differs by up to 5x between these bundles and then decides
    the comparison instead of the model. ``limit``: also the MMSE accuracy limit of the
    truth (``offline.limit``: full model, the operational force spectrum, 1 % noise) at the
    estimator's delay, {"force_nrmse", "d60_nrmse"}.
    """
    import tomllib
    from offline.calibration.calibrate import calibrate
    from offline.calibration.setup import from_model_file
    from offline.model import spec_from_dict

    targs, extra, params, true_args = SCENARIOS[name]
    d = Path(d)
    est = f"[estimator]\nrate = 1000.0\nalpha = {ALPHA_FDE!r}\nwindow = 20\n"
    truth = model_text(nel=34, params="", **targs) + OUTPUT_D60 + extra
    truth_record(d / "cal.csv", truth, duration=4.0, seed=seed, band=(5.0, 250.0))
    (d / "m.toml").write_text(model_text(params=params) + OUTPUT_D60 + est)
    res = calibrate(from_model_file(d / "m.toml"), [d / "cal.csv"])
    F, Y, Z, _ = truth_run(truth, duration=8.0, seed=seed + 2, band=(5.0, 80.0))
    raws = {"true": tomllib.loads(model_text(params="", **true_args) + extra + OUTPUT_D60 + est),
            "calibrated": res.calibrated_raw()}
    if nominal:
        raws["nominal"] = tomllib.loads(model_text(params="") + OUTPUT_D60 + est)
    out = {"theta": dict(zip(res.names, res.theta.tolist())),
           "std": dict(zip(res.names, res.theta_std.tolist()))}
    for key, raw in raws.items():
        out[key] = score_model(raw, d / f"{key}.toml", F, Y, Z)
    delay = out["calibrated"]["delay"]
    if limit:
        from offline.limit.model import model_limit
        from offline.limit.transfer import ForceSpectrum
        lim = model_limit(spec_from_dict(tomllib.loads(truth + est), d / "truth.toml"), noise=0.01,
                          loads=[ForceSpectrum("random", (5.0, 80.0), 0.05)],
                          delays=(0.0, delay * 1e-3))
        fl, zl = lim.at_delay(delay * 1e-3)
        out["limit"] = {"force_nrmse": float(fl[0]), "d60_nrmse": float(zl[0]),
                        "delay_samples": int(delay)}
    return out


def own_modes_damping(text: str, zeta: float = 0.01, where=Path("truth.toml")) -> str:
    """``text`` (a model_text) with its Rayleigh ratios ``zeta`` at the model's own first two
    natural frequencies: damping a ``damping_ratio`` family (ratio ζ at modes 1 and 2) can
    hold exactly, whatever the stiffness (Rayleigh anchored at 30 and 200 Hz gives a compliant
    clamp's modes 1.12 % and 0.96 %)."""
    import re
    import tomllib

    from offline.model import build_fe_model, spec_from_dict
    from offline.model.inspect import natural_frequencies

    f = natural_frequencies(build_fe_model(spec_from_dict(tomllib.loads(text), Path(where)),
                                           progress=False), 2)
    new = f"ratios = [[{f[0]:.6f}, {zeta!r}], [{f[1]:.6f}, {zeta!r}]]"
    out, n = re.subn(r"ratios = \[\[[^\n]*\]\]", new, text, count=1)
    if n != 1:
        raise ValueError("own_modes_damping: no [damping] ratios line in the model text")
    return out


def score_model(raw, path, F, Y, Z, skip: int = 500) -> dict:
    """Force (column 0) and unmeasured d60 (output 0) estimated by the bundle that
    ``offline.build`` makes of the parsed model file ``raw`` (written as ``path``) from the
    sensors ``Y``, against the truth ``F``, ``Z``: {force_fde, force_nrmse, d60_fde,
    d60_nrmse, delay} (FDE 0-200 Hz, NRMSE full band, after ``skip`` samples, the estimator's
    ``delay`` [samples] removed)."""
    from edge.estimator import Estimator
    from offline.build import build
    from offline.metrics import fde
    from offline.model import spec_from_dict

    b = build(spec_from_dict(raw, Path(path)), maps=False, limit=False, progress=False).bundle
    e = Estimator(b)
    Fe, Ze, _ = e.run(Y)
    k = e.delay
    Fe, Ze = Fe[k + skip:, 0], Ze[k + skip:, 0]
    Ft, Zt = F[skip:len(F) - k, 0], Z[skip:len(Z) - k, 0]
    return {"force_fde": float(fde(Fe, Ft, 1e-3, band=(0.0, 200.0)).value),
            "force_nrmse": float(np.sqrt(np.mean((Fe - Ft) ** 2)) / Ft.std()),
            "d60_fde": float(fde(Ze, Zt, 1e-3, band=(0.0, 200.0)).value),
            "d60_nrmse": float(np.sqrt(np.mean((Ze - Zt) ** 2)) / Zt.std()), "delay": int(k)}
