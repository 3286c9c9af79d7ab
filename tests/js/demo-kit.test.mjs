// The demos' shared helpers that need no browser. Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { fixed } from "../../static/js/calculators/ui.js";
import { errorText } from "../../static/js/demos/course-demo-kit.js";

test("an error frame reads as one sentence with a full stop, and the retry countdown in whole seconds", () => {
  assert.equal(errorText({ message: "too many runs, slow down" }), "too many runs, slow down.");
  assert.equal(errorText({ message: "rate limited.", retry_after: 11.2 }), "rate limited. Try again in 12 s.");
  assert.equal(errorText({}), "the run failed.");
});

test("a stopped run's missing metric shows a dash instead of throwing", () => {
  assert.equal(fixed(undefined, 2), "–");
  assert.equal(fixed(Number.NaN), "–");
  assert.equal(fixed(1.23456, 2), "1.23");
});
