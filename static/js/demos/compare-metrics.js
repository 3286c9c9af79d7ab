// What "Compare runs" (run-history.js) overlays for each demo: per demo, one or more metrics, each reading one
// series out of a finished run's trace events (docs/trace-schema.md). A demo gets the comparison by having an
// entry here; demoShell (course-demo-kit.js) and kv-cache.js look it up by the demo's name.
//   {key, label (chart title), x, y (axis titles), type?: "bar" (categories on x), extract(events) -> {x, y, lo?, hi?}}
// (lo, hi: each bar's error bar ends). A demo that times two settings in alternating repeats compares runs on what the
// repeats measured (`timedRepeats`: medians, error bars to the spread), never on one streamed run's clock.

function series(events, keep, x, y) {
  const out = { x: [], y: [] };
  for (const e of events) if (keep(e)) { out.x.push(x(e)); out.y.push(y(e)); }
  return out;
}

const MiB = 1024 * 1024;
const isToken = (e) => e.type === "token";
const stepMs = { key: "step_ms", label: "Time per forward pass", x: "step (0 = prefill)", y: "ms",
  extract: (ev) => series(ev, isToken, (e) => e.step, (e) => e.step_time_s * 1000) };

/** The run's `comparison` (demos/catalog/comparison.py): a bar per side at its median in ms, lo/hi the spread. */
export function timedRepeats(label) {
  return { key: "timed", label, x: "", y: "ms (median of the repeats; error bars: their spread)", type: "bar",
    extract: (events) => {
      const c = events.filter((e) => e.type === "comparison").pop();
      if (!c) return { x: [], y: [] };
      const ms = (key) => c.sides.map((side) => side[key] * 1000);
      return { x: c.sides.map((side) => side.label), y: ms("median_s"), lo: ms("low_s"), hi: ms("high_s") };
    } };
}

export const COMPARE_METRICS = {
  attention: [
    { key: "last_row", label: "Attention of the last token", x: "key position", y: "weight",
      extract: (ev) => {
        const a = ev.filter((e) => e.type === "attention_weights").pop();
        const row = a ? a.weights[a.weights.length - 1] : [];
        return { x: row.map((_, j) => j), y: row };
      } },
  ],
  // Not the time per step: the demo's own chart already overlays each run's (drawn twice, it read as a repeat).
  "kv-cache": [
    { key: "kv_bytes", label: "KV cache size", x: "token position", y: "MiB",
      extract: (ev) => series(ev, isToken, (e) => e.position, (e) => e.kv_bytes_total / MiB) },
  ],
  "prefill-decode": [stepMs],
  "flash-attention": [timedRepeats("Attention time: naive vs tiled")],
  "serving-load": [timedRepeats("Time until every request had its last token: batched vs sequential")],
  speculative: [timedRepeats("Time to generate the answer: plain vs speculative")],
  quantization: [timedRepeats("Time per decode step: fp32 vs the quantized format")],
  "paged-attention": [
    // Memory, not block counts: runs with different block sizes have blocks of different sizes.
    { key: "kv_bytes", label: "KV memory in use (blocks × bytes per block)", x: "scheduler step", y: "MiB",
      extract: (ev) => {
        const start = ev.find((e) => e.type === "batch_run_started");
        const perBlock = start ? start.kv_bytes_per_block : NaN;
        return series(ev, (e) => e.type === "batch_step", (e) => e.step, (e) => (e.blocks_used * perBlock) / MiB);
      } },
  ],
  batching: [timedRepeats("Mean time to first token: continuous vs static")],
  "prefix-caching": [timedRepeats("Time to first token: without vs with the prefix cache")],
  sampling: [
    // How sure the draw was at each step: the drawn token's share of the kept set (1 for greedy).
    { key: "drawn_p", label: "Probability of the drawn token", x: "step", y: "probability (after the cut)",
      extract: (ev) => series(ev, (e) => e.type === "sampling_step", (e) => e.step,
        (e) => (e.rank < e.probs_t.length && e.kept_mass > 0 ? e.probs_t[e.rank] / e.kept_mass : NaN)) },
  ],
};

export function compareMetrics(demo) {
  return COMPARE_METRICS[demo] || [];
}
