// What "Compare runs" (run-history.js) overlays for each demo: per demo, one or more metrics, each reading one
// series out of a finished run's trace events (docs/trace-schema.md). A demo gets the comparison by having an
// entry here; demoShell (course-demo-kit.js) and kv-cache.js look it up by the demo's name.
//   {key, label (chart title), x, y (axis titles), type?: "bar" (categories on x), extract(events) -> {x, y}}

function series(events, keep, x, y) {
  const out = { x: [], y: [] };
  for (const e of events) if (keep(e)) { out.x.push(x(e)); out.y.push(y(e)); }
  return out;
}

const MiB = 1024 * 1024;
const isToken = (e) => e.type === "token";
const stepMs = { key: "step_ms", label: "Time per forward pass", x: "step (0 = prefill)", y: "ms",
  extract: (ev) => series(ev, isToken, (e) => e.step, (e) => e.step_time_s * 1000) };

/** One bar per batch run of the trace (batching: per mode; prefix caching: without/with the cache). */
function perBatchRun(name, value) {
  return (events) => {
    const out = { x: [], y: [] };
    let label = null;
    for (const e of events) {
      if (e.type === "batch_run_started") label = name(e);
      else if (e.type === "batch_run_finished" && label !== null) {
        out.x.push(label);
        out.y.push(value(e.metrics || {}));
      }
    }
    return out;
  };
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
  "flash-attention": [
    { key: "time_ms", label: "Attention time: naive vs tiled", x: "", y: "ms (median of 3)", type: "bar",
      extract: (ev) => {
        const c = ev.filter((e) => e.type === "attention_compare").pop();
        return c ? { x: ["naive", "tiled"], y: [c.naive_time_s * 1000, c.tiled_time_s * 1000] } : { x: [], y: [] };
      } },
  ],
  "serving-load": [
    { key: "tokens", label: "Tokens generated over time", x: "seconds since the start", y: "tokens",
      extract: (ev) => series(ev, (e) => e.type === "load_step", (e) => e.t_s, (e) => e.tokens_total) },
  ],
  speculative: [
    { key: "tokens", label: "Tokens generated over time", x: "seconds since the start", y: "tokens",
      extract: (ev) => series(ev, (e) => e.type === "spec_round", (e) => e.elapsed_s, (e) => e.n_generated) },
  ],
  quantization: [
    { key: "step_ms", label: "Time per decode step, quantized model", x: "step", y: "ms",
      extract: (ev) => series(ev, (e) => e.type === "quant_token" && e.variant !== "fp32", (e) => e.step,
        (e) => e.step_time_s * 1000) },
  ],
  "paged-attention": [
    // Memory, not block counts: runs with different block sizes have blocks of different sizes.
    { key: "kv_bytes", label: "KV memory in use (blocks × bytes per block)", x: "scheduler step", y: "MiB",
      extract: (ev) => {
        const start = ev.find((e) => e.type === "batch_run_started");
        const perBlock = start ? start.kv_bytes_per_block : NaN;
        return series(ev, (e) => e.type === "batch_step", (e) => e.step, (e) => (e.blocks_used * perBlock) / MiB);
      } },
  ],
  batching: [
    { key: "throughput", label: "Output tokens per second, per mode", x: "", y: "tokens/s", type: "bar",
      extract: perBatchRun((e) => e.mode, (m) => m.output_throughput) },
  ],
  "prefix-caching": [
    { key: "ttft", label: "Mean time to first token", x: "", y: "ms", type: "bar",
      extract: perBatchRun((e) => (e.prefix_caching ? "with the cache" : "without"), (m) => m.mean_ttft_ms) },
  ],
};

export function compareMetrics(demo) {
  return COMPARE_METRICS[demo] || [];
}
