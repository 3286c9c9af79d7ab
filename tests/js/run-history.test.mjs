// Run comparison and provenance helpers (no browser needed). Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { COMPARE_METRICS } from "../../static/js/demos/compare-metrics.js";
import { changedSettings, errorBars, fmtWhen, legendNames, provenanceText } from "../../static/js/demos/run-history.js";

const spec = { params: { use_cache: { label: "Use the KV cache" }, format: { label: "Format" }, k: { label: "Guesses per round" } } };

test("the legend names only the parameters that differ between the runs", () => {
  const runs = [
    { params: { prompt: "Hi", use_cache: true, max_new_tokens: 8 } },
    { params: { prompt: "Hi", use_cache: false, max_new_tokens: 8 } },
  ];
  assert.deepEqual(legendNames(runs, spec), ["Use the KV cache: on", "Use the KV cache: off"]);
  const three = [{ params: { format: "int8", k: 4 } }, { params: { format: "nf4", k: 4 } }, { params: { format: "nf4", k: 2 } }];
  assert.deepEqual(legendNames(three, spec), ["Format: “int8”, Guesses per round: 4", "Format: “nf4”, Guesses per round: 4",
    "Format: “nf4”, Guesses per round: 2"]);
});

test("runs with the same settings are told apart by live/replay, else by their time", () => {
  const replay = [{ params: { k: 4 }, mode: "live" }, { params: { k: 4 }, mode: "replay" }];
  assert.deepEqual(legendNames(replay, spec), ["live", "replay"]);
  const same = [{ params: { k: 4 }, when: "2026-11-25T10:03:00Z" }, { params: { k: 4 }, when: "2026-11-25T10:05:00Z" }];
  assert.deepEqual(legendNames(same, spec), ["same settings, 10:03", "same settings, 10:05"]);
  assert.deepEqual(legendNames([{ params: { k: 4 } }], spec), ["this run"]);
});

test("provenance names live or replay, the device, dtype, engine version and the original date", () => {
  const header = { mode: "replay", replay_reason: "busy", device: "cpu", dtype: "float32", engine_version: "0123abcd",
    model: "smollm2-135m", measured_at: "2026-11-20T14:03:09+00:00" };
  const text = provenanceText(header);
  assert.match(text, /^Replay of a run recorded 2026-11-20 14:03 UTC on cpu · float32, engine version 0123abcd/);
  assert.match(text, /every worker was busy/);
  assert.match(provenanceText({ ...header, replay_reason: "requested" }), /you asked for a stored run/);
  assert.match(provenanceText({ ...header, mode: "live" }), /^Live run on cpu · float32, engine version 0123abcd/);
  assert.match(provenanceText(header, { shared: true }), /^Shared run \(read-only, nothing runs\): measured 2026-11-20/);
  assert.equal(fmtWhen("not a date"), "an unknown date");
});

test("every demo's comparison reads its series from the trace", () => {
  const tokens = [{ type: "run_started" }, { type: "token", step: 0, position: 5, step_time_s: 0.02, kv_bytes_total: 100 },
    { type: "token", step: 1, position: 6, step_time_s: 0.01, kv_bytes_total: 120 }];
  assert.deepEqual(COMPARE_METRICS["prefill-decode"][0].extract(tokens), { x: [0, 1], y: [20, 10] });
  // The KV cache's size in MiB (its time per step is the demo's own chart, not repeated here).
  assert.deepEqual(COMPARE_METRICS["kv-cache"].map((m) => m.key), ["kv_bytes"]);
  assert.deepEqual(COMPARE_METRICS["kv-cache"][0].extract(tokens.map((e) => ({ ...e, kv_bytes_total: (e.kv_bytes_total || 0) * 1024 ** 2 }))),
    { x: [5, 6], y: [100, 120] });
  // Paged attention compares memory: blocks × bytes per block, so runs with other block sizes compare fairly.
  const paged = (blockSize) => [{ type: "batch_run_started", block_size: blockSize, kv_bytes_per_block: blockSize * 1024 * 1024 },
    { type: "batch_step", step: 0, blocks_used: 32 / blockSize }];
  assert.deepEqual(COMPARE_METRICS["paged-attention"][0].extract(paged(8)), COMPARE_METRICS["paged-attention"][0].extract(paged(16)));
  assert.deepEqual(COMPARE_METRICS["paged-attention"][0].extract(paged(16)), { x: [0], y: [32] });
  for (const name of ["prefill-decode", "serving-load", "speculative", "quantization", "paged-attention", "prefix-caching"]) {
    assert.ok(COMPARE_METRICS[name].length >= 1, name);
  }
});

test("a demo that times two settings compares runs on its repeats' medians and spreads, never one streamed run", () => {
  const side = (label, low, median, high) => ({ label, median_s: median, low_s: low, high_s: high, times_s: [low, median, high] });
  const trace = [
    { type: "batch_run_started", mode: "continuous" }, { type: "batch_run_finished", metrics: { mean_ttft_ms: 900 } },
    { type: "comparison_sample", side: "continuous", time_s: 0.5 },
    { type: "comparison", sides: [side("continuous", 0.3, 0.35, 0.5), side("static", 0.6, 0.7, 0.75)] }];
  for (const name of ["batching", "prefix-caching", "speculative", "flash-attention", "quantization", "serving-load"]) {
    const metric = COMPARE_METRICS[name][0];
    assert.equal(metric.type, "bar", name);
    assert.deepEqual(metric.extract(trace), { x: ["continuous", "static"], y: [350, 700], lo: [300, 600], hi: [500, 750] }, name);
    assert.deepEqual(metric.extract(trace.slice(0, 3)), { x: [], y: [] }, name); // stopped before its repeats: no bar
  }
  const bars = errorBars({ x: ["a", "b"], y: [350, 700], lo: [300, 600], hi: [500, 750] }).error_y;
  assert.deepEqual([bars.array, bars.arrayminus], [[150, 50], [50, 100]]);
  assert.deepEqual(errorBars({ x: [1], y: [2] }), {}); // a line of one run's points has none
});

test("the stored-run picker names every setting that changed, wherever it sits in the spec", () => {
  // Serving's "Scheduling" and speculative's "k" come after the first three parameters: they were left out.
  const spec = { params: { n_requests: { label: "Requests", default: 3 }, max_new_tokens: { label: "Tokens per request", default: 6 },
    spacing_s: { label: "Seconds between arrivals", default: 0 }, mode: { label: "Scheduling", default: "batched" } } };
  const runs = [{ n_requests: 3, max_new_tokens: 6, spacing_s: 0, mode: "batched" },
    { n_requests: 3, max_new_tokens: 6, spacing_s: 0, mode: "sequential" }];
  assert.deepEqual(changedSettings(runs, spec), ["Scheduling: “batched”", "Scheduling: “sequential”"]);
  // One run: what differs from the defaults; none: say so.
  assert.deepEqual(changedSettings([{ n_requests: 3, mode: "sequential" }], spec), ["Scheduling: “sequential”"]);
  assert.deepEqual(changedSettings([{ n_requests: 3, mode: "batched" }], spec), ["default settings"]);
});
