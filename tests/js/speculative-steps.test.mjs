// Speculative rounds → timeline steps: the caption says what was proposed, accepted and replaced, and each step
// carries the text the run had before its round.
import assert from "node:assert/strict";
import test from "node:test";

import { quote, roundCaption, speculativeSteps } from "../../static/js/demos/speculative-steps.js";

const round = (over) => ({ type: "spec_round", round: 0, position: 5, drafted: [1, 2, 3, 4],
  drafted_text: [" the", " sky", " is", " blue"], outcome: ["accepted", "accepted", "accepted", "rejected"],
  n_accepted: 3, next_token: 9, next_text: " red", next_kind: "residual", emitted: [1, 2, 3, 9], n_generated: 4, ...over });

test("a rejection: accepted count, the replaced guess and the target's correction, tokens for one pass", () => {
  assert.equal(roundCaption(round({ round: 4 })),
    "Round 5: the draft proposed 4 tokens, the target accepted 3 and replaced the 4th (' blue' → ' red'); 4 tokens for one target pass.");
  assert.equal(roundCaption(round({ outcome: ["rejected", "not_reached", "not_reached", "not_reached"], n_accepted: 0, emitted: [9] })),
    "Round 1: the draft proposed 4 tokens, the target accepted none and replaced the 1st (' the' → ' red'); 1 token for one target pass.");
});

test("all accepted: the bonus token; a run cut at its limit says so", () => {
  const all = round({ outcome: ["accepted", "accepted", "accepted", "accepted"], n_accepted: 4, next_text: "!",
    next_kind: "bonus", emitted: [1, 2, 3, 4, 9] });
  assert.equal(roundCaption(all),
    "Round 1: the draft proposed 4 tokens, the target accepted all 4 and added a bonus token '!'; 5 tokens for one target pass.");
  assert.match(roundCaption({ ...all, emitted: [1, 2] }), /accepted all 4; 2 tokens for one target pass \(the run stopped there\)\.$/);
  assert.equal(quote("a\nb"), "'a\\nb'");
});

test("each step holds the text before its round, the guesses with outcomes and the correction", () => {
  const fromEvent = speculativeSteps();
  assert.equal(fromEvent({ type: "run_started", prompt_tokens: ["Say", ":"] }), null);
  const first = fromEvent(round({}));
  const second = fromEvent(round({ round: 1, drafted_text: [" and", " the"], drafted: [5, 6],
    outcome: ["accepted", "accepted"], n_accepted: 2, next_text: " sea", next_kind: "bonus", emitted: [5, 6, 7] }));
  assert.equal(fromEvent({ type: "spec_finished" }), null);
  assert.equal(first.prompt, "Say:");
  assert.equal(first.upto, 0);
  assert.deepEqual(first.guesses.map((g) => g.outcome), ["accepted", "accepted", "accepted", "rejected"]);
  assert.deepEqual(first.next, { text: " red", kind: "residual" });
  assert.equal(second.upto, 4);
  assert.equal(second.before.slice(0, second.upto).map((x) => x.text).join(""), " the sky is red");
  assert.deepEqual(second.next, { text: " sea", kind: "bonus" });
  // a new run starts over
  fromEvent({ type: "run_started", prompt_tokens: ["Hi"] });
  assert.equal(fromEvent(round({})).upto, 0);
});

test("a round without guesses says the engine's reason: the prompt, a pause, no guess, the last token", () => {
  const none = round({ drafted: [], drafted_text: [], outcome: [], n_accepted: 0, emitted: [7], next_text: " Once" });
  assert.equal(roundCaption({ ...none, round: 0, no_draft: "prompt" }),
    "Round 1: the target read the prompt and gave the first token ' Once'; drafting starts next round.");
  assert.match(roundCaption({ ...none, round: 5, no_draft: "paused" }), /^Round 6: no guesses \(the adaptive k policy paused drafting/);
  // A fixed-k n-gram run never pauses: a round without guesses had no match, whatever the acceptance before it.
  const noGuess = roundCaption({ ...none, round: 5, no_draft: "no_guess" });
  assert.match(noGuess, /found nothing to propose/);
  assert.doesNotMatch(noGuess, /paused|low acceptance/);
  assert.match(roundCaption({ ...none, round: 9, no_draft: "budget" }), /only one token was left/);
  assert.doesNotMatch(roundCaption({ ...none, round: 5 }), /paused/); // an old trace without the field: no claim
});
