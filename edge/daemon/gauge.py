"""Strain-gauge channels of the daemon: the bridge's sensitivity, the tare at start and the
check that the expected strain fits the converter's input range (docs/strain-gauges.md). The
tare is :mod:`edge.daemon.tare`; this module imports no NumPy (the configuration reads it before
``vsense-edge run`` has asked for single-threaded math).

A Wheatstone bridge excited with ``V_ex`` gives, with gauge factor ``GF`` (``dR / R = GF eps``)
and ``k`` active arms of equal strain magnitude,

    V_out / V_ex = k GF eps / 4          (k = 1 quarter, 2 half, 4 full bridge)

linearised: a quarter bridge's exact ratio is ``GF eps / (4 + 2 GF eps)``, so the linear
formula reads ``eps`` high by ``GF eps / 2`` relative (0.1 % at 1000 microstrain, GF 2); the
half and full bridges (opposite arms strained in opposite sense) are linear. The channel's
sensitivity in volts per unit of the bundle's channel (``strain`` or ``microstrain``) is
``k GF V_ex / 4`` times the strain per unit (1 or 1e-6). The ADS1256 reports input-referred
volts (its codes scaled by ``2 V_ref / PGA``), so the PGA sets the input range
``+-2 V_ref / PGA``, not the sensitivity.
"""

from __future__ import annotations


#: bridge -> k / 4: the fraction of ``GF eps V_ex`` at the bridge's output (module docstring)
BRIDGE_FACTOR = {"quarter": 0.25, "half": 0.5, "full": 1.0}
#: channel unit -> strain per unit
STRAIN_UNITS = {"strain": 1.0, "microstrain": 1e-6}
#: expected peak = this many times the bundle's channel std (a Gaussian signal exceeds 4
#: sigma in 6e-5 of its samples) when the channel declares no ``range``
PEAK_FACTOR = 4.0


def bridge_sensitivity(bridge: str, gauge_factor: float, excitation_v: float,
                       unit: str) -> float:
    """Volts per ``unit`` at the converter's input: ``V_out = (k / 4) GF V_ex eps``."""
    return BRIDGE_FACTOR[bridge] * gauge_factor * excitation_v * STRAIN_UNITS[unit]


def resolve_bridges(channels: list, raw: list, where: str) -> None:
    """Set ``sensitivity`` of each channel with a ``bridge`` from its gauge factor,
    excitation and unit (in place); ``ValueError`` naming ``where``, the channel and the key:
    a gauge factor or excitation <= 0, a unit that is not a strain, a ``sensitivity`` given
    too (one or the other), gauge keys without a bridge."""
    for i, (c, r) in enumerate(zip(channels, raw)):
        w = f"{where} [[channels]] #{i} ({c['name']})"
        gauge_keys = [k for k in ("gauge_factor", "excitation_v") if k in r]
        if not c["bridge"]:
            if gauge_keys:
                raise ValueError(f"{w} {gauge_keys[0]}: only for a strain-gauge channel "
                                 "(set bridge = \"quarter\", \"half\" or \"full\")")
            continue
        if not c["gauge_factor"] > 0:
            raise ValueError(f"{w} gauge_factor: must be > 0, got {c['gauge_factor']:g} (a "
                             "metal foil gauge's is about 2; see the gauge's data sheet)")
        if not c["excitation_v"] > 0:
            raise ValueError(f"{w} excitation_v: must be > 0 V, got {c['excitation_v']:g}")
        if c["unit"] not in STRAIN_UNITS:
            raise ValueError(f"{w} unit: a bridge channel reads strain: unit = \"strain\" or "
                             f"\"microstrain\" (as the bundle's channel), got {c['unit']!r}")
        if "sensitivity" in r:
            raise ValueError(f"{w} sensitivity: a bridge channel's sensitivity follows from "
                             "bridge, gauge_factor and excitation_v; remove sensitivity")
        c["sensitivity"] = bridge_sensitivity(c["bridge"], c["gauge_factor"],
                                              c["excitation_v"], c["unit"])


def range_check(channels: list, bundle, vref: float, pga: int) -> list[str]:
    """The expected peak of each gauge channel (``bridge`` set or ``range`` > 0) against the
    converter's input range ``2 vref / pga``: ``ValueError`` with the numbers when it does not
    fit; warnings (returned) when no peak is known or a higher PGA would still fit.

    The peak is the channel's ``range`` or :data:`PEAK_FACTOR` x the channel's std under the
    bundle's declared load (``meta["channel_std"]``, written by ``vsense-offline build``);
    the bridge's own imbalance (removed by the tare) is not included."""
    full = 2.0 * vref / pga
    std = (bundle.meta or {}).get("channel_std", {})
    kinds = {ch.name: (ch.kind, ch.unit) for ch in bundle.channels}
    warn = []
    for i, c in enumerate(channels):
        if not (c["bridge"] or c["range"] > 0):
            continue
        w = f"[[channels]] #{i} ({c['name']})"
        kind, unit = kinds.get(c["name"], (None, None))
        if c["bridge"] and kind != "strain":
            raise ValueError(f"{w} bridge: the bundle's channel {c['name']!r} is "
                             f"{kind or 'absent'}, not a strain gauge")
        if c["bridge"] and unit != c["unit"]:
            raise ValueError(f"{w} unit: {c['unit']!r}, but the bundle's estimator reads "
                             f"this gauge in {unit!r}")
        if c["range"] > 0:
            peak, src = float(c["range"]), "its range"
        elif c["name"] in std:
            peak = PEAK_FACTOR * float(std[c["name"]])
            src = f"{PEAK_FACTOR:g} x the bundle's std {float(std[c['name']]):.4g}"
        else:
            warn.append(f"{w}: no expected range (set range, or rebuild the bundle: it "
                        "states no channel std); the PGA range is not checked")
            continue
        v = abs(c["sensitivity"]) * peak
        if v > full:
            fit = [g for g in (1, 2, 4, 8, 16, 32, 64) if abs(c["sensitivity"]) * peak
                   <= 2.0 * vref / g]
            raise ValueError(f"{w} range: expected peak {peak:.4g} {c['unit']} ({src}) is "
                             f"{v:.4g} V at the input, beyond the ADC's +-{full:.4g} V "
                             f"(2 vref / pga = 2 x {vref:g} / {pga}); "
                             + (f"set [adc] pga <= {max(fit)}" if fit else
                                "lower excitation_v or use a less sensitive bridge"))
        better = [g for g in (1, 2, 4, 8, 16, 32, 64) if g > pga and v <= 2.0 * vref / g]
        if better:
            warn.append(f"{w}: expected peak {v:.4g} V uses {100 * v / full:.2g} % of the "
                        f"+-{full:.4g} V input range; [adc] pga = {max(better)} would still "
                        "fit (finer resolution)")
    return warn


__all__ = ["BRIDGE_FACTOR", "STRAIN_UNITS", "PEAK_FACTOR", "bridge_sensitivity",
           "resolve_bridges", "range_check"]
