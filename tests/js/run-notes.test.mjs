// The demos' "why" notes: a result that goes against its lesson is explained from the run's own numbers,
// and a result that agrees gets no note. Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { batchingNote, flashNote, pagedNote, prefillNote, prefixNote, quantNote, speculativeNote } from "../../static/js/demos/run-notes.js";

// Both modes of the default workload (batch 3) counted from the streamed runs, and timed in alternating repeats in
// which continuous batching came out slower beyond noise: fuller steps, each more expensive on a CPU.
const continuous = { mode: "continuous", slots: 3, nSteps: 13, busy: 2.77, meanE2eSteps: 6.5 };
const staticRun = { mode: "static", slots: 3, nSteps: 20, busy: 1.8, meanE2eSteps: 9.2 };
const timedSide = (label, times, waited, passes) => ({ label, times_s: times, median_s: [...times].sort()[1], low_s: Math.min(...times),
  high_s: Math.max(...times), counters: { "steps requests waited before their first pass": waited, "forward passes": passes } });
const batchingComparison = (over = {}) => ({ type: "comparison", metric: "mean time to first token of the requests", repeats: 3,
  spread: "min–max", sides: [timedSide("continuous", [0.43, 0.45, 0.5], 2, 13), timedSide("static", [0.33, 0.35, 0.36], 14, 20)],
  claim: "continuous", faster: "static", within_noise: false, other_sequences: 0, cpu_load_1m: 3.1, ...over });

test("continuous batching slower than static beyond noise in the repeats: explained by steps and occupancy", () => {
  const note = batchingNote([continuous, staticRun], batchingComparison());
  assert.match(note, /Timed in 3 alternating repeats, this run went against the lesson/);
  assert.match(note, /mean time to first token \(median 450\.0 ms\) came out above static's \(350\.0 ms\)/);
  assert.match(note, /13 steps against static's 20, its requests waited 2 steps in all before their first pass against 14/);
  assert.match(note, /6\.5 steps from arrival to its last token on average against 9\.2/);
  assert.match(note, /2\.8 sequences on average against 1\.8 \(of 3 slots\)/);
});

test("no note where the repeats agree with the lesson, overlap, or one mode ran alone", () => {
  assert.equal(batchingNote([continuous, staticRun], batchingComparison({ faster: "continuous" })), "");
  assert.equal(batchingNote([continuous, staticRun], batchingComparison({ within_noise: true })), "");
  assert.equal(batchingNote([continuous, staticRun], batchingComparison({ claim: "" })), "");
  assert.equal(batchingNote([continuous], undefined), ""); // one mode only: nothing timed, nothing to compare
});

const compare = { n_tokens: 12, block_q: 16, block_k: 16, naive_time_s: 0.000155, tiled_time_s: 0.000204,
  naive_score_bytes: 5184, tile_bytes: 5184, tiles_computed: 1, tiles_skipped: 0 };

test("flash attention: a prompt inside one tile, and a tiled pass slower than naive, are both explained", () => {
  const note = flashNote(compare);
  assert.match(note, /Your prompt is 12 tokens and a tile is 16: the whole score matrix fits in one tile/);
  assert.match(note, /plus its online-softmax bookkeeping, so it took longer \(0\.20 ms against 0\.15 ms\)/);
  const several = flashNote({ ...compare, n_tokens: 62, naive_score_bytes: 138384, tile_bytes: 9216, tiles_computed: 10,
    tiles_skipped: 6 });
  assert.doesNotMatch(several, /fits in one tile/);
  assert.match(several, /runs 10 small matrix products/);
  assert.match(several, /15\.0× less score memory held here, and 6 of 16 tiles never computed/);
  assert.equal(flashNote({ ...compare, n_tokens: 62, tiled_time_s: 0.0001 }), ""); // several tiles, tiled faster
});

// A real "Free text" run with the early-exit draft: 4 of 103 guesses accepted.
const struggling = { k: 4, n_generated: 32, rounds: 28, drafted: 103, accepted: 4, acceptance_rate: 0.0388,
  mean_accept_length: 1.1429, draft_forwards: 103, draft_ms_per_forward: 27.05, verify_ms_per_forward: 61.89,
  draft_time_s: 2.786, verify_time_s: 1.733, total_time_s: 4.736 };

// Its repeats: plain 32 tokens in a median of 1.788 s (55.9 ms per token), speculative 4.736 s.
const specSide = (label, median, tokens) => ({ label, times_s: [median * 0.98, median, median * 1.03], median_s: median,
  low_s: median * 0.98, high_s: median * 1.03, counters: { tokens, "target forward passes": 1, "draft forward passes": 0 } });
const specComparison = (plainS, specS, over = {}) => ({ type: "comparison", metric: "time to generate the answer", repeats: 3,
  spread: "min–max", sides: [specSide("plain decoding", plainS, 32), specSide("speculative", specS, 32)], claim: "plain decoding",
  faster: plainS <= specS ? "plain decoding" : "speculative", within_noise: false, other_sequences: 0, cpu_load_1m: 2, ...over });

test("speculative decoding slower than plain: acceptance rate and the verify/step cost ratio, from the run", () => {
  const note = speculativeNote(struggling, specComparison(0.05587 * 32, 4.736));
  assert.match(note, /slower than plain decoding here \(0\.38×, medians of 3 alternating repeats\)/);
  assert.match(note, /only 4 of 103 guesses were accepted \(4%\)/);
  assert.match(note, /1\.14 tokens/);
  assert.match(note, /A verify pass took 61\.9 ms, 1\.11× what plain decoding took per token \(55\.9 ms\)/);
  assert.match(note, /the draft added 27\.1 ms per guess \(103 draft passes\)/);
  assert.match(note, /one round cost as much as 2\.89 plain tokens and produced 1\.14/);
});

test("speculative decoding faster than plain, within noise, or no plain timing: no note", () => {
  const copying = { ...struggling, n_generated: 11, rounds: 4, drafted: 12, accepted: 8, acceptance_rate: 0.667,
    mean_accept_length: 3, draft_forwards: 0, draft_ms_per_forward: 0, draft_time_s: 0, verify_time_s: 0.545,
    total_time_s: 0.9 };
  assert.equal(speculativeNote(copying, specComparison(1.58, 0.9)), "");
  assert.equal(speculativeNote(struggling, specComparison(1.788, 1.9, { within_noise: true })), "");
  assert.equal(speculativeNote(struggling, undefined), "");
});

test("prefix caching that did not lower TTFT: no block reused, or noise larger than the saving", () => {
  assert.match(prefixNote({ withoutS: 0.3, withS: 0.31, hits: 0, blockSize: 32 }), /no block was reused: only whole blocks of 32 tokens/);
  const noisy = prefixNote({ withoutS: 0.3, withS: 0.35, hits: 320, blockSize: 16, firstS: [0.5, 0.9] });
  assert.match(noisy, /skipped the prefill of 320 prompt tokens/);
  assert.match(noisy, /took 500\.0 ms and 900\.0 ms/);
  assert.equal(prefixNote({ withoutS: 1.45, withS: 0.57, hits: 320, blockSize: 16 }), "");
});

test("paged attention wasting more than an exact reservation is explained; the usual case is not", () => {
  const m = { kv_waste_pct: 41.2, contiguous_request_max_waste_pct: 10.5, contiguous_model_max_waste_pct: 99.1 };
  assert.match(pagedNote(m, 16), /41\.2%\) than reserving prompt \+ max new tokens per request would have \(10\.5%\): with blocks of 16/);
  assert.equal(pagedNote({ ...m, kv_waste_pct: 18.6, contiguous_request_max_waste_pct: 33.8 }, 8), "");
});

test("a quantized run slower than fp32, and a prefill no cheaper per token than decode, are explained", () => {
  const s = { format: "w8a8", kernels: ["fbgemm"], fp32_decode_tokens_per_s: 9.1, quant_decode_tokens_per_s: 7.2,
    fp32_matmul_bytes: 537919488, quant_matmul_bytes: 134479872 };
  assert.match(quantNote(s), /w8a8 run decoded slower than fp32 here \(7\.2 against 9\.1 tokens\/s\) although it streams 4\.0×/);
  assert.equal(quantNote({ ...s, quant_decode_tokens_per_s: 16.3 }), "");
  const p = { n_prompt_tokens: 5, ttft_s: 0.6, tpot_s: 0.1 };
  assert.match(prefillNote(p), /Prefill cost as much per token as decode here \(120\.0 ms against 100\.0 ms\): the prompt is only 5 tokens/);
  assert.equal(prefillNote({ n_prompt_tokens: 20, ttft_s: 0.6, tpot_s: 0.1 }), "");
});
