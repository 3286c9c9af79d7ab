// The class dashboard's chart builders (no browser needed). Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  DEFAULT_PALETTE, choiceLayout, choiceTraces, demoTraces, escapeLabel, ratePercent, shorten,
} from "../../static/js/class-dashboard.js";

const question = {
  chart_id: "class-chart-q2", title: "Question 2",
  choices: [
    { label: "1. Decode is memory-bound", rate: 4 / 6, picks: 4, correct: true, top_distractor: false },
    { label: "2. Prefill is parallel", rate: 0.5, picks: 3, correct: true, top_distractor: false },
    { label: "3. <b>Compute</b>-bound & slow", rate: 2 / 6, picks: 2, correct: false, top_distractor: true },
    { label: "4. Never picked", rate: 0, picks: 0, correct: false, top_distractor: false },
  ],
};

test("every choice is in exactly one trace: correct, most-picked wrong, other wrong, coloured as the course", () => {
  const traces = choiceTraces(question);
  assert.deepEqual(traces.map((t) => t.name), ["Correct", "Most-picked wrong", "Other wrong"]);
  assert.deepEqual(traces.map((t) => t.marker.color), [DEFAULT_PALETTE.good, DEFAULT_PALETTE.bad, DEFAULT_PALETTE.muted]);
  assert.equal(traces.flatMap((t) => t.y).length, question.choices.length);
  assert.deepEqual(traces[0].x, [66.7, 50]);
  assert.deepEqual(traces[0].text, ["66.7 % (4)", "50 % (3)"]);
});

test("a kind with no choice draws no empty trace", () => {
  const single = { ...question, choices: question.choices.slice(0, 2) };
  assert.deepEqual(choiceTraces(single).map((t) => t.name), ["Correct"]);
});

test("an author's markup shows as typed, and long texts are shortened on the axis only", () => {
  assert.equal(escapeLabel("<b>x</b> & y"), "&lt;b&gt;x&lt;/b&gt; &amp; y");
  assert.equal(choiceTraces(question)[1].y[0], "3. &lt;b&gt;Compute&lt;/b&gt;-bound &amp; slow");
  assert.equal(shorten("a".repeat(60), 10), `${"a".repeat(9)}…`);
  assert.equal(shorten("  two\n lines "), "two lines");
});

test("the y axis keeps the authored order, top to bottom, with room for every choice", () => {
  const layout = choiceLayout(question);
  assert.equal(layout.yaxis.categoryarray.length, 4);
  assert.equal(layout.yaxis.autorange, "reversed");
  assert.deepEqual(layout.xaxis.range, [0, 100]);
});

test("no answers yet: a rate of null draws as 0", () => {
  assert.equal(ratePercent(null), 0);
  assert.equal(ratePercent(1 / 3), 33.3);
});

test("demo outcomes stack to each demo's run count", () => {
  const demos = [{ demo: "kv-cache", done: 2, cancelled: 1, error: 3, in_progress: 2 },
    { demo: "prefill-decode", done: 1, cancelled: 0, error: 0, in_progress: 0 }];
  const traces = demoTraces(demos);
  assert.deepEqual(traces.map((t) => t.name), ["Done", "Cancelled", "Failed", "In progress"]);
  const heights = demos.map((_, i) => traces.reduce((sum, t) => sum + t.y[i], 0));
  assert.deepEqual(heights, [8, 1]);
});
