// Prefix-caching demo: questions sharing a long system prompt, served without and then with the prefix
// cache. Each prompt is drawn as a strip of KV blocks — reused (shared from the cache) or computed — and
// the time to first token is compared as the timed repeats measured it (medians with their spread, comparison.js),
// never from one streamed run. Numbers come from the trace.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, el, fmtMs, numberField, outputs, selectField, fixed } from "../calculators/ui.js";
import { demoShell, intIn, promptField } from "./course-demo-kit.js";
import { prefixNote, showWhy, whyNote } from "./run-notes.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";
import { clearComparison, comparisonBlock, drawComparison } from "./comparison.js";

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/prefix_caching.py), embedded in the page.
  const sp = specParams(config);
  const maxQuestions = sp.limit("questions", "max_lines");
  const questions = promptField(`Questions, one per line (up to ${maxQuestions})`, sp.value("questions"));
  questions.input.rows = 4;
  const newTok = numberField("New tokens per answer", sp.value("max_new_tokens"), sp.range("max_new_tokens", { step: 1 }));
  const blockSize = selectField("Block size (tokens)", sp.choices("block_size"), String(sp.value("block_size")));

  const out = outputs([["prompt", "Prompt tokens per question"], ["hit", "Prefix-cache hit rate"], ["skipped", "Prefill tokens skipped"],
    ["ttft", "TTFT after the first question: without → with"], ["same", "Answers identical?"]], "Prefix caching results");
  const strips = chartBlock("Block strips: one row per question in the cached run; each cell is one KV block, reused from the cache or computed");
  const ttft = chartBlock("Bar chart: time to first token without and with the prefix cache, median of the alternating repeats with their spread");
  const answers = el("table", {}, el("caption", { text: "Answers (greedy; the cache must not change them)" }),
    el("thead", {}, el("tr", {}, ...["Question", "Without cache", "With cache", "Cached tokens"].map((t) => el("th", { scope: "col", text: t })))),
    el("tbody"));
  const why = whyNote();

  let Plotly = null;
  let s = null;

  const cmp = comparisonBlock(); // the two settings timed in alternating repeats, counters beside
  const shell = demoShell(root, config, {
    title: "Prefix caching",
    fields: [questions.label, newTok.label, blockSize.label],
    getParams() {
      const lines = questions.input.value.split("\n").filter((l) => l.trim());
      if (!lines.length || lines.length > maxQuestions) throw new Error(`Give 1 to ${maxQuestions} questions, one per line.`);
      return { questions: questions.input.value,
        max_new_tokens: intIn(newTok.input, "New tokens", sp.min("max_new_tokens"), sp.max("max_new_tokens")),
        block_size: Number(blockSize.input.value) };
    },
    onStart(params) {
      cmp.reset();
      fillForm({ questions: questions.input, max_new_tokens: newTok.input, block_size: blockSize.input }, params);
      s = { runs: [], cur: null, comparison: null };
      clearComparison(Plotly, ttft);
      answers.querySelector("tbody").replaceChildren();
      for (const k of ["prompt", "hit", "skipped", "ttft", "same"]) out.set(k, "–");
      showWhy(why, "");
      draw();
    },
    onEvent(ev) {
      cmp.onEvent(ev);
      if (ev.type === "batch_run_started") {
        s.cur = { cached: ev.prefix_caching, bs: ev.block_size, order: [], prompt: {}, blocks: {}, fin: {} };
        s.runs.push(s.cur);
      } else if (ev.type === "request_queued") {
        s.cur.order.push(ev.request_id);
        s.cur.prompt[ev.request_id] = ev.prompt_len;
        s.cur.blocks[ev.request_id] = [];
        out.set("prompt", String(ev.prompt_len));
      } else if (ev.type === "kv_block" && ev.request_id && (ev.op === "allocated" || ev.op === "shared")) {
        const b = s.cur.blocks[ev.request_id];
        if (b && b[ev.logical_index] === undefined) b[ev.logical_index] = ev.op === "shared" ? 1 : 0;
      } else if (ev.type === "request_finished") {
        s.cur.fin[ev.request_id] = ev;
        draw();
      } else if (ev.type === "batch_run_finished") {
        if (s.cur.cached) {
          const m = ev.metrics || {};
          out.set("hit", `${fixed(100 * m.prefix_cache_hit_rate, 0)}% (${m.prefix_cache_hits} of ${m.prefix_cache_queries} prompt tokens)`);
          out.set("skipped", String(m.prefix_cache_hits));
          s.cur.hits = m.prefix_cache_hits;
        }
        summarize();
      } else if (ev.type === "comparison") {
        s.comparison = ev;
        showTiming(ev);
        drawComparison(Plotly, ttft, ev);
      }
    },
  });
  shell.body.append(out.node, why, el("div", { class: "ilab-calc__charts" }, strips.figure, ttft.figure), answers);
  shell.body.append(cmp.node);
  shell.plotly.then((P) => {
    Plotly = P;
    draw();
    if (s && s.comparison) drawComparison(Plotly, ttft, s.comparison);
  });

  function summarize() {
    const [a, b] = s.runs;
    const body = answers.querySelector("tbody");
    body.replaceChildren(...a.order.map((id) => {
      const x = a.fin[id], y = b && b.fin[id];
      return el("tr", {}, el("th", { scope: "row", text: id }), el("td", { style: "text-align:left", text: x ? x.text : "" }),
        el("td", { style: "text-align:left", text: y ? y.text : "…" }), el("td", { text: y ? String(y.n_cached_tokens) : "…" }));
    }));
    const complete = (run) => run.order.every((id) => run.fin[id] && run.fin[id].finish_reason !== "aborted");
    if (b && complete(a) && complete(b)) { // both runs whole (not cut short by Stop)
      const same = a.order.every((id) => JSON.stringify(a.fin[id].token_ids) === JSON.stringify(b.fin[id].token_ids));
      out.set("same", same ? "yes, token for token" : "no (see the table)");
    }
  }

  // The streamed runs' times span the worker's other runs: the TTFT figures come from the alternating repeats.
  function showTiming(ev) {
    const [without, withCache] = ev.sides;
    const ratio = without.median_s / withCache.median_s;
    out.set("ttft", `${fmtMs(without.median_s)} → ${fmtMs(withCache.median_s)} (medians of ${ev.repeats}; ` +
      (ev.within_noise ? "within noise)" : withCache.median_s < without.median_s ? `${ratio.toFixed(1)}× lower)` : "not lower: see the note)"));
    const cached = s.runs.find((r) => r.cached);
    showWhy(why, prefixNote({ withoutS: without.median_s, withS: withCache.median_s, hits: cached && cached.hits,
      blockSize: cached ? cached.bs : 0 }));
  }

  function draw() {
    if (!Plotly || !s) return;
    const run = s.runs.find((r) => r.cached) || s.runs[0];
    if (run) {
      const width = Math.max(1, ...run.order.map((id) => run.blocks[id].length));
      const z = run.order.map((id) => Array.from({ length: width }, (_, i) => (run.blocks[id][i] === undefined ? null : run.blocks[id][i])));
      Plotly.react(strips.chart, [{ type: "heatmap", z, y: run.order, x: [...Array(width).keys()], zmin: 0, zmax: 1, xgap: 2, ygap: 4,
        colorscale: [[0, "#f59e0b"], [0.5, "#f59e0b"], [0.5, "#16a34a"], [1, "#16a34a"]], showscale: false,
        text: z.map((r) => r.map((v) => (v === 1 ? "reused from the cache" : v === 0 ? "computed" : ""))),
        hovertemplate: "%{y}, block %{x}: %{text}<extra></extra>" }],
      { ...BASE_LAYOUT, title: { text: `Prompt blocks ${run.cached ? "with" : "without"} cache` },
        xaxis: { title: { text: `logical block (${run.bs} tokens each)` } }, yaxis: { autorange: "reversed" }, height: 140 + 45 * run.order.length },
      PLOT_CONFIG);
      strips.summary.textContent = "Green: reused from the cache; orange: computed. " + run.order.map((id) => {
        const b = run.blocks[id];
        return `${id}: ${b.filter((v) => v === 1).length} of ${b.length} blocks reused`;
      }).join("; ");
    }
  }
  return shell;
}
