// Continuous vs static batching: the same requests run in both modes. A step timeline walks through every forward
// pass of both runs: per mode a Gantt chart (waiting, prefill, decode, finished-but-holding-a-slot) drawn up to the
// step shown, its column outlined, and the scheduler's waiting / running / finished queues at that step
// (queue-steps.js, from the trace alone). Beside it the batch occupancy per step; a table puts the
// step counts side by side with the time to first token as the alternating repeats measured it (median and spread,
// comparison.js; a streamed run's own times share the worker with other runs, so the page shows none of them). All
// numbers come from the trace (batch_step, batch_run_finished, comparison).
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, el, fmtMs, numberField, selectField, fixed } from "../calculators/ui.js";
import { demoShell, intIn } from "./course-demo-kit.js";
import { batchingNote, showWhy, whyNote } from "./run-notes.js";
import { fillForm } from "./restore-form.js";
import { specParams } from "./spec-params.js";
import { clearComparison, comparisonBlock, drawComparison } from "./comparison.js";
import { BatchQueues, ganttUpTo } from "./queue-steps.js";
import { CELL_NAMES, GANTT_COLORS, queueLanes, stepShapes } from "./queue-lanes.js";

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/batching.py), embedded in the page.
  const sp = specParams(config);
  const maxRequests = sp.limit("workload", "max_requests");
  const maxTokens = sp.limit("workload", "max_tokens");
  const maxArrival = sp.limit("workload", "max_arrival");
  const wid = `ilab-wl-${Math.random().toString(36).slice(2, 8)}`;
  const workload = el("input", { id: wid, type: "text", value: sp.value("workload"), "aria-describedby": `${wid}-help`, size: "40" });
  const wlLabel = el("label", { for: wid, class: "ilab-calc__wide" }, "Requests: new tokens @ arrival step, comma-separated", workload,
    el("small", { id: `${wid}-help`, text: `Example: 12@0 is a request for 12 tokens arriving at step 0. Up to ${maxRequests} requests, ` +
      `1–${maxTokens} tokens, arrival 0–${maxArrival}.` }));
  const batch = numberField("Batch size (sequence slots)", sp.value("batch_size"), sp.range("batch_size", { step: 1 }));
  const modes = selectField("Modes", sp.choices("modes", { both: "Both, one after the other", continuous: "Continuous only", static: "Static only" }),
    sp.value("modes"));

  const gantt = chartBlock("Gantt chart per mode: one row per request, one column per step, coloured by the request's state");
  const occ = chartBlock("Line chart: sequences in the batch at each step, per mode, against the number of slots");
  const timing = chartBlock("Bar chart: mean time to first token, continuous and static, median of the alternating repeats with their spread");
  const results = el("table", {}, el("caption", { text: "Same requests, both modes (times: the alternating repeats' median and spread)" }),
    el("thead", {}, el("tr", {}, ...["Mode", "Steps", "Steps requests waited", "Mean end-to-end (steps)", "Mean slots busy", "Mean TTFT: median (spread)"]
      .map((t) => el("th", { scope: "col", text: t })))), el("tbody"));
  const note = el("p", { class: "ilab-calc__summary", "aria-live": "polite" });
  const why = whyNote();

  const queues = new BatchQueues();
  const lanes = queueLanes("The scheduler's queues at the step shown");
  let Plotly = null;
  let s = null;
  let shown = null; // [step, index, steps] last asked for: drawn again once Plotly has loaded
  let figure = null; // the Gantt of the steps so far: {steps, n, traces, layout, panels} (ganttFigure)

  const cmp = comparisonBlock(); // the two settings timed in alternating repeats, counters beside
  const shell = demoShell(root, config, {
    title: "Continuous vs static batching",
    fields: [wlLabel, batch.label, modes.label],
    getParams() {
      const parts = workload.value.split(",").map((x) => x.trim()).filter(Boolean);
      if (!parts.length || parts.length > maxRequests) throw new Error(`Give 1 to ${maxRequests} requests, like 8@0, 4@2.`);
      for (const part of parts) {
        const m = /^(\d+)\s*@\s*(\d+)$/.exec(part);
        if (!m || +m[1] < 1 || +m[1] > maxTokens || +m[2] > maxArrival) {
          throw new Error(`"${part}": write tokens@step with 1–${maxTokens} tokens and step 0–${maxArrival}.`);
        }
      }
      return { workload: workload.value, batch_size: intIn(batch.input, "Batch size", sp.min("batch_size"), sp.max("batch_size")),
        modes: modes.input.value };
    },
    steps: {
      fromEvent: (ev) => queues.fromEvent(ev),
      draw(step, index, steps) { shown = [step, index, steps]; drawStep(step, index, steps); },
      picture: () => [lanes.node, gantt.figure.parentElement], // the queues, the Gantt and the occupancy
    },
    onStart(params) {
      cmp.reset();
      queues.reset();
      shown = null;
      figure = null;
      lanes.show(null);
      if (Plotly) Plotly.react(gantt.chart, [], { ...BASE_LAYOUT, title: { text: "Who runs at each step" } }, PLOT_CONFIG);
      fillForm({ workload, batch_size: batch.input, modes: modes.input }, params); // a resumed run's own settings
      s = { runs: [], cur: null, comparison: null, timed: params.modes === "both" };
      clearComparison(Plotly, timing, s.timed ? undefined : "Only with both modes are the two timed, in alternating repeats.");
      results.querySelector("tbody").replaceChildren();
      note.textContent = "";
      showWhy(why, "");
      draw();
    },
    onEvent(ev) {
      cmp.onEvent(ev);
      if (ev.type === "comparison") {
        s.comparison = ev;
        showTiming(ev);
      } else if (ev.type === "batch_run_started") {
        s.cur = { mode: ev.mode, slots: ev.max_num_seqs, queued: {}, order: [], steps: [], done: {} };
        s.runs.push(s.cur);
      } else if (ev.type === "request_queued") {
        s.cur.queued[ev.request_id] = ev.step;
        s.cur.order.push(ev.request_id);
      } else if (ev.type === "batch_step") {
        s.cur.steps.push(ev);
        drawSoon();
      } else if (ev.type === "request_finished") {
        s.cur.done[ev.request_id] = ev;
      } else if (ev.type === "batch_run_finished") {
        const m = ev.metrics || {};
        const run = s.cur;
        const busy = run.steps.reduce((a, e) => a + e.entries.length, 0) / Math.max(1, run.steps.length);
        // End-to-end in steps, from the trace: arrival step to the step that produced the request's last token.
        const lastStep = {};
        const firstStep = {};
        for (const e of run.steps) {
          for (const x of e.entries) {
            if (x.finished) lastStep[x.request_id] = e.step;
            if (!(x.request_id in firstStep)) firstStep[x.request_id] = e.step;
          }
        }
        const spans = run.order.filter((id) => id in lastStep).map((id) => lastStep[id] - run.queued[id] + 1);
        const e2eSteps = spans.length ? spans.reduce((a, b) => a + b, 0) / spans.length : NaN;
        const waited = run.order.filter((id) => id in firstStep).reduce((a, id) => a + firstStep[id] - run.queued[id], 0);
        // A mode cut short by Stop still reports what it finished: its row says so, and no note compares it.
        const stopped = (m.completed ?? 0) < run.order.length;
        run.time = el("td", { text: stopped || !s.timed ? "–" : "…" });
        results.querySelector("tbody").append(el("tr", {}, el("th", { scope: "row", text: stopped ? `${run.mode} (stopped)` : run.mode }),
          el("td", { text: String(run.steps.length) }), el("td", { text: String(waited) }), el("td", { text: fixed(e2eSteps, 1) }),
          el("td", { text: `${fixed(busy, 2)} of ${run.slots}` }), run.time));
        run.measured = stopped ? null : { mode: run.mode, slots: run.slots, nSteps: run.steps.length, busy, meanE2eSteps: e2eSteps };
        if (s.runs.length === 2 && !stopped) {
          const [a, b] = s.runs;
          note.textContent = `Continuous batching took ${a.steps.length} steps, static ${b.steps.length}: static keeps finished requests' ` +
            "slots until its slowest member is done and admits no one in the meantime, so later arrivals wait longer.";
        }
      }
    },
  });

  function showTiming(ev) {
    for (const side of ev.sides) {
      const run = s.runs.find((r) => r.mode === side.label);
      if (run && run.time) run.time.textContent = `${fmtMs(side.median_s)} (${fmtMs(side.low_s)} – ${fmtMs(side.high_s)})`;
    }
    drawComparison(Plotly, timing, ev);
    showWhy(why, batchingNote(s.runs.map((r) => r.measured).filter(Boolean), ev));
  }

  shell.body.append(lanes.node, el("div", { class: "ilab-calc__charts" }, gantt.figure, occ.figure), results, note, why,
    el("div", { class: "ilab-calc__charts" }, timing.figure));
  shell.body.append(cmp.node);
  shell.plotly.then((P) => {
    Plotly = P;
    draw();
    if (shown) drawStep(...shown);
    if (s && s.comparison) drawComparison(Plotly, timing, s.comparison);
  });

  /** A step tick every 1, 2, 5 or 10 steps: about one label per 28 px of the chart's width. */
  function stepTick(nSteps) {
    const fit = Math.max(4, ((gantt.chart.clientWidth || 600) - 90) / 28);
    return [1, 2, 5, 10].find((d) => nSteps / d <= fit) || 20;
  }

  // At most one redraw per frame: a fast run streams steps quicker than Plotly redraws both charts, and drawing
  // each one would leave the page (and its Stop button) a backlog behind the run.
  let drawPending = false;
  function drawSoon() {
    if (drawPending) return;
    drawPending = true;
    requestAnimationFrame(() => { drawPending = false; draw(); });
  }

  /** The step timeline's picture: each mode's whole Gantt, covered after the step shown with that step's column
   * outlined, and the queues. The heatmaps are rebuilt only when steps arrive; scrubbing moves two shapes. */
  function drawStep(step, index, steps) {
    lanes.show(step);
    if (!Plotly) return;
    if (!figure || figure.steps !== steps || figure.n !== steps.length) figure = ganttFigure(steps);
    const shapes = figure.panels.flatMap((p, i) => stepShapes(i < step.run ? p.last + 1 : i > step.run ? -1 : step.step, p.last,
      `x${p.ax}`, `y${p.ax}`));
    Plotly.react(gantt.chart, figure.traces, { ...figure.layout, shapes }, PLOT_CONFIG);
    gantt.summary.textContent = figure.panels.filter((p, i) => i <= step.run).map((p, i) => {
      const at = i === step.run ? step : p.final;
      return `${p.mode}${i === step.run ? ` up to step ${step.step}` : ""}: ` + at.order.map((id, r) =>
        `${id} waited ${at.waited[r]}${at.heldFor[r] ? `, held a finished slot ${at.heldFor[r]}` : ""}`).join("; ");
    }).join(". ");
  }

  /** Every run's Gantt over all its steps so far, with the layout that stays while the student scrubs. */
  function ganttFigure(steps) {
    const finals = [];
    for (const st of steps) finals[st.run] = st;
    const traces = [];
    const panels = [];
    // Each panel: its request rows plus room for its tick labels; the title and colour key on top.
    const height = finals.reduce((h, st) => h + 24 * Math.max(3, st.order.length) + 60, 0);
    const layout = { ...BASE_LAYOUT, title: { text: "Who runs at each step" }, height: 150 + Math.max(160, height),
      grid: { rows: Math.max(1, finals.length), columns: 1, pattern: "independent", ygap: 0.3 }, showlegend: false };
    finals.forEach((final, i) => {
      const { z, x, rows } = ganttUpTo(steps, i, steps.length - 1);
      const ax = i === 0 ? "" : String(i + 1);
      traces.push({ type: "heatmap", z, x, y: rows, zmin: 0, zmax: 4, colorscale: GANTT_COLORS, showscale: false, xgap: 1, ygap: 2,
        xaxis: `x${ax}`, yaxis: `y${ax}`, text: z.map((r) => r.map((v) => CELL_NAMES[v])),
        hovertemplate: `${final.mode}: %{y}, step %{x}: %{text}<extra></extra>` });
      layout[`yaxis${ax}`] = { title: { text: final.mode }, autorange: "reversed" };
      const bottom = i === finals.length - 1; // one "step" title, under the bottom panel
      layout[`xaxis${ax}`] = { title: { text: bottom ? "step" : "" }, dtick: stepTick(x.length), range: [-0.5, x.length - 0.5] };
      panels.push({ last: x.length - 1, ax, mode: final.mode, final });
    });
    // The colour key sits between the title and the plot, never on the x-axis ticks.
    layout.margin = { ...BASE_LAYOUT.margin, t: 84 };
    layout.annotations = [{ text: "grey waiting · orange prefill · blue decode<br>pink finished but holding its slot · outlined: the step shown",
      xref: "paper", yref: "paper", x: 0, y: 1, yanchor: "bottom", yshift: 6, showarrow: false, xanchor: "left", align: "left",
      font: { size: 11 } }];
    return { steps, n: steps.length, traces, layout, panels };
  }

  /** The batch occupancy per step, whole runs (the timeline's steps are outlined on the Gantt). */
  function draw() {
    if (!Plotly || !s) return;
    const occTraces = s.runs.map((run) => ({ x: run.steps.map((e) => e.step), y: run.steps.map((e) => e.entries.length),
      name: `${run.mode}: sequences computed`, mode: "lines+markers", line: { shape: "hv" } }));
    if (s.runs.length) {
      const maxStep = Math.max(...s.runs.map((r) => (r.steps.length ? r.steps[r.steps.length - 1].step : 0)));
      occTraces.push({ x: [0, maxStep], y: [s.runs[0].slots, s.runs[0].slots], name: "slots", mode: "lines", line: { dash: "dot", color: "#555" } });
    }
    Plotly.react(occ.chart, occTraces, { ...BASE_LAYOUT, title: { text: "Batch occupancy per step" }, xaxis: { title: { text: "step" } },
      yaxis: { title: { text: "sequences in the forward pass" }, rangemode: "tozero", dtick: 1 }, legend: { orientation: "h", y: -0.25 } }, PLOT_CONFIG);
    occ.summary.textContent = s.runs.map((run) => `${run.mode}: ${run.steps.map((e) => e.entries.length).join(", ")}`).join(". ");
  }
  return shell;
}
