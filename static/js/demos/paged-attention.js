// Paged-attention demo: the physical KV block pool filling as requests decode together, each request's
// block table, and — from the same run's numbers — what contiguous per-request reservations would hold.
// Everything drawn comes from the trace: kv_block events (allocated/shared/freed/cached/evicted) rebuild
// the tables; batch_step events give fill levels and the slot counts.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, el, numberField, outputs, selectField, fixed } from "../calculators/ui.js";
import { demoShell, intIn, promptField } from "./course-demo-kit.js";
import { pagedNote, showWhy, whyNote } from "./run-notes.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";

const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"];

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/paged_attention.py), embedded in the page.
  const sp = specParams(config);
  const maxPrompts = sp.limit("prompts", "max_lines");
  const prompts = promptField(`Prompts, one per line (up to ${maxPrompts})`, sp.value("prompts"));
  prompts.input.rows = 4;
  const newTok = numberField("New tokens per request", sp.value("max_new_tokens"), sp.range("max_new_tokens", { step: 1 }));
  const blockSize = selectField("Block size (tokens)", sp.choices("block_size"), String(sp.value("block_size")));
  const numBlocks = numberField("Physical blocks in the pool", sp.value("num_blocks"), sp.range("num_blocks", { step: 1,
    help: "Fewer blocks than the requests need forces a preemption." }));
  const every = numberField("A new request every … steps", sp.value("arrival_every"), sp.range("arrival_every", { step: 1 }));

  const out = outputs([["step", "Step"], ["blocks", "Blocks used / free"], ["paged", "Paged: slots allocated, unused"],
    ["contig", "Contiguous reservation: slots, unused"], ["preempt", "Preemptions"], ["per", "KV bytes per block"]],
  "Pool and waste, from the trace");
  const grid = chartBlock("Grid of physical KV blocks; colour shows which request owns a block, the label its logical index and fill");
  const waste = chartBlock("Line chart per step: token slots that hold K/V, slots allocated by the paged cache, and slots a contiguous reservation would hold");
  const tables = el("table", {}, el("caption", { text: "Block tables: logical block → physical block, per request" }),
    el("thead", {}, el("tr", {}, ...["Request", "Tokens stored", "Block table", "Output so far"].map((t) => el("th", { scope: "col", text: t })))),
    el("tbody"));
  const log = el("p", { class: "ilab-calc__summary", "aria-live": "polite" });
  const why = whyNote();

  let Plotly = null;
  let s = null;

  const shell = demoShell(root, config, {
    title: "Paged attention",
    fields: [prompts.label, newTok.label, blockSize.label, numBlocks.label, every.label],
    getParams() {
      const lines = prompts.input.value.split("\n").filter((l) => l.trim());
      if (!lines.length || lines.length > maxPrompts) throw new Error(`Give 1 to ${maxPrompts} prompts, one per line.`);
      return { prompts: prompts.input.value,
        max_new_tokens: intIn(newTok.input, "New tokens", sp.min("max_new_tokens"), sp.max("max_new_tokens")),
        block_size: Number(blockSize.input.value),
        num_blocks: intIn(numBlocks.input, "Blocks", sp.min("num_blocks"), sp.max("num_blocks")),
        arrival_every: intIn(every.input, "Arrival spacing", sp.min("arrival_every"), sp.max("arrival_every")) };
    },
    onStart(params) {
      fillForm({ prompts: prompts.input, max_new_tokens: newTok.input, block_size: blockSize.input, num_blocks: numBlocks.input,
        arrival_every: every.input }, params); // a resumed run's own settings
      s = { bs: 8, nb: 24, owner: {}, cached: new Set(), reqs: {}, order: [], steps: [], preempt: 0 };
      tables.querySelector("tbody").replaceChildren();
      log.textContent = "";
      showWhy(why, "");
      for (const k of ["step", "blocks", "paged", "contig", "preempt", "per"]) out.set(k, "–");
    },
    onEvent(ev) {
      if (ev.type === "batch_run_started") {
        s.bs = ev.block_size; s.nb = ev.num_blocks;
        out.set("preempt", "0");
        out.set("per", `${fixed(ev.kv_bytes_per_block / 1024, 0)} KiB (${ev.block_size} tokens × ${fixed(ev.kv_bytes_per_token / 1024, 1)} KiB)`);
        drawGrid();
      } else if (ev.type === "request_queued") {
        s.reqs[ev.request_id] = { id: ev.request_id, color: COLORS[s.order.length % COLORS.length], blocks: [],
          ctx: 0, text: "", prompt: ev.prompt_len, max: ev.max_new_tokens, state: "waiting" };
        s.order.push(ev.request_id);
      } else if (ev.type === "kv_block") {
        onBlock(ev);
      } else if (ev.type === "preemption") {
        s.preempt += 1;
        out.set("preempt", String(s.preempt));
        s.reqs[ev.request_id].state = "preempted";
        s.reqs[ev.request_id].ctx = 0;
        log.textContent = `Step ${ev.step}: out of blocks — ${ev.request_id} was preempted; its ${ev.blocks_freed} blocks were freed and its ${ev.tokens_to_recompute} tokens will be recomputed.`;
      } else if (ev.type === "batch_step") {
        onStep(ev);
      } else if (ev.type === "request_finished") {
        const r = s.reqs[ev.request_id];
        r.state = "finished";
        r.text = ev.text;
        drawTables();
      } else if (ev.type === "batch_run_finished") {
        const m = ev.metrics || {};
        const stopped = (m.completed ?? 0) < s.order.length;
        log.textContent = `${stopped ? "Until the stop" : "Whole run"}: paged cache left ${fixed(m.kv_waste_pct, 1)}% of its allocated slots unused on average; ` +
          `reserving prompt + max new tokens contiguously would have left ${fixed(m.contiguous_request_max_waste_pct, 1)}% unused, ` +
          `and reserving the model's full context ${fixed(m.contiguous_model_max_waste_pct, 1)}%.`;
        showWhy(why, pagedNote(m, s.bs));
        showEndState();
      }
    },
  });
  shell.body.append(out.node, el("div", { class: "ilab-calc__charts" }, grid.figure, waste.figure), tables, log, why);
  shell.plotly.then((P) => {
    Plotly = P;
    if (!Plotly) return;
    Plotly.newPlot(grid.chart, [], gridLayout(4), PLOT_CONFIG);
    Plotly.newPlot(waste.chart, [], wasteLayout(), PLOT_CONFIG);
  });

  function onBlock(ev) {
    const r = ev.request_id ? s.reqs[ev.request_id] : null;
    if (ev.op === "allocated" || ev.op === "shared") {
      s.owner[ev.block] = { id: ev.request_id, idx: ev.logical_index, refs: ev.refcount };
      if (r) r.blocks[ev.logical_index] = ev.block;
      if (r) r.state = "running";
    } else if (ev.op === "freed") {
      if (ev.refcount === 0) delete s.owner[ev.block];
      if (r && ev.logical_index === 0) r.blocks = [];
    } else if (ev.op === "cached") {
      s.cached.add(ev.block);
    } else if (ev.op === "evicted") {
      s.cached.delete(ev.block);
    }
  }

  function onStep(ev) {
    for (const e of ev.entries) {
      const r = s.reqs[e.request_id];
      r.ctx = e.context_len;
      r.text += e.text;
    }
    s.steps.push(ev);
    const unusedPaged = ev.kv_slots_allocated - ev.kv_slots_filled;
    const unusedContig = ev.contiguous_slots_reserved - ev.kv_slots_filled;
    out.set("step", String(ev.step));
    out.set("blocks", `${ev.blocks_used} / ${ev.blocks_free}`);
    out.set("paged", `${ev.kv_slots_allocated}, ${unusedPaged} unused (${pct(unusedPaged, ev.kv_slots_allocated)})`);
    out.set("contig", `${ev.contiguous_slots_reserved}, ${unusedContig} unused (${pct(unusedContig, ev.contiguous_slots_reserved)})`);
    // As the batch ran: a request that finished in this step still counts (its blocks are freed just after).
    grid.summary.textContent = `During step ${ev.step}: ${ev.blocks_used} of ${s.nb} blocks hold K/V for ${count(ev.running, "running request")}; ` +
      `${ev.waiting} waiting. ${ev.kv_slots_filled} of ${ev.kv_slots_allocated} allocated token slots are filled.`;
    waste.summary.textContent = `Step ${ev.step}: ${ev.kv_slots_filled} slots filled; paged allocated ${ev.kv_slots_allocated}; ` +
      `a contiguous reservation would hold ${ev.contiguous_slots_reserved}.`;
    drawGrid();
    drawWaste();
    drawTables();
  }

  const count = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;

  /** The pool after the run, from the kv_block events that followed the last step (the frees). */
  function showEndState() {
    const used = Object.keys(s.owner).length;
    const left = s.order.filter((id) => s.reqs[id].state !== "finished").length;
    out.set("blocks", `${used} / ${s.nb - used}`);
    grid.summary.textContent = `After the run: ${used} of ${s.nb} blocks hold K/V; ` +
      (left ? `${count(left, "request")} did not finish.` : "every request finished and its blocks were freed.");
    drawGrid();
    drawTables();
  }

  const pct = (a, b) => (b > 0 ? `${((100 * a) / b).toFixed(0)}%` : "–");

  function fill(r, idx) {
    return Math.max(0, Math.min(s.bs, r.ctx - idx * s.bs));
  }

  function gridLayout(rows) {
    return { ...BASE_LAYOUT, title: { text: "Block pool (id = 8·row + col)" }, height: 130 + rows * 46,
      margin: { l: 50, r: 15, t: 50, b: 40 }, xaxis: { title: { text: "column" }, dtick: 1, range: [-0.6, 7.6], zeroline: false },
      yaxis: { title: { text: "row" }, autorange: "reversed", dtick: 1, zeroline: false } };
  }

  function drawGrid() {
    if (!Plotly || !s) return;
    const cols = 8;
    const rows = Math.ceil(s.nb / cols);
    const xs = [], ys = [], colors = [], texts = [], hovers = [];
    for (let b = 0; b < s.nb; b += 1) {
      const o = s.owner[b];
      xs.push(b % cols); ys.push(Math.floor(b / cols));
      if (o) {
        const r = s.reqs[o.id];
        const f = fill(r, o.idx);
        colors.push(r.color);
        texts.push(`${o.id}:${o.idx}`);
        hovers.push(`block ${b}: ${o.id} logical ${o.idx}, ${f}/${s.bs} slots filled${o.refs > 1 ? `, shared ×${o.refs}` : ""}`);
      } else {
        colors.push(s.cached.has(b) ? "#e5e7eb" : "#ffffff");
        texts.push(s.cached.has(b) ? "cached" : "");
        hovers.push(`block ${b}: free${s.cached.has(b) ? " (still holds a cached prefix)" : ""}`);
      }
    }
    Plotly.react(grid.chart, [{ type: "scatter", mode: "markers+text", x: xs, y: ys, text: texts, hovertext: hovers,
      hoverinfo: "text", textfont: { size: 10, color: "#111" },
      marker: { symbol: "square", size: 40, color: colors, line: { color: "#555", width: 1 }, opacity: 0.85 } }],
    gridLayout(rows), PLOT_CONFIG);
  }

  function wasteLayout() {
    return { ...BASE_LAYOUT, title: { text: "Token slots per step" },
      xaxis: { title: { text: "step" } }, yaxis: { title: { text: "token slots" }, rangemode: "tozero" },
      legend: { orientation: "h", y: -0.25 } };
  }

  function drawWaste() {
    if (!Plotly) return;
    const x = s.steps.map((e) => e.step);
    Plotly.react(waste.chart, [
      { x, y: s.steps.map((e) => e.kv_slots_filled), name: "filled (K/V stored)", mode: "lines+markers", line: { color: "#2ca02c" } },
      { x, y: s.steps.map((e) => e.kv_slots_allocated), name: "paged: allocated blocks", mode: "lines+markers", line: { color: "#1f77b4" } },
      { x, y: s.steps.map((e) => e.contiguous_slots_reserved), name: "contiguous: prompt + max new reserved", mode: "lines+markers",
        line: { color: "#d62728", dash: "dot" } },
    ], wasteLayout(), PLOT_CONFIG);
  }

  function drawTables() {
    const body = tables.querySelector("tbody");
    body.replaceChildren(...s.order.map((id) => {
      const r = s.reqs[id];
      const chips = r.blocks.length
        ? r.blocks.map((b, i) => `${i}→${b}`).join("  ")
        : (r.state === "finished" ? "(freed)" : r.state === "preempted" ? "(preempted: freed)" : "(waiting)");
      return el("tr", {}, el("th", { scope: "row", style: `border-left:6px solid ${r.color}`, text: id }),
        el("td", { text: `${r.ctx} (prompt ${r.prompt}, max ${r.prompt + r.max})` }),
        el("td", { style: "text-align:left;font-family:monospace", text: chips }),
        el("td", { style: "text-align:left", text: r.text }));
    }));
  }
  return shell;
}
