// The scheduler's queues per step for the batching and serving-load timelines (static/js/demos/queue-steps.js),
// without a page. Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { BatchQueues, CELL, LoadQueues, ganttUpTo } from "../../static/js/demos/queue-steps.js";

const entry = (request_id, phase, finished = false) => ({ request_id, phase, n_tokens: phase === "prefill" ? 5 : 1, finished });
const stepEv = (step, entries, { idle = [], waiting = 0 } = {}) => ({ type: "batch_step", step, entries, idle, running: entries.length, waiting });
const queued = (request_id, step) => ({ type: "request_queued", request_id, step });
const finished = (request_id) => ({ type: "request_finished", request_id });

function fold(events) {
  const q = new BatchQueues();
  return events.map((ev) => q.fromEvent(ev)).filter(Boolean);
}

const CONTINUOUS = [
  { type: "batch_run_started", mode: "continuous", max_num_seqs: 2 },
  queued("r0", 0), queued("r1", 0), queued("r2", 0),
  stepEv(0, [entry("r0", "prefill"), entry("r1", "prefill", true)], { waiting: 1 }), finished("r1"),
  stepEv(1, [entry("r0", "decode"), entry("r2", "prefill")]),
  queued("r3", 2),
  stepEv(2, [entry("r0", "decode", true), entry("r2", "decode")], { waiting: 1 }), finished("r0"),
  stepEv(3, [entry("r2", "decode", true), entry("r3", "prefill", true)]), finished("r2"), finished("r3"),
];

test("each batch_step is a step whose lanes are the queues as that forward pass ran", () => {
  const steps = fold(CONTINUOUS);
  assert.equal(steps.length, 4);
  const [s0, s1, s2, s3] = steps;
  assert.deepEqual(s0.lanes.waiting, ["r2"]);
  assert.deepEqual(s0.lanes.running.map((r) => [r.id, r.phase, r.finishes, r.joined]),
    [["r0", "prefill", false, true], ["r1", "prefill", true, true]]);
  assert.deepEqual(s0.lanes.finished, []);
  // r1 finished in step 0: it is in the finished lane from step 1 on, and r2 takes its slot.
  assert.deepEqual(s1.lanes.finished, ["r1"]);
  assert.deepEqual(s1.lanes.running.map((r) => [r.id, r.joined]), [["r0", false], ["r2", true]]);
  assert.deepEqual(s2.lanes.waiting, ["r3"]);
  assert.deepEqual(s3.lanes.finished, ["r0", "r1"]);
  // The lanes agree with the scheduler's own counts.
  for (const [s, ev] of steps.map((s, i) => [s, CONTINUOUS.filter((e) => e.type === "batch_step")[i]])) {
    assert.equal(s.lanes.running.length, ev.running);
    assert.equal(s.lanes.waiting.length, ev.waiting);
  }
});

test("the caption says who joined and who finished, the queue sizes and how many sequences shared the pass", () => {
  const steps = fold(CONTINUOUS);
  assert.equal(steps[1].caption, "Step 1 (continuous): request r2 joins the running batch (2 in this pass, 0 waiting, 1 finished before); " +
    "one forward pass serves 2 sequences");
  assert.equal(steps[0].caption, "Step 0 (continuous): requests r0, r1 join the running batch; request r1 finishes " +
    "(2 in this pass, 1 of them finishing, 1 waiting, 0 finished before); one forward pass serves 2 sequences");
});

test("a Gantt drawn up to a step fills that run's columns so far and leaves later ones empty", () => {
  const steps = fold(CONTINUOUS);
  const { z, x, rows } = ganttUpTo(steps, 0, 1);
  assert.deepEqual(rows, ["r0", "r1", "r2", "r3"]);
  assert.deepEqual(x, [0, 1, 2, 3]);
  assert.deepEqual(z, [
    [CELL.prefill, CELL.decode, 0, 0],
    [CELL.prefill, 0, 0, 0],
    [CELL.waiting, CELL.prefill, 0, 0],
    [0, 0, 0, 0], // r3 arrives at step 2: nothing before
  ]);
  assert.deepEqual(ganttUpTo(steps, 0, 3).z[3], [0, 0, CELL.waiting, CELL.prefill]);
});

test("static mode: a finished request holds its slot idle, and a preempted one goes back to waiting", () => {
  const steps = fold([
    { type: "batch_run_started", mode: "static", max_num_seqs: 2 },
    queued("r0", 0), queued("r1", 0), queued("r2", 0),
    stepEv(0, [entry("r0", "prefill", true), entry("r1", "prefill")], { waiting: 1 }), finished("r0"),
    stepEv(1, [entry("r1", "decode")], { idle: ["r0"], waiting: 1 }),
    { type: "preemption", request_id: "r1", step: 2 },
    stepEv(2, [entry("r2", "prefill")], { waiting: 1 }),
    stepEv(3, [entry("r1", "prefill", true), entry("r2", "decode", true)]), finished("r1"), finished("r2"),
  ]);
  assert.deepEqual(steps[1].lanes.held, ["r0"]);
  assert.deepEqual(steps[1].lanes.finished, []);
  assert.match(steps[1].caption, /1 finished request holds its slot idle$/);
  assert.deepEqual(steps[1].column, [CELL.held, CELL.decode, CELL.waiting]);
  assert.deepEqual(steps[2].lanes.waiting, ["r1"]);
  assert.match(steps[2].caption, /request r1 is preempted back to waiting/);
  assert.match(steps[3].caption, /request r1 rejoins after a preemption/);
  // A second run (static after continuous) starts its own rows and step numbers.
  const q = new BatchQueues();
  const both = [...CONTINUOUS, { type: "batch_run_started", mode: "static", max_num_seqs: 2 }, queued("r0", 0),
    stepEv(0, [entry("r0", "prefill", true)])].map((ev) => q.fromEvent(ev)).filter(Boolean);
  assert.deepEqual([both[4].run, both[4].mode, both[4].order], [1, "static", ["r0"]]);
  assert.deepEqual(ganttUpTo(both, 1, 3).z, [[0]]); // the static run not reached yet: empty
});

test("serving load: load_step's ids become the lanes; a request that has not arrived is in none", () => {
  const q = new LoadQueues();
  const load = (t_s, running_ids, waiting_ids, finished_ids) => ({ type: "load_step", t_s, n_running: running_ids.length,
    n_waiting: waiting_ids.length, tokens_total: 0, running_ids, waiting_ids, finished_ids });
  const steps = [load(0.1, [0], [1], []), load(0.2, [0], [1], [0]), load(0.3, [1], [], [0])].map((ev) => q.fromEvent(ev));
  assert.deepEqual(steps.map((s) => s.step), [0, 1, 2]);
  assert.deepEqual(steps[1].lanes.running, [{ id: 0, phase: "decode", finishes: true, joined: false }]);
  assert.deepEqual(steps[2].lanes.finished, [0]);
  assert.equal(steps[2].caption, "Step 2 (0.30 s): request #1 joins the running batch (1 in this pass, 0 waiting, 1 finished before); " +
    "one forward pass serves 1 sequence");
  assert.deepEqual(ganttUpTo(steps, undefined, 1).z, [[CELL.prefill, CELL.decode, 0], [CELL.waiting, CELL.waiting, 0]]);
  // A run stored before the ids were recorded still steps, on its counts.
  const old = new LoadQueues().fromEvent({ type: "load_step", t_s: 1, n_running: 2, n_waiting: 1, tokens_total: 7 });
  assert.equal(old.caption, "Step 0: 2 running, 1 waiting; 7 tokens so far");
});
