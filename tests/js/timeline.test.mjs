// The step timeline's state (static/js/demos/timeline.js), without a page. Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { StepLog } from "../../static/js/demos/timeline.js";

test("a live run is followed step by step until the student moves back, then left where they put it", () => {
  const log = new StepLog();
  assert.equal(log.current, null);
  assert.equal(log.push({ caption: "a" }), true);
  assert.equal(log.push({ caption: "b" }), true);
  assert.equal(log.index, 1);
  assert.equal(log.seek(0), true);
  assert.equal(log.following, false);
  assert.equal(log.push({ caption: "c" }), false); // the student is reading step 0: it stays
  assert.equal(log.current.caption, "a");
  assert.equal(log.seek(2), true); // back at the newest: follows again
  assert.equal(log.push({ caption: "d" }), true);
  assert.equal(log.current.caption, "d");
});

test("seeking clamps into the run and ignores a run with no steps", () => {
  const log = new StepLog();
  assert.equal(log.seek(3), false);
  ["a", "b", "c"].forEach((caption) => log.push({ caption }));
  log.seek(-5);
  assert.equal(log.index, 0);
  log.seek(99);
  assert.equal(log.index, 2);
  assert.equal(log.seek("1.4"), true);
  assert.equal(log.index, 1);
  log.reset();
  assert.deepEqual([log.steps.length, log.index, log.following], [0, -1, true]);
});
