// Long-context events → timeline steps: each caption is written from the numbers the picture and cards show.
import assert from "node:assert/strict";
import test from "node:test";

import { contextSteps, curves, fmtPpl, keptCount } from "../../static/js/demos/context-steps.js";

const window = { type: "context_window", n_context: 8, n_scored: 4, budgets: [4, 2], sink_tokens: 1,
  policies: [{ policy: "recent", label: "Most recent only" }, { policy: "sinks", label: "Sinks + most recent" }],
  tokens: ["a", "b", "c", "d", "e", "f", "g", "h"], rope_theta: 100000, trained_positions: 8192 };
const point = (over) => ({ type: "eviction_point", policy: "full", label: "Full cache", budget: 8, perplexity: 20,
  mean_nll: Math.log(20), n_scored: 4, kept: [1, 1, 1, 1, 1, 1, 1, 1], ...over });

test("the window is no step; the full cache is the reference every budget is measured against", () => {
  const steps = contextSteps();
  assert.equal(steps.fromEvent(window), null);
  const full = steps.fromEvent(point());
  assert.equal(full.caption, "Full cache: every one of the window's 8 tokens stays. The perplexity of the text's " +
    "last 4 tokens is 20.0; every budget below is measured against it.");
  assert.deepEqual(full.kept.map((p) => p.policy), ["full"]);
  assert.equal(steps.fromEvent({ type: "token" }), null);
});

test("a budget's caption: its perplexity, the ratio to the full cache, the first token kept, the others so far", () => {
  const steps = contextSteps();
  steps.fromEvent(window);
  steps.fromEvent(point());
  const recent = steps.fromEvent(point({ policy: "recent", label: "Most recent 4 only", budget: 4, perplexity: 61.5,
    kept: [0, 0, 0, 0, 1, 1, 1, 1] }));
  assert.equal(recent.caption, "A cache of 4 of the window's 8 tokens, Most recent 4 only: the last 4 tokens' " +
    "perplexity is 61.5, 3.08× the full cache's 20.0. The text's first token is in 0% of the caches at the last token.");
  const sinks = steps.fromEvent(point({ policy: "sinks", label: "Sinks (first 1) + most recent 3", budget: 4, perplexity: 24.25,
    kept: [1, 0, 0, 0, 0, 1, 1, 1] }));
  assert.equal(sinks.caption, "A cache of 4 of the window's 8 tokens, Sinks (first 1) + most recent 3: the last 4 tokens' " +
    "perplexity is 24.3, 1.21× the full cache's 20.0. The text's first token is in 100% of the caches at the last " +
    "token. At 4 tokens so far: Most recent 4 only: 61.5.");
  assert.deepEqual(sinks.kept.map((p) => p.policy), ["recent", "sinks"]);
  assert.equal(keptCount(sinks.ev.kept), 4);
  assert.equal(sinks.current, 2);
  const next = steps.fromEvent(point({ policy: "recent", label: "Most recent 2 only", budget: 2, perplexity: 150.2,
    kept: [0, 0, 0, 0, 0, 0, 1, 1] }));
  assert.deepEqual(next.kept.map((p) => p.policy), ["recent"]);  // a new budget: its panel starts again
  assert.deepEqual(curves(next.points), [
    { policy: "recent", budgets: [4, 2], perplexities: [61.5, 150.2] },
    { policy: "sinks", budgets: [4], perplexities: [24.25] }]);
  assert.equal(fmtPpl(150.2), "150");
  assert.equal(fmtPpl(7.123), "7.12");
});
