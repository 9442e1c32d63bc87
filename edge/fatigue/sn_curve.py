"""S-N curves (Basquin, up to two slopes, a cut-off): the cycles to failure of a stress range.

A curve is ``log10 N = log10 a1 - m1 log10 S`` for ``S >= S_knee`` and ``log10 N = log10 a2 -
m2 log10 S`` for ``S_cut <= S < S_knee``; below the cut-off ``S_cut`` a range does no damage
(N infinite). S is the stress range in MPa. A one-slope curve has ``S_knee = 0``.

Presets (the numbers are the standards', transcribed; tests/test_fatigue_sn.py recomputes
them by hand):

* **EN 1993-1-9:2005** (Eurocode 3, fatigue), section 7.1, eq. (7.1)-(7.3) and Figure 7.1,
  normal stress ranges: detail category ``Δσ_C`` is the range at ``N_C = 2e6`` cycles, slope
  ``m = 3`` down to the constant-amplitude fatigue limit ``Δσ_D = (2/5)^(1/3) Δσ_C`` at
  ``5e6`` cycles, then ``m = 5`` down to the cut-off ``Δσ_L = (5/100)^(1/5) Δσ_D`` at ``1e8``
  cycles. Categories 160, 140, 125, 112, 100, 90, 80, 71, 63, 56, 50, 45, 40, 36 (Table 8.1
  to 8.10 assign them to details; a category marked ``36*`` there is the 36 curve here).
  Names ``EN-71`` etc. Partial factors (``γ_Mf``) are not applied: divide ``Δσ_C`` yourself
  with a user curve.
* **DNV-RP-C203** (Fatigue design of offshore steel structures, 2016 edition and later),
  Table 2-1 "S-N curves in air" (knee at ``1e7`` cycles) and Table 2-2 "S-N curves in
  seawater with cathodic protection" (knee at ``1e6`` cycles): ``m1``, ``log a1``, and
  ``m2 = 5``, ``log a2`` as tabulated, no cut-off (the RP's second branch runs on).
  Curves B1, B2, C, C1, C2, D, E, F, F1, F3, G, W1, W2, W3. Names ``DNV-D-air``,
  ``DNV-D-cp``. The thickness correction ``(t/t_ref)^k`` and the SCF are not applied: scale
  the hotspot's stress or use a user curve.

User curves: :meth:`SNCurve.from_dict` (``m1`` with ``log_a1`` or a reference point
``S_ref, N_ref``; optional ``knee_cycles`` and ``m2``; optional ``cutoff_cycles``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: EN 1993-1-9:2005 Figure 7.1, detail categories (MPa at 2e6 cycles)
EN_CATEGORIES = (160, 140, 125, 112, 100, 90, 80, 71, 63, 56, 50, 45, 40, 36)
EN_N_C, EN_N_D, EN_N_L = 2e6, 5e6, 1e8

#: DNV-RP-C203 Table 2-1 (in air): name -> (m1, log a1 for N <= 1e7, log a2 for N > 1e7, m2=5)
DNV_AIR = {
    "B1": (4.0, 15.117, 17.146), "B2": (4.0, 14.885, 16.856),
    "C": (3.0, 12.592, 16.320), "C1": (3.0, 12.449, 16.081), "C2": (3.0, 12.301, 15.835),
    "D": (3.0, 12.164, 15.606), "E": (3.0, 12.010, 15.350), "F": (3.0, 11.855, 15.091),
    "F1": (3.0, 11.699, 14.832), "F3": (3.0, 11.546, 14.576), "G": (3.0, 11.398, 14.330),
    "W1": (3.0, 11.261, 14.101), "W2": (3.0, 11.107, 13.845), "W3": (3.0, 10.970, 13.617),
}
#: DNV-RP-C203 Table 2-2 (seawater, cathodic protection): (m1, log a1 for N <= 1e6, log a2)
DNV_CP = {
    "B1": (4.0, 14.917, 17.146), "B2": (4.0, 14.685, 16.856),
    "C": (3.0, 12.192, 16.320), "C1": (3.0, 12.049, 16.081), "C2": (3.0, 11.901, 15.835),
    "D": (3.0, 11.764, 15.606), "E": (3.0, 11.610, 15.350), "F": (3.0, 11.455, 15.091),
    "F1": (3.0, 11.299, 14.832), "F3": (3.0, 11.146, 14.576), "G": (3.0, 10.998, 14.330),
    "W1": (3.0, 10.861, 14.101), "W2": (3.0, 10.707, 13.845), "W3": (3.0, 10.570, 13.617),
}
DNV_KNEE = {"air": 1e7, "cp": 1e6}

#: layout of one row of the kernel's curve parameters (``SNCurve.params``)
P_SCALE, P_LOGA1, P_M1, P_SKNEE, P_LOGA2, P_M2, P_SCUT = range(7)
N_PARAMS = 7


class SNCurveError(ValueError):
    """An unknown preset or an inconsistent user curve."""


@dataclass(frozen=True)
class SNCurve:
    """Basquin curve in MPa; ``m2``/``log_a2`` are ``None`` for one slope."""

    name: str
    m1: float
    log_a1: float
    knee_cycles: float | None = None
    m2: float | None = None
    log_a2: float | None = None
    cutoff_cycles: float | None = None
    source: str = "user"

    def __post_init__(self):
        for k in ("m1", "log_a1"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float)) and math.isfinite(v)):
                raise SNCurveError(f"S-N curve {self.name}: {k} must be a finite number")
        if self.m1 <= 0 or (self.m2 is not None and self.m2 <= 0):
            raise SNCurveError(f"S-N curve {self.name}: slopes must be > 0")
        if (self.m2 is None) != (self.knee_cycles is None):
            raise SNCurveError(f"S-N curve {self.name}: a second slope needs knee_cycles "
                               "and knee_cycles a second slope")
        if self.m2 is not None and self.log_a2 is None:
            s_knee = 10.0 ** ((self.log_a1 - math.log10(self.knee_cycles)) / self.m1)
            object.__setattr__(self, "log_a2",
                               math.log10(self.knee_cycles) + self.m2 * math.log10(s_knee))

    # ---- stress ranges of the corners
    @property
    def knee_stress(self) -> float:
        """Range at the knee [MPa] (0 for one slope)."""
        if self.knee_cycles is None:
            return 0.0
        return 10.0 ** ((self.log_a1 - math.log10(self.knee_cycles)) / self.m1)

    @property
    def cutoff_stress(self) -> float:
        """Range below which a cycle does no damage [MPa] (0: no cut-off)."""
        if self.cutoff_cycles is None:
            return 0.0
        if self.m2 is None:
            return 10.0 ** ((self.log_a1 - math.log10(self.cutoff_cycles)) / self.m1)
        return 10.0 ** ((self.log_a2 - math.log10(self.cutoff_cycles)) / self.m2)

    def cycles(self, S) -> np.ndarray:
        """Cycles to failure at stress range ``S`` [MPa] (inf below the cut-off or at 0)."""
        S = np.asarray(S, dtype=np.float64)
        with np.errstate(divide="ignore"):
            lg = np.log10(np.where(S > 0, S, 1.0))
            logn = self.log_a1 - self.m1 * lg
            if self.m2 is not None:
                logn = np.where(S >= self.knee_stress, logn, self.log_a2 - self.m2 * lg)
        dead = (S <= 0) | (S < self.cutoff_stress)
        return np.where(dead, np.inf, 10.0 ** logn)

    def params(self, scale: float = 1.0) -> np.ndarray:
        """One row for the compiled counter: ``scale`` turns the counted signal into MPa."""
        p = np.zeros(N_PARAMS)
        p[P_SCALE] = scale
        p[P_LOGA1], p[P_M1] = self.log_a1, self.m1
        p[P_SKNEE] = self.knee_stress
        p[P_LOGA2] = self.log_a2 if self.m2 is not None else self.log_a1
        p[P_M2] = self.m2 if self.m2 is not None else self.m1
        p[P_SCUT] = self.cutoff_stress
        return p

    # ---- constructors
    @classmethod
    def en1993(cls, category: float) -> SNCurve:
        """EN 1993-1-9 eq. (7.1)-(7.3): slope 3 to 5e6, slope 5 to the cut-off at 1e8."""
        log_a1 = math.log10(EN_N_C) + 3.0 * math.log10(category)
        return cls(name=f"EN-{category:g}", m1=3.0, log_a1=log_a1, knee_cycles=EN_N_D,
                   m2=5.0, cutoff_cycles=EN_N_L,
                   source=f"EN 1993-1-9:2005 Figure 7.1, detail category {category:g}")

    @classmethod
    def dnv(cls, detail: str, environment: str = "air") -> SNCurve:
        """DNV-RP-C203 Table 2-1 (``air``) or Table 2-2 (``cp``: seawater, cathodic
        protection)."""
        table = {"air": DNV_AIR, "cp": DNV_CP}.get(environment)
        if table is None or detail not in table:
            raise SNCurveError(f"no DNV-RP-C203 curve {detail!r} in {environment!r}; known: "
                               f"{', '.join(DNV_AIR)} in air or cp")
        m1, la1, la2 = table[detail]
        tab = "Table 2-1 (in air)" if environment == "air" else \
            "Table 2-2 (seawater with cathodic protection)"
        return cls(name=f"DNV-{detail}-{environment}", m1=m1, log_a1=la1,
                   knee_cycles=DNV_KNEE[environment], m2=5.0, log_a2=la2,
                   source=f"DNV-RP-C203 {tab}, curve {detail}")

    @classmethod
    def from_dict(cls, d: dict, name: str = "user") -> SNCurve:
        """A user curve: ``{"m1": 3, "log_a1": 12.0}`` or ``{"m1": 3, "S_ref": 71,
        "N_ref": 2e6}``, optionally ``"knee_cycles"`` with ``"m2"``, ``"cutoff_cycles"``."""
        known = {"m1", "log_a1", "S_ref", "N_ref", "knee_cycles", "m2", "cutoff_cycles",
                 "name"}
        extra = sorted(set(d) - known)
        if extra:
            raise SNCurveError(f"S-N curve {name}: unknown keys {extra}; known {sorted(known)}")
        try:
            m1 = float(d["m1"])
            if "log_a1" in d:
                log_a1 = float(d["log_a1"])
            else:
                log_a1 = math.log10(float(d["N_ref"])) + m1 * math.log10(float(d["S_ref"]))
        except KeyError as exc:
            raise SNCurveError(f"S-N curve {name}: missing {exc.args[0]!r} (m1 and log_a1, "
                               "or m1, S_ref and N_ref)") from None
        except (TypeError, ValueError) as exc:
            raise SNCurveError(f"S-N curve {name}: {exc}") from None

        def opt(k):
            return None if d.get(k) is None else float(d[k])

        return cls(name=str(d.get("name", name)), m1=m1, log_a1=log_a1,
                   knee_cycles=opt("knee_cycles"), m2=opt("m2"),
                   cutoff_cycles=opt("cutoff_cycles"), source="user")


def curve_names() -> list[str]:
    """Every preset name."""
    return ([f"EN-{c}" for c in EN_CATEGORIES]
            + [f"DNV-{k}-{env}" for env in ("air", "cp") for k in DNV_AIR])


def curve(name: str) -> SNCurve:
    """A preset by name: ``EN-71``, ``DNV-D-air``, ``DNV-F3-cp``."""
    if name.startswith("EN-"):
        try:
            cat = float(name[3:].rstrip("*"))
        except ValueError:
            cat = -1.0
        if cat in EN_CATEGORIES:
            return SNCurve.en1993(cat)
    elif name.startswith("DNV-") and name.count("-") == 2:
        _, detail, env = name.split("-")
        if env in DNV_KNEE and detail in DNV_AIR:
            return SNCurve.dnv(detail, env)
    raise SNCurveError(f"unknown S-N curve {name!r}; presets: {', '.join(curve_names())}")
