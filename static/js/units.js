// How numbers read on cards and on chart axes, in one place, so a chart and the card beside it agree:
// sizes in binary units (KiB, MiB, GiB: 1 KiB = 1024 B) and log axes whose ticks are whole values with
// their magnitude (1, 2, 5, 10, 20 …, or decades), never Plotly's bare minor digits ("6 7 8 9 100 2 3").
//   formatBytes(2040109) → "1.95 MiB"; bytesUnit(3e6) → {scale: 1048576, name: "MiB"};
//   logTicks(40, 700) → {tickmode: "array", tickvals: [50, 100, 200, 500], ticktext: ["50", "100", "200", "500"]}

const BYTE_UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

/** A size in binary units, `digits` significant figures: 2040109 → "1.95 MiB", 131072 → "128 KiB". */
export function formatBytes(bytes, digits = 3) {
  if (!Number.isFinite(bytes)) return "–";
  let value = bytes;
  let i = 0;
  while (Math.abs(value) >= 1024 && i < BYTE_UNITS.length - 1) {
    value /= 1024;
    i += 1;
  }
  // Whole bytes, and no "1.3e+2": below 1000 at least the integer part is kept.
  const shown = i === 0 ? Math.round(value) : Number(value.toPrecision(Math.max(digits, String(Math.trunc(Math.abs(value))).length)));
  return `${shown.toLocaleString("en-US")} ${BYTE_UNITS[i]}`;
}

/** The binary unit a linear axis reaching `maxBytes` is drawn in: its divisor and name ("MiB"). */
export function bytesUnit(maxBytes) {
  let i = 0;
  while (Math.abs(maxBytes) >= 1024 ** (i + 1) && i < BYTE_UNITS.length - 1) i += 1;
  return { scale: 1024 ** i, name: BYTE_UNITS[i] };
}

/** A tick value as text with its magnitude: 0.05 → "0.05", 2000 → "2k", 3e9 → "3G". */
export function tickText(v) {
  const prefixes = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [size, prefix] of prefixes) {
    if (Math.abs(v) >= size) return `${Number((v / size).toPrecision(3))}${prefix}`;
  }
  return String(Number(v.toPrecision(3)));
}

const MAX_TICKS = 7;

/** Ticks for a decimal log axis spanning [lo, hi] (data units, lo > 0), each labelled with its magnitude:
 * decades over a long span (every one, or every 2nd, 3rd …), 1-2-5 steps over a shorter one, and finer steps
 * (1-2-3-5-7, then every digit) over a span too short for those. Spread into a Plotly axis. */
export function logTicks(lo, hi, format = tickText) {
  if (!(lo > 0) || !(hi >= lo)) return {};
  const first = Math.floor(Math.log10(lo));
  const last = Math.ceil(Math.log10(hi));
  const inside = (v) => v >= lo * 0.999 && v <= hi * 1.001;
  const series = (mantissas) => {
    const vals = [];
    for (let e = first; e <= last; e += 1) for (const m of mantissas) vals.push(Number((m * 10 ** e).toPrecision(3)));
    return vals.filter(inside);
  };
  let vals = series([1]);
  if (vals.length > MAX_TICKS) {
    const every = Math.ceil(vals.length / MAX_TICKS);
    vals = vals.filter((v) => Math.round(Math.log10(v)) % every === 0);
  }
  for (const mantissas of [[1, 2, 5], [1, 2, 3, 5, 7], [1, 2, 3, 4, 5, 6, 7, 8, 9]]) {
    if (vals.length >= 3) break;
    const finer = series(mantissas);
    if (finer.length <= MAX_TICKS || vals.length < 2) vals = finer.length > MAX_TICKS ? finer.filter((_, i) => i % 2 === 0) : finer;
  }
  if (vals.length < 2) vals = [lo, hi].map((v) => Number(v.toPrecision(3)));
  return { tickmode: "array", tickvals: vals, ticktext: vals.map(format) };
}

/** Ticks for a log axis of bytes spanning [lo, hi]: powers of two labelled in binary units
 * ("1 KiB", "32 MiB", "1 GiB"), at most MAX_TICKS of them. */
export function bytesLogTicks(lo, hi) {
  if (!(lo > 0) || !(hi >= lo)) return {};
  const first = Math.ceil(Math.log2(lo) - 1e-9);
  const last = Math.floor(Math.log2(hi) + 1e-9);
  const step = [1, 2, 5, 10].find((s) => Math.floor(last / s) - Math.ceil(first / s) + 1 <= MAX_TICKS) || 20;
  const vals = [];
  for (let e = Math.ceil(first / step) * step; e <= last; e += step) vals.push(2 ** e);
  return { tickmode: "array", tickvals: vals, ticktext: vals.map((v) => formatBytes(v)) };
}

/** Ticks for a linear axis of bytes from 0 to maxBytes, in the binary unit maxBytes reads in, stepping by 1, 2,
 * 2.5 or 5 × 10^k of that unit: bytesTicks(460000) → "0 KiB", "100 KiB" … "400 KiB". Spread into a Plotly axis. */
export function bytesTicks(maxBytes) {
  if (!(maxBytes > 0)) return {};
  const { scale, name } = bytesUnit(maxBytes);
  const top = maxBytes / scale;
  const rough = top / 5;
  const power = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * power).find((s) => top / s <= 6);
  const vals = [];
  for (let v = 0; v <= top + 1e-9; v += step) vals.push(Number(v.toPrecision(6)));
  return { tickmode: "array", tickvals: vals.map((v) => v * scale), ticktext: vals.map((v) => `${v.toLocaleString("en-US")} ${name}`) };
}
