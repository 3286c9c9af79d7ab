// Run comparison and provenance helpers (no browser needed). Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { COMPARE_METRICS } from "../../static/js/demos/compare-metrics.js";
import { fmtWhen, legendNames, provenanceText } from "../../static/js/demos/run-history.js";

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
  assert.deepEqual(COMPARE_METRICS["kv-cache"][0].extract(tokens), { x: [0, 1], y: [20, 10] });
  assert.deepEqual(COMPARE_METRICS["kv-cache"][1].extract(tokens), { x: [5, 6], y: [100, 120] });
  const batches = [{ type: "batch_run_started", mode: "continuous" }, { type: "batch_run_finished", metrics: { output_throughput: 9 } },
    { type: "batch_run_started", mode: "static" }, { type: "batch_run_finished", metrics: { output_throughput: 5 } }];
  assert.deepEqual(COMPARE_METRICS.batching[0].extract(batches), { x: ["continuous", "static"], y: [9, 5] });
  const flash = [{ type: "attention_compare", naive_time_s: 0.004, tiled_time_s: 0.002 }];
  assert.deepEqual(COMPARE_METRICS["flash-attention"][0].extract(flash), { x: ["naive", "tiled"], y: [4, 2] });
  for (const name of ["prefill-decode", "serving-load", "speculative", "quantization", "paged-attention", "prefix-caching"]) {
    assert.ok(COMPARE_METRICS[name].length >= 1, name);
  }
});
