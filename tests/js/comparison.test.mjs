// The comparison block's words: a verdict a student can trust from medians and spreads, the counters beside.
// Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { comparisonTraces, drawComparison, fmtCounter, verdictText } from "../../static/js/demos/comparison.js";

const side = (label, times, counters) => ({ label, times_s: times, median_s: [...times].sort()[1], low_s: Math.min(...times),
  high_s: Math.max(...times), counters });
const event = (over) => ({ type: "comparison", metric: "time to first token", repeats: 3, spread: "min–max",
  sides: [side("without the cache", [0.7, 0.71, 1.04], { "prompt tokens prefilled": 510 }),
    side("with the prefix cache", [0.12, 0.15, 0.5], { "prompt tokens prefilled": 190 })],
  claim: "with the prefix cache", faster: "with the prefix cache", within_noise: false, other_sequences: 0, cpu_load_1m: 4.5, ...over });

test("separated spreads: the faster side, both medians and the ratio; agreement with the lesson", () => {
  const text = verdictText(event());
  assert.match(text, /“with the prefix cache” was faster: median 150\.0 ms against 710\.0 ms \(4\.73×\)/);
  assert.match(text, /That is what the lesson says\./);
  assert.match(text, /No other run's sequences shared its forward passes\. Machine load \(1 min\): 4\.5\./);
});

test("overlapping spreads: within noise, the counters named as the mechanism, the lesson's expectation kept", () => {
  const text = verdictText(event({ within_noise: true }));
  assert.match(text, /^Within noise: over 3 alternating repeats the min–max ranges overlap/);
  assert.match(text, /The lesson expects “with the prefix cache” to be faster/);
  assert.doesNotMatch(text, /was faster/);
});

test("a run against the lesson says so; shared forward passes are counted with the right plural", () => {
  const text = verdictText(event({ faster: "without the cache", other_sequences: 1, cpu_load_1m: -1 }));
  assert.match(text, /this run disagrees/);
  assert.match(text, /Up to 1 sequence of other runs shared its forward passes\.$/);
});

test("counters: bytes in binary units, counts as integers", () => {
  assert.equal(fmtCounter("KV bytes read from the cache", 1382400), "1.32 MiB");
  assert.equal(fmtCounter("score bytes held", 512), "512 B");
  assert.equal(fmtCounter("forward passes", 1300), "1,300");
  assert.equal(fmtCounter("forward passes", undefined), "–");
});

test("the chart draws what the comparison measured: a bar per side at its median, error bars to its spread", () => {
  const ev = event({ within_noise: true });
  const traces = comparisonTraces(ev);
  assert.deepEqual(traces.map((t) => [t.x[0], Math.round(t.y[0])]), [["without the cache", 710], ["with the prefix cache", 150]]);
  const [a, b] = traces.map((t) => t.error_y);
  assert.deepEqual([a.array, a.arrayminus].map((v) => Math.round(v[0])), [330, 10]); // 1.04 s high, 0.70 s low
  assert.deepEqual([b.array, b.arrayminus].map((v) => Math.round(v[0])), [350, 30]);
  const block = { chart: null, summary: { textContent: "" } };
  drawComparison(null, block, ev); // the words come even before the chart library has loaded
  assert.match(block.summary.textContent, /^time to first token, 3 alternating repeats per side — without the cache: median 710\.0 ms \(min–max 700\.0 ms – 1040\.0 ms\)/);
  assert.match(block.summary.textContent, /The ranges overlap: within noise\.$/);
});
