// The KV-cache demo's event → step logic: which K/V columns each forward writes, what the cache holds, the
// caption, with and without the cache.
import assert from "node:assert/strict";
import { test } from "node:test";
import { gridRow, kvSteps } from "../../static/js/demos/kv-cache-steps.js";

const started = (useCache) => ({ type: "run_started", prompt_tokens: ["The", " capital", " of", " France", " is"],
  n_layers: 30, kv_bytes_per_token: 46080, params: { use_cache: useCache, max_new_tokens: 4 } });
const token = (step, text, useCache) => ({ type: "token", phase: step ? "decode" : "prefill", step, text,
  position: 5 + step, n_input_tokens: step === 0 || !useCache ? 5 + step : 1,
  kv_bytes_total: useCache ? (5 + step) * 46080 : 0 });

function run(useCache) {
  const fromEvent = kvSteps();
  assert.equal(fromEvent(started(useCache)), null);
  return [" Paris", ".", "\n", "It"].map((t, i) => fromEvent(token(i, t, useCache)));
}

test("with the cache the prompt fills its columns at once, then one new column per token", () => {
  const steps = run(true);
  assert.deepEqual(steps.map((s) => s.written), [[0, 5], [5, 6], [6, 7], [7, 8]]);
  assert.deepEqual(steps.map((s) => s.cached), [5, 6, 7, 8]);
  assert.equal(steps[0].run.capacity, 8);
  assert.deepEqual(gridRow(steps[0]), [2, 2, 2, 2, 2, null, null, null]);
  assert.deepEqual(gridRow(steps[2]), [1, 1, 1, 1, 1, 1, 2, null]);
  assert.match(steps[0].caption, /^Prefill: the 5 prompt tokens enter the cache at once: 5 new columns \(30 layers × K and V\); cache now 5 positions, 225 KiB\. Out comes “ Paris”\.$/);
  assert.equal(steps[2].caption, "Token 2 “.” goes in: 1 new column (30 layers × K and V); cache now 7 positions, 315 KiB; " +
    "without the cache this step recomputes 7 positions. Out comes “↵”.");
  // Computed so far: each position once with the cache (= what it holds), every position again without.
  assert.deepEqual(steps.map((s) => s.withCacheBytes / 46080), [5, 6, 7, 8]);
  assert.deepEqual(steps.map((s) => s.withoutCacheBytes / 46080), [5, 11, 18, 26]);
  assert.equal(steps[3].heldBytes, 8 * 46080);
  // What the cards show for a step comes with it: tokens made so far, this forward's inputs.
  assert.deepEqual(steps.map((s) => [s.generated, s.nInputs]), [[1, 5], [2, 1], [3, 1], [4, 1]]);
});

test("without the cache every forward recomputes every position and keeps none", () => {
  const steps = run(false);
  assert.deepEqual(steps.map((s) => s.written), [[0, 5], [0, 6], [0, 7], [0, 8]]);
  assert.deepEqual(steps.map((s) => s.cached), [0, 0, 0, 0]);
  assert.deepEqual(gridRow(steps[1]), [2, 2, 2, 2, 2, 2, null, null]);
  assert.equal(steps[1].caption, "Step 2, no cache: all 6 positions recomputed (30 layers × K and V, 270 KiB) and thrown " +
    "away; nothing is kept. Out comes “.”.");
});

test("events other than tokens make no step; a token before run_started is ignored", () => {
  const fromEvent = kvSteps();
  assert.equal(fromEvent(token(0, "x", true)), null);
  fromEvent(started(true));
  assert.equal(fromEvent({ type: "run_finished" }), null);
  assert.equal(fromEvent({ type: "comparison_sample" }), null);
});
