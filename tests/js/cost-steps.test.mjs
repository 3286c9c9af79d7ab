// Token-cost events → timeline steps: each caption is written from the numbers the chart and cards show.
import assert from "node:assert/strict";
import test from "node:test";

import { costSteps, dollars, pointCaption, summaryCaption } from "../../static/js/demos/cost-steps.js";

const point = (b, rate, tpot) => ({ type: "cost_point", batch_size: b, output_tokens: 16 * b, duration_s: 16 * b / rate,
  output_tokens_per_s: rate, tpot_median_s: tpot, ttft_median_s: 0.05, usd_per_million: 1 / (rate * 3600) * 1e6,
  price_per_hour: 1 });

test("a batch's caption: its throughput, price per million and each request's wait, against batch 1", () => {
  const one = point(1, 40, 0.025);
  assert.equal(pointCaption(one, one), "Batch 1: 1 request decoding together produced 16 tokens in 0.4 s, 40.0 tokens/s, " +
    "so at $1.00 an hour a million tokens cost $6.94; each request waited 25 ms per token (median).");
  const eight = point(8, 160, 0.05);
  assert.equal(pointCaption(eight, one), "Batch 8: 8 requests decoding together produced 128 tokens in 0.8 s, " +
    "160 tokens/s, so at $1.00 an hour a million tokens cost $1.74; each request waited 50 ms per token (median). " +
    "Against batch 1: 4.0× the tokens per second, 4.0× cheaper per token, each request's tokens 2.0× as far apart.");
});

test("the summary: interactive against the cheapest batch, and the target met or not", () => {
  const s = { price_per_hour: 1, target_tpot_s: 0.03, interactive_usd_per_million: 6.944, cheapest_batch: 8,
    cheapest_usd_per_million: 1.736, within_target_batch: 1, within_target_usd_per_million: 6.944 };
  assert.equal(summaryCaption(s), "Interactive, one request at a time: $6.94 a million tokens. Batched (8 at once): " +
    "$1.74, 4.0× cheaper. With a target of 30 ms per token, batch 1 is the cheapest that meets it, at $6.94 a million.");
  assert.match(summaryCaption({ ...s, within_target_batch: null }), /No batch size met the target of 30 ms per token/);
});

test("steps: one per batch size, then the summary; other events make none", () => {
  const steps = costSteps();
  assert.equal(steps.fromEvent(point(1, 40, 0.025)).current, 0);
  const second = steps.fromEvent(point(2, 70, 0.03));
  assert.equal(second.points.length, 2);
  assert.equal(steps.fromEvent({ type: "token" }), null);
  assert.equal(dollars(1234.5), "$1,235");
  assert.equal(dollars(0.5), "$0.500");
});
