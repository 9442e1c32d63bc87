// vsense dashboard: the device view's cards (state, bundle and estimator, health, model
// check) and the DOM helpers shared with dashboard.js. Every value comes from a device's
// payload: shown through the helpers (text, never HTML; "—" for what is not a number).
"use strict";

const $ = (id) => document.getElementById(id);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};
const fin = (x) => typeof x === "number" && Number.isFinite(x);
const num = (x, d = 1) => (fin(x) ? x.toFixed(d) : "—");
// 3 (or d) significant digits; an exponent only from 1e5 or below 1e-3
const sig = (x, d = 3) => (!fin(x) ? "—" : x !== 0 && (Math.abs(x) >= 1e5 || Math.abs(x) < 1e-3)
  ? x.toExponential(d - 1) : String(Number(x.toPrecision(d))));
const int = (x) => (fin(x) ? Math.round(x).toLocaleString("en") : "—");
const str = (x) => (x === undefined || x === null ? "—" : String(x));

function kv(parent, k, v, cls) {
  const row = el("div", "kv" + (cls ? " " + cls : ""));
  row.appendChild(el("span", "k", k));
  row.appendChild(el("span", "v", v));
  parent.appendChild(row);
}

function units(meta) {
  const u = {};
  if (!meta) return u;
  for (const key of ["forces", "outputs", "channels"]) {
    if (Array.isArray(meta[key])) for (const f of meta[key]) if (f && typeof f.name === "string") u[f.name] = str(f.unit);
  }
  return u;
}

function updateCards(d) {
  const st = $("card-state"); st.replaceChildren(el("h3", "", "State"));
  const s = d.status || {};
  kv(st, "state", d.state(), "st-" + d.state().replace(/[^a-z_]/g, ""));
  if (Array.isArray(s.faulty_channels) && s.faulty_channels.length) kv(st, "faulty channels", s.faulty_channels.join(", "), "bad");
  if (s.reason !== undefined) kv(st, "reason", str(s.reason), "bad");
  if (s.error !== undefined) kv(st, "error", str(s.error), "bad");
  if (s.exit_code !== undefined) kv(st, "exit code", str(s.exit_code));
  kv(st, "last seen", d.lastSeen ? new Date(d.lastSeen).toLocaleTimeString() : "—");
  kv(st, "samples", `${int(d.samples)} (dup ${d.duplicates}, gaps ${d.gaps}, flagged ${d.flagged})`);
  kv(st, "bad payloads", d.bad ? `${d.bad}: ${d.lastError}` : "0", d.bad ? "bad" : "");

  const m = d.meta || {};
  const bu = $("card-bundle"); bu.replaceChildren(el("h3", "", "Bundle and estimator"));
  kv(bu, "bundle", str(m.bundle_id));
  kv(bu, "hash", str(m.bundle_hash).slice(0, 16));
  kv(bu, "method", methodText(m));
  kv(bu, "delay", fin(m.delay_s) ? `${m.delay_samples} samples (${num(1e3 * m.delay_s, 2)} ms)` : "—");
  kv(bu, "rate", fin(m.rate) ? `${m.rate} samples/s` : "—");
  kv(bu, "payload", `${str(m.format)}, batch ${str(m.batch)}`);
  const ch = Array.isArray(m.channels) ? m.channels.map((c) => (c && c.name) + (c && c.unit ? ` [${c.unit}]` : "")).join(", ") : "—";
  kv(bu, "channels", ch);
  if (d.stdColumns()) kv(bu, "uncertainty", `±${BAND_K}σ bands for ${d.stdColumns().length} columns`);

  const h = d.health || {};
  const he = $("card-health"); he.replaceChildren(el("h3", "", "Health"));
  const lat = h.latency_us || {};
  kv(he, "latency [µs]", `p50 ${num(lat.p50, 0)} / p99 ${num(lat.p99, 0)} / p99.9 ${num(lat.p999, 0)} / max ${num(lat.max, 0)}`);
  kv(he, "lost samples", `${int(h.lost_samples)} (overruns ${int(h.overruns)})`, h.lost_samples > 0 ? "bad" : "");
  kv(he, "ring", `${int(h.ring_depth)} / ${int(h.ring_capacity)}`);
  const p = h.publish || {}, r = h.recorder || {};
  kv(he, "publish queue", `${int(p.queue_depth)} (dropped ${int(p.drops_samples)} samples)`, p.drops_samples > 0 ? "bad" : "");
  kv(he, "recorder queue", `${int(r.queue_depth)} (write errors ${int(r.write_errors)}` +
    (r.dropped_samples !== undefined ? `, dropped ${int(r.dropped_samples)} samples)` : ")"),
    r.write_errors > 0 || r.dropped_samples > 0 ? "bad" : "");
  if (r.problem) kv(he, "recorder problem", str(r.problem), "bad");
  if (h.degraded) kv(he, "degraded", str(h.degraded), "bad");
  kv(he, "CPU / RSS / temp", `${num(h.cpu_percent)} % / ${num(h.rss_mb)} MB / ${fin(h.cpu_temp_c) ? num(h.cpu_temp_c) + " °C" : "—"}`);
  kv(he, "bad samples / resets", `${int(h.bad_samples)} / ${int(h.estimator_resets)}`);

  const mc = h.model_check;
  const ck = $("card-check"); ck.replaceChildren(el("h3", "", "Model check"));
  if (mc && typeof mc === "object") {
    // NIS: normalised innovation squared summed over the window; divided by its degrees
    // of freedom it is 1 on average when the model fits the data (docs/glossary.md)
    const judged = fin(mc.nis);
    // shown as a ratio to its expected value (the dof), the raw sum only beside it
    kv(ck, "NIS / expected", judged ? `${sig(mc.ratio)} x (NIS ${sig(mc.nis, 4)}, expected ${str(mc.dof)})`
      : "— (window not full yet)");
    kv(ck, "limit", fin(mc.threshold) && fin(mc.dof) && mc.dof > 0
      ? (fin(mc.threshold_low) && mc.threshold_low > 0
        ? `NIS / dof below ${num(mc.threshold_low / mc.dof, 3)} or above ${num(mc.threshold / mc.dof, 3)} is suspect (1 on average for a right model)`
        : `NIS / dof above ${num(mc.threshold / mc.dof, 3)} is suspect (1 on average for a right model)`) : "—");
    kv(ck, "window", `${num(mc.window_s, 1)} s`);
    kv(ck, "verdict", !judged ? "not judged yet" : mc.suspect ? "SUSPECT: model and data disagree" : "consistent",
      !judged ? "" : mc.suspect ? "bad" : "good");
    for (const r of Array.isArray(mc.reasons) ? mc.reasons : []) kv(ck, "why", str(r), "bad");
    if (fin(mc.load_level)) kv(ck, "load level", `${mc.load_level.toPrecision(3)} x the designed force RMS (followed from the innovations)`);
  } else {
    kv(ck, "", "not provided by this estimator");
  }
  const k = Number(m.raw_decimation);
  $("raw-note").textContent = d.raw ? `every ${k >= 1 ? k : "?"}th sample ([mqtt] raw_decimation), min/max per pixel` :
    `No raw channel values received (the device publishes them with [mqtt] raw_decimation > 0; it has ${str(m.raw_decimation)}). Channels: ${ch}`;
}

// The estimator in plain words (meta.estimator, meta.method).
function methodText(m) {
  const me = m.method && typeof m.method === "object" ? m.method : {};
  const disc = { newmark: "Newmark time steps", foh: "exact time steps, force linear between samples (foh)" }[me.discretization] || str(me.discretization);
  if (m.estimator === "smoother") {
    return `Kalman fixed-lag smoother, lag ${fin(me.window) ? me.window - 1 : "—"} samples, ${disc}`;
  }
  if (m.method && typeof m.method !== "object") return str(m.method);
  const reg = { tikhonov0: "penalty on force size (tikhonov0)", tikhonov1: "penalty on force changes (tikhonov1)" }[me.regularization] || str(me.regularization);
  return `regularised inversion, fixed-lag window ${str(me.window)}, α ${fin(me.alpha) ? me.alpha.toExponential(2) : "—"}, ${disc}, ${reg}`;
}
