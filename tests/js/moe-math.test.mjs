// Expert-parallelism arithmetic: the models' published totals, the tokens each expert sees, the all-to-all bytes.
import assert from "node:assert/strict";
import test from "node:test";

import { MOE_MODELS, moeCaption, moeFigures } from "../../static/js/calculators/moe-math.js";

test("Mixtral 8x7B: 45 B expert weights, a quarter read per token; on 8 devices one expert each", () => {
  const f = moeFigures({ ...MOE_MODELS["mixtral-8x7b"], devices: 8, tokens: 256 });
  assert.equal(f.expertWeights, 8 * 3 * 4096 * 14336 * 32);
  assert.equal(Math.round(f.expertWeights / 1e9), 45);
  assert.equal(f.activeShare, 0.25);
  assert.equal(f.expertsPerDevice, 1);
  assert.equal(f.tokensPerExpert, 64);
  // 32 tokens a device, each to 2 experts, 7 in 8 of them elsewhere, there and back, 4096 bf16 values
  assert.equal(f.allToAllBytesPerLayer, 2 * 32 * 2 * 4096 * 2 * (7 / 8));
  assert.equal(moeFigures({ ...MOE_MODELS["mixtral-8x7b"], devices: 1, tokens: 256 }).allToAllBytesPerLayer, 0);
});

test("DeepSeek-V3: 654 B expert weights, 23 B of them read per token (9 of 257 experts)", () => {
  const f = moeFigures({ ...MOE_MODELS["deepseek-v3"], devices: 64, tokens: 4096 });
  assert.equal(Math.round(f.expertWeights / 1e9), 654);  // of its 671 B total
  assert.equal(Math.round(f.activeWeightsPerToken / 1e9), 23);  // the rest of its 37 B active is attention and dense layers
  assert.equal(f.expertsPerDevice, 4);
  assert.equal(f.tokensPerExpert, 128);
});

test("shapes that cannot be split are refused; the caption is the figures' own", () => {
  assert.throws(() => moeFigures({ ...MOE_MODELS["mixtral-8x7b"], devices: 3, tokens: 8 }), /do not divide evenly over 3/);
  assert.throws(() => moeFigures({ ...MOE_MODELS["mixtral-8x7b"], topK: 9, devices: 1, tokens: 8 }), /more experts/);
  assert.throws(() => moeFigures({ ...MOE_MODELS["mixtral-8x7b"], devices: 0, tokens: 8 }), /devices must be/);
  const f = moeFigures({ ...MOE_MODELS["mixtral-8x7b"], devices: 2, tokens: 16 });
  assert.equal(moeCaption("Mixtral", f, 2, 16), "Mixtral: 45.1 B expert weights, of which each token reads 11.3 B " +
    "(25.0% of the experts). On 2 devices, each holds 4 experts a layer (45.1 GB of expert weights). A batch of 16 " +
    "tokens gives each expert 4.0 tokens on average, and each device sends and receives 131.1 kB a layer in its two all-to-alls.");
});
