// Serving-metrics events → timeline steps: every request's timeline up to the moment shown, the latency figures of
// the requests that reached it (nearest-rank percentiles, as the runner computes them), and captions written from
// those same numbers.
import assert from "node:assert/strict";
import test from "node:test";

import { figuresSoFar, percentile, secs, servingSteps, summaryCaption, verdict } from "../../static/js/demos/serving-metrics-steps.js";

const moment = (over) => ({ type: "serving_request", request_id: 0, phase: "arrived", t_s: 0, prompt: "The capital of France is",
  n_prompt_tokens: 5, in_flight: 1, n_finished: 0, token_s: [], batch_sizes: [], ttft_s: null, tpot_s: null, e2e_s: null,
  met_slo: null, ...over });
const targets = { ttft_slo_s: 0.5, tpot_slo_s: 0.1 };

test("percentile: nearest rank, the same as the runner's; a mean hides the tail", () => {
  const values = [...Array(19).fill(0.1), 5];
  assert.equal(percentile(values, 0.5), 0.1);
  assert.equal(percentile(values, 0.95), 0.1);
  assert.equal(percentile(values, 0.99), 5);
  assert.equal(percentile(Array.from({ length: 100 }, (_, i) => i + 1), 0.99), 99);
  assert.equal(percentile([], 0.5), 0);
  assert.equal(secs(0.8504), "850 ms");
  assert.equal(secs(1.236), "1.24 s");
});

test("moments: arrival, first token (TTFT = first token − arrival) and finish, each request's timeline kept", () => {
  const steps = servingSteps(targets);
  const a = steps.fromEvent(moment({}));
  assert.equal(a.caption, "At 0.00 s request #0 arrives (a 5-token prompt): 1 request in flight, 0 finished.");
  steps.fromEvent(moment({ request_id: 1, t_s: 0.25, in_flight: 2 }));
  const first = steps.fromEvent(moment({ phase: "first_token", t_s: 0.4, ttft_s: 0.4, in_flight: 2 }));
  assert.equal(first.caption, "At 0.40 s request #0 gets its first token, 400 ms after it arrived at 0.00 s: its TTFT. " +
    "2 requests in flight, 0 finished.");
  assert.deepEqual(first.requests.map((r) => [r.id, r.arrival, r.first]), [[0, 0, 0.4], [1, 0.25, null]]);
  assert.deepEqual(first.ttft, [0.4]);
  const done = steps.fromEvent(moment({ phase: "finished", t_s: 0.7, token_s: [0.4, 0.55, 0.7], batch_sizes: [2, 2, 1],
    ttft_s: 0.4, tpot_s: 0.15, e2e_s: 0.7, met_slo: false, in_flight: 1, n_finished: 1 }));
  assert.equal(done.caption, "At 0.70 s request #0 finishes: 3 tokens, TTFT 400 ms, TPOT 150 ms, end to end 700 ms; " +
    "it missed: TPOT over the 100 ms target. It shared forward passes with up to 1 other request. 1 request in flight, 1 finished.");
  assert.deepEqual(done.itl.map((x) => Math.round(x * 1000)), [150, 150]);
  assert.equal(done.requests[0].end, 0.7);
  assert.equal(first.requests[0].end, null, "an earlier step keeps the timeline as it was then");
  assert.equal(steps.fromEvent({ type: "token" }), null);
});

test("verdict: which target a request missed", () => {
  assert.equal(verdict({ met_slo: true }, targets), "it met both targets");
  assert.equal(verdict({ met_slo: false, ttft_s: 2, tpot_s: 0.2 }, targets),
    "it missed: TTFT over the 500 ms target, TPOT over the 100 ms target");
});

test("figures so far: TTFT of the requests with a first token, ITL of the finished ones", () => {
  const f = figuresSoFar([{ arrival: 0, first: 0.3, end: 0.5, tokens: [0.3, 0.4, 0.5] }, { arrival: 0.2, first: 1.2, end: null, tokens: [] },
    { arrival: 1, first: null, end: null, tokens: [] }]);
  assert.deepEqual(f.ttft.map((x) => Math.round(x * 10) / 10), [0.3, 1]);
  assert.equal(f.ttftP99, f.ttft[1]);
  assert.equal(f.itl.length, 2);
});

test("summary: percentiles beside the mean, goodput beside throughput, Little's law", () => {
  const s = { type: "serving_metrics_summary", rate_per_s: 4, duration_s: 10, slots: 16, n_requests: 40, n_finished: 40,
    span_s: 11.5, output_tokens: 320, throughput_tokens_per_s: 27.826, requests_per_s: 3.478, n_met_slo: 31,
    goodput_requests_per_s: 2.696, ttft_slo_s: 1, tpot_slo_s: 0.3, ttft_p50_s: 0.21, ttft_p99_s: 1.9, ttft_mean_s: 0.35,
    tpot_p50_s: 0.1, tpot_p99_s: 0.2, itl_p50_s: 0.09, itl_p99_s: 0.4, e2e_p50_s: 0.9, e2e_p99_s: 3, e2e_mean_s: 1.1,
    mean_in_flight: 3.826, max_in_flight: 9 };
  assert.equal(summaryCaption(s), "40 requests in 11.50 s: throughput 27.8 tokens/s, 3.48 requests/s. TTFT p50 210 ms, " +
    "p99 1.90 s (mean 350 ms); inter-token latency p50 90 ms, p99 400 ms. 31 of 40 met both targets (TTFT ≤ 1.00 s, " +
    "TPOT ≤ 300 ms): goodput 2.70 requests/s. Little's law: 3.48 requests/s × 1.10 s mean latency = 3.8 requests in " +
    "flight on average (at most 9 at once; the engine runs up to 16 in one forward pass).");
  const step = servingSteps().fromEvent(s);
  assert.equal(step.kind, "summary");
  assert.match(summaryCaption({ ...s, n_finished: 38 }), /^38 requests \(2 never finished\) in /);
});
