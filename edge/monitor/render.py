"""The single-device terminal view (plain text; ANSI clearing is the caller's)."""

from __future__ import annotations

import time

from edge.monitor.payload import clean
from edge.monitor.view import DeviceView, _fmt, fmt_pm, fmt_ratio


def render(view: DeviceView, device: str, broker: str, now: float | None = None,
           connected: bool = True, csv_path: str | None = None) -> str:
    """The text of one screen (no escape codes: control characters a payload carried are
    shown as ``?``, :func:`edge.monitor.payload.clean`)."""
    now = time.monotonic() if now is None else now
    lines = [f"vsense monitor — device {device} @ {broker}"
             + ("" if connected else "   [broker connection lost, reconnecting]")]
    lines += _device_lines(view, now)
    lines.append("")
    lines += _estimate_lines(view)
    lines.append("")
    lines += _health_lines(view)
    for name, f in sorted(view.fatigue.items()):
        lines.append(_fatigue_line(name, f))
    if csv_path:
        lines.append("")
        lines.append(f"recording estimates to {csv_path}")
    return clean("\n".join(lines), None)


def _device_lines(view: DeviceView, now: float) -> list[str]:
    """State, bundle, channels and delay, the rate received and the sample counts."""
    st, meta = view.status, view.meta
    state = (st or {}).get("state", "?")
    extra = ""
    if st and st.get("faulty_channels"):
        extra = f"  faulty: {', '.join(st['faulty_channels'])}"
    if st and "exit_code" in st:
        extra += f"  exit code {st['exit_code']}"
    if st and st.get("error"):
        extra += f"  error: {st['error']}"
    lines = [f"state     {state}{extra}"]
    if meta:
        ch = ", ".join(f"{c['name']} [{c.get('unit', '')}]" for c in meta.get("channels", []))
        lines.append(f"bundle    {meta.get('bundle_id', '?')}  (hash "
                     f"{str(meta.get('bundle_hash', ''))[:12]})")
        lines.append(f"channels  {ch}")
        lines.append(f"delay     {meta.get('delay_samples', '?')} samples "
                     f"({1e3 * float(meta.get('delay_s', 0.0)):.3g} ms); payload "
                     f"{meta.get('format', '?')}, batch {meta.get('batch', '?')}")
    else:
        lines.append("bundle    (no meta received yet)")
    rate = view.measured_rate(now)
    nominal = meta.get("rate") if meta else None
    lines.append("rate      " + (f"{rate:,.1f} samples/s received" if rate else "—")
                 + (f"  (nominal {nominal:g})" if nominal else ""))
    lines.append(f"received  {view.n_samples:,} samples, last seq {view.last_seq}, "
                 f"{view.n_duplicates} duplicates, {view.gaps} gaps in seq"
                 + (f", {view.n_bad_payloads} bad payloads" if view.n_bad_payloads else ""))
    if view.last_bad:
        lines.append(f"          last: {view.last_bad}")
    return lines


def _estimate_lines(view: DeviceView) -> list[str]:
    """The latest estimate of each force and output, with its stated std when there is one."""
    if view.last_values is None:
        return ["latest estimate: none yet"]
    tdev = view.last_t_ns / 1e9 if view.last_t_ns is not None else float("nan")
    lines = [f"latest estimate (seq {view.last_seq}, t = {tdev:.3f} s, flags "
             f"{view.last_flags})"]
    forces = {f["name"] for f in (view.meta or {}).get("forces", [])}
    std = view.last_std if view.last_std is not None else [None] * len(view.columns)
    for name, unit, x, sd in zip(view.columns, view.units(), view.last_values, std):
        kind = "force " if name in forces else "output"
        txt = _fmt(float(x), unit) if sd is None else fmt_pm(float(x), float(sd), unit)
        lines.append(f"  {kind}  {name:<14s} {txt:>22s}")
    return lines


def _health_lines(view: DeviceView) -> list[str]:
    """The last health message: counts, latency, loop, publishing, MQTT, recorder, model
    check and process."""
    h = view.health
    if not h:
        return ["health    (none received yet)"]
    lat = h.get("latency_us") or {}

    def us(k):
        v = lat.get(k)
        return "—" if v is None else f"{v:,.0f}"

    lines = [f"health    (#{view.n_health}) samples {h.get('samples', 0):,}, "
             f"estimates {h.get('estimates', 0):,}, uptime {h.get('uptime_s', 0):.1f} s",
             f"latency   p50 {us('p50')} / p99 {us('p99')} / p99.9 {us('p999')} / "
             f"max {us('max')} us  (n {lat.get('n', 0)})",
             f"loop      missed conversions {h.get('missed_conversions', 0)}, "
             f"overruns {h.get('overruns', 0)}, lost samples "
             f"{h.get('lost_samples', 0)}, ring {h.get('ring_depth', 0)}/"
             f"{h.get('ring_capacity', '?')}, bad samples {h.get('bad_samples', 0)}, "
             f"resets {h.get('estimator_resets', 0)}"]
    p = h.get("publish") or {}
    if p:
        lines.append(f"publish   queue {p.get('queue_depth', 0)}, published "
                     f"{p.get('published', 0):,}, dropped {p.get('drops_messages', 0)} msgs"
                     f" / {p.get('drops_samples', 0)} samples")
    m = h.get("mqtt")
    if m:
        lines.append(_mqtt_line(m))
    r = h.get("recorder") or {}
    if r:
        lines.append(f"recorder  queue {r.get('queue_depth', 0)}, files {r.get('files', 0)},"
                     f" {r.get('bytes', 0) / 1e6:.2f} MB, write errors "
                     f"{r.get('write_errors', 0)}")
    if h.get("model_check"):
        lines += _model_check_lines(h["model_check"])
    cpu = h.get("cpu_percent")
    temp = h.get("cpu_temp_c")
    lines.append(f"process   CPU {cpu if cpu is not None else '—'} %, RSS "
                 f"{h.get('rss_mb', '—')} MB, CPU temp "
                 f"{'—' if temp is None else f'{temp:.1f} °C'}")
    return lines


def _model_check_lines(mc: dict) -> list[str]:
    """The model check: NIS over its expected value, the bands, reasons, the load's level."""
    ratio = mc.get("ratio")
    bands = ", ".join(f"{b['f_hz'][1]:g} Hz {b['ratio']:.2f}" for b in mc.get("bands", [])
                      if b.get("ratio") is not None and len(b.get("f_hz", ())) > 1)
    # NIS over its expected value (the window's degrees of freedom): 1 on average
    lines = [f"model     {'SUSPECT' if mc.get('suspect') else 'ok'}: NIS "
             f"{fmt_ratio(ratio)} x its expected value over "
             f"{mc.get('window_s', 0):g} s" + (f"; below/above {bands}" if bands else "")]
    for reason in mc.get("reasons") or []:
        lines.append(f"          {reason}")
    level = mc.get("load_level")
    if level is not None:
        lines.append(f"load      level {level:.3g} x the designed force RMS "
                     f"(followed from the innovations)")
    return lines


def _fatigue_line(name: str, f: dict) -> str:
    """One hotspot's retained fatigue summary (docs/fatigue.md)."""
    def g(k):
        v = f.get(k)
        return "—" if not isinstance(v, (int, float)) else f"{v:.4g}"

    def n(k):  # a count with thousands separators
        v = f.get(k)
        return "—" if not isinstance(v, (int, float)) or v != v else f"{v:,.0f}"

    warn = ""
    if isinstance(f.get("overflow"), (int, float)) and f["overflow"]:
        warn = f", residue overflow {g('overflow')}"
    return (f"fatigue   {name} ({f.get('curve', '?')}): D = {g('damage')} (with the residue "
            f"{g('damage_with_residue')}), {g('cycles')} cycles, residue {f.get('residue', '?')}"
            f", {n('samples')} samples{warn}")


# ---------------------------------------------------------------------------- CSV


def _mqtt_line(m: dict) -> str:
    """The device's MQTT health: protocol, topics the broker denies (v5 PUBACK/SUBACK), what
    no subscriber took and what was sent again (edge.daemon.mqttv5)."""
    proto = m.get("protocol", "?")
    denied = m.get("denied")
    if not m.get("denials_visible", proto == "5") and not denied:
        what = "a denied topic cannot be seen under 3.1.1"
    elif denied:
        what = "DENIED by the broker: " + ", ".join(f"{t} ({n}x)" for t, n in
                                                    sorted(denied.items()))
    else:
        what = "no topic denied"
    extra = (f"; no subscriber for {m['no_subscribers']:,} msgs, sent again "
             f"{m.get('resent', 0):,}" if m.get("no_subscribers") else "")
    return f"mqtt      MQTT {proto}, {what}{extra}"
