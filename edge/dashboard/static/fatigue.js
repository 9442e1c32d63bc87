// vsense dashboard: the fatigue panel (docs/fatigue.md). The device publishes one retained
// summary per [[fatigue]] hotspot on <base>/<id>/fatigue/<output>; the page keeps the last
// one and the damage of every summary received since it opened (at most FATIGUE_POINTS),
// and draws the damage over time and the range-mean histogram on two canvases.
"use strict";

const FATIGUE_POINTS = 2000;

// A fatigue summary into device d (throws on a malformed one: counted as a bad payload).
function addFatigue(d, name, obj, now) {
  if (typeof obj.damage !== "number" || typeof obj.samples !== "number") {
    throw new Error("fatigue summary without damage / samples");
  }
  if (!d.fatigue) d.fatigue = new Map();
  let f = d.fatigue.get(name);
  if (!f) { f = { last: null, t: [], D: [] }; d.fatigue.set(name, f); }
  f.last = obj;
  f.t.push(now / 1000);
  f.D.push(obj.damage);
  if (f.t.length > FATIGUE_POINTS) { f.t.shift(); f.D.shift(); }
}

function fatigueStats(d) {
  const out = {};
  if (d.fatigue) for (const [n, f] of d.fatigue) out[n] = { damage: f.last.damage, samples: f.last.samples, points: f.t.length };
  return out;
}

function _fatigueCanvas(parent, w, h) {
  const c = document.createElement("canvas");
  c.width = w; c.height = h; c.className = "fatigue-plot";
  parent.appendChild(c);
  return c.getContext("2d");
}

function _drawDamage(ctx, f) {
  const w = ctx.canvas.width, h = ctx.canvas.height;
  ctx.clearRect(0, 0, w, h);
  ctx.strokeStyle = "#888"; ctx.strokeRect(0.5, 0.5, w - 1, h - 1);
  const n = f.t.length;
  if (!n) return;
  const t0 = f.t[0], t1 = Math.max(f.t[n - 1], t0 + 1e-3);
  const dmax = Math.max(...f.D, 1e-300), dmin = Math.min(...f.D, 0);
  ctx.strokeStyle = "#c0392b"; ctx.beginPath();
  for (let i = 0; i < n; i++) {
    const x = 4 + (w - 8) * (f.t[i] - t0) / (t1 - t0);
    const y = h - 14 - (h - 24) * (f.D[i] - dmin) / (dmax - dmin || 1);
    if (i) ctx.lineTo(x, y); else ctx.moveTo(x, y);
  }
  ctx.stroke();
  ctx.fillStyle = "#444"; ctx.font = "11px sans-serif";
  ctx.fillText(`damage ${dmax.toPrecision(3)} (top), ${(t1 - t0).toFixed(0)} s shown`, 6, h - 2);
}

function _drawHistogram(ctx, last) {
  const w = ctx.canvas.width, h = ctx.canvas.height;
  ctx.clearRect(0, 0, w, h);
  const hist = last.histogram;
  if (!hist || !Array.isArray(hist.counts) || !hist.counts.length) return;
  const nr = hist.counts.length, nm = hist.counts[0].length || 1;
  let cmax = 0;
  for (const row of hist.counts) for (const c of row) if (c > cmax) cmax = c;
  const cw = (w - 2) / nm, ch = (h - 16) / nr;
  for (let i = 0; i < nr; i++) {
    for (let j = 0; j < nm; j++) {
      const c = hist.counts[i][j];
      if (!(c > 0)) continue;
      const a = Math.log1p(c) / Math.log1p(cmax);   // log colour scale
      ctx.fillStyle = `rgba(41, 98, 255, ${0.15 + 0.85 * a})`;
      ctx.fillRect(1 + j * cw, h - 16 - (i + 1) * ch, Math.ceil(cw), Math.ceil(ch));
    }
  }
  ctx.strokeStyle = "#888"; ctx.strokeRect(0.5, 0.5, w - 1, h - 16);
  ctx.fillStyle = "#444"; ctx.font = "11px sans-serif";
  ctx.fillText(`range 0..${Number(hist.range_max).toPrecision(3)} (up), mean ` +
    `${Number(hist.mean_lo).toPrecision(3)}..${Number(hist.mean_hi).toPrecision(3)}`, 4, h - 3);
}

// The panel of device d into the element `box` (hidden when d has no hotspot).
function drawFatigue(box, d) {
  box.hidden = !d.fatigue || !d.fatigue.size;
  if (box.hidden) return;
  box.replaceChildren();
  const title = document.createElement("h3");
  title.textContent = "Fatigue (Miner damage; rainflow range-mean histogram)";
  box.appendChild(title);
  for (const [name, f] of d.fatigue) {
    const s = f.last, div = document.createElement("div");
    div.className = "fatigue-hotspot";
    const p = document.createElement("p");
    const num = (x) => (typeof x === "number" && Number.isFinite(x) ? x.toPrecision(4) : "—");
    p.textContent = `${name} (${s.curve || "?"}): D = ${num(s.damage)}, with the residue ` +
      `${num(s.damage_with_residue)}; ${num(s.cycles)} cycles, residue ${s.residue}, ` +
      `${s.samples} samples` + (s.overflow ? `, residue overflow ${s.overflow}` : "");
    div.appendChild(p);
    _drawDamage(_fatigueCanvas(div, 420, 150), f);
    _drawHistogram(_fatigueCanvas(div, 260, 150), s);
    box.appendChild(div);
  }
}
