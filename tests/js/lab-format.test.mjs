// The lab's table cells, queue line, chart and its words, from a table as labs/table.py sends it.
// Run: node --test tests/js/lab-format.test.mjs
import assert from "node:assert/strict";
import { test } from "node:test";

import { chartSummary, chartTraces, fmt, missingText, ordinal, queuedText, rowCells, scoreText } from "../../static/js/labs/lab-format.js";

const stats = (median, min, max) => ({ decode_tokens_per_s: { median, min, max, n: 3 } });
const table = {
  metric: "decode_tokens_per_s", repeats: 3, complete: false,
  metrics: { decode_tokens_per_s: { label: "decode tokens per second", unit: "tok/s" } },
  rows: [
    { id: "fp32", label: "fp32", runs: 3, needed: 3, active: 0, stats: stats(46.1, 44, 48), device: "cpu", dtype: "float32",
      engine_version: "abcdef0123456789", mixed_setup: false },
    { id: "int4", label: "int4", runs: 2, needed: 3, active: 1, stats: stats(190, 170, 200), device: "cpu", dtype: "float32",
      engine_version: "abcdef0123456789", mixed_setup: true },
    { id: "nf4", label: "NF4", runs: 0, needed: 3, active: 0, stats: {}, device: "", dtype: "", engine_version: "", mixed_setup: false },
  ],
  missing: [{ id: "int4", label: "int4", runs: 2 }, { id: "nf4", label: "NF4", runs: 0 }],
};

test("numbers read as the server's feedback writes them", () => {
  assert.deepEqual([fmt(1234.4), fmt(190), fmt(46.14), fmt(4.126)], ["1,234", "190", "46.1", "4.13"]);
  assert.deepEqual([1, 2, 3, 4, 11, 12, 13, 21, 112].map(ordinal), ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "112th"]);
});

test("a queued row says where it is in line", () => {
  assert.equal(queuedText({ position: 2, eta_s: 41.5 }), "Queued: 2nd in line, about 42 s");
  assert.equal(queuedText({ position: 1, eta_s: 0 }), "Queued: 1st in line");
  assert.match(queuedText({ position: 3, warming: { phase: "loading", warming_s: 12 } }),
    /^Queued\. The demo worker is warming up: loading the model, ~12 s so far/);
});

test("a row's cells: runs (and runs in progress), median, spread, setup", () => {
  assert.deepEqual(rowCells(table.rows[0], table.metric),
    { runs: "3 of 3", median: "46.1", spread: "44.0–48.0", setup: "cpu · float32 · engine abcdef01" });
  const int4 = rowCells(table.rows[1], table.metric);
  assert.equal(int4.runs, "2 of 3 (1 in progress)");
  assert.match(int4.setup, /not all on the same setup/);
  assert.deepEqual(rowCells(table.rows[2], table.metric), { runs: "0 of 3", median: "—", spread: "—", setup: "—" });
});

test("the chart has one bar per row with runs, whiskers to its slowest and fastest run", () => {
  const [bars] = chartTraces(table);
  assert.deepEqual(bars.x, ["fp32", "int4"]);
  assert.deepEqual(bars.y, [46.1, 190]);
  assert.deepEqual(bars.error_y.array.map((v) => +v.toFixed(2)), [1.9, 10]);
  assert.deepEqual(bars.error_y.arrayminus.map((v) => +v.toFixed(2)), [2.1, 20]);
  assert.equal(chartSummary(table),
    "Median decode tokens per second of your runs: fp32 46.1 tok/s (44.0–48.0, 3 runs); int4 190 tok/s (170–200, 2 runs).");
});

test("what the lab still needs before submitting, and the score once submitted", () => {
  assert.equal(missingText(table), "Still to run before you can submit: int4 (2 of 3), NF4 (0 of 3).");
  assert.equal(missingText({ ...table, complete: true }), "");
  assert.equal(scoreText({ submitted_at: "2026-12-07T10:00:00Z", score: 0.5 }), "Submitted. Score: 50 % of the graded questions right.");
  assert.equal(scoreText({ submitted_at: null, score: null }), "");
});
