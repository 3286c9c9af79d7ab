// A prefix-caching demo run (two scheduler runs: without, then with the prefix cache; docs/trace-schema/paged.md)
// as timeline steps, without the page (tested under node): one step per question's prefill and one at the end
// of each run. A step holds the picture precomputed: one row per question, one cell per prompt block, each
// coded (CELL) computed or reused, the question admitted at this step in full colour and the earlier blocks it
// reuses lit up, and a caption saying how many prompt tokens were reused and how many computed.
//
//   const steps = prefixSteps();  for (const ev of events) { const step = steps.fromEvent(ev); … }

/** Cell codes (the heatmap's z) and what each means (its customdata). */
export const CELL = { computed: 0, reused: 1, computedNow: 2, reusedNow: 3, source: 4 };
export const CELL_WORDS = ["computed", "reused", "computed now", "reused now", "reused from here now"];
export const CELL_COLORS = ["#fde2b3", "#bbf7d0", "#f59e0b", "#16a34a", "#facc15"];

const plural = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;

/** A fresh converter for one demo run: `fromEvent(ev)` → a step (at a question's prefill, at a run's end) or null. */
export function prefixSteps() {
  let run = null;
  const runs = [];

  function newRun(ev) {
    run = { cached: ev.prefix_caching, bs: ev.block_size, order: [], prompt: {}, blocks: {}, rows: {}, width: 1,
      reused: 0, computed: 0 };
    runs.push(run);
  }

  const label = () => (run.cached ? "With the prefix cache" : "Without the cache");

  /** Rows × blocks of codes (and their words) as of now; `now` holds the ids admitted at this step. */
  function picture(now) {
    const sources = new Set();
    for (const id of now) for (const c of run.rows[id]) if (c.kind === "reused") sources.add(c.block);
    const z = [], words = [], text = [];
    for (const id of run.order) {
      const row = run.rows[id] || [];
      const zs = [], ws = [], ts = [];
      for (let i = 0; i < run.width; i += 1) {
        const c = row[i];
        let code = null;
        if (c && now.includes(id)) code = c.kind === "reused" ? CELL.reusedNow : CELL.computedNow;
        else if (c) code = sources.has(c.block) ? CELL.source : CELL[c.kind];
        zs.push(code);
        ws.push(code === null ? "" : CELL_WORDS[code]);
        ts.push(c ? String(c.block) : "");
      }
      z.push(zs); words.push(ws); text.push(ts);
    }
    return { z, words, text, y: [...run.order], width: run.width, cached: run.cached, bs: run.bs };
  }

  /** A question's prefill: its prompt blocks become a row; say what it reused and what it computed. */
  function admitted(entries) {
    const parts = [];
    for (const e of entries) {
      const id = e.request_id;
      const reused = e.n_cached;
      const computed = run.prompt[id] - reused;
      run.reused += reused;
      run.computed += computed;
      const nReused = run.rows[id].filter((c) => c.kind === "reused").length;
      if (reused) {
        const from = [...new Set(run.rows[id].filter((c) => c.kind === "reused").map((c) => c.from))].join(", ");
        parts.push(`${id} reuses ${plural(nReused, "block")} from the cache (${reused} prompt tokens${from ? ` that ${from} computed` : ""}) and ` +
          `computes ${plural(computed, "token")}`);
      } else {
        parts.push(`${id} computes all ${computed} prompt tokens (${plural(run.rows[id].length, "block")}), nothing reused` +
          (run.cached ? " (no cached block holds its prefix yet)" : ""));
      }
    }
    const total = run.reused + run.computed;
    return `${label()}: ${parts.join("; ")}. So far ${run.reused} of ${total} prompt tokens reused, ${run.computed} computed.`;
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
        // A request's first prefill (a recompute after a preemption has a row already).
        const first = ev.entries.filter((e) => e.phase === "prefill" && !run.rows[e.request_id]);
        if (!first.length) return null;
        const owner = new Map(); // physical block → the question whose row has it first
        for (const id of run.order) for (const c of run.rows[id] || []) if (!owner.has(c.block)) owner.set(c.block, id);
        for (const e of first) {
          const n = Math.ceil(run.prompt[e.request_id] / run.bs);
          run.rows[e.request_id] = run.blocks[e.request_id].slice(0, n).map((c) => ({ ...c, from: owner.get(c.block) || "" }));
        }
        const now = first.map((e) => e.request_id);
        return { caption: `Step ${ev.step}. ${admitted(first)}`, picture: picture(now), run: runs.length - 1, now };
      }
      case "batch_run_finished": {
        const m = ev.metrics || {};
        const total = run.reused + run.computed;
        const hit = run.cached && m.prefix_cache_queries ? ` (hit rate ${Math.round(100 * m.prefix_cache_hit_rate)}%)` : "";
        return { caption: `${label()}, the run is over: ${run.reused} of ${total} prompt tokens reused${hit}, ` +
          `${run.computed} computed.`, picture: picture([]), run: runs.length - 1, now: [] };
      }
      default:
        return null;
    }
  }

  return { fromEvent, runs };
}
