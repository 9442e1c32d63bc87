// vsense dashboard: MQTT over WebSockets -> Device stores -> fleet table and device view.
// Configuration: window.VSENSE_CONFIG (config.js, written by `vsense-edge dashboard`), then
// the query string (?url=ws://host:9001&base=vsense&device=ID&window=10&history=60&user=U).
// The device view keeps `history_s` of samples: the window shown follows the newest sample
// (live) or, after a drag over a plot, stays on the range dragged over (zoom; double-click or
// "live" to follow again); "export" writes the samples of the range shown to a CSV file.
// Test and benchmark hook: window.vsense (stats(), zoom(t0, t1), visibleCsv()).
"use strict";

(function () {
  const cfg = Object.assign({ url: "ws://localhost:9001", base: "vsense", username: "",
    password: "", device: "", window_s: 10, history_s: 60 }, window.VSENSE_CONFIG || {});
  const q = new URLSearchParams(location.search);
  if (q.get("url")) cfg.url = q.get("url");
  if (q.get("base")) cfg.base = q.get("base");
  if (q.get("device")) cfg.device = q.get("device");
  if (q.get("user")) cfg.username = q.get("user");
  if (q.get("window") && Number(q.get("window")) > 0) cfg.window_s = Number(q.get("window"));
  if (q.get("history") && Number(q.get("history")) > 0) cfg.history_s = Number(q.get("history"));
  cfg.history_s = Math.max(cfg.history_s, cfg.window_s);
  if (cfg.url === "relay") {  // served by `vsense-edge dashboard`: its /mqtt relay
    cfg.url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/mqtt";
  }
  const STALE_S = 15;
  const MAX_PLOTS = 32;

  const devices = new Map();
  const counters = { messages: 0, bad: 0, uncaught: 0, frames: 0, drawn: 0, drawMs: 0,
    fps: 0, drawFps: 0, avgDrawMs: 0, connects: 0, lastBad: "" };
  let selected = cfg.device || (location.hash.startsWith("#device=") ? decodeURIComponent(location.hash.slice(8)) : "");
  let connState = "connecting";
  let span = cfg.window_s;  // live window [s] (the "window" selector)
  let zoom = null;          // null: live; {t0, t1}: the device-time range dragged over [s]

  window.addEventListener("error", () => { counters.uncaught++; });
  window.addEventListener("unhandledrejection", () => { counters.uncaught++; });

  // ------------------------------------------------------------------ MQTT
  function device(id) {
    let d = devices.get(id);
    if (!d) {
      d = new Device(id, cfg.history_s);
      devices.set(id, d);
      // no automatic selection: a device shows in the device view only when chosen
      // (?device=, #device=, config.js, or a click in the table), so a new device (any
      // client allowed to publish under the topic root) never takes the view over
    }
    return d;
  }

  function onMessage(topic, payload) {
    counters.messages++;
    const pre = cfg.base + "/";
    if (!topic.startsWith(pre)) return;
    const rest = topic.slice(pre.length);
    const k = rest.indexOf("/");
    if (k <= 0) return;
    const id = rest.slice(0, k), sub = rest.slice(k + 1);
    const fat = sub.startsWith("fatigue/") ? sub.slice(8) : null;
    if (!fat && !["status", "meta", "health", "estimates", "raw"].includes(sub)) return;
    if (payload.length === 0) {  // a cleared retained message: forget the device
      if (sub === "status") devices.delete(id);
      return;
    }
    const d = device(id);
    d.messages++;
    d.lastSeen = Date.now();
    try {
      if (fat) { addFatigue(d, fat, parseObject(payload), d.lastSeen); d.version++; }
      else if (sub === "estimates") d.addEstimates(parseEstimates(payload), d.lastSeen);
      else if (sub === "raw") d.addRaw(parseRaw(payload));
      else {
        const obj = sub === "meta" ? parseMeta(payload) : parseObject(payload);
        if (sub === "status") {
          d.status = obj;
          if (obj.state === "starting") { d.maxSeq = -1; d.est = null; d.raw = null; d.rawMaxSeq = -1; d.restarts++; }
        }
        else if (sub === "meta") {
          const key = JSON.stringify(obj.columns);  // bounded by parseMeta's limits
          d.meta = obj;
          if (key !== d.metaKey) { d.est = null; d.raw = null; d.maxSeq = -1; d.rawMaxSeq = -1; }
          d.metaKey = key;
        }
        else d.health = obj;
        d.version++;
      }
    } catch (e) {
      d.bad++;
      counters.bad++;
      d.lastError = `${sub}: ${e.message}`;
      counters.lastBad = `${id}/${d.lastError}`;
    }
  }

  function connect() {
    const opts = { clientId: "vsense-dash-" + Math.random().toString(16).slice(2, 10),
      reconnectPeriod: 2000, connectTimeout: 10000, clean: true, keepalive: 30 };
    if (cfg.username) { opts.username = cfg.username; opts.password = cfg.password || ""; }
    let client;
    try {
      client = mqtt.connect(cfg.url, opts);
    } catch (e) {
      connState = "bad broker URL: " + e.message;
      return;
    }
    const b = cfg.base;
    client.on("connect", () => {
      connState = "connected";
      counters.connects++;
      client.subscribe([`${b}/+/status`, `${b}/+/meta`, `${b}/+/fatigue/+`], { qos: 1 });
      client.subscribe([`${b}/+/estimates`, `${b}/+/health`, `${b}/+/raw`], { qos: 0 });
    });
    client.on("reconnect", () => { connState = "reconnecting"; });
    client.on("close", () => { if (connState === "connected") connState = "disconnected"; });
    client.on("error", (e) => { connState = "error: " + e.message; });
    client.on("message", (topic, payload) => onMessage(topic, payload));
    window.vsense.client = client;
  }

  // ------------------------------------------------------------------ fleet table
  const rows = new Map();  // id -> {tr, cells, spark}

  function fleetRow(d) {
    let r = rows.get(d.id);
    if (r) return r;
    const tr = el("tr");
    tr.dataset.device = d.id;
    const cells = {};
    for (const k of ["id", "state", "bundle", "rate", "samples", "seen", "bad", "live"]) {
      cells[k] = el("td", "c-" + k);
      tr.appendChild(cells[k]);
    }
    cells.id.textContent = d.id;
    tr.addEventListener("click", () => { selected = d.id; location.hash = "device=" + encodeURIComponent(d.id); });
    $("fleet-body").appendChild(tr);
    r = { tr, cells, spark: null };
    rows.set(d.id, r);
    return r;
  }

  function updateFleet(now) {
    for (const [id, r] of rows) if (!devices.has(id)) { r.tr.remove(); if (r.spark) r.spark.destroy(); rows.delete(id); }
    const ids = [...devices.keys()].sort();
    for (const id of ids) {
      const d = devices.get(id), r = fleetRow(d);
      const ago = d.lastSeen ? (now - d.lastSeen) / 1000 : Infinity;
      const st = d.state();
      // the model check's verdict (health): not a green "running" while the data disagree
      const mc = d.health && typeof d.health === "object" ? d.health.model_check : null;
      const suspect = !!mc && typeof mc === "object" && mc.suspect === true && st !== "offline" && st !== "stopped";
      const stale = ago > STALE_S && st !== "offline";
      r.cells.state.textContent = st + (stale ? " (stale)" : suspect ? " (model suspect)" : "");
      r.cells.state.className = "c-state st-" + (suspect && !stale ? "model_suspect" : st.replace(/[^a-z_]/g, ""));
      r.cells.bundle.textContent = str(d.meta ? d.meta.bundle_id : d.status && d.status.bundle);
      const rate = d.receivedRate(now);
      r.cells.rate.textContent = rate === null ? "—" : num(rate, 0);
      r.cells.samples.textContent = int(d.samples);
      r.cells.seen.textContent = d.lastSeen ? `${num(ago, 1)} s ago` : "—";
      r.cells.bad.textContent = d.bad ? `${d.bad} (${d.lastError})` : "0";
      r.tr.classList.toggle("selected", id === selected);
    }
    $("fleet-count").textContent = `${devices.size} device(s)` + (devices.has(selected) ? "" : " — click one to show it");
  }

  // ------------------------------------------------------------------ device view
  let view = { key: "", est: [], raw: [] };

  function columnNames(d, series, key) {
    const names = d.meta && Array.isArray(d.meta[key]) ? d.meta[key].map((c) => (typeof c === "string" ? c : c && c.name)) : [];
    const out = [];
    for (let j = 0; j < series.ncol; j++) out.push(typeof names[j] === "string" ? names[j] : `c${j}`);
    return out;
  }

  function rebuildPlots(d) {
    for (const p of view.est.concat(view.raw)) p.destroy();
    view.est = []; view.raw = [];
    $("device").hidden = false;  // a hidden section has no width
    const w = Math.max(300, Math.min(1400, document.body.clientWidth - 40));
    const u = units(d.meta);
    // at most MAX_PLOTS plots per series (the first columns): a device with hundreds of
    // columns keeps the page drawing; its data is kept and exported in full
    if (d.est) {
      columnNames(d, d.est, "columns").slice(0, MAX_PLOTS).forEach((n, j) => view.est.push(new ColumnPlot($("plots-est"), `${n} [${u[n] || ""}]`, w, 200, false, setZoom, u[n])));
    }
    if (d.raw) {
      columnNames(d, d.raw, "channels").slice(0, MAX_PLOTS).forEach((n, j) => view.raw.push(new ColumnPlot($("plots-raw"), `${n} [${u[n] || ""}]`, w, 160, false, setZoom, u[n])));
    }
  }

  // ------------------------------------------------------------------ zoom, export
  let zoomVersion = 0;  // bumps when the range shown changes (forces a redraw)

  function setZoom(t0, t1) {
    zoom = t0 === null || !(t1 > t0) ? null : { t0, t1 };
    zoomVersion++;
  }

  // [tEnd, length] of the device-time range shown for `series`
  function shown(d, series, now) {
    if (zoom) return [zoom.t1, zoom.t1 - zoom.t0];
    return [windowEnd(d, series, now), span];
  }

  // The estimates in the range shown as {name, text} (CSV), or null without data.
  function visibleCsv() {
    const d = devices.get(selected);
    if (!d || !d.est || !d.est.len) return null;
    const [tEnd, len] = shown(d, d.est, Date.now());
    const t0 = tEnd - len;
    const text = d.est.csv(t0, tEnd, columnNames(d, d.est, "columns"));
    const safe = d.id.replace(/[^A-Za-z0-9_.-]/g, "_");
    return { name: `${safe}_${t0.toFixed(3)}-${tEnd.toFixed(3)}s.csv`, text };
  }

  function exportCsv() {
    const c = visibleCsv();
    if (!c) return;
    const a = el("a");
    a.href = URL.createObjectURL(new Blob([c.text], { type: "text/csv" }));
    a.download = c.name;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  }

  function setupControls() {
    const sel = $("span");
    const spans = [1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, cfg.window_s, cfg.history_s]
      .filter((x, i, a) => x <= cfg.history_s && a.indexOf(x) === i).sort((a, b) => a - b);
    for (const x of spans) {
      const o = el("option", "", x >= 60 ? `${x / 60} min` : `${x} s`);
      o.value = String(x);
      if (x === cfg.window_s) o.selected = true;
      sel.appendChild(o);
    }
    sel.addEventListener("change", () => { span = Number(sel.value); setZoom(null, null); });
    $("live").addEventListener("click", () => setZoom(null, null));
    $("export").addEventListener("click", exportCsv);
  }

  function rangeText(d, now) {
    if (!d.est || !d.est.len) return "";
    const kept = d.est.lastTime() - d.est.firstTime();
    const [tEnd, len] = shown(d, d.est, now);
    return (zoom ? `zoomed: ${num(tEnd - len, 3)} … ${num(tEnd, 3)} s (double-click a plot or "live" to follow)`
      : `live: last ${num(len, len < 10 ? 1 : 0)} s (drag over a plot to zoom)`) +
      ` · history kept ${num(kept, 1)} s of ${num(cfg.history_s, 0)} s`;
  }

  // ------------------------------------------------------------------ frame loop
  let lastText = 0, lastSecond = performance.now(), framesInSec = 0, drawnInSec = 0, msInSec = 0;

  function windowEnd(d, series, now) {
    // scroll smoothly between batches: device time of the newest sample + wall time since
    const last = series.lastTime();
    const since = Math.min(1, (now - d.lastSeen) / 1000);
    return last + Math.max(0, since);
  }

  function frame() {
    const t0 = performance.now(), now = Date.now();
    counters.frames++; framesInSec++;
    let drew = false;
    try {
      const d = devices.get(selected);
      // sparklines: first column of every device
      let sparkBudget = Math.max(1, Math.ceil(rows.size / 8));
      for (const [id, r] of rows) {
        const dv = devices.get(id);
        if (!dv || !dv.est) continue;
        if (!r.spark) r.spark = new ColumnPlot(r.cells.live, "", 240, 36, true);
        // sparklines (240 px over the window) are redrawn 4 times a second, staggered over
        // the frames; the selected device's plots every frame
        if ((now - dv.lastSeen < 2000 || r.sparkVersion !== dv.version) && now - (r.sparkAt || 0) >= 250
            && sparkBudget-- > 0) {
          r.sparkAt = now;
          r.spark.draw(dv.est, 0, windowEnd(dv, dv.est, now), cfg.window_s);
          r.sparkVersion = dv.version;
          drew = true;
        }
      }
      if (d) {
        const key = `${d.id}|${d.est ? d.est.ncol : 0}|${d.est && d.est.s ? 1 : 0}|${d.raw ? d.raw.ncol : 0}|${d.metaKey}`;
        if (key !== view.key) { rebuildPlots(d); view.key = key; }
        const live = !zoom && now - d.lastSeen < 2000;
        if (live || view.version !== d.version || view.zoomVersion !== zoomVersion) {
          if (d.est) view.est.forEach((p, j) => p.draw(d.est, j, ...shown(d, d.est, now)));
          if (d.raw) view.raw.forEach((p, j) => p.draw(d.raw, j, ...shown(d, d.raw, now)));
          view.version = d.version;
          view.zoomVersion = zoomVersion;
          drew = true;
        }
      }
      if (t0 - lastText > 250) {
        lastText = t0;
        $("conn").textContent = `${cfg.url}: ${connState}`;
        $("conn").className = connState === "connected" ? "ok" : "bad";
        updateFleet(now);
        $("device").hidden = !d;
        if (d) { $("dev-title").textContent = `Device ${d.id}`; updateCards(d); drawFatigue($("fatigue"), d); $("range").textContent = rangeText(d, now); }
        $("stats").textContent = `${num(counters.drawFps, 0)} frames/s drawn, ${num(counters.avgDrawMs, 1)} ms/frame, ${int(counters.messages)} messages, ${counters.bad} bad payloads`;
      }
    } catch (e) {
      counters.uncaught++;
      counters.lastBad = "frame: " + e.message;
    }
    const dt = performance.now() - t0;
    counters.drawMs += dt; msInSec += dt;
    if (drew) { counters.drawn++; drawnInSec++; }
    if (t0 - lastSecond >= 1000) {
      const s = (t0 - lastSecond) / 1000;
      counters.fps = framesInSec / s; counters.drawFps = drawnInSec / s;
      counters.avgDrawMs = framesInSec ? msInSec / framesInSec : 0;
      framesInSec = 0; drawnInSec = 0; msInSec = 0; lastSecond = t0;
    }
    requestAnimationFrame(frame);
  }

  function stats() {
    const out = { conn: connState, url: cfg.url, selected, counters: Object.assign({}, counters), devices: {} };
    for (const [id, d] of devices) {
      out.devices[id] = { state: d.state(), samples: d.samples, duplicates: d.duplicates,
        gaps: d.gaps, raw_samples: d.rawSamples, bad: d.bad, last_error: d.lastError,
        messages: d.messages, has_meta: !!d.meta, has_health: !!d.health,
        has_std: !!(d.est && d.est.s), ncol: d.est ? d.est.ncol : 0,
        restarts: d.restarts, last: d.est ? d.est.lastRow() : null, fatigue: fatigueStats(d),
        history_s: d.est && d.est.len ? d.est.lastTime() - d.est.firstTime() : 0,
        history_rows: d.est ? d.est.len : 0,
        points: id === selected ? view.est.reduce((a, p) => a + p.points, 0) : 0 };
    }
    if (performance.memory) out.js_heap_mb = performance.memory.usedJSHeapSize / 1048576;
    out.y_ticks = view.est.map((p) => p.yTicks);
    out.x_range = view.est.map((p) => [p.u.scales.x.min, p.u.scales.x.max]);
    out.fill = view.est.map((p) => p.env.lo.filter((y) => y !== null).length / p.nb);
    out.zoom = zoom;
    out.span = span;
    return out;
  }

  // feed(topic, bytes): one message through the same path as MQTT's (tests, fuzzing);
  // returns "bad" when it was counted as a bad payload, else "ok"
  function feed(topic, payload) {
    const bad = counters.bad;
    onMessage(topic, payload);
    return counters.bad > bad ? "bad" : "ok";
  }

  // cards(id): the fleet table and device `id`'s cards drawn now (what frame() does every
  // 250 ms for the selected device); throws what they throw (tests)
  function cards(id) {
    const now = Date.now();
    updateFleet(now);
    const d = devices.get(id);
    if (d) { updateCards(d); rangeText(d, now); }
  }

  window.vsense = { stats, devices, cfg, select: (id) => { selected = id; }, zoom: setZoom,
    visibleCsv, feed, cards };
  window.addEventListener("DOMContentLoaded", () => {
    $("base").textContent = cfg.base;
    setupControls();
    connect();
    requestAnimationFrame(frame);
  });
})();
