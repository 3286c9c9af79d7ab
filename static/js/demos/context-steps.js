// A long-context run (demos/catalog/long_context.py; docs/trace-schema/course-demos.md) as timeline steps, without
// the page (tested under node): `context_window` says what is measured (no step of its own), then each
// `eviction_point` is one step: the perplexities measured so far (the picture's curves, the current one marked) and,
// at the step's budget, which tokens each policy measured so far kept at the window's last query. Each caption is
// written from those same numbers.
//
//   const steps = contextSteps();  for (const ev of events) { const step = steps.fromEvent(ev); … }

const pct = (x) => `${Math.round(100 * x)}%`;
export const fmtPpl = (x) => (x >= 100 ? x.toFixed(0) : x.toFixed(x >= 10 ? 1 : 2));

/** How many tokens the last query saw, on average over the layer × key/value-head caches. */
export const keptCount = (kept) => Math.round(kept.reduce((a, b) => a + b, 0));

/** A fresh converter for one run: fromEvent(ev) → a step or null. */
export function contextSteps() {
  let window = null;
  let full = null;
  const points = [];

  function pointStep(ev) {
    points.push(ev);
    if (ev.policy === "full") full = ev;
    const n = window ? window.n_context : ev.kept.length;
    const scored = ev.n_scored;
    const atBudget = points.filter((p) => p.budget === ev.budget && p.policy !== "full");
    let caption;
    if (ev.policy === "full") {
      caption = `Full cache: every one of the window's ${n} tokens stays. The perplexity of the text's last ${scored} ` +
        `tokens is ${fmtPpl(ev.perplexity)}; every budget below is measured against it.`;
    } else {
      const ratio = full ? ` ${(ev.perplexity / full.perplexity).toFixed(2)}× the full cache's ${fmtPpl(full.perplexity)}` : "";
      const others = atBudget.filter((p) => p !== ev).map((p) => `${p.label}: ${fmtPpl(p.perplexity)}`);
      caption = `A cache of ${ev.budget} of the window's ${n} tokens, ${ev.label}: the last ${scored} tokens' perplexity ` +
        `is ${fmtPpl(ev.perplexity)},${ratio}. The text's first token is in ${pct(ev.kept[0])} of the caches at the last ` +
        `token.${others.length ? ` At ${ev.budget} tokens so far: ${others.join("; ")}.` : ""}`;
    }
    return {
      kind: "point", ev, full, window, points: points.slice(), current: points.length - 1,
      kept: ev.policy === "full" ? [ev] : atBudget, caption,
    };
  }

  return {
    fromEvent(ev) {
      if (!ev) return null;
      if (ev.type === "context_window") { window = ev; return null; }
      if (ev.type === "eviction_point") return pointStep(ev);
      return null;
    },
  };
}

/** The curves of a step: one series per policy, {policy, budgets, perplexities}, in the order first measured. */
export function curves(points) {
  const byPolicy = new Map();
  for (const p of points) {
    if (p.policy === "full") continue;
    if (!byPolicy.has(p.policy)) byPolicy.set(p.policy, { policy: p.policy, budgets: [], perplexities: [] });
    const c = byPolicy.get(p.policy);
    c.budgets.push(p.budget);
    c.perplexities.push(p.perplexity);
  }
  return [...byPolicy.values()];
}
