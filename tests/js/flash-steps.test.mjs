// The FlashAttention tile walk → timeline steps: one per computed tile, with captions that say what rescaled.
import assert from "node:assert/strict";
import test from "node:test";

import { accColor, accPixels, flashFromEvent, flashSteps, profilePath, tileCaption, walkHeads } from "../../static/js/demos/flash-steps.js";

// 6 tokens in tiles of 3: query tile 0 computes key tile 0; query tile 1 computes key tiles 0 and 1.
const walk = { type: "flash_tile_walk", head: 0, n_tokens: 6, block_q: 3, block_k: 3, n_q_blocks: 2, n_k_blocks: 2,
  acc_dims: 2, q_blocks: [0, 1], tiles: [
    { q_block: 0, k_block: 0, m: [1, 2, 3], l: [1, 1.5, 2], rescale: [0, 0, 0], acc: [[1, 2], [3, 4], [5, 6]] },
    { q_block: 1, k_block: 0, m: [0.5, 0.5, 0.5], l: [3, 3, 3], rescale: [0, 0, 0], acc: [[1, -1], [1, 1], [0, 0]] },
    { q_block: 1, k_block: 1, m: [2.5, 0.5, 1.5], l: [1.5, 4, 2], rescale: [0.1353, 1, 0.3679], acc: [[1, -9], [2, 1], [0, 1]] },
  ] };

test("one step per computed tile, with its query tile's state and that tile's whole-walk scale", () => {
  const steps = flashSteps(walk);
  assert.equal(steps.length, 3);
  assert.deepEqual(steps.map((s) => [s.qBlock, s.kBlock, s.rowStart]), [[0, 0, 0], [1, 0, 3], [1, 1, 3]]);
  assert.deepEqual(steps[2].m, [2.5, 0.5, 1.5]);
  assert.deepEqual(steps[1].scale, steps[2].scale);
  assert.deepEqual(steps[2].scale.m, [0.5, 2.5]);
  assert.equal(steps[2].scale.acc, 9);
  assert.equal(flashFromEvent({ type: "attention_compare" }), null);
  assert.equal(flashFromEvent(walk).length, 3);
});

test("captions: the first tile starts the state, a risen max rescales, the last tile finishes the query tile", () => {
  const [a, b, c] = flashSteps(walk).map((s) => s.caption);
  assert.equal(a, "Query tile 0 × key tile 0 (queries 0–2, keys 0–2, masked above the diagonal): the first tile: m, l and " +
    "the accumulator start from its scores, nothing to rescale. Query tile 0 is done: its output is acc / l.");
  assert.match(b, /^Query tile 1 × key tile 0 \(queries 3–5, keys 0–2\): the first tile/);
  assert.doesNotMatch(b, /done/);
  assert.equal(c, "Query tile 1 × key tile 1 (queries 3–5, keys 3–5, masked above the diagonal): the running max rose in 2 " +
    "of 3 rows, so their l and accumulator were multiplied by exp(m_old − m_new), down to 0.14, before adding this tile. " +
    "Query tile 1 is done: its output is acc / l.");
  const flat = { ...walk.tiles[2], rescale: [1, 1, 1] };
  assert.match(tileCaption(walk, flat, false), /no row's max rose: l and the accumulator just add this tile \(rescale 1\)\.$/);
});

// The same walk for two heads, as a run small enough to carry every head sends it (`tiles` stay the run's head's,
// and its entry in `heads` points there).
const other = walk.tiles.map((t) => ({ ...t, m: t.m.map((x) => x + 1), rescale: t.k_block ? [1, 1, 1] : t.rescale }));
const both = { ...walk, head: 1, n_heads: 2, tiles: other, heads: [{ head: 0, tiles: walk.tiles }, { head: 1 }] };

test("heads: every head the event carries, the run's own by default; an old trace is its one head", () => {
  assert.deepEqual(walkHeads(both), [0, 1]);
  assert.deepEqual(walkHeads(walk), [0]);
  assert.deepEqual(flashSteps(both).map((s) => s.head), [1, 1, 1]);
  assert.deepEqual(flashSteps(both)[2].m, [3.5, 1.5, 2.5]);
  const zero = flashSteps(both, 0);
  assert.deepEqual(zero.map((s) => [s.head, s.qBlock, s.kBlock]), [[0, 0, 0], [0, 1, 0], [0, 1, 1]]);
  assert.deepEqual(zero[2].m, walk.tiles[2].m);
  assert.deepEqual(zero.map((s) => s.caption), flashSteps(walk).map((s) => s.caption));
  assert.match(flashSteps(both, 1)[2].caption, /no row's max rose/); // each head's own captions
  assert.deepEqual(flashSteps(walk, 5).map((s) => s.head), [0, 0, 0]); // a head not carried: the run's
  assert.deepEqual(flashFromEvent(both, 0)[2].m, walk.tiles[2].m);
  assert.deepEqual(flashFromEvent(both)[2].m, [3.5, 1.5, 2.5]);
});

test("a step's picture: m and l as filled bands per row, the rescaled rows in their own path", () => {
  const step = flashSteps(walk)[2]; // rows 3–5; rows 3 and 5 rescaled (factor below 1), row 4 not
  assert.deepEqual(step.rows, [3, 4, 5]);
  assert.deepEqual(step.rose, [3, 5]);
  assert.equal(step.picture.m, "M0,2.5H2.5V3.5H0.5V4.5H1.5V5.5H0Z");
  assert.equal(step.picture.mRose, "M0,2.5H2.5V3.5H0ZM0,4.5H1.5V5.5H0Z");
  assert.equal(step.picture.lRose, "M0,2.5H1.5V3.5H0ZM0,4.5H2V5.5H0Z");
  assert.equal(flashSteps(walk)[0].picture.mRose, ""); // the first key tile: nothing rescaled
  assert.equal(profilePath([0.123456, -2], 10), "M0,9.5H0.1235V10.5H-2V11.5H0Z");
});

test("the accumulator's pixels: blue negative, near-white zero, red positive, clamped to the scale", () => {
  assert.deepEqual(accColor(-9, 9), [33, 102, 172]);
  assert.deepEqual(accColor(0, 9), [247, 247, 247]);
  assert.deepEqual(accColor(9, 9), [178, 24, 43]);
  assert.deepEqual(accColor(99, 9), [178, 24, 43]);
  assert.deepEqual(accColor(1, 0), [247, 247, 247]);
  const px = accPixels([[1, -1], [0, 0.5]], 1);
  assert.equal(px.length, 16);
  assert.deepEqual([...px.slice(0, 8)], [178, 24, 43, 255, 33, 102, 172, 255]); // row 0: dims 0 and 1
  assert.deepEqual([...px.slice(8, 12)], [247, 247, 247, 255]);
});
