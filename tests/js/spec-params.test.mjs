// A demo script's defaults, limits and choices come from the spec its page embeds. Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { specParams } from "../../static/js/demos/spec-params.js";
import { tokenLabel, topKeys } from "../../static/js/demos/attention.js";

const config = {
  params: { batch_size: 5, modes: "both", seed: null },
  spec: { params: {
    batch_size: { kind: "int", default: 3, min: 1, max: 8 },
    modes: { kind: "choice", default: "both", choices: ["both", "continuous", "static"] },
    workload: { kind: "str", default: "12@0", limits: { max_requests: 8 } },
    seed: { kind: "int", default: null, min: 0, max: 2147483647 },
  } },
};

test("values are the page's params, else the spec's defaults; ranges and choices are the spec's", () => {
  const sp = specParams(config);
  assert.equal(sp.value("batch_size"), 5);
  assert.equal(sp.default("batch_size"), 3);
  assert.equal(sp.value("workload"), "12@0");
  assert.equal(sp.value("seed"), null);
  assert.deepEqual(sp.range("batch_size", { step: 1 }), { min: 1, max: 8, step: 1 });
  assert.deepEqual(sp.choices("modes", { both: "Both" }), [["both", "Both"], ["continuous", "continuous"], ["static", "static"]]);
  assert.equal(sp.limit("workload", "max_requests"), 8);
});

test("a parameter or limit the spec lacks is an error, never a silent literal", () => {
  const sp = specParams(config);
  assert.throws(() => sp.value("nope"), /no parameter "nope"/);
  assert.throws(() => sp.limit("workload", "max_tokens"), /no limit "max_tokens"/);
});

test("attention heatmap labels are unique and show a leading space; top keys are the largest weights", () => {
  const labels = ["The", " cat", " the", " the"].map(tokenLabel);
  assert.deepEqual(labels, ["0: The", "1: ␣cat", "2: ␣the", "3: ␣the"]);
  assert.equal(new Set(labels).size, labels.length);
  assert.deepEqual(topKeys([0.1, 0.7, 0.2]), [{ j: 1, w: 0.7 }, { j: 2, w: 0.2 }]);
});
