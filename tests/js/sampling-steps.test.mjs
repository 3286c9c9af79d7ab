// Sampling steps → timeline steps: the bars say which tokens the cut kept and what the draw gave each, and the
// caption is computed from the same numbers (temperature's effect on the leader, the kept set, the token drawn).
import assert from "node:assert/strict";
import test from "node:test";

import { cutsText, percent, samplingSteps, stepBars, stepCaption } from "../../static/js/demos/sampling-steps.js";

const step = (over) => ({ type: "sampling_step", step: 0, token_id: 20, rank: 1, top_ids: [10, 20, 30, 40],
  top_texts: [" Paris", " the", " London", "\n"], logits: [9, 7, 6, 5], probs: [0.6, 0.2, 0.1, 0.05],
  probs_t: [0.7, 0.18, 0.07, 0.03], n_kept: 2, kept_mass: 0.88, ...over });

test("bars: the first n_kept tokens are kept, the draw renormalizes them, the drawn one is marked", () => {
  const bars = stepBars(step());
  assert.deepEqual(bars.map((b) => b.kept), [true, true, false, false]);
  assert.ok(Math.abs(bars[0].drawn - 0.7 / 0.88) < 1e-12 && bars[2].drawn === 0);
  assert.ok(Math.abs(bars[0].drawn + bars[1].drawn - 1) < 1e-12); // the kept set's draw adds up to 1
  assert.deepEqual(bars.map((b) => b.chosen), [false, true, false, false]);
  assert.equal(bars[3].label, "4. '\\n'");
});

test("caption: temperature, the cuts that are on, the kept set and the token drawn", () => {
  const params = { temperature: 0.7, top_k: 40, top_p: 0.9, min_p: 0 };
  assert.equal(cutsText(params), "top-k 40 and top-p 0.9");
  assert.equal(stepCaption(step(), params, { index: 2, total: 12, vocab: 49152 }),
    "Step 3 of 12: temperature 0.7 moves ' Paris' from 60% to 70%; top-k 40 and top-p 0.9 keep 2 tokens of 49,152 " +
    "(88% of the probability); drawn: ' the' (number 2 in the ranking, 20% after renormalizing).");
  assert.match(stepCaption(step({ rank: 0, token_id: 10 }), { temperature: 1, top_p: 1 }),
    /^Step 1: at temperature 1 ' Paris' has 70%; no cut: all 2 tokens stay in the draw; drawn: ' Paris' \(the most likely, 80% after/);
  assert.equal(stepCaption(step({ rank: 0, n_kept: 1, probs_t: [1, 0, 0, 0], kept_mass: 1 }), { temperature: 0 }),
    "Step 1: greedy decoding takes the argmax, ' Paris' (60% at temperature 1); every other token is cut.");
  assert.equal(percent(0.004), "0.40%");
});

test("a run: one step per sampling_step, each with the text it continued; the token's text comes from its event", () => {
  const fromEvent = samplingSteps();
  assert.equal(fromEvent({ type: "run_started", prompt_tokens: ["The", " capital"], params: { temperature: 0.8, max_new_tokens: 2 } }), null);
  assert.equal(fromEvent({ type: "token", step: 0, text: " the" }), null);
  const first = fromEvent(step());
  assert.equal(first.context, "The capital");
  assert.equal(first.token, " the");
  assert.match(first.caption, /^Step 1 of 2: /);
  fromEvent({ type: "token", step: 1, text: " far" });
  const second = fromEvent(step({ step: 1, rank: 25, n_kept: 400 })); // drawn from outside the 4 listed
  assert.equal(second.context, "The capital the");
  assert.equal(second.token, " far");
  assert.match(second.caption, /drawn: a token outside the 4 shown \(number 26 in the ranking\)\.$/);
  assert.equal(fromEvent({ type: "run_finished" }), null);
});
