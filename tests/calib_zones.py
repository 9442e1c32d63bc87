"""Damage-zone cases that the calibration did not build: root spring, damping and five zones.

The cantilever strip of :mod:`calib_truth` (34 Euler-Bernoulli elements, 5 mm each; GMR+
with 6 modes and the root rotation as a master, as in a user's file), the family
``zeta, k_root, z0..z4`` with zones 0-10, 10-30, 30-50, 50-90 and 90-170 mm, and a truth of
twice the mesh density with 40 % stiffness loss in 30-50 mm (zone z2), integrated by the exact
modal engine. Two instrumentations:

* ``"1 sensor"``: one displacement at 150 mm (near the tip), force at 160 mm;
* ``"3 sensors"``: displacements at 30, 50 and 150 mm (the damaged zone's ends), same force.
"""

from __future__ import annotations

from pathlib import Path

from calib_truth import model_text, truth_record

ZONES = [(0.0, 0.01), (0.01, 0.03), (0.03, 0.05), (0.05, 0.09), (0.09, 0.17)]
DAMAGED, OMEGA = 2, 0.4
LAYOUTS = {"1 sensor": (0.15,), "3 sensors": (0.03, 0.05, 0.15),
           # two spans of 170 mm (the root spring at 0, supports at 170 and 340 mm; sensors at 80, 250 mm)
           "two-span, 2 sensors": (0.08, 0.25)}
FORCE_AT = {"two-span, 2 sensors": 0.12}

FAMILY = """[[parameters]]
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


def _box(a: float, b: float) -> str:
    # element centroids decide (docs "Damage zones"): a box 0.1 mm wider than the zone
    return f"{{ box = [[{a - 1e-4!r}, -0.01, -0.01], [{b + 1e-4!r}, 0.01, 0.01]] }}"


def zone_params() -> str:
    return "".join(f'[[parameters]]\nname = "z{i}"\nkind = "damage"\nregion = {_box(a, b)}\n'
                   f'bounds = [-0.1, 0.99]\n' for i, (a, b) in enumerate(ZONES))


def _sensors(xs) -> str:
    return "".join(f'[[sensors]]\nname = "d{round(1000 * x):03d}"\nselect = {{ at = [{x!r}, 0.0, 0.0] }}\n'
                   f'dof = "uz"\nkind = "displacement"\n' for x in xs)


def case_text(layout: str, nel: int = 34, params: str = "", method: str = "gmr+",
              extra: str = "", modes: int = 6) -> str:
    """Model file text: the strip with ``layout``'s sensors, force at 160 mm."""
    t = model_text(nel=nel, params="")
    a, b = t.index("[[sensors]]"), t.index("[[forces]]")
    t = t[:a] + _sensors(LAYOUTS[layout]) + t[b:]
    if layout.startswith("two-span"):
        t = t.replace("end = [0.17, 0.0, 0.0]", "end = [0.34, 0.0, 0.0]")
        t = t.replace("[0.2, 0.01, 0.01]", "[0.4, 0.01, 0.01]")
        t = t.replace("[[spring]]", '[[boundary]]\nselect = { at = [0.17, 0.0, 0.0] }\ndofs = ["uz"]\n'
                      '[[boundary]]\nselect = { at = [0.34, 0.0, 0.0] }\ndofs = ["uz"]\n[[spring]]')
        t = t.replace("at = [0.16, 0.0, 0.0]", f"at = [{FORCE_AT[layout]!r}, 0.0, 0.0]")
    t = t.replace('method = "cb"', f'method = "{method}"').replace("modes = 4", f"modes = {modes}")
    # the truth records are point samples at the row times (calib_truth's exact modal engine),
    # so the calibration compares point samples (one sensor would default to the ADS1256)
    t += '[acquisition]\nconverter = "ideal"\n'
    return t + extra + params


def truth_damage() -> str:
    a, b = ZONES[DAMAGED]
    return f'[[damage]]\nname = "truth"\nregion = {_box(a, b)}\nomega = {OMEGA!r}\n'


OUT_D60 = '[[outputs]]\nname = "d60"\nselect = { at = [0.06, 0.0, 0.0] }\ndof = "uz"\nkind = "displacement"\n'


def _damped(text: str, layout: str) -> str:
    # the two-span beam's modes (108, 177 Hz) are far from the strip's Rayleigh anchors (30,
    # 200 Hz): its truth gets 1 % at its own first two modes, which the family can hold
    if not layout.startswith("two-span"):
        return text
    from calib_truth import own_modes_damping
    return own_modes_damping(text)


def true_text(layout: str, extra: str = "") -> str:
    """The calibration model file (34 elements, GMR+) at the truth's values, no parameters."""
    return _damped(case_text(layout, extra=extra) + truth_damage(), layout)


def truth_text(layout: str, extra: str = "") -> str:
    """The truth: twice the mesh density (68 elements), CB, zone z2 at 40 %."""
    return _damped(case_text(layout, nel=68, method="cb", extra=extra) + truth_damage(), layout)


def write_case(d, layout: str, duration: float = 2.0, seed: int = 5, bayes: str = "",
               oversample: int = 8) -> Path:
    """Truth record ``d/rec.csv`` (68 elements, zone z2 at 40 %, exact modal engine, 1 %
    noise, random force 5-450 Hz on a grid ``oversample`` times the record's rate, linear
    between its points) and the model file ``d/m.toml``; returns the model path."""
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True)
    truth_record(d / "rec.csv", truth_text(layout),
                 duration=duration, seed=seed, band=(5.0, 450.0), n_modes=30,
                 oversample=oversample)
    (d / "m.toml").write_text(case_text(layout, params=FAMILY + zone_params()) + bayes)
    return d / "m.toml"
