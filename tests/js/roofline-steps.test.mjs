// The prefill-vs-decode roofline's event → step logic: each forward as a point (FLOP/byte, achieved FLOP/s) and
// what bounds it under the server's measured roofs.
import assert from "node:assert/strict";
import { test } from "node:test";
import { boundOf, rooflineSteps } from "../../static/js/demos/roofline-steps.js";

const roofs = { type: "machine_roofs", label: "This server", note: "measured", bandwidth_bytes_per_s: 20e9,
  peak_flops_per_s: 100e9 }; // ridge: 5 FLOP/byte
const token = (step, flops, bytes, t) => ({ type: "token", phase: step ? "decode" : "prefill", step,
  n_input_tokens: step ? 1 : 20, flops, bytes_moved: bytes, step_time_s: t });

test("the bound is the roof on the point's side of the ridge, and how far below it the point ran", () => {
  assert.deepEqual(boundOf(0.5, 2e9, { bandwidth: 20e9, peak: 100e9 }), { by: "memory", ridge: 5, roof: 10e9, below: 5 });
  assert.deepEqual(boundOf(8, 20e9, { bandwidth: 20e9, peak: 100e9 }), { by: "compute", ridge: 5, roof: 100e9, below: 5 });
});

test("each token event is a point; the caption says what bounds it and by how much", () => {
  const fromEvent = rooflineSteps();
  assert.equal(fromEvent({ type: "run_started" }), null);
  assert.equal(fromEvent(roofs), null);
  const prefill = fromEvent(token(0, 4e9, 5e8, 0.2));
  const decode = fromEvent(token(1, 2.7e8, 5.4e8, 0.15));
  assert.equal(prefill.index, 0);
  assert.equal(decode.index, 1);
  assert.equal(prefill.points, decode.points);
  assert.equal(prefill.intensity, 8);
  assert.equal(prefill.bound.by, "compute");
  assert.equal(decode.bound.by, "memory");
  assert.equal(prefill.caption, "Prefill (20 tokens in one pass): 8.0 FLOP/byte, 20 GFLOP/s achieved, right of the ridge " +
    "(5.0 FLOP/byte), so compute bounds it: the roof there is the measured 100 GFLOP/s, 5.0× what it achieved.");
  assert.equal(decode.caption, "Decode step 1 (1 token): 0.50 FLOP/byte, 1.8 GFLOP/s achieved, left of the ridge " +
    "(5.0 FLOP/byte), so memory bandwidth bounds it: the roof there is 10 GFLOP/s (20 GB/s × 0.50 FLOP/byte); " +
    "it moved 3.6 GB/s, 5.6× what it achieved.");
});

test("a run without measured roofs still places its points and says so", () => {
  const fromEvent = rooflineSteps();
  fromEvent({ type: "run_started" });
  const p = fromEvent(token(0, 4e9, 5e8, 0.2));
  assert.equal(p.bound, null);
  assert.match(p.caption, /carries no measured roofs/);
});

test("a short prefill left of the ridge says why, and from about how many tokens prefill crosses it", () => {
  const fromEvent = rooflineSteps();
  fromEvent(roofs);
  const short = fromEvent(token(0, 2e9, 1e9, 0.2)); // 20 tokens at 2 FLOP/byte: the ridge (5) at ~50 tokens
  assert.equal(short.bound.by, "memory");
  assert.match(short.caption, /A prompt this short is the exception: .* crosses the ridge from roughly 50 tokens on\.$/);
  const decode = fromEvent(token(1, 2.7e8, 5.4e8, 0.15));
  assert.doesNotMatch(decode.caption, /exception/); // decode is memory-bound by nature: no excuse needed
});

test("a point above its roof is called a measurement problem, never a figure below 1×", () => {
  const fromEvent = rooflineSteps();
  fromEvent(roofs);
  const fast = fromEvent(token(1, 2.7e8, 5.4e8, 0.025)); // 10.8 GFLOP/s at 0.5 FLOP/byte: the roof there is 10
  assert.ok(fast.bound.below < 1);
  assert.match(fast.caption, /yet it ran 1\.1× faster than that roof allows, so the roof is a measurement problem/);
  assert.doesNotMatch(fast.caption, /× what it achieved/);
});
