// The quantization and attention demos' events turned into timeline steps (quantization.js, attention.js), without
// a page. Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { blockCaption, quantBlockSteps } from "../../static/js/demos/quantization.js";
import { attentionSteps, headRows, quoted, rowCaption } from "../../static/js/demos/attention.js";

// Two blocks of int4 (levels −7…7 × scale): a calm one and one whose scale an outlier set.
const levels = Array.from({ length: 15 }, (_, i) => i - 7);
const block = (over) => ({ row: 3, block: 1, start: 128, end: 256, scale: 0.01, absmax: 0.07, top_value: -0.07,
  max_error: 0.005, rms_error: 0.002, outlier: false, hist_counts: [10, 20, 30, 68], level_counts: levels.map((v) => (Math.abs(v) <= 1 ? 40 : 1)), ...over });
const blocks = { type: "quant_blocks", format: "int4-g128", layer: 3, projection: "w_down", group: 128, n_blocks: 6912,
  levels, weight_rms: 0.02, outlier_factor: 6, n_outlier_blocks: 21, bins: 4,
  sample_absmax: [0.05, 0.07, 0.5], sample_max_error: [0.003, 0.005, 0.04],
  walk: [block(), block({ row: 9, block: 0, start: 0, end: 128, scale: 0.5 / 7, absmax: 0.5, top_value: 0.5, max_error: 0.035, outlier: true,
    level_counts: levels.map((v) => (v === 0 ? 127 : v === 7 ? 1 : 0)) })] };

test("quant_blocks makes one step per walked block; other events make none", () => {
  assert.equal(quantBlockSteps({ type: "quant_layer" }), null);
  const steps = quantBlockSteps(blocks);
  assert.equal(steps.length, 2);
  assert.deepEqual(steps.map((s) => s.block.row), [3, 9]);
  assert.equal(steps[0].sample, steps[1].sample, "the sample of all blocks is shared, not copied per step");
  assert.deepEqual(steps[0].sample.color, ["#7f7f7f", "#7f7f7f", "#d62728"]); // 0.5 > 6 × 0.02: an outlier block
});

test("a block's step holds its histogram and the levels its weights landed on, in level units (w ÷ its scale)", () => {
  const [calm, outlier] = quantBlockSteps(blocks);
  assert.deepEqual(calm.before.y, [10, 20, 30, 68]);
  assert.deepEqual(calm.before.x.map((x) => +x.toFixed(4)), [-5.25, -1.75, 1.75, 5.25]); // bin centres on ±absmax ÷ scale
  assert.deepEqual(calm.after.map((u) => u[1]), levels.map((v) => (Math.abs(v) <= 1 ? 40 : 1))); // every level used
  assert.deepEqual(outlier.after, [[0, 127], [7, 1]]); // 127 weights crowd onto zero, the outlier on the top level
  assert.deepEqual(outlier.stems.x, [0, 0, null, 7, 7, null]); // one path: a stem per used level
  assert.deepEqual(outlier.stems.y, [0, 127, null, 0, 1, null]);
  assert.equal(outlier.outlierAt, 7);
  assert.equal(calm.ticks, outlier.ticks, "the level grid is the same at every step");
  assert.equal(calm.ticks.x.filter((x) => x !== null).length, 30);
  assert.deepEqual([calm.reach, calm.top, outlier.top], [7, 127, 127]); // axes fixed for the whole walk
});

test("the caption gives the block's scale, its max error and whether an outlier set the scale", () => {
  assert.equal(blockCaption(blocks, blocks.walk[0], 0),
    "Block 1 of 2 (row 3, inputs 128–255): scale 1.00e-2, max error 5.00e-3; no outlier set it: its largest weight, −0.070, is 3.5× the layer's RMS.");
  assert.equal(blockCaption(blocks, blocks.walk[1], 1),
    "Block 2 of 2 (row 9, inputs 0–127): scale 7.14e-2, max error 3.50e-2; an outlier set the scale: w = +0.500, 25.0× the layer's RMS.");
});

// "The cat sat": head 0 sent in full, heads 0 and 1 as lower triangles.
const attn = { type: "attention_weights", layer: 16, head: 0, kv_head: 0, n_heads: 2, n_kv_heads: 1, head_dim: 64,
  tokens: ["The", " cat", " sat"], token_ids: [1, 2, 3],
  weights: [[1, 0, 0], [0.3, 0.7, 0], [0.22, 0.41, 0.37]],
  all_heads: [[[1], [0.3, 0.7], [0.22, 0.41, 0.37]], [[1], [0.9, 0.1], [0.998, 0.002, 0]]] };

test("attention_weights makes one step per query token: step i is row i up to the diagonal", () => {
  assert.equal(attentionSteps({ type: "quant_layer" }), null);
  const steps = attentionSteps(attn);
  assert.deepEqual(steps.map((s) => s.query), [0, 1, 2]);
  assert.deepEqual(steps[2].row, [0.22, 0.41, 0.37]);
  assert.equal(steps[2].caption, "'sat' attends most to 'cat' (0.41) and 'sat' (0.37).");
  assert.equal(steps[0].caption, "'The' is the first token: it can only attend to itself (1.00).");
  assert.equal(steps[1].caption, "'cat' attends most to 'cat' (0.70) and 'The' (0.30).");
});

test("another head of the layer comes from all_heads, padded with the mask's zeros; a negligible second key is left out", () => {
  assert.deepEqual(headRows(attn, 1), [[1, 0, 0], [0.9, 0.1, 0], [0.998, 0.002, 0]]);
  assert.equal(headRows(attn, 0), attn.weights);
  const steps = attentionSteps(attn, 1);
  assert.equal(steps[2].head, 1);
  assert.equal(steps[2].caption, "'sat' attends most to 'The' (1.00).");
  assert.equal(rowCaption(attn.tokens, [0.5, 0.5, 0], 1), "'cat' attends most to 'The' (0.50) and 'cat' (0.50).");
});

test("a quoted token drops its leading space and names a blank one", () => {
  assert.deepEqual([quoted(" cat"), quoted(" "), quoted("\n"), quoted("The")], ["'cat'", "'␣'", "'⏎'", "'The'"]);
});
