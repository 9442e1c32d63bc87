// vsense dashboard: per-device state and the sample history (no DOM).
// Samples go into preallocated ring buffers (history_s x rate rows); drawing reads min/max
// envelopes per pixel column of the window shown (found by binary search in time), so
// 1,000 samples/s per device cost the plot a few hundred points whatever the rate and the
// length of the history.
"use strict";

class Series {
  // A ring of `cap` rows of `ncol` values (+ optional std), time-ordered by seq.
  constructor(cap, ncol, withStd) {
    this.cap = cap;
    this.ncol = ncol;
    this.t = new Float64Array(cap);
    this.v = new Float64Array(cap * ncol);
    this.s = withStd ? new Float64Array(cap * ncol) : null;
    this.len = 0;   // valid rows (<= cap)
    this.head = 0;  // next row written
  }

  push(batch, from) {
    const nc = this.ncol;
    for (let i = from; i < batch.n; i++) {
      const h = this.head;
      this.t[h] = batch.t[i];
      for (let j = 0; j < nc; j++) this.v[h * nc + j] = batch.v[i * nc + j];
      if (this.s) {
        for (let j = 0; j < nc; j++) this.s[h * nc + j] = batch.s ? batch.s[i * nc + j] : NaN;
      }
      this.head = (h + 1) % this.cap;
      if (this.len < this.cap) this.len++;
    }
  }

  lastRow() {
    if (!this.len) return null;
    const h = (this.head - 1 + this.cap) % this.cap;
    return Array.from(this.v.subarray(h * this.ncol, (h + 1) * this.ncol));
  }

  lastTime() {
    return this.len ? this.t[(this.head - 1 + this.cap) % this.cap] : NaN;
  }

  firstTime() {
    return this.len ? this.t[(this.head - this.len + this.cap) % this.cap] : NaN;
  }

  // ring index of logical row r (0 = oldest)
  at(r) {
    return (this.head - this.len + r + this.cap) % this.cap;
  }

  // first logical row with time >= t (rows are in seq order, so in time order)
  lowerBound(t) {
    let lo = 0, hi = this.len;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.t[this.at(mid)] < t) lo = mid + 1; else hi = mid;
    }
    return lo;
  }

  // The rows with t0 <= time <= t1 as CSV text: header `time,<names>` (+ `<name>_std` when
  // std is stored), one line per sample, values as JavaScript prints them (round-trip exact).
  // Names come from the device: quoted per RFC 4180 and kept from being formulas (csvField).
  csv(t0, t1, names) {
    const nc = this.ncol, lines = [];
    const head = ["time"].concat(names);
    if (this.s) for (const n of names) head.push(n + "_std");
    lines.push(head.map(csvField).join(","));
    for (let r = this.lowerBound(t0); r < this.len; r++) {
      const i = this.at(r);
      if (this.t[i] > t1) break;
      const row = [this.t[i]];
      for (let j = 0; j < nc; j++) row.push(this.v[i * nc + j]);
      if (this.s) for (let j = 0; j < nc; j++) row.push(this.s[i * nc + j]);
      lines.push(row.map((x) => (Number.isFinite(x) ? String(x) : "")).join(","));
    }
    return lines.join("\n") + "\n";
  }

  // Min/max envelope of column `col` over [tEnd - span, tEnd] in `nb` buckets, written into
  // the plain arrays of `out` ({x, lo, hi, slo, shi}, length nb; null = empty bucket).
  // slo/shi: envelope of v -/+ k*s (uncertainty band) when std is stored, else null.
  envelope(col, tEnd, span, nb, k, out) {
    const { x, lo, hi, slo, shi } = out;
    const t0 = tEnd - span;
    const w = span / nb;
    for (let b = 0; b < nb; b++) {
      x[b] = t0 + (b + 0.5) * w;
      lo[b] = null; hi[b] = null; slo[b] = null; shi[b] = null;
    }
    const nc = this.ncol;
    for (let r = this.lowerBound(t0); r < this.len; r++) {
      const i = this.at(r);
      const t = this.t[i];
      if (t > tEnd) break;
      let b = Math.floor((t - t0) / w);
      if (b >= nb) b = nb - 1;
      const y = this.v[i * nc + col];
      if (!Number.isFinite(y)) continue;
      if (lo[b] === null || y < lo[b]) lo[b] = y;
      if (hi[b] === null || y > hi[b]) hi[b] = y;
      if (this.s) {
        const sd = this.s[i * nc + col];
        if (Number.isFinite(sd)) {
          const a = y - k * sd, c = y + k * sd;
          if (slo[b] === null || a < slo[b]) slo[b] = a;
          if (shi[b] === null || c > shi[b]) shi[b] = c;
        }
      }
    }
  }
}

// One CSV field (RFC 4180): text starting with = + - @ TAB or CR gets a leading ' (a
// spreadsheet would run it as a formula, e.g. =HYPERLINK(...)); a field holding a comma, a
// quote, CR or LF is quoted, its quotes doubled. Lines end in \n (the page's export).
function csvField(x) {
  let f = String(x);
  if (/^[=+\-@\t\r]/.test(f)) f = "'" + f;
  return /[",\r\n]/.test(f) ? '"' + f.replace(/"/g, '""') + '"' : f;
}

// Ring rows for `historyS` s at `rate` of `ncol` columns, within LIMITS.cells values.
function ringRows(historyS, rate, ncol) {
  return Math.max(1, Math.min(Math.ceil(historyS * rate), Math.floor(LIMITS.cells / Math.max(1, ncol))));
}

class Device {
  // historyS: seconds of samples kept (ring buffers sized from the nominal rate of meta)
  constructor(id, historyS) {
    this.id = id;
    this.historyS = historyS;
    this.status = null; this.meta = null; this.health = null;
    this.metaKey = undefined;  // JSON of meta.columns (a new one resets the series)
    this.est = null;    // Series of estimates
    this.raw = null;    // Series of raw channels (optional `raw` topic)
    this.maxSeq = -1; this.rawMaxSeq = -1;
    this.samples = 0; this.duplicates = 0; this.gaps = 0; this.flagged = 0;
    this.rawSamples = 0; this.restarts = 0;
    this.messages = 0; this.bad = 0; this.lastError = "";
    this.lastSeen = 0;       // Date.now() of the last message of any kind
    this.version = 0;        // bumps on every change that needs a redraw
    this.arrivals = [];      // [ms, n] for the received rate
  }

  rate() {
    const r = this.meta && Number(this.meta.rate);
    return r > 0 && r < 1e6 ? r : 1000;
  }

  stdColumns() {
    const m = this.meta;
    return m && Array.isArray(m.std_columns) ? m.std_columns : null;
  }

  // Feed one batch of estimates (parsed); dedup by seq (QoS 1 may redeliver).
  addEstimates(batch, nowMs) {
    if (this.meta && Array.isArray(this.meta.columns) && this.meta.columns.length !== batch.ncol) {
      throw new Error(`estimates: ${batch.ncol} columns, meta.columns has ${this.meta.columns.length}`);
    }
    if (this.maxSeq >= 0 && batch.seq0 + batch.n - 1 < this.maxSeq - 10 * this.rate()) {
      // seq far behind what was seen: the daemon restarted (seq starts again at 0)
      this.maxSeq = -1; this.est = null; this.restarts++;
    }
    const withStd = batch.s !== null || this.stdColumns() !== null;
    if (!this.est || this.est.ncol !== batch.ncol || (withStd && !this.est.s)) {
      this.est = new Series(ringRows(this.historyS, this.rate(), batch.ncol), batch.ncol, withStd);
    }
    const last = batch.seq0 + batch.n - 1;
    if (last <= this.maxSeq) { this.duplicates += batch.n; return; }
    const from = Math.max(0, this.maxSeq + 1 - batch.seq0);
    this.duplicates += from;
    if (this.maxSeq >= 0 && batch.seq0 > this.maxSeq + 1) this.gaps++;
    this.est.push(batch, from);
    for (let i = from; i < batch.n; i++) if (batch.flags[i]) this.flagged++;
    this.samples += batch.n - from;
    this.maxSeq = last;
    this.arrivals.push([nowMs, batch.n - from]);
    this.version++;
  }

  addRaw(batch) {
    if (!this.raw || this.raw.ncol !== batch.ncol) {
      const k = this.meta && Number(this.meta.raw_decimation) >= 1 ? Number(this.meta.raw_decimation) : 1;
      this.raw = new Series(ringRows(this.historyS, this.rate() / k, batch.ncol), batch.ncol, false);
    }
    const last = batch.seq0 + batch.n - 1;
    if (last <= this.rawMaxSeq) return;
    const from = Math.max(0, this.rawMaxSeq + 1 - batch.seq0);
    this.raw.push(batch, from);
    this.rawSamples += batch.n - from;
    this.rawMaxSeq = last;
    this.version++;
  }

  receivedRate(nowMs) {
    while (this.arrivals.length && this.arrivals[0][0] < nowMs - 5000) this.arrivals.shift();
    if (this.arrivals.length < 2) return null;
    const span = (nowMs - this.arrivals[0][0]) / 1000;
    let n = 0;
    for (let i = 1; i < this.arrivals.length; i++) n += this.arrivals[i][1];
    return span > 0 ? n / span : null;
  }

  state() {
    return (this.status && typeof this.status.state === "string") ? this.status.state : "?";
  }
}

if (typeof module !== "undefined") module.exports = { Series, Device, csvField, ringRows };
