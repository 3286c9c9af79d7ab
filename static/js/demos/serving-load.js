// Serving-load demo: a handful of requests against the course engine, measured like a load test —
// tokens over time (throughput), a timeline per request (queueing, first token, decode), TTFT/TPOT/ITL
// percentiles, goodput against your latency targets, and a table comparing your runs. Then both modes are timed in
// alternating repeats (comparison.js): their medians and spreads, charted, with the forward passes that explain them.
// A step timeline walks through the engine's forward passes: a Gantt of requests × passes drawn up to the pass
// shown (its column outlined) and the scheduler's waiting / running / finished queues at that pass
// (queue-steps.js, from `load_step`'s request ids).
//   mount(root, config)   // config: {demo, params, spec, wsPath, plotlyUrl}
import { BASE_LAYOUT, PLOT_CONFIG, chartBlock, el, fmtMs, numberField, outputs, selectField, fixed } from "../calculators/ui.js";
import { fillForm } from "./restore-form.js";
import { demoShell, intIn, numIn } from "./course-demo-kit.js";
import { specParams } from "./spec-params.js";
import { clearComparison, comparisonBlock, drawComparison } from "./comparison.js";
import { CELL, LoadQueues, ganttUpTo } from "./queue-steps.js";
import { CELL_NAMES, GANTT_COLORS, queueLanes, stepShapes } from "./queue-lanes.js";

export function mount(root, config = {}) {
  // Defaults and limits come from the catalog's spec (demos/catalog/serving_load.py), embedded in the page.
  const sp = specParams(config);
  const nReq = numberField("Requests", sp.value("n_requests"), sp.range("n_requests", { step: 1 }));
  const newTok = numberField("Tokens per request", sp.value("max_new_tokens"), sp.range("max_new_tokens", { step: 1 }));
  const spacing = numberField("Seconds between arrivals", sp.value("spacing_s"), sp.range("spacing_s", { step: 0.1 }));
  const slots = numberField("Batch slots (sequences per forward pass)", sp.value("slots"), sp.range("slots", { step: 1 }));
  const mode = selectField("Scheduling", sp.choices("mode", { batched: "Batched (continuous batching)", sequential: "One request at a time" }),
    sp.value("mode"));
  const ttftSlo = numberField("TTFT target (s)", sp.value("ttft_slo_s"), sp.range("ttft_slo_s", { step: 0.05 }));
  const tpotSlo = numberField("TPOT target (s)", sp.value("tpot_slo_s"), sp.range("tpot_slo_s", { step: 0.01 }));
  const numberIn = (field, name, key) => numIn(field.input, name, sp.min(key), sp.max(key));
  const note = el("p", { class: "ilab-calc__summary", "aria-live": "polite" });
  const out = outputs([["mode", "How requests ran"], ["throughput", "Throughput"], ["goodput", "Goodput"], ["ttft", "TTFT p50 / p90"],
    ["tpot", "TPOT p50"], ["itl", "ITL p50 / p90"], ["wall", "Wall time"]], "Load test results");
  const tokens = chartBlock("Line chart: tokens generated so far against time; the slope is the throughput");
  const timeline = chartBlock("Timeline chart: for each request, waiting before its first token and then decoding");
  const modes = chartBlock("Bar chart: time until every request had its last token, batched and sequential, median of the alternating repeats with their spread");
  const cmp = comparisonBlock(); // both modes timed in alternating repeats, counters beside
  const requests = el("table", {}, el("caption", { text: "Requests of the latest run" }),
    el("thead", {}, el("tr", {}, ...["#", "Prompt", "TTFT", "TPOT", "Met both targets", "Output"].map((t) => el("th", { scope: "col", text: t })))), el("tbody"));
  const runs = el("table", {}, el("caption", { text: "Your runs, for comparison" }),
    el("thead", {}, el("tr", {}, ...["Run", "Mode", "Requests × tokens", "Throughput (tokens/s)", "Goodput (req/s)", "TTFT p50", "TPOT p50", "Timed both ways: batched / sequential (medians)"].map((t) => el("th", { scope: "col", text: t })))), el("tbody"));
  const passes = chartBlock("Gantt chart: one row per request, one column per forward pass, coloured by the request's state");
  const queues = new LoadQueues();
  const lanes = queueLanes("The scheduler's queues at the forward pass shown");
  let shown = null; // [step, index, steps] last asked for: drawn again once Plotly has loaded
  let figure = null; // the Gantt of the passes so far: {steps, n, traces, layout, z, rows, last} (passesFigure)
  let Plotly = null;
  let state = null;
  let runNo = 0;

  const shell = demoShell(root, config, {
    title: "Serving load",
    fields: [nReq.label, newTok.label, spacing.label, mode.label, slots.label, ttftSlo.label, tpotSlo.label],
    getParams() {
      return { n_requests: intIn(nReq.input, "Requests", sp.min("n_requests"), sp.max("n_requests")),
        max_new_tokens: intIn(newTok.input, "Tokens per request", sp.min("max_new_tokens"), sp.max("max_new_tokens")),
        spacing_s: numberIn(spacing, "Seconds between arrivals", "spacing_s"), mode: mode.input.value,
        slots: intIn(slots.input, "Batch slots", sp.min("slots"), sp.max("slots")),
        ttft_slo_s: numberIn(ttftSlo, "TTFT target", "ttft_slo_s"), tpot_slo_s: numberIn(tpotSlo, "TPOT target", "tpot_slo_s") };
    },
    steps: {
      fromEvent: (ev) => queues.fromEvent(ev),
      draw(step, index, steps) { shown = [step, index, steps]; drawStep(step, index, steps); },
      picture: () => [lanes.node, passes.figure.parentElement], // the queues and the Gantt of the passes
    },
    onStart(params) {
      queues.reset();
      shown = null;
      figure = null;
      lanes.show(null);
      fillForm({ n_requests: nReq.input, max_new_tokens: newTok.input, spacing_s: spacing.input, mode: mode.input,
        slots: slots.input, ttft_slo_s: ttftSlo.input, tpot_slo_s: tpotSlo.input }, params); // a resumed run's own settings
      runNo += 1;
      state = { params, t: [0], n: [0], reqs: [], row: null };
      cmp.reset();
      clearComparison(Plotly, modes);
      requests.querySelector("tbody").replaceChildren();
      for (const k of ["mode", "throughput", "goodput", "ttft", "tpot", "itl", "wall"]) out.set(k, "–");
      if (Plotly) {
        Plotly.react(tokens.chart, [], tokensLayout());
        Plotly.react(timeline.chart, [], timelineLayout());
        Plotly.react(passes.chart, [], { ...BASE_LAYOUT, title: { text: "Who runs at each forward pass" } }, PLOT_CONFIG);
      }
    },
    onEvent(ev) {
      cmp.onEvent(ev);
      if (ev.type === "comparison") {
        drawComparison(Plotly, modes, ev);
        state.comparison = ev;
        const median = (label) => ev.sides.find((x) => x.label === label);
        if (state.row) state.row.textContent = `${fmtMs(median("batched").median_s)} / ${fmtMs(median("sequential").median_s)}` +
          (ev.within_noise ? " (within noise)" : "");
      } else if (ev.type === "load_step") {
        state.t.push(ev.t_s);
        state.n.push(ev.tokens_total);
        tokens.summary.textContent = `${ev.tokens_total} tokens after ${fixed(ev.t_s, 1)} s; ${ev.n_running} running, ${ev.n_waiting} waiting.`;
        // New arrays each time: Plotly.react skips redrawing data arrays it has already seen.
        if (Plotly) Plotly.react(tokens.chart, [{ x: [...state.t], y: [...state.n], mode: "lines+markers", line: { shape: "hv" },
          hovertemplate: "%{x:.2f} s: %{y} tokens<extra></extra>" }], tokensLayout());
      } else if (ev.type === "load_request") {
        state.reqs.push(ev);
        requests.querySelector("tbody").append(el("tr", {}, el("td", { text: String(ev.request_id) }), el("td", { style: "text-align:left", text: ev.prompt }),
          el("td", { text: fmtMs(ev.ttft_s) }), el("td", { text: fmtMs(ev.tpot_s) }), el("td", { text: ev.met_slo ? "yes" : "no" }),
          el("td", { style: "text-align:left", text: ev.text })));
        drawTimeline();
      } else if (ev.type === "load_summary") {
        out.set("mode", ev.mode === "batched" ? "Batched" : "Sequential");
        note.textContent = `How the requests ran: ${ev.note}.`;
        out.set("throughput", `${fixed(ev.throughput_tokens_per_s, 2)} tokens/s`);
        out.set("goodput", `${fixed(ev.goodput_requests_per_s, 3)} req/s (of ${fixed(ev.requests_per_s, 3)})`);
        out.set("ttft", `${fmtMs(ev.ttft_p50_s)} / ${fmtMs(ev.ttft_p90_s)}`);
        out.set("tpot", fmtMs(ev.tpot_p50_s));
        out.set("itl", `${fmtMs(ev.itl_p50_s)} / ${fmtMs(ev.itl_p90_s)}`);
        out.set("wall", `${fixed(ev.wall_s, 2)} s`);
        state.row = el("td", { text: "…" });
        runs.querySelector("tbody").append(el("tr", {}, el("td", { text: String(runNo) }), el("td", { text: ev.mode }),
          el("td", { text: `${ev.n_requests} × ${state.params.max_new_tokens}` }), el("td", { text: fixed(ev.throughput_tokens_per_s, 2) }),
          el("td", { text: fixed(ev.goodput_requests_per_s, 3) }), el("td", { text: fmtMs(ev.ttft_p50_s) }), el("td", { text: fmtMs(ev.tpot_p50_s) }),
          state.row));
      }
    },
  });
  shell.body.append(lanes.node, el("div", { class: "ilab-calc__charts" }, passes.figure), out.node, note,
    el("div", { class: "ilab-calc__charts" }, tokens.figure, timeline.figure), requests, runs,
    el("div", { class: "ilab-calc__charts" }, modes.figure), cmp.node);
  shell.plotly.then((P) => {
    Plotly = P;
    if (!Plotly) return;
    Plotly.newPlot(tokens.chart, [], tokensLayout(), PLOT_CONFIG);
    Plotly.newPlot(timeline.chart, [], timelineLayout(), PLOT_CONFIG);
    if (state && state.comparison) drawComparison(Plotly, modes, state.comparison);
    if (shown) drawStep(...shown);
  });

  /** The step timeline's picture: the Gantt of every forward pass so far, covered after the pass shown with that
   * pass's column outlined, and the queues. The heatmap is rebuilt only when passes arrive; scrubbing moves shapes. */
  function drawStep(step, index, steps) {
    lanes.show(step, (id) => `#${id}`);
    if (!Plotly) return;
    if (!figure || figure.steps !== steps || figure.n !== steps.length) figure = passesFigure(steps);
    Plotly.react(passes.chart, figure.traces, { ...figure.layout, shapes: stepShapes(step.step, figure.last) }, PLOT_CONFIG);
    passes.summary.textContent = `Up to pass ${step.step}: ` + figure.rows.map((id, r) => {
      const row = figure.z[r].slice(0, step.step + 1);
      return `#${id} waited ${row.filter((v) => v === CELL.waiting).length} passes, ran ${row.filter((v) => v === CELL.prefill || v === CELL.decode).length}`;
    }).join("; ") + ".";
  }

  function passesFigure(steps) {
    const { z, x, rows } = ganttUpTo(steps, undefined, steps.length - 1);
    const traces = [{ type: "heatmap", z, x, y: rows.map((id) => `#${id}`), zmin: 0, zmax: 4, colorscale: GANTT_COLORS, showscale: false,
      xgap: 1, ygap: 2, text: z.map((r) => r.map((v) => CELL_NAMES[v])), hovertemplate: "%{y}, pass %{x}: %{text}<extra></extra>" }];
    const layout = { ...BASE_LAYOUT, title: { text: "Who runs at each forward pass" }, height: 150 + 26 * Math.max(3, rows.length),
      margin: { ...BASE_LAYOUT.margin, t: 84 }, showlegend: false,
      xaxis: { title: { text: "forward pass" }, range: [-0.5, x.length - 0.5], dtick: x.length > 40 ? 10 : x.length > 16 ? 5 : 1 },
      yaxis: { title: { text: "request" }, autorange: "reversed" },
      annotations: [{ text: "grey waiting · orange prefill · blue decode · outlined: the pass shown", xref: "paper", yref: "paper",
        x: 0, y: 1, yanchor: "bottom", yshift: 6, showarrow: false, xanchor: "left", align: "left", font: { size: 11 } }] };
    return { steps, n: steps.length, traces, layout, z, rows, last: x.length - 1 };
  }

  function tokensLayout() {
    return { ...BASE_LAYOUT, title: { text: "Tokens generated over time" }, xaxis: { title: { text: "seconds since the first arrival" } },
      yaxis: { title: { text: "tokens (all requests)" }, rangemode: "tozero" } };
  }
  function timelineLayout() {
    return { ...BASE_LAYOUT, title: { text: "Per request: wait, then decode" }, barmode: "stack",
      xaxis: { title: { text: "seconds" } }, yaxis: { title: { text: "request" }, autorange: "reversed" }, showlegend: false };
  }
  function drawTimeline() {
    const rs = [...state.reqs].sort((a, b) => a.request_id - b.request_id);
    timeline.summary.textContent = rs.map((r) => `request ${r.request_id}: arrived ${fixed(r.arrival_s, 1)} s, first token ` +
      `${fixed(r.first_token_s, 1)} s, done ${fixed(r.end_s, 1)} s`).join("; ") + ".";
    if (!Plotly) return;
    const y = rs.map((r) => `#${r.request_id}`);
    Plotly.react(timeline.chart, [
      { type: "bar", orientation: "h", y, x: rs.map((r) => r.arrival_s), marker: { color: "rgba(0,0,0,0)" }, hoverinfo: "skip" },
      { type: "bar", orientation: "h", y, x: rs.map((r) => r.first_token_s - r.arrival_s), marker: { color: "#bbbbbb" },
        hovertemplate: "%{y}: TTFT %{x:.2f} s<extra></extra>" },
      { type: "bar", orientation: "h", y, x: rs.map((r) => r.end_s - r.first_token_s), marker: { color: "#1f77b4" },
        hovertemplate: "%{y}: decoding %{x:.2f} s<extra></extra>" },
    ], timelineLayout(), PLOT_CONFIG);
  }
  return shell;
}
