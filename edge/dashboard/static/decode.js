// vsense dashboard: payload parsing (pure functions, no DOM). Layouts: docs/daemon.md
// "MQTT topics". Every parser either returns a well-formed object or throws an Error whose
// message names the field that was wrong; the caller counts it as a bad payload.
"use strict";

const VSE_MAGIC = [0x56, 0x53, 0x45, 0x31]; // "VSE1"
const VSE_HEADER = 24;
// Size limits: a message (from any device allowed to publish) never makes the page allocate
// more than its own size, and what it may describe is bounded (docs/dashboard.md "Limits").
const LIMITS = {
  columns: 512,      // columns of an estimates/raw message, names in meta's lists
  name: 256,         // characters of a column or channel name
  rows: 100000,      // samples in one message
  cells: 2000000,    // values a series may hold (ring rows x columns): 16 MB, 32 with std
};
const TEXT = new TextDecoder("utf-8", { fatal: true });

function asBytes(payload) {
  if (payload instanceof Uint8Array) return payload;
  if (payload instanceof ArrayBuffer) return new Uint8Array(payload);
  if (typeof payload === "string") return new TextEncoder().encode(payload);
  throw new Error("payload: not bytes");
}

// A JSON object (status, meta, health): throws unless the payload is a JSON object.
function parseObject(payload) {
  const b = asBytes(payload);
  let obj;
  try {
    obj = JSON.parse(TEXT.decode(b));
  } catch (e) {
    throw new Error("not JSON: " + e.message);
  }
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) {
    throw new Error("not a JSON object");
  }
  return obj;
}

function isBinaryEstimates(b) {
  return b.length >= 4 && b[0] === VSE_MAGIC[0] && b[1] === VSE_MAGIC[1] &&
    b[2] === VSE_MAGIC[2] && b[3] === VSE_MAGIC[3];
}

// Estimates batch -> {seq0, n, ncol, t (Float64Array n, device time [s]),
// v (Float64Array n*ncol, row major, NaN for null), s (same or null), flags (Uint8Array n)}.
function parseEstimates(payload) {
  const b = asBytes(payload);
  return isBinaryEstimates(b) ? parseBinary(b) : parseJsonEstimates(b);
}

// Binary layout (edge/daemon/payloads.py): header, t_ns (n x i8), values (n x ncol f8),
// flags (n x u1), and in version 2 the standard deviations (n x ncol f8) after the flags.
// The header is checked against the payload's length before anything is allocated.
function parseBinary(b) {
  if (b.length < VSE_HEADER) throw new Error("binary estimates: header truncated");
  const hv = new DataView(b.buffer, b.byteOffset, VSE_HEADER);
  const version = hv.getUint16(4, true);
  if (version !== 1 && version !== 2) throw new Error("binary estimates: unsupported version " + version);
  const ncol = hv.getUint16(6, true);
  const n = hv.getUint32(8, true);
  if (ncol > LIMITS.columns) throw new Error(`binary estimates: ${ncol} columns (at most ${LIMITS.columns})`);
  if (n > LIMITS.rows) throw new Error(`binary estimates: ${n} samples (at most ${LIMITS.rows})`);
  const want = VSE_HEADER + 8 * n + 8 * n * ncol + n + (version === 2 ? 8 * n * ncol : 0);
  if (b.length !== want) {
    throw new Error(`binary estimates: ${b.length} bytes, header says ${want} (version ${version}, n ${n}, ncol ${ncol})`);
  }
  const seq = hv.getBigInt64(16, true);
  if (seq < 0n || seq + BigInt(n) > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`binary estimates: seq ${seq} out of range`);
  const seq0 = Number(seq);
  // copy so that the typed-array views below are 8-byte aligned
  const buf = b.buffer.slice(b.byteOffset, b.byteOffset + b.length);
  const dv = new DataView(buf);
  const t = new Float64Array(n);
  for (let i = 0; i < n; i++) t[i] = Number(dv.getBigInt64(VSE_HEADER + 8 * i, true)) / 1e9;
  const v = new Float64Array(buf, VSE_HEADER + 8 * n, n * ncol);
  const fo = VSE_HEADER + 8 * n + 8 * n * ncol;
  const flags = new Uint8Array(buf, fo, n);
  // the std block follows the flags (n bytes): not 8-aligned in general, so copied
  const s = version === 2 ? new Float64Array(buf.slice(fo + n, fo + n + 8 * n * ncol)) : null;
  return { seq0, n, ncol, t, v, s, flags };
}

function numberOrNaN(x, what) {
  if (x === null) return NaN;
  if (typeof x !== "number") throw new Error(what + ": not a number");
  return x;
}

function matrix(rows, n, what) {
  if (!Array.isArray(rows) || rows.length !== n) throw new Error(`'${what}' must have ${n} rows`);
  const ncol = n ? (Array.isArray(rows[0]) ? rows[0].length : -1) : 0;
  if (ncol < 0) throw new Error(`'${what}' rows must be arrays`);
  if (ncol > LIMITS.columns) throw new Error(`'${what}': ${ncol} columns (at most ${LIMITS.columns})`);
  const out = new Float64Array(n * ncol);
  for (let i = 0; i < n; i++) {
    const r = rows[i];
    if (!Array.isArray(r) || r.length !== ncol) throw new Error(`'${what}' row ${i}: not ${ncol} values`);
    for (let j = 0; j < ncol; j++) out[i * ncol + j] = numberOrNaN(r[j], `'${what}'[${i}][${j}]`);
  }
  return { out, ncol };
}

function parseJsonEstimates(b) {
  const d = parseObject(b);
  const n = d.n;
  if (!Number.isInteger(n) || n < 0 || n > LIMITS.rows) throw new Error("'n' missing or not a count");
  if (!Number.isSafeInteger(d.seq) || d.seq < 0) throw new Error("'seq' missing or not an integer");
  if (!Array.isArray(d.t_ns) || d.t_ns.length !== n) throw new Error(`'t_ns' must have ${n} values`);
  if (!Array.isArray(d.flags) || d.flags.length !== n) throw new Error(`'flags' must have ${n} values`);
  const t = new Float64Array(n);
  const flags = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    if (typeof d.t_ns[i] !== "number") throw new Error(`'t_ns'[${i}]: not a number`);
    t[i] = d.t_ns[i] / 1e9;
    if (!Number.isInteger(d.flags[i])) throw new Error(`'flags'[${i}]: not an integer`);
    flags[i] = d.flags[i];
  }
  const v = matrix(d.v, n, "v");
  let s = null;
  if (d.s !== undefined && d.s !== null) {
    const sm = matrix(d.s, n, "s");
    if (sm.ncol !== v.ncol) throw new Error(`'s' has ${sm.ncol} columns, 'v' ${v.ncol}`);
    s = sm.out;
  }
  return { seq0: d.seq, n, ncol: v.ncol, t, v: v.out, s, flags };
}

// Raw measured channels (optional `raw` topic): same layouts as estimates.
const parseRaw = parseEstimates;

// meta: the lists the page reads (names of columns, forces, outputs, channels) are checked
// against LIMITS; a meta beyond them is a bad payload, not a page with 300,000 plots.
function parseMeta(payload) {
  const m = parseObject(payload);
  for (const key of ["columns", "std_columns", "forces", "outputs", "channels"]) {
    const a = m[key];
    if (a === undefined) continue;
    if (!Array.isArray(a)) throw new Error(`meta '${key}': not a list`);
    if (a.length > LIMITS.columns) throw new Error(`meta '${key}': ${a.length} entries (at most ${LIMITS.columns})`);
    for (let i = 0; i < a.length; i++) {
      const x = a[i];
      const name = key.endsWith("columns") ? x : (x && typeof x === "object" ? x.name : undefined);
      if (typeof name !== "string") throw new Error(`meta '${key}'[${i}]: no name`);
      if (name.length > LIMITS.name) throw new Error(`meta '${key}'[${i}]: a name of ${name.length} characters`);
    }
  }
  if (m.rate !== undefined && !(typeof m.rate === "number" && m.rate > 0 && m.rate < 1e6)) {
    throw new Error("meta 'rate': not a rate in samples/s");
  }
  return m;
}

if (typeof module !== "undefined") {
  module.exports = { parseObject, parseEstimates, parseRaw, parseMeta, LIMITS };
}
