// The paged-attention and prefix-caching demos' events → timeline steps (static/js/demos/{paged,prefix}-steps.js),
// without a page. Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { pagedSteps } from "../../static/js/demos/paged-steps.js";
import { prefixSteps } from "../../static/js/demos/prefix-steps.js";

const started = (extra = {}) => ({ type: "batch_run_started", block_size: 4, num_blocks: 6, prefix_caching: false, ...extra });
const queued = (id, step, prompt, max = 3) => ({ type: "request_queued", request_id: id, step, prompt_len: prompt, max_new_tokens: max });
const block = (op, b, id, idx, refcount, step) => ({ type: "kv_block", op, block: b, request_id: id, logical_index: idx, refcount, step });
const entry = (id, phase, nTokens, ctx, extra = {}) => ({ request_id: id, phase, n_tokens: nTokens, context_len: ctx, n_cached: 0,
  text: "x", finished: false, ...extra });
const forward = (step, entries, extra = {}) => ({ type: "batch_step", step, entries, running: entries.length, waiting: 0,
  blocks_used: 0, kv_slots_allocated: 0, kv_slots_filled: 0, contiguous_slots_reserved: 0, ...extra });
const finished = (id) => ({ type: "request_finished", request_id: id, text: "xxx", finish_reason: "length", n_cached_tokens: 0 });

function run(events, make) {
  const conv = make();
  const steps = [];
  for (const ev of events) {
    const made = conv.fromEvent(ev);
    if (Array.isArray(made)) steps.push(...made);
    else if (made) steps.push(made);
  }
  return steps;
}

test("paged: one step per forward and one after the run; each outlines what was allocated or freed since the step before", () => {
  const steps = run([
    started(),
    queued("r0", 0, 6), block("allocated", 0, "r0", 0, 1, 0), block("allocated", 1, "r0", 1, 1, 0),
    forward(0, [entry("r0", "prefill", 6, 6)]),
    queued("r1", 1, 3), block("allocated", 2, "r1", 0, 1, 1),
    forward(1, [entry("r0", "decode", 1, 7), entry("r1", "prefill", 3, 3)]),
    forward(2, [entry("r0", "decode", 1, 8, { finished: true }), entry("r1", "decode", 1, 4)]),
    block("freed", 1, "r0", 1, 0, 2), block("freed", 0, "r0", 0, 0, 2), finished("r0"),
    block("allocated", 0, "r1", 1, 1, 3),
    forward(3, [entry("r1", "decode", 1, 5, { finished: true })]),
    block("freed", 0, "r1", 1, 0, 3), block("freed", 2, "r1", 0, 0, 3), finished("r1"),
    { type: "batch_run_finished", metrics: {} },
  ], pagedSteps);
  assert.equal(steps.length, 5);
  const [s0, s1, s2, s3, end] = steps;
  assert.deepEqual(s0.cells.state, ["owned", "owned", "free", "free", "free", "free"]);
  assert.deepEqual(s0.cells.op, ["allocated", "allocated", "", "", "", ""]);
  assert.equal(s0.caption, "Step 0: r0 arrived; r0 got blocks 0, 1. 2 of 6 blocks in use. The forward ran 1 request (r0 prefills 6 tokens).");
  assert.deepEqual(s1.cells.op, ["", "", "allocated", "", "", ""]);
  assert.deepEqual(s1.tables.map((t) => t.blocks.map((b) => [b.logical, b.block, b.op])), [[[0, 0, ""], [1, 1, ""]], [[0, 2, "allocated"]]]);
  assert.match(s2.caption, /^Step 2: no block changed hands\. 3 of 6 blocks in use\./);
  assert.equal(s2.cells.text[1], "r0:1");
  // r0's frees (after forward 2) and r1's new block 0 show at step 3: block 0 changed hands.
  assert.deepEqual(s3.cells.state, ["owned", "free", "owned", "free", "free", "free"]);
  assert.deepEqual(s3.cells.op, ["allocated", "freed", "", "", "", ""]);
  assert.match(s3.caption, /^Step 3: r0 finished and freed blocks 0, 1; r1 got block 0\. 2 of 6 blocks in use\./);
  assert.deepEqual(s3.tables[0].blocks, []);
  assert.equal(s3.tables[0].state, "finished");
  assert.deepEqual(s3.tables[1].blocks.map((b) => b.block), [2, 0]);
  assert.deepEqual(end.cells.state, Array(6).fill("free"));
  assert.equal(end.caption, "End of the run: r1 finished and freed blocks 2, 0. 0 of 6 blocks in use. Every request finished.");
  assert.deepEqual([s0.series, s3.series, end.series], [1, 4, 4]); // how much of the slot chart each step shows
});

test("paged: a shared block is marked with its reference count, and a preemption's frees say so", () => {
  const steps = run([
    started({ prefix_caching: true }),
    queued("r0", 0, 8), block("allocated", 0, "r0", 0, 1, 0), block("allocated", 1, "r0", 1, 1, 0),
    block("cached", 0, "r0", 0, 1, 0),
    forward(0, [entry("r0", "prefill", 8, 8)]),
    queued("r1", 1, 6), block("shared", 0, "r1", 0, 2, 1), block("allocated", 2, "r1", 1, 1, 1),
    forward(1, [entry("r0", "decode", 1, 9), entry("r1", "prefill", 2, 6)]),
    block("freed", 2, "r1", 1, 0, 2), block("freed", 0, "r1", 0, 1, 2),
    { type: "preemption", request_id: "r1", step: 2, blocks_freed: 2, tokens_to_recompute: 7 },
    forward(2, [entry("r0", "decode", 1, 10)]),
  ], pagedSteps);
  const [, s1, s2] = steps;
  assert.deepEqual(s1.cells.state.slice(0, 3), ["shared", "owned", "owned"]);
  assert.deepEqual(s1.cells.op.slice(0, 3), ["shared", "", "allocated"]);
  assert.equal(s1.cells.text[0], "r0:0 ×2");
  assert.match(s1.caption, /r1 shares cached block 0; r1 got block 2/);
  assert.deepEqual(s2.cells.state.slice(0, 3), ["owned", "owned", "free"]);
  assert.deepEqual(s2.cells.op.slice(0, 3), ["preempted", "", "preempted"]);
  assert.match(s2.caption, /out of blocks: r1 was preempted and gave back blocks 0, 2/);
  assert.equal(s2.preemptions, 1);
  assert.equal(s2.tables[1].state, "preempted");
});

test("prefix: a step per prompt block of a question's prefill; a reused block lights up where an earlier question computed it", () => {
  const events = [];
  for (const cached of [false, true]) {
    events.push(started({ prefix_caching: cached }));
    events.push(queued("q0", 0, 10), block("allocated", 0, "q0", 0, 1, 0), block("allocated", 1, "q0", 1, 1, 0),
      block("allocated", 2, "q0", 2, 1, 0), forward(0, [entry("q0", "prefill", 10, 10)]));
    events.push(forward(1, [entry("q0", "decode", 1, 11, { finished: true })]));
    events.push(queued("q1", 2, 9));
    if (cached) {
      events.push(block("shared", 0, "q1", 0, 1, 2), block("shared", 1, "q1", 1, 1, 2), block("allocated", 3, "q1", 2, 1, 2),
        forward(2, [entry("q1", "prefill", 1, 9, { n_cached: 8 })]));
    } else {
      events.push(block("allocated", 3, "q1", 0, 1, 2), block("allocated", 4, "q1", 1, 1, 2), block("allocated", 5, "q1", 2, 1, 2),
        forward(2, [entry("q1", "prefill", 9, 9)]));
    }
    events.push({ type: "batch_run_finished", metrics: cached ? { prefix_cache_queries: 19, prefix_cache_hits: 8, prefix_cache_hit_rate: 8 / 19 } : {} });
  }
  const steps = run(events, prefixSteps);
  assert.equal(steps.length, 14); // per run: q0's 3 blocks, q1's 3 blocks, the end
  assert.equal(steps[3].caption, "Without the cache, step 2: q1's block 0 (prompt tokens 0–3) is computed now into physical " +
    "block 3 (4 tokens); nothing is looked up. So far 0 of 4 prompt blocks reused, 4 computed.");
  assert.deepEqual(steps[3].picture.words, [["computed", "computed", "computed"], ["computed now", "", ""]]);
  const miss = steps[7];
  assert.match(miss.caption, /^With the prefix cache, step 0: q0's block 0 \(prompt tokens 0–3\) is looked up .*: a miss/);
  const hit = steps[11];
  assert.deepEqual(hit.picture.y, ["q0", "q1"]);
  assert.deepEqual(hit.picture.words, [["computed", "reused from here now", "computed"], ["reused", "reused now", ""]]);
  assert.deepEqual(hit.picture.text, [["0", "1", "2"], ["0", "1", ""]]);
  assert.equal(hit.caption, "With the prefix cache, step 2: q1's block 1 (prompt tokens 4–7) is looked up by the hash of " +
    "its tokens and all before them: a hit, so physical block 1, which q0 computed, is reused and nothing is computed. " +
    "So far 2 of 5 prompt blocks reused, 3 computed.");
  assert.match(steps[12].caption, /q1's block 2 \(prompt tokens 8–8\) holds 1 of 4 tokens: only full blocks are cached, so it is computed now/);
  assert.equal(steps[13].caption, "With the prefix cache, the run is over: 2 of 6 prompt blocks reused (8 of 19 prompt tokens, " +
    "hit rate 42%), 4 computed.");
  assert.deepEqual(steps[13].picture.words[1], ["reused", "reused", "computed"]);
  assert.deepEqual([steps[11].question, steps[11].block, steps[11].promptLen], ["q1", 1, 9]);
});
