// What a finished run means, in its own numbers, and what to try next.
//
// - "Why": when a run's result goes against its lesson (continuous batching slower than static in wall time,
//   tiled attention slower than naive, speculative decoding slower than plain…), the demo says why, from the
//   run's own numbers. The note functions below are pure (tests/js/run-notes.test.mjs): each takes numbers
//   from the trace and returns a sentence or two, or "" when there is nothing to explain.
// - "What to try next": one or two concrete changes from the demo's spec (`try_next` in demos/registry.py),
//   shown under any demo once a run is done (attachTryNext, called for every demo by demo-embed.js).
import { fixed, fmtMs } from "../calculators/ui.js";

const pct = (x, digits = 0) => `${fixed(100 * x, digits)}%`;
const ratio = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? a / b : NaN);

/**
 * Continuous vs static batching. `runs`: one object per mode, counted by the page from the streamed trace:
 * {mode, slots, nSteps, busy (mean sequences per step), meanE2eSteps (arrival to last token, in steps)}; `ev`: the
 * run's `comparison` (both modes timed in alternating repeats). When the repeats put continuous batching's time
 * to first token above static's beyond noise, against the lesson, explains it from the steps and the occupancy;
 * otherwise "" (a streamed run's own wall-clock times are one sample on a shared worker: never the measure).
 */
export function batchingNote(runs, ev) {
  const c = runs.find((r) => r.mode === "continuous");
  const s = runs.find((r) => r.mode === "static");
  if (!c || !s || !ev || !ev.claim || ev.within_noise || ev.faster === ev.claim) return "";
  const side = (label) => ev.sides.find((x) => x.label === label) || {};
  const [ct, st] = [side("continuous"), side("static")];
  const waited = (x) => (x.counters || {})["steps requests waited before their first pass"];
  const parts = [`Timed in ${ev.repeats} alternating repeats, this run went against the lesson: continuous batching's ` +
    `mean time to first token (median ${fmtMs(ct.median_s)}) came out above static's (${fmtMs(st.median_s)}), and the ` +
    `${ev.spread} ranges do not overlap. In steps it did not: continuous finished the same requests in ${c.nSteps} steps ` +
    `against static's ${s.nSteps}, its requests waited ${waited(ct)} steps in all before their first pass against ` +
    `${waited(st)}, and a request took ${fixed(c.meanE2eSteps, 1)} steps from arrival to its last token on average against ` +
    `${fixed(s.meanE2eSteps, 1)}.`];
  parts.push(`Continuous batching's steps carried ${fixed(c.busy, 1)} sequences on average against ${fixed(s.busy, 1)} ` +
    `(of ${c.slots} slots) and folded newly arrived prompts' prefill into decode steps. On this CPU a forward pass costs ` +
    "more the more tokens it carries, so fewer steps did not mean less time. On a GPU, where a decode step for a few " +
    "sequences costs about the same as for one, the step counts decide.");
  return parts.join(" ");
}

/** FlashAttention: `ev` is the run's attention_compare event. Explains a single tile and a slower tiled pass. */
export function flashNote(ev) {
  if (!ev || !Number.isFinite(ev.n_tokens)) return "";
  const parts = [];
  const nb = Math.ceil(ev.n_tokens / ev.block_q);
  const kb = Math.ceil(ev.n_tokens / ev.block_k);
  if (nb * kb <= 1) {
    parts.push(`Your prompt is ${ev.n_tokens} tokens and a tile is ${ev.block_q}: the whole score matrix fits in one ` +
      "tile, so tiling saves nothing here (ratio 1.0×, no tile skipped). Use a longer prompt or a smaller tile to see " +
      "the effect.");
    if (ev.tiled_time_s > ev.naive_time_s) {
      parts.push(`With one tile the tiled pass does the naive pass's work plus its online-softmax bookkeeping, so it ` +
        `took longer (${fmtMs(ev.tiled_time_s)} against ${fmtMs(ev.naive_time_s)}).`);
    }
  } else if (ev.tiled_time_s > ev.naive_time_s) {
    parts.push(`Tiled took ${fixed(ev.tiled_time_s / ev.naive_time_s, 1)}× as long as naive here ` +
      `(${fmtMs(ev.tiled_time_s)} against ${fmtMs(ev.naive_time_s)}). That is expected from this demo: its tiled ` +
      `pass runs ${ev.tiles_computed} small matrix products one after another from Python, while naive runs a few ` +
      `large ones, and at ${ev.n_tokens} tokens the whole score matrix fits in the CPU's cache anyway. What tiling ` +
      `saves is memory: ${fixed(ratio(ev.naive_score_bytes, ev.tile_bytes), 1)}× less score memory held here` +
      (ev.tiles_skipped ? `, and ${ev.tiles_skipped} of ${nb * kb} tiles never computed` : "") +
      ". FlashAttention's speed comes from one GPU kernel that keeps every tile in on-chip memory.");
  }
  return parts.join(" ");
}

/**
 * Speculative decoding: `m` is spec_finished's metrics, `ev` the run's `comparison` (plain and speculative timed in
 * alternating repeats; none when plain decoding was not timed). Explains speculation slower than plain beyond
 * noise, from the medians and the run's acceptance.
 */
export function speculativeNote(m, ev) {
  if (!m || !ev || ev.within_noise) return "";
  const plain = ev.sides.find((x) => x.label === "plain decoding");
  const spec = ev.sides.find((x) => x.label === "speculative");
  const tokens = plain && (plain.counters || {}).tokens;
  if (!spec || !(tokens > 0) || !(plain.median_s > 0) || !(spec.median_s > 0)) return "";
  const plainPerTokenS = plain.median_s / tokens;
  const speedup = plain.median_s / spec.median_s;
  const plainMs = plainPerTokenS * 1000;
  const verifyRatio = m.verify_ms_per_forward / plainMs;
  const rounds = Math.max(m.rounds, 1);
  const roundMs = ((m.draft_time_s || 0) + (m.verify_time_s || 0)) * 1000 / rounds;
  const acceptance = `${m.accepted} of ${m.drafted} guesses were accepted (${pct(m.acceptance_rate)})`;
  const draftCost = m.draft_forwards
    ? `, and the draft added ${fixed(m.draft_ms_per_forward, 1)} ms per guess (${m.draft_forwards} draft passes)`
    : " (the n-gram draft costs next to nothing)";
  const cost = `A verify pass took ${fixed(m.verify_ms_per_forward, 1)} ms, ${fixed(verifyRatio, 2)}× what plain ` +
    `decoding took per token (${fixed(plainMs, 1)} ms)${draftCost}: one round cost as much as ` +
    `${fixed(roundMs / plainMs, 2)} plain tokens and produced ${fixed(m.mean_accept_length, 2)}.`;
  if (speedup >= 1) return "";
  return `Speculative decoding was slower than plain decoding here (${fixed(speedup, 2)}×, medians of ${ev.repeats} ` +
    `alternating repeats): only ${acceptance}, so ` +
    `each target pass produced ${fixed(m.mean_accept_length, 2)} tokens. ${cost} Speculation pays only when a round ` +
    "yields more tokens than it costs in plain tokens; with this draft on this text the guesses were too often wrong.";
}

/**
 * Prefix caching: mean TTFT of the later questions (the first has nothing to reuse) without and with the
 * cache, in seconds; `hits` prompt tokens served from the cache; `firstS` the first question's TTFT in each
 * run [without, with] (the same work in both runs: a measure of noise); `blockSize`.
 */
export function prefixNote({ withoutS, withS, hits, firstS = [], blockSize }) {
  if (!Number.isFinite(withoutS) || !Number.isFinite(withS) || withS < withoutS) return "";
  if (!hits) {
    return `The cache did not lower the time to first token (${fmtMs(withoutS)} without, ${fmtMs(withS)} with) because ` +
      `no block was reused: only whole blocks of ${blockSize} tokens are cached, and the questions share less than one ` +
      "block. Use a smaller block size or a longer shared prompt.";
  }
  const [a, b] = firstS;
  const noise = Number.isFinite(a) && Number.isFinite(b)
    ? ` The first question, the same work in both runs, took ${fmtMs(a)} and ${fmtMs(b)}: that spread is this shared CPU's noise.`
    : "";
  return `The cache skipped the prefill of ${hits} prompt tokens, yet the later questions' first token came no sooner ` +
    `(${fmtMs(withoutS)} without, ${fmtMs(withS)} with): the time saved was smaller than the run-to-run noise.${noise} ` +
    "Run again: the tokens skipped are the same every time, the times are not.";
}

/** Paged attention: `m` is batch_run_finished's metrics, `blockSize` the run's block size. */
export function pagedNote(m, blockSize) {
  if (!m || !Number.isFinite(m.kv_waste_pct) || !Number.isFinite(m.contiguous_request_max_waste_pct)) return "";
  if (m.kv_waste_pct <= m.contiguous_request_max_waste_pct) return "";
  return `Here the paged cache left more of its slots unused (${fixed(m.kv_waste_pct, 1)}%) than reserving prompt + max ` +
    `new tokens per request would have (${fixed(m.contiguous_request_max_waste_pct, 1)}%): with blocks of ${blockSize} ` +
    "tokens each request's last block is partly empty, and these requests were short and ran to their maximum length, " +
    "so an exact reservation was never too big. Paging wins when requests stop well before the maximum they reserve, " +
    `and against reserving the model's full context (${fixed(m.contiguous_model_max_waste_pct, 1)}% unused).`;
}

/** Quantization: `s` is quant_summary. Explains a quantized run that decoded slower than fp32. */
export function quantNote(s) {
  if (!s || !(s.quant_decode_tokens_per_s < s.fp32_decode_tokens_per_s)) return "";
  return `The ${s.format} run decoded slower than fp32 here (${fixed(s.quant_decode_tokens_per_s, 1)} against ` +
    `${fixed(s.fp32_decode_tokens_per_s, 1)} tokens/s) although it streams ${fixed(ratio(s.fp32_matmul_bytes, s.quant_matmul_bytes), 1)}× ` +
    `fewer weight bytes per token. Fewer bytes turn into less time only when reading memory is the bottleneck: its ` +
    `kernel (${(s.kernels || []).join(", ")}) unpacks and rescales every weight it reads, and on this shared CPU that ` +
    "work, and the run-to-run noise of a single timing, outweighed the bytes saved.";
}

/** Prefill vs decode: `s` is prefill_decode_summary. Explains a prefill no cheaper per token than decode. */
export function prefillNote(s) {
  if (!s || !(s.n_prompt_tokens > 0) || !(s.tpot_s > 0)) return "";
  const prefillPer = s.ttft_s / s.n_prompt_tokens;
  if (prefillPer < s.tpot_s) return "";
  return `Prefill cost as much per token as decode here (${fmtMs(prefillPer)} against ${fmtMs(s.tpot_s)}): the prompt is ` +
    `only ${s.n_prompt_tokens} tokens, so one pass shares each weight read among few tokens, and the pass's fixed costs ` +
    "dominate. Repeat the prompt to make it longer.";
}

// --- DOM: the "why" paragraph and the "What to try next" box --------------------------------------------

const STYLE_ID = "ilab-run-notes-style";
const CSS = `
.ilab-why { border-left: 4px solid #f59e0b; background: #fffbeb; padding: .5rem .75rem; margin: .75rem 0; font-size: .92rem; }
.ilab-try-next { border: 1px solid #d0d7de; border-radius: 8px; padding: .6rem 1rem; margin: .75rem 0; background: #f6f8fa; }
.ilab-try-next h4 { margin: 0 0 .3rem; font-size: .95rem; }
.ilab-try-next ul { margin: 0; padding-left: 1.2rem; }
.ilab-try-next li { margin: .25rem 0; }
`;

function injectNotesStyle() {
  if (document.getElementById(STYLE_ID)) return;
  const style = document.createElement("style");
  style.id = STYLE_ID;
  style.textContent = CSS;
  document.head.appendChild(style);
}

/** A paragraph for a run's "why" note: hidden until showWhy() gives it text. */
export function whyNote() {
  injectNotesStyle();
  const p = document.createElement("p");
  p.className = "ilab-why";
  p.dataset.why = "";
  p.setAttribute("aria-live", "polite");
  p.hidden = true;
  return p;
}

export function showWhy(node, text) {
  node.textContent = text || "";
  node.hidden = !text;
}

/** "What to try next" under `root` from config.spec.try_next, shown while the demo's last run is done. */
export function attachTryNext(root, config) {
  const tips = ((config && config.spec && config.spec.try_next) || []).filter((t) => typeof t === "string" && t);
  if (!tips.length || root.querySelector(":scope > .ilab-try-next")) return null;
  injectNotesStyle();
  const box = document.createElement("aside");
  box.className = "ilab-try-next";
  box.setAttribute("aria-label", "What to try next");
  const heading = document.createElement("h4");
  heading.textContent = "What to try next";
  const list = document.createElement("ul");
  for (const tip of tips.slice(0, 2)) {
    const li = document.createElement("li");
    li.textContent = tip;
    list.append(li);
  }
  box.append(heading, list);
  box.hidden = true;
  root.append(box);
  const sync = () => { box.hidden = !["done", "shared"].includes(root.dataset.state); };
  new MutationObserver(sync).observe(root, { attributes: true, attributeFilter: ["data-state"] });
  sync();
  return box;
}
