// Choosing the next token, step by step: each `sampling_step` event (docs/trace-schema.md) becomes one step of the
// timeline with the bars to draw (the 20 most likely tokens: probability before and after temperature, kept or cut,
// the renormalized probability the draw used) and a caption computed from the same numbers. Pure (no page): tested
// under node in tests/js/sampling-steps.test.mjs.
//   const fromEvent = samplingSteps(); fromEvent(ev) → a step for each `sampling_step`, else null

/** A token as the chart and caption quote it: spaces kept, newlines and tabs visible ('\n'). */
export const quote = (t) => `'${JSON.stringify(String(t)).slice(1, -1).replace(/'/g, "\\'")}'`;

export const percent = (p) => {
  if (!Number.isFinite(p)) return "–";
  if (p >= 0.995 || p === 0) return `${Math.round(p * 100)}%`;
  return p >= 0.1 ? `${(p * 100).toFixed(0)}%` : p >= 0.01 ? `${(p * 100).toFixed(1)}%` : `${(p * 100).toFixed(2)}%`;
};

const plural = (n, word) => `${n.toLocaleString("en-US")} ${word}${n === 1 ? "" : "s"}`;

/** The sampler's settings as a phrase: "top-k 40, top-p 0.9 and min-p 0.05" (only those switched on). */
export function cutsText(params = {}) {
  const cuts = [];
  if (params.top_k > 0) cuts.push(`top-k ${params.top_k}`);
  if (params.top_p !== undefined && params.top_p < 1) cuts.push(`top-p ${params.top_p}`);
  if (params.min_p > 0) cuts.push(`min-p ${params.min_p}`);
  if (cuts.length <= 1) return cuts.join("");
  return `${cuts.slice(0, -1).join(", ")} and ${cuts[cuts.length - 1]}`;
}

/** The bars of one step: for each listed token its label, probabilities, whether the cut kept it, and the
 * probability the draw gave it (its after-temperature probability ÷ the kept mass; 0 when cut). */
export function stepBars(ev) {
  return ev.top_ids.map((id, i) => {
    const kept = i < ev.n_kept;
    return {
      id, rank: i, text: ev.top_texts[i], label: `${i + 1}. ${quote(ev.top_texts[i])}`,
      logit: ev.logits[i], before: ev.probs[i], after: ev.probs_t[i], kept,
      drawn: kept && ev.kept_mass > 0 ? ev.probs_t[i] / ev.kept_mass : 0, chosen: i === ev.rank,
    };
  });
}

/** One sentence: what temperature did to the leader, what the cut kept, and what was drawn. */
export function stepCaption(ev, params = {}, { index = ev.step, total = null, vocab = null } = {}) {
  const bars = stepBars(ev);
  const lead = bars[0];
  const of = total ? ` of ${total}` : "";
  const head = `Step ${index + 1}${of}`;
  const greedy = !(params.temperature > 0);
  const chosen = bars[ev.rank];
  const chosenText = chosen ? quote(chosen.text) : `a token outside the ${bars.length} shown`;
  const place = ev.rank === 0 ? "the most likely" : `number ${ev.rank + 1} in the ranking`;
  if (greedy) {
    return `${head}: greedy decoding takes the argmax, ${quote(lead.text)} (${percent(lead.before)} at temperature 1); ` +
      "every other token is cut.";
  }
  const temp = params.temperature === 1 ? `at temperature 1 ${quote(lead.text)} has ${percent(lead.after)}`
    : `temperature ${params.temperature} moves ${quote(lead.text)} from ${percent(lead.before)} to ${percent(lead.after)}`;
  const cuts = cutsText(params);
  const vocabText = vocab ? ` of ${vocab.toLocaleString("en-US")}` : "";
  const kept = cuts ? `${cuts} keep${cuts.includes(" and ") ? "" : "s"} ${plural(ev.n_kept, "token")}${vocabText} ` +
    `(${percent(ev.kept_mass)} of the probability)` : `no cut: all ${plural(ev.n_kept, "token")} stay in the draw`;
  const drawn = chosen ? `, ${percent(chosen.drawn)} after renormalizing` : "";
  return `${head}: ${temp}; ${kept}; drawn: ${chosenText} (${place}${drawn}).`;
}

/** A converter for one run at a time (it starts over at `run_started`): each `sampling_step` becomes
 * {caption, index, bars, rank, nKept, keptMass, context, token}; `context` is the text the step continued. */
export function samplingSteps({ vocab = null } = {}) {
  let params = {};
  let text = "";
  let index = 0;
  let drawnText = null; // the `token` event just before each `sampling_step`: its text, whatever the token's rank
  return function fromEvent(ev) {
    if (ev.type === "run_started") {
      params = ev.params || {};
      text = (ev.prompt_tokens || []).join("");
      index = 0;
      return null;
    }
    if (ev.type === "token") drawnText = ev.text;
    if (ev.type !== "sampling_step") return null;
    const total = params.max_new_tokens || null;
    const step = {
      caption: stepCaption(ev, params, { index, total, vocab }),
      index, bars: stepBars(ev), rank: ev.rank, nKept: ev.n_kept, keptMass: ev.kept_mass, context: text,
      token: ev.top_texts[ev.rank] ?? drawnText, temperature: params.temperature,
    };
    text += step.token ?? "";
    index += 1;
    return step;
  };
}
