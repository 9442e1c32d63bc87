"""S-N curve presets (edge/fatigue/sn_curve.py) against numbers computed by hand from the
standards' tables, and the damage helpers (edge/fatigue/damage.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from edge.fatigue import SNCurve, curve, equivalent_range, miner_damage
from edge.fatigue.sn_curve import DNV_AIR, SNCurveError, curve_names

# EN 1993-1-9:2005 Figure 7.1, the table beside the curves: category -> (Δσ_D at 5e6,
# Δσ_L at 1e8), printed rounded to whole MPa
EN_FIG_7_1 = {160: (117, 64), 140: (103, 56), 125: (92, 51), 112: (83, 45), 100: (74, 40),
              90: (66, 36), 80: (59, 32), 71: (52, 29), 63: (46, 25), 56: (41, 23),
              50: (37, 20), 45: (33, 18), 40: (29, 16), 36: (26, 14)}
# DNV-RP-C203 Table 2-1, column "fatigue limit at 1e7 cycles" [MPa]
DNV_LIMIT_1E7 = {"B1": 106.97, "B2": 93.59, "C": 73.10, "C1": 65.50, "C2": 58.48,
                 "D": 52.63, "E": 46.78, "F": 41.52, "F1": 36.84, "F3": 32.75, "G": 29.24,
                 "W1": 26.32, "W2": 23.39, "W3": 21.05}


def test_en1993_category_71_by_hand():
    c = curve("EN-71")
    # eq. (7.1): N = 2e6 (71/100)^3 = 2e6 * 0.357911 = 715 822 (m = 3 above the knee)
    np.testing.assert_allclose(c.cycles(100.0), 715_822.0, rtol=1e-6)
    # knee Δσ_D = (2/5)^(1/3) 71 = 52.313; cut-off Δσ_L = (5/100)^(1/5) Δσ_D = 28.734
    np.testing.assert_allclose(c.knee_stress, 52.3132, rtol=1e-5)
    np.testing.assert_allclose(c.cutoff_stress, 28.7344, rtol=1e-5)
    # eq. (7.2), m = 5 between: N(40) = 5e6 (52.3132/40)^5 = 1.91306e7
    np.testing.assert_allclose(c.cycles(40.0), 1.91306e7, rtol=1e-5)
    # continuous at the knee (5e6) and the cut-off (1e8), no damage below
    np.testing.assert_allclose(c.cycles(c.knee_stress), 5e6, rtol=1e-12)
    np.testing.assert_allclose(c.cycles(c.cutoff_stress * (1 + 1e-12)), 1e8, rtol=1e-9)
    assert c.cycles(28.0) == np.inf and c.cycles(0.0) == np.inf


@pytest.mark.parametrize("cat", sorted(EN_FIG_7_1))
def test_en1993_corners_match_figure_7_1(cat):
    c = curve(f"EN-{cat}")
    d, lim = EN_FIG_7_1[cat]
    # the figure prints whole MPa (rounded or truncated): within 1 MPa
    assert abs(c.knee_stress - d) < 1.0 and abs(c.cutoff_stress - lim) < 1.0
    np.testing.assert_allclose(c.cycles(float(cat)), 2e6, rtol=1e-12)


@pytest.mark.parametrize("detail", sorted(DNV_AIR))
def test_dnv_tables_are_consistent(detail):
    air, cp = curve(f"DNV-{detail}-air"), curve(f"DNV-{detail}-cp")
    # Table 2-1's fatigue-limit column is the range at the knee (1e7): to its 2 decimals
    # (a1 rounded to 3 decimals in log10: 0.05 % in stress)
    assert abs(air.knee_stress - DNV_LIMIT_1E7[detail]) < 0.02
    # both branches meet at the knee to the tables' rounding (0.01 in log10 N)
    for c, n_knee in ((air, 1e7), (cp, 1e6)):
        assert abs(c.log_a2 - c.m2 * math.log10(c.knee_stress) - math.log10(n_knee)) < 0.01
    assert air.cutoff_stress == cp.cutoff_stress == 0.0   # no cut-off in the RP


def test_dnv_d_by_hand():
    # Table 2-1 D: log a1 = 12.164, m1 = 3: N(100) = 10^(12.164 - 6) = 1.4588e6
    np.testing.assert_allclose(curve("DNV-D-air").cycles(100.0), 10 ** 6.164, rtol=1e-12)
    # Table 2-2 D: log a1 = 11.764 (knee at 1e6, 83.4 MPa); below it log a2 = 15.606, m = 5:
    # N(30) = 10^(15.606 - 5 log10 30) = 10^8.22044
    cp = curve("DNV-D-cp")
    np.testing.assert_allclose(cp.cycles(100.0), 10 ** 5.764, rtol=1e-12)
    np.testing.assert_allclose(cp.cycles(30.0), 10 ** (15.606 - 5 * math.log10(30)),
                               rtol=1e-12)


def test_user_curves_and_errors():
    u = SNCurve.from_dict({"m1": 3, "S_ref": 71, "N_ref": 2e6, "knee_cycles": 5e6, "m2": 5,
                           "cutoff_cycles": 1e8})
    ref = curve("EN-71")
    S = np.array([20.0, 30.0, 45.0, 80.0, 300.0])
    np.testing.assert_allclose(u.cycles(S), ref.cycles(S), rtol=1e-12)
    one = SNCurve.from_dict({"m1": 4, "log_a1": 15.0})
    np.testing.assert_allclose(one.cycles(100.0), 1e7, rtol=1e-12)  # 10^(15 - 4*2)
    with pytest.raises(SNCurveError, match="missing"):
        SNCurve.from_dict({"m1": 3})
    with pytest.raises(SNCurveError, match="unknown keys"):
        SNCurve.from_dict({"m1": 3, "log_a1": 12, "slope": 5})
    with pytest.raises(SNCurveError, match="knee_cycles"):
        SNCurve.from_dict({"m1": 3, "log_a1": 12, "m2": 5})
    with pytest.raises(SNCurveError, match="unknown S-N curve"):
        curve("EN-72")
    assert len(curve_names()) == 14 + 28


def test_miner_and_equivalent_range_by_hand():
    c = SNCurve.from_dict({"m1": 3, "log_a1": 12.0})
    # 1000 cycles of 100 MPa on N = 1e12 S^-3 (1e6 cycles): D = 1e-3; half cycles count half
    assert math.isclose(miner_damage([100.0], [1000.0], c), 1e-3, rel_tol=1e-12)
    assert math.isclose(miner_damage([50e6], [2.0], c, scale=1e-6), 2 * 0.125e-6,
                        rel_tol=1e-12)
    # S_eq of {1 x 100, 7 x 50} with m = 3 over 8 cycles: (1e6 + 7 * 1.25e5) / 8 = 234375
    assert math.isclose(equivalent_range([100.0, 50.0], [1, 7], 3.0), 234375 ** (1 / 3),
                        rel_tol=1e-12)
