// The demos' "why" notes: a result that goes against its lesson is explained from the run's own numbers,
// and a result that agrees gets no note. Run: node --test tests/js/
import assert from "node:assert/strict";
import { test } from "node:test";

import { batchingNote, flashNote, pagedNote, prefillNote, prefixNote, quantNote, speculativeNote } from "../../static/js/demos/run-notes.js";

// The numbers of a real run on the course CPU (default workload, batch 3) in which continuous batching came out
// slower in wall-clock time: fuller steps, each more expensive, plus one slow first step.
const continuous = { mode: "continuous", slots: 3, nSteps: 13, durationS: 1.366, meanE2eMs: 766.7, meanTtftMs: 430.2,
  throughput: 26.4, busy: 2.77, meanE2eSteps: 6.5, stepMs: [518, 48, 84, 215, 92, 47, 45, 106, 48, 46, 43, 39, 36] };
const staticRun = { mode: "static", slots: 3, nSteps: 20, durationS: 1.046, meanE2eMs: 560.8, meanTtftMs: 350.2,
  throughput: 34.4, busy: 1.8, meanE2eSteps: 9.2, stepMs: Array(20).fill(52) };

test("continuous batching slower than static in wall time: explained by steps, per-step cost and occupancy", () => {
  const note = batchingNote([continuous, staticRun]);
  assert.match(note, /mean end-to-end latency \(766\.7 ms\) came out above static's \(560\.8 ms\)/);
  assert.match(note, /13 steps against static's 20/);
  assert.match(note, /6\.5 steps from arrival to its last token on average against 9\.2/);
  assert.match(note, /Each continuous step took 105 ms on average against 52 ms/);
  assert.match(note, /2\.8 sequences on average against 1\.8 \(of 3 slots\)/);
  assert.match(note, /One continuous step took 518 ms, 11× its median of 48 ms/);
});

test("continuous batching faster in wall time too: no note", () => {
  assert.equal(batchingNote([{ ...continuous, meanE2eMs: 400, throughput: 40 }, staticRun]), "");
  assert.equal(batchingNote([continuous]), ""); // one mode only: nothing to compare
});

test("continuous slower with the same per-step cost and no outlier: called noise, with both step costs", () => {
  const even = { ...continuous, durationS: 13 * 0.052, stepMs: Array(13).fill(52) };
  const note = batchingNote([even, { ...staticRun, meanE2eMs: 500 }]);
  assert.match(note, /Per step the two modes cost about the same \(52 ms against 52 ms\)/);
  assert.doesNotMatch(note, /Each continuous step took/);
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

test("speculative decoding slower than plain: acceptance rate and the verify/step cost ratio, from the run", () => {
  const note = speculativeNote(struggling, 0.05587);
  assert.match(note, /slower than plain decoding here \(0\.38×\)/);
  assert.match(note, /only 4 of 103 guesses were accepted \(4%\)/);
  assert.match(note, /1\.14 tokens/);
  assert.match(note, /A verify pass took 61\.9 ms, 1\.11× what plain decoding took per token \(55\.9 ms\)/);
  assert.match(note, /the draft added 27\.1 ms per guess \(103 draft passes\)/);
  assert.match(note, /one round cost as much as 2\.89 plain tokens and produced 1\.14/);
});

test("speculative decoding faster than plain, or no plain timing: no note", () => {
  const copying = { ...struggling, n_generated: 11, rounds: 4, drafted: 12, accepted: 8, acceptance_rate: 0.667,
    mean_accept_length: 3, draft_forwards: 0, draft_ms_per_forward: 0, draft_time_s: 0, verify_time_s: 0.545,
    total_time_s: 0.9 };
  assert.equal(speculativeNote(copying, 0.1438), "");
  assert.equal(speculativeNote(struggling, null), "");
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
