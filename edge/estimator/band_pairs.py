"""The model check's band pairs in words: what a pair whose power ratio is beyond its
threshold says (``kf_band_*``; offline/smoother/model_check.py designs them)."""

from __future__ import annotations

#: how the model check's reason for the load-shape pair begins (``vsense-edge replay``
#: repeats it)
SHAPE_REASON = "innovation power in the load's band lopsided"


def band_reason(band_hz, b: int, r: float, shape: bool) -> str:
    """The model check's words for band pair ``b`` whose power ratio ``r`` is beyond its
    threshold: a resonance pair, or the load-shape pair (``shape``)."""
    if not shape:
        return (f"innovation power around the resonance at {float(band_hz[b, 1]):.1f} Hz "
                f"lopsided (ratio {r:.3g}): the structure's resonance has moved")
    lo, mid, hi = float(band_hz[b, 0]), float(band_hz[b, 1]), float(band_hz[b + 1, 1])
    return (f"{SHAPE_REASON} ({lo:.3g}-{mid:.3g} Hz against "
            f"{mid:.3g}-{hi:.3g} Hz: ratio {r:.3g}): the load's spectrum has another shape "
            f"than the model's (more power {'low' if r > 1 else 'high'} in the band), or the "
            f"sensor noise differs; the level tracker cannot take that up, so the stated std "
            f"is not to be trusted: learn the load from a record (build --record)")
