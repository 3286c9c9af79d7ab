// Attention-variant events → timeline steps: each caption is written from the numbers the picture and cards show.
import assert from "node:assert/strict";
import test from "node:test";

import { fmtBytes, groupsOf, groupsStep, variantSteps } from "../../static/js/demos/variant-steps.js";

const groups = { type: "kv_groups", layer: 15, n_heads: 6, n_kv_heads: 2, tokens: ["The", " cat", " sat"],
  kv_head_of: [0, 0, 0, 1, 1, 1],
  last_rows: [[0.8, 0.1, 0.1], [0.1, 0.7, 0.2], [0.2, 0.2, 0.6], [1, 0, 0], [0.5, 0.4, 0.1], [0, 0, 1]],
  key_similarity: [[1, -0.12], [-0.12, 1]] };
const variant = (over) => ({ type: "kv_variant", variant: "gqa", label: "GQA as trained (3 KV heads)", kv_heads: 3,
  window: null, sink_tokens: 0, n_tokens: 25, kv_bytes_per_token: 46080, kv_bytes_for_prompt: 1152000, mean_kl: 0,
  top1_agreement: 1, kl_per_position: [], ...over });

test("groups: query heads listed per key/value head; where each looks; how alike the key heads are", () => {
  assert.deepEqual(groupsOf(groups.kv_head_of), [[0, 1, 2], [3, 4, 5]]);
  const step = groupsStep(groups);
  assert.deepEqual(step.top, [0, 1, 2, 0, 0, 2]);
  assert.equal(step.caption, "Layer 15: 6 query heads share 2 key/value heads (query heads 0–2 read key/value head 0, " +
    "3–5 read key/value head 1). Reading the same keys, query heads 0, 1, 2 still look at different tokens from 'sat': " +
    "most at 'The', 'cat', 'sat'. The 2 key/value heads' keys are nearly unrelated (cosine similarity at most 0.12).");
});

test("variants: the cache share and the distance are the measured ones, against the model as trained", () => {
  const steps = variantSteps();
  const first = steps.fromEvent(variant());
  assert.match(first.caption, /^GQA as trained \(3 KV heads\): the cache holds 1\.1 MiB for this 25-token prompt \(100% /);
  const mqa = steps.fromEvent(variant({ variant: "mqa", label: "MQA: the KV heads averaged into 1", kv_heads: 1,
    kv_bytes_per_token: 15360, kv_bytes_for_prompt: 384000, mean_kl: 6.7256, top1_agreement: 0.04 }));
  assert.equal(mqa.caption, "MQA: the KV heads averaged into 1: the cache holds 375 KiB for this 25-token prompt " +
    "(33% of the model as trained; 15.0 KiB a token). The next-token distribution moved by 6.726 nats on average " +
    "(KL from the model as trained), and the most likely next token stayed the same at 4% of the 25 positions.");
  assert.equal(mqa.variants.length, 2);
  assert.equal(mqa.current, 1);
  assert.equal(steps.fromEvent({ type: "token" }), null);
});

test("budget: Llama 3 8B's 128 KiB a token against MHA's 512", () => {
  const step = variantSteps().fromEvent({ type: "kv_budget", bytes_per_value: 2, configs: [
    { model: "Llama 3 8B (GQA, 8 KV heads)", bytes_per_token: 131072 },
    { model: "Llama 3 8B as MHA (32 KV heads)", bytes_per_token: 524288 },
    { model: "SmolLM2-135M (GQA, 3 KV heads)", bytes_per_token: 23040 }] });
  assert.deepEqual(step.rows.map((r) => r.bytes_per_token), [23040, 131072, 524288]);
  assert.equal(step.caption, "In bf16, Llama 3 8B caches 128 KiB a token with its 8 key/value heads; with one per query " +
    "head (MHA) it would be 512 KiB, 4× as much. At 4,096 tokens that is 512.0 MiB against 2.0 GiB per request.");
  assert.equal(fmtBytes(23040), "22.5 KiB");
});
