// vsense dashboard: uPlot charts fed with min/max envelopes (one point per pixel column).
"use strict";

const BAND_K = 2; // uncertainty band: estimate +- 2 standard deviations (~95 %)

// SI prefixes of the engineering exponents (multiples of 3)
const SI_PREFIX = { "-18": "a", "-15": "f", "-12": "p", "-9": "n", "-6": "µ", "-3": "m", "0": "",
  "3": "k", "6": "M", "9": "G", "12": "T" };

// Tick labels of one axis in engineering notation: one SI prefix for all ticks (chosen from
// the largest |tick|) before the unit, as many decimals as the tick step needs, never "-0".
// E.g. splits [-2e-6, 0, 2e-6] with unit "m" -> ["-2 µm", "0 µm", "2 µm"].
function siTicks(splits, unit = "") {
  const vals = splits.filter((v) => Number.isFinite(v));
  const big = vals.reduce((a, v) => Math.max(a, Math.abs(v)), 0);
  const u = unit && unit !== "—" ? unit : "";
  if (!vals.length || big === 0) return splits.map((v) => (Number.isFinite(v) ? (u ? `0 ${u}` : "0") : ""));
  const e3 = Math.max(-18, Math.min(12, 3 * Math.floor(Math.log10(big) / 3)));
  const scale = Math.pow(10, e3);
  let step = Infinity;
  for (let i = 1; i < vals.length; i++) {
    const d = Math.abs(vals[i] - vals[i - 1]);
    if (d > 0) step = Math.min(step, d);
  }
  if (!Number.isFinite(step)) step = big;
  const dec = Math.max(0, Math.min(6, -Math.floor(Math.log10(step / scale) + 1e-9)));
  const pre = SI_PREFIX[String(e3)];
  return splits.map((v) => {
    if (!Number.isFinite(v)) return "";
    let t = (v / scale).toFixed(dec);
    if (/^-0(\.0*)?$/.test(t)) t = t.slice(1);
    return pre || u ? `${t} ${pre}${u}` : t;
  });
}

function newEnvelope(nb) {
  const a = () => new Array(nb).fill(null);
  return { x: a(), lo: a(), hi: a(), slo: a(), shi: a() };
}

// One chart of one column of a device's Series: envelope lines with the band between min and
// max filled, plus the +-2 sigma band when the estimator sends standard deviations.
class ColumnPlot {
  // onZoom(t0, t1): called with the device-time range the user dragged over (not sparklines);
  // unit: of the values, for the y tick labels (with an SI prefix)
  constructor(parent, title, width, height, sparkline, onZoom, unit) {
    // one min/max pair per 2 pixel columns: every redraw builds its paths anew (garbage the
    // browser collects lazily), so fewer points also means less transient memory
    this.nb = Math.max(50, Math.floor(width / (sparkline ? 3 : 2)));
    this.sigma = null;  // whether the +-2 sigma series are shown (only with std values)
    this.yTicks = [];   // the last y tick labels drawn (tests read them: canvas text)
    this.env = newEnvelope(this.nb);
    this.el = document.createElement("div");
    this.el.className = sparkline ? "spark" : "plot";
    parent.appendChild(this.el);
    const line = "#1f5fa8", sigma = "rgba(230,120,20,0.25)";
    const opts = {
      title: sparkline ? undefined : title,
      width, height,
      legend: { show: false },
      // drag over a plot: zoom into that time range (drawn from the stored samples)
      cursor: { show: !sparkline, drag: { x: true, y: false, setScale: false } },
      // device time [s] (the simulator's clock starts at 0; hardware: monotonic seconds)
      scales: { x: { time: false } },
      axes: sparkline ? [{ show: false }, { show: false }] : [{ label: "device time [s]", size: 40 },
        { size: 70, space: 24, values: (u, splits) => (this.yTicks = siTicks(splits, unit)) }],
      hooks: sparkline || !onZoom ? {} : { setSelect: [(u) => {
        if (u.select.width < 3) return;
        const t0 = u.posToVal(u.select.left, "x"), t1 = u.posToVal(u.select.left + u.select.width, "x");
        u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
        onZoom(t0, t1);
      }] },
      series: [
        {},
        { label: "min", stroke: line, width: 1, spanGaps: false },
        { label: "max", stroke: line, width: 1, spanGaps: false },
        { label: `-${BAND_K}σ`, stroke: "rgba(230,120,20,0.6)", width: 1, spanGaps: false },
        { label: `+${BAND_K}σ`, stroke: "rgba(230,120,20,0.6)", width: 1, spanGaps: false },
      ],
      bands: [{ series: [2, 1], fill: "rgba(31,95,168,0.35)" }, { series: [4, 3], fill: sigma }],
    };
    const e = this.env;
    this.u = new uPlot(opts, [e.x, e.lo, e.hi, e.slo, e.shi], this.el);
    if (!sparkline && onZoom) this.el.addEventListener("dblclick", () => onZoom(null, null));
    this.points = 0;
  }

  // Redraw from `series` column `col` over the window ending at `tEnd` [s].
  draw(series, col, tEnd, span) {
    const e = this.env;
    const sigma = series.s !== null;
    if (sigma !== this.sigma) {  // hidden series are not drawn at all
      this.u.setSeries(3, { show: sigma });
      this.u.setSeries(4, { show: sigma });
      this.sigma = sigma;
    }
    series.envelope(col, tEnd, span, this.nb, BAND_K, e);
    this.u.setData([e.x, e.lo, e.hi, e.slo, e.shi]);
    this.points = this.nb;
  }

  destroy() {
    this.u.destroy();
    this.el.remove();
  }
}

if (typeof module !== "undefined") module.exports = { ColumnPlot, newEnvelope, siTicks, BAND_K };
