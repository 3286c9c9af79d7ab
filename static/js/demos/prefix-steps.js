// A prefix-caching demo run (two scheduler runs: without, then with the prefix cache; docs/trace-schema/paged.md)
// as timeline steps, without the page (tested under node): one step per prompt KV block of each question's first
// prefill, in order (without the cache: computed; with it: looked up by its prefix, then a hit reused or a miss
// computed), and one at the end of each run. A step holds the picture precomputed: one row per question, one cell
// per prompt block, each coded (CELL) computed or reused; the block of this step in full colour, the blocks after
// it in its row still blank, and the earlier question's block it reuses lit up. Its caption counts the prompt
// blocks reused and computed so far, the cells the picture shows.
//
//   const steps = prefixSteps();  for (const ev of events) { const out = steps.fromEvent(ev); … } // out: step(s) or null

/** Cell codes (the heatmap's z) and what each means (its customdata). */
export const CELL = { computed: 0, reused: 1, computedNow: 2, reusedNow: 3, source: 4 };
export const CELL_WORDS = ["computed", "reused", "computed now", "reused now", "reused from here now"];
export const CELL_COLORS = ["#fde2b3", "#bbf7d0", "#f59e0b", "#16a34a", "#facc15"];

const plural = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;

/** A fresh converter for one demo run: `fromEvent(ev)` → the steps of a question's prefill (an array), the step at a
 * run's end, or null. */
export function prefixSteps() {
  let run = null;
  const runs = [];

  function newRun(ev) {
    run = { cached: ev.prefix_caching, bs: ev.block_size, order: [], prompt: {}, blocks: {}, rows: {}, width: 1,
      reused: 0, computed: 0, reusedTokens: 0, computedTokens: 0 };
    runs.push(run);
  }

  const label = () => (run.cached ? "With the prefix cache" : "Without the cache");

  /** Rows × blocks of codes (and their words) as of now: question `id`'s row up to block `upto` (the one of this
   * step, in full colour; later ones blank), every earlier row whole. */
  function picture(id = null, upto = -1) {
    const current = id === null ? null : run.rows[id][upto];
    const source = current && current.kind === "reused" ? current.block : null;
    const z = [], words = [], text = [];
    for (const q of run.order) {
      const row = run.rows[q] || [];
      const zs = [], ws = [], ts = [];
      for (let i = 0; i < run.width; i += 1) {
        const c = q === id && i > upto ? null : row[i];
        let code = null;
        if (c && q === id && i === upto) code = c.kind === "reused" ? CELL.reusedNow : CELL.computedNow;
        else if (c) code = c.block === source && q !== id ? CELL.source : CELL[c.kind];
        zs.push(code);
        ws.push(code === null ? "" : CELL_WORDS[code]);
        ts.push(c ? String(c.block) : "");
      }
      z.push(zs); words.push(ws); text.push(ts);
    }
    return { z, words, text, y: [...run.order], width: run.width, cached: run.cached, bs: run.bs };
  }

  const soFar = () => `So far ${run.reused} of ${run.reused + run.computed} prompt blocks reused, ${run.computed} computed.`;

  /** The step of question `id`'s block `i`: what happened to it, and the tally. */
  function blockStep(ev, id, i) {
    const c = run.rows[id][i];
    const first = i * run.bs;
    const n = Math.min(run.bs, run.prompt[id] - first);
    const where = `${id}'s block ${i} (prompt tokens ${first}–${first + n - 1})`;
    let what;
    if (c.kind === "reused") {
      run.reused += 1;
      run.reusedTokens += n;
      what = `is looked up by the hash of its tokens and all before them: a hit, so physical block ${c.block}, which ` +
        `${c.from || "an earlier question"} computed, is reused and nothing is computed`;
    } else {
      run.computed += 1;
      run.computedTokens += n;
      const into = `computed now into physical block ${c.block} (${plural(n, "token")})`;
      if (!run.cached) what = `is ${into}; nothing is looked up`;
      else if (n < run.bs) what = `holds ${n} of ${run.bs} tokens: only full blocks are cached, so it is ${into}`;
      else what = `is looked up by the hash of its tokens and all before them: a miss (no cached block holds this prefix), so it is ${into}`;
    }
    return { caption: `${label()}, step ${ev.step}: ${where} ${what}. ${soFar()}`, picture: picture(id, i),
      run: runs.length - 1, question: id, block: i, promptLen: run.prompt[id] };
  }

  function fromEvent(ev) {
    switch (ev.type) {
      case "batch_run_started":
        newRun(ev);
        return null;
      case "request_queued":
        run.order.push(ev.request_id);
        run.prompt[ev.request_id] = ev.prompt_len;
        run.blocks[ev.request_id] = [];
        run.width = Math.max(run.width, Math.ceil(ev.prompt_len / run.bs));
        return null;
      case "kv_block":
        if (ev.request_id && run.blocks[ev.request_id] && (ev.op === "allocated" || ev.op === "shared")) {
          run.blocks[ev.request_id][ev.logical_index] = { block: ev.block, kind: ev.op === "shared" ? "reused" : "computed" };
        }
        return null;
      case "batch_step": {
        // A request's first prefill (a recompute after a preemption has a row already): a step per prompt block.
        const first = ev.entries.filter((e) => e.phase === "prefill" && !run.rows[e.request_id]);
        if (!first.length) return null;
        const owner = new Map(); // physical block → the question whose row has it first
        for (const id of run.order) for (const c of run.rows[id] || []) if (!owner.has(c.block)) owner.set(c.block, id);
        const steps = [];
        for (const e of first) {
          const id = e.request_id;
          const n = Math.ceil(run.prompt[id] / run.bs);
          run.rows[id] = run.blocks[id].slice(0, n).map((c) => ({ ...c, from: owner.get(c.block) || "" }));
          for (let i = 0; i < run.rows[id].length; i += 1) steps.push(blockStep(ev, id, i));
        }
        return steps;
      }
      case "batch_run_finished": {
        const m = ev.metrics || {};
        const hit = run.cached && m.prefix_cache_queries ? `, hit rate ${Math.round(100 * m.prefix_cache_hit_rate)}%` : "";
        const tokens = run.reusedTokens + run.computedTokens;
        return { caption: `${label()}, the run is over: ${run.reused} of ${run.reused + run.computed} prompt blocks reused ` +
          `(${run.reusedTokens} of ${tokens} prompt tokens${hit}), ${run.computed} computed.`, picture: picture(),
          run: runs.length - 1, question: null, block: null, promptLen: null };
      }
      default:
        return null;
    }
  }

  return { fromEvent, runs };
}
