// A structured-output run (demos/catalog/structured_output.py; docs/trace-schema/course-demos.md) as timeline steps,
// without the page (tested under node): one step per engine step of the pair of runs (`mask_step`: how many tokens
// the grammar allowed, how much of the model's probability they held, the token each run chose), one for the two
// replies once both finished (`structured_text`), and one for the validity count (`validity_summary`). Each step
// carries what its picture and cards show, and its caption is written from those same numbers.
//
//   const steps = maskSteps();  for (const ev of events) { const step = steps.fromEvent(ev); … }

export const pct = (x) => `${(100 * x).toFixed(x >= 0.995 || x < 0.1 ? 1 : 0)}%`;
const count = (n) => Number(n).toLocaleString("en-US");

/** A token as a caption quotes it: "ath", "␣" for blank, control tokens as they are. */
export function quoted(text) {
  const t = String(text).replace(/\n/g, "↵");
  return `"${t.trim() ? t : "␣".repeat(Math.max(t.length, 1))}"`;
}

/** The caption of one engine step: the constrained run first (what the mask allowed), then the unconstrained one. */
export function stepCaption(ev) {
  const c = ev.runs.constrained;
  const u = ev.runs.unconstrained;
  const parts = [];
  if (c) {
    const only = c.n_allowed === 1 ? "only 1 token fits here" : `${count(c.n_allowed)} of ${count(ev.vocab_size)} tokens fit here`;
    const favourite = c.top_allowed ? `the model's favourite, ${quoted(c.model_top_text)}, is one of them`
      : `the model's favourite, ${quoted(c.model_top_text)}, is not`;
    parts.push(`Token ${c.index + 1} with the mask: ${only}, holding ${pct(c.allowed_mass)} of the model's probability; ` +
      `${favourite}. It chose ${quoted(c.text)}.`);
  }
  if (u) {
    const left = u.token_allowed === false ? " The grammar forbids it: the reply has left the format."
      : u.token_allowed === null ? " (It had already left the format.)" : "";
    parts.push(`Without the mask: ${quoted(u.text)}, the model's ${(100 * u.token_probability).toFixed(0)}% choice.${left}`);
  }
  return parts.join(" ");
}

/** A fresh converter for one run: fromEvent(ev) → a step or null. */
export function maskSteps() {
  const history = [];  // every mask_step so far: the chart draws the allowed counts up to the step shown
  const texts = {};
  let setup = null;
  return {
    fromEvent(ev) {
      if (!ev) return null;
      if (ev.type === "structured_setup") { setup = ev; return null; }
      if (ev.type === "mask_step") {
        history.push(ev);
        return { kind: "mask", ev, setup, history: history.slice(), caption: stepCaption(ev) };
      }
      if (ev.type === "structured_text") {
        texts[ev.mode] = ev;
        if (!texts.constrained || !texts.unconstrained) return null;
        const say = (t, name) => (t.valid ? `${name} reply parses as ${setup && setup.kind === "regex" ? "the pattern asks" : "the schema asks"}`
          : `${name} reply does not (${t.why})`);
        return { kind: "texts", texts: { ...texts }, history: history.slice(),
          caption: `${say(texts.constrained, "The constrained")} after ${texts.constrained.n_tokens} tokens; ` +
            `${say(texts.unconstrained, "the unconstrained")} after ${texts.unconstrained.n_tokens} tokens.` };
      }
      if (ev.type === "validity_summary") {
        const c = ev.valid.constrained;
        const u = ev.valid.unconstrained;
        return { kind: "validity", ev,
          caption: `Over ${ev.runs} seeded runs each: ${c}/${ev.runs} constrained replies are valid (${pct(ev.rate.constrained)}), ` +
            `${u}/${ev.runs} unconstrained ones (${pct(ev.rate.unconstrained)}). The mask took ${ev.mean_mask_us.toFixed(0)} µs ` +
            `per constrained token on this server.` };
      }
      return null;
    },
  };
}
