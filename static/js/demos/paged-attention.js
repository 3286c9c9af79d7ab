// Paged-attention demo: the physical KV block pool filling as requests decode together, each request's
// block table, and — from the same run's numbers — what contiguous per-request reservations would hold.
// Everything drawn comes from the trace: kv_block events (allocated/shared/freed/cached/evicted) rebuild
// the tables; batch_step events give fill levels and the slot counts. A step timeline walks the run one
// batched forward at a time (paged-steps.js turns the events into steps): the pool grid outlines the blocks
// allocated, shared, freed or preempted since the step before, and the caption says so.
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, el, numberField, outputs, selectField, fixed } from "../calculators/ui.js";
import { demoShell, intIn, promptField } from "./course-demo-kit.js";
import { pagedNote, showWhy, whyNote } from "./run-notes.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";
import { pagedSteps } from "./paged-steps.js";


const STYLE_ID = "ilab-paged-style";
const CSS = `
.ilab-paged__table { text-align: left; font-family: monospace; }
.ilab-paged__table span { display: inline-block; margin: 0 .35rem .1rem 0; padding: 0 .2rem; border-radius: 3px; }
.ilab-paged__table span[data-op=allocated] { outline: 2px solid #111; font-weight: bold; }
.ilab-paged__table span[data-op=shared] { outline: 2px solid #d97706; font-weight: bold; }
.ilab-paged__slots { position: relative; }
.ilab-paged__now { position: absolute; width: 0; border-left: 2px dotted #6b7280; pointer-events: none; }
`;

function injectPagedStyle() {
  if (document.getElementById(STYLE_ID)) return;
  document.head.append(el("style", { id: STYLE_ID, text: CSS }));
}

export function mount(root, config = {}) {
  injectPagedStyle();
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
  // This step on the slot chart: a line laid over the plot, moved without redrawing the chart while scrubbing.
  const now = el("div", { class: "ilab-paged__now", "data-testid": "slots-now", hidden: true });
  waste.figure.classList.add("ilab-paged__slots");
  waste.figure.append(now);
  const log = el("p", { class: "ilab-calc__summary", "aria-live": "polite" });
  const why = whyNote();

  let Plotly = null;
  let s = null; // the run so far: its stepper (paged-steps.js) and the figures the end of run reports
  let gridFrame = { nb: -1 }; // the cells' positions and the grid's layout: they change only with the pool's size
  let wasteDrawn = -1; // how many steps the slot chart's series hold

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
      s = { steps: pagedSteps(), bs: 8, nb: 24 };
      wasteDrawn = -1;
      now.hidden = true;
      tables.querySelector("tbody").replaceChildren();
      log.textContent = "";
      showWhy(why, "");
      for (const k of ["step", "blocks", "paged", "contig", "preempt", "per"]) out.set(k, "–");
    },
    onEvent(ev) {
      if (ev.type === "batch_run_started") {
        s.bs = ev.block_size; s.nb = ev.num_blocks;
        out.set("per", `${fixed(ev.kv_bytes_per_block / 1024, 0)} KiB (${ev.block_size} tokens × ${fixed(ev.kv_bytes_per_token / 1024, 1)} KiB)`);
      } else if (ev.type === "batch_run_finished") {
        const m = ev.metrics || {};
        const stopped = (m.completed ?? 0) < s.steps.state.order.length;
        log.textContent = `${stopped ? "Until the stop" : "Whole run"}: paged cache left ${fixed(m.kv_waste_pct, 1)}% of its allocated slots unused on average; ` +
          `reserving prompt + max new tokens contiguously would have left ${fixed(m.contiguous_request_max_waste_pct, 1)}% unused, ` +
          `and reserving the model's full context ${fixed(m.contiguous_model_max_waste_pct, 1)}%.`;
        showWhy(why, pagedNote(m, s.bs));
      }
    },
    // One step per batched forward and one after the run (paged-steps.js); draw() paints live and replayed runs.
    steps: { fromEvent: (ev) => s.steps.fromEvent(ev), draw, picture: () => grid.figure.parentElement },
  });
  shell.body.append(out.node, el("div", { class: "ilab-calc__charts" }, grid.figure, waste.figure), tables, log, why);
  shell.plotly.then((P) => {
    Plotly = P;
    if (!Plotly) return;
    Plotly.newPlot(grid.chart, [], gridLayout(4), PLOT_CONFIG);
    Plotly.newPlot(waste.chart, [], wasteLayout(), PLOT_CONFIG);
    waste.chart.on("plotly_afterplot", placeNow); // a resize or a new series: the line follows its axis
    const shown = shell.timeline.log.current; // a step drawn before the charts existed
    if (shown) draw(shown);
  });

  const count = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;
  const pct = (a, b) => (b > 0 ? `${((100 * a) / b).toFixed(0)}%` : "–");

  /** Paint one step: the counters, the pool grid, the slot chart up to this step and the block tables. */
  function draw(step) {
    const st = step.stats;
    out.set("preempt", String(step.preemptions));
    out.set("blocks", `${step.used} / ${step.free}`);
    if (st) {
      const unusedPaged = st.kv_slots_allocated - st.kv_slots_filled;
      const unusedContig = st.contiguous_slots_reserved - st.kv_slots_filled;
      out.set("step", String(st.step));
      out.set("paged", `${st.kv_slots_allocated}, ${unusedPaged} unused (${pct(unusedPaged, st.kv_slots_allocated)})`);
      out.set("contig", `${st.contiguous_slots_reserved}, ${unusedContig} unused (${pct(unusedContig, st.contiguous_slots_reserved)})`);
      // As the batch ran: a request that finished in this step still counts (its blocks are freed just after).
      grid.summary.textContent = `During step ${st.step}: ${st.blocks_used} of ${s.nb} blocks hold K/V for ${count(st.running, "running request")}; ` +
        `${st.waiting} waiting. ${st.kv_slots_filled} of ${st.kv_slots_allocated} allocated token slots are filled.`;
      waste.summary.textContent = `Step ${st.step}: ${st.kv_slots_filled} slots filled; paged allocated ${st.kv_slots_allocated}; ` +
        `a contiguous reservation would hold ${st.contiguous_slots_reserved}.`;
    } else {
      out.set("step", "end");
      // No forward at the end: the slot counts are a step's (they kept the last step drawn, whichever the scrubber left).
      out.set("paged", "– (after the run)");
      out.set("contig", "– (after the run)");
      const left = step.tables.filter((r) => r.state !== "finished").length;
      grid.summary.textContent = `After the run: ${step.used} of ${s.nb} blocks hold K/V; ` +
        (left ? `${count(left, "request")} did not finish.` : "every request finished and its blocks were freed.");
    }
    drawGrid(step);
    drawWaste(step);
    drawTables(step);
  }

  function gridLayout(rows) {
    return { ...BASE_LAYOUT, title: { text: "Block pool (id = 8·row + col)" }, height: 130 + rows * 46,
      margin: { l: 50, r: 15, t: 50, b: 40 }, xaxis: { title: { text: "column" }, dtick: 1, range: [-0.6, 7.6], zeroline: false },
      yaxis: { title: { text: "row" }, autorange: "reversed", dtick: 1, zeroline: false } };
  }


  function drawGrid(step) {
    if (!Plotly) return;
    const c = step.cells;
    if (gridFrame.nb !== s.nb) {
      const cols = 8;
      const xs = [], ys = [];
      for (let b = 0; b < s.nb; b += 1) { xs.push(b % cols); ys.push(Math.floor(b / cols)); }
      gridFrame = { nb: s.nb, xs, ys, layout: gridLayout(Math.ceil(s.nb / cols)) };
    }
    Plotly.react(grid.chart, [{ type: "scatter", mode: "markers+text", x: gridFrame.xs, y: gridFrame.ys, text: c.text,
      hovertext: c.hover, hoverinfo: "text", textfont: { size: 10, color: "#111" }, customdata: c.state,
      meta: c.op, marker: { symbol: "square", size: 40, color: c.color, line: { color: c.lineColor, width: c.lineWidth },
        opacity: 0.85 } }], gridFrame.layout, PLOT_CONFIG);
  }

  function wasteLayout() {
    return { ...BASE_LAYOUT, title: { text: "Token slots per step" },
      xaxis: { title: { text: "step" } }, yaxis: { title: { text: "token slots" }, rangemode: "tozero" },
      legend: { orientation: "h", y: -0.25 } };
  }

  /** The slot counts of every step so far, with a line at this step: the series are redrawn only when a step
   * arrives (live); a scrub moves the line alone. */
  let nowAt = null;

  function drawWaste(step) {
    if (!Plotly) return;
    const series = s.steps.series;
    nowAt = series.length ? series[Math.max(0, step.series - 1)].step : null;
    if (wasteDrawn !== series.length) {
      wasteDrawn = series.length;
      const x = series.map((e) => e.step);
      Plotly.react(waste.chart, [
        { x, y: series.map((e) => e.filled), name: "filled (K/V stored)", mode: "lines+markers", line: { color: "#2ca02c" } },
        { x, y: series.map((e) => e.allocated), name: "paged: allocated blocks", mode: "lines+markers", line: { color: "#1f77b4" } },
        { x, y: series.map((e) => e.contiguous), name: "contiguous: prompt + max new reserved", mode: "lines+markers",
          line: { color: "#d62728", dash: "dot" } },
      ], wasteLayout(), PLOT_CONFIG);
    }
    placeNow();
  }

  function placeNow() {
    const fl = waste.chart._fullLayout;
    if (nowAt === null || !fl || !fl.xaxis) { now.hidden = true; return; }
    now.hidden = false;
    now.dataset.step = String(nowAt);
    now.style.left = `${waste.chart.offsetLeft + fl._size.l + fl.xaxis.l2p(nowAt)}px`;
    now.style.top = `${waste.chart.offsetTop + fl._size.t}px`;
    now.style.height = `${fl._size.h}px`;
  }

  const STATE_WORDS = { finished: "(freed)", stopped: "(stopped: freed)", preempted: "(preempted: freed)", waiting: "(waiting)" };

  /** Each request's block table at this step; entries this step gave it stand out. */
  function drawTables(step) {
    const body = tables.querySelector("tbody");
    body.replaceChildren(...step.tables.map((r) => {
      const chips = r.blocks.length
        ? r.blocks.map((b) => el("span", { "data-op": b.op || null,
          title: b.op ? `${b.op} at this step` : "", text: `${b.logical}→${b.block}` }))
        : [STATE_WORDS[r.state] || ""];
      return el("tr", { "data-request": r.id }, el("th", { scope: "row", style: `border-left:6px solid ${r.color}`, text: r.id }),
        el("td", { text: `${r.ctx} (prompt ${r.prompt}, max ${r.prompt + r.max})` }),
        el("td", { class: "ilab-paged__table" }, ...chips),
        el("td", { style: "text-align:left", text: r.text }));
    }));
  }
  return shell;
}
