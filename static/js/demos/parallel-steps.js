// A model-parallel run (demos/catalog/tensor_parallel.py; docs/trace-schema/course-demos.md) as timeline steps,
// without the page (tested under node): one step for the split (`parallel_plan`: what each rank holds), one per
// forward on both ranks (`parallel_step`: every step so far, for the compute/communication bars, and the tokens of
// both runs so far), and the run's totals (`parallel_summary`). Each caption is written from the numbers its
// picture and cards show.
//
//   const steps = parallelSteps();  for (const ev of events) { const step = steps.fromEvent(ev); … }

export const ms = (s) => `${(1000 * s).toFixed(1)} ms`;
const pct = (part, whole) => `${whole > 0 ? Math.round((100 * part) / whole) : 0}%`;
const range = ([lo, hi]) => (hi - lo === 1 ? `${lo}` : `${lo}–${hi - 1}`);
const list = (xs) => (xs.length > 1 && xs[xs.length - 1] - xs[0] === xs.length - 1 ? `${xs[0]}–${xs[xs.length - 1]}` : xs.join(", "));
export const quoted = (text) => `'${String(text).replace(/\n/g, "⏎")}'`;

/** What each rank holds, in words. */
export function planCaption(ev) {
  if (ev.split === "pipeline") {
    const [a, b] = ev.ranks;
    return `Pipeline over ${ev.world_size} processes (${ev.backend}): rank 0 holds the embeddings and layers ${range(a.layers)}, ` +
      `rank 1 layers ${range(b.layers)} and the head. Each step, rank 0 sends its hidden state to rank 1 and rank 1 sends ` +
      `the token back: with one request, one rank waits while the other computes.`;
  }
  const held = ev.ranks.map((r) => `rank ${r.rank} holds key/value ${r.kv_groups.length > 1 ? "groups" : "group"} ` +
    `${list(r.kv_groups)} (query heads ${list(r.query_heads)}) and MLP columns ${range(r.ffn_columns)}, ` +
    `${r.weights.toLocaleString("en-US")} weights a layer`).join("; ");
  return `Tensor parallel over ${ev.world_size} processes (${ev.backend}): ${ev.n_heads} query heads on ${ev.n_kv_heads} ` +
    `key/value heads do not split in two, so ${held}. Each layer ends its attention and its MLP with one all-reduce: ` +
    `${ev.collectives_per_layer} a layer, ${ev.collectives_per_layer * ev.n_layers} a step.`;
}

/** A fresh converter for one run: fromEvent(ev) → a step or null. */
export function parallelSteps() {
  const rows = [];
  let plan = null;

  function stepStep(ev) {
    rows.push(ev);
    const what = ev.step === 0 ? `Step 0 (the prompt's ${ev.n_tokens} tokens at once)` : `Step ${ev.step} (one token)`;
    const talk = plan && plan.split === "pipeline" ? "sending and waiting" : `in ${ev.ranks[0].collectives} all-reduces`;
    const ranks = ev.ranks.map((r) => `rank ${r.rank} computed ${ms(r.compute_s)} and spent ${ms(r.comm_s)} ${talk}` +
      ` (${pct(r.comm_s, r.compute_s + r.comm_s)} of its step)`).join("; ");
    const same = ev.same ? `the token one process chose too` : ev.reference_text === null
      ? "one process had already stopped" : `one process chose ${quoted(ev.reference_text)}`;
    return { kind: "step", ev, rows: rows.slice(), current: rows.length - 1, split: plan ? plan.split : null,
      tokens: rows.map((r) => r.token_text).join(""),
      reference: rows.map((r) => r.reference_text ?? "").join(""),
      identical: rows.every((r) => r.same),
      caption: `${what}: ${ranks}. The ranks chose ${quoted(ev.token_text)}, ${same}.` };
  }

  function summaryStep(ev) {
    const decode = ev.n_steps - 1;
    const ranks = ev.compute_s.map((c, r) => `rank ${r} computed ${ms(c)} and communicated ${ms(ev.comm_s[r])} ` +
      `(${pct(ev.comm_s[r], c + ev.comm_s[r])})`).join("; ");
    const verdict = ev.identical ? `All ${ev.n_steps} tokens are the ones one process chose.`
      : `The tokens differ from one process's.`;
    return { kind: "summary", ev, rows: rows.slice(), current: rows.length - 1, split: ev.split, identical: ev.identical,
      tokens: ev.text, reference: ev.reference_text,
      caption: `${verdict} Over the ${decode} decode steps, ${ranks}; ${ev.collectives_per_step} ` +
        `${ev.split === "pipeline" ? "sends" : "all-reduces"} a step.` };
  }

  return {
    fromEvent(ev) {
      if (!ev) return null;
      if (ev.type === "parallel_plan") {
        plan = ev;
        return { kind: "plan", ev, rows: [], split: ev.split, caption: planCaption(ev) };
      }
      if (ev.type === "parallel_step") return stepStep(ev);
      if (ev.type === "parallel_summary") return summaryStep(ev);
      return null;
    },
  };
}
