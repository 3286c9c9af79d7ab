// A token-cost run (demos/catalog/token_cost.py; docs/trace-schema/course-demos.md) as timeline steps, without the
// page (tested under node): one step per batch size as it was measured (every point so far, the newest marked) and
// one for the summary. Each caption is written from the numbers its chart and cards show.
//
//   const steps = costSteps();  for (const ev of events) { const step = steps.fromEvent(ev); … }

export const dollars = (x) => (!Number.isFinite(x) ? "–" : x >= 100 ? `$${Math.round(x).toLocaleString("en-US")}`
  : x >= 1 ? `$${x.toFixed(2)}` : `$${x.toFixed(3)}`);
export const ms = (s) => `${Math.round(s * 1000)} ms`;
const rate = (x) => `${x >= 100 ? Math.round(x) : x.toFixed(1)} tokens/s`;

/** The caption of batch size point `p`, beside batch 1 (`first`). */
export function pointCaption(p, first) {
  const alone = first && first !== p
    ? ` Against batch 1: ${(p.output_tokens_per_s / first.output_tokens_per_s).toFixed(1)}× the tokens per second, ` +
      `${(first.usd_per_million / p.usd_per_million).toFixed(1)}× cheaper per token, each request's tokens ` +
      `${(p.tpot_median_s / first.tpot_median_s).toFixed(1)}× as far apart.`
    : "";
  return `Batch ${p.batch_size}: ${p.batch_size} request${p.batch_size === 1 ? "" : "s"} decoding together produced ` +
    `${p.output_tokens} tokens in ${p.duration_s.toFixed(1)} s, ${rate(p.output_tokens_per_s)}, so at ` +
    `${dollars(p.price_per_hour)} an hour a million tokens cost ${dollars(p.usd_per_million)}; each request waited ` +
    `${ms(p.tpot_median_s)} per token (median).${alone}`;
}

/** The caption of the summary: offline against interactive, and what the latency target allows. */
export function summaryCaption(s) {
  const saving = s.interactive_usd_per_million / s.cheapest_usd_per_million;
  const target = s.within_target_batch == null
    ? `No batch size met the target of ${ms(s.target_tpot_s)} per token: an interactive product on this machine would need a faster one.`
    : `With a target of ${ms(s.target_tpot_s)} per token, batch ${s.within_target_batch} is the cheapest that meets it, ` +
      `at ${dollars(s.within_target_usd_per_million)} a million.`;
  return `Interactive, one request at a time: ${dollars(s.interactive_usd_per_million)} a million tokens. Batched ` +
    `(${s.cheapest_batch} at once): ${dollars(s.cheapest_usd_per_million)}, ${saving.toFixed(1)}× cheaper. ${target}`;
}

export function costSteps() {
  const points = [];
  return {
    fromEvent(ev) {
      if (!ev) return null;
      if (ev.type === "cost_point") {
        points.push(ev);
        return { kind: "point", points: points.slice(), current: points.length - 1, caption: pointCaption(ev, points[0]) };
      }
      if (ev.type === "cost_summary") return { kind: "summary", points: points.slice(), summary: ev, caption: summaryCaption(ev) };
      return null;
    },
  };
}
