"""Truth records for the calibration tests.

The truth is a DIFFERENT full model from the calibration model (twice the mesh density, and
whatever model error a test adds), integrated with the exact modal engine of
``offline.simulate.simulate_modal`` (first-order hold, no Newmark), driven by a band-limited
random force on a fine grid; sensors get seeded Gaussian noise (paper 004 eq. 28).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

CAL_TOML = """
name = "strip"
type = "beam"
[materials.aluminium]
E = 69e9
nu = 0.3
rho = 2700.0
[beam]
theory = "euler-bernoulli"
[beam.sections.strip]
material = "aluminium"
rectangle = { b = 0.013, h = 0.0012 }
[[beam.members]]
name = "strip"
section = "strip"
line = { start = [0.0, 0.0, 0.0], end = [0.17, 0.0, 0.0], n = NEL }
orientation = [0.0, 0.0, 1.0]
[[boundary]]
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

PARAMS_3 = """
[[parameters]]
name = "E"
kind = "modulus"
material = "aluminium"
bounds = [55e9, 85e9]
[[parameters]]
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
    from offline.build import _masters
    from offline.model import build_fe_model, spec_from_dict
    from offline.simulate import load_profile, simulate_modal
    import tomllib

    path = Path(path)
    spec = spec_from_dict(tomllib.loads(truth_toml), path.with_suffix(".truth.toml"))
    model = build_fe_model(spec, progress=False)
    _, chans, forces = _masters(spec, model)
    n = int(round(duration * rate))
    t_fine = np.arange((n - 1) * oversample + 1) / (rate * oversample)
    f = load_profile("random", t_fine, band=band, rms=rms, seed=seed)
    kinds = [{"displacement": 0, "velocity": 1, "acceleration": 2}[s.kind] for s in spec.sensors]
    Y = simulate_modal(model, forces, f[:, None], 1 / (rate * oversample), oversample,
                       list(zip(chans, kinds)), n_modes=n_modes)
    rng = np.random.default_rng(seed + 1000)
    Yn = Y + noise * Y.std(axis=0) * rng.normal(size=Y.shape)
    F = f[::oversample][:, None]
    write_table(path, np.arange(n) / rate, np.hstack([F, Yn]),
                ["F160"] + [s.name for s in spec.sensors])
    return F, Y


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
