// Speculative decoding as a step timeline: one step per draft → verify → accept round, with the text the run had
// before that round (the prompt and every earlier round's tokens), the round's guesses and their outcomes, and the
// target's correction or bonus token. Pure (no page): tested under node in tests/js/speculative-steps.test.mjs.
//   const fromEvent = speculativeSteps(); fromEvent(ev) → a step for each `spec_round`, else null

/** A token as the caption quotes it: spaces kept, newlines and tabs visible ('\n'). */
export const quote = (t) => `'${JSON.stringify(String(t)).slice(1, -1).replace(/'/g, "\\'")}'`;

/** Why a round after the first drafted nothing, as the engine reports it (SpecRound.no_draft). */
const NO_DRAFT = {
  paused: "no guesses (the adaptive k policy paused drafting after low acceptance)",
  no_guess: "no guesses (the draft found nothing to propose: no earlier match of the text's last tokens)",
  budget: "no guesses (only one token was left to emit)",
};

const ORDINAL = ["1st", "2nd", "3rd"];
const ordinal = (n) => ORDINAL[n - 1] || `${n}th`;
const tokens = (n) => `${n} token${n === 1 ? "" : "s"}`;

/** The texts a round added to the output: its accepted guesses, then the correction or bonus token (cut where the
 * run stopped: `emitted` may be shorter at the token limit or the end of text). */
export function emittedTexts(ev) {
  return ev.emitted.map((_, i) => (i < ev.n_accepted ? ev.drafted_text[i] : ev.next_text));
}

/** One sentence: what the draft proposed, what the target kept and replaced, and the tokens this target pass gave. */
export function roundCaption(ev) {
  const n = ev.drafted.length;
  if (n === 0) { // the engine says why (`no_draft`); a trace recorded before it did says nothing, so neither do we
    if (ev.round === 0) {
      return `Round 1: the target read the prompt and gave the first token ${quote(ev.next_text)}; drafting starts next round.`;
    }
    const why = NO_DRAFT[ev.no_draft] || "no guesses";
    return `Round ${ev.round + 1}: ${why}; the target gave ${quote(ev.next_text)}, 1 token for one target pass.`;
  }
  const rejected = ev.outcome.indexOf("rejected");
  const gained = ev.emitted.length;
  let verdict;
  if (rejected >= 0) {
    const accepted = ev.n_accepted === 0 ? "none" : String(ev.n_accepted);
    verdict = `the target accepted ${accepted} and replaced the ${ordinal(rejected + 1)} ` +
      `(${quote(ev.drafted_text[rejected])} → ${quote(ev.next_text)})`;
  } else if (gained > ev.n_accepted) {
    verdict = `the target accepted ${n === 1 ? "it" : `all ${n}`} and added a bonus token ${quote(ev.next_text)}`;
  } else {
    verdict = `the target accepted ${n === 1 ? "it" : `all ${n}`}`;
  }
  const cut = gained < ev.n_accepted + 1 ? " (the run stopped there)" : "";
  return `Round ${ev.round + 1}: the draft proposed ${tokens(n)}, ${verdict}; ${tokens(gained)} for one target pass${cut}.`;
}

/** A converter for one run at a time (it starts over at `run_started`): each round becomes
 * {caption, round, prompt, before, upto, guesses, next, ev}. `before` is the run's list of earlier rounds' texts,
 * shared by every step (`upto` says how much of it precedes this round), so a 64-round run stores it once. */
export function speculativeSteps() {
  let prompt = "";
  let before = [];
  return function fromEvent(ev) {
    if (ev.type === "run_started") {
      prompt = (ev.prompt_tokens || []).join("");
      before = [];
      return null;
    }
    if (ev.type !== "spec_round") return null;
    const used = ev.emitted.length > ev.n_accepted;
    const step = {
      caption: roundCaption(ev),
      round: ev.round,
      prompt,
      before,
      upto: before.length,
      guesses: ev.drafted_text.map((text, i) => ({ text, outcome: ev.outcome[i] })),
      next: used ? { text: ev.next_text, kind: ev.next_kind } : null,
      ev,
    };
    for (const text of emittedTexts(ev)) before.push({ text, round: ev.round });
    return step;
  };
}
