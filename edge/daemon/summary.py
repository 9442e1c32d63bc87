"""The one-line summary the daemon logs when it stops (from its last ``health`` payload)."""

from __future__ import annotations


def run_summary(h: dict) -> str:
    """``run summary: N samples, ... missed conversions, ... lost, ... latency p99 ...; MQTT
    ...; recorder ...`` from a health payload (``edge.daemon.loop.Daemon.health``;
    docs/daemon.md "MQTT topics"). Every loss counter is named: conversions the ADC
    overwrote unread, samples lost at the ring, estimates the publisher dropped, samples the
    recorder dropped."""
    lat = h.get("latency_us") or {}
    p99 = f"{lat['p99']:.0f} us" if lat.get("p99") is not None else "-"
    out = (f"run summary: {h.get('samples', 0)} samples, {h.get('estimates', 0)} estimates, "
           f"{h.get('missed_conversions', 0)} missed conversions, "
           f"{h.get('lost_samples', 0)} lost, {h.get('overruns', 0)} overruns, "
           f"{h.get('bad_samples', 0)} bad samples, {h.get('estimator_resets', 0)} estimator "
           f"resets, latency p99 {p99} (from {h.get('latency_from', '?')})")
    p = h.get("publish")
    if p:
        out += (f"; MQTT {p.get('published', 0)} messages published, "
                f"{p.get('drops_samples', 0)} samples dropped, {p.get('unsent_samples', 0)} "
                f"unsent")
    r = h.get("recorder")
    if r:
        out += (f"; recorder {r.get('files', 0)} files, {r.get('bytes', 0)} bytes, "
                f"{r.get('dropped_samples', 0)} samples dropped")
    return out
