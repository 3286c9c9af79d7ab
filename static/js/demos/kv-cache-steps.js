// The KV-cache demo's run as steps (one per forward pass), without the page: tested under node
// (tests/js/kv-cache-steps.test.mjs). Each step says which K/V columns (positions) the forward wrote, how many the
// cache holds after it, and what the two ways of generating have computed so far, so drawing a step is cheap.
//
//   const fromEvent = kvSteps();   // one per run: feed it every event, in order
//   const step = fromEvent(ev);    // a step for a `token` event, else null
//
// A step: {caption, run, step, phase, written: [from, to) columns computed in this forward, cached (positions held
// after it: 0 without the cache), heldBytes, withCacheBytes (K/V computed so far with a cache: each position once),
// withoutCacheBytes (K/V recomputed so far without one: every position again at every step), out (the token made),
// generated (tokens made so far, this one included), stepTimeS and nInputs (this forward's time and input tokens):
// everything the demo's cards show about the step, so they follow the scrubber with the picture.
// `run` is shared by the run's steps: {nPrompt, nLayers, perToken, useCache, capacity, tokens (text per position)}.
import { formatBytes } from "../units.js";

/** A token's text as a caption quotes it: a newline shows as ↵. */
export function quote(text) {
  return `“${String(text).replace(/\n/g, "↵")}”`;
}

/** Why the caption reads as it does: what this forward put into (or recomputed for) the K/V grid. */
function caption(run, s) {
  const grid = `${run.nLayers} layers × K and V`;
  const out = `Out comes ${quote(s.out)}.`;
  if (!run.useCache) {
    return `Step ${s.step + 1}, no cache: all ${s.written[1]} positions recomputed (${grid}, ` +
      `${formatBytes(s.written[1] * run.perToken)}) and thrown away; nothing is kept. ${out}`;
  }
  const held = `cache now ${s.cached} positions, ${formatBytes(s.heldBytes)}`;
  if (s.phase === "prefill") {
    const n = s.written[1] - s.written[0];
    return `Prefill: the ${n} prompt tokens enter the cache at once: ${n} new columns (${grid}); ${held}. ${out}`;
  }
  const fed = run.tokens[s.written[0]];
  return `Token ${s.step} ${quote(fed)} goes in: 1 new column (${grid}); ${held}; ` +
    `without the cache this step recomputes ${s.cached} positions. ${out}`;
}

/** A step maker for one run: `run_started` sets the run up, each `token` (one forward pass) makes a step. */
export function kvSteps() {
  let run = null;
  let withoutSoFar = 0;
  return function fromEvent(ev) {
    if (ev.type === "run_started") {
      const nPrompt = ev.prompt_tokens.length;
      const params = ev.params || {};
      run = { nPrompt, nLayers: ev.n_layers, perToken: ev.kv_bytes_per_token, useCache: params.use_cache !== false,
        // Every position that can get K/V: the prompt and every generated token but the last (never fed back).
        capacity: nPrompt + Math.max(1, (params.max_new_tokens || 1) - 1),
        tokens: [...ev.prompt_tokens] };
      withoutSoFar = 0;
      return null;
    }
    if (ev.type !== "token" || !run) return null;
    // This forward computed K/V for positions [position − inputs, position); the token it made sits at `position`.
    const to = ev.position;
    const from = Math.max(0, to - ev.n_input_tokens);
    run.tokens[ev.position] = ev.text;
    run.capacity = Math.max(run.capacity, to);
    withoutSoFar += to * run.perToken; // a cache-less forward recomputes every position so far
    const s = { run, step: ev.step, phase: ev.phase, written: [from, to], cached: run.useCache ? to : 0,
      heldBytes: ev.kv_bytes_total, withCacheBytes: to * run.perToken, withoutCacheBytes: withoutSoFar, out: ev.text,
      generated: ev.step + 1, stepTimeS: ev.step_time_s, nInputs: ev.n_input_tokens };
    s.caption = caption(run, s);
    return s;
  };
}

/** Cell values of one grid row for `step`: null (no K/V yet), 1 (held in the cache, read by this forward),
 * 2 (computed by this forward). Every layer's row, K and V alike, is the same row. */
export function gridRow(step) {
  const row = new Array(step.run.capacity).fill(null);
  if (step.run.useCache) row.fill(1, 0, step.written[0]);
  row.fill(2, step.written[0], step.written[1]);
  return row;
}
