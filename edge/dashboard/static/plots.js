// vsense dashboard: uPlot charts fed with min/max envelopes (one point per pixel column).
"use strict";

const BAND_K = 2; // uncertainty band: estimate +- 2 standard deviations (~95 %)

function newEnvelope(nb) {
  const a = () => new Array(nb).fill(null);
  return { x: a(), lo: a(), hi: a(), slo: a(), shi: a() };
}

// One chart of one column of a device's Series: envelope lines with the band between min and
// max filled, plus the +-2 sigma band when the estimator sends standard deviations.
class ColumnPlot {
  constructor(parent, title, width, height, sparkline) {
    this.nb = Math.max(50, Math.floor(width / (sparkline ? 2 : 1)));
    this.env = newEnvelope(this.nb);
    this.el = document.createElement("div");
    this.el.className = sparkline ? "spark" : "plot";
    parent.appendChild(this.el);
    const line = "#1f5fa8", sigma = "rgba(230,120,20,0.25)";
    const opts = {
      title: sparkline ? undefined : title,
      width, height,
      legend: { show: false },
      cursor: { show: !sparkline },
      // device time [s] (the simulator's clock starts at 0; hardware: monotonic seconds)
      scales: { x: { time: false } },
      axes: sparkline ? [{ show: false }, { show: false }] : [{ label: "device time [s]", size: 40 }, { size: 70 }],
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
    this.points = 0;
  }

  // Redraw from `series` column `col` over the window ending at `tEnd` [s].
  draw(series, col, tEnd, span) {
    const e = this.env;
    series.envelope(col, tEnd, span, this.nb, BAND_K, e);
    this.u.setData([e.x, e.lo, e.hi, e.slo, e.shi]);
    this.points = this.nb;
  }

  destroy() {
    this.u.destroy();
    this.el.remove();
  }
}

if (typeof module !== "undefined") module.exports = { ColumnPlot, newEnvelope, BAND_K };
