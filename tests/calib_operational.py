"""Operational records (force unknown) of issue 25's four model errors, and the estimates of
a calibrated model against those of the true model.

Truth: a DIFFERENT full model (twice the mesh density) integrated by the exact modal engine
(:func:`calib_truth.truth_run`), random force unknown to the calibration, 1 % sensor noise.
Scoring (as :func:`calib_truth.fde_scenario`): a bundle of each model with one fixed-lag
Tikhonov estimator (window 20, alpha ``ALPHA_FDE``) replays an 8 s record of another seed
(force 5-80 Hz); force and the unmeasured 60 mm displacement (:func:`output_d60`), FDE 0-200 Hz and NRMSE =
RMS(error) / std(truth), full band, the first 0.5 s after the delay skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from calib_truth import (ALPHA_FDE, OUTPUT_D60, PARAMS_3, damage_model_text, damage_params,
                         damage_truth, model_text, score_model, truth_run)

_P_E = PARAMS_3[:PARAMS_3.index('[[parameters]]\nname = "zeta"')]
_P_Z = PARAMS_3[PARAMS_3.index('[[parameters]]\nname = "zeta"'):
                PARAMS_3.index('[[parameters]]\nname = "k_root"')]
E_LOW = 0.93 * 69e9
EST = f"[estimator]\nrate = 1000.0\nalpha = {ALPHA_FDE!r}\nwindow = 20\n"


def _e(text: str, E: float) -> str:
    """The material's modulus set to E (the text's first ``E = ...`` line)."""
    out, n = re.subn(r"(?m)^E = .*$", f"E = {E!r}", text, count=1)
    assert n == 1, "no modulus line in the model text"
    return out


def _zone(omega=0.4):
    return damage_truth(5, zone=1, omega=omega)


CASES = {
    # name: (truth model text, calibration model text, true model text (calibration family
    #        at the truth's values, no parameters))
    "E -7 %, damping 1.5 %": (
        model_text(nel=34, E=E_LOW, ratios=(0.015, 0.015), params=""),
        model_text(params=_P_E + _P_Z),
        model_text(params="", E=E_LOW, ratios=(0.015, 0.015))),
    "clamp spring, f1 -4 %": (
        model_text(nel=34, k_root=7.4, params=""),
        model_text(params=PARAMS_3),
        model_text(params="", k_root=7.4)),
    "zone 2 of 5 at 40 %": (
        damage_model_text(40, modes=20) + _zone(),
        damage_model_text(20, damage_params(5)),
        damage_model_text(20) + _zone()),
    "zone 2 of 5 at 40 %, E -7 %": (
        _e(damage_model_text(40, modes=20), E_LOW) + _zone(),
        damage_model_text(20, damage_params(5)),
        _e(damage_model_text(20), E_LOW) + _zone()),
}


def sensor_names(toml_text: str) -> list:
    import tomllib
    return [s["name"] for s in tomllib.loads(toml_text).get("sensors", [])]


def operational_record(path, truth: str, duration: float, seed: int, band=(5.0, 300.0)):
    """Write ``time,<sensors>`` (no force column) of the truth under a random force."""
    from edge.csvio import write_table
    _, Yn, _, _ = truth_run(truth, duration=duration, seed=seed, band=band,
                            where=Path(path).with_suffix(".truth.toml"))
    write_table(path, np.arange(Yn.shape[0]) / 1000.0, Yn, sensor_names(truth))


def output_d60(truth: str) -> str:
    """The unmeasured 60 mm displacement: at 59.5 mm on the damage layout's meshes (20 and
    40 elements have a node there, not at 60 mm)."""
    return OUTPUT_D60.replace("at = [0.06,", "at = [0.0595,") if "d040" in truth else OUTPUT_D60


def score(d, raws: dict, truth: str, seed: int) -> dict:
    """{model: {force_fde, force_nrmse, d60_fde, d60_nrmse}} of each parsed model file in
    ``raws`` (module docstring)."""
    import tomllib

    d = Path(d)
    out_text = output_d60(truth)
    F, Y, Z, _ = truth_run(truth + out_text, duration=8.0, seed=seed + 2, band=(5.0, 80.0))
    out = {}
    for key, raw in raws.items():
        raw = tomllib.loads(raw) if isinstance(raw, str) else dict(raw)
        raw.setdefault("outputs", tomllib.loads(out_text)["outputs"])
        raw["estimator"] = tomllib.loads(EST)["estimator"]
        out[key] = score_model(raw, d / f"{key}.toml", F, Y, Z)
    return out
