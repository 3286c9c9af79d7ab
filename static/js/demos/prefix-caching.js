// Prefix-caching demo: questions sharing a long system prompt, served without and then with the prefix
// cache. Each prompt is drawn as a strip of KV blocks — reused (shared from the cache) or computed — and
// the time to first token is compared as the timed repeats measured it (medians with their spread, comparison.js),
// never from one streamed run. Numbers come from the trace. A step timeline walks each question's prefill block by
// block in both runs (prefix-steps.js): each prompt block looked up, then reused (lit up in the row of the question
// that computed it) or computed; the caption counts the blocks reused and computed so far, the cells drawn.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, el, fmtMs, numberField, outputs, selectField, fixed } from "../calculators/ui.js";
import { demoShell, intIn, promptField } from "./course-demo-kit.js";
import { prefixNote, showWhy, whyNote } from "./run-notes.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";
import { clearComparison, comparisonBlock, drawComparison } from "./comparison.js";
import { CELL_COLORS, prefixSteps } from "./prefix-steps.js";

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/prefix_caching.py), embedded in the page.
  const sp = specParams(config);
  const maxQuestions = sp.limit("questions", "max_lines");
  const questions = promptField(`Questions, one per line (up to ${maxQuestions})`, sp.value("questions"));
  questions.input.rows = 4;
  const newTok = numberField("New tokens per answer", sp.value("max_new_tokens"), sp.range("max_new_tokens", { step: 1 }));
  const blockSize = selectField("Block size (tokens)", sp.choices("block_size"), String(sp.value("block_size")));

  const out = outputs([["prompt", "Prompt tokens of the question shown"], ["hit", "Prefix-cache hit rate"], ["skipped", "Prefill tokens skipped"],
    ["ttft", "TTFT after the first question: without → with"], ["same", "Answers identical?"]], "Prefix caching results");
  const strips = chartBlock("Block strips: one row per question at this step; each cell is one prompt KV block (its physical id), reused from the cache or computed");
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
      s = { runs: [], cur: null, comparison: null, steps: prefixSteps() };
      clearComparison(Plotly, ttft);
      answers.querySelector("tbody").replaceChildren();
      for (const k of ["prompt", "hit", "skipped", "ttft", "same"]) out.set(k, "–");
      showWhy(why, "");
    },
    onEvent(ev) {
      cmp.onEvent(ev);
      if (ev.type === "batch_run_started") {
        s.cur = { cached: ev.prefix_caching, bs: ev.block_size, order: [], fin: {} };
        s.runs.push(s.cur);
      } else if (ev.type === "request_queued") {
        s.cur.order.push(ev.request_id);
      } else if (ev.type === "request_finished") {
        s.cur.fin[ev.request_id] = ev;
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
    // One step per prompt block of each question's prefill and one per run's end (prefix-steps.js); draw() paints live and replayed runs.
    steps: { fromEvent: (ev) => s.steps.fromEvent(ev), draw, picture: () => strips.figure.parentElement },
  });
  shell.body.append(out.node, why, el("div", { class: "ilab-calc__charts" }, strips.figure, ttft.figure), answers);
  shell.body.append(cmp.node);
  shell.plotly.then((P) => {
    Plotly = P;
    const shown = shell.timeline.log.current; // a step drawn before the charts existed
    if (shown) draw(shown);
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

  const STRIP_SCALE = CELL_COLORS.flatMap((c, i) => [[i / CELL_COLORS.length, c], [(i + 1) / CELL_COLORS.length, c]]);

  /** Paint one step: a row per question, a cell per prompt block (its physical id), coded by prefix-steps.js. */
  function draw(step) {
    // The question this step's block belongs to (at a run's end: every question's, in order).
    const lens = step.promptLen ? [step.promptLen] : Object.values(s.steps.runs[step.run].prompt);
    out.set("prompt", lens.length ? lens.join(", ") : "–");
    if (!Plotly) return;
    const p = step.picture;
    Plotly.react(strips.chart, [{ type: "heatmap", z: p.z, y: p.y, x: [...Array(p.width).keys()], customdata: p.words,
      text: p.text, texttemplate: "%{text}", textfont: { size: 9 }, zmin: -0.5, zmax: CELL_COLORS.length - 0.5, xgap: 2, ygap: 4,
      colorscale: STRIP_SCALE, showscale: false,
      hovertemplate: "%{y}, logical block %{x} (physical %{text}): %{customdata}<extra></extra>" }],
    { ...BASE_LAYOUT, title: { text: `Prompt blocks ${p.cached ? "with" : "without"} the prefix cache` },
      xaxis: { title: { text: `logical block (${p.bs} tokens each)` } },
      yaxis: { autorange: "reversed", type: "category", categoryarray: p.y, categoryorder: "array" },
      height: 140 + 45 * p.y.length }, PLOT_CONFIG);
    strips.summary.textContent = `Pale: earlier steps; full colour: this step's block (green reused, orange computed); blank: blocks not reached yet; ` +
      `gold: the earlier question's block this step reuses.`;
  }
  return shell;
}
