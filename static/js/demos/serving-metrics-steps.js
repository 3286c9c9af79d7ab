// A serving-metrics run (demos/catalog/serving_metrics.py; docs/trace-schema/serving-metrics.md) as timeline steps,
// without the page (tested under node): one step per moment of a request's life (`serving_request`: it arrived, got
// its first token, or finished), each holding every request's timeline up to that moment and the latency figures so
// far, and one last step for the run's `serving_metrics_summary`. Captions are written from the step's own numbers,
// the ones its picture and cards show.
//
//   const steps = servingSteps({ ttft_slo_s, tpot_slo_s });  for (const ev of events) { const step = steps.fromEvent(ev); … }

/** Nearest rank, as the runner computes it: the smallest value with at least a share q of the values at or below it. */
export function percentile(values, q) {
  if (!values.length) return 0;
  const ranked = [...values].sort((a, b) => a - b);
  return ranked[Math.max(0, Math.ceil(q * ranked.length - 1e-9) - 1)];
}

/** Seconds as a caption reads them: '850 ms' below a second, '1.24 s' above. */
export const secs = (s) => (s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(2)} s`);
const at = (t) => `${t.toFixed(2)} s`;
const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;

/** What the cards show at a moment: the latency figures of the requests that reached it. */
export function figuresSoFar(requests) {
  const ttft = requests.filter((r) => r.first !== null).map((r) => r.first - r.arrival);
  const itl = requests.filter((r) => r.end !== null).flatMap((r) => r.tokens.slice(1).map((t, i) => t - r.tokens[i]));
  return { ttft, itl, ttftP50: percentile(ttft, 0.5), ttftP99: percentile(ttft, 0.99),
    itlP50: percentile(itl, 0.5), itlP99: percentile(itl, 0.99) };
}

/** Why a finished request missed its targets, or that it met both. */
export function verdict(ev, targets) {
  if (ev.met_slo) return "it met both targets";
  const missed = [];
  if (targets && ev.ttft_s > targets.ttft_slo_s) missed.push(`TTFT over the ${secs(targets.ttft_slo_s)} target`);
  if (targets && ev.tpot_s > targets.tpot_slo_s) missed.push(`TPOT over the ${secs(targets.tpot_slo_s)} target`);
  return `it missed: ${missed.join(", ") || "a target"}`;
}

const shared = (others) => (others > 0 ? `It shared forward passes with up to ${plural(others, "other request", "other requests")}.`
  : "It ran alone in every forward pass.");

function momentCaption(ev, r, targets) {
  const load = `${plural(ev.in_flight, "request", "requests")} in flight, ${ev.n_finished} finished.`;
  if (ev.phase === "arrived") {
    return `At ${at(ev.t_s)} request #${r.id} arrives (a ${ev.n_prompt_tokens}-token prompt): ${load}`;
  }
  if (ev.phase === "first_token") {
    return `At ${at(ev.t_s)} request #${r.id} gets its first token, ${secs(ev.ttft_s)} after it arrived at ` +
      `${at(r.arrival)}: its TTFT. ${load}`;
  }
  return `At ${at(ev.t_s)} request #${r.id} finishes: ${ev.token_s.length} tokens, TTFT ${secs(ev.ttft_s)}, ` +
    `TPOT ${secs(ev.tpot_s)}, end to end ${secs(ev.e2e_s)}; ${verdict(ev, targets)}. ` +
    `${shared(Math.max(...ev.batch_sizes) - 1)} ${load}`;
}

/** The caption of the run's summary: percentiles against the mean, goodput against throughput, Little's law. */
export function summaryCaption(s) {
  const missedAll = s.n_finished < s.n_requests ? ` (${s.n_requests - s.n_finished} never finished)` : "";
  return `${s.n_finished} requests${missedAll} in ${at(s.span_s)}: throughput ${s.throughput_tokens_per_s.toFixed(1)} ` +
    `tokens/s, ${s.requests_per_s.toFixed(2)} requests/s. TTFT p50 ${secs(s.ttft_p50_s)}, p99 ${secs(s.ttft_p99_s)} ` +
    `(mean ${secs(s.ttft_mean_s)}); inter-token latency p50 ${secs(s.itl_p50_s)}, p99 ${secs(s.itl_p99_s)}. ` +
    `${s.n_met_slo} of ${s.n_finished} met both targets (TTFT ≤ ${secs(s.ttft_slo_s)}, TPOT ≤ ${secs(s.tpot_slo_s)}): ` +
    `goodput ${s.goodput_requests_per_s.toFixed(2)} requests/s. Little's law: ${s.requests_per_s.toFixed(2)} requests/s × ` +
    `${secs(s.e2e_mean_s)} mean latency = ${s.mean_in_flight.toFixed(1)} requests in flight on average ` +
    `(at most ${s.max_in_flight} at once; the engine runs up to ${s.slots} in one forward pass).`;
}

/** A fresh converter for one run (targets: the run's ttft_slo_s and tpot_slo_s): fromEvent(ev) → a step or null. */
export function servingSteps(targets = null) {
  const requests = new Map();
  const snapshot = () => [...requests.values()].map((r) => ({ ...r }));

  function moment(ev) {
    let r = requests.get(ev.request_id);
    if (!r) {
      r = { id: ev.request_id, prompt: ev.prompt, arrival: ev.t_s, first: null, end: null, tokens: [], met: null };
      requests.set(r.id, r);
    }
    if (ev.phase === "first_token") r.first = ev.t_s;
    if (ev.phase === "finished") Object.assign(r, { end: ev.t_s, tokens: ev.token_s.slice(), met: ev.met_slo });
    const shown = snapshot();
    return { kind: "moment", t: ev.t_s, ev, requests: shown, inFlight: ev.in_flight, finished: ev.n_finished,
      ...figuresSoFar(shown), caption: momentCaption(ev, r, targets) };
  }

  return {
    fromEvent(ev) {
      if (!ev) return null;
      if (ev.type === "serving_request") return moment(ev);
      if (ev.type === "serving_metrics_summary") {
        const shown = snapshot();
        return { kind: "summary", t: ev.span_s, ev, requests: shown, ...figuresSoFar(shown), caption: summaryCaption(ev) };
      }
      return null;
    },
  };
}
