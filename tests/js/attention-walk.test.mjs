// The attention walk-through's five sentences quote the run's own numbers for the token shown (attention-walk.js).
import assert from "node:assert/strict";
import { test } from "node:test";

import { walkSentences } from "../../static/js/demos/attention-walk.js";

const run = {
  head_dim: 64, tokens: ["The", " cat", " sat"],
  weights: [[1, 0, 0], [0.3, 0.7, 0], [0.1, 0.6, 0.3]],
  walk: { q: [[1, 2, 3, 4], [0.5, -0.25, 0, 1], [0.125, 0.5, -1, 2]], k: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]],
    v: [[1, 0], [0, 1], [1, 1]], scores: [[0.5], [0.1, 0.95], [-1.2, 0.9, 0.2]], output: [[1, 0], [0.3, 0.7], [0.4, 0.9]] },
};

test("the walk of token 2 names its query, the keys it may see, its scores, their softmax and the weighted sum", () => {
  const [q, k, scores, softmax, sum] = walkSentences(run, 2);
  assert.equal(q, "Q: the query of 'sat' (token 2) is 64 numbers, [0.13, 0.50, -1.00, 2.00, …]: what it is looking for.");
  assert.equal(k, "K: each of the 3 tokens it may see (itself and the ones before) has a key of 64 numbers; the key of 'cat' is [0.00, 1.00, 0.00, 0.00, …].");
  assert.equal(scores, "Scores: q · k / √64 for each of them: 'cat' 0.90, 'sat' 0.20, 'The' -1.20.");
  assert.match(softmax, /weights that sum to 1: 'cat' 0\.60, 'sat' 0\.30, 'The' 0\.10\.$/);
  assert.match(sum, /^Weighted sum: the head's output for 'sat' is Σ weight × V .* = \[0\.40, 0\.90, …\]: mostly the value of 'cat'\.$/);
});
