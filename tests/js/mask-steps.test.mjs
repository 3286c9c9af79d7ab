// Structured-output events → timeline steps: each caption is written from the numbers the picture and cards show.
import assert from "node:assert/strict";
import test from "node:test";

import { maskSteps, quoted, stepCaption } from "../../static/js/demos/mask-steps.js";

const setup = { type: "structured_setup", schema_name: "scientist", kind: "json", source: "{}", vocab_size: 49152,
  n_prompt_tokens: 40, temperature: 0.8, seed: 1 };
const run = (over) => ({ index: 0, token_id: 1, text: "{\"", n_allowed: 1, allowed_mass: 0.023081, model_top_text: "Here",
  top_allowed: false, token_allowed: true, token_probability: 0.02, mask_us: 300, ...over });

test("a step's caption counts the allowed tokens, their probability and the favourite it had to give up", () => {
  const ev = { type: "mask_step", step: 1, vocab_size: 49152, runs: { constrained: run(),
    unconstrained: run({ text: "Here", n_allowed: 1, token_allowed: false, token_probability: 0.81 }) } };
  assert.equal(stepCaption(ev), "Token 1 with the mask: only 1 token fits here, holding 2.3% of the model's probability; " +
    "the model's favourite, \"Here\", is not. It chose \"{\"\". Without the mask: \"Here\", the model's 81% choice. " +
    "The grammar forbids it: the reply has left the format.");
  const wide = { ...ev, runs: { constrained: run({ index: 4, text: "Mar", n_allowed: 48757, allowed_mass: 0.999895,
    model_top_text: "E", top_allowed: true }) } };
  assert.equal(stepCaption(wide), "Token 5 with the mask: 48,757 of 49,152 tokens fit here, holding 100.0% of the " +
    "model's probability; the model's favourite, \"E\", is one of them. It chose \"Mar\".");
});

test("steps: one per engine step with the history so far, one when both replies are in, one for validity", () => {
  const steps = maskSteps();
  assert.equal(steps.fromEvent(setup), null);
  const first = steps.fromEvent({ type: "mask_step", step: 1, vocab_size: 49152, runs: { constrained: run() } });
  const second = steps.fromEvent({ type: "mask_step", step: 2, vocab_size: 49152,
    runs: { constrained: run({ index: 1, text: "name" }), unconstrained: run({ index: 1, n_allowed: null, token_allowed: null }) } });
  assert.equal(first.history.length, 1);
  assert.equal(second.history.length, 2);
  assert.match(second.caption, /\(It had already left the format\.\)$/);
  assert.equal(steps.fromEvent({ type: "structured_text", mode: "constrained", text: "{}", n_tokens: 28, valid: true, why: "" }), null);
  const texts = steps.fromEvent({ type: "structured_text", mode: "unconstrained", text: "Here", n_tokens: 40, valid: false,
    why: "not JSON (Expecting value)" });
  assert.equal(texts.caption, "The constrained reply parses as the schema asks after 28 tokens; the unconstrained reply " +
    "does not (not JSON (Expecting value)) after 40 tokens.");
  const validity = steps.fromEvent({ type: "validity_summary", runs: 20, valid: { constrained: 20, unconstrained: 3 },
    rate: { constrained: 1, unconstrained: 0.15 }, mean_mask_us: 412.6 });
  assert.equal(validity.caption, "Over 20 seeded runs each: 20/20 constrained replies are valid (100.0%), 3/20 " +
    "unconstrained ones (15%). The mask took 413 µs per constrained token on this server.");
});

test("quoted tokens show blanks and newlines", () => {
  assert.equal(quoted(" "), "\"␣\"");
  assert.equal(quoted("\n   "), "\"↵   \"");
});
