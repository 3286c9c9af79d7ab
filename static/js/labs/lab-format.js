// What the lab shows, as pure functions of the server's table (labs/table.py): the table's cells, the queue line,
// the chart's traces and its text summary. No DOM here, so node tests read them (tests/js/lab-format.test.mjs).
import { queueText } from "../ws-client.js";

/** As the server's feedback writes numbers (labs/grading.py `fmt`): 190, 46.1, 4.12. */
export function fmt(value) {
  if (value >= 100) return Math.round(value).toLocaleString("en-US");
  return value >= 10 ? value.toFixed(1) : value.toFixed(2);
}

export function ordinal(n) {
  const tens = n % 100;
  const suffix = tens >= 11 && tens <= 13 ? "th" : ({ 1: "st", 2: "nd", 3: "rd" }[n % 10] || "th");
  return `${n}${suffix}`;
}

/** A row's status while its run waits for a worker: "Queued: 2nd in line, about 40 s"; while no worker is warm,
 * what the demos say then (the shared client's words: a position means nothing until a worker takes runs). */
export function queuedText(frame) {
  if (frame.warming) return `Queued. ${queueText(frame)}`;
  const eta = frame.eta_s >= 1 ? `, about ${Math.round(frame.eta_s)} s` : "";
  return `Queued: ${ordinal(frame.position)} in line${eta}`;
}

/** The cells of one row: runs, median, spread, and what measured them. */
export function rowCells(row, metric) {
  const stats = row.stats[metric];
  const active = row.active ? ` (${row.active} in progress)` : "";
  const engine = row.engine_version ? ` · engine ${row.engine_version.slice(0, 8)}` : "";
  return {
    runs: `${row.runs} of ${row.needed}${active}`,
    median: stats ? fmt(stats.median) : "—",
    spread: stats ? `${fmt(stats.min)}–${fmt(stats.max)}` : "—",
    setup: row.runs ? `${row.device || "?"} · ${row.dtype || "?"}${engine}${row.mixed_setup ? " (not all on the same setup)" : ""}` : "—",
  };
}

/** One bar per row with runs: its median, whiskers to its slowest and fastest run. */
export function chartTraces(table) {
  const metric = table.metric;
  const rows = table.rows.filter((r) => r.stats[metric]);
  const s = (r) => r.stats[metric];
  return [{
    type: "bar", x: rows.map((r) => r.label), y: rows.map((r) => s(r).median), marker: { color: "#14213d" },
    error_y: { type: "data", symmetric: false, array: rows.map((r) => s(r).max - s(r).median),
      arrayminus: rows.map((r) => s(r).median - s(r).min), color: "#e07a1f", thickness: 2, width: 8 },
    hovertemplate: "%{x}: median %{y:.3~g}<extra></extra>",
  }];
}

/** The chart in words, for screen readers (the chart's aria-label). */
export function chartSummary(table) {
  const m = table.metrics[table.metric];
  const rows = table.rows.filter((r) => r.stats[table.metric]);
  if (!rows.length) return `No runs yet: the chart will show each configuration's median ${m.label}.`;
  const parts = rows.map((r) => {
    const s = r.stats[table.metric];
    return `${r.label} ${fmt(s.median)} ${m.unit} (${fmt(s.min)}–${fmt(s.max)}, ${r.runs} run${r.runs === 1 ? "" : "s"})`;
  });
  return `Median ${m.label} of your runs: ${parts.join("; ")}.`;
}

/** What the submit button says it waits for, or "" once every row has its runs. */
export function missingText(table) {
  if (table.complete) return "";
  return `Still to run before you can submit: ${table.missing.map((m) => `${m.label} (${m.runs} of ${table.repeats})`).join(", ")}.`;
}

export function scoreText(attempt) {
  if (!attempt.submitted_at || attempt.score === null || attempt.score === undefined) return "";
  return `Submitted. Score: ${Math.round(attempt.score * 100)} % of the graded questions right.`;
}
