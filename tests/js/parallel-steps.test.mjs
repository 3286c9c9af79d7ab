// Model-parallel events → timeline steps: each caption is written from the numbers the bars and cards show.
import assert from "node:assert/strict";
import test from "node:test";

import { ms, parallelSteps, planCaption } from "../../static/js/demos/parallel-steps.js";

const plan = { type: "parallel_plan", split: "tensor", world_size: 2, backend: "gloo", devices: ["cpu", "cpu"],
  n_layers: 30, n_heads: 9, n_kv_heads: 3, ffn_dim: 1536, collectives_per_layer: 2, prompt_tokens: ["The"],
  ranks: [{ rank: 0, kv_groups: [0, 1], query_heads: [0, 1, 2, 3, 4, 5], ffn_columns: [0, 704], weights: 1806336 },
    { rank: 1, kv_groups: [2], query_heads: [6, 7, 8], ffn_columns: [704, 1536], weights: 1732608 }] };
const step = (over) => ({ type: "parallel_step", step: 1, n_tokens: 1, token_id: 5, token_text: " red",
  reference_id: 5, reference_text: " red", same: true, ...over,
  ranks: over.ranks || [{ rank: 0, compute_s: 0.06, comm_s: 0.02, collectives: 60, token_id: 5 },
    { rank: 1, compute_s: 0.05, comm_s: 0.03, collectives: 60, token_id: 5 }] });

test("plan: the uneven head split and the all-reduces a step, from the plan's own numbers", () => {
  assert.equal(planCaption(plan), "Tensor parallel over 2 processes (gloo): 9 query heads on 3 key/value heads do not " +
    "split in two, so rank 0 holds key/value groups 0–1 (query heads 0–5) and MLP columns 0–703, 1,806,336 weights a " +
    "layer; rank 1 holds key/value group 2 (query heads 6–8) and MLP columns 704–1535, 1,732,608 weights a layer. " +
    "Each layer ends its attention and its MLP with one all-reduce: 2 a layer, 60 a step.");
  const pipe = planCaption({ ...plan, split: "pipeline", collectives_per_layer: 0,
    ranks: [{ rank: 0, layers: [0, 15] }, { rank: 1, layers: [15, 30] }] });
  assert.match(pipe, /rank 0 holds the embeddings and layers 0–14, rank 1 layers 15–29 and the head/);
});

test("steps: each rank's compute and communication, and the token beside one process's", () => {
  const steps = parallelSteps();
  assert.equal(steps.fromEvent(plan).kind, "plan");
  const first = steps.fromEvent(step({ step: 0, n_tokens: 5, token_text: " the", reference_text: " the" }));
  const second = steps.fromEvent(step({}));
  assert.equal(second.caption, "Step 1 (one token): rank 0 computed 60.0 ms and spent 20.0 ms in 60 all-reduces " +
    "(25% of its step); rank 1 computed 50.0 ms and spent 30.0 ms in 60 all-reduces (38% of its step). " +
    "The ranks chose ' red', the token one process chose too.");
  assert.match(first.caption, /^Step 0 \(the prompt's 5 tokens at once\)/);
  assert.deepEqual([second.rows.length, second.current, second.tokens, second.identical], [2, 1, " the red", true]);
  assert.equal(second.split, "tensor");  // every step names the split, the card shows it wherever the scrubber lands
  const off = steps.fromEvent(step({ step: 2, token_text: " blue", reference_text: " green", same: false }));
  assert.match(off.caption, /one process chose ' green'\.$/);
  assert.equal(off.identical, false);
  assert.equal(steps.fromEvent({ type: "token" }), null);
});

test("summary: the totals per rank and the verdict", () => {
  const steps = parallelSteps();
  const s = steps.fromEvent({ type: "parallel_summary", split: "tensor", text: " red", reference_text: " red",
    identical: true, n_steps: 12, collectives_per_step: 60, compute_s: [0.75, 0.7], comm_s: [0.25, 0.3] });
  assert.equal(s.caption, "All 12 tokens are the ones one process chose. Over the 11 decode steps, rank 0 computed " +
    "750.0 ms and communicated 250.0 ms (25%); rank 1 computed 700.0 ms and communicated 300.0 ms (30%); 60 all-reduces a step.");
  assert.equal(ms(0.0123), "12.3 ms");
});
